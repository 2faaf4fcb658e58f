//! `schedkit experiment greedy` (seed 004, 3.6): greedy processes of 1, 8 and 50 threads;
//! the thread-count change; the controllers' cost. Scenarios: `examples/fair/greedy-50.toml`
//! and `examples/fair/controller-cost.toml`.

use super::measure::{By, Track, TOL};
use super::scenario::{self, Overrides};
use super::*;
use crate::stats::median;
use schedkit_render::chart::{Axis, Chart, LineChart, Series};
use schedkit_render::table::table;

pub const GREEDY_REAL: [PolicyName; 4] = [
    PolicyName::Default,
    PolicyName::ProcessFair,
    PolicyName::Pfs,
    PolicyName::Twrs,
];
pub const GREEDY_SIM: [PolicyName; 4] = [
    PolicyName::Cfs,
    PolicyName::Pfs,
    PolicyName::Tfps,
    PolicyName::Twrs,
];
/// The policies whose controller cost is measured (real runs only).
pub const COST_POLICIES: [PolicyName; 6] = [
    PolicyName::Default,
    PolicyName::ProcessFair,
    PolicyName::Pfs,
    PolicyName::Tfps,
    PolicyName::Twrs,
    PolicyName::GlobalFair,
];

/// What `experiment greedy` runs.
#[derive(Clone, Debug)]
pub struct GreedyOptions {
    pub common: FairOptions,
    /// Threads of process C (1..=1000).
    pub c_threads: u32,
}

/// What it measured.
#[derive(Clone, Debug)]
pub struct GreedyResult {
    pub setup: Setup,
    pub c_threads: u32,
    /// When C changes its thread count (mid-run).
    pub change_at: Nanos,
    /// Length of the controller-cost runs.
    pub cost_horizon: Nanos,
    /// Rows of the configurations `steady`, `change` and `cost`.
    pub rows: Vec<Row>,
}

/// Runs every configuration: the steady state (simulated and real), the thread-count change
/// (real) and the controllers' cost (real).
pub fn run(
    o: &GreedyOptions,
    machine: &dyn Machine,
    prog: &dyn Progress,
) -> Result<GreedyResult, Error> {
    let file = scenario::GREEDY.parse()?;
    let s = setup(&o.common, file.policy().period())?;
    if o.c_threads == 0 || o.c_threads > 1000 {
        return Err(Error::bad_option(
            "c-threads",
            &o.c_threads.to_string(),
            "between 1 and 1000",
        ));
    }
    let change_at = Nanos(s.horizon.0 / 2);
    let exe = machine.helper_exe()?;
    let n_real = if s.real { GREEDY_REAL.len() } else { 0 };
    let n_cost = if s.real {
        COST_POLICIES.len() * s.repeat
    } else {
        0
    };
    prog.start((GREEDY_SIM.len() + n_real * s.repeat * 2 + n_cost) as u64);
    let c_plan = [("C", o.c_threads.to_string())];
    let steady = Overrides {
        policy: PolicyName::Default,
        period: Some(s.period),
        cores: None,
        horizon: s.horizon,
        nice: s.nice,
        plans: &c_plan,
        exe: &exe,
    };
    let build = |p, cores| scenario::load(&scenario::GREEDY, &steady.with(p, cores));
    let mut rows = run_rows(
        &s,
        Config {
            name: "steady",
            sim: &GREEDY_SIM,
            real: &GREEDY_REAL,
            build: &build,
            by: By::Process,
            track: None,
            ctl: None,
            perf: false,
        },
        machine,
        prog,
    )?;
    // The thread-count change: C runs 1 thread, then `c_threads` from mid-run on.
    let change_plan = [(
        "C",
        format!("1,{}@{}ms", o.c_threads, change_at.0 / 1_000_000),
    )];
    let change = Overrides {
        plans: &change_plan,
        ..steady.clone()
    };
    let build_change = |p, cores| scenario::load(&scenario::GREEDY, &change.with(p, cores));
    let track = Track {
        entity: 2,
        change: change_at,
        target: 1.0 / 3.0,
    };
    rows.extend(run_rows(
        &s,
        Config {
            name: "change",
            sim: &[],
            real: &GREEDY_REAL,
            build: &build_change,
            by: By::Process,
            track: Some(track),
            ctl: None,
            perf: false,
        },
        machine,
        prog,
    )?);
    // Controller cost: 100 busy threads (4 processes of 25), each policy vs default, at the
    // file's period whatever --period says.
    let cost_horizon = if o.common.quick {
        Nanos::from_secs(1)
    } else {
        Nanos::from_secs(5)
    };
    let cost = Overrides {
        period: None,
        horizon: cost_horizon,
        plans: &[],
        ..steady.clone()
    };
    let build_cost = |p, cores| scenario::load(&scenario::CONTROLLER_COST, &cost.with(p, cores));
    rows.extend(run_rows(
        &s,
        Config {
            name: "cost",
            sim: &[],
            real: &COST_POLICIES,
            build: &build_cost,
            by: By::Process,
            track: None,
            ctl: None,
            perf: false,
        },
        machine,
        prog,
    )?);
    prog.finish();
    Ok(GreedyResult {
        setup: s,
        c_threads: o.c_threads,
        change_at,
        cost_horizon,
        rows,
    })
}

/// `greedy.json`.
pub fn json(r: &GreedyResult) -> serde_json::Value {
    json_doc(
        "greedy",
        &r.setup,
        &r.rows,
        serde_json::json!({
            "c_threads": r.c_threads, "change_at_s": r.change_at.0 as f64 / 1e9,
            "tolerance_pp": TOL * 100.0,
        }),
    )
}

/// The tables and the targets, as printed.
pub fn text(r: &GreedyResult) -> String {
    let mut out = String::new();
    steady_text(&mut out, r);
    change_text(&mut out, r);
    cost_text(&mut out, r);
    targets_text(&mut out, &r.rows);
    out
}

/// The steady-state table: shares, gaps, waiting and lag per engine and policy.
fn steady_text(out: &mut String, r: &GreedyResult) {
    let (s, rows) = (&r.setup, &r.rows);
    outln!(
        out,
        "Greedy processes (seed 004, 3.6): A = 1, B = 8, C = {} busy threads, {} s, {} real CPU(s) / 2 simulated cores, \
         period {} ms; real: mean ± 95 % CI over {} repeat(s); CPUU = % of the job's CPU time (the machine's, when nothing else runs); GPS = process-fair ideal\n",
        r.c_threads,
        s.horizon.0 as f64 / 1e9,
        s.cores_real,
        s.period.0 / 1_000_000,
        s.repeat
    );
    out.push_str(&nice_note(s));
    let steady: Vec<&Row> = rows.iter().filter(|r| r.config == "steady").collect();
    let mut t = table(&[
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
    outln!(out, "{t}");
    outp!(out, "{}", unavailable_lines(steady.iter().copied()));
}

/// The thread-count change: C's share before and after, and how long it took to settle.
fn change_text(out: &mut String, r: &GreedyResult) {
    let (rows, change_at) = (&r.rows, r.change_at);
    outln!(
        out,
        "\nThread-count change: C runs 1 thread, then {} from {:.1} s; recovery = time until C's share over 200 ms windows \
         is back within {:.0} points of its GPS share (33.3 %), or of its own share before the change, and stays there for 1 s; \
         before = median over the second quarter of the run, after = from 1 s after the change on",
        r.c_threads,
        change_at.0 as f64 / 1e9,
        TOL * 100.0
    );
    let mut t = table(&[
        "engine policy",
        "C before %",
        "C after %",
        "first within 2 pp of GPS s",
        "back to GPS share s",
        "back to own share s",
    ]);
    let change: Vec<&Row> = rows.iter().filter(|r| r.config == "change").collect();
    if change.iter().all(|r| r.cells.is_empty()) {
        let why = real_only_note(r.setup.real, "the thread-count change")
            .unwrap_or_else(|| "no real policy could run".into());
        outln!(out, "no rows: {why}");
        outp!(out, "{}", unavailable_lines(change.iter().copied()));
        return;
    }
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
    outln!(out, "{t}");
    outp!(out, "{}", unavailable_lines(change.iter().copied()));
}

/// The controllers' own CPU cost with 100 busy threads.
fn cost_text(out: &mut String, r: &GreedyResult) {
    let (rows, cost_h) = (&r.rows, r.cost_horizon);
    let cost: Vec<&Row> = rows.iter().filter(|r| r.config == "cost").collect();
    if !cost.is_empty() {
        outln!(
        out,
            "\nController cost: 4 processes x 25 busy threads (100), period 100 ms, {} s, in % of one core: the controller \
             loop and the sampler as the engine measures them (its thread's CPU clock around each tick and each sample; \
             --sample {}; mean period between samples), and all of schedkit between the first and the last sample. The \
             sampler only samples as often as it gets a CPU: under default, 100 busy nice-0 threads crowd it out, so its \
             figure is not a baseline",
            cost_h.0 / 1_000_000_000,
            r.setup.sample
        );
        let mut t = table(&[
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
        outln!(out, "{t}");
        outp!(out, "{}", unavailable_lines(cost.iter().copied()));
    }
}

/// The targets of issue 6, checked on the medians of the real runs.
fn targets_text(out: &mut String, rows: &[Row]) {
    let steady: Vec<&Row> = rows.iter().filter(|r| r.config == "steady").collect();
    let change: Vec<&Row> = rows.iter().filter(|r| r.config == "change").collect();
    let cost: Vec<&Row> = rows.iter().filter(|r| r.config == "cost").collect();
    outln!(out, "\nTargets (medians of the real runs):");
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
            outln!(out, "  process-fair: every process within 2 pp of 1/3: {} (largest deviation {m:.2} pp)", ok_word(m <= 2.0));
        }
        None => outln!(
            out,
            "  process-fair: not measured (not available in the real engine, or --sim-only)"
        ),
    }
    match (real("default"), real("twrs")) {
        (Some(d), Some(w)) => {
            let gd = median(&d.col(|x| x.norm_share[2] - x.norm_share[0])) * 100.0;
            let gw = median(&w.col(|x| x.norm_share[2] - x.norm_share[0])) * 100.0;
            outln!(
        out,
                "  twrs: G(C,A) at least halved vs default: {} ({gw:.2} vs {gd:.2} pp)",
                ok_word(gw <= gd / 2.0)
            );
        }
        _ => outln!(out, "  twrs: not measured (twrs or default not available in the real engine, or --sim-only)"),
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
        outln!(
        out,
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
        Some((v, p)) => outln!(
        out,
            "  controllers below 1 % of a core at 100 ms with 100 threads: {} (largest: {p}, {v:.3} %)",
            ok_word(v < 1.0)
        ),
        None => outln!(out, "  controller cost: not measured (no fair-share policy ran for real)"),
    }
}

/// Why a part of the experiment has no rows: it runs on real cores only.
fn real_only_note(real: bool, what: &str) -> Option<String> {
    (!real).then(|| format!("{what} runs on real cores only (the simulator has no mid-run thread changes); --sim-only skipped it"))
}

/// `greedy-shares.svg` and `greedy-change.svg`.
pub fn charts(r: &GreedyResult) -> Vec<(&'static str, String)> {
    let (rows, c_threads) = (&r.rows, r.c_threads);
    let steady: Vec<&Row> = rows
        .iter()
        .filter(|r| r.config == "steady" && !r.cells.is_empty())
        .collect();
    let cats = vec![
        "A (1 thread)".to_string(),
        "B (8 threads)".to_string(),
        format!("C ({c_threads} threads)"),
    ];
    let mut chart = rows_chart(
        "Greedy processes on 2 cores: CPU share per process",
        "process",
        Axis::new("share of the job's CPU time", "%"),
        cats,
        &steady,
        &r.setup,
    );
    for r in &steady {
        let stats: Vec<(f64, f64)> = (0..3)
            .map(|k| mean_ci(&r.col(|x| x.norm_share[k] * 100.0)))
            .collect();
        chart.series(bars(&r.label(), &stats));
    }
    if let Some(r) = steady.first() {
        chart.reference(
            "GPS ideal",
            r.cells[0].norm_ideal.iter().map(|x| x * 100.0).collect(),
        );
    }
    let mut lc = LineChart::new(
        &format!(
            "Process C goes from 1 to {c_threads} threads mid-run: its CPU share (200 ms windows)"
        ),
        Axis::new("time since start", "s"),
        Axis::new("C's share of the job's CPU time", "%"),
    );
    lc.legend_title = Some("engine, policy".into());
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
    lc.no_data = real_only_note(r.setup.real, "the thread-count change");
    vec![
        ("greedy-shares.svg", chart.to_svg(1000.0, 520.0)),
        ("greedy-change.svg", lc.to_svg(1000.0, 480.0)),
    ]
}
