//! `schedkit experiment tenants` (seed 004, 5.5): tenant groups at weights 1:1..1:5 and 1:2:3,
//! and a mid-run weight change.

use super::*;

pub fn tenants(a: TenantsArgs) -> Result<(), Failure> {
    let c = &a.common;
    let s = setup(c, Nanos::from_ms(100))?;
    let configs: Vec<Vec<u64>> = if c.quick {
        vec![vec![1, 3], vec![1, 2, 3]]
    } else {
        vec![
            vec![1, 1],
            vec![1, 2],
            vec![1, 3],
            vec![1, 4],
            vec![1, 5],
            vec![1, 2, 3],
        ]
    };
    let sim = [PolicyName::Tenants];
    let real = [PolicyName::Default, PolicyName::Tenants];
    let per_real = if s.real { real.len() * s.repeat } else { 0 };
    let prog =
        Progress::new(configs.len() * (sim.len() + per_real) + if s.real { s.repeat } else { 0 });
    let (h, period) = (s.horizon, s.period);
    let build_for = move |weights: Vec<u64>| {
        move |p: PolicyName, cores: usize| {
            let groups: Vec<(String, u64)> = weights
                .iter()
                .enumerate()
                .map(|(i, w)| (format!("vm{}", i + 1), *w))
                .collect();
            let procs: Vec<Busy> = (0..weights.len())
                .map(|i| busy(&format!("P{}", i + 1), "6", 0, Some(i)))
                .collect();
            scenario("tenants", p, period, cores, h, &procs, &groups)
        }
    };
    let mut rows = Vec::new();
    for w in &configs {
        let name = w
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(":");
        let b = build_for(w.clone());
        rows.extend(run_rows(
            &s,
            c,
            &name,
            &sim,
            &real,
            &b,
            By::Group,
            None,
            None,
            false,
            &prog,
        )?);
    }
    // The weight change: 1:1, then vm2 set to 3 by a real `schedkit ctl` at mid-run.
    let change_at = Nanos(s.horizon.0 / 2);
    let b = build_for(vec![1, 1]);
    let change = CtlChange {
        at: change_at,
        group: "vm2".into(),
        weight: 3,
    };
    let track = Track {
        entity: 1,
        change: change_at,
        target: 0.75,
    };
    rows.extend(run_rows(
        &s,
        c,
        "change",
        &[],
        &[PolicyName::Tenants],
        &b,
        By::Group,
        Some(track),
        Some(change),
        false,
        &prog,
    )?);
    prog.bar.finish_and_clear();
    let json = serde_json::json!({
        "experiment": "tenants", "horizon_s": s.horizon.0 as f64 / 1e9, "repeat": s.repeat,
        "period_ms": s.period.0 as f64 / 1e6, "nice_offset": c.nice, "tolerance_pp": TOL * 100.0,
        "change_at_s": change_at.0 as f64 / 1e9, "rows": rows_json(&rows),
    });
    let jp = write_out(c, "tenants", &json)?;
    let svg1 = c.out.join("tenants-shares.svg");
    let svg2 = c.out.join("tenants-change.svg");
    tenants_charts(&rows, &svg1, &svg2)?;
    if c.json {
        println!("{json}");
        return Ok(());
    }
    println!(
        "Tenants (seed 004, 5.5, Figs. 5.7-5.8): groups of one process with 6 busy threads, {} s, {} real CPU(s) / 2 simulated \
         cores, period {} ms; real: mean ± 95 % CI over {} repeat(s); share = % of the job's CPU time\n",
        s.horizon.0 as f64 / 1e9,
        s.cores_real,
        s.period.0 / 1_000_000,
        s.repeat
    );
    nice_note(c);
    let mut t = output::table(&[
        "weights",
        "engine policy",
        "vm1 %",
        "vm2 %",
        "vm3 %",
        "weight fractions %",
        "largest |dev| pp",
        "job % of machine",
    ]);
    for r in rows
        .iter()
        .filter(|r| r.config != "change" && !r.cells.is_empty())
    {
        let n = r.cells[0].share.len();
        let mut row = vec![r.config.clone(), r.label()];
        for k in 0..3 {
            row.push(if k < n {
                fmt_ci(&r.col(|x| x.norm_share[k] * 100.0), 2)
            } else {
                "-".into()
            });
        }
        let ws: Vec<u64> = r.config.split(':').filter_map(|x| x.parse().ok()).collect();
        let sum: u64 = ws.iter().sum();
        row.push(
            ws.iter()
                .map(|w| format!("{:.1}", *w as f64 / sum as f64 * 100.0))
                .collect::<Vec<_>>()
                .join(" / "),
        );
        row.push(fmt_ci(
            &r.col(|x| {
                x.norm_share
                    .iter()
                    .zip(&ws)
                    .map(|(s, w)| (s - *w as f64 / sum as f64).abs() * 100.0)
                    .fold(0.0, f64::max)
            }),
            2,
        ));
        row.push(fmt_ci(&r.col(|x| x.job_share * 100.0), 1));
        t.add_row(row);
    }
    println!("{t}");
    print!(
        "{}",
        unavailable_lines(&rows.iter().map(|r| r.clone_meta()).collect::<Vec<_>>())
    );
    println!(
        "\nWeight change: vm1:vm2 = 1:1, then `schedkit ctl set-weight vm2 3` (a separate process) at {:.1} s; \
         times from the client's start until vm2's share over 200 ms windows (each starting at its instant) is first within {:.0} points \
         of 75 %, and until it is and stays there for 1 s",
        change_at.0 as f64 / 1e9,
        TOL * 100.0
    );
    let mut t = output::table(&[
        "engine policy",
        "applied after s",
        "first within 2 pp s",
        "within 2 pp for good s",
        "two periods s",
    ]);
    let mut met = None;
    for r in rows
        .iter()
        .filter(|r| r.config == "change" && !r.cells.is_empty())
    {
        let rec: Vec<Option<f64>> = r.cells.iter().map(|x| x.recovery_s.flatten()).collect();
        let rec_s = recovery_text(rec.clone());
        let applied: Vec<f64> = r.cells.iter().filter_map(|x| x.applied_after_s).collect();
        t.add_row(vec![
            r.label(),
            if applied.is_empty() {
                "not recorded".into()
            } else {
                fmt_ci(&applied, 3)
            },
            recovery_text(
                r.cells
                    .iter()
                    .map(|x| x.first_in_band_s.flatten())
                    .collect(),
            ),
            rec_s,
            format!("{:.3}", 2.0 * s.period.0 as f64 / 1e9),
        ]);
        let med = median(
            &rec.iter()
                .map(|x| x.unwrap_or(f64::INFINITY))
                .collect::<Vec<_>>(),
        );
        let first = median(
            &r.cells
                .iter()
                .map(|x| x.first_in_band_s.flatten().unwrap_or(f64::INFINITY))
                .collect::<Vec<_>>(),
        );
        met = Some((med <= 2.0 * s.period.0 as f64 / 1e9, med, first));
    }
    println!("{t}");
    println!("\nTargets (medians of the real runs):");
    match rows
        .iter()
        .filter(|r| {
            r.engine == "real"
                && r.policy == "tenants"
                && r.config != "change"
                && !r.cells.is_empty()
        })
        .map(|r| {
            let ws: Vec<u64> = r.config.split(':').filter_map(|x| x.parse().ok()).collect();
            let sum: u64 = ws.iter().sum();
            median(&r.col(|x| {
                x.norm_share
                    .iter()
                    .zip(&ws)
                    .map(|(s, w)| (s - *w as f64 / sum as f64).abs() * 100.0)
                    .fold(0.0, f64::max)
            }))
        })
        .reduce(f64::max)
    {
        Some(d) => println!(
            "  tenants: every group within 2 pp of its weight's fraction: {} (largest {d:.2} pp)",
            ok_word(d <= 2.0)
        ),
        None => {
            println!("  tenants: not measured (not available in the real engine, or --sim-only)")
        }
    }
    match met {
        Some((m, v, first)) => println!(
            "  tenants: new share within two periods of the change (and kept 1 s): {} ({v:.3} s; first within 2 pp after {first:.3} s)",
            ok_word(m)
        ),
        None => println!(
            "  tenants: weight change not measured (tenants or `schedkit ctl` not available, or --sim-only)"
        ),
    }
    println!(
        "\nwrote {}, {} and {}",
        jp.display(),
        svg1.display(),
        svg2.display()
    );
    Ok(())
}

pub(super) fn tenants_charts(rows: &[Row], shares: &Path, change: &Path) -> Result<(), Failure> {
    // Figs. 5.7-5.8: each group's share beside its weight's fraction (the black tick), one
    // bar group per (configuration, group), one bar per engine and policy.
    let done: Vec<&Row> = rows
        .iter()
        .filter(|r| r.config != "change" && !r.cells.is_empty())
        .collect();
    let mut configs: Vec<String> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for r in &done {
        if !configs.contains(&r.config) {
            configs.push(r.config.clone());
        }
        if !labels.contains(&r.label()) {
            labels.push(r.label());
        }
    }
    let mut cats = Vec::new();
    let mut ideal = Vec::new();
    for c in &configs {
        let ws: Vec<u64> = c.split(':').filter_map(|x| x.parse().ok()).collect();
        let sum: u64 = ws.iter().sum();
        for (k, w) in ws.iter().enumerate() {
            cats.push(format!("{c} vm{}", k + 1));
            ideal.push(*w as f64 / sum as f64 * 100.0);
        }
    }
    let mut bc = BarChart::new(
        "Tenants: each group's CPU share beside its weight's fraction (mean, 95 % CI)",
        "weights and group",
        Axis::new("group's share of the job's CPU time", "%"),
        cats,
    );
    for l in &labels {
        let mut m = Vec::new();
        let mut e = Vec::new();
        for c in &configs {
            let row = done.iter().find(|r| &r.config == c && &r.label() == l);
            let n = c.split(':').count();
            for k in 0..n {
                let (mm, ci) =
                    row.map_or((0.0, 0.0), |r| mean_ci(&r.col(|x| x.norm_share[k] * 100.0)));
                m.push(mm);
                e.push((mm - ci, mm + ci));
            }
        }
        bc.series(BarSeries::new(l, m).with_errors(e));
    }
    bc.reference("weight fraction", ideal);
    let lc = bc;
    write_svg(shares, lc.to_svg(1300.0, 560.0))?;
    let mut lc = LineChart::new(
        "Tenants: vm2's weight goes from 1 to 3 mid-run (schedkit ctl); vm2's share in 200 ms windows",
        Axis::new("time since start", "s"),
        Axis::new("vm2's share of the job's CPU time", "%"),
    );
    let mut any = false;
    for r in rows
        .iter()
        .filter(|r| r.config == "change" && !r.cells.is_empty())
    {
        for (i, x) in r.cells.iter().enumerate() {
            lc.series(Series::new(
                &format!("{} run {}", r.label(), i + 1),
                x.timeline.clone(),
            ));
            any = true;
        }
    }
    if !any {
        lc.series(Series::new(
            "not measured (tenants not available in the real engine)",
            Vec::new(),
        ));
    }
    write_svg(change, lc.to_svg(1000.0, 480.0))?;
    Ok(())
}
