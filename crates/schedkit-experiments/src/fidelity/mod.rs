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
//! The simulated side runs two stand-ins the real runs have on the job's CPUs, both left out
//! of every metric: the real engine's sampler ([`with_engine_thread`]) and the machine's other
//! work as the real repeats measured it (`outside.rs`, [`with_outside_work`]; random, so
//! simulated once per real repeat and averaged as the repeats are, [`mean_of_draws`]).
//!
//! The error of a model on a metric is its value against the **mean of the real repeats**
//! (geometric for wake-up latencies), with the interval of that error over the 95 %
//! confidence interval of the real mean; a target is met, missed, undecided or untestable by
//! where that interval lies (`judge.rs`, one rule for every metric and model). Shares: the
//! largest absolute difference over processes (percentage points); wake-up latencies: the
//! ratio sim / real; migrations per second: the absolute difference (per second, target:
//! within [`MIGRATIONS_BOUND`]); the rest: relative errors |sim - real| / real (percent).

use crate::progress::Progress;
use crate::Error;
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::Nanos;
use schedkit_render::chart::{grid, Axis, BarChart, BarSeries, Chart};
use serde::{Deserialize, Serialize};

mod judge;
mod kernel;
mod outside;
mod recorded;
mod simulated;
pub use judge::{as_close_somewhere, judge, Bound, Judged, Part, Scale, Verdict};
pub use kernel::{load_scenarios, parse_models, scenario_files, KernelRunner, MachineState};
pub use outside::{
    mean_of_draws, render_other_work, with_outside_work, Outside, OutsideTask, OTHER_WORK,
};
pub use recorded::Recorded;
pub use simulated::{
    render_wake_path, sim_measure, simulated, with_engine_thread, ENGINE_THREAD, MODEL_SETUP,
};

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
    /// A real run's other work on the job's CPUs (`outside.rs`), where the engine measured
    /// it; the simulated runs replay the repeats' mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside: Option<Outside>,
}

/// Runs a scenario on the real kernel ([`KernelRunner`] with the real engine; tests may
/// supply their own).
pub trait RealRunner {
    /// Runs `scenario` once under the kernel's own scheduler.
    fn run(&mut self, scenario: &Scenario) -> Result<Measure, Error>;
    /// The machine's wake-up path, which the `eevdf` model is given (`[policy] wake_path`);
    /// `None`: not measured, the model keeps its default.
    fn wake_path(&mut self) -> Result<Option<Nanos>, Error> {
        Ok(None)
    }
}

/// The experiment's options.
pub struct FidelityOptions {
    pub scenarios: Vec<Scenario>,
    /// Real runs per scenario.
    pub repeats: usize,
    /// Simulator models compared (`eevdf`, `cfs`).
    pub models: Vec<PolicyName>,
}

/// One model's error on one metric of one scenario (`judge.rs` for the rule).
#[derive(Clone, Debug, Serialize)]
pub struct ErrorRow {
    pub scenario: String,
    pub model: String,
    pub metric: &'static str,
    /// The model's value (`NaN` for shares, which are per process).
    pub sim: f64,
    /// The real mean over the repeats (geometric for wake-up latencies; `NaN` for shares) and
    /// its 95 % confidence interval.
    pub real: f64,
    pub real_lo: f64,
    pub real_hi: f64,
    /// The error against the real mean (unit in `unit`), and its smallest and largest value
    /// over the real mean's interval.
    pub error: f64,
    pub error_lo: f64,
    pub error_hi: f64,
    pub unit: &'static str,
    /// The target for this metric and scenario, and its verdict.
    pub target: Option<&'static str>,
    pub verdict: Option<Verdict>,
    /// What was compared, on the comparison scale (which model is closer is decided on it).
    #[serde(skip)]
    pub parts: Vec<Part>,
}

/// Everything the experiment produced.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityResult {
    /// The machine's wake-up path the models were given ([`RealRunner::wake_path`]), ns.
    pub wake_path_ns: Option<u64>,
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
    progress.message("measuring the machine's wake-up path");
    let wake_path = real.wake_path()?;
    let mut out = FidelityResult {
        wake_path_ns: wake_path.map(|p| p.0),
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
        // The other work the repeats met, once for every model and draw.
        let other = Outside::mean(&reals);
        for &model in &opts.models {
            progress.message(&format!("{name}: simulated under {model}"));
            // With the other work's random stand-in, as many draws as real repeats, averaged
            // as they are; without it the simulation is exact and once is enough.
            let draws = if other.is_some() { reals.len() } else { 1 };
            let mut ms = Vec::with_capacity(draws);
            for draw in 0..draws as u64 {
                let s = simulated(sc, other.as_ref(), draw, model, wake_path)?;
                let (report, log, _) = schedkit_sim::simulate_report(&s, true)?;
                ms.push(sim_measure(sc, &report, &log.expect("trace kept")));
            }
            let m = mean_of_draws(&ms);
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

/// Each value as a percentage of their sum.
pub fn shares(cpu: &[f64]) -> Vec<f64> {
    let total: f64 = cpu.iter().sum::<f64>().max(1.0);
    cpu.iter().map(|c| 100.0 * c / total).collect()
}

/// One metric: the model's value, and per compared part (one, or one per process for
/// shares) the model's value and the real repeats.
struct Metric {
    name: &'static str,
    unit: &'static str,
    scale: Scale,
    sim: f64,
    parts: Vec<(f64, Vec<f64>)>,
    target: Option<(&'static str, Bound)>,
}

/// The model's errors on every metric against the real repeats.
fn compare(
    scenario: &str,
    model: PolicyName,
    sleepers: bool,
    sim: &Measure,
    reals: &[Measure],
) -> Vec<ErrorRow> {
    let column = |f: &dyn Fn(&Measure) -> f64| -> Vec<f64> { reals.iter().map(f).collect() };
    let mut ms = vec![
        Metric {
            name: "share",
            unit: "points",
            scale: Scale::Absolute,
            sim: f64::NAN,
            parts: (sim.share_pct.iter().enumerate())
                .map(|(p, &s)| (s, column(&|r| r.share_pct.get(p).copied().unwrap_or(0.0))))
                .collect(),
            target: (!sleepers).then_some(("<= 1 point", Bound(1.0))),
        },
        Metric {
            name: "waiting",
            unit: "%",
            scale: Scale::Relative,
            sim: sim.wait_all_ms,
            parts: vec![(sim.wait_all_ms, column(&|r| r.wait_all_ms))],
            target: (!sleepers).then_some(("<= 20 %", Bound(20.0))),
        },
    ];
    for (name, unit, scale, f, target) in [
        (
            "response",
            "%",
            Scale::Relative,
            (|m: &Measure| m.response_ms) as fn(&Measure) -> Option<f64>,
            None,
        ),
        ("wake p50", "x", Scale::Ratio, |m| m.wake_p50_us, None),
        (
            "wake p99",
            "x",
            Scale::Ratio,
            |m| m.wake_p99_us,
            Some(("within 2x", Bound(2.0))),
        ),
    ] {
        let Some(s) = f(sim) else { continue };
        let real: Vec<f64> = reals.iter().filter_map(f).collect();
        if real.is_empty() {
            continue;
        }
        ms.push(Metric {
            name,
            unit,
            scale,
            sim: s,
            parts: vec![(s, real)],
            target,
        });
    }
    ms.push(Metric {
        name: "switches/s",
        unit: "%",
        scale: Scale::Relative,
        sim: sim.switches_per_s,
        parts: vec![(sim.switches_per_s, column(&|r| r.switches_per_s))],
        target: None,
    });
    // Migrations are rare (0-30 per second here), so a relative error explodes where a
    // repeat saw none: the error is the absolute difference, against a stated bound.
    ms.push(Metric {
        name: "migrations/s",
        unit: "/s",
        scale: Scale::Absolute,
        sim: sim.migrations_per_s,
        parts: vec![(sim.migrations_per_s, column(&|r| r.migrations_per_s))],
        target: Some((MIGRATIONS_TARGET, Bound(MIGRATIONS_BOUND))),
    });
    ms.into_iter()
        .map(|m| {
            let parts: Vec<Part> = (m.parts.iter())
                .map(|(s, r)| Part::new(m.scale, *s, r))
                .collect();
            let j = judge(m.scale, &parts, m.target.map(|t| t.1));
            // The real mean as the reader knows it: back from logarithms for a ratio.
            let (real, real_lo, real_hi) = match (m.parts.len(), m.scale) {
                (1, Scale::Ratio) => (parts[0].mean.exp(), parts[0].lo.exp(), parts[0].hi.exp()),
                (1, _) => (parts[0].mean, parts[0].lo, parts[0].hi),
                _ => (f64::NAN, f64::NAN, f64::NAN),
            };
            ErrorRow {
                scenario: scenario.to_string(),
                model: model.to_string(),
                metric: m.name,
                sim: m.sim,
                real,
                real_lo,
                real_hi,
                error: j.error,
                error_lo: j.error_lo,
                error_hi: j.error_hi,
                unit: m.unit,
                target: m.target.map(|t| t.0),
                verdict: j.verdict,
                parts,
            }
        })
        .collect()
}

/// How the table's columns are read (printed under it).
pub const TABLE_LEGEND: &str = "\
error: the model against the mean of the real repeats (geometric for wake-up latencies); the
  interval [lo, hi] is that error over the real mean's 95 % confidence interval (Student's t
  over the repeats; for wake-up latencies on the log scale). The target is met (yes) when the
  whole interval is within it, missed (NO) when the whole interval is outside it, untestable
  when the real mean's interval is too wide for any model value to be shown within it (a model
  cannot be judged finer than the kernel's run-to-run spread), undecided otherwise (a value
  nearer the real mean could be shown within it: more repeats would decide).
";

/// The table: one line per scenario, metric and model ([`TABLE_LEGEND`] says how to read it).
pub fn render_table(rows: &[ErrorRow]) -> String {
    let mut s = format!(
        "{:<18} {:<12} {:<5} {:>9} {:>26} {:>30} {:<10} {}\n",
        "scenario",
        "metric",
        "model",
        "sim",
        "real mean [95% CI]",
        "error [interval]",
        "target",
        "met"
    );
    let f = |x: f64| {
        if x.is_nan() {
            "-".to_string()
        } else if x.is_infinite() {
            "inf".to_string()
        } else if x.abs() >= 100.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.3}")
        }
    };
    for r in rows {
        let real = if r.real.is_nan() {
            "-".to_string()
        } else {
            format!("{} [{}, {}]", f(r.real), f(r.real_lo), f(r.real_hi))
        };
        s += &format!(
            "{:<18} {:<12} {:<5} {:>9} {:>26} {:>30} {:<10} {}\n",
            r.scenario,
            r.metric,
            r.model,
            f(r.sim),
            real,
            format!(
                "{} [{}, {}] {}",
                f(r.error),
                f(r.error_lo),
                f(r.error_hi),
                r.unit
            ),
            r.target.unwrap_or("-"),
            r.verdict.map_or("-", Verdict::word),
        );
    }
    s
}

/// Where `eevdf` is not at least as close as `cfs` against the real mean: one per
/// (scenario, metric).
#[derive(Clone, Debug, PartialEq)]
pub struct NotCloser {
    pub scenario: String,
    pub metric: &'static str,
    pub eevdf: f64,
    pub cfs: f64,
    /// Whether eevdf is farther for every real mean the repeats allow (the real mean's 95 %
    /// interval); if not, the data do not tell which model is closer.
    pub decided: bool,
}

/// Whether `eevdf` is at least as close as `cfs` on each (scenario, metric): the pairs where
/// it is not, against the real mean, each saying whether the real interval decides it
/// ([`as_close_somewhere`]).
pub fn eevdf_not_closer(rows: &[ErrorRow]) -> Vec<NotCloser> {
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
                (r.error.max(1e-300)).ln().abs()
            } else {
                r.error
            }
        };
        if dist(e) > dist(c) * (1.0 + 1e-9) {
            out.push(NotCloser {
                scenario: e.scenario.clone(),
                metric: e.metric,
                eevdf: e.error,
                cfs: c.error,
                decided: !as_close_somewhere(&e.parts, &c.parts),
            });
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
        (
            "wake p99",
            "wake-up p99, sim / real (log scale, 1 = exact)",
            "x",
        ),
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
            // A target that the real repeats' spread leaves untestable says so under its bars.
            let labels: Vec<String> = cats
                .iter()
                .map(|s| {
                    let untestable = rows.iter().any(|r| {
                        &r.scenario == s
                            && r.metric == metric
                            && r.verdict == Some(Verdict::Untestable)
                    });
                    if untestable {
                        format!("{s} (untestable)")
                    } else {
                        s.clone()
                    }
                })
                .collect();
            // Whiskers stop at 3x the panel's largest bar: an interval without an upper end
            // (a real mean whose interval reaches 0) or one hundreds of times wide (an
            // untestable p99 of three repeats) would flatten every bar beside it.
            let (bars, tops) =
                (rows.iter())
                    .filter(|r| r.metric == metric)
                    .fold((0.0f64, 0.0f64), |(b, t), r| {
                        let fin = |x: f64| if x.is_finite() { x } else { 0.0 };
                        (b.max(fin(r.error)), t.max(fin(r.error_hi)))
                    });
            // A ratio is drawn on a log scale from 1 (too low and too high alike), where no
            // whisker needs cutting.
            let ratio = metric == "wake p99";
            let cap = if ratio {
                f64::INFINITY
            } else if bars > 0.0 {
                tops.min(3.0 * bars)
            } else {
                tops
            };
            let axis = if ratio {
                Axis::new("sim / real", unit).log()
            } else {
                Axis::new(title, unit)
            };
            let mut c = BarChart::new(title, "scenario", axis, labels);
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
                    .map(|s| pick(s).map_or((0.0, 0.0), |r| (r.error_lo, r.error_hi.min(cap))))
                    .collect();
                c.series
                    .push(BarSeries::new(m.as_str(), vals).with_errors(errs));
            }
            c
        })
        .collect();
    let refs: Vec<&dyn Chart> = charts.iter().map(|c| c as &dyn Chart).collect();
    grid(
        "schedkit fidelity: error against the kernel's mean (whiskers: its 95 % CI, cut at 3x the largest bar on linear panels)",
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
    fn errors_are_against_the_real_mean_and_eevdf_is_compared_with_cfs() {
        let real = |share: f64| Measure {
            names: vec!["a".into()],
            share_pct: vec![share],
            wait_ms: vec![10.0],
            wait_all_ms: 10.0,
            switches_per_s: 100.0,
            migrations_per_s: 1.0,
            ..Measure::default()
        };
        // Shares 50.5, 51, 51, 51, 51.5: mean 51, sd 0.354, t(4) = 2.776: ±0.439.
        let reals = [50.5, 51.0, 51.0, 51.0, 51.5].map(real);
        let sim = Measure {
            wait_all_ms: 12.0,
            ..real(51.2)
        };
        let rows = compare("x", PolicyName::Eevdf, false, &sim, &reals);
        let share = rows.iter().find(|r| r.metric == "share").unwrap();
        assert!((share.error - 0.2).abs() < 1e-9, "{share:?}");
        assert!((share.error_hi - 0.639).abs() < 1e-3, "{share:?}");
        assert_eq!(share.verdict, Some(Verdict::Met));
        // Waiting: every repeat 10 ms, so no interval: 12 ms is exactly 20 % off: met.
        let wait = rows.iter().find(|r| r.metric == "waiting").unwrap();
        assert!((wait.error - 20.0).abs() < 1e-9 && wait.verdict == Some(Verdict::Met));
        assert_eq!((wait.real, wait.real_lo, wait.real_hi), (10.0, 10.0, 10.0));
        // Migrations: absolute per second (sim 1.0 against 1.0 every time: no error).
        let mig = rows.iter().find(|r| r.metric == "migrations/s").unwrap();
        assert!(mig.error.abs() < 1e-12 && mig.unit == "/s");
        assert_eq!(mig.verdict, Some(Verdict::Met));
        let mut all = rows.clone();
        let worse = Measure {
            wait_all_ms: 10.0,
            ..real(55.0)
        };
        all.extend(compare("x", PolicyName::Cfs, false, &worse, &reals));
        let not = eevdf_not_closer(&all);
        // cfs's waiting is exact (0 %), eevdf's 20 %, with no real spread to blur it: that
        // one pair is named, and decided.
        assert_eq!(not.len(), 1, "{not:?}");
        assert_eq!((not[0].metric, not[0].decided), ("waiting", true));
        let table = render_table(&all);
        assert!(table.contains("51.000 [50.561, 51.439]"), "{table}");
    }

    #[test]
    fn a_ratio_target_is_untestable_when_the_real_interval_is_over_4x_wide() {
        let real = |p99: f64| Measure {
            names: vec!["a".into()],
            share_pct: vec![100.0],
            wake_p99_us: Some(p99),
            ..Measure::default()
        };
        let p99 = |rows: &[ErrorRow]| rows.iter().find(|r| r.metric == "wake p99").cloned();
        let sim = real(1_000.0);
        // 200 and 2,000 us: on the log scale their mean's interval (t(1) = 12.7) spans far
        // more than 4x, so no value could be shown within 2x of the kernel's: untestable.
        let rows = compare(
            "x",
            PolicyName::Eevdf,
            true,
            &sim,
            &[real(200.0), real(2_000.0)],
        );
        let r = p99(&rows).unwrap();
        assert_eq!(r.verdict, Some(Verdict::Untestable));
        // The real value is the geometric mean, sqrt(200 x 2,000) = 632 us.
        assert!((r.real - 632.456).abs() < 1e-3, "{r:?}");
        assert!(render_table(&rows).contains("untestable"));
        assert!(render_chart(&rows, &[PolicyName::Eevdf]).contains("x (untestable)"));
        // Five close repeats (560 to 640 us): 1,000 us is 1.6-1.8x: met; 3,000 us missed.
        let tight = [560.0, 590.0, 600.0, 610.0, 640.0].map(real);
        let r = p99(&compare("x", PolicyName::Eevdf, true, &sim, &tight)).unwrap();
        assert_eq!(r.verdict, Some(Verdict::Met), "{r:?}");
        let far = real(3_000.0);
        let r = p99(&compare("x", PolicyName::Eevdf, true, &far, &tight)).unwrap();
        assert_eq!(r.verdict, Some(Verdict::Missed), "{r:?}");
        // One repeat: no interval; the single value is judged as it is.
        let rows = compare("x", PolicyName::Eevdf, true, &sim, &[real(200.0)]);
        assert_eq!(p99(&rows).unwrap().verdict, Some(Verdict::Missed));
    }
}
