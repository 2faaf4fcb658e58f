//! `schedkit experiment global-fairness` (seed 004, 4.5): one nice-0 and four nice-5 tasks
//! on 2 cores, default vs global-fair. Scenario: `examples/fair/global.toml`.

use super::measure::By;
use super::scenario::{self, Overrides};
use super::*;
use crate::stats::median;
use schedkit_render::chart::{Axis, Chart, LineChart, Series};
use schedkit_render::table::table;

pub const GLOBAL_SIM: [PolicyName; 2] = [PolicyName::Cfs, PolicyName::GlobalFair];
pub const GLOBAL_REAL: [PolicyName; 2] = [PolicyName::Default, PolicyName::GlobalFair];

/// What it measured.
#[derive(Clone, Debug)]
pub struct GlobalResult {
    pub setup: Setup,
    pub rows: Vec<Row>,
}

/// Runs `cfs` and `global-fair` in the simulator and `default` and `global-fair` for real.
pub fn run(
    o: &FairOptions,
    machine: &dyn Machine,
    prog: &dyn Progress,
) -> Result<GlobalResult, Error> {
    let file = scenario::GLOBAL.parse()?;
    let s = setup(o, file.policy().period())?;
    let exe = machine.helper_exe()?;
    prog.start(
        (GLOBAL_SIM.len()
            + if s.real {
                GLOBAL_REAL.len() * s.repeat
            } else {
                0
            }) as u64,
    );
    let o = Overrides {
        policy: PolicyName::Default,
        period: Some(s.period),
        cores: None,
        horizon: s.horizon,
        nice: s.nice,
        plans: &[],
        exe: &exe,
    };
    let build = |p, cores| scenario::load(&scenario::GLOBAL, &o.with(p, cores));
    let rows = run_rows(
        &s,
        Config {
            name: "global",
            sim: &GLOBAL_SIM,
            real: &GLOBAL_REAL,
            build: &build,
            by: By::Process,
            track: None,
            ctl: None,
            perf: true,
        },
        machine,
        prog,
    )?;
    prog.finish();
    Ok(GlobalResult { setup: s, rows })
}

/// `global-fairness.json`.
pub fn json(r: &GlobalResult) -> serde_json::Value {
    json_doc("global-fairness", &r.setup, &r.rows, serde_json::json!({}))
}

/// The table, the notes and the targets, as printed.
pub fn text(r: &GlobalResult) -> String {
    let (s, rows) = (&r.setup, &r.rows);
    let mut out = String::new();
    outln!(
        out,
        "Global fairness (seed 004, 4.5): T1 at nice 0 and T2-T5 at nice 5, one busy thread each, {} s, {} real CPU(s) / 2 simulated \
         cores, balancer period {} ms; real: mean ± 95 % CI over {} repeat(s)\n",
        s.horizon.0 as f64 / 1e9,
        s.cores_real,
        s.period.0 / 1_000_000,
        s.repeat
    );
    out.push_str(&nice_note(s));
    let t = result_table(rows);
    outln!(out, "{t}");
    outp!(out, "{}", unavailable_lines(rows));
    outln!(out, "(migrations \"(seen)\": CPU changes between samples, a lower bound; otherwise perf's cpu-migrations)");
    out.push_str(&real_notes(rows));
    out.push_str(&targets(rows));
    out
}

/// One row per engine and policy (and the GPS shares first): lag, error per task,
/// migrations, the balancer's and schedkit's own CPU, the job's share of the machine.
fn result_table(rows: &[Row]) -> comfy_table::Table {
    let mut t = table(&[
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
    t
}

/// The lines under the table for the real runs: the error from the kernel's exact totals,
/// the sampling period and the sampler's cost.
fn real_notes(rows: &[Row]) -> String {
    let mut out = String::new();
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
            outln!(
        out,
                "(real {}: from the kernel's exact per-thread CPU totals instead of the trace: largest 10 s error {} %, T1 {} % of the job's CPU)",
                r.policy,
                fmt_ci(&errs, 2),
                fmt_ci(&t1, 2)
            );
        }
        let v: Vec<f64> = r.cells.iter().filter_map(|x| x.sample_mean_ms).collect();
        let sc: Vec<f64> = r.cells.iter().filter_map(|x| x.sampler_cpu_pct).collect();
        if !v.is_empty() {
            outln!(
        out,
                "(real {}: sampled every {:.2} ms on average, the lag figures' resolution; sampler {:.3} % of one core)",
                r.policy,
                median(&v),
                median(&sc)
            );
        }
    }
    out
}

/// The targets against the medians of the real `global-fair` runs.
fn targets(rows: &[Row]) -> String {
    let mut out = String::new();
    outln!(out, "\nTargets (medians of the real runs):");
    match rows
        .iter()
        .find(|r| r.engine == "real" && r.policy == "global-fair" && !r.cells.is_empty())
    {
        Some(r) => {
            let lag = median(&r.col(|x| x.norm_max_lag_ms));
            let err = median(&r.col(|x| pct_err(x).1));
            let mig = median(&r.col(|x| x.migrations_per_s));
            outln!(
                out,
                "  global-fair largest lag < 20 ms: {} ({lag:.1} ms)",
                ok_word(lag < 20.0)
            );
            outln!(
                out,
                "  global-fair 10 s error of every task < 1 %: {} ({err:.2} %)",
                ok_word(err < 1.0)
            );
            outln!(
                out,
                "  global-fair migrations <= 50 /s: {} ({mig:.1} /s)",
                ok_word(mig <= 50.0)
            );
        }
        None => outln!(
            out,
            "  global-fair: not measured (not available in the real engine, or --sim-only)"
        ),
    }
    out
}

/// `global-fairness-lag.svg` and `global-fairness-error.svg`.
pub fn charts(r: &GlobalResult) -> Vec<(&'static str, String)> {
    let done: Vec<&Row> = r.rows.iter().filter(|r| !r.cells.is_empty()).collect();
    let mut lc = LineChart::new(
        "Global fairness: largest |lag| against GPS over the five tasks (first run of each)",
        Axis::new("time since start", "s"),
        Axis::new("largest |lag|", "ms"),
    );
    lc.legend_title = Some("engine, policy".into());
    for r in &done {
        lc.series(Series::new(&r.label(), r.cells[0].lag_timeline.clone()));
    }

    let cats: Vec<String> = (1..=5).map(|i| format!("T{i}")).collect();
    let mut bc = rows_chart(
        "Global fairness: whole-run error of each task's CPU time against GPS",
        "task",
        Axis::new("|share - GPS share| / GPS share", "%"),
        cats,
        &done,
        &r.setup,
    );
    for r in &done {
        let stats: Vec<(f64, f64)> = (0..5)
            .map(|k| {
                mean_ci(
                    &r.col(|x| (x.norm_share[k] - x.norm_ideal[k]).abs() / x.norm_ideal[k] * 100.0),
                )
            })
            .collect();
        bc.series(bars(&r.label(), &stats));
    }
    vec![
        ("global-fairness-lag.svg", lc.to_svg(1000.0, 480.0)),
        ("global-fairness-error.svg", bc.to_svg(1000.0, 480.0)),
    ]
}
