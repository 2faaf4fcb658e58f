//! A `[[task]]` scenario run for real (`schedkit run FILE`), through the engine's task path
//! ([`schedkit_linux::run::tasks::run`]): what it refuses, the shape of the run on this
//! machine, and the one fold of its jobs are the engine's; this module is the pool's and
//! SCHED_DEADLINE's [`TaskEngine`] and the [`RealRun`] they measured.

use super::{run_streamed, Error, Job, PoolShape, RealOptions, RealRun};
use schedkit_core::report::Report;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::TraceLog;
use schedkit_linux::run::tasks::{self as engine, JobSink, TaskCounts, TaskEngine, TaskShape};
use std::time::Duration;

pub use schedkit_linux::run::tasks::check;

/// Options of [`run_scenario`] (the flags of `schedkit run` that apply to a task set).
#[derive(Clone, Copy, Debug, Default)]
pub struct ScenarioOptions {
    /// Open perf counters for the kernel's switch and migration counts.
    pub perf: bool,
    /// Run a stall witness beside the set (see [`RealOptions::stall_witness`]).
    pub stall_witness: bool,
    /// Run even where the machine cannot give what the scenario asks (fewer CPUs, no
    /// real-time priority), saying so in the report; without it that is
    /// [`Error::Degraded`].
    pub allow_degraded: bool,
    /// Keep every trace event of the run ([`ScenarioRun::trace`]).
    pub keep_trace: bool,
}

/// What a `[[task]]` scenario run gives: the measurements, and the report both engines share.
#[derive(Clone, Debug)]
pub struct ScenarioRun {
    pub run: RealRun,
    pub report: Report,
    /// Every trace event, with [`ScenarioOptions::keep_trace`].
    pub trace: Option<TraceLog>,
}

/// The pool a `[[task]]` scenario asks for on this machine: the scenario's `cores` as
/// workers at SCHED_FIFO, and what of it cannot be had (fewer CPUs, no real-time priority),
/// one sentence each ([`schedkit_linux::run::tasks::shape`]).
pub fn pool_shape(scenario: &Scenario) -> Result<(PoolShape, Vec<String>), Error> {
    let s = engine::shape(scenario)?;
    Ok((pool_of(&s), s.degraded))
}

fn pool_of(s: &TaskShape) -> PoolShape {
    PoolShape {
        workers: Some(s.workers),
        realtime: s.realtime,
    }
}

/// The real task-set engines of this crate as the engine's [`TaskEngine`]: the run's options,
/// and what it measured beside its jobs once it ran.
struct Engine {
    options: ScenarioOptions,
    run: Option<RealRun>,
}

impl TaskEngine for Engine {
    fn run(
        &mut self,
        scenario: &Scenario,
        shape: &TaskShape,
        duration: Duration,
        sink: &mut dyn JobSink,
    ) -> schedkit_linux::Result<TaskCounts> {
        let run = run_streamed(
            scenario.tasks(),
            scenario.policy().name(),
            &RealOptions {
                duration,
                perf: self.options.perf,
                seed: scenario.policy().seed(),
                stall_witness: self.options.stall_witness,
            },
            pool_of(shape),
            sink,
        )?;
        let counts = run.counts();
        self.run = Some(run);
        Ok(counts)
    }
}

/// Runs a `[[task]]` scenario on real cores for its horizon under its policy, through the
/// engine's task path: [`check`], the shape (a shortfall is [`Error::Degraded`] unless
/// `allow_degraded`), the run streaming its jobs into the one fold, and the report.
pub fn run_scenario(scenario: &Scenario, o: &ScenarioOptions) -> Result<ScenarioRun, Error> {
    let mut e = Engine {
        options: *o,
        run: None,
    };
    let out = engine::run(
        scenario,
        engine::TaskRunOptions {
            allow_degraded: o.allow_degraded,
            keep_trace: o.keep_trace,
            controller: None,
        },
        &mut e,
    )?;
    let mut run = e.run.unwrap_or_default();
    run.jobs = Job::finished(&out.jobs);
    run.degraded = out.degraded;
    Ok(ScenarioRun {
        run,
        report: out.report,
        trace: out.trace,
    })
}

/// The shared report of a real task-set run measured before (its jobs, counts and frame):
/// the jobs streamed as events into the same fold as [`run_scenario`]'s, the CPU time,
/// migrations and switches as measured, the workers and the warnings (degraded, horizon
/// overrun) as the frame, all inputs of the fold.
pub fn report_of(scenario: &Scenario, run: &RealRun) -> Report {
    let mut fold = engine::TaskFold::new(scenario, false);
    fold.begin(run.cores);
    engine::stream(run.jobs.iter().flat_map(Job::events).collect(), &mut fold);
    fold.finish(run.counts(), run.window_ns, run.degraded.clone())
        .report
}

#[cfg(test)]
mod tests {
    use super::super::Job;
    use super::*;

    fn two_tasks() -> Scenario {
        Scenario::parse(
            "t.toml",
            "cores = 2\n[policy]\nname = \"sched-deadline\"\n[[task]]\nname = \"a\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\" }]\n[[task]]\nname = \"b\"\nperiod = \"20ms\"\nregions = [{ seq = \"1ms\" }]\n",
        )
        .unwrap()
    }

    #[test]
    fn report_counts_jobs_misses_and_worst_response_per_task_like_sim() {
        let s = two_tasks();
        let ms = |x: u64| x * 1_000_000;
        let job = |task, job, release, finish, d| Job {
            task,
            job,
            release: ms(release),
            deadline: ms(release + d),
            finish: ms(finish),
        };
        let run = RealRun {
            cores: 2,
            window_ns: ms(20),
            jobs: vec![
                job(0, 0, 0, 3, 10),
                job(1, 0, 0, 25, 20),
                job(0, 1, 10, 12, 10),
            ],
            task_cpu: vec![Some(ms(2)), Some(ms(1))],
            task_migrations: vec![1, 2],
            task_switches: vec![4, 5],
            kernel_switches: Some(9),
            kernel_migrations: Some(3),
            ..RealRun::default()
        };
        let r = report_of(&s, &run);
        let a = r.threads.iter().find(|t| t.name == "a").unwrap();
        let b = r.threads.iter().find(|t| t.name == "b").unwrap();
        assert_eq!((a.jobs, a.deadline_misses), (Some(2), Some(0)));
        assert_eq!(a.max_response_ns, Some(ms(3)));
        assert_eq!((b.jobs, b.deadline_misses), (Some(1), Some(1)));
        assert_eq!((a.cpu_ns, a.migrations, a.context_switches), (ms(2), 1, 4));
        assert_eq!(r.summary.deadline_misses, 1);
        assert_eq!(r.summary.jobs, 3);
        assert_eq!((r.summary.context_switches, r.summary.migrations), (9, 3));
        assert_eq!(r.window_ns, ms(25));
    }

    #[test]
    fn the_frame_and_warnings_enter_the_fold() {
        let s = two_tasks();
        let run = RealRun {
            cores: 1,
            // The last job finishes 30 ms after a 20 ms window: an overrun.
            window_ns: 20_000_000,
            jobs: vec![Job {
                task: 0,
                job: 0,
                release: 0,
                deadline: 10_000_000,
                finish: 50_000_000,
            }],
            task_cpu: vec![None, None],
            task_migrations: vec![0, 0],
            task_switches: vec![0, 0],
            degraded: vec!["the job had 1 CPU".into()],
            ..RealRun::default()
        };
        let r = report_of(&s, &run);
        assert_eq!(r.cpus.as_deref(), Some("1 worker(s)"));
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert!(r.warnings[0].starts_with("degraded (--allow-degraded): the job had 1 CPU"));
        assert!(
            r.warnings[1].starts_with("the horizon ran over"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn scenarios_this_engine_cannot_run_are_input_errors_naming_the_field() {
        let base = "[policy]\nname = \"NAME\"\n[[task]]\nname = \"a\"\nperiod = \"20ms\"\nregions = [{ seq = \"1ms\" }]\n";
        for (text, field) in [
            (base.replace("NAME", "edf"), "policy.name"),
            (
                format!("{}cpus = [0]\n", base.replace("NAME", "paws")),
                "task.cpus",
            ),
            (
                format!(
                    "{}[[process]]\nname = \"p\"\nburst = \"1ms\"\n",
                    base.replace("NAME", "paws")
                ),
                "process",
            ),
        ] {
            let s = Scenario::parse("f.toml", &text).unwrap();
            match check(&s) {
                Err(Error::Input(m)) => {
                    assert!(m.starts_with("f.toml:") && m.contains(field), "{m}")
                }
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
