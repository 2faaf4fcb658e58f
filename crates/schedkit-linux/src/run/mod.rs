//! The real engine behind `schedkit run`: start every process of a scenario at its arrival,
//! place it under the policy, sample every thread, and turn the samples into the same trace
//! events the simulator writes.
//!
//! - [`policy`]: what a scenario's policy means on this kernel ([`RunPolicy`]), and the
//!   checks made before anything changes ([`preflight`]);
//! - [`sampler`]: reading every job thread's `/proc` files each period and turning the
//!   readings into trace events (how, and what it costs, is in its docs);
//! - [`fair`]: the fair-share policies' controller loop ([`FairRun`]) and its report;
//! - [`gang`]: gang scheduling's controller loop ([`GangRun`]) over the freezer.

mod fair;
mod gang;
mod policy;
mod sampler;

pub use fair::{FairReport, FairRun};
pub use gang::{GangRun, GangRunReport, RunThread};
pub use policy::{preflight, RunPolicy};
pub use sampler::SamplerReport;

use crate::affinity::{self, CpuSet};
use crate::exclusive::{ExclusiveReport, Isolation};
use crate::journal::{Journal, Undone};
use crate::perf::{CounterKind, CounterSet, CounterSource, PerfSource, Reading, Target};
use crate::privilege::Privileges;
use crate::procfs::{self, ThreadStat};
use crate::sched::{self, Policy};
use crate::spawn;
use crate::topo::Topology;
use crate::workload::{self, ThreadShared, WorkSpec};
use crate::{Error, Result, Roots};
use policy::rt_priority;
use sampler::{
    descendants, discover, rank, sample, Body, Proc, SamplePeriod, Track, MAX_SAMPLE_NS,
};
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, Owner, Reason, Slot};
use schedkit_core::Nanos;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
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
        horizon: opts.bounded.then_some(scenario.horizon),
        ..Default::default()
    };
    if let Some(w) = crate::honest::fewer_cpus(scenario.cores, &frame.online, &frame.allowed) {
        if !opts.allow_degraded {
            return Err(Error::Degraded(format!(
                "{}: cores: {w}; give the run the CPUs (or lower `cores`), or pass \
                 --allow-degraded to run on fewer and say so in the report",
                scenario.file
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
        RunPolicy::Gang { quantum } => Some(GangRun::new(&roots, *quantum)),
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
    let mut order: Vec<usize> = (0..scenario.processes.len()).collect();
    order.sort_by_key(|&i| (scenario.processes[i].arrival, i));
    let mut pending = order.into_iter().peekable();
    let horizon = scenario.horizon.0;
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
            origin + Duration::from_nanos(scenario.horizon.0),
            vec![opts.stop.clone()],
            signal_flag(),
        ),
    };
    let mut procs: Vec<Option<Proc>> = (0..scenario.processes.len()).map(|_| None).collect();
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
        let proc_ = &scenario.processes[p];
        match &opts.policy {
            RunPolicy::Default => (
                proc_.cpus.as_ref().map(|c| c.iter().copied().collect()),
                (proc_.nice != 0).then_some(Policy::Other { nice: proc_.nice }),
            ),
            RunPolicy::Fifo { priority } => (
                proc_.cpus.as_ref().map(|c| c.iter().copied().collect()),
                Some(Policy::Fifo {
                    priority: rt_priority(*priority, proc_.priority),
                }),
            ),
            RunPolicy::Rr { priority, .. } => (
                proc_.cpus.as_ref().map(|c| c.iter().copied().collect()),
                Some(Policy::Rr {
                    priority: rt_priority(*priority, proc_.priority),
                }),
            ),
            // The gang controller pins each thread to its matrix column; the class is set
            // explicitly, since the engine thread they inherit from runs SCHED_FIFO.
            RunPolicy::Gang { .. } => (None, Some(Policy::Other { nice: proc_.nice })),
            // SCHED_OTHER explicitly: weights (nice, cgroup shares) only act on that class,
            // and v1 refuses real-time threads in a new cpu cgroup.
            RunPolicy::ProcessFair | RunPolicy::Fair { .. } => (
                proc_.cpus.as_ref().map(|c| c.iter().copied().collect()),
                Some(Policy::Other { nice: proc_.nice }),
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
                if scenario.processes[p].arrival.0 > now || interrupted || now >= horizon {
                    break;
                }
                pending.next();
                let sp = &scenario.processes[p];
                let start_ns = origin.elapsed().as_nanos() as u64;
                let body = if let Some(cmd) = &sp.command {
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
                            scenario.file,
                            sp.line,
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
                        work: sp.work.clone(),
                        threads: sp.threads,
                        burst: sp.burst.map(|b| b.0),
                        iterations: opts.iterations,
                        pattern: sp.pattern.clone(),
                    };
                    let base = next_pin;
                    next_pin += sp.threads as usize;
                    let plans: Vec<(Option<CpuSet>, Option<Policy>)> = (0..sp.threads as usize)
                        .map(|k| placement(p, base + k))
                        .collect();
                    let refused = thread_warnings.clone();
                    let name = sp.name.clone();
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
                        workload::start(&sp.name, &spec, origin, stop_threads.clone(), setup)
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
                    let arrive_at = if index < scenario.processes[p].threads {
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
                                            scenario.processes[p].name,
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
                        f.attach_thread(p, pid, tid, is_cmd, scenario.processes[p].nice)?;
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
                let threads: Vec<RunThread> = tracks
                    .iter()
                    .map(|t| RunThread {
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
        let sp = &scenario.processes[tr.process];
        thread_out.push(ThreadOutcome {
            name: format!("{}.{}", sp.name, tr.index),
            process: sp.name.clone(),
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
        let sp = &scenario.processes[p];
        let mine: Vec<&ThreadOutcome> =
            thread_out.iter().filter(|t| t.process == sp.name).collect();
        let Some(pr) = pr.as_mut() else {
            processes.push(ProcessOutcome {
                name: sp.name.clone(),
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
            name: sp.name.clone(),
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

    let mut sc = scenario.clone();
    for (p, sp) in sc.processes.iter_mut().enumerate() {
        let n = tracks.iter().filter(|t| t.process == p).count() as u32;
        sp.threads = sp.threads.max(n);
    }
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
