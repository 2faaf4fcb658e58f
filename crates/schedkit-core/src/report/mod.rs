//! The report: every metric of SPEC section 1, computed in one place from the Trace.
//!
//! [`Metrics`] is a [`TraceSink`] that folds events as they arrive (constant memory per thread,
//! per task and per core, nothing per event), so the simulator and the real engine produce the
//! same numbers by construction. [`Metrics::finish`] turns the fold into a [`Report`].
//!
//! Definitions (also in `docs/metrics.md`, which tests keep honest):
//! - turnaround = finish - arrival (for unfinished threads: end of window - arrival);
//!   waiting = turnaround - cpu - blocked (time runnable but not running: a thread's sleep is
//!   not waiting; for threads that never block this is seed 004's turnaround - cpu, 3.1.1);
//!   response = first dispatch - arrival. An engine that measures run-queue delay itself
//!   (the real engine, from schedstat) gives it through [`Metrics::measured_waiting`], and
//!   that figure is the thread's waiting.
//! - a *dispatch* is a `Dispatch` event; a *context switch* is a dispatch on a core whose
//!   previous thread was a different thread (idle in between does not matter; a core's first
//!   dispatch is not a switch); a *preemption* is a `Deschedule` for `Preempted` or `Expired`;
//!   a *migration* is a dispatch on another core than the thread last ran on.
//! - a thread's `context_switches` counts the times it was switched out before finishing.
//! - GPS (see [`crate::gps`]) integrates each process's ideal CPU time over the same window;
//!   `lag = ideal - actual`; `max_abs_lag_ns` is exact for processes and tasks (lag is
//!   piecewise linear, evaluated at every breakpoint) and sampled every `sample_interval`
//!   for groups.

use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::{Event, Owner, Reason, Slot, TraceSink};
use serde::{Deserialize, Serialize};

mod finish;
mod fold;
mod jobs;
mod sink;
#[cfg(test)]
mod tests;

/// The one definition of a deadline miss, with the pairing of job events it goes with
/// ([`crate::trace::jobs`]).
pub use crate::trace::misses_deadline;

/// Per thread (process threads) or per task (real-time tasks, aggregated over jobs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThreadReport {
    pub name: String,
    pub process: String,
    pub arrival_ns: u64,
    pub start_ns: Option<u64>,
    pub finish_ns: Option<u64>,
    pub cpu_ns: u64,
    pub waiting_ns: u64,
    pub turnaround_ns: u64,
    pub response_ns: Option<u64>,
    pub migrations: u64,
    pub context_switches: u64,
    /// Real-time tasks only.
    pub jobs: Option<u64>,
    pub deadline_misses: Option<u64>,
    pub max_response_ns: Option<u64>,
}

/// Per process (and per real-time task) or per group.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ShareReport {
    pub name: String,
    pub threads: u64,
    pub cpu_ns: u64,
    /// Fraction of the machine's CPU time in the window (cores x window).
    pub share: f64,
    /// GPS share of the machine over the same window.
    pub ideal_share: f64,
    /// Fraction of the CPU time the job (every process of the scenario) received: on a
    /// machine shared with outside load this, not `share`, is the one to hold against
    /// `ideal_job_share`.
    pub job_share: f64,
    /// This entity's GPS service as a fraction of the job's total GPS service.
    pub ideal_job_share: f64,
    /// Ideal minus actual CPU time at the end of the window.
    pub lag_ns: i64,
    pub max_abs_lag_ns: u64,
    pub avg_waiting_ns: u64,
    pub avg_turnaround_ns: u64,
    /// Built-in workloads in `run`: iterations completed, and per second of the window.
    pub work_done: Option<u64>,
    pub work_rate: Option<f64>,
    /// Where `cpu_ns`, and so the shares and the lag, came from in a real run:
    /// `kernel: ...` (the engine's per-cgroup accounting, every task counted, ended ones too;
    /// [`Metrics::measured_process_cpu`]) or `sampled: ...` (the trace of the engine's
    /// samples). Given by fair-share runs (`process-fair`, `tenants`, ...); absent for the
    /// simulator, whose trace is the count, and for other real runs, whose CPU times are all
    /// the samples' trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_source: Option<String>,
    /// Beside a kernel-counted `cpu_ns`: what the samples alone gave (they miss tasks found
    /// late and tasks that ended between two samples). A secondary figure, never used for a
    /// share or a lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_cpu_ns: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub avg_waiting_ns: u64,
    pub avg_turnaround_ns: u64,
    pub avg_response_ns: u64,
    pub context_switches: u64,
    pub dispatches: u64,
    pub preemptions: u64,
    pub migrations: u64,
    pub deadline_misses: u64,
    pub jobs: u64,
    /// Largest |share - ideal_share| over processes (shares of the machine).
    pub max_abs_share_error: f64,
    /// Largest |job_share - ideal_job_share| over processes (shares of the job's CPU time).
    pub max_abs_job_share_error: f64,
    /// CPU time of the whole job (all processes and tasks) in the window.
    pub job_cpu_ns: u64,
    /// Mean over processes of |actual - ideal| / ideal, in percent (seed 004, 4.6).
    pub mean_abs_pct_error: f64,
    pub max_abs_lag_ns: u64,
    pub makespan_ns: u64,
    /// Fraction of core time spent running threads.
    pub utilisation: f64,
}

/// The report both engines produce.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub engine: String,
    pub policy: String,
    pub scenario: String,
    pub cores: usize,
    pub window_ns: u64,
    pub threads: Vec<ThreadReport>,
    pub processes: Vec<ShareReport>,
    pub groups: Vec<ShareReport>,
    pub summary: Summary,
    /// The CPUs the job could use, where the engine knows them (a real run: `0-1`; `null`
    /// for the simulator, whose cores are the scenario's).
    #[serde(default)]
    pub cpus: Option<String>,
    /// Where the run was not what the scenario asked (fewer CPUs, outside load, an overrun
    /// horizon, degraded privileges), one sentence each; empty for the simulator.
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Clone, Default)]
struct ThreadStats {
    arrival: Option<Nanos>,
    start: Option<Nanos>,
    finish: Option<Nanos>,
    cpu: u64,
    migrations: u64,
    switches: u64,
    /// Time blocked (between `Block` and `Wake`), and since when it is blocked now.
    blocked: u64,
    blocked_since: Option<Nanos>,
    /// Run-queue delay measured by the engine itself (see [`Metrics::measured_waiting`]).
    measured_waiting: Option<u64>,
}

#[derive(Clone, Default)]
struct TaskStats {
    jobs: u64,
    misses: u64,
    max_response: u64,
    first_release: Option<Nanos>,
    /// Released, unfinished jobs, in job order: (job, (release, deadline)).
    open: OpenJobs,
    /// Over all threads of all jobs: migrations, and times switched out before finishing
    /// (the per-thread definitions, summed per task; docs/metrics.md).
    migrations: u64,
    switches: u64,
}

/// A task's released, unfinished jobs: (release, deadline) by job number.
type OpenJobs = crate::trace::OpenJobs<(Nanos, Nanos)>;

/// An owner of CPU time: a process (index < processes) or a task.
#[derive(Clone, Default)]
struct Entity {
    name: String,
    group: Option<usize>,
    weight: f64,
    threads: u64,
    /// CPU time of finished run intervals.
    cpu: u64,
    /// Running threads and the sum of their dispatch times, so that the CPU time at any
    /// instant is `cpu + running * t - since_sum` in O(1).
    running: u64,
    since_sum: u64,
    runnable: u64,
    gps_rate: f64,
    gps_settled: f64,
    gps_since: u64,
    max_abs_lag: f64,
    work_done: Option<u64>,
}

impl Entity {
    fn actual_at(&self, t: u64) -> f64 {
        self.cpu as f64 + (self.running * t) as f64 - self.since_sum as f64
    }
    fn ideal_at(&self, t: u64) -> f64 {
        self.gps_settled + self.gps_rate * (t - self.gps_since) as f64
    }
}

#[derive(Clone, Copy)]
struct SlotState {
    owner: Owner,
    generation: u64,
    running: Option<(usize, Nanos)>,
    last_core: Option<usize>,
    runnable: bool,
}

/// The streaming metrics fold. Feed it events, then call [`Metrics::finish`].
pub struct Metrics {
    engine: String,
    policy: String,
    scenario: String,
    cores: usize,
    process_names: Vec<String>,
    process_thread_base: Vec<usize>,
    threads: Vec<ThreadStats>,
    tasks: Vec<TaskStats>,
    task_count: usize,
    entities: Vec<Entity>,
    group_names: Vec<String>,
    group_weights: Vec<f64>,
    group_max_abs_lag: Vec<f64>,
    slots: Vec<Option<SlotState>>,
    core_last: Vec<Option<(Slot, u64)>>,
    generation: u64,
    busy_ns: u64,
    dispatches: u64,
    switches: u64,
    preemptions: u64,
    migrations: u64,
    last_t: Nanos,
    gps_dirty: Option<u64>,
    /// Entities whose runnable count changed at `gps_dirty` (may repeat).
    gps_changed: Vec<usize>,
    /// Runnable threads over all entities.
    total_runnable: u64,
    /// The last full GPS computation gave every entity exactly its cap (runnable threads):
    /// see `recompute_gps`'s fast path.
    gps_all_capped: bool,
    sample_interval: u64,
    next_sample: u64,
    /// C / T of each real-time task: its ideal share of one core.
    task_utilisation: Vec<f64>,
    /// Per task, what an engine that does not trace every dispatch measured instead
    /// ([`Metrics::measured_task`]).
    measured_tasks: Vec<Option<MeasuredTask>>,
    /// Context switches and migrations of the whole run as the engine measured them
    /// ([`Metrics::measured_totals`]).
    measured_totals: Option<(u64, u64)>,
    /// The CPUs the job could use and the run's warnings, as the engine states them
    /// ([`Metrics::frame`]); they go into the report as given.
    cpus: Option<String>,
    warnings: Vec<String>,
    /// The engine's rule for the warnings that depend on the fold's own totals
    /// ([`Metrics::frame_with`]), applied once, when [`Metrics::finish`] builds the report.
    frame_rule: Option<FrameRule>,
    /// Per process, its CPU time over the window as the engine counted it whole, and where
    /// from ([`Metrics::measured_process_cpu`]).
    measured_process_cpu: Vec<Option<(u64, String)>>,
    /// Where the traced CPU time comes from, for the rows not measured whole
    /// ([`Metrics::traced_cpu_source`]); `None`: the trace is the count (the simulator).
    traced_cpu_source: Option<String>,
}

/// An engine's rule for the warnings of a run that depend on what the fold counted (the
/// real engine: other work on the job's CPUs is the machine's busy time less the job's CPU
/// time, which only the fold knows): given the report's summary, the run's warnings, in order.
pub type FrameRule = Box<dyn FnOnce(&Summary) -> Vec<String> + Send>;

/// A task's counts from an engine that measures them rather than tracing each dispatch (the
/// real task runners): CPU time (`None`: not measured per task), migrations, switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeasuredTask {
    pub cpu_ns: Option<u64>,
    pub migrations: u64,
    pub context_switches: u64,
}
