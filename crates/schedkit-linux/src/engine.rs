//! The real engine behind `schedkit run`: start every process of a scenario at its arrival,
//! place it under the policy, sample every thread, and turn the samples into the same trace
//! events the simulator writes.
//!
//! ## From samples to the trace
//!
//! Every `sample` period (10 ms by default, the SPEC's bound) the sampler reads each job
//! thread's `/proc` files. Between two samples `[t0, t1)` a thread ran `r` ns (schedstat), was
//! scheduled in `v + i` times (schedstat; status splits them into voluntary + involuntary)
//! and was last seen on CPU `c`. The
//! interval becomes, per CPU, a sequence of run pieces: each thread's `r` is cut into
//! `1 + min(v + i, 8)` pieces, interleaved round robin with the other job threads of that
//! CPU, and the rest of the interval (time the CPU gave to threads outside the job, or idle)
//! is spread as gaps between pieces. A thread that was running at `t0` on the same CPU and
//! still is continues without a new dispatch, so a pinned thread that is never preempted
//! produces one dispatch for the whole run. A CPU change is a `Migrate`. The placement
//! inside an interval is a reconstruction (the kernel does not tell us the order); the totals
//! (CPU time per thread per interval, switches up to 8 per interval, migrations, the CPU) are
//! measured. Exact kernel counts (switches, migrations, run-queue wait, perf counters, the
//! longest stall) are kept beside the trace in [`RunOutcome`] and shown by `schedkit run`.
//!
//! No CPU time is lost in the layout: schedstat's total of a running thread lags up to a tick,
//! so a busy CPU can show more CPU time than its interval holds; the excess carries into the
//! thread's next interval. A thread seen on a new CPU whose time overfills it gives the
//! overflow back to its old CPU (as far as that has room), placed first there; its piece on
//! the new CPU comes last and after that.
//!
//! ## What sampling costs, and how the engine keeps it small
//!
//! Reading three `/proc` files per thread per sample (stat, schedstat, status: open, read,
//! close, each time through a path lookup) cost schedkit 31-33 % of a core with 100 threads
//! at 5 ms, and walking every thread's `children` file to find new processes cost as much
//! again. So each sample reads one file per thread, `schedstat`, with `pread` on a
//! descriptor kept open, and the dearer files only when they can have changed
//! ([`crate::threadfiles`]: `stat` when the thread was scheduled in, `status` about every
//! five seconds per thread, staggered); discovery looks for new threads and processes only below
//! threads that were scheduled in since the last sample ([`discover`]), and not at all while
//! the command's job cgroup holds as many tasks as are tracked; a thread asleep for
//! several samples is read every fourth sample only ([`IDLE_EVERY`]). Exact switch counts
//! are read once more at the end of the run. With [`RunOptions::sample_budget`] the period
//! adapts: after every sample the engine reads its own thread's CPU clock around the
//! sampling step and sets the next period to `cost per sample / budget` (EWMA of the cost,
//! 1/4), between the requested `sample` and [`RunOptions::max_sample`]; a period longer than
//! the SPEC's 10 ms is stated in the run's warnings. The run reports the sampler's own CPU
//! and the periods it used ([`SamplerReport`]); the lag figures of a run have the resolution
//! of that period. Measured in `docs/results/run-cost.md` (`bench/run-cost/sampler.sh`).
//!
//! Rejected: a tracer (ftrace/eBPF) per context switch, which needs debugfs or BPF and
//! root on every run; sampling is what works for every user and every kernel.

use crate::affinity::{self, CpuSet};
use crate::exclusive::{ExclusiveConfig, ExclusiveReport, Isolation};
use crate::journal::{Journal, Undone};
use crate::perf::{CounterKind, CounterSet, CounterSource, PerfSource, Reading, Target};
use crate::privilege::Privileges;
use crate::procfs::{self, ThreadStat};
use crate::sched::{self, Policy};
use crate::spawn;
use crate::threadfiles::ThreadFiles;
use crate::topo::Topology;
use crate::workload::{self, ThreadShared, WorkSpec};
use crate::{Error, Result, Roots};
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::{Event, Owner, Reason, Slot};
use schedkit_core::Nanos;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How job threads are scheduled.
#[derive(Clone, Debug)]
pub enum RunPolicy {
    /// The kernel decides (SCHED_OTHER, the scenario's nice values, `cpus` affinity).
    Default,
    /// SCHED_FIFO at `50 - priority` (clamped to 1..99) or the given priority.
    Fifo { priority: Option<u32> },
    /// SCHED_RR, likewise; the scenario's quantum becomes `sched_rr_timeslice_ms`.
    Rr {
        priority: Option<u32>,
        quantum_ms: u64,
    },
    /// Seed 000's exclusive mode.
    Exclusive(ExclusiveConfig),
    /// Gang scheduling (seed 002): the matrix controller pins threads and stops / resumes
    /// whole jobs through the freezer ([`crate::freezer::GangRun`]).
    Gang { quantum: Nanos },
    /// `process-fair` (seed 004, ch. 3): every scenario process in its own cgroup, equal
    /// weights ([`crate::cgroup`]).
    ProcessFair,
    /// A fair-share controller of `schedkit_core::controllers` (`pfs`, `tfps`, `twrs`,
    /// `tenants`, `global-fair`) run every `period` on the live threads; see [`FairRun`].
    Fair { name: PolicyName, period: Nanos },
}

impl RunPolicy {
    /// The policy a scenario asks for, or an input error for simulator-only policies.
    pub fn from_scenario(s: &Scenario) -> Result<RunPolicy> {
        Ok(match s.policy().name() {
            PolicyName::Default => RunPolicy::Default,
            PolicyName::Fcfs => RunPolicy::Fifo { priority: None },
            PolicyName::Rr => RunPolicy::Rr {
                priority: None,
                quantum_ms: (s.policy().quantum().0 / 1_000_000).max(1),
            },
            PolicyName::Exclusive => RunPolicy::Exclusive(ExclusiveConfig::default()),
            PolicyName::Gang => RunPolicy::Gang {
                quantum: s.policy().quantum(),
            },
            PolicyName::ProcessFair => RunPolicy::ProcessFair,
            name @ (PolicyName::Pfs
            | PolicyName::Tfps
            | PolicyName::Twrs
            | PolicyName::Tenants
            | PolicyName::GlobalFair) => RunPolicy::Fair {
                name,
                period: s.policy().period(),
            },
            other => {
                return Err(Error::Input(format!(
                    "{}: policy.name: `{other}` runs in `schedkit sim` only; `schedkit run` supports default, fcfs, rr, exclusive, gang, process-fair, pfs, tfps, twrs, tenants and global-fair",
                    s.file()
                )))
            }
        })
    }
    fn needs_rt(&self) -> bool {
        !matches!(
            self,
            RunPolicy::Default
                | RunPolicy::Gang { .. }
                | RunPolicy::ProcessFair
                | RunPolicy::Fair { .. }
        )
    }
    /// Policies that place job threads in cgroups of their own.
    fn uses_cgroups(&self) -> bool {
        matches!(
            self,
            RunPolicy::ProcessFair
                | RunPolicy::Fair {
                    name: PolicyName::Tenants,
                    ..
                }
        )
    }
}

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
    pub gang: Option<crate::freezer::GangRunReport>,
    /// Fair-share policies: controller cost, cgroups, nice overrides, weight timeline.
    pub fair: Option<FairReport>,
    /// The sampler's own cost and the periods it used.
    pub sampler: SamplerReport,
    /// The CPUs the job had, the machine's other work, the horizon ([`crate::honest`]).
    pub frame: crate::honest::RunFrame,
}

/// What sampling cost: the engine thread's CPU time inside the sampling steps (its CPU
/// clock read around each), and the sampling periods used.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SamplerReport {
    pub samples: u64,
    pub cpu_ns: u64,
    /// Run length, for `cpu_ns` as a share of one core.
    pub wall_ns: u64,
    /// Shortest and longest period between two samples the engine asked for, ns.
    pub min_period_ns: u64,
    pub max_period_ns: u64,
    /// The budget it adapted to (fraction of one core), if any.
    pub budget: Option<f64>,
}

impl SamplerReport {
    /// Sampler CPU as a percentage of one core over the run.
    pub fn cpu_pct(&self) -> f64 {
        100.0 * self.cpu_ns as f64 / self.wall_ns.max(1) as f64
    }

    /// Mean period between samples, ns.
    pub fn mean_period_ns(&self) -> u64 {
        self.wall_ns / self.samples.max(1)
    }

    /// One line for reports.
    pub fn line(&self) -> String {
        format!(
            "sampler cpu {:.3} ms ({:.3} % of one core, {:.1} us per sample); {} samples, period {}..{} (mean {}){}",
            self.cpu_ns as f64 / 1e6,
            self.cpu_pct(),
            self.cpu_ns as f64 / 1e3 / self.samples.max(1) as f64,
            self.samples,
            Nanos(self.min_period_ns),
            Nanos(self.max_period_ns),
            Nanos(self.mean_period_ns()),
            self.budget
                .map(|b| format!(", adapted to a budget of {:.1} % of one core", b * 100.0))
                .unwrap_or_default()
        )
    }
}

/// The sampling period's controller (see the module docs).
struct SamplePeriod {
    min: u64,
    max: u64,
    budget: Option<f64>,
    /// EWMA of the cost of one sample, ns.
    cost: f64,
    period: u64,
    report: SamplerReport,
}

/// The SPEC's bound on the sampling period of real runs.
const MAX_SAMPLE_NS: u64 = 10_000_000;

impl SamplePeriod {
    fn new(min: Duration, max: Duration, budget: Option<f64>) -> SamplePeriod {
        let min = (min.as_nanos() as u64).max(1);
        SamplePeriod {
            min,
            max: (max.as_nanos() as u64).max(min),
            budget: budget.filter(|b| *b > 0.0),
            cost: 0.0,
            period: min,
            report: SamplerReport {
                min_period_ns: min,
                max_period_ns: min,
                budget,
                ..SamplerReport::default()
            },
        }
    }

    /// Records one sample's cost and sets the next period.
    fn record(&mut self, cost_ns: u64) {
        let r = &mut self.report;
        if r.samples == 0 {
            self.cost = cost_ns as f64;
        } else {
            self.cost += (cost_ns as f64 - self.cost) / 4.0;
        }
        r.samples += 1;
        r.cpu_ns += cost_ns;
        if let Some(b) = self.budget {
            self.period = ((self.cost / b) as u64).clamp(self.min, self.max);
            r.min_period_ns = r.min_period_ns.min(self.period);
            r.max_period_ns = r.max_period_ns.max(self.period);
        }
    }
}

/// Reads one thread through its open files ([`crate::threadfiles`]); when that fails (the
/// thread ended), a read by path says how (zombie) or that it is gone.
fn read_thread(roots: &Roots, tr: &mut Track, refresh: bool, buf: &mut [u8]) -> Result<ThreadStat> {
    if tr.files.is_none() {
        tr.files = ThreadFiles::open(roots, tr.pid, tr.tid);
    }
    if let Some(r) = tr
        .files
        .as_mut()
        .and_then(|f| f.read(buf, &mut tr.last, refresh))
    {
        return Ok(r.0);
    }
    tr.files = None;
    ThreadStat::read(roots, tr.pid, tr.tid)
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

/// Checks a scenario against the machine before anything changes: commands exist, CPUs
/// exist, priorities are in range, privileges suffice for what was asked.
pub fn preflight(s: &Scenario, policy: &RunPolicy, topo: &Topology) -> Result<()> {
    for p in s.processes() {
        if let Some(cmd) = p.command() {
            if spawn::resolve(&cmd[0]).is_none() {
                return Err(Error::Input(format!(
                    "{}:{}: process.command: `{}` not found (not in PATH or not executable)",
                    s.file(),
                    p.line(),
                    cmd[0]
                )));
            }
        }
        if let Some(cpus) = p.cpus() {
            for &c in cpus {
                if !topo.online.contains(c) {
                    return Err(Error::Input(format!(
                        "{}:{}: process.cpus: CPU {c} does not exist on this machine (online CPUs: {})",
                        s.file(), p.line(), topo.online
                    )));
                }
            }
        }
    }
    if !s.tasks().is_empty() {
        return Err(Error::Input(format!(
            "{}: task: periodic [[task]] entries run in `schedkit sim` only for now",
            s.file()
        )));
    }
    match policy {
        RunPolicy::Fifo { priority: Some(p) }
        | RunPolicy::Rr {
            priority: Some(p), ..
        } => Policy::Fifo { priority: *p }.validate()?,
        RunPolicy::Exclusive(cfg) => {
            Isolation::plan(topo, &Roots::host(), cfg)?;
        }
        _ => {}
    }
    let privs = Privileges::current();
    if policy.uses_cgroups() && !privs.root {
        return Err(Error::Privilege(
            "policies process-fair and tenants create cgroups under the cpu controller's mount: run as root".into(),
        ));
    }
    if let RunPolicy::Fair {
        name: PolicyName::Tenants,
        ..
    } = policy
    {
        for g in s.groups() {
            if let Err(m) = crate::ctl::check_weight(g.weight()) {
                return Err(Error::Input(format!(
                    "{}: group.weight: group `{}`: {m}",
                    s.file(),
                    g.name()
                )));
            }
        }
    }
    if policy.needs_rt() && !(privs.root || privs.sys_nice) {
        return Err(Error::Privilege(format!(
            "policy {} needs real-time scheduling (CAP_SYS_NICE): {}",
            match policy {
                RunPolicy::Fifo { .. } => "fcfs (SCHED_FIFO)",
                RunPolicy::Rr { .. } => "rr (SCHED_RR)",
                _ => "exclusive",
            },
            Privileges::HOW_TO_NICE
        )));
    }
    Ok(())
}

fn rt_priority(explicit: Option<u32>, scenario_priority: i32) -> u32 {
    explicit.unwrap_or_else(|| (50 - scenario_priority).clamp(1, 99) as u32)
}

/// Per-thread sampler state.
impl Track {
    /// Closes the thread's open run interval, if any, with a Deschedule for `reason`.
    fn leave_core(&mut self, events: &mut Vec<Event>, t: Nanos, reason: Reason) {
        if let Some(core) = self.open_core.take() {
            events.push(Event::Deschedule {
                t,
                core,
                slot: self.slot,
                reason,
            });
        }
    }
}

struct Track {
    process: usize,
    index: u32,
    pid: i32,
    tid: i32,
    slot: Slot,
    /// Time of the thread's `Arrive` event: nothing of it is placed earlier.
    arrive_ns: u64,
    prev_run: u64,
    /// Run-queue delay (schedstat) at the last sample: with the CPU time it tells how much
    /// of an interval the thread was runnable, and so how much it slept.
    prev_wait: u64,
    /// CPU time seen but not yet placed in the trace (it did not fit its interval).
    carry: u64,
    prev_sw: (u64, u64),
    open_core: Option<usize>,
    last_core: Option<usize>,
    runnable: bool,
    finished: bool,
    shared: Option<Arc<ThreadShared>>,
    last: ThreadStat,
    migrations: u64,
    stall_run: u64,
    stall_since: Option<u64>,
    longest_stall: u64,
    counters: Option<CounterSet>,
    /// Open `/proc` files for fast samples.
    files: Option<ThreadFiles>,
    /// Scheduled in since the previous sample (or new): it may have started threads or
    /// processes, so discovery looks at it (a thread that never ran forked nothing).
    active: bool,
    /// Samples in a row that found it not scheduled in: past [`IDLE_SAMPLES`] it is read
    /// only every [`IDLE_EVERY`] samples.
    idle: u32,
}

enum Body {
    Builtin(workload::Running),
    Command { pid: i32, exit: Option<String> },
}

struct Proc {
    start_ns: u64,
    end_ns: Option<u64>,
    /// A command's job cgroup's `pids.current` (every task of its tree, threads included),
    /// where the hierarchy has one: while it equals the threads tracked, nothing new was
    /// started and discovery reads nothing more.
    tasks_file: Option<PathBuf>,
    body: Body,
    counters: Option<CounterSet>,
    next_index: u32,
}

/// Sort rank at equal times: leave a CPU before anyone takes it.
fn rank(e: &Event) -> u8 {
    match e {
        // A thread exists before anything else happens to it at the same instant (a sleep
        // placed at its arrival, say).
        Event::Arrive { .. } => 0,
        Event::Deschedule { .. } => 1,
        Event::Finish { .. } => 2,
        Event::Block { .. } => 3,
        Event::Wake { .. } => 4,
        Event::Migrate { .. } => 5,
        Event::Dispatch { .. } => 6,
        _ => 7,
    }
}

/// The calling thread raised to SCHED_FIFO for a while; its class is put back on drop.
struct RaisedClass(Policy);

impl RaisedClass {
    /// `None` when the class could not be changed (no CAP_SYS_NICE).
    fn fifo(priority: u32) -> Option<RaisedClass> {
        let old = sched::get_thread(0).ok()?;
        sched::set_thread(0, Policy::Fifo { priority }).ok()?;
        Some(RaisedClass(old))
    }
}

impl Drop for RaisedClass {
    fn drop(&mut self) {
        let _ = sched::set_thread(0, self.0);
    }
}

/// Runs `scenario` on this machine.
pub fn run(scenario: &Scenario, mut opts: RunOptions) -> Result<RunOutcome> {
    let topo = Topology::read(&opts.roots)?;
    preflight(scenario, &opts.policy, &topo)?;
    let roots = opts.roots.clone();
    let privs = Privileges::current();
    let mut warnings = Vec::new();
    let ncpu = topo.online.iter().last().map_or(1, |c| c + 1);
    let mut frame = crate::honest::RunFrame {
        allowed: crate::honest::allowed_cpus(&topo.online),
        online: topo.online.clone(),
        horizon: opts.bounded.then_some(scenario.horizon()),
        ..Default::default()
    };
    if let Some(w) = crate::honest::fewer_cpus(scenario.cores(), &frame.online, &frame.allowed) {
        if !opts.allow_degraded {
            return Err(Error::Degraded(format!(
                "{}: cores: {w}; give the run the CPUs (or lower `cores`), or pass \
                 --allow-degraded to run on fewer and say so in the report",
                scenario.file()
            )));
        }
        frame.degraded.push(w);
    }

    // The lease, the stale check, the journal and the job cgroups (crate::guard).
    let crate::guard::Guard {
        mut journal,
        jobs,
        restored,
        lease,
    } = crate::guard::prepare(
        scenario,
        &opts.policy,
        &roots,
        &opts.state_dir,
        &opts.guard,
        &mut warnings,
    )?;
    for r in &restored {
        warnings.push(format!(
            "--restore-stale: undid the changes of a dead run ({})",
            r.display()
        ));
    }
    let mut jobs = jobs;
    // The engine above the job's normal threads and below its real-time ones.
    let mut _engine_class = match crate::guard::engine_priority(&opts.policy, scenario) {
        Some(p) => match crate::guard::EngineClass::raise(p) {
            Ok(c) => Some(c),
            Err(m) => {
                warnings.push(m);
                None
            }
        },
        None => None,
    };
    let mut isolation = None;
    let mut job_cpus = frame.allowed.clone();
    match &opts.policy {
        RunPolicy::Exclusive(cfg) => {
            let mut cfg = cfg.clone();
            if !(privs.root || privs.sys_admin) {
                cfg.move_irqs = false;
                if cfg.rt_throttle == crate::exclusive::RtThrottle::Off {
                    return Err(Error::Privilege(format!(
                        "--rt-throttle off writes /proc/sys/kernel/sched_rt_runtime_us: {}",
                        Privileges::HOW_TO_ADMIN
                    )));
                }
                warnings.push(format!(
                    "IRQs stay where they are: moving them needs root ({})",
                    Privileges::HOW_TO_ADMIN
                ));
            }
            let mut iso = Isolation::plan(&topo, &roots, &cfg)?;
            // The sampler itself lives on the system cores, at SCHED_FIFO 10 for the run:
            // under load the system cores are crowded, and a SCHED_OTHER engine would start
            // the job late (it allocates the job's memory and creates its threads, which
            // inherit its class until they move to their own cores at their own priority).
            affinity::set_thread(0, &iso.system)?;
            _engine_class = crate::guard::EngineClass::raise(10).ok();
            iso.apply(journal.as_mut().expect("journal"), &cfg)?;
            job_cpus = iso.job.clone();
            isolation = Some((iso, cfg));
        }
        RunPolicy::Rr { quantum_ms, .. } => {
            let j = journal.as_mut().expect("journal");
            if let Err(e) = j.set_sysctl("kernel/sched_rr_timeslice_ms", &quantum_ms.to_string()) {
                warnings.push(format!("SCHED_RR time slice left at the kernel's: {e}"));
            }
        }
        _ => {}
    }
    let job_list: Vec<usize> = job_cpus.iter().collect();
    let fifo_prio = match &opts.policy {
        RunPolicy::Exclusive(cfg) => Some(cfg.priority),
        _ => None,
    };
    // Gang scheduling: the controller and the freezer (detected now, before any job starts).
    let mut gang = match &opts.policy {
        RunPolicy::Gang { quantum } => Some(crate::freezer::GangRun::new(&roots, *quantum)),
        _ => None,
    };
    // Fair-share policies: cgroups, the controller, the control socket.
    let mut fair = match &opts.policy {
        RunPolicy::ProcessFair | RunPolicy::Fair { .. } => Some(FairRun::new(
            scenario,
            &opts.policy,
            &roots,
            journal.as_mut().expect("journal"),
            &opts.state_dir,
        )?),
        _ => None,
    };
    if let Some(f) = fair.as_mut() {
        warnings.append(&mut f.start_warnings);
        for n in f.notices.drain(..) {
            if let Some(cb) = opts.notice.as_mut() {
                cb(&n);
            }
        }
    }
    if let Some(g) = gang.as_mut() {
        warnings.append(&mut g.start_warnings);
    }

    // Order of arrival.
    let mut order: Vec<usize> = (0..scenario.processes().len()).collect();
    order.sort_by_key(|&i| (scenario.processes()[i].arrival(), i));
    let mut pending = order.into_iter().peekable();
    let horizon = scenario.horizon().0;
    frame.job = job_cpus.clone();
    let machine_at_start = crate::honest::CpuTimes::read(&roots, &frame.job);
    let own_cpu_at_start = crate::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
    let origin = Instant::now();
    let stop_threads = Arc::new(AtomicBool::new(false));
    // Job threads above the engine cannot hold the run past its horizon (guard docs).
    let horizon_watch = match &opts.policy {
        RunPolicy::Exclusive(_) => None,
        _ if !opts.bounded => None,
        _ => crate::guard::HorizonWatch::start(
            crate::gettid(),
            origin + Duration::from_nanos(scenario.horizon().0),
            vec![opts.stop.clone()],
            signal_flag(),
        ),
    };
    let mut procs: Vec<Option<Proc>> = (0..scenario.processes().len()).map(|_| None).collect();
    let mut tracks: Vec<Track> = Vec::new();
    let mut by_tid: HashMap<i32, usize> = HashMap::new();
    let mut events: Vec<Event> = Vec::new();
    let mut source: Box<dyn CounterSource> =
        opts.counters.take().unwrap_or_else(|| Box::new(PerfSource));
    let kinds = CounterKind::all();
    let mut next_pin = 0usize;
    let mut t_prev = 0u64;
    let mut last_sweep = 0u64;
    let mut interrupted = false;
    let mut period = SamplePeriod::new(opts.sample, opts.max_sample, opts.sample_budget);
    // Samples so far: each thread's refresh (crate::threadfiles) comes every
    // `refresh_every` samples, at its own turn.
    let mut sample_no = 0u64;
    let mut buf = vec![0u8; 4096];
    // What built-in workload threads could not set for themselves (their class), for the
    // run's warnings.
    let thread_warnings: Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    // Processes whose own real-time class exclusive mode kept (warned once each).
    let mut kept_rt: std::collections::BTreeSet<usize> = Default::default();

    // Placement of one new job thread (called from the sampler for commands, and from the
    // thread itself for built-in workloads).
    let placement = |p: usize, k: usize| -> (Option<CpuSet>, Option<Policy>) {
        let proc_ = &scenario.processes()[p];
        match &opts.policy {
            RunPolicy::Default => (
                proc_.cpus().map(|c| c.iter().copied().collect()),
                (proc_.nice() != 0).then_some(Policy::Other { nice: proc_.nice() }),
            ),
            RunPolicy::Fifo { priority } => (
                proc_.cpus().map(|c| c.iter().copied().collect()),
                Some(Policy::Fifo {
                    priority: rt_priority(*priority, proc_.priority()),
                }),
            ),
            RunPolicy::Rr { priority, .. } => (
                proc_.cpus().map(|c| c.iter().copied().collect()),
                Some(Policy::Rr {
                    priority: rt_priority(*priority, proc_.priority()),
                }),
            ),
            // The gang controller pins each thread to its matrix column; the class is set
            // explicitly, since the engine thread they inherit from runs SCHED_FIFO.
            RunPolicy::Gang { .. } => (None, Some(Policy::Other { nice: proc_.nice() })),
            // SCHED_OTHER explicitly: weights (nice, cgroup shares) only act on that class,
            // and v1 refuses real-time threads in a new cpu cgroup.
            RunPolicy::ProcessFair | RunPolicy::Fair { .. } => (
                proc_.cpus().map(|c| c.iter().copied().collect()),
                Some(Policy::Other { nice: proc_.nice() }),
            ),
            RunPolicy::Exclusive(_) => (
                Some(CpuSet::single(job_list[k % job_list.len()])),
                Some(Policy::Fifo {
                    priority: fifo_prio.unwrap_or(99),
                }),
            ),
        }
    };

    let result: Result<()> = (|| {
        loop {
            let now = origin.elapsed().as_nanos() as u64;
            if signal_flag().load(Ordering::Relaxed) || opts.stop.load(Ordering::Relaxed) {
                interrupted = true;
            }
            // Arrivals.
            while let Some(&p) = pending.peek() {
                if scenario.processes()[p].arrival().0 > now || interrupted || now >= horizon {
                    break;
                }
                pending.next();
                let sp = &scenario.processes()[p];
                let start_ns = origin.elapsed().as_nanos() as u64;
                let body = if let Some(cmd) = sp.command() {
                    // Into the run's job cgroup before it runs (born there where the kernel
                    // allows): everything it forks, even what leaves its process group, is
                    // born inside and ends with the run.
                    let target = jobs.as_mut().map(|j| j.next_dir()).transpose()?;
                    let fd = target.as_ref().and_then(|t| t.1.as_ref()).map(|f| {
                        use std::os::fd::AsRawFd;
                        f.as_raw_fd()
                    });
                    let g = spawn::fork_gated(cmd, !opts.guard.keep_running, fd)?;
                    let pid = g.pid;
                    if let (Some(j), Some((dir, _))) = (jobs.as_ref(), target.as_ref()) {
                        if !g.in_cgroup {
                            j.attach(dir, pid)?;
                        }
                    }
                    if let Some((iso, _)) = isolation.as_mut() {
                        iso.exempt(pid);
                    }
                    let (cpus, pol) = placement(p, next_pin);
                    // The main thread gets the whole job set until the sampler pins it.
                    let first = match &opts.policy {
                        RunPolicy::Exclusive(_) => Some(job_cpus.clone()),
                        _ => cpus,
                    };
                    if let Some(c) = first {
                        affinity::set_thread(pid, &c)?;
                    }
                    if let Some(pol) = pol {
                        sched::set_thread(pid, pol)?;
                    }
                    // Into its cgroup before it runs: every thread and child it makes is
                    // born inside.
                    if let Some(f) = fair.as_ref() {
                        f.attach_command(p, pid)?;
                    }
                    if let Some(hook) = opts.before_exec.as_mut() {
                        hook(pid, journal.as_mut())?;
                    }
                    let counters = opts
                        .perf
                        .then(|| CounterSet::open(source.as_mut(), Target::Inherit(pid), &kinds));
                    if let Err(errno) = g.release() {
                        return Err(Error::Input(format!(
                            "{}:{}: process.command: cannot execute `{}`: {}",
                            scenario.file(),
                            sp.line(),
                            cmd[0],
                            std::io::Error::from_raw_os_error(errno)
                        )));
                    }
                    procs[p] = Some(Proc {
                        start_ns,
                        end_ns: None,
                        tasks_file: target
                            .as_ref()
                            .map(|t| t.0.join("pids.current"))
                            .filter(|f| f.exists()),
                        body: Body::Command { pid, exit: None },
                        counters,
                        next_index: 0,
                    });
                    continue;
                } else {
                    let spec = WorkSpec {
                        work: sp.work().clone(),
                        threads: sp.threads(),
                        burst: sp.burst().map(|b| b.0),
                        iterations: opts.iterations,
                        pattern: sp.pattern().map(<[_]>::to_vec),
                    };
                    let base = next_pin;
                    next_pin += sp.threads() as usize;
                    let plans: Vec<(Option<CpuSet>, Option<Policy>)> = (0..sp.threads() as usize)
                        .map(|k| placement(p, base + k))
                        .collect();
                    let refused = thread_warnings.clone();
                    let name = sp.name().to_string();
                    let setup: Arc<dyn Fn(u32) + Send + Sync> = Arc::new(move |k: u32| {
                        // Class first, then the CPU: a real-time thread that moves to its
                        // CPU preempts what runs there, while a SCHED_OTHER one would queue
                        // behind it and could be overtaken by a later thread that became
                        // real-time first (FCFS order would break).
                        let (c, pol) = &plans[k as usize];
                        if let Some(pol) = pol {
                            if let Err(e) = sched::set_thread(0, *pol) {
                                // The run's warnings, once per process and message (the
                                // library does not print).
                                let w = format!("{name}: {e}");
                                let mut r = refused.lock().unwrap_or_else(|p| p.into_inner());
                                if !r.contains(&w) {
                                    r.push(w);
                                }
                            }
                        }
                        if let Some(c) = c {
                            let _ = affinity::set_thread(0, c);
                        }
                    });
                    let running =
                        workload::start(sp.name(), &spec, origin, stop_threads.clone(), setup)
                            .map_err(|e| Error::io("start workload threads", e))?;
                    Body::Builtin(running)
                };
                procs[p] = Some(Proc {
                    start_ns,
                    end_ns: None,
                    tasks_file: None,
                    body,
                    counters: None,
                    next_index: 0,
                });
            }
            // Discover threads.
            for (p, slot) in procs.iter_mut().enumerate() {
                let Some(pr) = slot.as_mut() else { continue };
                if pr.end_ns.is_some() {
                    continue;
                }
                let found: Vec<(i32, i32, Option<Arc<ThreadShared>>)> = match &pr.body {
                    Body::Builtin(r) => {
                        let me = std::process::id() as i32;
                        r.shared
                            .iter()
                            .filter_map(|s| {
                                let tid = s.tid.load(Ordering::Acquire);
                                (tid != 0).then(|| (me, tid, Some(s.clone())))
                            })
                            .collect()
                    }
                    Body::Command { .. }
                        if pr.tasks_file.as_ref().is_some_and(|f| {
                            crate::read_trim(f)
                                .ok()
                                .and_then(|n| n.parse::<usize>().ok())
                                == Some(
                                    tracks
                                        .iter()
                                        .filter(|t| t.process == p && !t.finished)
                                        .count(),
                                )
                        }) =>
                    {
                        Vec::new()
                    }
                    Body::Command { pid, .. } => {
                        let active: Vec<(i32, i32)> = tracks
                            .iter()
                            .filter(|t| t.process == p && t.active)
                            .map(|t| (t.pid, t.tid))
                            .collect();
                        let fresh = !by_tid.contains_key(pid);
                        let live = |q: i32| {
                            tracks.iter().filter(|t| t.pid == q && !t.finished).count() as u64
                        };
                        discover(&roots, fresh.then_some(*pid), &active, &by_tid, live)
                            .into_iter()
                            .map(|(pid, tid)| (pid, tid, None))
                            .collect()
                    }
                };
                for (pid, tid, shared) in found {
                    if by_tid.contains_key(&tid) {
                        continue;
                    }
                    let index = pr.next_index;
                    pr.next_index += 1;
                    let slot_no = tracks.len() as Slot;
                    let arrive_at = if index < scenario.processes()[p].threads() {
                        pr.start_ns
                    } else {
                        t_prev.max(pr.start_ns)
                    };
                    events.push(Event::Arrive {
                        t: Nanos(arrive_at),
                        slot: slot_no,
                        owner: Owner::Process {
                            process: p,
                            thread: index,
                        },
                    });
                    let is_cmd = shared.is_none();
                    if is_cmd {
                        if let Some((iso, _)) = isolation.as_mut() {
                            iso.exempt(pid);
                        }
                        let (cpus, pol) = placement(p, next_pin);
                        next_pin += 1;
                        if let Some(c) = cpus {
                            let _ = affinity::set_thread(tid, &c);
                        }
                        if let Some(pol) = pol {
                            if let Ok(cur) = sched::get_thread(tid) {
                                let own_rt = matches!(
                                    cur,
                                    Policy::Fifo { .. }
                                        | Policy::Rr { .. }
                                        | Policy::Deadline { .. }
                                );
                                if own_rt && matches!(opts.policy, RunPolicy::Exclusive(_)) {
                                    // The job chose a real-time class itself (cyclictest's
                                    // -p 80): exclusive mode pins it but keeps its choice.
                                    if cur != pol && kept_rt.insert(p) {
                                        warnings.push(format!(
                                            "{}: kept the job's own {} (exclusive mode gives \
                                             job threads {} only when they choose no \
                                             real-time class)",
                                            scenario.processes()[p].name(),
                                            cur.name_with_priority(),
                                            pol.name_with_priority()
                                        ));
                                    }
                                } else if cur != pol {
                                    let _ = sched::set_thread(tid, pol);
                                }
                            }
                        }
                    }
                    if let Some(f) = fair.as_ref() {
                        f.attach_thread(p, pid, tid, is_cmd, scenario.processes()[p].nice())?;
                    }
                    let counters = (opts.perf && !is_cmd)
                        .then(|| CounterSet::open(source.as_mut(), Target::Thread(tid), &kinds));
                    by_tid.insert(tid, tracks.len());
                    tracks.push(Track {
                        process: p,
                        index,
                        pid,
                        tid,
                        slot: slot_no,
                        arrive_ns: arrive_at,
                        prev_run: 0,
                        prev_wait: 0,
                        carry: 0,
                        prev_sw: (0, 0),
                        open_core: None,
                        last_core: None,
                        runnable: true,
                        finished: false,
                        shared,
                        last: ThreadStat::default(),
                        files: None,
                        active: true,
                        idle: 0,
                        migrations: 0,
                        stall_run: 0,
                        stall_since: None,
                        longest_stall: 0,
                        counters,
                    });
                }
            }
            // Re-sweep other threads now and then (new processes on the machine).
            if let Some((iso, _)) = isolation.as_mut() {
                if now - last_sweep >= 500_000_000 {
                    last_sweep = now;
                    iso.sweep(journal.as_mut().expect("journal"))?;
                }
            }
            // Sample.
            let t_now = origin.elapsed().as_nanos() as u64;
            // About every five seconds per thread.
            let refresh = (sample_no, (5_000_000_000 / period.period.max(1)).max(1));
            sample_no += 1;
            let c0 = workload::thread_cpu_ns();
            sample(
                &roots,
                (&mut tracks, &mut procs),
                &mut events,
                (t_prev, t_now),
                refresh,
                &mut buf,
            );
            period.record(workload::thread_cpu_ns().saturating_sub(c0));
            t_prev = t_now;
            // Gang scheduling: one controller tick; Stop/Resume go through the freezer.
            if let Some(g) = gang.as_mut() {
                let threads: Vec<crate::freezer::RunThread> = tracks
                    .iter()
                    .map(|t| crate::freezer::RunThread {
                        process: t.process,
                        index: t.index as usize,
                        pid: t.pid,
                        tid: t.tid,
                        builtin: t.shared.is_some(),
                        alive: !t.finished,
                    })
                    .collect();
                g.tick(
                    Nanos(t_now),
                    scenario,
                    &threads,
                    journal.as_mut().expect("journal"),
                )?;
            }
            // Fair-share policies: control requests at every sample, the controller every
            // period.
            if let Some(f) = fair.as_mut() {
                let j = journal.as_mut().expect("journal");
                f.serve_ctl(t_now, scenario, &mut events);
                if t_now >= f.next_tick {
                    f.tick(
                        t_now,
                        scenario,
                        ncpu,
                        (&tracks, &by_tid),
                        j,
                        &mut events,
                        &mut warnings,
                    );
                }
            }
            if let Some(cb) = opts.progress.as_mut() {
                cb((t_now as f64 / horizon as f64).min(1.0));
            }
            let all_done = pending.peek().is_none()
                && procs
                    .iter()
                    .all(|p| p.as_ref().is_none_or(|p| p.end_ns.is_some()));
            if all_done || interrupted || t_now >= horizon {
                break;
            }
            let next = (t_now + period.period).min(horizon);
            // A gang slot may end before the next sample.
            let next = gang
                .as_ref()
                .map_or(next, |g| next.min(t_now + g.period().as_nanos() as u64));
            let next = fair.as_ref().map_or(next, |f| next.min(f.next_tick));
            let sleep = next.saturating_sub(origin.elapsed().as_nanos() as u64);
            std::thread::sleep(Duration::from_nanos(sleep.max(200_000)));
        }
        Ok(())
    })();

    // Exact final switch counts (fast samples do not read status).
    for tr in tracks.iter_mut().filter(|t| !t.finished) {
        if let Ok(st) = ThreadStat::read(&roots, tr.pid, tr.tid) {
            tr.prev_sw.0 = tr.prev_sw.0.max(st.voluntary_switches);
            tr.prev_sw.1 = tr.prev_sw.1.max(st.involuntary_switches);
        }
        tr.files = None;
    }
    // A frozen job cannot stop or take SIGTERM: thaw every gang first.
    if let Some(g) = gang.as_mut() {
        g.thaw_all();
        warnings.append(&mut g.refused);
    }
    // Wind down: stop built-in threads and commands still running.
    let end = (origin.elapsed().as_nanos() as u64).max(t_prev);
    drop(horizon_watch);
    // The machine's other work on the job's CPUs: their busy time, less the job's, less
    // schedkit's own (its process clock less the built-in workload threads it hosts),
    // read now, before the tear-down.
    frame.machine = machine_at_start
        .and_then(|a| crate::honest::CpuTimes::read(&roots, &frame.job).map(|b| a.since(&b)));
    let builtin_cpu: u64 = tracks
        .iter()
        .filter(|t| t.shared.is_some())
        .map(|t| t.prev_run)
        .sum();
    frame.schedkit_cpu_ns = crate::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
        .saturating_sub(own_cpu_at_start)
        .saturating_sub(builtin_cpu);
    stop_threads.store(true, Ordering::Relaxed);
    // Demote the job's remaining threads first: a FIFO thread spinning on a CPU would keep
    // its own process (or a waiting parent on that CPU) from running to handle the signal.
    // (A job kept running with --keep-running keeps its class: it was asked to go on.)
    let keep = opts.guard.keep_running;
    for tr in tracks
        .iter()
        .filter(|t| !(t.finished || keep && t.shared.is_none()))
    {
        let _ = sched::set_thread(tr.tid, Policy::Other { nice: 0 });
    }
    for pr in procs.iter_mut().flatten() {
        if let (true, Body::Command { exit, .. }) = (keep && pr.end_ns.is_none(), &mut pr.body) {
            *exit = Some("left running (--keep-running)".into());
            continue;
        }
        if pr.end_ns.is_none() {
            if let Body::Command { pid, exit } = &mut pr.body {
                // Threads started since the last sample are not tracked yet: demote them too.
                for p in descendants(&roots, *pid) {
                    for tid in procfs::tids(&roots, p) {
                        let _ = sched::set_thread(tid, Policy::Other { nice: 0 });
                    }
                }
                *exit = Some(spawn::terminate(*pid, Duration::from_millis(200)));
            }
        }
    }
    // What outlived the commands' main processes (daemons, double forks) ends now too.
    if let Some(j) = jobs.as_ref() {
        let left = j.terminate(Duration::from_millis(200));
        if left > 0 {
            warnings.push(format!(
                "ended {left} process(es) of the job that ignored SIGTERM or outlived its \
                 command (children that left its process group)"
            ));
        }
    }
    for tr in &mut tracks {
        if !tr.finished {
            if let Some(core) = tr.open_core.take() {
                events.push(Event::Deschedule {
                    t: Nanos(end),
                    core,
                    slot: tr.slot,
                    reason: Reason::Horizon,
                });
            }
        }
    }
    // Counters and kernel truth.
    let mut thread_out = Vec::new();
    let mut proc_counters: BTreeMap<usize, Vec<(CounterKind, Reading)>> = BTreeMap::new();
    for tr in &mut tracks {
        let stall = tr
            .shared
            .as_ref()
            .map(|s| s.longest_stall.load(Ordering::Relaxed))
            .unwrap_or(tr.longest_stall);
        let sp = &scenario.processes()[tr.process];
        thread_out.push(ThreadOutcome {
            name: format!("{}.{}", sp.name(), tr.index),
            process: sp.name().to_string(),
            process_index: tr.process,
            thread_index: tr.index,
            tid: tr.tid,
            last_cpu: tr.last.cpu,
            cpu_ns: tr.prev_run,
            runqueue_wait_ns: tr.last.wait_ns,
            voluntary_switches: tr.prev_sw.0,
            involuntary_switches: tr.prev_sw.1,
            migrations_seen: tr.migrations,
            longest_stall_ns: stall,
        });
        if let Some(c) = tr.counters.as_mut() {
            let acc = proc_counters.entry(tr.process).or_default();
            add_readings(acc, c.read());
        }
    }
    let mut processes = Vec::new();
    for (p, pr) in procs.iter_mut().enumerate() {
        let sp = &scenario.processes()[p];
        let mine: Vec<&ThreadOutcome> = thread_out
            .iter()
            .filter(|t| t.process == sp.name())
            .collect();
        let Some(pr) = pr.as_mut() else {
            processes.push(ProcessOutcome {
                name: sp.name().to_string(),
                pid: None,
                exit: Some("never started".into()),
                start_ns: 0,
                end_ns: 0,
                threads: 0,
                counters: Vec::new(),
                longest_stall_ns: 0,
                involuntary_switches: 0,
                voluntary_switches: 0,
                work_done: None,
            });
            continue;
        };
        let mut counters = proc_counters.remove(&p).unwrap_or_default();
        if let Some(c) = pr.counters.as_mut() {
            add_readings(&mut counters, c.read());
        }
        let (pid, exit, work_done) = match &pr.body {
            Body::Builtin(r) => (None, None, Some(r.iterations())),
            Body::Command { pid, exit } => (Some(*pid), exit.clone(), None),
        };
        processes.push(ProcessOutcome {
            name: sp.name().to_string(),
            pid,
            exit,
            start_ns: pr.start_ns,
            end_ns: pr.end_ns.unwrap_or(end),
            threads: mine.len(),
            counters,
            longest_stall_ns: mine.iter().map(|t| t.longest_stall_ns).max().unwrap_or(0),
            involuntary_switches: mine.iter().map(|t| t.involuntary_switches).sum(),
            voluntary_switches: mine.iter().map(|t| t.voluntary_switches).sum(),
            work_done,
        });
    }
    for pr in procs.into_iter().flatten() {
        if let Body::Builtin(r) = pr.body {
            r.join();
        }
    }
    warnings.append(&mut thread_warnings.lock().unwrap_or_else(|p| p.into_inner()));
    let mut sampler = period.report;
    sampler.wall_ns = end;
    if sampler.max_period_ns > MAX_SAMPLE_NS {
        warnings.push(format!(
            "the sampler lengthened its period up to {} to stay within its budget of {:.1} % of \
             one core ({} threads): lag and the commands' longest stall have that resolution, \
             coarser than 10 ms (`--sample-budget off` samples every `--sample` whatever it costs)",
            Nanos(sampler.max_period_ns),
            sampler.budget.unwrap_or(0.0) * 100.0,
            tracks.len()
        ));
    }
    let fair = fair.map(|f| {
        let mut r = f.finish(end);
        r.sampler = Some(sampler.clone());
        r
    });
    // Undo (also on error: the journal's Drop would, but we want the report).
    // A last sweep: threads born since the previous one inherited the system CPUs and are
    // journaled now, so undo gives them the machine back too.
    if let (Some((iso, _)), Some(j)) = (isolation.as_mut(), journal.as_mut()) {
        let _ = iso.sweep(j);
    }
    let undone = journal.as_mut().map(|j| j.undo()).unwrap_or_default();
    drop(journal);
    drop(lease);
    // Gang cgroups go once the journal no longer needs their freeze files.
    let gang = gang.map(|g| g.finish());
    result?;

    let mut p = 0;
    let sc = scenario
        .to_builder()
        .map_processes(|sp| {
            let n = tracks.iter().filter(|t| t.process == p).count() as u32;
            p += 1;
            let threads = sp.threads().max(n);
            Ok(sp.with_threads(threads))
        })
        .and_then(|b| b.build())
        .map_err(|e| Error::Input(e.to_string()))?;
    events.sort_by_key(|e| (e.time(), rank(e)));
    Ok(RunOutcome {
        scenario: sc,
        events,
        end: Nanos(end),
        cores: frame.job.len().max(1),
        threads: thread_out,
        processes,
        exclusive: isolation.map(|(i, _)| i.report),
        warnings,
        interrupted,
        undone,
        gang,
        fair,
        sampler,
        frame,
    })
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

/// `pid` and every process below it (through `/proc/PID/task/TID/children`).
fn descendants(roots: &Roots, pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < 4096 {
        let p = out[i];
        for tid in procfs::tids(roots, p) {
            let f = roots
                .proc
                .join(p.to_string())
                .join("task")
                .join(tid.to_string())
                .join("children");
            if let Ok(s) = std::fs::read_to_string(f) {
                out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
            }
        }
        i += 1;
    }
    out
}

/// The threads of a command's process tree to look at: every thread (and every child) of
/// `new` and of the processes found below the active threads, and every thread of an
/// active thread's process. Only a thread that was scheduled in since the last look can
/// have started a thread or a process, so a job of a thousand sleeping threads costs no
/// directory reads at all (a walk of every thread's `children` file each sample cost more
/// than the samples themselves).
fn discover(
    roots: &Roots,
    new: Option<i32>,
    active: &[(i32, i32)],
    known: &HashMap<i32, usize>,
    live: impl Fn(i32) -> u64,
) -> Vec<(i32, i32)> {
    let children = |pid: i32, tid: i32| -> Vec<i32> {
        let f = roots
            .proc
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("children");
        std::fs::read_to_string(f)
            .map(|s| {
                s.split_ascii_whitespace()
                    .filter_map(|x| x.parse::<i32>().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut listed: std::collections::HashSet<i32> = Default::default();
    let mut queue: Vec<i32> = new.into_iter().collect();
    for &(pid, tid) in active {
        if listed.insert(pid) {
            // A large process whose thread count is the one tracked started no thread (or
            // one that replaced a thread that ended, seen a sample later once that one's
            // end is seen): its `stat` costs one read, its task directory a walk of every
            // thread.
            let n = live(pid);
            let same =
                n >= 16 && procfs::read_stat(roots, pid, pid).is_some_and(|s| s.num_threads == n);
            if !same {
                out.extend(procfs::tids(roots, pid).into_iter().map(|t| (pid, t)));
            }
        }
        // Children already tracked look after themselves (their own active threads).
        queue.extend(
            children(pid, tid)
                .into_iter()
                .filter(|c| !known.contains_key(c)),
        );
    }
    let mut i = 0;
    while i < queue.len() && out.len() < 65_536 {
        let p = queue[i];
        i += 1;
        if !listed.insert(p) {
            continue;
        }
        for t in procfs::tids(roots, p) {
            out.push((p, t));
            queue.extend(
                children(p, t)
                    .into_iter()
                    .filter(|c| !known.contains_key(c)),
            );
        }
    }
    out
}

/// A thread found asleep and not scheduled in at this many samples in a row is read only
/// every [`IDLE_EVERY`] samples until it runs again: a job of a thousand threads that mostly
/// sleep (a pool, a server) costs a quarter of the reads. Its CPU time stays exact (schedstat
/// counts on); a wake-up is seen up to `IDLE_EVERY - 1` periods late, and its CPU time is
/// then placed in the interval where it is seen (the trace's layout, not its totals).
const IDLE_SAMPLES: u32 = 3;
const IDLE_EVERY: u64 = 4;

/// One sampling step over `[t0, t1)`: reads every live thread and writes the interval's
/// events (see the module docs).
fn sample(
    roots: &Roots,
    (tracks, procs): (&mut [Track], &mut [Option<Proc>]),
    events: &mut Vec<Event>,
    (t0, t1): (u64, u64),
    (sample_no, refresh_every): (u64, u64),
    buf: &mut [u8],
) {
    // (track, ran ns, pieces, new core, state, finish time)
    struct Obs {
        tr: usize,
        ran: u64,
        /// Run-queue delay in the interval (schedstat).
        waited: u64,
        pieces: u64,
        core: usize,
        runnable: bool,
        finish: Option<u64>,
        involuntary: bool,
    }
    let mut obs: Vec<Obs> = Vec::new();
    for (i, tr) in tracks.iter_mut().enumerate() {
        if tr.finished {
            // (Active for one discovery after it ended: what it started is looked for.)
            tr.active = false;
            continue;
        }
        let fin_at = tr
            .shared
            .as_ref()
            .map(|s| s.finished_at.load(Ordering::Acquire))
            .filter(|&f| f != 0);
        let turn = sample_no + tr.slot as u64;
        if tr.idle >= IDLE_SAMPLES && !turn.is_multiple_of(IDLE_EVERY) && fin_at.is_none() {
            continue;
        }
        let refresh = turn.is_multiple_of(refresh_every);
        let st = read_thread(roots, tr, refresh, buf);
        // Times scheduled in since the last sample (schedstat), for the pieces.
        let mut slices = None;
        let mut waited = 0;
        let (run, sw, core, runnable, finish) = match (st, fin_at) {
            (Ok(st), None) if st.state != 'Z' && st.state != 'X' => {
                if tr.last.tid != 0 {
                    slices = Some(st.timeslices.saturating_sub(tr.last.timeslices));
                }
                waited = st.wait_ns.saturating_sub(tr.prev_wait);
                tr.prev_wait = st.wait_ns.max(tr.prev_wait);
                let r = (
                    st.run_ns,
                    (st.voluntary_switches, st.involuntary_switches),
                    st.cpu,
                    st.is_runnable(),
                    None,
                );
                tr.last = st;
                r
            }
            (st, fin) => {
                // Gone (or done): last known values, or the thread's own final CPU time.
                let cpu_final = tr
                    .shared
                    .as_ref()
                    .map(|s| s.cpu_at_finish.load(Ordering::Relaxed))
                    .unwrap_or(tr.prev_run)
                    .max(tr.prev_run);
                let (sw, core) = match st {
                    Ok(st) => ((st.voluntary_switches, st.involuntary_switches), st.cpu),
                    Err(_) => (tr.prev_sw, tr.last.cpu),
                };
                let f = fin.unwrap_or(t1).clamp(t0, t1);
                (cpu_final, sw, core, false, Some(f))
            }
        };
        let ran = run.saturating_sub(tr.prev_run);
        tr.active = ran > 0 || slices.is_some_and(|n| n > 0);
        tr.idle = if tr.active || runnable {
            0
        } else {
            tr.idle.saturating_add(1)
        };
        let dv = sw.0.saturating_sub(tr.prev_sw.0);
        let di = sw.1.saturating_sub(tr.prev_sw.1);
        tr.prev_run = run.max(tr.prev_run);
        tr.prev_sw = (sw.0.max(tr.prev_sw.0), sw.1.max(tr.prev_sw.1));
        // Stall from samples: runnable but no progress.
        if ran == 0 && runnable {
            tr.stall_since.get_or_insert(t0);
        } else if let Some(s) = tr.stall_since.take() {
            tr.longest_stall = tr.longest_stall.max(t0 - s);
        }
        let _ = tr.stall_run;
        obs.push(Obs {
            tr: i,
            waited,
            ran: ran + std::mem::take(&mut tr.carry),
            pieces: 1 + slices.unwrap_or(dv + di).min(8),
            core,
            runnable,
            finish,
            involuntary: di > 0 || (runnable && slices.is_some_and(|n| n > 0)),
        });
    }
    // A thread now on another CPU ran part of the interval on the one it was last seen on.
    // /proc only says where it is now, so that part is unknown; but where the new CPU cannot
    // hold all the CPU time seen there, the overflow is that part: it goes back to the old
    // CPU, as far as that has room, at the start of the interval (when the thread was still
    // there). Without this, a shuttle move overfills the new CPU and the scaling below takes
    // the excess away from every thread on it (and from the report's shares and lags).
    let len = (t1 - t0).max(1);
    let mut load: BTreeMap<usize, u64> = BTreeMap::new();
    for o in &obs {
        *load.entry(o.core).or_default() += o.ran;
    }
    // (obs index, old CPU, ns placed there)
    let mut spills: Vec<(usize, usize, u64)> = Vec::new();
    for k in 0..obs.len() {
        let (core, old) = (obs[k].core, tracks[obs[k].tr].last_core);
        let Some(old) = old.filter(|&c| c != core) else {
            continue;
        };
        let over = load[&core].saturating_sub(len);
        let room = len.saturating_sub(load.get(&old).copied().unwrap_or(0));
        let moved = over.min(room).min(obs[k].ran);
        if moved > 0 {
            obs[k].ran -= moved;
            *load.get_mut(&core).unwrap() -= moved;
            *load.entry(old).or_default() += moved;
            spills.push((k, old, moved));
        }
    }
    // The spilled parts come first on their old CPU; everyone else there starts after them.
    let mut spill_end: HashMap<usize, u64> = HashMap::new();
    let mut spilled_until: HashMap<usize, u64> = HashMap::new();
    for &(k, old, moved) in &spills {
        let start = *spill_end.get(&old).unwrap_or(&t0);
        // Whoever else is still running there from the last interval goes on after it.
        for (j, other) in tracks.iter_mut().enumerate() {
            if j != obs[k].tr && other.open_core == Some(old) {
                other.leave_core(events, Nanos(start), Reason::Preempted);
            }
        }
        let tr = &mut tracks[obs[k].tr];
        if tr.open_core != Some(old) {
            // `old` is its last CPU: no migration to record here.
            tr.leave_core(events, Nanos(start), Reason::Preempted);
            events.push(Event::Dispatch {
                t: Nanos(start),
                core: old,
                slot: tr.slot,
            });
        }
        // Never a zero-length piece: sorted by time, its Deschedule would come first.
        let end = (start + moved).min(t1).max(start + 1);
        events.push(Event::Deschedule {
            t: Nanos(end),
            core: old,
            slot: tr.slot,
            reason: Reason::Preempted,
        });
        tr.open_core = None;
        tr.last_core = Some(old);
        spill_end.insert(old, end);
        spilled_until.insert(k, end);
    }
    // Pre-pass: close pieces open on a CPU the thread no longer runs on, or that did not run.
    for o in &obs {
        let tr = &mut tracks[o.tr];
        if let Some(c) = tr.open_core {
            if o.ran == 0 || c != o.core {
                events.push(Event::Deschedule {
                    t: Nanos(t0),
                    core: c,
                    slot: tr.slot,
                    reason: if tr.runnable {
                        Reason::Preempted
                    } else {
                        Reason::Blocked
                    },
                });
                tr.open_core = None;
            }
        }
        if !tr.runnable && (o.ran > 0 || o.runnable) {
            let at = wake_time(o.ran, o.waited, t0, t1);
            events.push(Event::Wake {
                t: Nanos(at),
                slot: tr.slot,
            });
            tr.runnable = true;
            // Its pieces start no earlier than the wake-up (as after an arrival).
            tr.arrive_ns = tr.arrive_ns.max(at);
        }
    }
    // Per CPU layout.
    let mut per_core: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, o) in obs.iter().enumerate() {
        if o.ran > 0 {
            per_core.entry(o.core).or_default().push(k);
        }
    }
    let mut end_of: HashMap<usize, u64> = HashMap::new();
    for (core, mut ks) in per_core {
        // The thread still open here goes first so it continues without a dispatch; one that
        // came from another CPU in this interval goes last.
        ks.sort_by_key(|&k| {
            let tr = &tracks[obs[k].tr];
            (
                tr.open_core != Some(core),
                tr.last_core.is_some_and(|c| c != core),
                obs[k].tr,
            )
        });
        // Threads that arrived inside this interval start no earlier than their arrival, and
        // nobody starts before the parts spilled back onto this CPU.
        let t0 = ks
            .iter()
            .map(|&k| tracks[obs[k].tr].arrive_ns)
            .chain(spill_end.get(&core).copied())
            .max()
            .unwrap_or(t0)
            .clamp(t0, t1);
        let len = (t1 - t0).max(1);
        let total: u64 = ks.iter().map(|&k| obs[k].ran).sum();
        // More CPU time seen than the interval holds: schedstat's total of a thread that is
        // running now lags until its next accounting update (up to one tick), so its time
        // shows up an interval late. Place what fits and carry the rest of each thread's time
        // into its next interval, so that no CPU time is lost from the trace.
        let scale = if total > len {
            len as f64 / total as f64
        } else {
            1.0
        };
        if scale < 1.0 {
            for &k in &ks {
                let o = &obs[k];
                if o.finish.is_none() {
                    tracks[o.tr].carry += o.ran - (o.ran as f64 * scale) as u64;
                }
            }
        }
        let rounds = ks.iter().map(|&k| obs[k].pieces).max().unwrap_or(1);
        let mut seq: Vec<(usize, u64)> = Vec::new();
        // At least 1 ns: a zero-length piece would sort its Deschedule first.
        let piece = |o: &Obs, pieces: u64| (((o.ran as f64 * scale) / pieces as f64) as u64).max(1);
        for r in 0..rounds {
            for &k in &ks {
                let o = &obs[k];
                if r < o.pieces && !spilled_until.contains_key(&k) {
                    seq.push((k, piece(o, o.pieces)));
                }
            }
        }
        // A thread that spilled back onto its old CPU runs here in one piece, last, after its
        // piece there has ended.
        for &k in &ks {
            if spilled_until.contains_key(&k) {
                seq.push((k, piece(&obs[k], 1)));
            }
        }
        let placed: u64 = seq.iter().map(|s| s.1).sum();
        let gap = (len.saturating_sub(placed)) / seq.len() as u64;
        let mut cursor = t0;
        let mut open: Option<usize> = ks
            .iter()
            .copied()
            .find(|&k| tracks[obs[k].tr].open_core == Some(core));
        for (n, &(k, d)) in seq.iter().enumerate() {
            let o = &obs[k];
            if open != Some(k) {
                if let Some(prev) = open {
                    let pt = &mut tracks[obs[prev].tr];
                    events.push(Event::Deschedule {
                        t: Nanos(cursor),
                        core,
                        slot: pt.slot,
                        reason: if obs[prev].involuntary {
                            Reason::Preempted
                        } else {
                            Reason::Blocked
                        },
                    });
                    pt.open_core = None;
                }
                if let Some(&until) = spilled_until.get(&k) {
                    cursor = cursor.max(until).min(t1 - 1);
                }
                let tr = &mut tracks[o.tr];
                if let Some(from) = tr.last_core {
                    if from != core {
                        events.push(Event::Migrate {
                            t: Nanos(cursor),
                            slot: tr.slot,
                            from,
                            to: core,
                        });
                        tr.migrations += 1;
                    }
                }
                events.push(Event::Dispatch {
                    t: Nanos(cursor),
                    core,
                    slot: tr.slot,
                });
                tr.open_core = Some(core);
                tr.last_core = Some(core);
                open = Some(k);
            }
            // What no longer fits before the end of the interval goes into the next one.
            let d = if cursor + d > t1 {
                let fits = (t1 - cursor).max(1);
                tracks[o.tr].carry += d - fits;
                fits
            } else {
                d
            };
            cursor += d;
            let last = n + 1 == seq.len();
            let keep_open = last && o.runnable && o.finish.is_none() && gap * 20 < len;
            if gap > 0 || o.finish.is_some() || (last && !keep_open) {
                if !keep_open {
                    let tr = &mut tracks[o.tr];
                    events.push(Event::Deschedule {
                        t: Nanos(cursor),
                        core,
                        slot: tr.slot,
                        reason: if o.finish.is_some() && last_piece_of(&seq, n, k) {
                            Reason::Finished
                        } else if !o.runnable && last_piece_of(&seq, n, k) {
                            Reason::Blocked
                        } else if o.involuntary {
                            Reason::Preempted
                        } else {
                            Reason::Blocked
                        },
                    });
                    tr.open_core = None;
                    open = None;
                }
                cursor += gap;
            }
            end_of.insert(k, cursor.min(t1));
        }
    }
    // Blocks and finishes.
    for (k, o) in obs.iter().enumerate() {
        let tr = &mut tracks[o.tr];
        let at = end_of.get(&k).copied().unwrap_or(t0).max(tr.arrive_ns);
        if let Some(f) = o.finish {
            tr.leave_core(events, Nanos(at), Reason::Finished);
            events.push(Event::Finish {
                t: Nanos(f.max(at)),
                slot: tr.slot,
            });
            tr.finished = true;
            continue;
        }
        if !o.runnable && tr.runnable {
            tr.leave_core(events, Nanos(at), Reason::Blocked);
            events.push(Event::Block {
                t: Nanos(at),
                slot: tr.slot,
            });
            tr.runnable = false;
        } else if o.runnable && tr.runnable && tr.open_core.is_none() && at > tr.arrive_ns {
            // (Not for a thread that arrived or woke inside this interval: its runnable
            // stretch already starts where its time fits.)
            if let Some(slept) = slept_inside(o.ran, o.waited, t1 - t0) {
                let wake = (at + slept).min(t1);
                if wake > at {
                    events.push(Event::Block {
                        t: Nanos(at),
                        slot: tr.slot,
                    });
                    events.push(Event::Wake {
                        t: Nanos(wake),
                        slot: tr.slot,
                    });
                }
            }
        }
    }
    // Processes that ended.
    for (p, slot) in procs.iter_mut().enumerate() {
        let Some(pr) = slot.as_mut() else { continue };
        if pr.end_ns.is_some() {
            continue;
        }
        let done = match &mut pr.body {
            Body::Builtin(r) => r.all_finished(),
            Body::Command { pid, exit } => {
                if exit.is_none() {
                    *exit = spawn::try_wait(*pid);
                }
                exit.is_some()
            }
        };
        if done {
            // Threads of an ended command that the sampler still holds finish now.
            for tr in tracks.iter_mut().filter(|t| t.process == p && !t.finished) {
                tr.leave_core(events, Nanos(t1), Reason::Finished);
                events.push(Event::Finish {
                    t: Nanos(t1),
                    slot: tr.slot,
                });
                tr.finished = true;
            }
            pr.end_ns = Some(
                tracks
                    .iter()
                    .filter(|t| t.process == p)
                    .filter_map(|t| t.shared.as_ref())
                    .map(|s| s.finished_at.load(Ordering::Relaxed))
                    .max()
                    .unwrap_or(t1),
            );
        }
    }
}

/// When a thread blocked at `t0` and runnable at `t1` woke: it was runnable for its CPU time
/// `ran` and its run-queue delay `waited` in the interval, which end at `t1`.
fn wake_time(ran: u64, waited: u64, t0: u64, t1: u64) -> u64 {
    t1.saturating_sub(ran + waited).clamp(t0, t1)
}

/// How long a thread runnable at both ends of an interval of `len` slept inside it: the part
/// its CPU time and run-queue delay do not cover, when that is over a tenth of the interval
/// (below, schedstat's accounting lag of up to one tick is as large as the signal).
fn slept_inside(ran: u64, waited: u64, len: u64) -> Option<u64> {
    let slept = len.saturating_sub(ran + waited);
    (slept * 10 > len).then_some(slept)
}

fn last_piece_of(seq: &[(usize, u64)], n: usize, k: usize) -> bool {
    !seq[n + 1..].iter().any(|s| s.0 == k)
}

/// What the fair-share policies did during a run (`schedkit run` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct FairReport {
    pub policy: String,
    pub period_ns: u64,
    /// Controller ticks run.
    pub ticks: u64,
    /// CPU time of the controller loop itself (snapshot, controller, applying its actions,
    /// override checks), the engine thread's CPU clock read around every tick.
    pub controller_cpu_ns: u64,
    /// Run length, for `controller_cpu_ns` as a share of one core.
    pub wall_ns: u64,
    /// Threads the controller saw at its last tick (most at any tick).
    pub max_threads: usize,
    /// `cgroup v1 cpu.shares at /sys/fs/cgroup/cpu/schedkit-123`, when cgroups were used.
    pub cgroups: Option<String>,
    /// Each cgroup's key and final weight (v2 units).
    pub cgroup_weights: Vec<(String, u64)>,
    /// setpriority calls made for `SetWeight`.
    pub nice_changes: u64,
    /// Threads found with a nice value they set themselves, set back.
    pub overrides: u64,
    /// The first few overrides, in words.
    pub first_overrides: Vec<String>,
    /// sched_setaffinity calls made for `Migrate`.
    pub migrations: u64,
    /// Group weight changes through `schedkit ctl`, in order.
    pub weight_changes: Vec<crate::ctl::WeightChange>,
    pub ctl_socket: Option<PathBuf>,
    /// Control connections refused for their peer credentials.
    pub ctl_refused: u64,
    /// The sampler's own cost, beside the controller's.
    pub sampler: Option<SamplerReport>,
    /// The share trim's final correction factor per top-level cgroup (empty: no trim).
    pub trim_factors: Vec<(String, f64)>,
    /// Cgroup weight writes the trim made.
    pub trim_writes: u64,
}

impl FairReport {
    /// Controller CPU as a percentage of one core over the run.
    pub fn controller_cpu_pct(&self) -> f64 {
        100.0 * self.controller_cpu_ns as f64 / self.wall_ns.max(1) as f64
    }
}

/// The controller loop of the fair-share policies on real threads.
///
/// Every `policy.period` (first at the first sample after time 0) it builds the controller
/// [`Snapshot`](schedkit_core::control::Snapshot) from the sampler's latest `/proc` readings
/// (threads come and go: every live thread the sampler tracks, its last CPU, runnable or not,
/// its CPU time), runs the *same* controller the simulator runs, and applies its actions:
///
/// - `SetWeight`: the nearest nice value (`weights::nearest_nice`, the kernel's prio_to_weight
///   table) with setpriority on the TID; the thread's original class is journaled the first
///   time, so undo (or `schedkit restore`) puts its nice value back. Before each tick every
///   thread's nice is read back: one the thread changed itself is set back and counted;
/// - `Migrate`: sched_setaffinity to that one CPU (first change journaled per thread);
/// - `SetGroupWeight`: the group's cgroup weight (tenants), also what `schedkit ctl
///   set-weight` does, recorded in the trace as `GroupWeightChange` and in the report.
///
/// With cgroups carrying the tenant weights, the tenants controller's per-thread `SetWeight`
/// (its model of the same hierarchy on one flat run queue) is not applied: the kernel's group
/// scheduling does that split itself, and both together would count the weights twice.
/// `Stop`/`Resume` belong to gang scheduling, which has its own loop
/// ([`crate::freezer::GangRun`]).
pub struct FairRun {
    policy: String,
    controller: Option<Box<dyn schedkit_core::control::Controller>>,
    period: u64,
    next_tick: u64,
    cgroups: Option<crate::cgroup::CpuGroups>,
    /// Cgroup of each scenario process.
    cg_of_process: Vec<usize>,
    /// Cgroup of each scenario group (tenants).
    cg_of_group: Vec<usize>,
    group_weights: Vec<u64>,
    /// Apply `SetWeight` with nice (false when cgroups carry the weights).
    thread_weights: bool,
    /// Weight last asked for, per TID.
    weight: HashMap<i32, u64>,
    /// Nice value each thread should have, per TID (set at its first tick, then by us).
    nice: HashMap<i32, i32>,
    sched_journaled: std::collections::HashSet<i32>,
    affinity_journaled: std::collections::HashSet<i32>,
    nice_changes: u64,
    overrides: u64,
    first_overrides: Vec<String>,
    migrations: u64,
    ticks: u64,
    cpu_ns: u64,
    max_threads: usize,
    changes: Vec<crate::ctl::WeightChange>,
    ctl: Option<crate::ctl::CtlServer>,
    ctl_path: Option<PathBuf>,
    ctl_refused: u64,
    views: Vec<schedkit_core::control::ThreadView>,
    actions: Vec<schedkit_core::control::Action>,
    nice_warned: bool,
    /// global-fair: pin each thread to the CPU it is first seen on.
    pin_first_seen: bool,
    /// process-fair and tenants: the share trim (`crate::trim`), the top-level cgroup of
    /// each of its entities, and the entity of each scenario process.
    trim: Option<crate::trim::ShareTrim>,
    trim_cgroup: Vec<usize>,
    trim_entity_of_process: Vec<usize>,
    trim_writes: u64,
    /// What the run's user needs to know while it runs (the control socket's path), and
    /// warnings from setting it up: handed to the engine, which passes them on.
    pub notices: Vec<String>,
    pub start_warnings: Vec<String>,
    /// The weight last written to the cgroups' parent: the job's live threads at their
    /// weights, as if they ran beside the rest of the machine at the top level.
    parent_load: u64,
    /// The engine thread raised to SCHED_FIFO 10 (put back when the run ends).
    raised: Option<RaisedClass>,
}

// The controller's and the sampler's own cost are read with the thread CPU clock
// (`workload::thread_cpu_ns`), not getrusage(RUSAGE_THREAD): both read the thread's
// sum_exec_runtime, but getrusage does not add the slice running now, so the difference
// around a tick of a few microseconds reads 0 unless a timer tick or a switch fell inside it
// (measured: 0.000 ms over 30 tenants ticks with getrusage).

fn get_nice(tid: i32) -> Option<i32> {
    // getpriority returns the nice value; -1 is valid, so errno tells failure apart.
    // SAFETY: errno location is thread-local and writable; getpriority has no preconditions.
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        (*libc::__errno_location() == 0).then_some(n)
    }
}

fn set_nice(tid: i32, nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority has no memory preconditions.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The actions the fair-share engine applies: weights (nice or cgroup), affinity, group
/// weights. Stop/Resume are the gang engine's (the freezer).
const FAIR_APPLIES: &[schedkit_core::control::ActionKind] = &[
    schedkit_core::control::ActionKind::SetWeight,
    schedkit_core::control::ActionKind::Migrate,
    schedkit_core::control::ActionKind::SetGroupWeight,
];

impl FairRun {
    fn new(
        scenario: &Scenario,
        policy: &RunPolicy,
        roots: &Roots,
        journal: &mut Journal,
        state_dir: &std::path::Path,
    ) -> Result<FairRun> {
        let (name, period, controller) = match policy {
            RunPolicy::Fair { name, period } => {
                let sc = scenario
                    .with_policy_spec(
                        scenario
                            .policy()
                            .clone()
                            .with_name(*name)
                            .with_period(*period),
                    )
                    .map_err(|e| Error::Input(e.to_string()))?;
                let c = schedkit_core::controllers::build(&sc).ok_or_else(|| {
                    Error::Input(format!(
                        "{}: policy.name: `{name}` has no controller",
                        scenario.file()
                    ))
                })?;
                // Refuse now what `tick_controller` could not apply later.
                let missing = schedkit_core::control::unsupported(c.as_ref(), FAIR_APPLIES);
                if !missing.is_empty() {
                    return Err(Error::Input(format!(
                        "{}: policy.name: `{name}`'s controller may ask for {missing:?}, which the fair-share engine cannot apply",
                        scenario.file()
                    )));
                }
                (*name, period.0.max(1_000_000), Some(c))
            }
            _ => (
                PolicyName::ProcessFair,
                scenario.policy().period().0.max(1_000_000),
                None,
            ),
        };
        let tenants = name == PolicyName::Tenants;
        let mut run = FairRun {
            policy: name.to_string(),
            controller,
            period,
            next_tick: 0,
            cgroups: None,
            cg_of_process: Vec::new(),
            cg_of_group: Vec::new(),
            group_weights: scenario.groups().iter().map(|g| g.weight()).collect(),
            thread_weights: !tenants,
            weight: HashMap::new(),
            nice: HashMap::new(),
            sched_journaled: Default::default(),
            affinity_journaled: Default::default(),
            nice_changes: 0,
            overrides: 0,
            first_overrides: Vec::new(),
            migrations: 0,
            ticks: 0,
            cpu_ns: 0,
            max_threads: 0,
            changes: Vec::new(),
            ctl: None,
            ctl_path: None,
            ctl_refused: 0,
            views: Vec::new(),
            actions: Vec::new(),
            nice_warned: false,
            pin_first_seen: name == PolicyName::GlobalFair,
            trim: None,
            trim_cgroup: Vec::new(),
            trim_entity_of_process: Vec::new(),
            trim_writes: 0,
            notices: Vec::new(),
            start_warnings: Vec::new(),
            parent_load: 0,
            raised: None,
        };
        if name == PolicyName::ProcessFair || tenants {
            let mut cg = crate::cgroup::CpuGroups::create(roots, journal)?;
            cg.set_parent_load(
                scenario
                    .processes()
                    .iter()
                    .map(|p| p.weight() * p.threads().max(1) as u64)
                    .sum(),
            )?;
            if tenants {
                for g in scenario.groups() {
                    let i = cg.add(journal, g.name(), None, g.weight())?;
                    run.cg_of_group.push(i);
                }
                for p in scenario.processes() {
                    // A tenant of several processes splits its weight among them by their
                    // weights (one cgroup each inside the tenant's); a lone member uses the
                    // tenant's cgroup; an ungrouped process is its own tenant of weight
                    // w/1024 (a nice-0 process weighs as much as a tenant of weight 1, as in
                    // the simulator's tenants controller).
                    let i = match p.group() {
                        Some(g) => {
                            let members = scenario
                                .processes()
                                .iter()
                                .filter(|q| q.group() == Some(g))
                                .count();
                            if members > 1 {
                                let w = ((p.weight() * 100 + 512) / 1024).clamp(1, 10_000);
                                cg.add(journal, p.name(), Some(run.cg_of_group[g]), w)?
                            } else {
                                run.cg_of_group[g]
                            }
                        }
                        None => {
                            let w = ((p.weight() + 512) / 1024).clamp(1, 10_000);
                            cg.add(journal, p.name(), None, w)?
                        }
                    };
                    run.cg_of_process.push(i);
                }
                let srv = crate::ctl::CtlServer::bind(state_dir)?;
                run.notices.push(format!(
                    "control socket {} (schedkit ctl set-weight GROUP WEIGHT; schedkit ctl status)",
                    srv.path().display()
                ));
                run.ctl_path = Some(srv.path().into());
                run.ctl = Some(srv);
            } else {
                // Equal weights: the default of a new cgroup, written explicitly.
                for p in scenario.processes() {
                    let i = cg.add(journal, p.name(), None, 100)?;
                    run.cg_of_process.push(i);
                }
            }
            run.cgroups = Some(cg);
            if scenario.policy().trim() {
                // Top-level entities: each group's cgroup, and each ungrouped process's.
                let mut entity_of_group = vec![None; scenario.groups().len()];
                for (p, sp) in scenario.processes().iter().enumerate() {
                    let e = match sp.group().filter(|_| tenants) {
                        Some(g) => *entity_of_group[g].get_or_insert_with(|| {
                            run.trim_cgroup.push(run.cg_of_group[g]);
                            run.trim_cgroup.len() - 1
                        }),
                        None => {
                            run.trim_cgroup.push(run.cg_of_process[p]);
                            run.trim_cgroup.len() - 1
                        }
                    };
                    run.trim_entity_of_process.push(e);
                }
                run.trim = Some(crate::trim::ShareTrim::new());
            }
        }
        if run.controller.is_none() && run.trim.is_none() {
            run.next_tick = u64::MAX; // process-fair without trim: the cgroups do it all
        }
        // The engine thread samples, ticks and serves the socket: it must not queue behind the
        // job threads whose weights it raises (twrs gives nice -13 to a lone thread among
        // fifty), or every period comes late. SCHED_FIFO 10 where allowed, as gang does; job
        // threads are set SCHED_OTHER by their placement. Put back in `finish`; set last, so
        // that a failure above leaves the class alone.
        run.raised = RaisedClass::fifo(10);
        if run.raised.is_none() {
            run.start_warnings.push(format!("{name}: the engine thread stays SCHED_OTHER (no CAP_SYS_NICE); controller periods may be late under load"));
        }
        Ok(run)
    }

    /// The parent cgroup's weight follows the job's live threads (a command that forks 400
    /// tasks weighs as 400 threads, not as the one the scenario names); rewritten when it
    /// changes by more than a tenth, so a steady job costs no writes.
    fn update_parent_load(&mut self, scenario: &Scenario, tracks: &[Track]) {
        let Some(cg) = self.cgroups.as_ref() else {
            return;
        };
        let load: u64 = tracks
            .iter()
            .filter(|t| !t.finished)
            .map(|t| scenario.processes()[t.process].weight())
            .sum::<u64>()
            .max(1);
        let diff = load.abs_diff(self.parent_load);
        if diff * 10 > self.parent_load && cg.set_parent_load(load).is_ok() {
            self.parent_load = load;
        }
    }

    /// A command process joins its cgroup (before it is released).
    fn attach_command(&self, p: usize, pid: i32) -> Result<()> {
        match &self.cgroups {
            Some(cg) => cg.attach_process(self.cg_of_process[p], pid),
            None => Ok(()),
        }
    }

    /// A newly found thread joins its process's cgroup: built-in workload threads one by one
    /// (they are schedkit's own threads); on v1 command threads too (they were born inside,
    /// unless they moved themselves: the write puts them back).
    fn attach_thread(&self, p: usize, pid: i32, tid: i32, is_cmd: bool, nice: i32) -> Result<()> {
        let Some(cg) = &self.cgroups else {
            return Ok(());
        };
        // A built-in thread found before its own setup ran still has the engine thread's
        // SCHED_FIFO, which a v1 cpu cgroup refuses: give it its SCHED_OTHER class now.
        if matches!(
            sched::get_thread(tid),
            Ok(Policy::Fifo { .. } | Policy::Rr { .. })
        ) {
            let _ = sched::set_thread(tid, Policy::Other { nice });
        }
        let i = self.cg_of_process[p];
        match (cg.controller(), is_cmd) {
            (crate::cgroup::CpuController::V2(_), true) => cg.attach_process(i, pid),
            _ => cg.attach_thread(i, tid),
        }
    }

    /// Answers the `schedkit ctl` requests the control socket's thread has passed on; never
    /// waits for a client (see [`crate::ctl`]).
    fn serve_ctl(&mut self, now: u64, scenario: &Scenario, events: &mut Vec<Event>) {
        let Some(mut srv) = self.ctl.take() else {
            return;
        };
        srv.poll(|req| self.handle(req, now, scenario, events));
        self.ctl_refused = srv.counts().refused;
        self.ctl = Some(srv);
    }

    fn handle(
        &mut self,
        req: crate::ctl::Request,
        now: u64,
        scenario: &Scenario,
        events: &mut Vec<Event>,
    ) -> crate::ctl::Reply {
        use crate::ctl::{GroupStatus, Reply, Request, Status};
        match req {
            Request::Status => Reply {
                ok: true,
                error: None,
                message: None,
                status: Some(Status {
                    pid: std::process::id() as i32,
                    policy: self.policy.clone(),
                    period_ns: self.period,
                    elapsed_ns: now,
                    controller: self
                        .cgroups
                        .as_ref()
                        .map(|c| format!("{} at {}", c.controller().name(), c.parent().display()))
                        .unwrap_or_default(),
                    groups: scenario
                        .groups()
                        .iter()
                        .enumerate()
                        .map(|(g, sg)| GroupStatus {
                            name: sg.name().to_string(),
                            weight: self.group_weights[g],
                            kernel_value: self
                                .cgroups
                                .as_ref()
                                .and_then(|c| c.read_weight_value(*self.cg_of_group.get(g)?)),
                        })
                        .collect(),
                    changes: self.changes.clone(),
                }),
            },
            Request::SetWeight { group, weight } => {
                if let Err(m) = crate::ctl::check_weight(weight) {
                    return Reply::error(m);
                }
                let Some(g) = scenario.groups().iter().position(|sg| sg.name() == group) else {
                    let known: Vec<&str> = scenario.groups().iter().map(|g| g.name()).collect();
                    return Reply::error(format!(
                        "unknown group `{group}` (groups of this run: {})",
                        known.join(", ")
                    ));
                };
                match self.set_group_weight(g, weight, now, scenario, events) {
                    Ok(()) => Reply::done(format!(
                        "weight of group {group} set to {weight} at {}",
                        Nanos(now)
                    )),
                    Err(e) => Reply::error(e.to_string()),
                }
            }
        }
    }

    fn set_group_weight(
        &mut self,
        g: usize,
        weight: u64,
        now: u64,
        scenario: &Scenario,
        events: &mut Vec<Event>,
    ) -> Result<()> {
        if let (Some(cg), Some(&i)) = (self.cgroups.as_mut(), self.cg_of_group.get(g)) {
            cg.set_weight(i, weight)?;
            // With the trim on, the group keeps its correction factor from the first moment.
            if let (Some(t), Some(e)) = (&self.trim, self.trim_cgroup.iter().position(|&c| c == i))
            {
                cg.set_weight_trimmed(i, weight as f64 * t.factor(e))?;
            }
        }
        self.group_weights[g] = weight;
        events.push(Event::GroupWeightChange {
            t: Nanos(now),
            group: g,
            weight,
        });
        self.changes.push(crate::ctl::WeightChange {
            t_ns: now,
            group: scenario.groups()[g].name().to_string(),
            weight,
        });
        Ok(())
    }

    /// One controller period (see the type's docs).
    #[allow(clippy::too_many_arguments)]
    fn tick(
        &mut self,
        now: u64,
        scenario: &Scenario,
        cores: usize,
        (tracks, by_tid): (&[Track], &HashMap<i32, usize>),
        journal: &mut Journal,
        events: &mut Vec<Event>,
        warnings: &mut Vec<String>,
    ) {
        let cpu0 = workload::thread_cpu_ns();
        self.ticks += 1;
        self.next_tick = now + self.period;
        let live = || tracks.iter().filter(|t| !t.finished);
        // A thread's own nice change: found, set back, reported.
        if self.thread_weights {
            for tr in live() {
                let Some(&want) = self.nice.get(&tr.tid) else {
                    continue;
                };
                if let Some(cur) = get_nice(tr.tid) {
                    if cur != want && set_nice(tr.tid, want).is_ok() {
                        self.overrides += 1;
                        if self.first_overrides.len() < 5 {
                            let sp = &scenario.processes()[tr.process];
                            self.first_overrides.push(format!(
                                "{}.{} (tid {}) set nice {cur} at {}; set back to {want}",
                                sp.name(),
                                tr.index,
                                tr.tid,
                                Nanos(now)
                            ));
                        }
                    }
                }
            }
        }
        self.update_parent_load(scenario, tracks);
        self.trim_tick(now, tracks, warnings);
        let Some(mut ctl) = self.controller.take() else {
            self.cpu_ns += workload::thread_cpu_ns().saturating_sub(cpu0);
            return;
        };
        self.views.clear();
        for tr in live() {
            let sp = &scenario.processes()[tr.process];
            self.views.push(schedkit_core::control::ThreadView {
                id: tr.tid as u64,
                process: tr.process,
                index: tr.index as usize,
                group: sp.group(),
                core: (tr.last.tid != 0).then_some(tr.last.cpu),
                weight: self.weight.get(&tr.tid).copied().unwrap_or(sp.weight()),
                base_weight: sp.weight(),
                runnable: tr.runnable,
                cpu: Nanos(tr.prev_run),
            });
            // Threads seen for the first time keep the nice their placement gave them.
            self.nice.entry(tr.tid).or_insert(sp.nice());
        }
        // Tracks go in order of first sighting across processes; the controller contract
        // promises the engine-independent (process, thread number) order.
        self.views
            .sort_unstable_by_key(schedkit_core::control::ThreadView::key);
        self.max_threads = self.max_threads.max(self.views.len());
        if self.pin_first_seen {
            self.place_new_threads(scenario, cores, tracks, by_tid, journal);
        }
        self.actions.clear();
        ctl.tick(
            &schedkit_core::control::Snapshot {
                now: Nanos(now),
                cores,
                threads: &self.views,
                group_weights: &self.group_weights,
                scenario,
            },
            &mut self.actions,
        );
        let actions = std::mem::take(&mut self.actions);
        for a in &actions {
            use schedkit_core::control::Action;
            let track_of = |id: u64| {
                by_tid
                    .get(&(id as i32))
                    .map(|&i| &tracks[i])
                    .filter(|t| !t.finished)
            };
            match *a {
                Action::SetWeight { thread, weight } => {
                    self.weight.insert(thread as i32, weight);
                    let Some(tr) = track_of(thread).filter(|_| self.thread_weights) else {
                        continue;
                    };
                    let nice = schedkit_core::weights::nearest_nice(weight as f64);
                    if self.nice.get(&tr.tid) == Some(&nice)
                        && self.sched_journaled.contains(&tr.tid)
                    {
                        continue;
                    }
                    if self.sched_journaled.insert(tr.tid) {
                        // First change of this thread: its original class and nice go into
                        // the journal before anything changes.
                        if let Err(e) = journal.set_sched(tr.pid, tr.tid, Policy::Other { nice }) {
                            // A thread that ended since the sample is not worth a warning.
                            if matches!(e, Error::Privilege(_))
                                || matches!(e.errno(), Some(libc::EPERM | libc::EACCES))
                            {
                                self.warn_nice(warnings, &e.to_string());
                            }
                            self.sched_journaled.remove(&tr.tid);
                            continue;
                        }
                    } else if let Err(e) = set_nice(tr.tid, nice) {
                        if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) {
                            self.warn_nice(warnings, &e.to_string());
                        }
                        continue;
                    }
                    self.nice.insert(tr.tid, nice);
                    self.nice_changes += 1;
                    events.push(Event::WeightChange {
                        t: Nanos(now),
                        slot: tr.slot,
                        weight,
                    });
                }
                Action::Migrate { thread, core } => {
                    let Some(tr) = track_of(thread) else { continue };
                    let set = CpuSet::single(core);
                    let r = if self.affinity_journaled.insert(tr.tid) {
                        journal.set_affinity(tr.pid, tr.tid, &set)
                    } else {
                        affinity::set_thread(tr.tid, &set)
                    };
                    if r.is_ok() {
                        self.migrations += 1;
                    }
                }
                Action::SetGroupWeight { group, weight } => {
                    if let Err(e) = self.set_group_weight(group, weight, now, scenario, events) {
                        warnings.push(format!("group weight not set: {e}"));
                    }
                }
                // Refused when the run was built (FAIR_APPLIES); a controller that pushes one
                // anyway breaks its own `emits` contract, and the run says so.
                Action::Stop { .. } | Action::Resume { .. } => {
                    warnings.push(format!(
                        "{}: refused {a:?}: the fair-share engine cannot stop or resume",
                        ctl.name()
                    ));
                }
            }
        }
        self.actions = actions;
        self.controller = Some(ctl);
        self.cpu_ns += workload::thread_cpu_ns().saturating_sub(cpu0);
    }

    /// The share trim's period: each top-level entity's CPU time and runnable threads from
    /// the sampler's latest readings, and the corrected weights written to the cgroups.
    fn trim_tick(&mut self, now: u64, tracks: &[Track], warnings: &mut Vec<String>) {
        let (Some(trim), Some(cg)) = (self.trim.as_mut(), self.cgroups.as_ref()) else {
            return;
        };
        let mut ents: Vec<crate::trim::EntityPeriod> = self
            .trim_cgroup
            .iter()
            .map(|&i| crate::trim::EntityPeriod {
                weight: cg.groups()[i].weight,
                runnable: 0,
                cpu_ns: 0,
            })
            .collect();
        for tr in tracks {
            let e = &mut ents[self.trim_entity_of_process[tr.process]];
            e.cpu_ns += tr.prev_run;
            e.runnable += usize::from(!tr.finished && tr.runnable);
        }
        let Some(weights) = trim.tick(now, &ents) else {
            return;
        };
        for (&i, w) in self.trim_cgroup.iter().zip(weights) {
            match cg.set_weight_trimmed(i, w) {
                Ok(()) => self.trim_writes += 1,
                Err(e) => {
                    warnings.push(format!("share trim stopped: {e}"));
                    self.trim = None;
                    return;
                }
            }
        }
    }

    /// global-fair on real cores: the kernel's balancer keeps moving unpinned threads (T1 of
    /// the global example was seen switching CPUs every half second), which swaps the
    /// shuttle's home and light core under it, and right after they start it may still have
    /// several on one CPU. So every thread the controller has not placed yet is pinned here
    /// (journaled), heaviest first, to the CPU with the least weight of pinned runnable
    /// threads (ties: the CPU it is on): the balance CFS aims for (eq. 4.1), after which only
    /// the controller moves job threads. Scenario `cpus` stay as they are. Updates the views.
    fn place_new_threads(
        &mut self,
        scenario: &Scenario,
        cores: usize,
        tracks: &[Track],
        by_tid: &HashMap<i32, usize>,
        journal: &mut Journal,
    ) {
        let mut load = vec![0u64; cores];
        let mut new: Vec<usize> = Vec::new();
        for (k, v) in self.views.iter().enumerate() {
            let tid = v.id as i32;
            let fixed = scenario.processes()[v.process].cpus().is_some();
            if self.affinity_journaled.contains(&tid) || fixed {
                if let (true, Some(c)) = (v.runnable, v.core.filter(|&c| c < cores)) {
                    load[c] += v.weight;
                }
            } else {
                new.push(k);
            }
        }
        new.sort_by_key(|&k| (std::cmp::Reverse(self.views[k].weight), self.views[k].id));
        for k in new {
            let v = &self.views[k];
            let here = v.core.filter(|&c| c < cores);
            let Some(c) = (0..cores).min_by_key(|&c| (load[c], Some(c) != here)) else {
                return;
            };
            let Some(tr) = by_tid.get(&(v.id as i32)).map(|&i| &tracks[i]) else {
                continue;
            };
            if journal
                .set_affinity(tr.pid, tr.tid, &CpuSet::single(c))
                .is_ok()
            {
                self.affinity_journaled.insert(tr.tid);
                // Counted even if not runnable at this instant: a thread seen for the first
                // time has usually just started (seen here blocked in its start-up, several
                // threads of the global example all went to one CPU).
                load[c] += v.weight;
                self.views[k].core = Some(c);
            }
        }
    }

    fn warn_nice(&mut self, warnings: &mut Vec<String>, e: &str) {
        if !self.nice_warned {
            self.nice_warned = true;
            warnings.push(format!(
                "a thread weight could not be applied as a nice value ({e}); raising a weight above the scenario's needs CAP_SYS_NICE: {}",
                Privileges::HOW_TO_NICE
            ));
        }
    }

    /// The report; drops the control socket (the run is over). The cgroups go with the
    /// journal's undo.
    fn finish(mut self, end: u64) -> FairReport {
        if let Some(srv) = self.ctl.take() {
            self.ctl_refused = srv.counts().refused;
        }
        self.raised = None;
        FairReport {
            policy: self.policy,
            period_ns: self.period,
            ticks: self.ticks,
            controller_cpu_ns: self.cpu_ns,
            wall_ns: end,
            max_threads: self.max_threads,
            cgroups: self
                .cgroups
                .as_ref()
                .map(|c| format!("{} at {}", c.controller().name(), c.parent().display())),
            cgroup_weights: self
                .cgroups
                .as_ref()
                .map(|c| {
                    c.groups()
                        .iter()
                        .map(|g| (g.key.clone(), g.weight))
                        .collect()
                })
                .unwrap_or_default(),
            nice_changes: self.nice_changes,
            overrides: self.overrides,
            first_overrides: self.first_overrides,
            migrations: self.migrations,
            weight_changes: self.changes,
            ctl_socket: self.ctl_path,
            ctl_refused: self.ctl_refused,
            sampler: None,
            trim_factors: match (&self.trim, &self.cgroups) {
                (Some(t), Some(cg)) => self
                    .trim_cgroup
                    .iter()
                    .enumerate()
                    .map(|(e, &i)| (cg.groups()[i].key.clone(), t.factor(e)))
                    .collect(),
                _ => Vec::new(),
            },
            trim_writes: self.trim_writes,
        }
    }
}

/// The fair-share part of `schedkit run`'s text report.
pub fn render_fair(f: &FairReport) -> String {
    let mut out = if f.ticks == 0 {
        format!("\n{}: no controller (cgroup weights only)\n", f.policy)
    } else {
        format!(
        "\n{}: {} controller tick(s) every {}; controller cpu {:.3} ms ({:.3} % of one core, {:.1} us per tick, up to {} threads)\n",
        f.policy,
        f.ticks,
        Nanos(f.period_ns),
        f.controller_cpu_ns as f64 / 1e6,
        f.controller_cpu_pct(),
        f.controller_cpu_ns as f64 / 1e3 / f.ticks.max(1) as f64,
        f.max_threads
    )
    };
    if let Some(s) = &f.sampler {
        out.push_str(&format!("  {}\n", s.line()));
    }
    if let Some(c) = &f.cgroups {
        let w: Vec<String> = f
            .cgroup_weights
            .iter()
            .map(|(k, w)| format!("{k}={w}"))
            .collect();
        out.push_str(&format!(
            "  cgroups: {c}; weights (cpu.weight units): {}\n",
            w.join(" ")
        ));
    }
    if !f.trim_factors.is_empty() {
        let t: Vec<String> = f
            .trim_factors
            .iter()
            .map(|(k, x)| format!("{k} x{x:.3}"))
            .collect();
        out.push_str(&format!(
            "  share trim: {} weight write(s); final correction factors: {}\n",
            f.trim_writes,
            t.join(" ")
        ));
    }
    if f.nice_changes > 0 || f.overrides > 0 {
        out.push_str(&format!(
            "  nice values set: {}; threads that changed their own nice, set back: {}\n",
            f.nice_changes, f.overrides
        ));
        for o in &f.first_overrides {
            out.push_str(&format!("    {o}\n"));
        }
    }
    if f.migrations > 0 {
        out.push_str(&format!(
            "  shuttle moves (sched_setaffinity): {} ({:.1} per second)\n",
            f.migrations,
            f.migrations as f64 * 1e9 / f.wall_ns.max(1) as f64
        ));
    }
    if let Some(p) = &f.ctl_socket {
        out.push_str(&format!("  control socket: {}\n", p.display()));
    }
    for c in &f.weight_changes {
        out.push_str(&format!(
            "  weight of group {} set to {} at {}\n",
            c.group,
            c.weight,
            Nanos(c.t_ns)
        ));
    }
    if f.ctl_refused > 0 {
        out.push_str(&format!(
            "  control connections refused (not the run's owner): {}\n",
            f.ctl_refused
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_period_grows_to_the_budget_within_its_bounds() {
        // 100 us per sample against 1 % of a core: 10 ms, the SPEC's bound.
        let mut p = SamplePeriod::new(
            Duration::from_millis(2),
            Duration::from_nanos(MAX_SAMPLE_NS),
            Some(0.01),
        );
        p.record(100_000);
        assert_eq!(p.period, MAX_SAMPLE_NS);
        // 40 us per sample (EWMA 1/4 from 100): 85 us, then down towards 4 ms.
        for _ in 0..40 {
            p.record(40_000);
        }
        assert!((4_000_000..4_100_000).contains(&p.period), "{}", p.period);
        // Cheap samples never go below the requested period.
        for _ in 0..40 {
            p.record(1_000);
        }
        assert_eq!(p.period, 2_000_000);
        assert_eq!(
            (p.report.min_period_ns, p.report.max_period_ns),
            (2_000_000, MAX_SAMPLE_NS)
        );
        assert_eq!(p.report.samples, 81);
        // Without a budget the period is fixed.
        let mut f = SamplePeriod::new(Duration::from_millis(5), Duration::from_millis(5), None);
        f.record(10_000_000);
        assert_eq!(f.period, 5_000_000);
    }
}
