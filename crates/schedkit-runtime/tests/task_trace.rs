//! A real `[[task]]` run (`schedkit run FILE` under the pool) goes through the engine's task
//! path: its report and its job table come from the trace events it streamed.

use schedkit_core::report::misses_deadline;
use schedkit_core::trace::Event;
use schedkit_core::{Nanos, Scenario};
use schedkit_runtime::tasks::{run_scenario, ScenarioOptions};
use std::collections::HashMap;

#[test]
fn a_paws_task_run_gives_its_job_table_from_trace_events() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the pool's workers run SCHED_FIFO, which needs root (CI runs as root)");
        return;
    }
    let allowed = schedkit_linux::affinity::get_thread(0).map_or(0, |a| a.len());
    if allowed < 2 {
        eprintln!("skipped: {allowed} CPU(s) allowed, the set is made for 2 workers");
        return;
    }
    let s = Scenario::parse(
        "tasks.toml",
        "cores = 2\n[policy]\nname = \"paws\"\nseed = 1\n[run]\nhorizon = \"300ms\"\n\
         [[task]]\nname = \"a\"\nperiod = \"50ms\"\n\
         regions = [{ seq = \"1ms\" }, { par = [\"2ms\", \"1ms\"] }, { seq = \"1ms\" }]\n\
         [[task]]\nname = \"b\"\nperiod = \"20ms\"\nregions = [{ seq = \"2ms\" }]\n",
    )
    .unwrap();
    let r = run_scenario(
        &s,
        &ScenarioOptions {
            perf: true,
            keep_trace: true,
            ..ScenarioOptions::default()
        },
    )
    .unwrap();
    let events = &r.trace.as_ref().unwrap().events;
    let end = r.report.window_ns;
    let mut open: HashMap<(usize, u64), Nanos> = HashMap::new();
    let (mut jobs, mut misses) = ([0u64; 2], [0u64; 2]);
    for e in events {
        match *e {
            Event::JobRelease {
                task,
                job,
                deadline,
                ..
            } => {
                jobs[task] += 1;
                open.insert((task, job), deadline);
            }
            Event::JobFinish { t, task, job } => {
                let d = open.remove(&(task, job)).expect("finish of a released job");
                misses[task] += misses_deadline(d, Some(t), Nanos(end)) as u64;
            }
            _ => {}
        }
    }
    for ((task, _), d) in open {
        misses[task] += misses_deadline(d, None, Nanos(end)) as u64;
    }
    assert!(jobs[0] > 0 && jobs[1] > 0, "{jobs:?}");
    assert_eq!(r.report.summary.jobs, jobs.iter().sum::<u64>());
    assert_eq!(r.report.summary.deadline_misses, misses.iter().sum::<u64>());
    for (k, name) in ["a", "b"].iter().enumerate() {
        let row = r.report.threads.iter().find(|t| t.name == *name).unwrap();
        assert_eq!(row.jobs, Some(jobs[k]), "{name}");
        assert_eq!(row.deadline_misses, Some(misses[k]), "{name}");
    }
    // The job table the CLI prints after the report is the same events'.
    assert_eq!(r.run.jobs.len() as u64, jobs.iter().sum::<u64>());
    assert_eq!(r.run.misses(), misses.iter().sum::<u64>());
}
