//! The harness entry point used by `schedkit experiment paws` and `[[task]]` scenarios.

use schedkit_core::scenario::{Region, Task};
use schedkit_core::time::Nanos;
use schedkit_linux::stall::{rerun_while_stalled, Verdict};
use schedkit_runtime::paws::harness::{run_taskset, HarnessOpts};
use schedkit_runtime::paws::Mode;
use std::time::Duration;

fn task(name: &str, period_ms: u64, regions: Vec<Region>) -> Task {
    Task::new(name, Nanos(period_ms * 1_000_000), regions)
}

#[test]
fn a_light_task_set_meets_every_deadline_in_every_mode() {
    let us = |x: u64| Nanos(x * 1000);
    let tasks = vec![
        task(
            "a",
            10,
            vec![
                Region::Seq(us(200)),
                Region::Par(vec![us(300); 4]),
                Region::Seq(us(100)),
            ],
        ),
        task("b", 15, vec![Region::Par(vec![us(100), us(400), us(250)])]),
    ];
    // SCHED_FIFO (root, as in CI) so that other load on the machine cannot delay the workers
    // for whole periods; without it deadlines are reported but not asserted. (Another
    // real-time process above priority 20 on the same CPUs still can.) A stall witness runs
    // beside the pool: a miss during which the whole machine stalled (a virtual machine held
    // by its host, 5-25 ms at a time here, a few times a minute) is not the pool's, and the
    // mode is run again, at most three times; a miss with no stall fails at once.
    let opts = HarnessOpts {
        workers: Some(2),
        fifo_priority: Some(20),
        perf: true,
        stall_witness: true,
        ..HarnessOpts::default()
    };
    for mode in Mode::ALL {
        let r = rerun_while_stalled(&format!("{mode:?}"), 3, || {
            let r = run_taskset(&tasks, mode, Duration::from_millis(150), &opts).unwrap();
            let fifo = !r.report.warnings.iter().any(|w| w.contains("SCHED_FIFO"));
            if !fifo {
                eprintln!("not asserting deadlines: SCHED_FIFO refused (not root)");
                return (r, Verdict::default());
            }
            let verdict = Verdict {
                misses: r.misses as usize,
                unexplained: r
                    .unexplained_misses()
                    .iter()
                    .map(|j| format!("{j:?}"))
                    .collect(),
                stalls: r.stalls.clone(),
            };
            (r, verdict)
        });
        // 150 ms: a releases 15 jobs (0, 10, ..., 140), b 10 (0, 15, ..., 135).
        assert_eq!(r.report.tasks[0].jobs, 15, "{mode:?}");
        assert_eq!(r.report.tasks[1].jobs, 10, "{mode:?}");
        assert_eq!(r.jobs, 25);
        assert!(r
            .report
            .jobs
            .iter()
            .all(|j| j.threads == if j.task == 0 { 4 } else { 3 }));
        // Every job of a ran (a response is measured). Its length against the critical path
        // (0.2 + 0.3 + 0.1 ms) is printed, not asserted: the work is a NOP loop calibrated
        // once per process, and on a virtual CPU whose host sibling was busy during the
        // calibration the same loop later runs up to ~10 % faster (561 us seen in CI).
        let a_min = r
            .report
            .jobs
            .iter()
            .filter(|j| j.task == 0)
            .map(|j| j.response())
            .min();
        assert!(a_min.is_some_and(|m| m > 0), "{mode:?}: {a_min:?}");
        eprintln!("{mode:?}: shortest response of a {a_min:?} ns (critical path 600,000 ns)");
        assert!(r.response_p99 >= r.response_p50);
        // Kernel counters of both workers, or a warning saying why not.
        assert_eq!(r.report.workers.len(), 2);
        let perf_refused = r.report.warnings.iter().any(|w| w.contains("perf"));
        assert!(
            perf_refused || r.kernel_context_switches.is_some(),
            "{mode:?}"
        );
        assert!(perf_refused || r.kernel_migrations.is_some(), "{mode:?}");
        eprintln!(
            "{mode:?}: kernel cs {:?} migrations {:?}; user steals {} migrations {} preemptions {} switches {}",
            r.kernel_context_switches, r.kernel_migrations, r.steals, r.migrations, r.preemptions, r.switches
        );
    }
}
