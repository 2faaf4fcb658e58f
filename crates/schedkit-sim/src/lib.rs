//! schedkit-sim: a discrete-event simulator of scheduling policies.
//!
//! [`simulate`] runs a [`Scenario`] under its policy and writes the trace into a sink; feed
//! a [`schedkit_core::Metrics`] to get the report. See [`engine`] for the model and
//! [`policy`] for the interface every policy implements.

pub mod budget;
pub mod contract;
pub mod engine;
mod gedf;
pub mod keyed;
pub mod partition;
pub mod policies;
pub mod policy;

pub use engine::{Engine, SimStats, Watch};
use keyed::Keyed;
use policy::Dispatcher;
use schedkit_core::control::Controller;
use schedkit_core::report::{Metrics, Report};
use schedkit_core::scenario::{PolicyName, Scenario, ScenarioError};
use schedkit_core::trace::{Tee, TraceLog, TraceSink};

/// Runs `scenario` under its policy, writing events to `sink`.
pub fn simulate(scenario: &Scenario, sink: &mut dyn TraceSink) -> Result<SimStats, ScenarioError> {
    simulate_watched(scenario, sink, None)
}

/// [`simulate`], with a [`Watch`] asked now and then whether to go on (progress, Ctrl-C);
/// a stopped run has [`SimStats::stopped_at`] set.
pub fn simulate_watched(
    scenario: &Scenario,
    sink: &mut dyn TraceSink,
    watch: Option<&dyn Watch>,
) -> Result<SimStats, ScenarioError> {
    if gedf::eligible(scenario) {
        return Ok(gedf::run(scenario, sink, watch));
    }
    let policy = policies::build(scenario)?;
    Ok(run(
        scenario,
        policy.dispatcher,
        policy.controller,
        sink,
        watch,
    ))
}

fn run<D: Dispatcher + ?Sized, S: TraceSink + ?Sized>(
    scenario: &Scenario,
    dispatcher: Box<D>,
    controller: Option<Box<dyn Controller + '_>>,
    sink: &mut S,
    watch: Option<&dyn Watch>,
) -> SimStats {
    let engine = Engine::new(scenario, dispatcher, controller, sink);
    match watch {
        Some(w) => engine.with_watch(w).run(),
        None => engine.run(),
    }
}

/// [`simulate_watched`] into a sink of a known type: the engine calls the sink directly. For
/// (global) EDF, the policy the simulator is benchmarked on against other simulators
/// (docs/results/speed.md), the dispatcher's type is known too, so its hooks are inlined; it
/// is the dispatcher [`policies::build`] makes for `edf` and `gedf`. Plain periodic task sets
/// under (global) EDF go to the specialised engine of [`gedf`] (the same events, faster).
fn simulate_typed<S: TraceSink>(
    scenario: &Scenario,
    sink: &mut S,
    watch: Option<&dyn Watch>,
) -> Result<SimStats, ScenarioError> {
    if gedf::eligible(scenario) {
        return Ok(gedf::run(scenario, sink, watch));
    }
    match scenario.policy().name() {
        PolicyName::Edf | PolicyName::Gedf => Ok(run(
            scenario,
            Box::new(Keyed::new(policies::edf::Edf)),
            None,
            sink,
            watch,
        )),
        _ => {
            let policy = policies::build(scenario)?;
            Ok(run(
                scenario,
                policy.dispatcher,
                policy.controller,
                sink,
                watch,
            ))
        }
    }
}

/// Runs `scenario` and returns its report, and the full trace if `keep_trace`.
pub fn simulate_report(
    scenario: &Scenario,
    keep_trace: bool,
) -> Result<(Report, Option<TraceLog>, SimStats), ScenarioError> {
    simulate_report_watched(scenario, keep_trace, None)
}

/// [`simulate_report`] with a [`Watch`] (see [`simulate_watched`]).
pub fn simulate_report_watched(
    scenario: &Scenario,
    keep_trace: bool,
    watch: Option<&dyn Watch>,
) -> Result<(Report, Option<TraceLog>, SimStats), ScenarioError> {
    let mut metrics = Metrics::new(scenario, "sim", scenario.cores());
    let mut log = TraceLog::default();
    let stats = if keep_trace {
        let mut tee = Tee(&mut metrics, &mut log);
        simulate_watched(scenario, &mut tee, watch)?
    } else if gedf::eligible(scenario) {
        // The dedicated engine hands the fold each job's facts directly: the same report
        // without six or seven events per job through `record`.
        gedf::run_jobs(scenario, &mut metrics, watch)
    } else {
        simulate_typed(scenario, &mut metrics, watch)?
    };
    let mut report = metrics.finish(stats.end);
    if scenario.policy().name() == schedkit_core::PolicyName::Default {
        // The kernel's scheduler in `run`; here its model, named.
        report.policy = policies::default_label();
    }
    Ok((report, keep_trace.then_some(log), stats))
}
