//! `[[task]]` scenarios on real cores (`schedkit run FILE`), and the real half of
//! `schedkit experiment paws`: periodic fork-join tasks (seed 001) under
//!
//! - `sched-deadline`: every task's master and parallel threads as kernel threads under
//!   SCHED_DEADLINE ([`schedkit_linux::deadline`]);
//! - `paws`, `gedf`, `ws`: the user-space real-time pool of [`crate::paws`], one pinned
//!   worker per CPU, through its harness ([`crate::paws::harness::run_taskset`]).
//!
//! Both stream every job as trace events (`JobRelease`, `JobFinish`) into the engine's one
//! fold for task sets ([`schedkit_linux::run::tasks`]): the report `sim` prints (the same
//! `Metrics` code: jobs, deadline misses, worst response per task) and the job table of
//! [`RealRun`] come from those events; the measured CPU time, migrations and context
//! switches enter the fold as its inputs. What the counts are differs by engine
//! (`schedkit_render::tasks` says which after the table): for `sched-deadline` the kernel's
//! counts for the task's threads (perf software counters); for the pool, per task the pool's
//! own user-level counts (a thread run on another core than where it was spawned, a job
//! resumed on another core; fiber switch-ins), and in the summary those plus the kernel's
//! counts for the worker threads.
//!
//! This module lives here, not in `schedkit-linux` beside the process engine, because its
//! pool half is this crate's (which depends on `schedkit-linux`). It never prints: what went
//! wrong is an [`Error`] (`schedkit_linux`'s: `Input` for a scenario this engine cannot run,
//! naming file, line and field; `Privilege` and `Degraded` for refusals; `Os` for a pool or
//! kernel failure), and what the user should know is in [`RealRun::warnings`] and the
//! report's warnings.

mod scenario;

pub use scenario::{check, pool_shape, report_of, run_scenario, ScenarioOptions, ScenarioRun};
pub use schedkit_linux::run::tasks::REAL_TASK_POLICIES;

use crate::paws::harness::{self, HarnessOpts};
use crate::paws::Mode;
use schedkit_core::scenario::{PolicyName, Task};
use schedkit_core::trace::{misses_deadline, Event};
use schedkit_core::Nanos;
use schedkit_linux::deadline::{self, DeadlineOptions};
use schedkit_linux::run::tasks::{JobRow, JobSink, JobTable, TaskCounts};
use schedkit_linux::stall::{explains_miss, Stall};
pub use schedkit_linux::Error;
use std::time::Duration;

/// One finished job, times in ns from the run's origin (the first possible release), as
/// its trace events told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub task: usize,
    pub job: u64,
    pub release: u64,
    pub deadline: u64,
    pub finish: u64,
}

impl Job {
    pub fn response(&self) -> u64 {
        self.finish.saturating_sub(self.release)
    }
    /// Whether the job finished after its deadline: the one definition
    /// (`schedkit_core::trace::misses_deadline`; a `Job` is always finished, so the end of
    /// the run does not matter).
    pub fn missed(&self) -> bool {
        misses_deadline(
            Nanos(self.deadline),
            Some(Nanos(self.finish)),
            Nanos(self.finish),
        )
    }

    /// The finished jobs of a job table. A task-set engine finishes every job it releases
    /// (it waits for the last one before it returns), so nothing is dropped in practice; a
    /// job left open would count in the report's misses (if due before the end) but not
    /// here, where there is no finish to hold.
    pub fn finished(rows: &[JobRow]) -> Vec<Job> {
        rows.iter()
            .filter_map(|r| {
                Some(Job {
                    task: r.task,
                    job: r.job,
                    release: r.release.0,
                    deadline: r.deadline.0,
                    finish: r.finish?.0,
                })
            })
            .collect()
    }

    /// The job's two trace events.
    pub fn events(&self) -> [Event; 2] {
        [
            Event::JobRelease {
                t: Nanos(self.release),
                task: self.task,
                job: self.job,
                deadline: Nanos(self.deadline),
            },
            Event::JobFinish {
                t: Nanos(self.finish),
                task: self.task,
                job: self.job,
            },
        ]
    }
}

/// What a real run of a task set measured, whichever engine ran it.
#[derive(Clone, Debug, Default)]
pub struct RealRun {
    pub cores: usize,
    /// Release window.
    pub window_ns: u64,
    pub jobs: Vec<Job>,
    /// Per task: CPU time (when measured per task), migrations, context switches (see the
    /// module docs for whose counts they are).
    pub task_cpu: Vec<Option<u64>>,
    pub task_migrations: Vec<u64>,
    pub task_switches: Vec<u64>,
    /// Kernel counts of every thread that ran the work (`None`: perf refused).
    pub kernel_switches: Option<u64>,
    pub kernel_migrations: Option<u64>,
    /// The pool's own counts (`None` for sched-deadline, which has no user-level scheduler).
    pub user_switches: Option<u64>,
    pub user_migrations: Option<u64>,
    pub steals: Option<u64>,
    pub preemptions: Option<u64>,
    /// Release to first instruction of each preempting job (pool only), ns.
    pub preemption_latency: Vec<u64>,
    /// The same preemptions split into stages (timer, request, reach, pick, switch; see
    /// `paws::PreemptionStages`), ns.
    pub preemption_stages: Vec<[u64; 5]>,
    /// Machine stalls on the run's clock when a stall witness ran (`RealOptions::stall_witness`).
    pub stalls: Option<Vec<Stall>>,
    pub warnings: Vec<String>,
    /// What the run could not do as the scenario asks and went on with (`--allow-degraded`).
    pub degraded: Vec<String>,
}

impl RealRun {
    pub fn misses(&self) -> u64 {
        self.jobs.iter().filter(|j| j.missed()).count() as u64
    }

    /// Misses the witnessed machine stalls do not explain (`stall::explains_miss`); every
    /// miss when no witness ran.
    pub fn unexplained_misses(&self) -> u64 {
        let stalls = self.stalls.as_deref().unwrap_or(&[]);
        self.jobs
            .iter()
            .filter(|j| j.missed() && !explains_miss(stalls, j.release, j.deadline, j.finish))
            .count() as u64
    }

    /// What the fold takes as measured: per task as measured, and in the summary those plus,
    /// for the pool, the kernel's counts of its worker threads (the rendering after the table
    /// says whose counts they are).
    pub fn counts(&self) -> TaskCounts {
        let pool = self.user_switches.is_some();
        let kernel = |v: Option<u64>| if pool { v.unwrap_or(0) } else { 0 };
        TaskCounts {
            cores: self.cores,
            task_cpu: self.task_cpu.clone(),
            task_migrations: self.task_migrations.clone(),
            task_switches: self.task_switches.clone(),
            total_switches: self.task_switches.iter().sum::<u64>() + kernel(self.kernel_switches),
            total_migrations: self.task_migrations.iter().sum::<u64>()
                + kernel(self.kernel_migrations),
        }
    }
}

/// Options of a real task-set run.
#[derive(Clone, Debug)]
pub struct RealOptions {
    pub duration: Duration,
    pub perf: bool,
    /// Victim-choice seed of the pool (rule E).
    pub seed: u64,
    /// Run a stall witness beside the set (`schedkit_linux::stall`): its wake-ups count in
    /// the kernel context switches of whatever it preempts.
    pub stall_witness: bool,
}

/// How many workers the pool gets and whether they run SCHED_FIFO (`None` workers: every
/// CPU schedkit may use).
#[derive(Clone, Copy, Debug)]
pub struct PoolShape {
    pub workers: Option<usize>,
    pub realtime: bool,
}

impl Default for PoolShape {
    fn default() -> PoolShape {
        PoolShape {
            workers: None,
            realtime: true,
        }
    }
}

/// Runs `tasks` for real under `policy`.
pub fn run_real(tasks: &[Task], policy: PolicyName, o: &RealOptions) -> Result<RealRun, Error> {
    run_real_shaped(tasks, policy, o, PoolShape::default())
}

/// [`run_real`] with the pool's shape given: the jobs are the events the run streamed.
pub fn run_real_shaped(
    tasks: &[Task],
    policy: PolicyName,
    o: &RealOptions,
    shape: PoolShape,
) -> Result<RealRun, Error> {
    let mut table = JobTable::default();
    let mut run = run_streamed(tasks, policy, o, shape, &mut table)?;
    run.jobs = Job::finished(table.jobs());
    Ok(run)
}

/// Runs `tasks` for real under `policy` and streams every job into `sink` as trace events;
/// the [`RealRun`] returned has every figure but the jobs (they are the sink's).
pub fn run_streamed(
    tasks: &[Task],
    policy: PolicyName,
    o: &RealOptions,
    shape: PoolShape,
    sink: &mut dyn JobSink,
) -> Result<RealRun, Error> {
    let mode = match policy {
        PolicyName::SchedDeadline => return run_deadline(tasks, o, sink),
        PolicyName::Paws => Mode::Paws,
        PolicyName::Gedf => Mode::Gedf,
        PolicyName::Ws => Mode::Ws,
        other => {
            return Err(Error::Input(format!(
                "policy \"{other}\" does not run [[task]] scenarios on real cores (real: {})",
                REAL_TASK_POLICIES.map(|p| p.as_str()).join(", ")
            )))
        }
    };
    run_pool(tasks, mode, o, shape, sink)
}

/// The user-space pool: its harness runs the set and returns its job records, which become
/// the events streamed into `sink`, on the run's clock.
fn run_pool(
    tasks: &[Task],
    mode: Mode,
    o: &RealOptions,
    shape: PoolShape,
    sink: &mut dyn JobSink,
) -> Result<RealRun, Error> {
    let defaults = HarnessOpts::default();
    let opts = HarnessOpts {
        perf: o.perf,
        seed: o.seed,
        stall_witness: o.stall_witness,
        workers: shape.workers,
        fifo_priority: defaults.fifo_priority.filter(|_| shape.realtime),
        ..defaults
    };
    let h = harness::run_taskset(tasks, mode, o.duration, &opts)
        .map_err(|e| Error::io(format!("the {} pool", mode.name()), e))?;
    let r = &h.report;
    // The pool's epoch is not the first release: shift every time so that job 0 of a task is
    // released at the task's offset, as in the simulator and the sched-deadline runner.
    let origin = r
        .jobs
        .iter()
        .filter(|j| j.task < tasks.len())
        .map(|j| j.release - tasks[j.task].offset().0 - j.index * tasks[j.task].period().0)
        .min()
        .unwrap_or(0);
    let n = tasks.len();
    let mut run = RealRun {
        cores: h.workers,
        window_ns: o.duration.as_nanos() as u64,
        task_cpu: vec![None; n],
        task_migrations: vec![0; n],
        task_switches: vec![0; n],
        kernel_switches: r.kernel_context_switches(),
        kernel_migrations: r.kernel_migrations(),
        user_switches: Some(h.switches),
        user_migrations: Some(h.migrations),
        steals: Some(h.steals),
        preemptions: Some(h.preemptions),
        preemption_latency: r.preemption_latency.clone(),
        preemption_stages: r.preemption_stages.iter().map(|s| s.stages()).collect(),
        stalls: o
            .stall_witness
            .then(|| h.stalls.iter().map(|s| s.shifted(origin)).collect()),
        warnings: r.warnings.clone(),
        ..RealRun::default()
    };
    let mut events = Vec::with_capacity(2 * r.jobs.len());
    for j in r.jobs.iter().filter(|j| j.task < n) {
        let job = Job {
            task: j.task,
            job: j.index,
            release: j.release - origin,
            deadline: j.deadline - origin,
            finish: j.finish - origin,
        };
        events.extend(job.events());
        run.task_migrations[j.task] += j.migrations;
        run.task_switches[j.task] += j.switches;
    }
    sink.begin(h.workers);
    schedkit_linux::run::tasks::stream(events, sink);
    Ok(run)
}

/// SCHED_DEADLINE: [`deadline::run_taskset`] streams its jobs into `sink` itself.
fn run_deadline(tasks: &[Task], o: &RealOptions, sink: &mut dyn JobSink) -> Result<RealRun, Error> {
    let opts = DeadlineOptions {
        duration: o.duration,
        perf: o.perf,
        stall_witness: o.stall_witness,
        ..DeadlineOptions::default()
    };
    sink.begin(deadline::cores());
    let r = deadline::run_taskset(tasks, &opts, sink)?;
    let counts = schedkit_linux::run::tasks::deadline_counts(&r);
    let sum = |f: fn(&deadline::TaskTotals) -> Option<u64>| -> Option<u64> {
        r.tasks.iter().map(f).sum()
    };
    Ok(RealRun {
        cores: r.cores,
        window_ns: r.window_ns,
        task_cpu: counts.task_cpu,
        task_migrations: counts.task_migrations,
        task_switches: counts.task_switches,
        kernel_switches: sum(|t| t.context_switches),
        kernel_migrations: sum(|t| t.migrations),
        stalls: o.stall_witness.then(|| r.stalls.clone()),
        warnings: r.stall_warning.iter().cloned().collect(),
        ..RealRun::default()
    })
}
