//! `schedkit experiment fidelity`: how far the simulator's models of the kernel's fair class
//! (`eevdf`, `cfs`) are from the kernel itself, scenario by scenario and metric by metric.
//!
//! Each scenario file is run for real (`policy = "default"`: the kernel's scheduler; through a
//! [`RealRunner`], repeated: [`KernelRunner`] is the real engine's) and simulated under each
//! model from the same file. Both sides are reduced to a [`Measure`]:
//!
//! | metric | real (kernel) | sim (trace) |
//! |---|---|---|
//! | CPU share per process, % of the job's CPU time | schedstat CPU time of its threads / that of all job threads | run time / all run time |
//! | run-queue waiting, ms per thread | schedstat `run_delay` | time ready but not running (arrival, wake-up, preemption to dispatch) |
//! | response, ms | mean turnaround of threads with a `burst` (from the run's trace) | the same from the simulated trace |
//! | wake-up latency p50 / p99, us | how late each `clock_nanosleep` of a `pattern` thread returned | wake-up to dispatch |
//! | context switches / s | voluntary + involuntary switches of the job's threads | deschedules before finishing (preempted, expired, blocked) |
//! | migrations / s | perf `cpu-migrations` of the job (else CPU changes seen) | `Migrate` events |
//!
//! Shares are of the job's CPU time, not of the machine: on a machine shared with other work
//! (and with autogroup, where the job's session competes as one entity) the job gets less than
//! the whole machine, which the model cannot know; `job_pct` (the job's CPU time over the
//! window's capacity) shows how much it got.
//!
//! The error of a model on a metric is computed against every real repeat, and reported as a
//! mean with a 95 % confidence interval over the repeats: shares as the largest absolute
//! difference over processes (percentage points), wake-up latencies as the ratio sim / real,
//! migrations per second as the absolute difference |sim - real| (per second, target: within
//! [`MIGRATIONS_BOUND`]), the rest as relative errors |sim - real| / real (percent). A
//! `within 2x` target is marked untestable, neither met nor missed, when the real repeats
//! themselves lie more than 4x apart ([`RATIO_TESTABLE_SPREAD`]).

use crate::progress::Progress;
use crate::stats::mean_ci;
use crate::Error;
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::{Event, Reason, TraceLog};
use schedkit_render::chart::{grid, Axis, BarChart, BarSeries, Chart};
use serde::{Deserialize, Serialize};

mod kernel;
mod recorded;
pub use kernel::{load_scenarios, parse_models, scenario_files, KernelRunner, MachineState};
pub use recorded::Recorded;

/// The stated bound on the migrations/s error: the absolute difference, per second.
pub const MIGRATIONS_BOUND: f64 = 2.0;
const MIGRATIONS_TARGET: &str = "<= 2 /s";

/// What one run (real or simulated) of one scenario measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Measure {
    /// Process names, in file order; `share_pct` and `wait_ms` follow them.
    pub names: Vec<String>,
    pub share_pct: Vec<f64>,
    /// The job's CPU time over the window's capacity (window x CPUs), %.
    pub job_pct: f64,
    /// Mean run-queue waiting per thread of each process, ms.
    pub wait_ms: Vec<f64>,
    /// Mean run-queue waiting over every thread, ms.
    pub wait_all_ms: f64,
    /// Mean turnaround of threads with a bounded `burst` that finished, ms.
    pub response_ms: Option<f64>,
    pub wake_p50_us: Option<f64>,
    pub wake_p99_us: Option<f64>,
    pub wakeups: usize,
    pub switches_per_s: f64,
    pub migrations_per_s: f64,
}

/// Runs a scenario on the real kernel ([`KernelRunner`] with the real engine; tests may
/// supply their own).
pub trait RealRunner {
    /// Runs `scenario` once under the kernel's own scheduler.
    fn run(&mut self, scenario: &Scenario) -> Result<Measure, Error>;
}

/// The experiment's options.
pub struct FidelityOptions {
    pub scenarios: Vec<Scenario>,
    /// Real runs per scenario.
    pub repeats: usize,
    /// Simulator models compared (`eevdf`, `cfs`).
    pub models: Vec<PolicyName>,
}

/// One model's error on one metric of one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorRow {
    pub scenario: String,
    pub model: String,
    pub metric: &'static str,
    /// The model's value (`NaN` when the metric does not apply).
    pub sim: f64,
    /// The real value: mean and 95 % CI half-width over the repeats.
    pub real: f64,
    pub real_ci: f64,
    /// The error (unit in `unit`): mean and 95 % CI half-width over the repeats.
    pub error: f64,
    pub error_ci: f64,
    pub unit: &'static str,
    /// The target for this metric and scenario, and whether the mean error meets it.
    pub target: Option<&'static str>,
    pub met: Option<bool>,
    /// For a ratio target (`within 2x`): the real repeats' own spread, largest over smallest,
    /// when it exceeds [`RATIO_TESTABLE_SPREAD`]. No value is then within 2x of every repeat,
    /// so the target cannot be met or missed by any model and `met` is `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untestable_spread: Option<f64>,
}

/// A `within 2x` target is testable only when the real repeats lie within 4x of each other
/// (2 x 2): a model value `v` is within 2x of every repeat exactly when
/// `max / 2 <= v <= 2 x min`, which exists only if `max / min <= 4`. Past that the real p99
/// itself varies more between repeats than the target allows (a tail set by a handful of
/// wake-ups, which the machine's interrupts and host decide), and an arithmetic mean of
/// ratios with a normal interval says nothing.
pub const RATIO_TESTABLE_SPREAD: f64 = 4.0;

/// Everything the experiment produced.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityResult {
    pub real: Vec<(String, Vec<Measure>)>,
    pub sim: Vec<(String, String, Measure)>,
    pub rows: Vec<ErrorRow>,
}

/// The scenario's short name (file stem).
pub fn scenario_name(s: &Scenario) -> String {
    std::path::Path::new(&s.file())
        .file_stem()
        .map_or(s.file().to_string(), |x| x.to_string_lossy().into_owned())
}

/// Whether any thread of the scenario sleeps (a `pattern`).
pub fn has_sleepers(s: &Scenario) -> bool {
    s.processes().iter().any(|p| p.pattern().is_some())
}

/// Runs the experiment: real repeats through `real`; one `progress` step per real run and
/// per simulated model.
pub fn run(
    opts: &FidelityOptions,
    real: &mut dyn RealRunner,
    progress: &dyn Progress,
) -> Result<FidelityResult, Error> {
    if opts.repeats == 0 {
        return Err(Error::bad_option("repeats", "0", "at least one real run"));
    }
    progress.start((opts.scenarios.len() * (opts.repeats + opts.models.len())) as u64);
    let mut out = FidelityResult {
        real: Vec::new(),
        sim: Vec::new(),
        rows: Vec::new(),
    };
    for sc in &opts.scenarios {
        let name = scenario_name(sc);
        let mut reals = Vec::new();
        for k in 0..opts.repeats {
            progress.message(&format!("{name}: real run {}/{}", k + 1, opts.repeats));
            reals.push(real.run(sc)?);
            progress.step();
        }
        for &model in &opts.models {
            progress.message(&format!("{name}: simulated under {model}"));
            let s = sc.with_policy_spec(sc.policy().clone().with_name(model))?;
            let (report, log, _) = schedkit_sim::simulate_report(&s, true)?;
            let m = sim_measure(&s, &report, &log.expect("trace kept"));
            out.rows
                .extend(compare(&name, model, has_sleepers(sc), &m, &reals));
            out.sim.push((name.clone(), model.to_string(), m));
            progress.step();
        }
        out.real.push((name, reals));
    }
    progress.finish();
    Ok(out)
}

/// The `p`-quantile (0..1) of `xs` by the nearest rank: the one percentile definition
/// (`schedkit_runtime::paws::stats::percentile`, docs/metrics.md).
pub fn quantile(xs: &mut [u64], p: f64) -> Option<f64> {
    schedkit_runtime::paws::stats::percentile(xs, p * 100.0).map(|v| v as f64)
}

/// Mean turnaround of the bounded threads that finished, ms.
pub fn response_ms(s: &Scenario, r: &Report) -> Option<f64> {
    let bounded: Vec<&str> = s
        .processes()
        .iter()
        .filter(|p| p.burst().is_some())
        .map(|p| p.name())
        .collect();
    let t: Vec<f64> = r
        .threads
        .iter()
        .filter(|t| bounded.contains(&t.process.as_str()) && t.finish_ns.is_some())
        .map(|t| t.turnaround_ns as f64 / 1e6)
        .collect();
    (!t.is_empty()).then(|| t.iter().sum::<f64>() / t.len() as f64)
}

/// Reduces a simulated run to a [`Measure`] (module docs for the definitions).
pub fn sim_measure(s: &Scenario, r: &Report, log: &TraceLog) -> Measure {
    let end_ns = r.window_ns.max(1) as f64;
    let slots = log
        .events
        .iter()
        .filter_map(slot_of)
        .max()
        .map_or(0, |m| m + 1);
    let mut ready_since: Vec<Option<u64>> = vec![None; slots];
    let mut woke_at: Vec<Option<u64>> = vec![None; slots];
    let mut proc_of: Vec<usize> = vec![usize::MAX; slots];
    let mut wait = vec![0u64; s.processes().len()];
    let mut wakes = Vec::new();
    for e in &log.events {
        match *e {
            Event::Arrive { t, slot, owner } => {
                if let schedkit_core::trace::Owner::Process { process, .. } = owner {
                    proc_of[slot as usize] = process;
                }
                ready_since[slot as usize] = Some(t.0);
            }
            Event::Wake { t, slot } => {
                ready_since[slot as usize] = Some(t.0);
                woke_at[slot as usize] = Some(t.0);
            }
            Event::Block { slot, .. } => ready_since[slot as usize] = None,
            Event::Deschedule {
                t,
                slot,
                reason: Reason::Preempted | Reason::Expired,
                ..
            } => {
                ready_since[slot as usize] = Some(t.0);
            }
            Event::Dispatch { t, slot, .. } => {
                let i = slot as usize;
                if let (Some(since), Some(&p)) = (ready_since[i].take(), proc_of.get(i)) {
                    if p < wait.len() {
                        wait[p] += t.0 - since;
                    }
                }
                if let Some(w) = woke_at[i].take() {
                    wakes.push(t.0 - w);
                }
            }
            _ => {}
        }
    }
    let end = r.window_ns;
    for (i, since) in ready_since.iter().enumerate() {
        if let (Some(since), Some(&p)) = (since, proc_of.get(i)) {
            if p < wait.len() && *since < end {
                wait[p] += end - since;
            }
        }
    }
    let threads: Vec<f64> = s.processes().iter().map(|p| p.threads() as f64).collect();
    let switches: u64 = r.threads.iter().map(|t| t.context_switches).sum();
    let mut m = Measure {
        names: s.processes().iter().map(|p| p.name().to_string()).collect(),
        share_pct: shares(
            &r.processes
                .iter()
                .take(s.processes().len())
                .map(|p| p.cpu_ns as f64)
                .collect::<Vec<_>>(),
        ),
        job_pct: 100.0 * r.processes.iter().map(|p| p.cpu_ns as f64).sum::<f64>()
            / (end_ns * s.cores() as f64),
        wait_ms: wait
            .iter()
            .zip(&threads)
            .map(|(w, n)| *w as f64 / 1e6 / n)
            .collect(),
        wait_all_ms: wait.iter().sum::<u64>() as f64 / 1e6 / threads.iter().sum::<f64>(),
        response_ms: response_ms(s, r),
        wake_p50_us: None,
        wake_p99_us: None,
        wakeups: wakes.len(),
        switches_per_s: switches as f64 / (end_ns / 1e9),
        migrations_per_s: r.summary.migrations as f64 / (end_ns / 1e9),
    };
    m.wake_p50_us = quantile(&mut wakes, 0.5).map(|x| x / 1e3);
    m.wake_p99_us = quantile(&mut wakes, 0.99).map(|x| x / 1e3);
    m
}

/// Each value as a percentage of their sum.
pub fn shares(cpu: &[f64]) -> Vec<f64> {
    let total: f64 = cpu.iter().sum::<f64>().max(1.0);
    cpu.iter().map(|c| 100.0 * c / total).collect()
}

fn slot_of(e: &Event) -> Option<usize> {
    match *e {
        Event::Arrive { slot, .. }
        | Event::Wake { slot, .. }
        | Event::Block { slot, .. }
        | Event::Dispatch { slot, .. }
        | Event::Deschedule { slot, .. } => Some(slot as usize),
        _ => None,
    }
}

/// A target: its text, and the test of a mean error against it.
type Target = (&'static str, fn(f64) -> bool);

/// One metric's sim value, real values per repeat and errors per repeat.
struct Metric {
    name: &'static str,
    unit: &'static str,
    sim: f64,
    real: Vec<f64>,
    err: Vec<f64>,
    target: Option<Target>,
    /// Whether the target is a ratio one (`within 2x`), checked for testability.
    ratio: bool,
}

fn rel(sim: f64, real: f64) -> f64 {
    100.0 * (sim - real).abs() / real.abs().max(1e-9)
}

/// The model's errors on every metric against the real repeats.
fn compare(
    scenario: &str,
    model: PolicyName,
    sleepers: bool,
    sim: &Measure,
    reals: &[Measure],
) -> Vec<ErrorRow> {
    let share_err = |r: &Measure| {
        sim.share_pct
            .iter()
            .zip(&r.share_pct)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    };
    let opt = |f: fn(&Measure) -> Option<f64>| -> Vec<(f64, f64)> {
        match f(sim) {
            Some(s) => reals.iter().filter_map(f).map(|r| (s, r)).collect(),
            None => Vec::new(),
        }
    };
    let mut ms = vec![
        Metric {
            name: "share",
            unit: "points",
            sim: f64::NAN,
            real: Vec::new(),
            err: reals.iter().map(share_err).collect(),
            target: (!sleepers).then_some(("<= 1 point", (|e| e <= 1.0) as fn(f64) -> bool)),
            ratio: false,
        },
        Metric {
            name: "waiting",
            unit: "%",
            sim: sim.wait_all_ms,
            real: reals.iter().map(|r| r.wait_all_ms).collect(),
            err: reals
                .iter()
                .map(|r| rel(sim.wait_all_ms, r.wait_all_ms))
                .collect(),
            target: (!sleepers).then_some(("<= 20 %", (|e| e <= 20.0) as fn(f64) -> bool)),
            ratio: false,
        },
    ];
    let ratio_target: fn(f64) -> bool = |e| (0.5..=2.0).contains(&e);
    for (name, unit, f, ratio, target) in [
        (
            "response",
            "%",
            (|m: &Measure| m.response_ms) as fn(&Measure) -> Option<f64>,
            false,
            None,
        ),
        ("wake p50", "x", |m| m.wake_p50_us, true, None),
        (
            "wake p99",
            "x",
            |m| m.wake_p99_us,
            true,
            Some(("within 2x", ratio_target)),
        ),
    ] {
        let pairs = opt(f);
        if pairs.is_empty() {
            continue;
        }
        ms.push(Metric {
            name,
            unit,
            sim: pairs[0].0,
            real: pairs.iter().map(|p| p.1).collect(),
            err: pairs
                .iter()
                .map(|&(s, r)| if ratio { s / r.max(1e-9) } else { rel(s, r) })
                .collect(),
            target,
            ratio,
        });
    }
    ms.push(Metric {
        name: "switches/s",
        unit: "%",
        sim: sim.switches_per_s,
        real: reals.iter().map(|r| r.switches_per_s).collect(),
        err: reals
            .iter()
            .map(|r| rel(sim.switches_per_s, r.switches_per_s))
            .collect(),
        target: None,
        ratio: false,
    });
    // Migrations are rare (0-30 per second here), so a relative error explodes where a
    // repeat saw none: the error is the absolute difference, against a stated bound.
    ms.push(Metric {
        name: "migrations/s",
        unit: "/s",
        sim: sim.migrations_per_s,
        real: reals.iter().map(|r| r.migrations_per_s).collect(),
        err: reals
            .iter()
            .map(|r| (sim.migrations_per_s - r.migrations_per_s).abs())
            .collect(),
        target: Some((MIGRATIONS_TARGET, |e| e <= MIGRATIONS_BOUND)),
        ratio: false,
    });
    ms.into_iter()
        .map(|m| {
            let (real, real_ci) = mean_ci(&m.real);
            let (error, error_ci) = mean_ci(&m.err);
            let untestable_spread = (m.ratio && m.target.is_some())
                .then(|| spread(&m.real))
                .flatten()
                .filter(|&x| x > RATIO_TESTABLE_SPREAD);
            ErrorRow {
                scenario: scenario.to_string(),
                model: model.to_string(),
                metric: m.name,
                sim: m.sim,
                real,
                real_ci,
                error,
                error_ci,
                unit: m.unit,
                target: m.target.map(|t| t.0),
                met: m
                    .target
                    .filter(|_| untestable_spread.is_none())
                    .map(|t| (t.1)(error)),
                untestable_spread,
            }
        })
        .collect()
}

/// Largest over smallest of positive values (`None` without two of them).
fn spread(xs: &[f64]) -> Option<f64> {
    let pos = xs.iter().copied().filter(|&x| x > 0.0);
    let (lo, hi) = pos.fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(x), h.max(x)));
    (xs.len() >= 2 && hi > 0.0).then_some(hi / lo)
}

/// The table: one line per scenario, metric and model.
pub fn render_table(rows: &[ErrorRow]) -> String {
    let mut s = format!(
        "{:<22} {:<13} {:<6} {:>11} {:>18} {:>18} {:<12} {}\n",
        "scenario", "metric", "model", "sim", "real (95% CI)", "error (95% CI)", "target", "met"
    );
    for r in rows {
        let f = |x: f64| {
            if x.is_nan() {
                "-".to_string()
            } else {
                format!("{x:.3}")
            }
        };
        s += &format!(
            "{:<22} {:<13} {:<6} {:>11} {:>18} {:>18} {:<12} {}\n",
            r.scenario,
            r.metric,
            r.model,
            f(r.sim),
            format!("{} ±{}", f(r.real), f(r.real_ci)),
            format!("{} ±{} {}", f(r.error), f(r.error_ci), r.unit),
            r.target.unwrap_or("-"),
            match (r.met, r.untestable_spread) {
                (Some(true), _) => "yes".to_string(),
                (Some(false), _) => "NO".to_string(),
                (None, Some(x)) => format!("untestable (repeats {x:.1}x apart)"),
                (None, None) => "-".to_string(),
            }
        );
    }
    s
}

/// Whether `eevdf` is at least as close as `cfs` on each (scenario, metric): the pairs where
/// it is not, with both errors.
pub fn eevdf_not_closer(rows: &[ErrorRow]) -> Vec<(String, &'static str, f64, f64)> {
    let mut out = Vec::new();
    for e in rows.iter().filter(|r| r.model == "eevdf") {
        let Some(c) = rows
            .iter()
            .find(|r| r.model == "cfs" && r.scenario == e.scenario && r.metric == e.metric)
        else {
            continue;
        };
        // Ratios are closer the nearer they are to 1.
        let dist = |r: &ErrorRow| {
            if r.unit == "x" {
                (r.error.max(1e-9)).ln().abs()
            } else {
                r.error
            }
        };
        if dist(e) > dist(c) {
            out.push((e.scenario.clone(), e.metric, e.error, c.error));
        }
    }
    out
}

/// The chart: one panel per metric, scenarios along x, a bar per model with its 95 % CI.
pub fn render_chart(rows: &[ErrorRow], models: &[PolicyName]) -> String {
    let mut scenarios: Vec<String> = Vec::new();
    for r in rows {
        if !scenarios.contains(&r.scenario) {
            scenarios.push(r.scenario.clone());
        }
    }
    let panels = [
        ("share", "largest share error", "points"),
        ("waiting", "run-queue waiting error", "%"),
        ("wake p99", "wake-up p99, sim / real", "x"),
        ("switches/s", "context switches/s error", "%"),
        ("migrations/s", "migrations/s error", "per s"),
        ("response", "response time error", "%"),
    ];
    let charts: Vec<BarChart> = panels
        .iter()
        .map(|&(metric, title, unit)| {
            let cats: Vec<String> = scenarios
                .iter()
                .filter(|s| rows.iter().any(|r| &r.scenario == *s && r.metric == metric))
                .cloned()
                .collect();
            // A target that the repeats' own spread makes untestable says so under its bars.
            let labels: Vec<String> = cats
                .iter()
                .map(|s| {
                    let untestable = rows.iter().any(|r| {
                        &r.scenario == s && r.metric == metric && r.untestable_spread.is_some()
                    });
                    if untestable {
                        format!("{s} (untestable)")
                    } else {
                        s.clone()
                    }
                })
                .collect();
            let mut c = BarChart::new(title, "scenario", Axis::new(title, unit), labels);
            c.legend_title = Some("model".into());
            for m in models {
                let pick = |s: &String| {
                    rows.iter()
                        .find(|r| &r.scenario == s && r.metric == metric && r.model == m.as_str())
                };
                let vals: Vec<f64> = cats
                    .iter()
                    .map(|s| pick(s).map_or(0.0, |r| r.error))
                    .collect();
                let errs: Vec<(f64, f64)> = cats
                    .iter()
                    .map(|s| {
                        pick(s).map_or((0.0, 0.0), |r| (r.error - r.error_ci, r.error + r.error_ci))
                    })
                    .collect();
                c.series
                    .push(BarSeries::new(m.as_str(), vals).with_errors(errs));
            }
            c
        })
        .collect();
    let refs: Vec<&dyn Chart> = charts.iter().map(|c| c as &dyn Chart).collect();
    grid(
        "schedkit experiment fidelity: simulator models against the kernel (error per scenario, 95 % CI over real repeats)",
        &refs,
        2,
        620.0,
        360.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_measure_counts_waiting_and_wake_ups() {
        // One core: a hog and a thread running 1 ms every 10 ms, 100 ms.
        let text = "cores = 1\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"100ms\"\n\
             [[process]]\nname = \"hog\"\n[[process]]\nname = \"s\"\n\
             pattern = [{ run = \"1ms\" }, { sleep = \"9ms\" }]\n";
        let sc = Scenario::parse("t.toml", text).unwrap();
        let (r, log, _) = schedkit_sim::simulate_report(&sc, true).unwrap();
        let m = sim_measure(&sc, &r, &log.unwrap());
        // Shares of the job add to 100 %, the sleeper's 9-10 % (its tenth phase may end past
        // the horizon: eevdf's wake-up path and waits behind the hog's protected slice push
        // each phase later); the job used the whole core.
        assert!((m.share_pct[0] + m.share_pct[1] - 100.0).abs() < 1e-9);
        assert!(
            (8.99..=10.01).contains(&m.share_pct[1]),
            "{:?}",
            m.share_pct
        );
        assert!((m.job_pct - 100.0).abs() < 1e-9, "{}", m.job_pct);
        // The hog waits exactly while the sleeper runs: CPU time of the sleeper.
        let sleeper_cpu = r.processes[1].cpu_ns as f64 / 1e6;
        assert!((m.wait_ms[0] - sleeper_cpu).abs() < 1e-9, "{m:?}");
        // Nine timers at most; the later phases may put the last wake-up or its dispatch past
        // the horizon (see the share above).
        assert!((8..=9).contains(&m.wakeups), "{m:?}");
        assert!(m.wake_p99_us.unwrap() <= 4_000.0, "{m:?}");
    }

    #[test]
    fn errors_are_per_repeat_and_eevdf_is_compared_with_cfs() {
        let real = |share: f64| Measure {
            names: vec!["a".into()],
            share_pct: vec![share],
            wait_ms: vec![10.0],
            wait_all_ms: 10.0,
            switches_per_s: 100.0,
            migrations_per_s: 1.0,
            ..Measure::default()
        };
        let reals = [real(50.0), real(52.0)];
        let sim = Measure {
            wait_all_ms: 12.0,
            ..real(51.0)
        };
        let rows = compare("x", PolicyName::Eevdf, false, &sim, &reals);
        let share = rows.iter().find(|r| r.metric == "share").unwrap();
        assert!((share.error - 1.0).abs() < 1e-12 && share.met == Some(true));
        let wait = rows.iter().find(|r| r.metric == "waiting").unwrap();
        assert!((wait.error - 20.0).abs() < 1e-9 && wait.met == Some(true));
        // Migrations: absolute per second (sim 1.0 against 1.0 and 1.0: no error).
        let mig = rows.iter().find(|r| r.metric == "migrations/s").unwrap();
        assert!(mig.error.abs() < 1e-12 && mig.unit == "/s" && mig.met == Some(true));
        let mut all = rows.clone();
        let worse = Measure {
            wait_all_ms: 10.0,
            ..real(55.0)
        };
        all.extend(compare("x", PolicyName::Cfs, false, &worse, &reals));
        let not = eevdf_not_closer(&all);
        // cfs's waiting is exact (0 %), eevdf's 20 %: that one pair is named.
        assert_eq!(not.len(), 1, "{not:?}");
        assert_eq!(not[0].1, "waiting");
    }

    #[test]
    fn a_ratio_target_is_untestable_when_the_repeats_lie_4x_apart() {
        let real = |p99: f64| Measure {
            names: vec!["a".into()],
            share_pct: vec![100.0],
            wake_p99_us: Some(p99),
            ..Measure::default()
        };
        let p99 = |rows: &[ErrorRow]| rows.iter().find(|r| r.metric == "wake p99").cloned();
        // 500 and 1,900 us are 3.8x apart: 1,000 us is within 2x of both (0.5 .. 2x of each),
        // ratios 2.0 and 0.53, mean 1.26: met.
        let sim = real(1_000.0);
        let rows = compare(
            "x",
            PolicyName::Eevdf,
            true,
            &sim,
            &[real(500.0), real(1_900.0)],
        );
        let r = p99(&rows).unwrap();
        assert_eq!((r.met, r.untestable_spread), (Some(true), None));
        // 200 and 2,000 us are 10x apart: no value lies within 2x of both (it would have to
        // be at most 400 and at least 1,000), so the row is neither met nor missed.
        let rows = compare(
            "x",
            PolicyName::Eevdf,
            true,
            &sim,
            &[real(200.0), real(2_000.0)],
        );
        let r = p99(&rows).unwrap();
        assert_eq!(r.met, None);
        assert!((r.untestable_spread.unwrap() - 10.0).abs() < 1e-12);
        assert!(render_table(&rows).contains("untestable (repeats 10.0x apart)"));
        assert!(render_chart(&rows, &[PolicyName::Eevdf]).contains("x (untestable)"));
        // One repeat: nothing to compare it with, the target is tested as before.
        let rows = compare("x", PolicyName::Eevdf, true, &sim, &[real(200.0)]);
        assert_eq!(p99(&rows).unwrap().met, Some(false));
    }
}
