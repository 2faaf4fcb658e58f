//! PAWS: a real-time fork-join pool, global EDF with priority-aware work stealing, after seed 001
//! (Fonseca, Nogueira, Maia, Pinho, "Real-time scheduling of parallel tasks in the Linux
//! kernel", section 4, rules A-F), built in user space on fibers instead of in the kernel.
//!
//! ```no_run
//! use schedkit_runtime::paws::{Mode, RtConfig, RtPool};
//! use std::time::Duration;
//!
//! let mut pool = RtPool::new(RtConfig::new(Mode::Paws)).unwrap();
//! pool.periodic("control", Duration::from_millis(10), Duration::from_millis(8), |job| {
//!     job.work(Duration::from_micros(300));                 // sequential part
//!     job.parallel(4, |i| { let _ = i; schedkit_runtime::paws::spin(50_000) });
//!     job.checkpoint();                                      // a preemption point
//! });
//! std::thread::sleep(Duration::from_millis(100));
//! let report = pool.stop();
//! assert_eq!(report.misses(), 0);
//! ```
//!
//! # How it runs
//! - One worker thread per core, pinned, SCHED_FIFO when permitted ([`RtConfig`]); a releaser
//!   thread (one priority above) releases periodic jobs: absolute deadline = release + relative
//!   deadline.
//! - Every job and every parallel thread runs on its own fiber (guarded stack from
//!   [`crate::stack`], switched by corosensei), so it can be suspended where it stands at a
//!   preemption point ([`checkpoint`], [`Job::checkpoint`], and [`spin`], NOP work in CPU
//!   time, checks every 10 us).
//! - All scheduling decisions are those of [`queues::Sched`], a pure state machine (rules A-F
//!   and the comparison modes), taken under one lock; the workers only execute them.
//! - A job that opens a parallel region ([`Job::parallel`], [`Job::scope`], [`Job::join`])
//!   pushes its threads to the local deque of its core (rule B) and suspends until they all
//!   finished; the last thread to finish makes the job ready again (global queue, or a direct
//!   hand-over to an idle or preempted core, like a release).
//! - [`RtPool::join`] / [`RtPool::scope`] / [`RtPool::install`] (and [`join`] / [`scope`]
//!   inside) are a plain, non-real-time fork-join API on the same workers (see `join.rs`): no
//!   fibers, Rayon's scheme.
//!
//! Statistics: [`RtReport`] (per job, per task, kernel counters of the workers, preemption
//! latencies). Design notes and measurements: `docs/paws.md`.

pub mod harness;
mod job;
mod join;
pub mod queues;
pub mod stats;
mod work;
mod worker;

pub use job::{Job, JobScope};
pub use queues::Mode;
pub use stats::{
    percentile, FiberHow, JobRecord, PoolCounters, PreemptionStages, RtReport, StopHow, TaskStats,
    WorkerKernel,
};
pub use work::{calibrate, spin};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::*};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use priority_inheriting_lock::PriorityInheritingLock;
use schedkit_linux::affinity;

use queues::{Item, Kind, Notify, Sched};
use worker::Unit;

/// Default of [`RtConfig::release_spin`].
pub(crate) const RELEASE_SPIN: Duration = Duration::from_micros(50);

/// Pool knobs; [`RtConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
pub struct RtConfig {
    pub mode: Mode,
    /// Worker count (default: the CPUs this process may use).
    pub workers: usize,
    /// Pin worker i to the i-th allowed CPU (default true).
    pub pin: bool,
    /// SCHED_FIFO priority of the workers (the releaser gets one more); `None`: SCHED_OTHER,
    /// for tests and shared machines. Default `Some(50)`; refused: one warning, then SCHED_OTHER.
    pub fifo_priority: Option<u32>,
    /// Usable stack bytes per fiber (default 64 KiB).
    pub stack_size: usize,
    /// Seed of the victim choice (rule E).
    pub seed: u64,
    /// Open perf software counters (context switches, migrations) on each worker.
    pub perf: bool,
    /// The releaser's timer is set this much before each release time and the rest is spun
    /// (default 50 us; zero: sleep until the release time). A timer wake-up of the releaser
    /// came 25-70 us after the time asked on this virtual machine, all of it added to every
    /// preemption's latency; spinning costs at most this much CPU per release time (one
    /// release time every few ms for the experiment's task sets).
    pub release_spin: Duration,
    /// Read the target worker's thread CPU clock at each preemption's request and stop
    /// (`PreemptionStages::reach_cpu`): two system calls per preemption, about 3 us added to
    /// its pick stage here, so off by default (a diagnostic).
    pub stage_cpu_clock: bool,
}

impl RtConfig {
    pub fn new(mode: Mode) -> RtConfig {
        RtConfig {
            mode,
            workers: affinity::get_thread(0)
                .map(|s| s.len())
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(1),
            pin: true,
            fifo_priority: Some(50),
            stack_size: 64 * 1024,
            seed: 0x9e37_79b9_7f4a_7c15,
            perf: true,
            release_spin: RELEASE_SPIN,
            stage_cpu_clock: false,
        }
    }

    /// No SCHED_FIFO, no perf counters: what tests on a shared machine want.
    pub fn quiet(mode: Mode, workers: usize) -> RtConfig {
        RtConfig {
            workers,
            fifo_priority: None,
            perf: false,
            ..RtConfig::new(mode)
        }
    }
}

/// A periodic task's fixed part.
pub(crate) struct TaskSpec {
    pub name: String,
    pub period: u64,
    pub deadline: u64,
    pub body: Box<dyn Fn(&Job) + Send + Sync>,
}

/// The closure of a one-shot job.
pub(crate) type OnceBody = Box<dyn FnOnce(&Job) + Send>;

/// What a job runs.
pub(crate) enum Body {
    Task(Arc<TaskSpec>),
    Once(Mutex<Option<OnceBody>>),
}

/// One job: identity, times, counters, body.
pub(crate) struct JobMeta {
    /// Task index, `usize::MAX` for a one-shot job.
    pub task: usize,
    pub index: u64,
    pub release: u64,
    pub deadline: u64,
    pub counters: stats::JobCounters,
    pub body: Body,
}

struct TaskRt {
    spec: Arc<TaskSpec>,
    next: u64,
    index: u64,
    busy: bool,
    /// Jobs released while the previous one still ran: successive jobs of a task run in
    /// sequence (seed 001, section 2).
    backlog: VecDeque<Item<Unit>>,
}

pub(crate) struct State {
    pub sched: Sched<Unit>,
    tasks: Vec<TaskRt>,
    /// Jobs released and not finished.
    pub in_flight: usize,
    releasing: bool,
    /// No release at or after this time (ns on the pool's clock).
    cutoff: u64,
}

pub(crate) struct WorkerSlot {
    /// Set (under the state lock) when the dispatcher wants this core's running entry to stop
    /// at its next preemption point; cleared when the core picks.
    pub preempt: CachePadded<AtomicBool>,
    /// Set when the dispatcher hands this idle core work (or asks it to look): an idle
    /// worker looking for plain work stops looking at once.
    pub kick: CachePadded<AtomicBool>,
    pub thread: OnceLock<Thread>,
    /// When this core's running entry last stopped (a preemption point with the flag set, an
    /// entry's end, a wait for a region) and how (`StopHow` as u8): read when it picks a
    /// preempting job, for the stage breakdown of its latency.
    pub stopped_at: AtomicU64,
    pub stop_how: AtomicU8,
    /// The CPU time at that stop when a preemption was requested (0 otherwise), and the
    /// worker thread's CPU clock, read by the requester (see `PreemptionStages::reach_cpu`).
    pub stopped_cpu: AtomicU64,
    pub cpu_clock: OnceLock<libc::clockid_t>,
}

pub(crate) struct Shared {
    /// Priority-inheriting: a thread below the workers' priority that holds it (the owner
    /// calling `periodic`, `submit` or `stop` as SCHED_OTHER) runs at the priority of the
    /// highest waiter until it lets go. With a plain mutex such a thread, preempted while
    /// holding the lock by anything above it, held every worker and the releaser for as long
    /// (measured: a job 45 ms late while SCHED_FIFO 10 threads ran, with no machine stall).
    pub state: PriorityInheritingLock<State>,
    pub workers: Box<[WorkerSlot]>,
    pub epoch: Instant,
    pub stop: AtomicBool,
    pub cfg: RtConfig,
    pub records: Mutex<Vec<JobRecord>>,
    pub latencies: Mutex<Vec<u64>>,
    pub stages: Mutex<Vec<PreemptionStages>>,
    pub kernel: Mutex<Vec<WorkerKernel>>,
    pub warnings: Mutex<Vec<String>>,
    pub releaser: OnceLock<Thread>,
    pub releaser_kernel: Mutex<WorkerKernel>,
    pub plain: join::Plain,
    pub counters: stats::PoolCountersAtomic,
}

impl Shared {
    /// Nanoseconds since the pool's epoch.
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Acts on a dispatcher decision; called with the state lock held (the guard is the proof)
    /// so that a preemption request cannot land after the core already picked something else.
    pub(crate) fn apply(&self, _locked: &mut State, n: Notify) {
        match n {
            Notify::Nothing => {}
            Notify::Wake(c) => {
                stats::PoolCountersAtomic::bump(&self.counters.wakes_sent);
                self.workers[c].kick.store(true, SeqCst);
                if let Some(t) = self.workers[c].thread.get() {
                    t.unpark();
                }
            }
            Notify::Preempt(c) => {
                self.workers[c].preempt.store(true, Release);
            }
        }
    }

    /// A job (released, or done waiting) becomes ready.
    pub(crate) fn ready(&self, st: &mut State, it: Item<Unit>) {
        let job = match &it.payload {
            Unit::Job(m) => Some(m.clone()),
            _ => None,
        };
        for n in st.sched.ready_all(it) {
            self.apply(st, n);
        }
        if let Some(m) = job {
            self.mark_preempting(st, &m);
        }
    }

    /// If the job `m` was handed to a core whose running entry is asked to stop (now, or by an
    /// earlier release whose job it displaced from the pending slot), it is a preempting job:
    /// its latency is recorded when it starts, and the request's time is its second stage.
    fn mark_preempting(&self, st: &State, m: &Arc<JobMeta>) {
        let handed = (0..self.workers.len()).find(|&c| {
            matches!(st.sched.pending_payload(c), Some(Unit::Job(p)) if Arc::ptr_eq(p, m))
                && st.sched.preempt_requested(c)
        });
        let Some(c) = handed else {
            return;
        };
        let k = &m.counters;
        if k.preempting.swap(true, Relaxed) {
            return;
        }
        k.requested.store(self.now(), Relaxed);
        k.target.store(c as u64, Relaxed);
        if let Some(&clock) = self.workers[c]
            .cpu_clock
            .get()
            .filter(|_| self.cfg.stage_cpu_clock)
        {
            k.target_cpu_requested
                .store(schedkit_linux::clock_ns(clock), Relaxed);
        }
        // SAFETY: no arguments; -1 when the kernel cannot say.
        let cpu = unsafe { libc::sched_getcpu() };
        k.requester_cpu.store((cpu + 1).max(0) as u64, Relaxed);
    }

    /// A job finished: its task may start the next job of its backlog.
    pub(crate) fn job_done(&self, st: &mut State, task: usize) {
        st.in_flight -= 1;
        if st.in_flight == 0 && self.stop.load(SeqCst) {
            // The workers that went back to sleep while this job ran can leave now (idle
            // workers sleep until woken, see `worker::park`).
            for w in self.workers.iter() {
                if let Some(t) = w.thread.get() {
                    t.unpark();
                }
            }
        }
        if let Some(t) = st.tasks.get_mut(task) {
            match t.backlog.pop_front() {
                Some(next) => self.ready(st, next),
                None => t.busy = false,
            }
        }
    }
}

/// The real-time pool. Dropping it is [`RtPool::stop`] without the report.
pub struct RtPool {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
    releaser: Option<std::thread::JoinHandle<()>>,
    names: Vec<String>,
}

impl RtPool {
    /// Starts the workers and the releaser. Pinning, SCHED_FIFO or perf counters that the
    /// system refuses are not errors: [`RtReport::warnings`] says what was refused (and the
    /// first refusal is printed once on stderr).
    pub fn new(cfg: RtConfig) -> std::io::Result<RtPool> {
        crate::stack::install_overflow_handler();
        work::rate();
        let n = cfg.workers.clamp(1, 256);
        let shared = Arc::new(Shared {
            state: PriorityInheritingLock::new(State {
                sched: Sched::new(cfg.mode, n, cfg.seed),
                tasks: Vec::new(),
                in_flight: 0,
                releasing: true,
                cutoff: u64::MAX,
            }),
            workers: (0..n)
                .map(|_| WorkerSlot {
                    preempt: CachePadded::new(AtomicBool::new(false)),
                    kick: CachePadded::new(AtomicBool::new(false)),
                    thread: OnceLock::new(),
                    stopped_at: AtomicU64::new(0),
                    stop_how: AtomicU8::new(0),
                    stopped_cpu: AtomicU64::new(0),
                    cpu_clock: OnceLock::new(),
                })
                .collect(),
            epoch: Instant::now(),
            stop: AtomicBool::new(false),
            plain: join::Plain::new(n),
            cfg,
            records: Mutex::new(Vec::new()),
            latencies: Mutex::new(Vec::new()),
            stages: Mutex::new(Vec::new()),
            kernel: Mutex::new(Vec::new()),
            warnings: Mutex::new(Vec::new()),
            releaser: OnceLock::new(),
            releaser_kernel: Mutex::new(WorkerKernel::default()),
            counters: Default::default(),
        });
        let cpus: Vec<usize> = affinity::get_thread(0)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let (tx, rx) = std::sync::mpsc::channel();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let sh = shared.clone();
            let cpu = if shared.cfg.pin && !cpus.is_empty() {
                Some(cpus[i % cpus.len()])
            } else {
                None
            };
            let tx = tx.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("schedkit-paws{i}"))
                    .spawn(move || worker::main(sh, i, cpu, tx))?,
            );
        }
        let sh = shared.clone();
        let tx2 = tx.clone();
        let releaser = std::thread::Builder::new()
            .name("schedkit-paws-rel".into())
            .spawn(move || worker::releaser(sh, tx2))?;
        drop(tx);
        for _ in 0..=n {
            let _ = rx.recv();
        }
        // The workers' warnings reach the caller in `RtReport::warnings`: a library does not
        // print.
        Ok(RtPool {
            shared,
            threads,
            releaser: Some(releaser),
            names: Vec::new(),
        })
    }

    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    pub fn mode(&self) -> Mode {
        self.shared.cfg.mode
    }

    /// The pool's clock: time since it started.
    pub fn now(&self) -> Duration {
        self.shared.epoch.elapsed()
    }

    /// A periodic task released from now on; returns its index (the `task` of its records).
    pub fn periodic<F>(&mut self, name: &str, period: Duration, deadline: Duration, f: F) -> usize
    where
        F: Fn(&Job) + Send + Sync + 'static,
    {
        let first = self.now();
        self.periodic_at(name, first, period, deadline, f)
    }

    /// A periodic task whose first release is `first` on the pool's clock ([`RtPool::now`]);
    /// tasks given the same `first` are released synchronously.
    pub fn periodic_at<F>(
        &mut self,
        name: &str,
        first: Duration,
        period: Duration,
        deadline: Duration,
        f: F,
    ) -> usize
    where
        F: Fn(&Job) + Send + Sync + 'static,
    {
        let spec = Arc::new(TaskSpec {
            name: name.to_string(),
            period: (period.as_nanos() as u64).max(1),
            deadline: deadline.as_nanos() as u64,
            body: Box::new(f),
        });
        self.names.push(spec.name.clone());
        let mut st = self.shared.state.lock();
        st.tasks.push(TaskRt {
            spec,
            next: first.as_nanos() as u64,
            index: 0,
            busy: false,
            backlog: VecDeque::new(),
        });
        let id = st.tasks.len() - 1;
        drop(st);
        if let Some(t) = self.shared.releaser.get() {
            t.unpark();
        }
        id
    }

    /// No job is released at or after `t` on the pool's clock (so a run of a given length
    /// releases exactly the jobs whose release time falls inside it).
    pub fn release_until(&self, t: Duration) {
        self.shared.state.lock().cutoff = t.as_nanos() as u64;
        // A releaser sleeping past the old cutoff recomputes its next release.
        if let Some(r) = self.shared.releaser.get() {
            r.unpark();
        }
    }

    /// One job released now with the given relative deadline (its records have task
    /// `usize::MAX`).
    pub fn submit<F>(&self, deadline: Duration, f: F)
    where
        F: FnOnce(&Job) + Send + 'static,
    {
        let sh = &self.shared;
        let mut st = sh.state.lock();
        let release = sh.now();
        let meta = Arc::new(JobMeta {
            task: usize::MAX,
            index: 0,
            release,
            deadline: release + deadline.as_nanos() as u64,
            counters: Default::default(),
            body: Body::Once(Mutex::new(Some(Box::new(f)))),
        });
        // Released by this call, not by the releaser's timer: no timer stage.
        meta.counters.woke.store(release, Relaxed);
        let it = st.sched.item(meta.deadline, Kind::Job, Unit::Job(meta));
        st.in_flight += 1;
        sh.ready(&mut st, it);
    }

    /// Stops releasing, waits for every job in flight (every released job runs to its end),
    /// stops the workers and returns the statistics.
    pub fn stop(mut self) -> RtReport {
        self.shutdown()
    }

    fn shutdown(&mut self) -> RtReport {
        {
            // Releases stop now, but every job due before now is still released, even when
            // the releaser's timer is late (a stalled machine): the jobs a run releases
            // depend on its clock, not on when the releaser got to run.
            let now = self.shared.now();
            let mut st = self.shared.state.lock();
            st.cutoff = st.cutoff.min(now);
            st.releasing = false;
        }
        if let Some(t) = self.shared.releaser.get() {
            t.unpark();
        }
        if let Some(r) = self.releaser.take() {
            let _ = r.join();
        }
        self.shared.stop.store(true, SeqCst);
        for w in self.shared.workers.iter() {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let mut r = RtReport {
            jobs: std::mem::take(&mut *self.shared.records.lock()),
            preemption_latency: std::mem::take(&mut *self.shared.latencies.lock()),
            preemption_stages: std::mem::take(&mut *self.shared.stages.lock()),
            workers: std::mem::take(&mut *self.shared.kernel.lock()),
            warnings: self.shared.warnings.lock().clone(),
            tasks: Vec::new(),
            pool: self.shared.counters.read(),
            releaser: self.shared.releaser_kernel.lock().clone(),
        };
        r.jobs.sort_by_key(|j| (j.release, j.task, j.index));
        r.fold_tasks(&self.names);
        r
    }

    /// Plain fork-join (not real-time): runs `a` and `b`, possibly in parallel, on the pool's
    /// workers; Rayon's scheme, no fibers (see `join.rs`).
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        self.install(move || join(a, b))
    }

    /// Plain irregular fork-join (not real-time): [`scope`] on the pool's workers.
    pub fn scope<'env, F, R>(&self, f: F) -> R
    where
        F: FnOnce(&Scope<'env>) -> R + Send,
        R: Send,
    {
        self.install(move || scope(f))
    }

    /// Runs `f` on a worker of the pool and waits for it; inside, [`join`] forks on the pool.
    pub fn install<F: FnOnce() -> R + Send, R: Send>(&self, f: F) -> R {
        join::install(&self.shared, f)
    }
}

impl Drop for RtPool {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shutdown();
        }
    }
}

pub use join::{join, scope, Scope};

/// A preemption point: if the dispatcher asked the core running this job or thread to stop it
/// (an earlier-deadline job was released), the fiber is suspended here and put back by rules
/// (i)-(iii). Costs one thread-local read and one atomic load when nothing is pending; a no-op
/// outside a pool fiber.
#[inline]
pub fn checkpoint() {
    worker::checkpoint();
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_linux::sched::{self, Policy};

    /// CPU time of the calling thread, ns.
    fn thread_cpu() -> u64 {
        schedkit_linux::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
    }

    #[test]
    fn a_preempted_sched_other_holder_of_the_state_lock_does_not_hold_a_real_time_caller() {
        if !schedkit_linux::privilege::Privileges::current().sys_nice {
            eprintln!("skipped: SCHED_FIFO threads need root or CAP_SYS_NICE");
            return;
        }
        let Some(cpu) = affinity::get_thread(0).ok().and_then(|c| c.iter().last()) else {
            eprintln!("skipped: cannot read the allowed CPUs");
            return;
        };
        let pool = RtPool::new(RtConfig::quiet(Mode::Paws, 1)).unwrap();
        let sh = pool.shared.clone();
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        // A SCHED_OTHER thread takes the state lock and needs 5 ms of CPU before it lets go...
        let holder = std::thread::spawn(move || {
            affinity::pin_current(cpu).unwrap();
            let st = sh.state.lock();
            locked_tx.send(()).unwrap();
            let end = thread_cpu() + 5_000_000;
            while thread_cpu() < end {
                std::hint::spin_loop();
            }
            drop(st);
        });
        locked_rx.recv().unwrap();
        // ...while a SCHED_FIFO 10 thread takes its CPU for 300 ms...
        let spinner = std::thread::spawn(move || {
            affinity::pin_current(cpu).unwrap();
            sched::set_thread(0, Policy::Fifo { priority: 10 }).unwrap();
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(300) {
                std::hint::spin_loop();
            }
        });
        std::thread::sleep(Duration::from_millis(5));
        // ...and a SCHED_FIFO 30 caller submits a job: the holder inherits its priority,
        // finishes its 5 ms and lets go. Without inheritance the caller waits for the spinner.
        sched::set_thread(0, Policy::Fifo { priority: 30 }).unwrap();
        let t = Instant::now();
        pool.submit(Duration::from_millis(100), |_| {});
        let waited = t.elapsed();
        sched::set_thread(0, Policy::Other { nice: 0 }).unwrap();
        holder.join().unwrap();
        spinner.join().unwrap();
        let r = pool.stop();
        assert_eq!(r.jobs.len(), 1);
        eprintln!("a SCHED_FIFO 30 submit waited {waited:?} behind the preempted holder");
        assert!(
            waited < Duration::from_millis(60),
            "the caller waited {waited:?}"
        );
    }
}
