//! `schedkit experiment greedy | global-fairness | tenants`: seed 004's chapters 3-5 on this
//! machine, every configuration run for real (`schedkit run`'s engine) and in the simulator
//! from the same scenario, printed beside the GPS ideal.
//!
//! - **greedy** (3.6): processes A, B, C of 1, 8 and 50 busy threads on 2 cores. Per policy:
//!   CPU share per process (CPUU, % of the machine), the gaps G(C,A) and G(C,B) (3.6.1),
//!   average waiting and turnaround time (3.6.2), the largest |lag| against GPS and the
//!   percentage error (4.6.1). Then the thread-count change: C goes from 1 to 50 threads
//!   mid-run, and we measure how long until its share is back within 2 points of its GPS
//!   share (sliding windows, see [`recovery`]). Then the controllers' own CPU cost with 100
//!   threads.
//! - **global-fairness** (4.5): one nice-0 and four nice-5 single-thread processes on 2 cores,
//!   `default` vs `global-fair`: largest lag against GPS, the whole-run % error per task,
//!   migrations per second and the balancer's CPU cost.
//! - **tenants** (5.5, Figs. 5.7-5.8): two groups of 6 busy threads at weights 1:1..1:5 and
//!   three groups at 1:2:3: each group's share against its weight's fraction; then a weight
//!   changed mid-run with `schedkit ctl set-weight` (a real client process) and the time to
//!   reach the new share.
//!
//! Every busy process is a real process: this binary with the hidden `--spinner PLAN` flag
//! (`N` threads, or `N,M@T`: M threads from time T on), so cgroup and per-thread policies act on
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

use crate::failure::{Failure, EXIT_BAD_INPUT};
use crate::output;
use clap::Args;
use schedkit_core::report::Report;
use schedkit_core::scenario::{Group, PolicyName, PolicySpec, Process, Scenario, Work};
use schedkit_core::trace::{Event, Owner};
use schedkit_core::Nanos;
use schedkit_experiments::metrics::{cpu_bins, recovery, window_shares};
use schedkit_experiments::stats::{mean_ci, median};
use schedkit_linux::engine::{self, RunOptions, RunOutcome, RunPolicy};
use schedkit_render::chart::{Axis, BarChart, BarSeries, Chart, LineChart, Series};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod global;
mod greedy;
mod measure;
mod scenario;
mod spinner;
mod tenants;

use measure::*;
use scenario::*;
use spinner::*;

pub use global::global_fairness;
pub use greedy::greedy;
pub use tenants::tenants;

/// Options every fair-share experiment takes.
#[derive(Args, Clone)]
pub struct FairCommon {
    /// Repeats of every real configuration (mean and 95 % confidence interval over them; the
    /// simulator is deterministic and runs once).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// A short run for CI: 1 repeat, 2 s runs (change at 1 s), fewer configurations.
    #[arg(long)]
    pub quick: bool,
    /// Length of each run.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Sampling period of the real engine (per-thread CPU time; lag resolution): a duration
    /// up to 10ms, fixed, or `auto`: 5 ms, lengthened up to 10 ms while sampling would cost
    /// more than 1 % of one core.
    #[arg(long, default_value = "auto")]
    pub sample: String,
    /// Controller period (`policy.period`) of pfs/tfps/twrs/tenants/global-fair, real and
    /// simulated. Default: 100 ms (20 ms for global-fairness).
    #[arg(long)]
    pub period: Option<String>,
    /// Simulator only (no real runs).
    #[arg(long)]
    pub sim_only: bool,
    /// Added to every busy process's nice value (e.g. -10 on a machine that others load:
    /// prio_to_weight ratios stay within 0.1 %, so GPS and the policies' weights keep their
    /// proportions while outside load weighs less). The GPS reference uses the shifted values.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub nice: i32,
    /// Print the results as JSON on stdout instead of the tables (files are written either way).
    #[arg(long)]
    pub json: bool,
    /// Directory for the JSON and SVG files.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Run as a busy process (internal): `N` threads, or `N,M@T` (M threads from T on).
    #[arg(long, hide = true)]
    pub spinner: Option<String>,
}

#[derive(Args)]
pub struct GreedyArgs {
    #[command(flatten)]
    pub common: FairCommon,
    /// Threads of process C.
    #[arg(long, default_value_t = 50)]
    pub c_threads: u32,
}

#[derive(Args)]
pub struct GlobalArgs {
    #[command(flatten)]
    pub common: FairCommon,
}

#[derive(Args)]
pub struct TenantsArgs {
    #[command(flatten)]
    pub common: FairCommon,
}

fn bad(m: String) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: m,
    }
}

// ---------------------------------------------------------------------------------------
// Aggregation and output.

fn fmt_ci(xs: &[f64], digits: usize) -> String {
    let (m, ci) = mean_ci(xs);
    if xs.len() > 1 {
        format!("{m:.digits$} ± {ci:.digits$}")
    } else {
        format!("{m:.digits$}")
    }
}

/// All repeats of one (engine, policy, config), or why it could not run.
struct Row {
    engine: String,
    policy: String,
    config: String,
    cells: Vec<Cell>,
    unavailable: Option<String>,
}

impl Row {
    fn label(&self) -> String {
        format!("{} {}", self.engine, self.policy)
    }
    fn col(&self, f: impl Fn(&Cell) -> f64) -> Vec<f64> {
        self.cells.iter().map(f).collect()
    }
}

struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    fn new(total: usize) -> Progress {
        let bar = if std::io::stdout().is_terminal() {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} runs · {msg} · ETA {eta}",
                )
                .expect("template"),
            );
            b
        } else {
            indicatif::ProgressBar::hidden()
        };
        Progress { bar }
    }
}

/// Parsed common options.
struct Setup {
    repeat: usize,
    horizon: Nanos,
    period: Nanos,
    real: bool,
    cores_real: usize,
}

fn setup(c: &FairCommon, default_period: Nanos) -> Result<Setup, Failure> {
    if let Some(p) = &c.spinner {
        let plan = parse_plan(p).map_err(|m| bad(format!("--spinner: {m}")))?;
        spinner(&plan);
    }
    let horizon = if c.quick {
        Nanos::from_secs(2)
    } else {
        Nanos::parse(&c.duration).map_err(|m| bad(format!("--duration: {m}")))?
    };
    if horizon < Nanos::from_ms(500) {
        return Err(bad("--duration: at least 500ms".into()));
    }
    let period = match &c.period {
        Some(p) => Nanos::parse(p).map_err(|m| bad(format!("--period: {m}")))?,
        None => default_period,
    };
    if period.0 == 0 {
        return Err(bad("--period: must be positive".into()));
    }
    parse_sample(&c.sample)?;
    if c.repeat == 0 {
        return Err(bad("--repeat: at least 1".into()));
    }
    if !(-20..=19).contains(&c.nice) {
        return Err(bad("--nice: between -20 and 19".into()));
    }
    NICE_OFFSET.store(c.nice, std::sync::atomic::Ordering::Relaxed);
    std::fs::create_dir_all(&c.out).map_err(|e| anyhow::anyhow!("{}: {e}", c.out.display()))?;
    let cores_real = schedkit_linux::topo::Topology::host().map_or(2, |t| t.n_cpus());
    if !c.sim_only {
        engine::install_signal_handlers();
    }
    Ok(Setup {
        repeat: if c.quick { 1 } else { c.repeat },
        horizon,
        period,
        real: !c.sim_only,
        cores_real,
    })
}

fn interrupted() -> Result<(), Failure> {
    if engine::signal_flag().load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Failure {
            status: 130,
            message: "interrupted; every change was undone".into(),
        });
    }
    Ok(())
}

/// Runs every (engine, policy) of a configuration: the simulator once, the real engine
/// `repeat` times (policies interleaved, so drift in the machine's load hits all alike).
#[allow(clippy::too_many_arguments)]
fn run_rows(
    s: &Setup,
    c: &FairCommon,
    config: &str,
    sim: &[PolicyName],
    real: &[PolicyName],
    build: &dyn Fn(PolicyName, usize) -> Result<Scenario, Failure>,
    by: By,
    track: Option<Track>,
    ctl: Option<CtlChange>,
    perf: bool,
    prog: &Progress,
) -> Result<Vec<Row>, Failure> {
    let mut rows = Vec::new();
    for &p in sim {
        prog.bar.set_message(format!("{config}: sim {p}"));
        let sc = build(p, 2)?;
        rows.push(Row {
            engine: "sim".into(),
            policy: p.to_string(),
            config: config.into(),
            cells: vec![sim_cell(config, &sc, by, track)?],
            unavailable: None,
        });
        prog.bar.inc(1);
    }
    if !s.real {
        return Ok(rows);
    }
    let first = rows.len();
    for &p in real {
        rows.push(Row {
            engine: "real".into(),
            policy: p.to_string(),
            config: config.into(),
            cells: Vec::new(),
            unavailable: None,
        });
    }
    for _ in 0..s.repeat {
        for (i, &p) in real.iter().enumerate() {
            let row = &mut rows[first + i];
            if row.unavailable.is_some() {
                prog.bar.inc(1);
                continue;
            }
            prog.bar.set_message(format!("{config}: real {p}"));
            let sc = build(p, s.cores_real)?;
            match real_cell(config, &sc, c, by, track, ctl.clone(), perf)? {
                Ok(cell) => row.cells.push(cell),
                Err(m) => row.unavailable = Some(m),
            }
            prog.bar.inc(1);
            interrupted()?;
        }
    }
    Ok(rows)
}

fn write_out(c: &FairCommon, name: &str, json: &serde_json::Value) -> Result<PathBuf, Failure> {
    let p = c.out.join(format!("{name}.json"));
    std::fs::write(
        &p,
        serde_json::to_string_pretty(json).map_err(anyhow::Error::from)?,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    Ok(p)
}

fn write_svg(path: &Path, svg: String) -> Result<(), Failure> {
    std::fs::write(path, svg).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(())
}

fn rows_json(rows: &[Row]) -> serde_json::Value {
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
fn unavailable_lines(rows: &[Row]) -> String {
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
fn nice_note(c: &FairCommon) {
    if c.nice != 0 {
        println!(
            "every busy process's nice value shifted by {:+} (--nice); GPS uses the shifted weights\n",
            c.nice
        );
    }
}

fn ok_word(b: bool) -> &'static str {
    if b {
        "MET"
    } else {
        "NOT MET"
    }
}

impl Row {
    /// The row's identity without its runs (for the "not available" lines).
    fn clone_meta(&self) -> Row {
        Row {
            engine: self.engine.clone(),
            policy: self.policy.clone(),
            config: self.config.clone(),
            cells: Vec::new(),
            unavailable: self.unavailable.clone(),
        }
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
fn pct_err(c: &Cell) -> (f64, f64) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut sc = scenario(
            "test",
            PolicyName::Default,
            Nanos::from_ms(100),
            1,
            Nanos::from_ms(30),
            &[busy("P0", "1", 0, None), busy("P1", "1", 0, None)],
            &[],
        )
        .unwrap_or_else(|_| panic!("scenario"));
        sc.processes.iter_mut().for_each(|p| p.command = None);
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
