//! The specialised engine against the general one: the same scenario through both must give
//! the same events in the same order and the same counts.

use super::{eligible, run, run_jobs};
use crate::engine::{Engine, SimStats};
use crate::keyed::Keyed;
use crate::policies::edf::Edf;
use schedkit_core::generate::gedf_workload;
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, PolicySpec, Region, Scenario, Task};
use schedkit_core::trace::{Event, Reason, TraceLog, TraceSink};
use schedkit_core::Nanos;

fn general(s: &Scenario) -> (TraceLog, SimStats) {
    let mut log = TraceLog::default();
    let stats = Engine::new(s, Box::new(Keyed::new(Edf)), None, &mut log).run();
    (log, stats)
}

fn fast(s: &Scenario) -> (TraceLog, SimStats) {
    assert!(eligible(s), "{}: not eligible", s.file());
    let mut log = TraceLog::default();
    let stats = run(s, &mut log, None);
    (log, stats)
}

/// Checks that both engines agree on `s`; returns how many preemptions and migrations the
/// trace holds (so that the tests can show they exercised both).
fn same(s: &Scenario) -> (usize, usize) {
    let (a, sa) = general(s);
    let (b, sb) = fast(s);
    if let Some(i) = (0..a.events.len().min(b.events.len())).find(|&i| a.events[i] != b.events[i]) {
        panic!(
            "{}: event {i} differs:\n general {:?}\n    fast {:?}\n before: {:?}",
            s.file(),
            a.events[i],
            b.events[i],
            &a.events[i.saturating_sub(4)..i]
        );
    }
    assert_eq!(a.events.len(), b.events.len(), "{}: event counts", s.file());
    assert_eq!(format!("{sa:?}"), format!("{sb:?}"), "{}: stats", s.file());
    // The report from the facts handed to the fold directly is the report from the events,
    // to the last digit of every figure.
    let mut by_events = Metrics::new(s, "sim", s.cores());
    for e in &a.events {
        by_events.record(e);
    }
    let want = serde_json::to_string(&by_events.finish(sa.end)).unwrap();
    let mut direct = Metrics::new(s, "sim", s.cores());
    let sd = run_jobs(s, &mut direct, None);
    assert_eq!(format!("{sa:?}"), format!("{sd:?}"), "{}: stats", s.file());
    let got = serde_json::to_string(&direct.finish(sd.end)).unwrap();
    assert_eq!(want, got, "{}: reports", s.file());
    let preempted = a
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Deschedule {
                    reason: Reason::Preempted,
                    ..
                }
            )
        })
        .count();
    let migrated = a
        .events
        .iter()
        .filter(|e| matches!(e, Event::Migrate { .. }))
        .count();
    (preempted, migrated)
}

/// A small deterministic generator (no RNG crate needed for test sets).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn uunifast_sets_match_the_general_engine() {
    for (tasks, cores, util) in [
        (20, 4, 3.0),
        (20, 4, 3.9),
        (10, 1, 0.95),
        (30, 8, 7.5),
        (100, 16, 12.0),
        (200, 64, 48.0),
        // Mostly no more jobs waiting than cores idle: the max-tree's list of changed cores
        // fills up between two askings, and the next asking rebuilds it whole.
        (30, 16, 10.0),
        (30, 16, 14.0),
    ] {
        for seed in 1..=3 {
            let s = gedf_workload(tasks, cores, util, Nanos::from_ms(500), seed).unwrap();
            let _ = same(&s);
        }
    }
}

#[test]
fn overloaded_constrained_and_offset_sets_match_the_general_engine() {
    // Overload (backlogs, deadline misses, many preemptions), deadlines shorter and longer
    // than periods, offsets, equal deadlines (ties), periods that do not divide the horizon.
    let mut rng = Lcg(7);
    let (mut preempted, mut migrated) = (0, 0);
    for case in 0..40 {
        let cores = 1 + rng.next(6) as usize;
        let n = 1 + rng.next(12) as usize;
        let tasks: Vec<Task> = (0..n)
            .map(|i| {
                let period = Nanos::from_us(100 * (1 + rng.next(20)));
                let wcet = Nanos(1 + rng.next(period.0 * 3 / 2));
                let deadline = Nanos(1 + rng.next(period.0 * 2));
                Task::new(format!("t{i}"), period, vec![Region::Seq(wcet)])
                    .with_deadline(deadline)
                    .with_offset(Nanos::from_us(50 * rng.next(5)))
            })
            .collect();
        let policy = if cores == 1 && case % 2 == 0 {
            PolicyName::Edf
        } else {
            PolicyName::Gedf
        };
        let s = Scenario::builder(format!("case-{case}"))
            .with_cores(cores)
            .with_horizon(Nanos(10_000 + rng.next(40_000_000)))
            .with_policy(PolicySpec::new(policy))
            .tasks(tasks)
            .build();
        let (p, m) = match s {
            Ok(s) => same(&s),
            Err(e) => panic!("case {case}: {e}"),
        };
        preempted += p;
        migrated += m;
    }
    assert!(
        preempted > 100 && migrated > 100,
        "{preempted} preemptions, {migrated} migrations"
    );
}

#[test]
fn other_scenarios_are_not_eligible() {
    let par = Scenario::builder("par")
        .with_cores(2)
        .with_horizon(Nanos::from_ms(10))
        .with_policy(PolicySpec::new(PolicyName::Gedf))
        .task(Task::new(
            "p",
            Nanos::from_ms(1),
            vec![Region::Par(vec![Nanos::from_us(10); 2])],
        ))
        .build()
        .unwrap();
    assert!(!eligible(&par));
    let pinned = Scenario::builder("pinned")
        .with_cores(2)
        .with_horizon(Nanos::from_ms(10))
        .with_policy(PolicySpec::new(PolicyName::Gedf))
        .task(
            Task::new(
                "p",
                Nanos::from_ms(1),
                vec![Region::Seq(Nanos::from_us(10))],
            )
            .with_cpus(vec![1]),
        )
        .build()
        .unwrap();
    assert!(!eligible(&pinned));
    let rm = Scenario::builder("rm")
        .with_cores(2)
        .with_horizon(Nanos::from_ms(10))
        .with_policy(PolicySpec::new(PolicyName::Rm))
        .task(Task::new(
            "p",
            Nanos::from_ms(1),
            vec![Region::Seq(Nanos::from_us(10))],
        ))
        .build()
        .unwrap();
    assert!(!eligible(&rm));
    // More releases than a slice end's push order can count beside a core id (1 ns
    // periods over 2^62 ns): the general engine runs it.
    let endless = Scenario::builder("endless")
        .with_cores(2)
        .with_horizon(Nanos(1 << 62))
        .with_policy(PolicySpec::new(PolicyName::Gedf))
        .task(Task::new("p", Nanos(1), vec![Region::Seq(Nanos(1))]))
        .build()
        .unwrap();
    assert!(!eligible(&endless));
    let long = Scenario::builder("long")
        .with_cores(2)
        .with_horizon(Nanos(1 << 50))
        .with_policy(PolicySpec::new(PolicyName::Gedf))
        .task(Task::new(
            "p",
            Nanos::from_ms(1),
            vec![Region::Seq(Nanos(1))],
        ))
        .build()
        .unwrap();
    assert!(eligible(&long));
}
