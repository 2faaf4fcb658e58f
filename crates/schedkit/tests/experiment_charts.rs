//! Every chart the experiments write, from `--quick --sim-only` runs (the experiments that
//! have a simulated part), read back as SVG: a title, labelled axes, a titled legend where
//! there is data, and no empty plot without a "no data" note. The experiments that only run
//! real work refuse `--sim-only` with exit 2 and a reason, and the shared output flags are
//! accepted by every experiment. The Gantt charts of `sim --gantt` and the chart of
//! `compare --chart` have titled legends too.

mod common;

use common::schedkit_in as schedkit;
use std::path::Path;

/// The `<text>` elements of an SVG: (attributes, content).
fn texts(svg: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text ") {
        let tag_end = rest[i..].find('>').expect("tag closes") + i;
        let close = rest[tag_end..].find("</text>").expect("text closes") + tag_end;
        out.push((&rest[i + 6..tag_end], &rest[tag_end + 1..close]));
        rest = &rest[close..];
    }
    out
}

/// The titles of a chart's legends: bold 12 px text ending in a colon.
fn legend_titles(svg: &str) -> Vec<&str> {
    texts(svg)
        .into_iter()
        .filter(|(a, c)| {
            a.contains(r#"font-weight="bold""#)
                && a.contains(r#"font-size="12""#)
                && c.ends_with(':')
        })
        .map(|(_, c)| c)
        .collect()
}

/// Checks one experiment chart; returns what is wrong with it.
fn chart_defects(svg: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let t = texts(svg);
    let bold = |a: &str| a.contains(r#"font-weight="bold""#);
    // The title: bold text of 16 px or more (a panel grid has its own title above the panels).
    if !t.iter().any(|(a, c)| {
        bold(a)
            && (a.contains(r#"font-size="16""#) || a.contains(r#"font-size="18""#))
            && !c.is_empty()
    }) {
        bad.push("no title".into());
    }
    // Axis labels: the y label is the text turned by -90 degrees, the x label 13 px text.
    let labels = |rotated: bool| {
        t.iter()
            .filter(|(a, c)| {
                a.contains(r#"font-size="13""#)
                    && a.contains("rotate(-90") == rotated
                    && !c.trim().is_empty()
            })
            .count()
    };
    if labels(true) == 0 {
        bad.push("no y-axis label".into());
    }
    if labels(false) == 0 {
        bad.push("no x-axis label".into());
    }
    // Data: bars carry tooltips, lines are polylines or markers.
    let has_data = svg.contains("><title>") || svg.contains("<polyline") || svg.contains("<circle");
    let no_data_note = t.iter().any(|(_, c)| *c == "no data");
    if !has_data && !no_data_note {
        bad.push("an empty plot without a \"no data\" note".into());
    }
    if has_data {
        // Legend entries are 14 x 11 swatches or short reference lines; their title is bold
        // 12 px text ending in a colon.
        let entries = svg.matches(r#"width="14" height="11""#).count();
        if entries == 0 {
            bad.push("data but no legend".into());
        }
        if entries > 1 && legend_titles(svg).is_empty() {
            bad.push("a legend without a title".into());
        }
    }
    bad
}

/// Renders `svg` to PNG with rsvg-convert when it is installed (a chart a renderer rejects is
/// as broken as an empty one).
fn renders(path: &Path) {
    match std::process::Command::new("rsvg-convert")
        .arg("-o")
        .arg(path.with_extension("png"))
        .arg(path)
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "{}: rsvg-convert failed",
            path.display()
        ),
        Err(_) => eprintln!("rsvg-convert not installed: skipping the PNG rendering check"),
    }
}

/// Runs `experiment NAME --quick --sim-only --out DIR ARGS`, and checks every SVG it wrote.
fn check_experiment(name: &str, args: &[&str], expect: &[&str]) {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let mut all = vec![
        "experiment",
        name,
        "--quick",
        "--sim-only",
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend(args);
    let o = schedkit(&all, d.path());
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut svgs: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    svgs.sort();
    let names: Vec<String> = svgs
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for e in expect {
        assert!(
            names.iter().any(|n| n == e),
            "{name}: {e} missing in {names:?}"
        );
    }
    for p in &svgs {
        let svg = std::fs::read_to_string(p).unwrap();
        let bad = chart_defects(&svg);
        assert!(bad.is_empty(), "{}: {bad:?}", p.display());
        renders(p);
    }
}

#[test]
fn greedy_charts_are_labelled_and_say_no_data_for_the_real_only_change() {
    check_experiment("greedy", &[], &["greedy-shares.svg", "greedy-change.svg"]);
    // The change runs on real cores only: its chart and its table say so rather than stay
    // empty, and the shares chart claims only the engine that ran, without error caps on a
    // deterministic run.
    let d = tempfile::tempdir().unwrap();
    let o = schedkit(
        &[
            "experiment",
            "greedy",
            "--quick",
            "--sim-only",
            "--out",
            ".",
        ],
        d.path(),
    );
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("no rows: the thread-count change runs on real cores only"),
        "{text}"
    );
    let change = std::fs::read_to_string(d.path().join("greedy-change.svg")).unwrap();
    assert!(change.contains(">no data<") && change.contains("real cores only"));
    let shares = std::fs::read_to_string(d.path().join("greedy-shares.svg")).unwrap();
    assert!(
        shares.contains("CPU share per process, simulated<"),
        "title"
    );
    assert!(!shares.contains("real and simulated"));
    assert!(
        !shares.contains(r##"stroke="#222222" stroke-width="1.2""##),
        "error caps"
    );
}

#[test]
fn global_fairness_charts_are_labelled() {
    check_experiment(
        "global-fairness",
        &[],
        &["global-fairness-lag.svg", "global-fairness-error.svg"],
    );
}

#[test]
fn tenants_charts_are_labelled() {
    check_experiment(
        "tenants",
        &[],
        &["tenants-shares.svg", "tenants-change.svg"],
    );
}

#[test]
fn gang_charts_are_labelled_and_slices_on_a_log_axis() {
    let d = tempfile::tempdir().unwrap();
    check_experiment("gang", &[], &["gang-sim.svg"]);
    let o = schedkit(
        &[
            "experiment",
            "gang",
            "--quick",
            "--sim-only",
            "--json",
            "--out",
            ".",
        ],
        d.path(),
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
    assert!(j["sim"].as_array().is_some_and(|r| !r.is_empty()));
    let svg = std::fs::read_to_string(d.path().join("gang-sim.svg")).unwrap();
    // A log axis labels the decades 10, 100, 1000 (a linear one 0, 200, 400, ...).
    for tick in [">10<", ">100<", ">1000<"] {
        assert!(svg.contains(tick), "tick {tick}");
    }
    assert!(!svg.contains(">400<"));
}

#[test]
fn paws_charts_are_labelled_and_zero_bars_say_0() {
    check_experiment("paws", &[], &["paws-migrations.svg", "paws-switches.svg"]);
    let d = tempfile::tempdir().unwrap();
    let o = schedkit(
        &["experiment", "paws", "--quick", "--sim-only", "--out", "."],
        d.path(),
    );
    assert!(o.status.success());
    // pedf never migrates: its bars are zero and labelled so.
    let svg = std::fs::read_to_string(d.path().join("paws-migrations.svg")).unwrap();
    assert!(svg.contains("pedf: 0.000"), "pedf bars");
    assert!(svg.contains(">0</text>"), "zero label");
}

#[test]
fn real_only_experiments_refuse_sim_only_and_unused_flags_are_refused() {
    let d = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (vec!["experiment", "exclusive", "--sim-only"], "--sim-only"),
        (
            vec!["experiment", "fibers-gauss", "--sim-only"],
            "--sim-only",
        ),
        (vec!["experiment", "fidelity", "--sim-only"], "--sim-only"),
        (
            vec!["experiment", "paws", "--sim-only", "--repeat", "2"],
            "--repeat",
        ),
    ] {
        let o = schedkit(&args, d.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle) && err.contains("experiment"),
            "{args:?}: {err}"
        );
    }
    // Nothing ran, so nothing was written.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}

#[test]
fn every_experiment_takes_the_shared_output_flags() {
    for name in [
        "fibers-gauss",
        "exclusive",
        "gang",
        "greedy",
        "global-fairness",
        "tenants",
        "paws",
        "fidelity",
    ] {
        let o = schedkit(&["experiment", name, "--help"], Path::new("."));
        let help = String::from_utf8_lossy(&o.stdout);
        for flag in [
            "--out <DIR>",
            "--json",
            "--sim-only",
            "--quick",
            "--repeat <N>",
        ] {
            assert!(help.contains(flag), "{name} --help lacks {flag}");
        }
    }
}

#[test]
fn gantt_and_compare_legends_are_titled() {
    let d = tempfile::tempdir().unwrap();
    let ex = |f: &str| common::root().join("examples").join(f);
    let q = ex("quickstart.toml");
    let dhall = ex("realtime/dhall.toml");
    let rr = ex("textbook/rr.toml");
    for (args, file, titles) in [
        (
            vec!["sim", q.to_str().unwrap(), "--gantt", "q.svg"],
            "q.svg",
            &["process:"][..],
        ),
        // Real-time: the tasks' colours, then the marks over them, each titled.
        (
            vec!["sim", dhall.to_str().unwrap(), "--gantt", "d.svg"],
            "d.svg",
            &["task:", "marks:"][..],
        ),
        (
            vec![
                "compare",
                rr.to_str().unwrap(),
                "--policies",
                "fcfs,rr",
                "--chart",
                "c.svg",
            ],
            "c.svg",
            &["policy:"][..],
        ),
    ] {
        let o = schedkit(&args, d.path());
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let path = d.path().join(file);
        let svg = std::fs::read_to_string(&path).unwrap();
        let found = legend_titles(&svg);
        for t in titles {
            assert!(
                found.contains(t),
                "{file}: legend titles {found:?}, want {t}"
            );
        }
        renders(&path);
    }
}
