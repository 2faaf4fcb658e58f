//! `schedkit experiment global-fairness` (seed 004, 4.5): one nice-0 and four nice-5 tasks
//! on 2 cores, default vs global-fair.

use super::*;

pub fn global_fairness(a: GlobalArgs) -> Result<(), Failure> {
    let c = &a.common;
    let s = setup(c, Nanos::from_ms(20))?;
    let sim = [PolicyName::Cfs, PolicyName::GlobalFair];
    let real = [PolicyName::Default, PolicyName::GlobalFair];
    let prog = Progress::new(sim.len() + if s.real { real.len() * s.repeat } else { 0 });
    let (h, period) = (s.horizon, s.period);
    let build = move |p: PolicyName, cores: usize| {
        scenario(
            "global-fairness",
            p,
            period,
            cores,
            h,
            &[
                busy("T1", "1", 0, None),
                busy("T2", "1", 5, None),
                busy("T3", "1", 5, None),
                busy("T4", "1", 5, None),
                busy("T5", "1", 5, None),
            ],
            &[],
        )
    };
    let rows = run_rows(
        &s,
        c,
        "global",
        &sim,
        &real,
        &build,
        By::Process,
        None,
        None,
        true,
        &prog,
    )?;
    prog.bar.finish_and_clear();
    let json = serde_json::json!({
        "experiment": "global-fairness", "horizon_s": s.horizon.0 as f64 / 1e9, "repeat": s.repeat,
        "period_ms": s.period.0 as f64 / 1e6, "nice_offset": c.nice, "rows": rows_json(&rows),
    });
    let jp = write_out(c, "global-fairness", &json)?;
    let svg1 = c.out.join("global-fairness-lag.svg");
    let svg2 = c.out.join("global-fairness-error.svg");
    global_charts(&rows, &svg1, &svg2)?;
    if c.json {
        println!("{json}");
        return Ok(());
    }
    println!(
        "Global fairness (seed 004, 4.5): T1 at nice 0 and T2-T5 at nice 5, one busy thread each, {} s, {} real CPU(s) / 2 simulated \
         cores, balancer period {} ms; real: mean ± 95 % CI over {} repeat(s)\n",
        s.horizon.0 as f64 / 1e9,
        s.cores_real,
        s.period.0 / 1_000_000,
        s.repeat
    );
    nice_note(c);
    let mut t = output::table(&[
        "engine policy",
        "largest |lag| ms",
        "vs machine GPS ms",
        "% err T1",
        "% err T2",
        "% err T3",
        "% err T4",
        "% err T5",
        "largest % err",
        "migrations /s",
        "balancer CPU %",
        "schedkit CPU %",
        "job % of machine",
    ]);
    if let Some(r) = rows.iter().find(|r| !r.cells.is_empty()) {
        let mut row = vec!["GPS share %".to_string(), String::new(), String::new()];
        row.extend(
            r.cells[0]
                .norm_ideal
                .iter()
                .map(|x| format!("{:.2}", x * 100.0)),
        );
        row.extend(["", "", "", "", ""].map(String::from));
        t.add_row(row);
    }
    for r in rows.iter().filter(|r| !r.cells.is_empty()) {
        let mut row = vec![r.label()];
        row.push(fmt_ci(&r.col(|x| x.norm_max_lag_ms), 1));
        row.push(fmt_ci(
            &r.col(|x| x.max_abs_lag_ms.iter().cloned().fold(0.0, f64::max)),
            1,
        ));
        for k in 0..5 {
            row.push(fmt_ci(
                &r.col(|x| (x.norm_share[k] - x.norm_ideal[k]).abs() / x.norm_ideal[k] * 100.0),
                2,
            ));
        }
        row.push(fmt_ci(&r.col(|x| pct_err(x).1), 2));
        let exact = r.cells.iter().all(|x| x.migrations_exact);
        row.push(format!(
            "{}{}",
            fmt_ci(&r.col(|x| x.migrations_per_s), 1),
            if exact { "" } else { " (seen)" }
        ));
        let ctl: Vec<f64> = r
            .cells
            .iter()
            .filter_map(|x| x.controller_cpu_pct)
            .collect();
        row.push(if ctl.is_empty() {
            "-".into()
        } else {
            fmt_ci(&ctl, 3)
        });
        row.push(if r.engine == "real" {
            fmt_ci(&r.col(|x| x.own_cpu_pct.unwrap_or(f64::NAN)), 3)
        } else {
            "-".into()
        });
        row.push(fmt_ci(&r.col(|x| x.job_share * 100.0), 1));
        t.add_row(row);
    }
    println!("{t}");
    print!(
        "{}",
        unavailable_lines(&rows.iter().map(|r| r.clone_meta()).collect::<Vec<_>>())
    );
    println!("(migrations \"(seen)\": CPU changes between samples, a lower bound; otherwise perf's cpu-migrations)");
    for r in rows
        .iter()
        .filter(|r| r.engine == "real" && !r.cells.is_empty())
    {
        // The 10 s error from the kernel's exact per-thread totals (see `Cell::exact_share`).
        let errs: Vec<f64> = r
            .cells
            .iter()
            .filter_map(|x| {
                let e = x.exact_share.as_ref()?;
                Some(
                    e.iter()
                        .zip(&x.norm_ideal)
                        .filter(|(_, i)| **i > 0.0)
                        .map(|(s, i)| (s - i).abs() / i * 100.0)
                        .fold(0.0, f64::max),
                )
            })
            .collect();
        if !errs.is_empty() {
            let t1: Vec<f64> = r
                .cells
                .iter()
                .filter_map(|x| x.exact_share.as_ref().map(|e| e[0] * 100.0))
                .collect();
            println!(
                "(real {}: from the kernel's exact per-thread CPU totals instead of the trace: largest 10 s error {} %, T1 {} % of the job's CPU)",
                r.policy,
                fmt_ci(&errs, 2),
                fmt_ci(&t1, 2)
            );
        }
        let v: Vec<f64> = r.cells.iter().filter_map(|x| x.sample_mean_ms).collect();
        let sc: Vec<f64> = r.cells.iter().filter_map(|x| x.sampler_cpu_pct).collect();
        if !v.is_empty() {
            println!(
                "(real {}: sampled every {:.2} ms on average, the lag figures' resolution; sampler {:.3} % of one core)",
                r.policy,
                median(&v),
                median(&sc)
            );
        }
    }
    println!("\nTargets (medians of the real runs):");
    match rows
        .iter()
        .find(|r| r.engine == "real" && r.policy == "global-fair" && !r.cells.is_empty())
    {
        Some(r) => {
            let lag = median(&r.col(|x| x.norm_max_lag_ms));
            let err = median(&r.col(|x| pct_err(x).1));
            let mig = median(&r.col(|x| x.migrations_per_s));
            println!(
                "  global-fair largest lag < 20 ms: {} ({lag:.1} ms)",
                ok_word(lag < 20.0)
            );
            println!(
                "  global-fair 10 s error of every task < 1 %: {} ({err:.2} %)",
                ok_word(err < 1.0)
            );
            println!(
                "  global-fair migrations <= 50 /s: {} ({mig:.1} /s)",
                ok_word(mig <= 50.0)
            );
        }
        None => println!(
            "  global-fair: not measured (not available in the real engine, or --sim-only)"
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

pub(super) fn global_charts(rows: &[Row], lag: &Path, err: &Path) -> Result<(), Failure> {
    let done: Vec<&Row> = rows.iter().filter(|r| !r.cells.is_empty()).collect();
    let mut lc = LineChart::new(
        "Global fairness: largest |lag| against GPS over the five tasks (first run of each)",
        Axis::new("time since start", "s"),
        Axis::new("largest |lag|", "ms"),
    );
    for r in &done {
        lc.series(Series::new(&r.label(), r.cells[0].lag_timeline.clone()));
    }
    write_svg(lag, lc.to_svg(1000.0, 480.0))?;
    let cats: Vec<String> = (1..=5).map(|i| format!("T{i}")).collect();
    let mut bc = BarChart::new(
        "Global fairness: whole-run error of each task's CPU time against GPS (mean, 95 % CI)",
        "task",
        Axis::new("|share - GPS share| / GPS share", "%"),
        cats,
    );
    for r in &done {
        let mut m = Vec::new();
        let mut e = Vec::new();
        for k in 0..5 {
            let (mm, ci) = mean_ci(
                &r.col(|x| (x.norm_share[k] - x.norm_ideal[k]).abs() / x.norm_ideal[k] * 100.0),
            );
            m.push(mm);
            e.push((mm - ci, mm + ci));
        }
        bc.series(BarSeries::new(&r.label(), m).with_errors(e));
    }
    write_svg(err, bc.to_svg(1000.0, 480.0))?;
    Ok(())
}
