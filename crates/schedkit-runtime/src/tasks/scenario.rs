//! A `[[task]]` scenario run for real (`schedkit run FILE`): what this engine refuses to run,
//! the pool the scenario asks for on this machine, the run, and its report.

use super::{run_real_shaped, Error, PoolShape, RealOptions, RealRun, REAL_TASK_POLICIES};
use schedkit_core::report::{MeasuredTask, Metrics, Report};
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::{Event, TraceSink};
use schedkit_core::Nanos;
use std::time::Duration;

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
}

/// What a `[[task]]` scenario run gives: the measurements, and the report both engines share.
#[derive(Clone, Debug)]
pub struct ScenarioRun {
    pub run: RealRun,
    pub report: Report,
}

/// What this engine refuses in a scenario, before anything runs: processes beside the tasks,
/// tasks pinned with `cpus`, a simulator-only policy ([`Error::Input`], naming file, line and
/// field), and SCHED_DEADLINE without the privilege it needs ([`Error::Privilege`]).
pub fn check(scenario: &Scenario) -> Result<(), Error> {
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
        && !schedkit_linux::privilege::Privileges::current().sys_nice
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

/// The pool a `[[task]]` scenario asks for on this machine: the scenario's `cores` as
/// workers at SCHED_FIFO, and what of it cannot be had (fewer CPUs, no real-time priority),
/// one sentence each.
pub fn pool_shape(scenario: &Scenario) -> Result<(PoolShape, Vec<String>), Error> {
    let topo = schedkit_linux::topo::Topology::host()?;
    let allowed = schedkit_linux::honest::allowed_cpus(&topo.online);
    let mut degraded = Vec::new();
    if let Some(w) = schedkit_linux::honest::fewer_cpus(scenario.cores(), &topo.online, &allowed) {
        degraded.push(w);
    }
    let privs = schedkit_linux::privilege::Privileges::current();
    let realtime = privs.root || privs.sys_nice;
    if !realtime && scenario.policy().name() != PolicyName::SchedDeadline {
        degraded.push(format!(
            "the {} pool's workers need SCHED_FIFO to preempt everything else on their CPUs, \
             which needs root or CAP_SYS_NICE (they would run SCHED_OTHER, sharing their \
             CPUs with every other process)",
            scenario.policy().name()
        ));
    }
    let shape = PoolShape {
        workers: Some(scenario.cores().min(allowed.len()).max(1)),
        realtime,
    };
    Ok((shape, degraded))
}

/// Runs a `[[task]]` scenario on real cores for its horizon under its policy: [`check`],
/// [`pool_shape`] (a shortfall is [`Error::Degraded`] unless `allow_degraded`), the run, and
/// [`report_of`].
pub fn run_scenario(scenario: &Scenario, o: &ScenarioOptions) -> Result<ScenarioRun, Error> {
    check(scenario)?;
    let (shape, degraded) = pool_shape(scenario)?;
    if !degraded.is_empty() && !o.allow_degraded {
        return Err(Error::Degraded(format!(
            "{}: this run cannot do what the scenario asks: {}; pass --allow-degraded to \
             run anyway and say so in the report",
            scenario.file(),
            degraded.join("; ")
        )));
    }
    let mut run = run_real_shaped(
        scenario.tasks(),
        scenario.policy().name(),
        &RealOptions {
            duration: Duration::from_nanos(scenario.horizon().0),
            perf: o.perf,
            seed: scenario.policy().seed(),
            stall_witness: o.stall_witness,
        },
        shape,
    )?;
    run.degraded = degraded;
    let report = report_of(scenario, &run);
    Ok(ScenarioRun { run, report })
}

/// The shared report of a real task-set run: jobs, misses and worst responses folded by the
/// same [`Metrics`] as the simulator's; CPU time, migrations and switches as measured, the
/// workers and the warnings (degraded, horizon overrun) as the frame, all inputs of the fold.
pub fn report_of(scenario: &Scenario, run: &RealRun) -> Report {
    let mut events: Vec<Event> = Vec::with_capacity(2 * run.jobs.len());
    for j in &run.jobs {
        events.push(Event::JobRelease {
            t: Nanos(j.release),
            task: j.task,
            job: j.job,
            deadline: Nanos(j.deadline),
        });
        events.push(Event::JobFinish {
            t: Nanos(j.finish),
            task: j.task,
            job: j.job,
        });
    }
    // Time order; at one instant releases first (a job released and finished at the same
    // nanosecond does not exist, but two different jobs may meet).
    events.sort_by_key(|e| (e.time(), !matches!(e, Event::JobRelease { .. })));
    let end = run
        .jobs
        .iter()
        .map(|j| j.finish)
        .max()
        .unwrap_or(0)
        .max(run.window_ns);
    let mut m = Metrics::new(scenario, "run", run.cores);
    for e in &events {
        m.record(e);
    }
    for k in 0..scenario.tasks().len() {
        m.measured_task(
            k,
            MeasuredTask {
                cpu_ns: run.task_cpu[k],
                migrations: run.task_migrations[k],
                context_switches: run.task_switches[k],
            },
        );
    }
    // The summary counts: per task (the pool's user-level counts, or the kernel's for the
    // task's threads under sched-deadline), plus for the pool the kernel's counts of its
    // worker threads (the rendering after the table says whose counts they are).
    let pool = run.user_switches.is_some();
    let kernel = |v: Option<u64>| if pool { v.unwrap_or(0) } else { 0 };
    m.measured_totals(
        run.task_switches.iter().sum::<u64>() + kernel(run.kernel_switches),
        run.task_migrations.iter().sum::<u64>() + kernel(run.kernel_migrations),
    );
    let mut warnings: Vec<String> = run
        .degraded
        .iter()
        .map(|d| format!("degraded (--allow-degraded): {d}"))
        .collect();
    let horizon = run.window_ns;
    if end > horizon + (horizon / 50).max(20_000_000) {
        warnings.push(format!(
            "the horizon ran over: asked {}, the last job finished at {} (+{:.1} %)",
            Nanos(horizon),
            Nanos(end),
            100.0 * (end - horizon) as f64 / horizon.max(1) as f64
        ));
    }
    m.frame(Some(format!("{} worker(s)", run.cores)), warnings);
    m.finish(Nanos(end))
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
            start: ms(release),
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
                start: 0,
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
