//! The real engine behind `schedkit run`: start every process of a scenario at its arrival,
//! place it under the policy, sample every thread, and turn the samples into the same trace
//! events the simulator writes.
//!
//! Every real path goes through this tree: process runs, fair sharing, tenants, gang and
//! exclusive through [`run`] (controllers through [`host`]), and periodic `[[task]]` sets
//! (SCHED_DEADLINE, and the pool of `schedkit-runtime` as a [`tasks::TaskEngine`]) through
//! [`tasks::run`], whose jobs stream into the same `Metrics` fold as trace events; a task
//! run takes no controller, and [`host`] refuses one given to it.
//!
//! - [`policy`]: what a scenario's policy means on this kernel ([`RunPolicy`]), and the
//!   checks made before anything changes ([`preflight`]);
//! - [`sampler`]: reading every job thread's `/proc` files each period and turning the
//!   readings into trace events (how, and what it costs, is in its docs), laid out per CPU
//!   by [`layout`];
//! - [`fair`]: the fair-share policies' controller loop ([`FairRun`]) and its report;
//! - [`gang`]: gang scheduling's controller loop ([`GangRun`]) over the freezer;
//! - [`host`]: the one controller host both loops share: snapshots in, every action applied
//!   through the journal or refused, kinds an engine cannot apply refused when it is built;
//! - [`live`], [`placement`], [`finish`]: the steps of one run ([`run`]): setting it up and
//!   its loop, starting processes and placing their threads, winding down and the outcome;
//! - [`tasks`]: periodic fork-join task sets: the checks, the shape of the run on this
//!   machine, the [`tasks::TaskEngine`]s (SCHED_DEADLINE's is [`tasks::DeadlineEngine`]
//!   over [`crate::deadline`]) and the one fold of their jobs.

mod fair;
mod finish;
mod gang;
mod host;
mod layout;
mod live;
mod placement;
mod policy;
mod sampler;
pub mod tasks;

pub use fair::{FairReport, FairRun};
pub use gang::{GangRun, GangRunReport, RunThread};
pub use policy::{preflight, RunPolicy};
pub use sampler::SamplerReport;

use crate::affinity::CpuSet;
use crate::exclusive::{ExclusiveReport, Isolation};
use crate::journal::{Journal, Undone};
use crate::perf::{CounterKind, CounterSource, Reading};
use crate::{Result, Roots};
use sampler::{Proc, SamplePeriod, Track, MAX_SAMPLE_NS};
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::Event;
use schedkit_core::Nanos;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A callback for what the user needs to know during a run.
pub type Notice = Box<dyn FnMut(&str)>;

/// Options of one run.
pub struct RunOptions {
    pub policy: RunPolicy,
    /// Sampling period (at most 10 ms for the SPEC's lag sampling); with `sample_budget`,
    /// the shortest one.
    pub sample: Duration,
    /// Adapt the sampling period so that the sampler uses at most this fraction of one core
    /// (e.g. 0.01), between `sample` and `max_sample`; `None`: `sample` throughout.
    pub sample_budget: Option<f64>,
    /// The longest period the budget may lengthen sampling to (10 ms by default, the SPEC's
    /// bound for lag; longer ones are stated in the run's warnings).
    pub max_sample: Duration,
    /// Open perf counters per process.
    pub perf: bool,
    pub roots: Roots,
    pub state_dir: PathBuf,
    /// Set to stop early (SIGINT/SIGTERM handlers set [`signal_flag`] too).
    pub stop: Arc<AtomicBool>,
    /// Called after each sample with the fraction of the horizon elapsed.
    pub progress: Option<Box<dyn FnMut(f64)>>,
    /// Called with what the user needs to know while the run goes on (where the control
    /// socket is); the library never prints.
    pub notice: Option<Notice>,
    /// Counter source (tests pass a fake one).
    pub counters: Option<Box<dyn CounterSource>>,
    /// Iterations per thread of built-in workloads (experiments fix the amount of work, not
    /// the CPU time); `None`: the scenario's `burst` or the horizon decides.
    pub iterations: Option<u64>,
    /// The lease, leftovers of dead runs, and whether the job outlives the run.
    pub guard: crate::guard::GuardOptions,
    /// The run stops at the scenario's horizon (a command run without `--horizon` runs until
    /// the command exits): a run that ends later than the horizon overran it.
    pub bounded: bool,
    /// Go on when the run cannot do what the scenario asks (fewer CPUs than its `cores`),
    /// saying so in the report; otherwise such a run is refused ([`Error::Degraded`]).
    pub allow_degraded: bool,
    /// Called for each command held at its start gate (its pid, the run's journal), after
    /// the engine placed it and before it execs: one-command mode's flags
    /// ([`crate::oneshot::Plan::apply_before_exec`]), inherited by all it starts.
    pub before_exec: Option<BeforeExec>,
    /// Measure the machine's other tasks on the job's CPUs over the window
    /// ([`crate::other_tasks`], `RunFrame::other_tasks`): two scans of every task's
    /// schedstat, a few milliseconds each, outside the window. Off by default.
    pub scan_other_tasks: bool,
    /// Condition the kernel's newidle balance before the job starts
    /// ([`crate::newidle::settle`], about 0.75 s per CPU): for experiments that compare the
    /// run with a model started from the same state. Off by default.
    pub settle_newidle: bool,
}

/// See [`RunOptions::before_exec`].
pub type BeforeExec = Box<dyn FnMut(i32, Option<&mut Journal>) -> Result<()>>;

impl RunOptions {
    pub fn new(policy: RunPolicy) -> RunOptions {
        RunOptions {
            policy,
            sample: Duration::from_millis(10),
            sample_budget: None,
            max_sample: Duration::from_nanos(MAX_SAMPLE_NS),
            perf: true,
            roots: Roots::host(),
            state_dir: crate::journal::state_dir(),
            stop: Arc::new(AtomicBool::new(false)),
            progress: None,
            notice: None,
            counters: None,
            iterations: None,
            // Library callers (experiments, tests) queue behind other runs; the CLI
            // refuses unless asked to wait.
            guard: crate::guard::GuardOptions {
                wait: Some(Duration::MAX),
                ..Default::default()
            },
            bounded: true,
            allow_degraded: false,
            before_exec: None,
            scan_other_tasks: false,
            settle_newidle: false,
        }
    }
}

/// Kernel truth about one job thread.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadOutcome {
    pub name: String,
    pub process: String,
    /// The thread's identity in the trace and the report, as in the simulator: the index of
    /// its process in the scenario and its index among that process's threads.
    pub process_index: usize,
    pub thread_index: u32,
    pub tid: i32,
    pub last_cpu: usize,
    pub cpu_ns: u64,
    pub runqueue_wait_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// CPU changes seen between samples.
    pub migrations_seen: u64,
    /// Built-in workloads: measured by the thread itself (chunk-level); commands: from
    /// samples (resolution: the sample period).
    pub longest_stall_ns: u64,
}

/// Kernel truth about one job process.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessOutcome {
    pub name: String,
    pub pid: Option<i32>,
    pub exit: Option<String>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub threads: usize,
    pub counters: Vec<(CounterKind, Reading)>,
    pub longest_stall_ns: u64,
    pub involuntary_switches: u64,
    pub voluntary_switches: u64,
    pub work_done: Option<u64>,
}

/// Everything a run produced.
pub struct RunOutcome {
    /// The scenario with the thread counts the run found (commands may start threads).
    pub scenario: Scenario,
    pub events: Vec<Event>,
    pub end: Nanos,
    pub cores: usize,
    pub threads: Vec<ThreadOutcome>,
    pub processes: Vec<ProcessOutcome>,
    pub exclusive: Option<ExclusiveReport>,
    pub warnings: Vec<String>,
    pub interrupted: bool,
    pub undone: Vec<Undone>,
    /// Gang scheduling: freezer backend and switch times.
    pub gang: Option<GangRunReport>,
    /// Fair-share policies: controller cost, cgroups, nice overrides, weight timeline.
    pub fair: Option<FairReport>,
    /// The sampler's own cost and the periods it used.
    pub sampler: SamplerReport,
    /// The CPUs the job had, the machine's other work, the horizon ([`crate::honest`]).
    pub frame: crate::honest::RunFrame,
}

/// The flag SIGINT and SIGTERM set once [`install_signal_handlers`] ran.
pub fn signal_flag() -> &'static AtomicBool {
    static FLAG: AtomicBool = AtomicBool::new(false);
    &FLAG
}

extern "C" fn on_signal(_: libc::c_int) {
    signal_flag().store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set [`signal_flag`]; the run loop then stops, undoes and reports.
pub fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        let h = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, h);
        libc::signal(libc::SIGTERM, h);
    }
}

/// One run in progress: what the steps of [`run`] share. Built by `Live::start`
/// ([`live`]), driven by its loop, wound down and turned into a [`RunOutcome`] by
/// `Live::finish` ([`finish`]); threads are placed by [`placement`].
struct Live<'s> {
    scenario: &'s Scenario,
    opts: RunOptions,
    roots: Roots,
    /// CPUs the controllers may address (the highest online CPU + 1).
    ncpu: usize,
    warnings: Vec<String>,
    frame: crate::honest::RunFrame,
    journal: Option<Journal>,
    jobs: Option<crate::jobcg::JobCgroups>,
    lease: crate::lease::Lease,
    /// The engine thread's raised class (put back when the run ends).
    engine_class: Option<crate::guard::EngineClass>,
    isolation: Option<(Isolation, crate::exclusive::ExclusiveConfig)>,
    job_cpus: CpuSet,
    placement: placement::Placement,
    gang: Option<GangRun>,
    fair: Option<FairRun>,
    /// Processes not started yet, in order of arrival.
    pending: std::iter::Peekable<std::vec::IntoIter<usize>>,
    horizon: u64,
    machine_at_start: Option<crate::honest::CpuTimes>,
    own_cpu_at_start: u64,
    other_tasks_at_start: Option<crate::other_tasks::TaskScan>,
    origin: Instant,
    stop_threads: Arc<AtomicBool>,
    horizon_watch: Option<crate::guard::HorizonWatch>,
    procs: Vec<Option<Proc>>,
    tracks: Vec<Track>,
    by_tid: HashMap<i32, usize>,
    events: Vec<Event>,
    source: Box<dyn CounterSource>,
    kinds: Vec<CounterKind>,
    /// The next job CPU to pin to (exclusive mode), counted over every thread placed.
    next_pin: usize,
    t_prev: u64,
    last_sweep: u64,
    interrupted: bool,
    period: SamplePeriod,
    /// Samples so far: each thread's refresh (crate::threadfiles) comes every
    /// `refresh_every` samples, at its own turn.
    sample_no: u64,
    buf: Vec<u8>,
    /// What built-in workload threads could not set for themselves (their class), for the
    /// run's warnings.
    thread_warnings: Arc<std::sync::Mutex<Vec<String>>>,
    /// Processes whose own real-time class exclusive mode kept (warned once each).
    kept_rt: std::collections::BTreeSet<usize>,
}

/// Runs `scenario` on this machine.
pub fn run(scenario: &Scenario, opts: RunOptions) -> Result<RunOutcome> {
    // Checks, the lease and the journal, the policy's machine-wide changes, the controllers.
    let mut live = Live::start(scenario, opts)?;
    // Arrivals, new threads, samples and controller ticks until the horizon, the end of
    // every process or a signal; an error stops the loop too, and is returned only once
    // the job has been wound down and every change undone.
    let result = live.run_loop();
    let end = live.wind_down();
    live.finish(result, end)
}

fn add_readings(acc: &mut Vec<(CounterKind, Reading)>, more: Vec<(CounterKind, Reading)>) {
    for (k, r) in more {
        match acc.iter_mut().find(|(x, _)| *x == k) {
            None => acc.push((k, r)),
            Some((_, cur)) => {
                if let (
                    Reading::Value {
                        value: a,
                        scaled: sa,
                    },
                    Reading::Value {
                        value: b,
                        scaled: sb,
                    },
                ) = (cur.clone(), &r)
                {
                    *cur = Reading::Value {
                        value: a + b,
                        scaled: sa || *sb,
                    };
                }
            }
        }
    }
}
