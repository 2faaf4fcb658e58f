//! PAWS (seed 001, section 4, rules A-F) and classic work stealing in the simulator: scripted
//! one- and two-core scenarios whose decisions are checked step by step.
//!
//! Threads are named `<task><job>#<k>`: `k` counts the threads a job has created so far, so
//! `X0#0` is job 0 of task X's first (sequential) region and `X0#1`, `X0#2`, ... are the
//! threads of its parallel region in spawn order.

use schedkit_core::report::Report;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, Owner, Reason};
use schedkit_core::Nanos;
use schedkit_sim::{simulate_report, SimStats};
use std::collections::HashMap;

/// `(time in us, core, thread)` for every dispatch, and the migrations `(thread, from, to)`.
struct Run {
    report: Report,
    stats: SimStats,
    dispatches: Vec<(u64, usize, String)>,
    migrations: Vec<(String, usize, usize)>,
    preempted: Vec<(u64, usize, String)>,
}

fn sim(text: &str) -> Run {
    let s = Scenario::parse("paws-test.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let (report, log, stats) = simulate_report(&s, true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.invariants.invalid_picks, 0);
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut created: HashMap<(usize, u64), usize> = HashMap::new();
    let (mut dispatches, mut migrations, mut preempted) = (vec![], vec![], vec![]);
    for e in log.unwrap().events {
        match e {
            Event::Arrive { slot, owner, .. } => {
                let name = match owner {
                    Owner::Task { task, job } => {
                        let k = created.entry((task, job)).or_default();
                        *k += 1;
                        format!("{}{job}#{}", s.tasks()[task].name(), *k - 1)
                    }
                    Owner::Process { process, thread } => {
                        format!("{}.{thread}", s.processes()[process].name())
                    }
                };
                names.insert(slot, name);
            }
            Event::Dispatch { t, core, slot } => {
                dispatches.push((t.0 / 1000, core, names[&slot].clone()))
            }
            Event::Migrate { slot, from, to, .. } => {
                migrations.push((names[&slot].clone(), from, to))
            }
            Event::Deschedule {
                t,
                core,
                slot,
                reason: Reason::Preempted,
            } => preempted.push((t.0 / 1000, core, names[&slot].clone())),
            _ => {}
        }
    }
    Run {
        report,
        stats,
        dispatches,
        migrations,
        preempted,
    }
}

fn order(r: &Run) -> Vec<&str> {
    r.dispatches.iter().map(|d| d.2.as_str()).collect()
}

fn at(r: &Run, us: u64) -> Vec<(usize, &str)> {
    r.dispatches
        .iter()
        .filter(|d| d.0 == us)
        .map(|d| (d.1, d.2.as_str()))
        .collect()
}

fn counter(stats: &SimStats, name: &str) -> u64 {
    stats
        .policy_counters
        .iter()
        .find(|c| c.0 == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

const HEAD: &str = "[run]\nhorizon = \"50ms\"\n";

fn scenario(cores: usize, policy: &str, tasks: &str) -> String {
    format!("cores = {cores}\n[policy]\nname = \"{policy}\"\nseed = 7\n{HEAD}{tasks}")
}

#[test]
fn rule_a_one_global_queue_by_deadline_ties_fifo() {
    // Three jobs released together on one core: B and C (deadline 10) before A (30), and
    // B before C because B came first (FIFO among equal deadlines).
    let r = sim(&scenario(
        1,
        "paws",
        r#"
[[task]]
name = "A"
period = "100ms"
deadline = "30ms"
regions = [{ seq = "1ms" }]
[[task]]
name = "B"
period = "100ms"
deadline = "10ms"
regions = [{ seq = "1ms" }]
[[task]]
name = "C"
period = "100ms"
deadline = "10ms"
regions = [{ seq = "1ms" }]
"#,
    ));
    assert_eq!(order(&r), ["B0#0", "C0#0", "A0#0"]);
}

#[test]
fn rules_b_c_d_threads_stay_local_bottom_first_before_the_global_queue() {
    // One core. P forks three threads at 1 ms; Q (later deadline) was released at 0.5 ms and
    // waits in the global queue. Rule B: the threads go to core 0's deque; rule C: the core
    // takes the bottom first (the last spawned, P0#3, 3 ms), then P0#2, P0#1; rule D: only
    // then the global queue (Q).
    let r = sim(&scenario(
        1,
        "paws",
        r#"
[[task]]
name = "P"
period = "100ms"
regions = [{ seq = "1ms" }, { par = ["1ms", "2ms", "3ms"] }]
[[task]]
name = "Q"
period = "100ms"
deadline = "200ms"
offset = "500us"
regions = [{ seq = "1ms" }]
"#,
    ));
    assert_eq!(order(&r), ["P0#0", "P0#3", "P0#2", "P0#1", "Q0#0"]);
    let times: Vec<u64> = r.dispatches.iter().map(|d| d.0).collect();
    assert_eq!(times, [0, 1000, 4000, 6000, 7000]);
    assert!(
        r.preempted.is_empty(),
        "Q's later deadline preempts nothing"
    );
    assert_eq!(counter(&r.stats, "local_picks"), 3);
    assert_eq!(counter(&r.stats, "steals"), 0);
}

#[test]
fn rule_c_highest_priority_deque_first_and_preempted_local_threads_go_back_to_their_deque() {
    // One core. X (deadline 50) forks two 4 ms threads at 1 ms; X0#2 (bottom) runs. Y
    // (deadline 20) is released at 2 ms and preempts it; X0#2 goes back to the bottom of its
    // deque (rule ii). Y forks two threads at 3 ms: the core's local queue now holds deque 20
    // {Y0#1, Y0#2} and deque 50 {X0#1, X0#2}; it takes the bottom of the earliest deque
    // first: Y0#2, Y0#1, then X0#2 (resumed, 3 ms left), X0#1.
    let r = sim(&scenario(
        1,
        "paws",
        r#"
[[task]]
name = "X"
period = "100ms"
deadline = "50ms"
regions = [{ seq = "1ms" }, { par = ["4ms", "4ms"] }]
[[task]]
name = "Y"
period = "100ms"
deadline = "20ms"
offset = "2ms"
regions = [{ seq = "1ms" }, { par = ["1ms", "1ms"] }]
"#,
    ));
    assert_eq!(
        order(&r),
        ["X0#0", "X0#2", "Y0#0", "Y0#2", "Y0#1", "X0#2", "X0#1"]
    );
    assert_eq!(r.preempted, [(2000, 0, "X0#2".to_string())]);
    let times: Vec<u64> = r.dispatches.iter().map(|d| d.0).collect();
    assert_eq!(times, [0, 1000, 2000, 3000, 4000, 5000, 8000]);
    assert_eq!(counter(&r.stats, "release_preemptions"), 1);
}

#[test]
fn rule_e_an_idle_core_steals_the_top_of_a_busy_cores_deque() {
    // Two cores. X forks four threads on core 0 at 1 ms. Core 0 takes the bottom (X0#4);
    // core 1 has nothing local and the global queue is empty, so it steals the top: the
    // oldest thread X0#1, which migrates from core 0 (where it was spawned).
    let r = sim(&scenario(
        2,
        "paws",
        r#"
[[task]]
name = "X"
period = "100ms"
regions = [{ seq = "1ms" }, { par = ["4ms", "4ms", "4ms", "4ms"] }]
"#,
    ));
    assert_eq!(at(&r, 1000), [(0, "X0#4"), (1, "X0#1")]);
    // At 5 ms both finish: core 0 takes its bottom (X0#3), core 1 steals the top (X0#2).
    assert_eq!(at(&r, 5000), [(0, "X0#3"), (1, "X0#2")]);
    assert_eq!(
        r.migrations,
        [("X0#1".to_string(), 0, 1), ("X0#2".to_string(), 0, 1)]
    );
    assert_eq!(counter(&r.stats, "steals"), 2);
    assert_eq!(r.report.summary.migrations, 2);
    assert_eq!(r.report.summary.deadline_misses, 0);
}

#[test]
fn rule_f_a_preempted_stolen_thread_goes_to_the_global_queue() {
    // Two cores. X (deadline 100) forks two 5 ms threads on core 0 at 1 ms: core 0 runs
    // X0#2, core 1 steals X0#1. Y (deadline 10) is released at 2 ms: both running threads
    // have deadline 100, the tie goes to the lower core, so Y preempts X0#2 on core 0, which
    // returns to core 0's deque (rule ii). W (deadline 20) is released at 3 ms: the latest
    // running deadline is now X0#1's on core 1, which W preempts; X0#1 was stolen, so it goes
    // to the global queue (rule F / iii), not back to core 0's deque. At 4 ms Y ends: core 0
    // takes X0#2 from its deque. At 5 ms W ends: core 1 takes X0#1 from the global queue. Had
    // X0#1 gone back to core 0's deque, core 0 would have taken it (the bottom) at 4 ms.
    let r = sim(&scenario(
        2,
        "paws",
        r#"
[[task]]
name = "X"
period = "100ms"
regions = [{ seq = "1ms" }, { par = ["5ms", "5ms"] }]
[[task]]
name = "Y"
period = "100ms"
deadline = "10ms"
offset = "2ms"
regions = [{ seq = "2ms" }]
[[task]]
name = "W"
period = "100ms"
deadline = "20ms"
offset = "3ms"
regions = [{ seq = "2ms" }]
"#,
    ));
    assert_eq!(at(&r, 1000), [(0, "X0#2"), (1, "X0#1")]);
    assert_eq!(at(&r, 2000), [(0, "Y0#0")]);
    assert_eq!(at(&r, 3000), [(1, "W0#0")]);
    assert_eq!(at(&r, 4000), [(0, "X0#2")]);
    assert_eq!(at(&r, 5000), [(1, "X0#1")]);
    assert_eq!(
        r.preempted,
        [(2000, 0, "X0#2".to_string()), (3000, 1, "X0#1".to_string())]
    );
    assert_eq!(counter(&r.stats, "release_preemptions"), 2);
    // X and X0#1 come from the global queue; Y and W were dispatched directly at release.
    assert_eq!(counter(&r.stats, "global_picks"), 2);
}

#[test]
fn a_release_takes_a_free_core_before_preempting_and_never_preempts_an_earlier_deadline() {
    // Two cores, one busy with A (deadline 5): B (deadline 50) released at 1 ms takes the idle
    // core; C (deadline 80) released at 2 ms beats neither running deadline and waits.
    let r = sim(&scenario(
        2,
        "paws",
        r#"
[[task]]
name = "A"
period = "100ms"
deadline = "5ms"
regions = [{ seq = "4ms" }]
[[task]]
name = "B"
period = "100ms"
deadline = "50ms"
offset = "1ms"
regions = [{ seq = "4ms" }]
[[task]]
name = "C"
period = "100ms"
deadline = "80ms"
offset = "2ms"
regions = [{ seq = "1ms" }]
"#,
    ));
    assert!(r.preempted.is_empty(), "{:?}", r.preempted);
    assert_eq!(at(&r, 1000), [(1, "B0#0")]);
    assert_eq!(at(&r, 4000), [(0, "C0#0")]);
}

#[test]
fn a_job_resumed_on_another_core_after_its_join_counts_as_a_migration() {
    // Two cores. X forks two threads at 1 ms on core 0: X0#2 (1 ms) on core 0, X0#1 (3 ms)
    // stolen by core 1. The join completes on core 1 at 4 ms, where X's last region (the
    // master resuming) is created; core 0 is idle and takes it from the global queue first
    // (core order), so the master resumes on another core than the join: a migration.
    let r = sim(&scenario(
        2,
        "paws",
        r#"
[[task]]
name = "X"
period = "100ms"
regions = [{ seq = "1ms" }, { par = ["3ms", "1ms"] }, { seq = "1ms" }]
"#,
    ));
    assert_eq!(at(&r, 4000), [(0, "X0#3")]);
    assert_eq!(
        r.migrations,
        [("X0#1".to_string(), 0, 1), ("X0#3".to_string(), 1, 0)]
    );
}

#[test]
fn ws_never_preempts_so_an_urgent_job_waits_and_misses() {
    // One core: X (deadline 100) runs 5 ms; Y (deadline 2 ms) is released at 1 ms. WS has no
    // priorities: Y waits until X is done and misses. PAWS preempts X and meets Y's deadline.
    let tasks = r#"
[[task]]
name = "X"
period = "100ms"
regions = [{ seq = "5ms" }]
[[task]]
name = "Y"
period = "100ms"
deadline = "2ms"
offset = "1ms"
regions = [{ seq = "1ms" }]
"#;
    let ws = sim(&scenario(1, "ws", tasks));
    assert_eq!(order(&ws), ["X0#0", "Y0#0"]);
    assert_eq!(ws.report.summary.deadline_misses, 1);
    let paws = sim(&scenario(1, "paws", tasks));
    assert_eq!(order(&paws), ["X0#0", "Y0#0", "X0#0"]);
    assert_eq!(paws.report.summary.deadline_misses, 0);
}

#[test]
fn ws_takes_its_own_bottom_then_the_injector_then_steals_the_top() {
    let r = sim(&scenario(
        2,
        "ws",
        r#"
[[task]]
name = "X"
period = "100ms"
regions = [{ seq = "1ms" }, { par = ["4ms", "4ms", "4ms"] }]
[[task]]
name = "Z"
period = "100ms"
offset = "2ms"
regions = [{ seq = "1ms" }]
"#,
    ));
    // 1 ms: core 0 its bottom X0#3, core 1 steals the top X0#1. 5 ms: core 0 X0#2 (own
    // bottom) and core 1 Z (the injector, before stealing).
    assert_eq!(at(&r, 1000), [(0, "X0#3"), (1, "X0#1")]);
    assert_eq!(at(&r, 5000), [(0, "X0#2"), (1, "Z0#0")]);
    assert_eq!(counter(&r.stats, "steals"), 1);
}

#[test]
fn stealing_is_seeded_and_reproducible() {
    // Four cores, two jobs forking on two cores: which victim an idle core robs is random,
    // drawn from the policy seed. The same seed gives the same schedule.
    let text = |seed: u64| {
        format!(
            "cores = 4\n[policy]\nname = \"paws\"\nseed = {seed}\n{HEAD}{}",
            r#"
[[task]]
name = "X"
period = "20ms"
regions = [{ seq = "1ms" }, { par = ["2ms", "3ms", "1ms", "2ms", "2ms", "1ms"] }, { seq = "1ms" }]
[[task]]
name = "Y"
period = "30ms"
regions = [{ seq = "1ms" }, { par = ["1ms", "2ms", "3ms", "2ms", "1ms", "3ms"] }, { seq = "1ms" }]
"#
        )
    };
    let a = sim(&text(1));
    let b = sim(&text(1));
    assert_eq!(a.dispatches, b.dispatches);
    let differs = (2..20).any(|s| sim(&text(s)).dispatches != a.dispatches);
    assert!(differs, "the victim choice never depends on the seed");
    assert_eq!(a.report.summary.deadline_misses, 0);
}

#[test]
fn paws_and_ws_reject_pinned_tasks_with_a_located_error() {
    for policy in ["paws", "ws"] {
        let text = scenario(
            2,
            policy,
            "[[task]]\nname = \"X\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\" }]\ncpus = [0]\n",
        );
        let s = Scenario::parse("pinned.toml", &text).unwrap();
        let e = schedkit_sim::policies::build(&s)
            .err()
            .expect("cpus is refused");
        assert_eq!(e.field, "task.cpus");
        assert!(e.line > 0 && e.message.contains(policy), "{e}");
    }
}

#[test]
fn seed001_sets_meet_every_deadline_under_paws_at_the_papers_windows() {
    // Section 5's claim for PAWS on m = 2: no task set misses in any of the four windows (the
    // simulator has no overheads, so this checks the policy, not the machine).
    use schedkit_core::generate::{scenario as gen, Seed001};
    use schedkit_core::scenario::PolicyName;
    for window in [(0.28, 0.30), (0.58, 0.60), (0.78, 0.80), (0.83, 0.85)] {
        for seed in 0..5 {
            let s = gen(
                "seed001",
                2,
                PolicyName::Paws,
                Nanos::from_secs(2),
                Seed001::new(2, window, seed).generate(),
            )
            .unwrap();
            let (r, _, _) = simulate_report(&s, false).unwrap();
            assert_eq!(
                r.summary.deadline_misses, 0,
                "window {window:?} seed {seed}"
            );
            assert!(r.summary.jobs > 0);
        }
    }
}
