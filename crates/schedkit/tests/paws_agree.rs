//! The simulator's `paws` and the runtime pool's dispatcher (`schedkit_runtime::paws::queues::
//! Sched`, the state machine the real pool runs) agree on the dispatch order of a scripted
//! one-core scenario that exercises rules A-D, a release preemption, rule (ii) and a job's
//! continuation after its join.
//!
//! The runtime's state machine has no clock: a small driver below advances time over it with
//! the same task set, treating every preemption request as honoured at once (an ideal
//! preemption point), and records each pick.

use schedkit_core::scenario::{Region, Scenario};
use schedkit_core::trace::{Event, Owner};
use schedkit_runtime::paws::queues::{Item, Kind, Mode, Notify, Sched};
use std::collections::HashMap;

const SCENARIO: &str = r#"
cores = 1
[policy]
name = "paws"
[run]
horizon = "50ms"
[[task]]
name = "X"
period = "100ms"
deadline = "50ms"
regions = [{ seq = "1ms" }, { par = ["4ms", "4ms"] }, { seq = "1ms" }]
[[task]]
name = "Y"
period = "100ms"
deadline = "20ms"
offset = "2ms"
regions = [{ seq = "1ms" }, { par = ["1ms", "1ms"] }, { seq = "1ms" }]
"#;

/// Dispatch labels `<task><job>#<k>` (k: the job's k-th thread, regions in order).
fn simulated(s: &Scenario) -> Vec<String> {
    let (_, log, _) = schedkit_sim::simulate_report(s, true).unwrap();
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut created: HashMap<(usize, u64), usize> = HashMap::new();
    let mut out = Vec::new();
    for e in log.unwrap().events {
        match e {
            Event::Arrive {
                slot,
                owner: Owner::Task { task, job },
                ..
            } => {
                let k = created.entry((task, job)).or_default();
                names.insert(slot, format!("{}{job}#{k}", s.tasks()[task].name()));
                *k += 1;
            }
            Event::Dispatch { slot, .. } => out.push(names[&slot].clone()),
            _ => {}
        }
    }
    out
}

/// What an entry of the runtime's queues carries in this driver.
struct Work {
    label: String,
    left: u64,
    task: usize,
    job: u64,
    region: usize,
}

/// Index of the first thread of region `r` among a job's threads.
fn base(regions: &[Region], r: usize) -> usize {
    regions[..r]
        .iter()
        .map(|x| match x {
            Region::Seq(_) => 1,
            Region::Par(v) => v.len(),
        })
        .sum()
}

/// Entries for region `r` of job `job` of `task` (one for a sequential region, which is the
/// job itself; one per thread for a parallel one).
fn entries(
    sched: &mut Sched<Work>,
    s: &Scenario,
    task: usize,
    job: u64,
    r: usize,
    deadline: u64,
) -> Vec<Item<Work>> {
    let regions = &s.tasks()[task].regions();
    let (kind, times) = match &regions[r] {
        Region::Seq(c) => (Kind::Job, vec![*c]),
        Region::Par(v) => (Kind::Thread, v.clone()),
    };
    let b = base(regions, r);
    times
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let label = format!("{}{job}#{}", s.tasks()[task].name(), b + i);
            let w = Work {
                label,
                left: c.0,
                task,
                job,
                region: r,
            };
            sched.item(deadline, kind, w)
        })
        .collect()
}

/// The same task set through the runtime's dispatcher on one core.
fn runtime(s: &Scenario) -> Vec<String> {
    let mut sched: Sched<Work> = Sched::new(Mode::Paws, 1, 1);
    let mut out = Vec::new();
    let mut now = 0u64;
    let mut running: Option<Item<Work>> = None;
    // Threads still running in each job's current region, and each job's deadline.
    let mut left_in_region: HashMap<(usize, u64), usize> = HashMap::new();
    let mut deadline: HashMap<(usize, u64), u64> = HashMap::new();
    let mut releases: Vec<(u64, usize, u64)> = Vec::new();
    for (i, t) in s.tasks().iter().enumerate() {
        let mut j = 0;
        while t.offset().0 + j * t.period().0 < s.horizon().0 {
            releases.push((t.offset().0 + j * t.period().0, i, j));
            j += 1;
        }
    }
    releases.sort();
    let mut next_release = 0;
    loop {
        if running.is_none() {
            if let Some((it, _)) = sched.pick(0) {
                out.push(it.payload.label.clone());
                running = Some(it);
            }
        }
        let finish = running.as_ref().map(|it| now + it.payload.left);
        let release = releases.get(next_release).map(|r| r.0);
        let t = match (finish, release) {
            (None, None) => break,
            (Some(f), Some(r)) => f.min(r),
            (f, r) => f.or(r).unwrap(),
        };
        if let Some(it) = running.as_mut() {
            it.payload.left -= t - now;
        }
        now = t;
        if finish == Some(t) {
            let w = running.take().unwrap().payload;
            sched.stopped(0);
            let key = (w.task, w.job);
            let left = left_in_region.entry(key).or_insert(1);
            *left -= 1;
            if *left > 0 {
                continue;
            }
            let r = w.region + 1;
            if r == s.tasks()[w.task].regions().len() {
                continue;
            }
            let items = entries(&mut sched, s, w.task, w.job, r, deadline[&key]);
            left_in_region.insert(key, items.len());
            match s.tasks()[w.task].regions()[r] {
                // Rule B: the threads go to this core's deques.
                Region::Par(_) => {
                    let _ = sched.spawn(0, items);
                }
                // The job continues after its join: ready again.
                Region::Seq(_) => {
                    for it in items {
                        let _ = sched.ready(it);
                    }
                }
            }
        } else {
            let (_, task, job) = releases[next_release];
            next_release += 1;
            let d = now + s.tasks()[task].deadline().0;
            deadline.insert((task, job), d);
            left_in_region.insert((task, job), 1);
            for it in entries(&mut sched, s, task, job, 0, d) {
                if let Notify::Preempt(0) = sched.ready(it) {
                    // An ideal preemption point: the running entry stops now and goes back
                    // by rules (i)-(iii); the core then picks the released job.
                    let it = running.take().expect("a running entry to preempt");
                    sched.preempted(0, it);
                }
            }
        }
    }
    out
}

#[test]
fn simulator_and_runtime_dispatch_a_one_core_scenario_in_the_same_order() {
    let s = Scenario::parse("agree.toml", SCENARIO).unwrap();
    let sim = simulated(&s);
    // X forks at 1 ms, Y (earlier deadline) preempts X0#2 at 2 ms, forks at 3 ms; its threads
    // run first (rule C, earliest deque), and when Y resumes after its join at 5 ms it is
    // handed the core before X's remaining local threads (deadline 20 < 50).
    assert_eq!(
        sim,
        ["X0#0", "X0#2", "Y0#0", "Y0#2", "Y0#1", "Y0#3", "X0#2", "X0#1", "X0#3"]
    );
    assert_eq!(runtime(&s), sim);
}
