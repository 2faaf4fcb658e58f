//! A real `[[task]]` run (`schedkit run FILE` under the pool) goes through the engine's task
//! path: its report and its job table come from the trace events it streamed.

use schedkit_core::trace::JobTable;
use schedkit_core::{Nanos, Scenario};
use schedkit_runtime::tasks::{run_scenario, ScenarioOptions};

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
    // Jobs and misses per task from the events alone, by the one pairing of job events and
    // the one definition of a miss, which the report's fold does not go through: every
    // finish must close a released job.
    let table = JobTable::of(events);
    assert_eq!(
        table.unpaired_finishes(),
        0,
        "every finish is of a released job"
    );
    let (jobs, misses): (Vec<u64>, Vec<u64>) = table.per_task(2, Nanos(end)).into_iter().unzip();
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
