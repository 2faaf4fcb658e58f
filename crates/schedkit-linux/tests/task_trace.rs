//! The periodic-task path of the engine (`schedkit_linux::run::tasks`): a real SCHED_DEADLINE
//! run's job table and report come from the trace events it streamed, and a controller given
//! to a task run is refused, never ignored.

mod common;

use schedkit_core::trace::{Event, JobTable};
use schedkit_core::{Nanos, Scenario};
use schedkit_linux::run::tasks::{self, DeadlineEngine, TaskRunOptions};

fn scenario(policy: &str) -> Scenario {
    Scenario::parse(
        "tasks.toml",
        &format!(
            "cores = 2\n[policy]\nname = \"{policy}\"\n[run]\nhorizon = \"300ms\"\n\
             [[task]]\nname = \"a\"\nperiod = \"50ms\"\n\
             regions = [{{ seq = \"1ms\" }}, {{ par = [\"2ms\", \"1ms\"] }}, {{ seq = \"1ms\" }}]\n\
             [[task]]\nname = \"b\"\nperiod = \"20ms\"\nregions = [{{ seq = \"2ms\" }}]\n"
        ),
    )
    .unwrap()
}

/// Misses and jobs per task counted from the events alone, by the one pairing of job events
/// and the one definition of a miss (`schedkit_core::trace::jobs`), which the report's fold
/// does not go through: every finish must close a released job.
fn from_events(events: &[Event], end: u64, tasks: usize) -> (Vec<u64>, Vec<u64>) {
    let table = JobTable::of(events);
    assert_eq!(
        table.unpaired_finishes(),
        0,
        "every finish is of a released job"
    );
    table.per_task(tasks, Nanos(end)).into_iter().unzip()
}

#[test]
fn a_sched_deadline_run_gives_its_job_table_from_trace_events() {
    if !common::root() {
        eprintln!("skipped: SCHED_DEADLINE needs root (CI runs as root)");
        return;
    }
    let allowed = schedkit_linux::affinity::get_thread(0).map_or(0, |a| a.len());
    if allowed < 2 {
        eprintln!("skipped: {allowed} CPU(s) allowed, the set is made for 2");
        return;
    }
    let s = scenario("sched-deadline");
    let mut engine = DeadlineEngine::default();
    let o = tasks::run(
        &s,
        TaskRunOptions {
            // A shared machine may give fewer CPUs than the scenario's 2 to this process's
            // cpuset: the count is what is tested, not the CPUs.
            allow_degraded: true,
            keep_trace: true,
            controller: None,
        },
        &mut engine,
    )
    .unwrap();
    let events = &o.trace.as_ref().unwrap().events;
    let (jobs, misses) = from_events(events, o.end, 2);
    // 300 ms of releases: 6 jobs of a, 15 of b, each released and finished.
    assert_eq!(jobs, vec![6, 15]);
    assert_eq!(o.jobs.len(), 21);
    assert!(o.jobs.iter().all(|j| j.finish.is_some()));
    let r = &o.report;
    assert_eq!(r.summary.jobs, 21);
    assert_eq!(r.summary.deadline_misses, misses.iter().sum::<u64>());
    for (k, name) in ["a", "b"].iter().enumerate() {
        let row = r.threads.iter().find(|t| t.name == *name).unwrap();
        assert_eq!(row.jobs, Some(jobs[k]), "{name}");
        assert_eq!(row.deadline_misses, Some(misses[k]), "{name}");
        let worst = o
            .jobs
            .iter()
            .filter(|j| j.task == k)
            .map(|j| (j.finish.unwrap() - j.release).0)
            .max();
        assert_eq!(row.max_response_ns, worst, "{name}");
    }
    // The table's misses are the report's, job by job.
    let table_misses = o.jobs.iter().filter(|j| j.missed(Nanos(o.end))).count() as u64;
    assert_eq!(table_misses, r.summary.deadline_misses);
    // The kernel's measurements entered as inputs: CPU time of task a's 4 threads.
    let a = r.threads.iter().find(|t| t.name == "a").unwrap();
    assert!(a.cpu_ns > 0);
    assert!(engine.last.is_some());
}

#[test]
fn a_controller_given_to_a_task_run_is_refused_with_its_name() {
    let s = scenario("paws");
    struct Never;
    impl tasks::TaskEngine for Never {
        fn run(
            &mut self,
            _: &Scenario,
            _: &tasks::TaskShape,
            _: std::time::Duration,
            _: &mut dyn tasks::JobSink,
        ) -> schedkit_linux::Result<tasks::TaskCounts> {
            panic!("a refused run must not start");
        }
    }
    let controller = schedkit_core::controllers::pfs::Pfs::new(Nanos::from_ms(10));
    let e = tasks::run(
        &s,
        TaskRunOptions {
            controller: Some(Box::new(controller)),
            ..TaskRunOptions::default()
        },
        &mut Never,
    )
    .unwrap_err();
    match e {
        schedkit_linux::Error::Input(m) => {
            assert!(m.contains("controller `pfs`"), "{m}");
            assert!(m.contains("periodic-task engine"), "{m}");
        }
        other => panic!("{other}"),
    }
}
