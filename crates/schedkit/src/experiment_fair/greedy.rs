//! `schedkit experiment greedy` (seed 004, 3.6): greedy processes of 1, 8 and 50 threads;
//! the thread-count change; the controllers' cost.

use super::*;

pub(super) const GREEDY_REAL: [PolicyName; 4] = [
    PolicyName::Default,
    PolicyName::ProcessFair,
    PolicyName::Pfs,
    PolicyName::Twrs,
];
pub(super) const GREEDY_SIM: [PolicyName; 4] = [
    PolicyName::Cfs,
    PolicyName::Pfs,
    PolicyName::Tfps,
    PolicyName::Twrs,
];

pub fn greedy(a: GreedyArgs) -> Result<(), Failure> {
    let c = &a.common;
    let s = setup(c, Nanos::from_ms(100))?;
    if a.c_threads == 0 || a.c_threads > 1000 {
        return Err(bad("--c-threads: between 1 and 1000".into()));
    }
    let change_at = Nanos(s.horizon.0 / 2);
    let (rows, cost_h) = greedy_runs(&a, &s, change_at)?;

    let json = serde_json::json!({
        "experiment": "greedy", "horizon_s": s.horizon.0 as f64 / 1e9, "repeat": s.repeat,
        "period_ms": s.period.0 as f64 / 1e6, "nice_offset": c.nice, "c_threads": a.c_threads,
        "change_at_s": change_at.0 as f64 / 1e9, "tolerance_pp": TOL * 100.0, "rows": rows_json(&rows),
    });
    let jp = write_out(c, "greedy", &json)?;
    let svg1 = c.out.join("greedy-shares.svg");
    let svg2 = c.out.join("greedy-change.svg");
    greedy_charts(&rows, &svg1, &svg2, a.c_threads)?;
    if c.json {
        println!("{json}");
        return Ok(());
    }
    print_steady(&a, &s, &rows);
    print_change(&a, &rows, change_at);
    print_cost(c, &rows, cost_h);
    print_targets(&rows);
    println!(
        "\nwrote {}, {} and {}",
        jp.display(),
        svg1.display(),
        svg2.display()
    );
    Ok(())
}

/// Runs every configuration: the steady state (simulated and real), the thread-count change
/// (real) and the controllers' cost (real). Returns the rows and the cost runs' length.
fn greedy_runs(a: &GreedyArgs, s: &Setup, change_at: Nanos) -> Result<(Vec<Row>, Nanos), Failure> {
    let c = &a.common;
    let n_real = if s.real { GREEDY_REAL.len() } else { 0 };
    let cost_policies: Vec<PolicyName> = vec![
        PolicyName::Default,
        PolicyName::ProcessFair,
        PolicyName::Pfs,
        PolicyName::Tfps,
        PolicyName::Twrs,
        PolicyName::GlobalFair,
    ];
    let n_cost = if s.real {
        cost_policies.len() * s.repeat
    } else {
        0
    };
    let prog = Progress::new(GREEDY_SIM.len() + n_real * s.repeat * 2 + n_cost);
    let (h, period) = (s.horizon, s.period);
    let ct = a.c_threads;
    let build = move |p: PolicyName, cores: usize| {
        scenario(
            "greedy",
            p,
            period,
            cores,
            h,
            &[
                busy("A", "1", 0, None),
                busy("B", "8", 0, None),
                busy("C", &ct.to_string(), 0, None),
            ],
            &[],
        )
    };
    let mut rows = run_rows(
        s,
        c,
        "steady",
        &GREEDY_SIM,
        &GREEDY_REAL,
        &build,
        By::Process,
        None,
        None,
        false,
        &prog,
    )?;
    // The thread-count change: C runs 1 thread, then `c_threads` from mid-run on.
    let plan = format!("1,{}@{}ms", a.c_threads, change_at.0 / 1_000_000);
    let build_change = move |p: PolicyName, cores: usize| {
        scenario(
            "greedy (C changes its thread count)",
            p,
            period,
            cores,
            h,
            &[
                busy("A", "1", 0, None),
                busy("B", "8", 0, None),
                busy("C", &plan, 0, None),
            ],
            &[],
        )
    };
    let track = Track {
        entity: 2,
        change: change_at,
        target: 1.0 / 3.0,
    };
    let change_rows = run_rows(
        s,
        c,
        "change",
        &[],
        &GREEDY_REAL,
        &build_change,
        By::Process,
        Some(track),
        None,
        false,
        &prog,
    )?;
    // Controller cost: 100 busy threads (4 processes of 25), each policy vs default.
    let cost_h = if c.quick {
        Nanos::from_secs(1)
    } else {
        Nanos::from_secs(5)
    };
    let build_cost = move |p: PolicyName, cores: usize| {
        scenario(
            "controller cost",
            p,
            Nanos::from_ms(100),
            cores,
            cost_h,
            &[
                busy("P1", "25", 0, None),
                busy("P2", "25", 0, None),
                busy("P3", "25", 0, None),
                busy("P4", "25", 0, None),
            ],
            &[],
        )
    };
    let cost_rows = run_rows(
        s,
        c,
        "cost",
        &[],
        &cost_policies,
        &build_cost,
        By::Process,
        None,
        None,
        false,
        &prog,
    )?;
    prog.bar.finish_and_clear();
    rows.extend(change_rows);
    rows.extend(cost_rows);
    Ok((rows, cost_h))
}

/// The steady-state table: shares, gaps, waiting and lag per engine and policy.
fn print_steady(a: &GreedyArgs, s: &Setup, rows: &[Row]) {
    let c = &a.common;
    println!(
        "Greedy processes (seed 004, 3.6): A = 1, B = 8, C = {} busy threads, {} s, {} real CPU(s) / 2 simulated cores, \
         period {} ms; real: mean ± 95 % CI over {} repeat(s); CPUU = % of the job's CPU time (the machine's, when nothing else runs); GPS = process-fair ideal\n",
        a.c_threads,
        s.horizon.0 as f64 / 1e9,
        s.cores_real,
        s.period.0 / 1_000_000,
        s.repeat
    );
    nice_note(c);
    let steady: Vec<&Row> = rows.iter().filter(|r| r.config == "steady").collect();
    let mut t = output::table(&[
        "engine policy",
        "CPUU(A) %",
        "CPUU(B) %",
        "CPUU(C) %",
        "G(C,A) pp",
        "G(C,B) pp",
        "avg wait ms A/B/C",
        "avg turnaround ms",
        "max |lag| ms",
        "mean % err",
        "job % of machine",
    ]);
    if let Some(r) = steady.iter().find(|r| !r.cells.is_empty()) {
        let ideal = &r.cells[0].ideal;
        let mut row = vec!["GPS".to_string()];
        row.extend(ideal.iter().map(|x| format!("{:.2}", x * 100.0)));
        row.push(format!("{:.2}", (ideal[2] - ideal[0]) * 100.0));
        row.push(format!("{:.2}", (ideal[2] - ideal[1]) * 100.0));
        row.extend(["", "", "0", "0", "100"].map(String::from));
        t.add_row(row);
    }
    for r in &steady {
        if r.cells.is_empty() {
            continue;
        }
        let mut row = vec![r.label()];
        for k in 0..3 {
            row.push(fmt_ci(&r.col(|x| x.norm_share[k] * 100.0), 2));
        }
        row.push(fmt_ci(
            &r.col(|x| (x.norm_share[2] - x.norm_share[0]) * 100.0),
            2,
        ));
        row.push(fmt_ci(
            &r.col(|x| (x.norm_share[2] - x.norm_share[1]) * 100.0),
            2,
        ));
        let w: Vec<String> = (0..3)
            .map(|k| format!("{:.0}", median(&r.col(|x| x.avg_waiting_ms[k]))))
            .collect();
        row.push(w.join("/"));
        let all_t: Vec<String> = (0..3)
            .map(|k| format!("{:.0}", median(&r.col(|x| x.avg_turnaround_ms[k]))))
            .collect();
        row.push(all_t.join("/"));
        row.push(fmt_ci(&r.col(|x| x.norm_max_lag_ms), 1));
        row.push(fmt_ci(&r.col(|x| pct_err(x).0), 2));
        row.push(fmt_ci(&r.col(|x| x.job_share * 100.0), 1));
        t.add_row(row);
    }
    println!("{t}");
    print!(
        "{}",
        unavailable_lines(&steady.iter().map(|r| (*r).clone_meta()).collect::<Vec<_>>())
    );
}

/// The thread-count change: C's share before and after, and how long it took to settle.
fn print_change(a: &GreedyArgs, rows: &[Row], change_at: Nanos) {
    println!(
        "\nThread-count change: C runs 1 thread, then {} from {:.1} s; recovery = time until C's share over 200 ms windows \
         is back within {:.0} points of its GPS share (33.3 %), or of its own share before the change, and stays there for 1 s; \
         before = median over the second quarter of the run, after = from 1 s after the change on",
        a.c_threads,
        change_at.0 as f64 / 1e9,
        TOL * 100.0
    );
    let mut t = output::table(&[
        "engine policy",
        "C before %",
        "C after %",
        "first within 2 pp of GPS s",
        "back to GPS share s",
        "back to own share s",
    ]);
    let change: Vec<&Row> = rows.iter().filter(|r| r.config == "change").collect();
    for r in &change {
        if r.cells.is_empty() {
            continue;
        }
        let pct = |v: Vec<f64>| {
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}", median(&v) * 100.0)
            }
        };
        t.add_row(vec![
            r.label(),
            pct(r.cells.iter().filter_map(|x| x.before_share).collect()),
            pct(r.cells.iter().filter_map(|x| x.after_share).collect()),
            recovery_text(
                r.cells
                    .iter()
                    .map(|x| x.first_in_band_s.flatten())
                    .collect(),
            ),
            recovery_text(r.cells.iter().map(|x| x.recovery_s.flatten()).collect()),
            recovery_text(r.cells.iter().map(|x| x.recovery_own_s.flatten()).collect()),
        ]);
    }
    println!("{t}");
    print!(
        "{}",
        unavailable_lines(&change.iter().map(|r| (*r).clone_meta()).collect::<Vec<_>>())
    );
}

/// The controllers' own CPU cost with 100 busy threads.
fn print_cost(c: &FairCommon, rows: &[Row], cost_h: Nanos) {
    let cost: Vec<&Row> = rows.iter().filter(|r| r.config == "cost").collect();
    if !cost.is_empty() {
        println!(
            "\nController cost: 4 processes x 25 busy threads (100), period 100 ms, {} s, in % of one core: the controller \
             loop and the sampler as the engine measures them (its thread's CPU clock around each tick and each sample; \
             --sample {}; mean period between samples), and all of schedkit between the first and the last sample. The \
             sampler only samples as often as it gets a CPU: under default, 100 busy nice-0 threads crowd it out, so its \
             figure is not a baseline",
            cost_h.0 / 1_000_000_000,
            c.sample
        );
        let mut t = output::table(&[
            "real policy",
            "controller %",
            "sampler %",
            "sample every ms",
            "schedkit %",
        ]);
        for r in &cost {
            if r.cells.is_empty() {
                continue;
            }
            let v = r.col(|x| x.own_cpu_pct.unwrap_or(f64::NAN));
            let ctl: Vec<f64> = r
                .cells
                .iter()
                .filter_map(|x| x.controller_cpu_pct)
                .collect();
            t.add_row(vec![
                r.policy.clone(),
                if ctl.is_empty() {
                    "-".into()
                } else {
                    fmt_ci(&ctl, 3)
                },
                fmt_ci(&r.col(|x| x.sampler_cpu_pct.unwrap_or(f64::NAN)), 3),
                fmt_ci(&r.col(|x| x.sample_mean_ms.unwrap_or(f64::NAN)), 2),
                fmt_ci(&v, 3),
            ]);
        }
        println!("{t}");
        print!(
            "{}",
            unavailable_lines(&cost.iter().map(|r| (*r).clone_meta()).collect::<Vec<_>>())
        );
    }
}

/// The targets of issue 6, checked on the medians of the real runs.
fn print_targets(rows: &[Row]) {
    let steady: Vec<&Row> = rows.iter().filter(|r| r.config == "steady").collect();
    let change: Vec<&Row> = rows.iter().filter(|r| r.config == "change").collect();
    let cost: Vec<&Row> = rows.iter().filter(|r| r.config == "cost").collect();
    println!("\nTargets (medians of the real runs):");
    let real = |p: &str| {
        steady
            .iter()
            .find(|r| r.engine == "real" && r.policy == p && !r.cells.is_empty())
    };
    match real("process-fair") {
        Some(r) => {
            let dev = r
                .cells
                .iter()
                .map(|x| {
                    x.norm_share
                        .iter()
                        .map(|s| (s - 1.0 / 3.0).abs())
                        .fold(0.0, f64::max)
                })
                .collect::<Vec<_>>();
            let m = median(&dev) * 100.0;
            println!("  process-fair: every process within 2 pp of 1/3: {} (largest deviation {m:.2} pp)", ok_word(m <= 2.0));
        }
        None => println!(
            "  process-fair: not measured (not available in the real engine, or --sim-only)"
        ),
    }
    match (real("default"), real("twrs")) {
        (Some(d), Some(w)) => {
            let gd = median(&d.col(|x| x.norm_share[2] - x.norm_share[0])) * 100.0;
            let gw = median(&w.col(|x| x.norm_share[2] - x.norm_share[0])) * 100.0;
            println!(
                "  twrs: G(C,A) at least halved vs default: {} ({gw:.2} vs {gd:.2} pp)",
                ok_word(gw <= gd / 2.0)
            );
        }
        _ => println!("  twrs: not measured (twrs or default not available in the real engine, or --sim-only)"),
    }
    for r in change
        .iter()
        .filter(|r| !r.cells.is_empty() && r.policy != "default")
    {
        // Median over the repeats, a run that never settled counting as infinitely late.
        let med = |f: &dyn Fn(&Cell) -> Option<f64>| {
            median(
                &r.cells
                    .iter()
                    .map(|x| f(x).unwrap_or(f64::INFINITY))
                    .collect::<Vec<_>>(),
            )
        };
        let own = med(&|x| x.recovery_own_s.flatten());
        let gps = med(&|x| x.recovery_s.flatten());
        println!(
            "  {}: back within 2 pp of its own share within 1 s after the change: {} ({own:.3} s; to the GPS share: {gps:.3} s)",
            r.policy,
            ok_word(own <= 1.0)
        );
    }
    let worst = cost
        .iter()
        .filter(|r| !r.cells.is_empty())
        .filter_map(|r| {
            let v: Vec<f64> = r
                .cells
                .iter()
                .filter_map(|x| x.controller_cpu_pct)
                .collect();
            (!v.is_empty()).then(|| (median(&v), r.policy.clone()))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match worst {
        Some((v, p)) => println!(
            "  controllers below 1 % of a core at 100 ms with 100 threads: {} (largest: {p}, {v:.3} %)",
            ok_word(v < 1.0)
        ),
        None => println!("  controller cost: not measured (no fair-share policy ran for real)"),
    }
}

pub(super) fn greedy_charts(
    rows: &[Row],
    shares: &Path,
    change: &Path,
    c_threads: u32,
) -> Result<(), Failure> {
    let steady: Vec<&Row> = rows
        .iter()
        .filter(|r| r.config == "steady" && !r.cells.is_empty())
        .collect();
    let cats = vec![
        "A (1 thread)".to_string(),
        "B (8 threads)".to_string(),
        format!("C ({c_threads} threads)"),
    ];
    let mut chart = BarChart::new(
        "Greedy processes on 2 cores: CPU share per process, real and simulated",
        "process",
        Axis::new("share of the job's CPU time", "%"),
        cats,
    );
    for r in &steady {
        let mut means = Vec::new();
        let mut errs = Vec::new();
        for k in 0..3 {
            let (m, ci) = mean_ci(&r.col(|x| x.norm_share[k] * 100.0));
            means.push(m);
            errs.push((m - ci, m + ci));
        }
        chart.series(BarSeries::new(&r.label(), means).with_errors(errs));
    }
    if let Some(r) = steady.first() {
        chart.reference(
            "GPS ideal",
            r.cells[0].norm_ideal.iter().map(|x| x * 100.0).collect(),
        );
    }
    write_svg(shares, chart.to_svg(1000.0, 520.0))?;
    let mut lc = LineChart::new(
        &format!(
            "Process C goes from 1 to {c_threads} threads mid-run: its CPU share (200 ms windows)"
        ),
        Axis::new("time since start", "s"),
        Axis::new("C's share of the job's CPU time", "%"),
    );
    for r in rows
        .iter()
        .filter(|r| r.config == "change" && !r.cells.is_empty())
    {
        lc.series(Series::new(&r.label(), r.cells[0].timeline.clone()));
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.config == "change" && !r.cells.is_empty())
    {
        let t = &r.cells[0].timeline;
        if let (Some(a), Some(b)) = (t.first(), t.last()) {
            lc.series(Series::new(
                "GPS ideal (33.3 %)",
                vec![(a.0, 100.0 / 3.0), (b.0, 100.0 / 3.0)],
            ));
        }
    }
    write_svg(change, lc.to_svg(1000.0, 480.0))?;
    Ok(())
}
