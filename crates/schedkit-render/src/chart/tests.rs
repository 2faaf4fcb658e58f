//! The charts' tests: layout, determinism, escaping.

use super::*;

#[test]
fn ticks_are_nice_and_cover_the_range() {
    let (t, step) = nice_ticks(0.0, 26.0, 6);
    assert_eq!(step, 5.0);
    assert_eq!(t.first(), Some(&0.0));
    assert_eq!(t.last(), Some(&30.0));
    let (t, step) = nice_ticks(0.013, 0.087, 5);
    assert!((step - 0.02).abs() < 1e-12, "{step}");
    assert!(t[0] <= 0.013 && *t.last().unwrap() >= 0.087);
    assert_eq!(tick_label(0.04, 0.02), "0.04");
    assert_eq!(tick_label(2.5, 2.5), "2.5");
    assert_eq!(tick_label(10.0, 5.0), "10");
    // Degenerate ranges still give an axis.
    let (t, _) = nice_ticks(3.0, 3.0, 5);
    assert!(t.len() >= 2);
}

#[test]
fn log_ticks_cover_the_range_in_1_2_5_steps() {
    let t = log_ticks(0.041, 9.44);
    assert_eq!(t.first().copied(), Some(0.02));
    assert_eq!(t.last().copied(), Some(10.0));
    assert!(
        t.contains(&0.05) && t.contains(&0.5) && t.contains(&5.0),
        "{t:?}"
    );
    let labels: Vec<String> = t.iter().map(|v| log_tick_label(*v)).collect();
    assert_eq!(labels[..3], ["0.02", "0.05", "0.1"]);
    // Far from 1, powers of ten: a decimal label would print 1e-7 as "0".
    let far: Vec<String> = [1e-7, 2e-5, 1e-4, 1e6, 5e8]
        .iter()
        .map(|v| log_tick_label(*v))
        .collect();
    assert_eq!(far, ["1e-7", "2e-5", "0.0001", "1e6", "5e8"]);
    assert_eq!(
        log_ticks(32.0, 7936.0),
        [20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0]
    );
    // Nothing placeable (an empty chart's [0, 1]): one decade, not a runaway loop.
    assert_eq!(log_ticks(0.0, 1.0), [0.1, 0.2, 0.5, 1.0]);
    assert_eq!(log_ticks(0.0, 0.0), [1.0, 2.0, 5.0, 10.0]);
    // More than three decades: powers of ten only.
    assert_eq!(
        log_ticks(0.5, 20000.0),
        [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]
    );
}

#[test]
fn log_axes_leave_out_values_they_cannot_place() {
    let mut ch = LineChart::new(
        "log",
        Axis::new("threads", "").log(),
        Axis::new("time", "s").log(),
    );
    ch.series(Series::new(
        "a",
        vec![(0.0, 1.0), (32.0, 0.0), (128.0, 0.5), (496.0, 2.0)],
    ));
    let svg = ch.to_svg(500.0, 300.0);
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    // Only the two placeable points are drawn.
    assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
    // A log chart with nothing to place still draws its axes.
    let mut empty = LineChart::new("none", Axis::new("x", "").log(), Axis::new("y", "s").log());
    empty.series(Series::new("a", vec![(0.0, 0.0)]));
    let svg = empty.to_svg(500.0, 300.0);
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    assert_eq!(svg.matches("<circle").count(), 0, "{svg}");
}

#[test]
fn bars_on_a_log_axis_start_at_one() {
    // Ratios: 4x above the line at 1, 0.25x below it; a 0 (no place on the axis) sits at
    // the axis's lower end, and nothing is NaN or infinite.
    let mut ch = BarChart::new(
        "ratio",
        "case",
        Axis::new("sim / real", "x").log(),
        vec!["a".into(), "b".into(), "c".into()],
    );
    ch.series(BarSeries::new("m", vec![4.0, 0.25, 0.0]).with_errors(vec![
        (2.0, 8.0),
        (0.0, 0.5),
        (0.0, 0.0),
    ]));
    let svg = ch.to_svg(500.0, 300.0);
    assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
    let bars: Vec<(f64, f64)> = svg
        .split("<rect")
        .skip(1)
        .filter(|r| r.contains("<title>"))
        .map(|r| {
            let num = |k: &str| -> f64 {
                let i = r.find(&format!(" {k}=\"")).unwrap() + k.len() + 3;
                r[i..i + r[i..].find('"').unwrap()].parse().unwrap()
            };
            (num("y"), num("height"))
        })
        .collect();
    assert_eq!(bars.len(), 3, "{svg}");
    // The 4x bar ends where the 0.25x bar starts (both at 1), and they are as tall: a
    // factor of 4 either way is the same distance on a log axis.
    let one = bars[0].0 + bars[0].1;
    assert!((bars[1].0 - one).abs() < 0.01, "{bars:?}");
    assert!((bars[0].1 - bars[1].1).abs() < 0.01, "{bars:?}");
}

#[test]
fn time_units_follow_the_span() {
    assert_eq!(time_unit(26_000_000), (1e6, "ms"));
    assert_eq!(time_unit(10_000_000_000), (1e9, "s"));
    assert_eq!(time_unit(500_000), (1e3, "µs"));
}

#[test]
fn numbers_are_short_and_stable() {
    assert_eq!(num(1.0), "1");
    assert_eq!(num(1.256), "1.26");
    assert_eq!(num(-0.001), "0");
    assert_eq!(num(f64::NAN), "0");
}

#[test]
fn palette_is_stable_and_distinct() {
    let colors: Vec<String> = (0..80).map(color).collect();
    assert_eq!(colors[0], "#4e79a7");
    let unique: std::collections::BTreeSet<_> = colors.iter().collect();
    assert_eq!(unique.len(), colors.len());
    assert!(colors.iter().all(|c| c.len() == 7 && c.starts_with('#')));
}

#[test]
fn text_is_escaped() {
    assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

fn sample_charts() -> (LineChart, BarChart, StackedBarChart) {
    let mut l = LineChart::new(
        "Waiting time vs utilisation",
        Axis::new("utilisation", "%"),
        Axis::new("avg waiting", "ms"),
    );
    l.series(
        Series::new("cfs", vec![(10.0, 1.0), (50.0, 2.5), (90.0, 7.0)]).with_errors(vec![
            (0.8, 1.2),
            (2.0, 3.0),
            (6.0, 8.5),
        ]),
    );
    l.series(Series::new(
        "twrs",
        vec![(10.0, 0.9), (50.0, 2.0), (90.0, 5.0)],
    ));
    let mut b = BarChart::new(
        "CPU share per process",
        "process",
        Axis::new("share", "%"),
        vec!["A".into(), "B".into(), "C <big>".into()],
    );
    b.series(BarSeries::new("cfs", vec![10.0, 20.0, 70.0]));
    b.series(
        BarSeries::new("twrs", vec![33.0, 33.0, 34.0]).with_errors(vec![
            (30.0, 36.0),
            (31.0, 35.0),
            (32.0, 36.0),
        ]),
    );
    b.reference("GPS", vec![33.3, 33.3, 33.3]);
    let mut s = StackedBarChart::new(
        "Share of the machine",
        Axis::new("CPU share", "%"),
        vec!["cfs".into(), "twrs".into()],
    );
    s.segment(Segment::new("A", vec![10.0, 33.0]));
    s.segment(Segment::new("B", vec![90.0, 67.0]));
    (l, b, s)
}

#[test]
fn charts_are_deterministic_well_formed_and_labelled() {
    let (l, b, s) = sample_charts();
    for (svg, needles) in [
        (
            l.to_svg(700.0, 420.0),
            vec![
                "Waiting time vs utilisation",
                "utilisation (%)",
                "avg waiting (ms)",
                ">cfs<",
                ">twrs<",
                "<polyline",
            ],
        ),
        (
            b.to_svg(700.0, 420.0),
            vec![
                "CPU share per process",
                "share (%)",
                ">process<",
                ">GPS<",
                "C &lt;big&gt;",
            ],
        ),
        (
            s.to_svg(700.0, 300.0),
            vec!["Share of the machine", "CPU share (%)", ">A<", ">B<"],
        ),
    ] {
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        for n in needles {
            assert!(svg.contains(n), "missing {n}");
        }
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
    let (l2, b2, s2) = sample_charts();
    assert_eq!(l.to_svg(700.0, 420.0), l2.to_svg(700.0, 420.0));
    assert_eq!(b.to_svg(700.0, 420.0), b2.to_svg(700.0, 420.0));
    assert_eq!(s.to_svg(700.0, 300.0), s2.to_svg(700.0, 300.0));
    let fig = side_by_side("Three panels", &[&l, &b, &s], 500.0, 400.0);
    assert!(fig.contains("width=\"1500\""));
    let col = grid("Stacked", &[&l, &b, &s], 1, 500.0, 400.0);
    assert!(col.contains("width=\"500\" height=\"1234\""));
}

#[test]
fn write_samples_when_asked() {
    // `SCHEDKIT_CHART_SAMPLES=dir cargo test -p schedkit chart` writes the sample charts
    // so they can be rendered to PNG and looked at.
    if let Ok(dir) = std::env::var("SCHEDKIT_CHART_SAMPLES") {
        let (l, b, s) = sample_charts();
        std::fs::write(format!("{dir}/line.svg"), l.to_svg(700.0, 420.0)).unwrap();
        std::fs::write(format!("{dir}/bar.svg"), b.to_svg(700.0, 420.0)).unwrap();
        std::fs::write(format!("{dir}/stacked.svg"), s.to_svg(700.0, 300.0)).unwrap();
        std::fs::write(
            format!("{dir}/panels.svg"),
            side_by_side("Three panels", &[&l, &b, &s], 500.0, 400.0),
        )
        .unwrap();
    }
}
