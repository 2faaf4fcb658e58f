//! The real engine behind `schedkit run`: start every process of a scenario at its arrival,
//! place it under the policy, sample every thread, and turn the samples into the same trace
//! events the simulator writes.
//!
//! ## From samples to the trace
//!
//! Every `sample` period (10 ms by default, the SPEC's bound) the sampler reads each job
//! thread's `/proc` files. Between two samples `[t0, t1)` a thread ran `r` ns (schedstat), was
//! switched out `v + i` times (voluntary + involuntary) and was last seen on CPU `c`. The
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
}

impl RunPolicy {
    /// The policy a scenario asks for, or an input error for simulator-only policies.
    pub fn from_scenario(s: &Scenario) -> Result<RunPolicy> {
        Ok(match s.policy.name {
            PolicyName::Default => RunPolicy::Default,
            PolicyName::Fcfs => RunPolicy::Fifo { priority: None },
            PolicyName::Rr => RunPolicy::Rr {
                priority: None,
                quantum_ms: (s.policy.quantum.0 / 1_000_000).max(1),
            },
            PolicyName::Exclusive => RunPolicy::Exclusive(ExclusiveConfig::default()),
            PolicyName::Gang => RunPolicy::Gang {
                quantum: s.policy.quantum,
            },
            other => {
                return Err(Error::Input(format!(
                    "{}: policy.name: `{other}` runs in `schedkit sim` only; `schedkit run` supports default, fcfs, rr, exclusive and gang",
                    s.file
                )))
            }
        })
    }
    fn needs_rt(&self) -> bool {
        !matches!(self, RunPolicy::Default | RunPolicy::Gang { .. })
    }
}

/// Options of one run.
pub struct RunOptions {
    pub policy: RunPolicy,
    /// Sampling period (at most 10 ms for the SPEC's lag sampling).
    pub sample: Duration,
    /// Open perf counters per process.
    pub perf: bool,
    pub roots: Roots,
    pub state_dir: PathBuf,
    /// Set to stop early (SIGINT/SIGTERM handlers set [`signal_flag`] too).
    pub stop: Arc<AtomicBool>,
    /// Called after each sample with the fraction of the horizon elapsed.
    pub progress: Option<Box<dyn FnMut(f64)>>,
    /// Counter source (tests pass a fake one).
    pub counters: Option<Box<dyn CounterSource>>,
    /// Iterations per thread of built-in workloads (experiments fix the amount of work, not
    /// the CPU time); `None`: the scenario's `burst` or the horizon decides.
    pub iterations: Option<u64>,
}

impl RunOptions {
    pub fn new(policy: RunPolicy) -> RunOptions {
        RunOptions {
            policy,
            sample: Duration::from_millis(10),
            perf: true,
            roots: Roots::host(),
            state_dir: crate::journal::state_dir(),
            stop: Arc::new(AtomicBool::new(false)),
            progress: None,
            counters: None,
            iterations: None,
        }
    }
}

/// Kernel truth about one job thread.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadOutcome {
    pub name: String,
    pub process: String,
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
    for p in &s.processes {
        if let Some(cmd) = &p.command {
            if spawn::resolve(&cmd[0]).is_none() {
                return Err(Error::Input(format!(
                    "{}:{}: process.command: `{}` not found (not in PATH or not executable)",
                    s.file, p.line, cmd[0]
                )));
            }
        }
        if let Some(cpus) = &p.cpus {
            for &c in cpus {
                if !topo.online.contains(c) {
                    return Err(Error::Input(format!(
                        "{}:{}: process.cpus: CPU {c} does not exist on this machine (online CPUs: {})",
                        s.file, p.line, topo.online
                    )));
                }
            }
        }
    }
    if !s.tasks.is_empty() {
        return Err(Error::Input(format!(
            "{}: task: periodic [[task]] entries run in `schedkit sim` only for now",
            s.file
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
}

enum Body {
    Builtin(workload::Running),
    Command { pid: i32, exit: Option<String> },
}

struct Proc {
    start_ns: u64,
    end_ns: Option<u64>,
    body: Body,
    counters: Option<CounterSet>,
    next_index: u32,
}

/// Sort rank at equal times: leave a CPU before anyone takes it.
fn rank(e: &Event) -> u8 {
    match e {
        Event::Deschedule { .. } => 0,
        Event::Finish { .. } => 1,
        Event::Block { .. } => 2,
        Event::Arrive { .. } => 3,
        Event::Wake { .. } => 4,
        Event::Migrate { .. } => 5,
        Event::Dispatch { .. } => 6,
        _ => 7,
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

    // Journal only when the run changes shared state.
    let needs_journal = matches!(
        opts.policy,
        RunPolicy::Exclusive(_) | RunPolicy::Rr { .. } | RunPolicy::Gang { .. }
    );
    let mut journal = if needs_journal {
        Some(Journal::create(&opts.state_dir, &roots)?)
    } else {
        None
    };
    let mut isolation = None;
    let mut job_cpus = topo.online.clone();
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
            // The sampler itself lives on the system cores.
            affinity::set_thread(0, &iso.system)?;
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

    // Order of arrival.
    let mut order: Vec<usize> = (0..scenario.processes.len()).collect();
    order.sort_by_key(|&i| (scenario.processes[i].arrival, i));
    let mut pending = order.into_iter().peekable();
    let horizon = scenario.horizon.0;
    let origin = Instant::now();
    let stop_threads = Arc::new(AtomicBool::new(false));
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
                    let g = spawn::fork_gated(cmd)?;
                    let pid = g.pid;
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
                    };
                    let base = next_pin;
                    next_pin += sp.threads as usize;
                    let plans: Vec<(Option<CpuSet>, Option<Policy>)> = (0..sp.threads as usize)
                        .map(|k| placement(p, base + k))
                        .collect();
                    let setup: Arc<dyn Fn(u32) + Send + Sync> = Arc::new(move |k: u32| {
                        // Class first, then the CPU: a real-time thread that moves to its
                        // CPU preempts what runs there, while a SCHED_OTHER one would queue
                        // behind it and could be overtaken by a later thread that became
                        // real-time first (FCFS order would break).
                        let (c, pol) = &plans[k as usize];
                        if let Some(pol) = pol {
                            if let Err(e) = sched::set_thread(0, *pol) {
                                eprintln!("schedkit: warning: {e}");
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
                    Body::Command { pid, .. } => {
                        let mut v: Vec<(i32, i32, Option<Arc<ThreadShared>>)> = Vec::new();
                        for pid in descendants(&roots, *pid) {
                            for tid in procfs::tids(&roots, pid) {
                                v.push((pid, tid, None));
                            }
                        }
                        v
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
                                if cur != pol {
                                    let _ = sched::set_thread(tid, pol);
                                }
                            }
                        }
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
                        prev_sw: (0, 0),
                        open_core: None,
                        last_core: None,
                        runnable: true,
                        finished: false,
                        shared,
                        last: ThreadStat::default(),
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
            sample(&roots, &mut tracks, &mut procs, &mut events, t_prev, t_now);
            t_prev = t_now;
            // Gang scheduling: one controller tick; Stop/Resume go through the freezer.
            if let Some(g) = gang.as_mut() {
                let threads: Vec<crate::freezer::RunThread> = tracks
                    .iter()
                    .map(|t| crate::freezer::RunThread {
                        process: t.process,
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
            let next = (t_now + opts.sample.as_nanos() as u64).min(horizon);
            // A gang slot may end before the next sample.
            let next = gang
                .as_ref()
                .map_or(next, |g| next.min(t_now + g.period().as_nanos() as u64));
            let sleep = next.saturating_sub(origin.elapsed().as_nanos() as u64);
            std::thread::sleep(Duration::from_nanos(sleep.max(200_000)));
        }
        Ok(())
    })();

    // A frozen job cannot stop or take SIGTERM: thaw every gang first.
    if let Some(g) = gang.as_mut() {
        g.thaw_all();
    }
    // Wind down: stop built-in threads and commands still running.
    let end = (origin.elapsed().as_nanos() as u64).max(t_prev);
    stop_threads.store(true, Ordering::Relaxed);
    // Demote the job's remaining threads first: a FIFO thread spinning on a CPU would keep
    // its own process (or a waiting parent on that CPU) from running to handle the signal.
    for tr in tracks.iter().filter(|t| !t.finished) {
        let _ = sched::set_thread(tr.tid, Policy::Other { nice: 0 });
    }
    for pr in procs.iter_mut().flatten() {
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
    // Undo (also on error: the journal's Drop would, but we want the report).
    let undone = journal.as_mut().map(|j| j.undo()).unwrap_or_default();
    drop(journal);
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
        cores: topo.n_cpus().max(ncpu.min(topo.n_cpus())),
        threads: thread_out,
        processes,
        exclusive: isolation.map(|(i, _)| i.report),
        warnings,
        interrupted,
        undone,
        gang,
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

/// One sampling step over `[t0, t1)`: reads every live thread and writes the interval's
/// events (see the module docs).
fn sample(
    roots: &Roots,
    tracks: &mut [Track],
    procs: &mut [Option<Proc>],
    events: &mut Vec<Event>,
    t0: u64,
    t1: u64,
) {
    // (track, ran ns, pieces, new core, state, finish time)
    struct Obs {
        tr: usize,
        ran: u64,
        pieces: u64,
        core: usize,
        runnable: bool,
        finish: Option<u64>,
        involuntary: bool,
    }
    let mut obs: Vec<Obs> = Vec::new();
    for (i, tr) in tracks.iter_mut().enumerate() {
        if tr.finished {
            continue;
        }
        let fin_at = tr
            .shared
            .as_ref()
            .map(|s| s.finished_at.load(Ordering::Acquire))
            .filter(|&f| f != 0);
        let st = ThreadStat::read(roots, tr.pid, tr.tid);
        let (run, sw, core, runnable, finish) = match (st, fin_at) {
            (Ok(st), None) if st.state != 'Z' && st.state != 'X' => {
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
            ran,
            pieces: 1 + (dv + di).min(8),
            core,
            runnable,
            finish,
            involuntary: di > 0,
        });
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
            events.push(Event::Wake {
                t: Nanos(t0),
                slot: tr.slot,
            });
            tr.runnable = true;
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
        // The thread still open here goes first so it continues without a dispatch.
        ks.sort_by_key(|&k| (tracks[obs[k].tr].open_core != Some(core), obs[k].tr));
        // Threads that arrived inside this interval start no earlier than their arrival.
        let t0 = ks
            .iter()
            .map(|&k| tracks[obs[k].tr].arrive_ns)
            .max()
            .unwrap_or(t0)
            .clamp(t0, t1);
        let len = (t1 - t0).max(1);
        let total: u64 = ks.iter().map(|&k| obs[k].ran).sum();
        let scale = if total > len {
            len as f64 / total as f64
        } else {
            1.0
        };
        let rounds = ks.iter().map(|&k| obs[k].pieces).max().unwrap_or(1);
        let mut seq: Vec<(usize, u64)> = Vec::new();
        for r in 0..rounds {
            for &k in &ks {
                let o = &obs[k];
                if r < o.pieces {
                    seq.push((k, ((o.ran as f64 * scale) / o.pieces as f64) as u64));
                }
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

fn last_piece_of(seq: &[(usize, u64)], n: usize, k: usize) -> bool {
    !seq[n + 1..].iter().any(|s| s.0 == k)
}
