//! Statistics of a real-time pool run: one record per job, totals per task, the workers' kernel
//! counters, and the preemption latencies.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};

/// Counters of one job, its threads included, updated by the workers while it runs.
#[derive(Default, Debug)]
pub(crate) struct JobCounters {
    pub start: AtomicU64,
    pub started: AtomicBool,
    pub steals: AtomicU64,
    pub migrations: AtomicU64,
    pub preemptions: AtomicU64,
    pub switches: AtomicU64,
    pub threads: AtomicU64,
    pub panicked: AtomicBool,
    /// The dispatcher handed this job to a core by preempting its running entry.
    pub preempting: AtomicBool,
    /// Timestamps of the stages of a preempting job's dispatch (see [`PreemptionStages`]):
    /// a few clock reads per release, none per preemption check.
    pub woke: AtomicU64,
    pub requested: AtomicU64,
    pub target: AtomicU64,
    pub requester_cpu: AtomicU64,
    pub stopped: AtomicU64,
    pub stop_how: AtomicU8,
    pub picked: AtomicU64,
    pub from_pending: AtomicBool,
    pub fiber_how: AtomicU8,
    /// CPU time of the target worker thread at the request and at the stop (0: not read).
    pub target_cpu_requested: AtomicU64,
    pub target_cpu_stopped: AtomicU64,
}

impl JobCounters {
    pub(crate) fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
}

/// How the core asked to preempt stopped the entry it was running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopHow {
    /// At a preemption point (`checkpoint`, the NOP work's check).
    Checkpoint,
    /// Its entry ended first.
    Finished,
    /// Its job began to wait for its parallel region.
    Waited,
}

/// The fiber a preempting job's first instruction ran on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FiberHow {
    /// The fiber that finished the core's previous entry went on with it (no switch).
    InPlace,
    /// A free fiber of the worker (switch only).
    Spare,
    /// A new fiber on a stack from the pool's stack pool (coroutine set up, switch).
    PooledStack,
    /// A new fiber on a freshly mapped stack (mmap, guard page, first-touch page faults).
    NewStack,
}

impl FiberHow {
    pub(crate) fn from_u8(v: u8) -> FiberHow {
        match v {
            1 => FiberHow::Spare,
            2 => FiberHow::PooledStack,
            3 => FiberHow::NewStack,
            _ => FiberHow::InPlace,
        }
    }
}

impl StopHow {
    pub(crate) fn from_u8(v: u8) -> StopHow {
        match v {
            1 => StopHow::Finished,
            2 => StopHow::Waited,
            _ => StopHow::Checkpoint,
        }
    }
}

/// One preempting dispatch split into its stages (ns on the pool clock, in order):
/// `release` (nominal) -> `woke` (the releaser thread returned from its sleep) -> `requested`
/// (the dispatcher chose the core and set its preemption flag, state lock taken) -> `stopped`
/// (the target core's running entry reached a preemption point, or ended or began to wait)
/// -> `picked` (the target worker took the job under the state lock) -> `start` (the job's
/// first instruction, on its fiber).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptionStages {
    pub release: u64,
    pub woke: u64,
    pub requested: u64,
    pub stopped: u64,
    pub picked: u64,
    pub start: u64,
    /// The core that was asked to preempt.
    pub target: usize,
    /// The CPU of the thread that asked (the releaser, or a worker whose entry made the job
    /// ready), when the kernel said.
    pub requester_cpu: Option<usize>,
    pub stop: StopHow,
    pub fiber: FiberHow,
    /// Picked from the core's pending slot (false: displaced from it by an earlier release
    /// and later taken from the global queue).
    pub from_pending: bool,
    /// CPU time the target worker thread got during the reach stage (its thread CPU clock at
    /// the request and at the stop): close to the stage's length when the target ran all
    /// along, far below it when the kernel (or the hypervisor, where the guest accounts steal
    /// time) ran something else on its CPU.
    pub reach_cpu: Option<u64>,
}

impl PreemptionStages {
    /// Release to first instruction (what [`RtReport::preemption_latency`] holds).
    pub fn total(&self) -> u64 {
        self.start.saturating_sub(self.release)
    }
    /// The stage durations in order: timer (release to the releaser awake), request (to the
    /// preemption flag set), reach (to the target's preemption point), pick (to the job taken),
    /// switch (to its first instruction).
    pub fn stages(&self) -> [u64; 5] {
        [
            self.woke.saturating_sub(self.release),
            self.requested.saturating_sub(self.woke),
            self.stopped.saturating_sub(self.requested),
            self.picked.saturating_sub(self.stopped),
            self.start.saturating_sub(self.picked),
        ]
    }
    pub const STAGE_NAMES: [&'static str; 5] = ["timer", "request", "reach", "pick", "switch"];
}

/// One finished job. Times are nanoseconds since the pool's epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// Index of the task (registration order).
    pub task: usize,
    /// Job number within the task, from 0.
    pub index: u64,
    pub release: u64,
    /// Absolute deadline.
    pub deadline: u64,
    /// First instruction of the job.
    pub start: u64,
    pub finish: u64,
    /// Parallel threads the job created.
    pub threads: u64,
    /// Threads of the job run by a core that stole them (rule E).
    pub steals: u64,
    /// Threads run on another core than the one they were spawned on, plus resumptions of the
    /// job or a thread on another core than where it last ran.
    pub migrations: u64,
    /// Times the job or one of its threads was stopped at a preemption point.
    pub preemptions: u64,
    /// User-level context switches: fiber switch-ins of the job and its threads.
    pub switches: u64,
    /// The job panicked (the pool caught it and went on).
    pub panicked: bool,
}

impl JobRecord {
    pub fn response(&self) -> u64 {
        self.finish.saturating_sub(self.release)
    }
    /// Whether the job finished after its deadline (`schedkit_core::trace::misses_deadline`,
    /// the one definition; a record is of a finished job, so the end of the run does not
    /// matter).
    pub fn missed(&self) -> bool {
        use schedkit_core::Nanos;
        schedkit_core::trace::misses_deadline(
            Nanos(self.deadline),
            Some(Nanos(self.finish)),
            Nanos(self.finish),
        )
    }
}

/// Totals of one task.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskStats {
    pub name: String,
    pub jobs: u64,
    pub misses: u64,
    pub max_response: u64,
    pub mean_response: f64,
    pub steals: u64,
    pub migrations: u64,
    pub preemptions: u64,
    pub switches: u64,
}

/// Kernel counters of one worker thread over its life (perf software events; `None` when the
/// kernel refused them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerKernel {
    pub cpu: Option<usize>,
    pub context_switches: Option<u64>,
    pub migrations: Option<u64>,
}

/// Where a run's switches came from, summed over the workers: the breakdown behind the
/// user-level count (`fiber_*`, one per fiber switch-in) and behind the workers' kernel count
/// (`parks`: each is one voluntary kernel switch of a worker).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolCounters {
    /// A worker went to sleep with nothing to run (one kernel context switch each).
    pub parks: u64,
    /// Wake-ups after which the worker found nothing to run and slept again.
    pub empty_wakes: u64,
    /// Parks that ended by their time-out rather than by a wake-up.
    pub park_timeouts: u64,
    /// Wake-ups sent to sleeping workers (a release, a region's threads, stop).
    pub wakes_sent: u64,
    /// Fiber switch-ins: a job's first.
    pub fiber_job_starts: u64,
    /// ... a job resumed after waiting for its parallel region.
    pub fiber_job_after_wait: u64,
    /// ... a job resumed after a preemption.
    pub fiber_job_after_preempt: u64,
    /// ... a parallel thread's first.
    pub fiber_thread_starts: u64,
    /// ... a parallel thread resumed (after a preemption or a wait).
    pub fiber_thread_resumes: u64,
    /// Parallel threads run to completion on their job's own fiber (no switch).
    pub inline_threads: u64,
    /// Jobs and threads started on the fiber that had just finished the previous entry of
    /// its core (no switch).
    pub started_in_place: u64,
}

/// The atomics behind [`PoolCounters`].
#[derive(Default, Debug)]
pub(crate) struct PoolCountersAtomic {
    pub parks: AtomicU64,
    pub empty_wakes: AtomicU64,
    pub park_timeouts: AtomicU64,
    pub wakes_sent: AtomicU64,
    pub fiber_job_starts: AtomicU64,
    pub fiber_job_after_wait: AtomicU64,
    pub fiber_job_after_preempt: AtomicU64,
    pub fiber_thread_starts: AtomicU64,
    pub fiber_thread_resumes: AtomicU64,
    pub inline_threads: AtomicU64,
    pub started_in_place: AtomicU64,
}

impl PoolCountersAtomic {
    #[inline]
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
    pub(crate) fn read(&self) -> PoolCounters {
        let r = |c: &AtomicU64| c.load(Relaxed);
        PoolCounters {
            parks: r(&self.parks),
            empty_wakes: r(&self.empty_wakes),
            park_timeouts: r(&self.park_timeouts),
            wakes_sent: r(&self.wakes_sent),
            fiber_job_starts: r(&self.fiber_job_starts),
            fiber_job_after_wait: r(&self.fiber_job_after_wait),
            fiber_job_after_preempt: r(&self.fiber_job_after_preempt),
            fiber_thread_starts: r(&self.fiber_thread_starts),
            fiber_thread_resumes: r(&self.fiber_thread_resumes),
            inline_threads: r(&self.inline_threads),
            started_in_place: r(&self.started_in_place),
        }
    }
}

/// Everything a run produced.
#[derive(Clone, Debug, Default)]
pub struct RtReport {
    pub jobs: Vec<JobRecord>,
    pub tasks: Vec<TaskStats>,
    pub workers: Vec<WorkerKernel>,
    /// Release to first instruction of each job that was dispatched by preempting another,
    /// in nanoseconds, in the order they happened.
    pub preemption_latency: Vec<u64>,
    /// The same dispatches split into stages, in the same order.
    pub preemption_stages: Vec<PreemptionStages>,
    /// What the system refused (pinning, SCHED_FIFO, perf counters).
    pub warnings: Vec<String>,
    /// Where the switches came from (see [`PoolCounters`]).
    pub pool: PoolCounters,
    /// Kernel counters of the releaser thread (it sleeps until each release time and wakes
    /// the workers).
    pub releaser: WorkerKernel,
}

impl RtReport {
    pub fn misses(&self) -> u64 {
        self.jobs.iter().filter(|j| j.missed()).count() as u64
    }
    /// Kernel context switches of every thread of the pool: the workers and the releaser
    /// (`None` when perf refused one of them).
    pub fn kernel_context_switches(&self) -> Option<u64> {
        self.kernel_threads().map(|w| w.context_switches).sum()
    }
    /// Kernel CPU migrations of the workers and the releaser.
    pub fn kernel_migrations(&self) -> Option<u64> {
        self.kernel_threads().map(|w| w.migrations).sum()
    }
    fn kernel_threads(&self) -> impl Iterator<Item = &WorkerKernel> {
        // A run without perf has no counter anywhere: `None`, not a sum over nothing.
        let releaser = (!self.workers.is_empty()).then_some(&self.releaser);
        self.workers.iter().chain(releaser)
    }
    /// Totals per task from the job records (`names` in task order).
    pub(crate) fn fold_tasks(&mut self, names: &[String]) {
        let mut t: Vec<TaskStats> = names
            .iter()
            .map(|n| TaskStats {
                name: n.clone(),
                ..TaskStats::default()
            })
            .collect();
        let mut sum = vec![0u128; names.len()];
        // One-shot jobs (task usize::MAX) belong to no task.
        for j in self.jobs.iter().filter(|j| j.task < names.len()) {
            let s = &mut t[j.task];
            s.jobs += 1;
            s.misses += j.missed() as u64;
            s.max_response = s.max_response.max(j.response());
            s.steals += j.steals;
            s.migrations += j.migrations;
            s.preemptions += j.preemptions;
            s.switches += j.switches;
            sum[j.task] += j.response() as u128;
        }
        for (s, n) in t.iter_mut().zip(sum) {
            if s.jobs > 0 {
                s.mean_response = n as f64 / s.jobs as f64;
            }
        }
        self.tasks = t;
    }
}

/// The one percentile definition (nearest rank): see `schedkit_core::stats`.
pub use schedkit_core::stats::percentile;
