//! The engine's path for periodic fork-join tasks (`[[task]]` scenarios, seed 001): what it
//! refuses, the shape of the run on this machine, and the one fold of its jobs.
//!
//! Every real task-set engine (SCHED_DEADLINE's [`crate::deadline`], and the user-space pool
//! of `schedkit-runtime` under `paws`, `gedf`, `ws`) is a [`TaskEngine`]: it runs the set and
//! streams each job as trace events (`JobRelease` at the release, `JobFinish` at the finish,
//! in time order) into the [`TaskFold`] [`run`] hands it: SCHED_DEADLINE's live, drained from
//! its masters' queues while the set runs (see [`crate::deadline`]); the pool's once its
//! harness returns, through [`stream`]. The fold is the simulator's
//! `Metrics` (jobs, deadline misses, worst response per task: one definition, in
//! `schedkit_core::report`) teed with a [`JobTable`], so the report and the per-job table the
//! CLI prints after it come from the same events. What an engine measures rather than traces
//! (CPU time per task, the kernel's or the pool's switch and migration counts) enters the
//! fold as inputs ([`TaskCounts`]), and the frame (the workers, the degraded refusals, an
//! overrun horizon) before the report is built.
//!
//! **No controller.** A task set's policy is its scheduler (the kernel's EDF with CBS
//! budgets, or the pool's own dispatcher): there is nothing a `schedkit_core` controller
//! could act on between them, so a controller given to a task run is refused through the
//! controller host ([`super::host::refuse`]) before anything runs, never ignored.

use super::host;
use crate::{Error, Result};
use schedkit_core::control::Controller;
use schedkit_core::report::{MeasuredTask, Metrics, Report};
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::{Event, TraceLog, TraceSink};
use schedkit_core::Nanos;
use std::time::Duration;

/// Policies a `[[task]]` scenario runs under in `schedkit run`.
pub const REAL_TASK_POLICIES: [PolicyName; 4] = [
    PolicyName::SchedDeadline,
    PolicyName::Paws,
    PolicyName::Gedf,
    PolicyName::Ws,
];

/// What this engine refuses in a scenario, before anything runs: processes beside the tasks,
/// tasks pinned with `cpus`, a simulator-only policy ([`Error::Input`], naming file, line and
/// field), and SCHED_DEADLINE without the privilege it needs ([`Error::Privilege`]).
pub fn check(scenario: &Scenario) -> Result<()> {
    if let Some(p) = scenario.processes().first() {
        return Err(Error::Input(format!(
            "{}:{}: process: a scenario with [[task]] entries runs them alone on real cores; \
             move process \"{}\" to another scenario",
            scenario.file(),
            p.line(),
            p.name()
        )));
    }
    if let Some(t) = scenario.tasks().iter().find(|t| t.cpus().is_some()) {
        return Err(Error::Input(format!(
            "{}:{}: task.cpus: policy \"{}\" places threads itself on real cores; remove \
             `cpus` from task \"{}\"",
            scenario.file(),
            t.line(),
            scenario.policy().name(),
            t.name()
        )));
    }
    if !REAL_TASK_POLICIES.contains(&scenario.policy().name()) {
        return Err(Error::Input(format!(
            "{}: policy.name: [[task]] scenarios run on real cores under {} (`{}` is \
             simulator-only here: try `schedkit sim`)",
            scenario.file(),
            REAL_TASK_POLICIES.map(|p| p.as_str()).join(", "),
            scenario.policy().name()
        )));
    }
    if scenario.policy().name() == PolicyName::SchedDeadline
        && !crate::privilege::Privileges::current().sys_nice
    {
        return Err(Error::Privilege(
            "policy sched-deadline puts every task thread under SCHED_DEADLINE, which \
             needs root or CAP_SYS_NICE: run as root (sudo) or grant the capability \
             (setcap cap_sys_nice+ep $(which schedkit))"
                .into(),
        ));
    }
    Ok(())
}

/// What a `[[task]]` scenario gets on this machine: the scenario's `cores` as workers (at
/// most the CPUs schedkit may use), whether they may run SCHED_FIFO, and what of it cannot
/// be had, one sentence each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskShape {
    pub workers: usize,
    pub realtime: bool,
    pub degraded: Vec<String>,
}

/// The [`TaskShape`] of `scenario` on this machine.
pub fn shape(scenario: &Scenario) -> Result<TaskShape> {
    let topo = crate::topo::Topology::host()?;
    let allowed = crate::honest::allowed_cpus(&topo.online);
    let mut degraded = Vec::new();
    if let Some(w) = crate::honest::fewer_cpus(scenario.cores(), &topo.online, &allowed) {
        degraded.push(w);
    }
    let privs = crate::privilege::Privileges::current();
    let realtime = privs.root || privs.sys_nice;
    if !realtime && scenario.policy().name() != PolicyName::SchedDeadline {
        degraded.push(format!(
            "the {} pool's workers need SCHED_FIFO to preempt everything else on their CPUs, \
             which needs root or CAP_SYS_NICE (they would run SCHED_OTHER, sharing their \
             CPUs with every other process)",
            scenario.policy().name()
        ));
    }
    Ok(TaskShape {
        workers: scenario.cores().min(allowed.len()).max(1),
        realtime,
        degraded,
    })
}

/// The job table of a task-set run: the one pairing of job events, in schedkit-core
/// (`schedkit_core::trace::jobs`), re-exported where the task engines find it.
pub use schedkit_core::trace::{JobRow, JobTable};

/// A trace sink a task-set engine streams its jobs into: told the cores the set runs on
/// before the first event ([`TaskFold`] needs them; a bare [`JobTable`] does not).
pub trait JobSink: TraceSink {
    fn begin(&mut self, _cores: usize) {}
}

impl JobSink for JobTable {}

/// Puts the events of several threads in the order a trace sink takes them: time order, and
/// at one instant releases first (a job released and finished at the same nanosecond does
/// not exist, but two different jobs may meet).
pub fn in_trace_order(events: &mut [Event]) {
    events.sort_by_key(|e| (e.time(), !matches!(e, Event::JobRelease { .. })));
}

/// What a task-set engine measured rather than traced; inputs of the fold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskCounts {
    /// The workers (or CPUs) the set ran on.
    pub cores: usize,
    /// Per task: CPU time (`None`: not measured per task), migrations, context switches.
    pub task_cpu: Vec<Option<u64>>,
    pub task_migrations: Vec<u64>,
    pub task_switches: Vec<u64>,
    /// The run's context switches and migrations as the summary counts them (whose counts
    /// they are is the engine's to say, after the table).
    pub total_switches: u64,
    pub total_migrations: u64,
}

/// A real task-set engine (see the module docs).
pub trait TaskEngine {
    /// Runs `scenario`'s tasks for `duration` on `shape`, calls [`JobSink::begin`] with the
    /// cores the set runs on before its first event, and streams every job into `sink` in
    /// trace order ([`in_trace_order`]).
    fn run(
        &mut self,
        scenario: &Scenario,
        shape: &TaskShape,
        duration: Duration,
        sink: &mut dyn JobSink,
    ) -> Result<TaskCounts>;
}

/// Options of [`run`].
#[derive(Default)]
pub struct TaskRunOptions {
    /// Run even where the machine cannot give what the scenario asks, saying so in the
    /// report; without it that is [`Error::Degraded`].
    pub allow_degraded: bool,
    /// Keep every event ([`TaskOutcome::trace`]).
    pub keep_trace: bool,
    /// A controller asked for by a library caller: refused (see the module docs).
    pub controller: Option<Box<dyn Controller>>,
}

/// What a task-set run gives.
#[derive(Clone, Debug)]
pub struct TaskOutcome {
    pub report: Report,
    /// Every job, from the same events as the report.
    pub jobs: Vec<JobRow>,
    /// The end of the window: the last finish, or the release window if later.
    pub end: u64,
    pub counts: TaskCounts,
    /// What the run could not do as asked and went on with (`--allow-degraded`).
    pub degraded: Vec<String>,
    /// Every event, with [`TaskRunOptions::keep_trace`].
    pub trace: Option<TraceLog>,
}

/// The one fold of a task-set run's events: the shared `Metrics`, a [`JobTable`] and,
/// when kept, the whole trace. `Metrics` needs the run's cores, which an engine knows once
/// its workers exist: [`JobSink::begin`] comes before the first event.
pub struct TaskFold<'s> {
    scenario: &'s Scenario,
    metrics: Option<Metrics>,
    table: JobTable,
    trace: Option<TraceLog>,
}

impl<'s> TaskFold<'s> {
    pub fn new(scenario: &'s Scenario, keep_trace: bool) -> TaskFold<'s> {
        TaskFold {
            scenario,
            metrics: None,
            table: JobTable::default(),
            trace: keep_trace.then(TraceLog::default),
        }
    }

    /// Ends the fold: the measured counts and the frame go in, then the report is built once.
    /// `window` is the release window the run was asked for (the scenario's horizon).
    pub fn finish(self, counts: TaskCounts, window: u64, degraded: Vec<String>) -> TaskOutcome {
        let mut m = self
            .metrics
            .unwrap_or_else(|| Metrics::new(self.scenario, "run", counts.cores));
        for k in 0..self.scenario.tasks().len() {
            m.measured_task(
                k,
                MeasuredTask {
                    cpu_ns: counts.task_cpu.get(k).copied().flatten(),
                    migrations: counts.task_migrations.get(k).copied().unwrap_or(0),
                    context_switches: counts.task_switches.get(k).copied().unwrap_or(0),
                },
            );
        }
        m.measured_totals(counts.total_switches, counts.total_migrations);
        let end = self.table.last().0.max(window);
        m.frame(
            Some(format!("{} worker(s)", counts.cores)),
            frame_warnings(&degraded, window, end),
        );
        TaskOutcome {
            report: m.finish(Nanos(end)),
            jobs: self.table.into_jobs(),
            end,
            counts,
            degraded,
            trace: self.trace,
        }
    }
}

impl JobSink for TaskFold<'_> {
    /// The set runs on `cores` workers or CPUs (the report's `cores`).
    fn begin(&mut self, cores: usize) {
        self.metrics = Some(Metrics::new(self.scenario, "run", cores));
    }
}

impl TraceSink for TaskFold<'_> {
    fn record(&mut self, e: &Event) {
        if self.metrics.is_none() {
            // An engine that forgot `begin`: the scenario's cores, rather than no report.
            self.begin(self.scenario.cores());
        }
        if let Some(m) = &mut self.metrics {
            m.record(e);
        }
        self.table.record(e);
        if let Some(t) = &mut self.trace {
            t.record(e);
        }
    }
}

/// The warnings of a task-set run's frame: what it went on without (degraded), and a
/// horizon overrun (the last job finished well after the release window).
fn frame_warnings(degraded: &[String], window: u64, end: u64) -> Vec<String> {
    let mut out: Vec<String> = degraded
        .iter()
        .map(|d| format!("degraded (--allow-degraded): {d}"))
        .collect();
    if end > window + (window / 50).max(20_000_000) {
        out.push(format!(
            "the horizon ran over: asked {}, the last job finished at {} (+{:.1} %)",
            Nanos(window),
            Nanos(end),
            100.0 * (end - window) as f64 / window.max(1) as f64
        ));
    }
    out
}

/// Runs a `[[task]]` scenario on real cores for its horizon with `engine`: [`check`],
/// [`shape`] (a shortfall is [`Error::Degraded`] unless allowed), a controller refused, the
/// run streamed into the fold, and the report.
pub fn run(
    scenario: &Scenario,
    opts: TaskRunOptions,
    engine: &mut dyn TaskEngine,
) -> Result<TaskOutcome> {
    check(scenario)?;
    if let Some(c) = &opts.controller {
        return Err(host::refuse(
            c.as_ref(),
            "the periodic-task engine",
            "a [[task]] set's policy is its scheduler (the kernel's SCHED_DEADLINE, or the \
             pool's own dispatcher), and no action of a controller applies to it",
        ));
    }
    let shape = shape(scenario)?;
    if !shape.degraded.is_empty() && !opts.allow_degraded {
        return Err(Error::Degraded(format!(
            "{}: this run cannot do what the scenario asks: {}; pass --allow-degraded to \
             run anyway and say so in the report",
            scenario.file(),
            shape.degraded.join("; ")
        )));
    }
    let duration = Duration::from_nanos(scenario.horizon().0);
    let mut fold = TaskFold::new(scenario, opts.keep_trace);
    let counts = engine.run(scenario, &shape, duration, &mut fold)?;
    Ok(fold.finish(counts, scenario.horizon().0, shape.degraded))
}

/// SCHED_DEADLINE as a [`TaskEngine`]: [`crate::deadline::run_taskset`] with `options`
/// (its `duration` replaced by the scenario's horizon). The run's own figures (the budget
/// margin used, the stall witness) are in [`DeadlineEngine::last`] afterwards.
#[derive(Default)]
pub struct DeadlineEngine {
    pub options: crate::deadline::DeadlineOptions,
    pub last: Option<crate::deadline::TaskSetRun>,
}

impl TaskEngine for DeadlineEngine {
    fn run(
        &mut self,
        scenario: &Scenario,
        _shape: &TaskShape,
        duration: Duration,
        sink: &mut dyn JobSink,
    ) -> Result<TaskCounts> {
        let opts = crate::deadline::DeadlineOptions {
            duration,
            ..self.options.clone()
        };
        sink.begin(crate::deadline::cores());
        let r = crate::deadline::run_taskset(scenario.tasks(), &opts, sink)?;
        let counts = deadline_counts(&r);
        self.last = Some(r);
        Ok(counts)
    }
}

/// The counts of a SCHED_DEADLINE run: per task the kernel's counts for the task's threads
/// (zero where perf refused), and their sums as the summary's.
pub fn deadline_counts(r: &crate::deadline::TaskSetRun) -> TaskCounts {
    let switches: Vec<u64> = r
        .tasks
        .iter()
        .map(|t| t.context_switches.unwrap_or(0))
        .collect();
    let migrations: Vec<u64> = r.tasks.iter().map(|t| t.migrations.unwrap_or(0)).collect();
    TaskCounts {
        cores: r.cores,
        task_cpu: r.tasks.iter().map(|t| Some(t.cpu_ns)).collect(),
        total_switches: switches.iter().sum(),
        total_migrations: migrations.iter().sum(),
        task_migrations: migrations,
        task_switches: switches,
    }
}

/// Streams the job events of a set's threads, gathered after the run, into `sink`, merged in
/// trace order ([`in_trace_order`]) (SCHED_DEADLINE's go live; this is for engines that
/// hand their jobs back at the end, and for reports rebuilt from recorded jobs).
pub fn stream(mut events: Vec<Event>, sink: &mut dyn TraceSink) {
    in_trace_order(&mut events);
    for e in &events {
        sink.record(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_tasks() -> Scenario {
        Scenario::parse(
            "t.toml",
            "cores = 2\n[policy]\nname = \"sched-deadline\"\n[[task]]\nname = \"a\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\" }]\n[[task]]\nname = \"b\"\nperiod = \"20ms\"\nregions = [{ seq = \"1ms\" }]\n",
        )
        .unwrap()
    }

    #[test]
    fn the_job_table_and_the_report_come_from_the_same_events() {
        let s = two_tasks();
        let ms = |x: u64| Nanos(x * 1_000_000);
        let mut events = vec![
            Event::JobFinish {
                t: ms(25),
                task: 1,
                job: 0,
            },
            Event::JobRelease {
                t: ms(0),
                task: 1,
                job: 0,
                deadline: ms(20),
            },
            Event::JobRelease {
                t: ms(0),
                task: 0,
                job: 0,
                deadline: ms(10),
            },
            Event::JobFinish {
                t: ms(3),
                task: 0,
                job: 0,
            },
            // Released, never finished, deadline inside the window: a miss.
            Event::JobRelease {
                t: ms(10),
                task: 0,
                job: 1,
                deadline: ms(20),
            },
        ];
        in_trace_order(&mut events);
        let mut fold = TaskFold::new(&s, true);
        fold.begin(2);
        for e in &events {
            fold.record(e);
        }
        let counts = TaskCounts {
            cores: 2,
            task_cpu: vec![None, None],
            task_migrations: vec![0, 0],
            task_switches: vec![0, 0],
            ..TaskCounts::default()
        };
        let o = fold.finish(counts, ms(20).0, Vec::new());
        assert_eq!(o.end, ms(25).0);
        let missed = o.jobs.iter().filter(|j| j.missed(Nanos(o.end))).count() as u64;
        assert_eq!((missed, o.report.summary.deadline_misses), (2, 2));
        assert_eq!(o.report.summary.jobs, o.jobs.len() as u64);
        assert_eq!(o.trace.unwrap().events.len(), events.len());
        assert_eq!(o.report.cpus.as_deref(), Some("2 worker(s)"));
    }
}
