//! The periodic-task path of the engine (`schedkit_linux::run::tasks`): a real SCHED_DEADLINE
//! run's job table and report come from the trace events it streamed, those events reach the
//! sink while the set runs, and a controller given to a task run is refused, never ignored.

mod common;

use schedkit_core::scenario::{Region, Task};
use schedkit_core::trace::{Event, JobTable, TraceSink};
use schedkit_core::{Nanos, Scenario};
use schedkit_linux::deadline::{self, DeadlineOptions};
use schedkit_linux::lease::{self, Hold, Lease};
use schedkit_linux::run::tasks::{self, DeadlineEngine, TaskRunOptions};
use std::time::Duration;

/// Takes schedkit's shared machine lease, as the binary's tests do
/// (`crates/schedkit/tests/common`: no `--exclusive` run moves this process's threads while
/// a set measures), and checks that this thread may use `cpus` CPUs (`sched_getaffinity`);
/// `None`, with the reason printed, where the test cannot run: not root (SCHED_DEADLINE
/// needs it), or fewer CPUs.
fn shared_machine_with(cpus: usize, what: &str) -> Option<Lease> {
    if !common::root() {
        eprintln!("skipped: {what}: SCHED_DEADLINE needs root (CI runs as root)");
        return None;
    }
    let l = lease::machine(
        Hold::Shared,
        format!("schedkit test: {what}"),
        Some(Duration::from_secs(1200)),
    )
    .unwrap_or_else(|e| panic!("the machine lease for {what}: {e}"));
    let allowed = schedkit_linux::affinity::get_thread(0).map_or(0, |a| a.len());
    if allowed < cpus {
        eprintln!("skipped: {what}: {allowed} CPU(s) allowed, the set is made for {cpus}");
        return None;
    }
    Some(l)
}

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
    let Some(_lease) = shared_machine_with(2, "a sched-deadline task set's job table") else {
        return;
    };
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

/// A trace sink that notes when each event reached it, on the run's clock
/// (`CLOCK_MONOTONIC`, as `TaskSetRun::origin_ns`).
#[derive(Default)]
struct Arrivals {
    events: Vec<(Event, u64)>,
}

impl TraceSink for Arrivals {
    fn record(&mut self, e: &Event) {
        self.events
            .push((e.clone(), schedkit_linux::clock_ns(libc::CLOCK_MONOTONIC)));
    }
}

#[test]
fn a_sched_deadline_run_streams_its_jobs_to_the_sink_while_the_set_runs() {
    let Some(_lease) = shared_machine_with(2, "a sched-deadline set streamed live") else {
        return;
    };
    let ms = Nanos::from_ms;
    let tasks = vec![
        Task::new("a", ms(20), vec![Region::Seq(ms(1))]),
        Task::new(
            "b",
            ms(50),
            vec![Region::Seq(ms(1)), Region::Par(vec![ms(1), ms(1)])],
        ),
    ];
    let opts = DeadlineOptions {
        duration: Duration::from_millis(600),
        perf: false,
        ..DeadlineOptions::default()
    };
    let mut sink = Arrivals::default();
    let r = deadline::run_taskset(&tasks, &opts, &mut sink).unwrap();
    // The last job finished at `set_end` on the run's clock; the threads joined after it.
    let set_end = r.origin_ns + r.end_ns;
    let early = sink.events.iter().filter(|(_, at)| *at < set_end).count();
    let first = sink.events.iter().map(|(_, at)| *at).min().unwrap_or(0);
    eprintln!(
        "{early} of {} events reached the sink before the last job finished (the first {:.1} \
         ms after the origin; the last job finished {:.1} ms after it)",
        sink.events.len(),
        first.saturating_sub(r.origin_ns) as f64 / 1e6,
        r.end_ns as f64 / 1e6
    );
    assert!(
        early > 0,
        "every event reached the sink after the set's last finish: not streamed live"
    );
    // Streamed in trace order across the masters: time never goes back, and at one instant
    // releases come first.
    let events: Vec<Event> = sink.events.iter().map(|(e, _)| e.clone()).collect();
    let key = |e: &Event| (e.time(), !matches!(e, Event::JobRelease { .. }));
    assert!(
        events.windows(2).all(|w| key(&w[0]) <= key(&w[1])),
        "not in trace order: {events:?}"
    );
    // Every job of the window, each released and finished once: 30 of a, 12 of b.
    let (jobs, _) = from_events(&events, r.end_ns.max(r.window_ns), 2);
    assert_eq!(jobs, vec![30, 12]);
    let table = JobTable::of(&events);
    assert!(table.jobs().iter().all(|j| j.finish.is_some()));
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
