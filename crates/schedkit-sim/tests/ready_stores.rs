//! The key-ordered policies' two ready queues schedule alike, and so do the engine's two
//! builds (trait objects, and the concrete metrics sink and EDF dispatcher that
//! `simulate_report` uses).
//!
//! Without affinities, `Keyed` keeps a binary heap; a thread with an affinity turns it into
//! the ordered set. Affinities that allow every core change nothing in the schedule, so a
//! set run with none, with all-core affinities on every task (ordered set from the start),
//! and with one on a task released late (heap turned into the set mid-run) must write the
//! same trace.

use schedkit_core::report::Metrics;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, Reason, TraceLog};
use schedkit_sim::{simulate, simulate_report};

/// An overloaded set on 4 cores (utilisation about 4.4), so threads queue, preempt and miss.
/// `cpus` is the affinity line written for task `i`, if any.
fn scenario(policy: &str, cpus: impl Fn(usize) -> Option<&'static str>) -> Scenario {
    let mut text =
        format!("cores = 4\nrun = {{ horizon = \"2s\" }}\npolicy = {{ name = \"{policy}\" }}\n");
    let tasks = [
        (7, 3, 0),
        (10, 4, 0),
        (12, 5, 1),
        (15, 6, 0),
        (20, 9, 2),
        (25, 8, 0),
        (30, 14, 3),
        (40, 12, 0),
        (50, 30, 5),
        (60, 20, 0),
        (90, 40, 7),
        (100, 35, 250),
    ];
    for (i, (period, wcet, offset)) in tasks.iter().enumerate() {
        text.push_str(&format!(
            "\n[[task]]\nname = \"t{i}\"\nperiod = \"{period}ms\"\nwcet = \"{wcet}ms\"\noffset = \"{offset}ms\"\n"
        ));
        if let Some(line) = cpus(i) {
            text.push_str(line);
            text.push('\n');
        }
    }
    Scenario::parse("ready_stores.toml", &text).unwrap_or_else(|e| panic!("{e}"))
}

fn trace(s: &Scenario) -> Vec<Event> {
    let mut log = TraceLog::default();
    let stats = simulate(s, &mut log).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.invariants.invalid_picks, 0);
    log.events
}

#[test]
fn heap_and_ordered_ready_queues_write_the_same_trace() {
    const ALL: &str = "cpus = [0, 1, 2, 3]";
    for policy in ["gedf", "rm", "dm", "fcfs", "sjf"] {
        let plain = trace(&scenario(policy, |_| None));
        let preempts = plain
            .iter()
            .any(|e| matches!(e, Event::Deschedule { reason, .. } if *reason == Reason::Preempted));
        assert_eq!(
            preempts,
            !matches!(policy, "fcfs" | "sjf"),
            "{policy}: the set should make threads wait and, where the policy preempts, preempt"
        );
        let ordered = trace(&scenario(policy, |_| Some(ALL)));
        assert_eq!(plain, ordered, "{policy}: affinities on every task");
        let late = trace(&scenario(policy, |i| (i == 11).then_some(ALL)));
        assert_eq!(
            plain, late,
            "{policy}: affinity on the task released at 250 ms"
        );
    }
}

#[test]
fn simulate_report_agrees_with_the_trait_object_engine() {
    for policy in ["gedf", "rm"] {
        let s = scenario(policy, |_| None);
        let (typed, _, typed_stats) = simulate_report(&s, false).unwrap_or_else(|e| panic!("{e}"));
        let mut metrics = Metrics::new(&s, "sim", 4);
        let stats = simulate(&s, &mut metrics).unwrap_or_else(|e| panic!("{e}"));
        let dynamic = metrics.finish(stats.end);
        assert_eq!(typed_stats.events, stats.events, "{policy}");
        assert_eq!(
            serde_json::to_value(&typed).unwrap(),
            serde_json::to_value(&dynamic).unwrap(),
            "{policy}"
        );
    }
}
