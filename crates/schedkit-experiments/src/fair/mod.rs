//! `schedkit experiment greedy | global-fairness | tenants`: seed 004's chapters 3-5 on this
//! machine, every configuration run for real (`schedkit run`'s engine) and in the simulator
//! from the same scenario, printed beside the GPS ideal.
//!
//! - **greedy** (3.6): processes A, B, C of 1, 8 and 50 busy threads on 2 cores. Per policy:
//!   CPU share per process (CPUU, % of the machine), the gaps G(C,A) and G(C,B) (3.6.1),
//!   average waiting and turnaround time (3.6.2), the largest |lag| against GPS and the
//!   percentage error (4.6.1). Then the thread-count change: C goes from 1 to 50 threads
//!   mid-run, and we measure how long until its share is back within 2 points of its GPS
//!   share (sliding windows, see [`crate::metrics::recovery`]). Then the controllers' own CPU cost with 100
//!   threads.
//! - **global-fairness** (4.5): one nice-0 and four nice-5 single-thread processes on 2 cores,
//!   `default` vs `global-fair`: largest lag against GPS, the whole-run % error per task,
//!   migrations per second and the balancer's CPU cost.
//! - **tenants** (5.5, Figs. 5.7-5.8): two groups of 6 busy threads at weights 1:1..1:5 and
//!   three groups at 1:2:3: each group's share against its weight's fraction; then a weight
//!   changed mid-run with `schedkit ctl set-weight` (a real client process) and the time to
//!   reach the new share.
//!
//! Every scenario is a file in `examples/fair/` (embedded at build time, see [`scenario`]),
//! with what the options change (cores, horizon, period, thread counts, nice values) applied
//! to it, so a user can open, edit and run each configuration with `schedkit sim` and `schedkit
//! run`. Every busy process is a real process: the helper executable
//! ([`Machine::helper_exe`]) with the hidden `--spinner PLAN` flag (`N` threads, or `N,M@T`: M
//! threads from time T on; [`spinner::spinner`]), so cgroup and per-thread policies act on
//! real pids exactly as they would on a user's programs. A policy the real engine does not
//! offer yet is listed as "not available" with the engine's reason; no number is made up for
//! it.
//!
//! **How lag is computed for real runs.** The engine samples every job thread's schedstat
//! run time every `--sample` (`auto` by default: every 5 ms, longer, up to the SPEC's 10 ms,
//! when sampling would cost more than 1 % of a core; the run reports the periods it used)
//! and turns the samples into the same trace
//! events as the simulator (see `schedkit_linux::engine`); the report fold
//! (`schedkit_core::report::Metrics`) integrates GPS over the same window. Per-thread CPU
//! time is exact at sample instants; inside an interval the engine spreads it evenly, so the
//! real lag is accurate to about one sample period of one thread's CPU time.

//!
//! Each experiment is a function from options ([`FairOptions`] and its own) to a result
//! ([`greedy::GreedyResult`], [`global::GlobalResult`], [`tenants::TenantsResult`]); each
//! module's `text`, `json` and `charts` render it. Nothing here prints.

/// `writeln!` into a `String` (which cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `write!` into a `String`.
macro_rules! outp {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = write!($out, $($arg)*);
    }};
}

use crate::machine::Machine;
use crate::progress::Progress;
use crate::stats::mean_ci;
use crate::Error;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::Nanos;
use schedkit_render::chart::{Axis, BarChart, BarSeries};

pub mod global;
pub mod greedy;
pub mod measure;
pub mod scenario;
pub mod spinner;
pub mod tenants;

use measure::{real_cell, sim_cell, By, CtlChange, Track};
pub use measure::{Cell, Sample};

/// Options every fair-share experiment takes.
#[derive(Clone, Debug)]
pub struct FairOptions {
    /// Repeats of every real configuration (mean and 95 % confidence interval over them; the
    /// simulator is deterministic and runs once).
    pub repeat: usize,
    /// A short run for CI: 1 repeat, 2 s runs (change at 1 s), fewer configurations.
    pub quick: bool,
    /// Length of each run (at least 500 ms; `quick` makes it 2 s).
    pub duration: Nanos,
    /// Sampling period of the real engine.
    pub sample: Sample,
    /// Controller period (`policy.period`), real and simulated; `None`: the scenario file's.
    pub period: Option<Nanos>,
    /// Simulator only (no real runs).
    pub sim_only: bool,
    /// Added to every busy process's nice value (GPS uses the shifted values).
    pub nice: i32,
}

/// The options as they were applied (after `quick`), and the machine's CPU count.
#[derive(Clone, Debug)]
pub struct Setup {
    pub repeat: usize,
    pub horizon: Nanos,
    pub period: Nanos,
    pub real: bool,
    pub cores_real: usize,
    pub nice: i32,
    pub sample: Sample,
}

/// Checks the options; `default_period` is the scenario file's controller period.
fn setup(o: &FairOptions, default_period: Nanos) -> Result<Setup, Error> {
    let horizon = if o.quick {
        Nanos::from_secs(2)
    } else {
        o.duration
    };
    if horizon < Nanos::from_ms(500) {
        return Err(Error::bad_option(
            "duration",
            &horizon.to_string(),
            "at least 500ms",
        ));
    }
    let period = o.period.unwrap_or(default_period);
    if period.0 == 0 {
        return Err(Error::bad_option("period", "0", "must be positive"));
    }
    if o.repeat == 0 {
        return Err(Error::bad_option("repeat", "0", "at least 1"));
    }
    if !(-20..=19).contains(&o.nice) {
        return Err(Error::bad_option(
            "nice",
            &o.nice.to_string(),
            "between -20 and 19",
        ));
    }
    let cores_real = schedkit_linux::topo::Topology::host().map_or(2, |t| t.n_cpus());
    Ok(Setup {
        repeat: if o.quick { 1 } else { o.repeat },
        horizon,
        period,
        real: !o.sim_only,
        cores_real,
        nice: o.nice,
        sample: o.sample,
    })
}

/// All repeats of one (engine, policy, config), or why it could not run.
#[derive(Clone, Debug)]
pub struct Row {
    pub engine: String,
    pub policy: String,
    pub config: String,
    pub cells: Vec<Cell>,
    pub unavailable: Option<String>,
}

impl Row {
    pub fn label(&self) -> String {
        format!("{} {}", self.engine, self.policy)
    }
    pub fn col(&self, f: impl Fn(&Cell) -> f64) -> Vec<f64> {
        self.cells.iter().map(f).collect()
    }
}

/// One configuration of an experiment: its name, the policies per engine, and how its
/// scenario is built for a policy and a core count.
struct Config<'a> {
    name: &'a str,
    sim: &'a [PolicyName],
    real: &'a [PolicyName],
    /// Cores: `None` for the simulator (the file's), the machine's CPUs for real runs.
    build: &'a dyn Fn(PolicyName, Option<usize>) -> Result<Scenario, Error>,
    by: By,
    track: Option<Track>,
    ctl: Option<CtlChange>,
    perf: bool,
}

/// Runs every (engine, policy) of a configuration: the simulator once, the real engine
/// `repeat` times (policies interleaved, so drift in the machine's load hits all alike).
fn run_rows(
    s: &Setup,
    cfg: Config,
    machine: &dyn Machine,
    prog: &dyn Progress,
) -> Result<Vec<Row>, Error> {
    let config = cfg.name;
    let mut rows = Vec::new();
    for &p in cfg.sim {
        prog.message(&format!("{config}: sim {p}"));
        let sc = (cfg.build)(p, None)?;
        rows.push(Row {
            engine: "sim".into(),
            policy: p.to_string(),
            config: config.into(),
            cells: vec![sim_cell(config, &sc, cfg.by, cfg.track)?],
            unavailable: None,
        });
        prog.step();
    }
    if !s.real {
        return Ok(rows);
    }
    let first = rows.len();
    for &p in cfg.real {
        rows.push(Row {
            engine: "real".into(),
            policy: p.to_string(),
            config: config.into(),
            cells: Vec::new(),
            unavailable: None,
        });
    }
    for _ in 0..s.repeat {
        for (i, &p) in cfg.real.iter().enumerate() {
            let row = &mut rows[first + i];
            if row.unavailable.is_some() {
                prog.step();
                continue;
            }
            prog.message(&format!("{config}: real {p}"));
            let sc = (cfg.build)(p, Some(s.cores_real))?;
            match real_cell(
                config,
                &sc,
                s.sample,
                cfg.by,
                cfg.track,
                cfg.ctl.clone(),
                cfg.perf,
                machine,
            )? {
                Ok(cell) => row.cells.push(cell),
                Err(m) => row.unavailable = Some(m),
            }
            prog.step();
        }
    }
    Ok(rows)
}

/// `mean ± CI` with `digits` decimals (the mean alone for one value).
pub fn fmt_ci(xs: &[f64], digits: usize) -> String {
    let (m, ci) = mean_ci(xs);
    if xs.len() > 1 {
        format!("{m:.digits$} ± {ci:.digits$}")
    } else {
        format!("{m:.digits$}")
    }
}

/// The rows as JSON: one object per (engine, policy, config) with its runs.
pub fn rows_json(rows: &[Row]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                serde_json::json!({
                    "engine": r.engine, "policy": r.policy, "config": r.config,
                    "unavailable": r.unavailable, "runs": r.cells,
                })
            })
            .collect(),
    )
}

/// Lines for policies that could not run for real.
fn unavailable_lines<'a>(rows: impl IntoIterator<Item = &'a Row>) -> String {
    let mut s = String::new();
    let mut seen = Vec::new();
    for r in rows {
        if let Some(m) = &r.unavailable {
            if !seen.contains(&r.policy) {
                seen.push(r.policy.clone());
                s.push_str(&format!(
                    "not available: real {} — no numbers for it ({m})\n",
                    r.policy
                ));
            }
        }
    }
    s
}

/// Says so when `--nice` shifted the processes' nice values.
fn nice_note(s: &Setup) -> String {
    if s.nice != 0 {
        format!(
            "every busy process's nice value shifted by {:+} (--nice); GPS uses the shifted weights\n\n",
            s.nice
        )
    } else {
        String::new()
    }
}

fn ok_word(b: bool) -> &'static str {
    if b {
        "MET"
    } else {
        "NOT MET"
    }
}

/// Recovery times of the repeats: mean ± CI, or how many never settled.
fn recovery_text(rec: Vec<Option<f64>>) -> String {
    if rec.iter().all(|x| x.is_some()) {
        fmt_ci(&rec.iter().flatten().cloned().collect::<Vec<_>>(), 3)
    } else {
        format!(
            "never in {}/{} run(s)",
            rec.iter().filter(|x| x.is_none()).count(),
            rec.len()
        )
    }
}

/// Mean and largest |share - ideal| / ideal over the entities, in percent (4.6.1).
pub fn pct_err(c: &Cell) -> (f64, f64) {
    let e: Vec<f64> = c
        .norm_share
        .iter()
        .zip(&c.norm_ideal)
        .filter(|(_, i)| **i > 0.0)
        .map(|(s, i)| (s - i).abs() / i * 100.0)
        .collect();
    (
        e.iter().sum::<f64>() / e.len().max(1) as f64,
        e.iter().cloned().fold(0.0, f64::max),
    )
}

/// What the rows of a chart come from, for its title: "real and simulated", "simulated" or
/// "real" (only what was run).
fn engines_word<'a>(rows: impl IntoIterator<Item = &'a Row>) -> &'static str {
    let (mut sim, mut real) = (false, false);
    for r in rows {
        if !r.cells.is_empty() {
            sim |= r.engine == "sim";
            real |= r.engine == "real";
        }
    }
    match (sim, real) {
        (true, true) => "real and simulated",
        (false, true) => "real",
        _ => "simulated",
    }
}

/// Bars of (mean, CI) values, with error bounds only where some value has a spread (not for
/// a single run, nor the deterministic simulator): caps on a point without spread would claim
/// an interval that was never measured.
fn bars(name: &str, stats: &[(f64, f64)]) -> BarSeries {
    let b = BarSeries::new(name, stats.iter().map(|s| s.0).collect());
    if stats.iter().any(|(_, ci)| *ci > 0.0) {
        b.with_errors(stats.iter().map(|(m, ci)| (m - ci, m + ci)).collect())
    } else {
        b
    }
}

/// A bar chart of rows: `title` followed by which engines ran and, when the bars are means
/// over real repeats, " (mean, 95 % CI)"; the legend names engine and policy.
fn rows_chart(
    title: &str,
    x_label: &str,
    y: Axis,
    cats: Vec<String>,
    rows: &[&Row],
    s: &Setup,
) -> BarChart {
    let ci = if s.repeat > 1 && s.real {
        " (mean, 95 % CI)"
    } else {
        ""
    };
    let title = format!("{title}, {}{ci}", engines_word(rows.iter().copied()));
    let mut c = BarChart::new(&title, x_label, y, cats);
    c.legend_title = Some("engine, policy".into());
    c
}

/// An experiment's JSON: what ran (`experiment`, horizon, repeats, period, nice offset), its
/// rows, and the experiment's own `extra` keys.
fn json_doc(
    experiment: &str,
    s: &Setup,
    rows: &[Row],
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut doc = serde_json::json!({
        "experiment": experiment, "horizon_s": s.horizon.0 as f64 / 1e9, "repeat": s.repeat,
        "period_ms": s.period.0 as f64 / 1e6, "nice_offset": s.nice, "rows": rows_json(rows),
    });
    if let (Some(d), serde_json::Value::Object(e)) = (doc.as_object_mut(), extra) {
        d.extend(e);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::measure::{cell, By};
    use super::spinner::parse_plan;
    use super::*;
    use schedkit_core::trace::{Event, Owner};

    #[test]
    fn plans_parse_and_reject_nonsense() {
        assert_eq!(parse_plan("8").unwrap(), vec![(Nanos::ZERO, 8)]);
        assert_eq!(
            parse_plan("1,50@5s").unwrap(),
            vec![(Nanos::ZERO, 1), (Nanos::from_secs(5), 50)]
        );
        assert!(parse_plan("0").is_err());
        assert!(parse_plan("1,2").is_err());
        assert!(parse_plan("1,2@2s,3@1s").is_err());
    }

    #[test]
    fn lag_against_the_jobs_cpu_follows_alternating_runs() {
        use schedkit_core::report::Metrics;
        use schedkit_core::trace::{Reason, TraceSink};
        // Two one-thread processes on one core: P0 runs [0, 10 ms), P1 [10, 20 ms), and the
        // machine is idle for [20, 30 ms). GPS gives each half of the job's CPU: at 10 ms P0
        // is 5 ms ahead, at 20 ms both are even; the idle tail does not count against them.
        let sc = Scenario::parse(
            "test.toml",
            "cores = 1\n[policy]\nname = \"default\"\n[run]\nhorizon = \"30ms\"\n\
             [[process]]\nname = \"P0\"\n[[process]]\nname = \"P1\"\n",
        )
        .unwrap();
        let ms = Nanos::from_ms;
        let ev = vec![
            Event::Arrive {
                t: ms(0),
                slot: 0,
                owner: Owner::Process {
                    process: 0,
                    thread: 0,
                },
            },
            Event::Arrive {
                t: ms(0),
                slot: 1,
                owner: Owner::Process {
                    process: 1,
                    thread: 0,
                },
            },
            Event::Dispatch {
                t: ms(0),
                core: 0,
                slot: 0,
            },
            Event::Deschedule {
                t: ms(10),
                core: 0,
                slot: 0,
                reason: Reason::Expired,
            },
            Event::Dispatch {
                t: ms(10),
                core: 0,
                slot: 1,
            },
            Event::Deschedule {
                t: ms(20),
                core: 0,
                slot: 1,
                reason: Reason::Expired,
            },
            Event::Block { t: ms(20), slot: 0 },
            Event::Block { t: ms(20), slot: 1 },
        ];
        let mut m = Metrics::new(&sc, "test", 1);
        for e in &ev {
            m.record(e);
        }
        let report = m.finish(ms(30));
        let c = cell(
            "test",
            "c",
            &sc,
            &report,
            &ev,
            ms(30),
            By::Process,
            (0.0, true),
            None,
            None,
            None,
        );
        assert!((c.job_share - 2.0 / 3.0).abs() < 1e-9, "{}", c.job_share);
        assert_eq!(c.norm_share, vec![0.5, 0.5]);
        assert!(
            (c.norm_max_lag_ms - 5.0).abs() < 1e-9,
            "{}",
            c.norm_max_lag_ms
        );
        assert!(pct_err(&c).1 < 1e-9);
    }
}
