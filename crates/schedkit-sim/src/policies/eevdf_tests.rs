//! Tests of the EEVDF model against schedules worked out by hand.

use super::*;
use crate::policy::SimThread;
use crate::simulate_report;
use schedkit_core::scenario::DEFAULT_WAKE_PATH;
use schedkit_core::trace::Owner;
use schedkit_core::Scenario;

/// One CPU, base slice 1 ms (base_slice 1 ms x (1 + ilog2 1)), tick 1 ms, three threads
/// of weights 1024 (A), 2048 (B) and 512 (C) arriving at 0 in that order.
const THREE: &str = r#"
cores = 1
[policy]
name = "eevdf"
base_slice = "1ms"
tick = "1ms"
[[process]]
name = "A"
weight = 1024
[[process]]
name = "B"
weight = 2048
[[process]]
name = "C"
weight = 512
"#;

pub(super) fn thread(process: usize, weight: u64) -> SimThread {
    SimThread {
        owner: Owner::Process { process, thread: 0 },
        process: Some(process),
        task: None,
        group: None,
        arrival: Nanos::ZERO,
        demand: None,
        remaining: None,
        weight,
        priority: 0,
        tickets: 1,
        affinity: None,
        deadline: Nanos::MAX,
        period: Nanos::MAX,
        rel_deadline: Nanos::MAX,
        seq: process as u64,
        state: ThreadState::Ready,
        last_core: None,
        par: false,
        cpu: Nanos::ZERO,
        phase: None,
        rt: false,
    }
}

/// Drives the dispatcher as the engine does on one core: pick, run the slice, charge,
/// re-queue; returns its log of (time, pick, lags at the pick).
fn drive(picks: usize) -> Vec<PickLog> {
    let sc = Scenario::parse("t.toml", THREE).expect("scenario");
    let mut threads: Vec<SimThread> = sc
        .processes()
        .iter()
        .enumerate()
        .map(|(i, p)| thread(i, p.weight()))
        .collect();
    let mut running = vec![None];
    let mut d = Eevdf::new(sc.policy(), 1);
    let mut now = Nanos::ZERO;
    macro_rules! ctx {
        () => {
            Ctx {
                now,
                cores: 1,
                threads: &threads,
                running: &running,
                spec: sc.policy(),
                scenario: &sc,
                group_weights: &[],
            }
        };
    }
    for s in 0..3 {
        d.enqueue(&ctx!(), s, Enqueue::New);
    }
    for _ in 0..picks {
        let s = d.pick_next(&ctx!(), 0).expect("a thread");
        threads[s as usize].state = ThreadState::Running(0);
        running[0] = Some(s);
        let slice = d.time_slice(&ctx!(), 0, s).expect("a slice");
        now += slice;
        d.charge(&ctx!(), s, 0, slice);
        threads[s as usize].state = ThreadState::Ready;
        running[0] = None;
        d.enqueue(&ctx!(), s, Enqueue::Expired);
    }
    d.log
}

#[test]
fn slice_scales_with_the_log_of_the_cpu_count() {
    // 0.7 ms x (1 + ilog2(min(n, 8))): 0.7, 1.4, 1.4, 2.1 (4 CPUs), 2.8 ms (8 and more).
    let got: Vec<u64> = [1, 2, 3, 4, 8, 64].map(slice_factor).to_vec();
    assert_eq!(got, vec![1, 2, 2, 3, 4, 4]);
}

#[test]
fn three_weights_on_one_cpu_follow_the_hand_schedule() {
    // Placement at t = 0 (queue empty, then V = 0 each time; new threads have lag 0 and a
    // deadline half a slice away, vslice = 1 ms x 1024 / w):
    //   A: v 0, d 0 + 1_000_000/2 = 500_000; B: v 0, d 500_000/2 = 250_000;
    //   C: v 0, d 2_000_000/2 = 1_000_000.
    // A pick runs to the first 1 ms tick at or after v reaches d (every run here is 1 ms of
    // real time, i.e. 1_000_000 x 1024 / w of vruntime), then update_deadline sets
    // d = v + vslice. V = sum(w v) / sum(w), sum(w) = 3584; lag = V - v.
    //  1. t=0: V=0, all eligible, lags 0/0/0; earliest d: B (250_000). B: v 500_000,
    //     d 1_000_000.
    //  2. t=1: V = 2048*500_000/3584 = 285_714; lags A +285_714, B -214_286, C +285_714;
    //     B ineligible; A (d 500_000) before C (d 1_000_000): A. A: v 1_000_000, d 2_000_000.
    //  3. t=2: V = (1024e6 + 1024e6)/3584 = 571_428; lags A -428_572, B +71_428,
    //     C +571_428; B and C eligible, both d 1_000_000: C was queued first (at 0, B again at
    //     1 ms), so C. C: v 2_000_000, d 4_000_000.
    //  4. t=3: V = 857_142; lags A -142_858, B +357_142, C -1_142_858; only B eligible. B: v
    //     1_000_000, d 1_500_000.
    //  5. t=4: V = 1_142_857; lags A +142_857, B +142_857, C -857_143; A (d 2e6) and B
    //     (d 1.5e6) eligible: B again. B: v 1_500_000, d 2_000_000.
    //  6. t=5: V = 1_428_571; lags A +428_571, B -71_429, C -571_429: A. A: v 2e6, d 3e6.
    //  7. t=6: V = 1_714_285; lags A -285_715, B +214_285, C -285_715: B. B: v 2e6, d 2.5e6.
    //  8. t=7: V = 2_000_000, every lag 0 (one period of 7 ms: B 4 ms, A 2 ms, C 1 ms, the
    //     weights' 4:2:1); B (d 2.5e6) before A (3e6) and C (4e6).
    let (a, b, c) = (0, 1, 2);
    let want: Vec<(u64, Slot, [i64; 3])> = vec![
        (0, b, [0, 0, 0]),
        (1, a, [285_714, -214_286, 285_714]),
        (2, c, [-428_572, 71_428, 571_428]),
        (3, b, [-142_858, 357_142, -1_142_858]),
        (4, b, [142_857, 142_857, -857_143]),
        (5, a, [428_571, -71_429, -571_429]),
        (6, b, [-285_715, 214_285, -285_715]),
        (7, b, [0, 0, 0]),
    ];
    let got = drive(want.len());
    for (i, ((t, s, lags), (wt, ws, wl))) in got.iter().zip(&want).enumerate() {
        assert_eq!(*t, wt * 1_000_000, "pick {}: time", i + 1);
        assert_eq!(s, ws, "pick {} at {wt} ms", i + 1);
        let l: Vec<i64> = lags.iter().map(|x| x.1).collect();
        assert_eq!(l, wl.to_vec(), "lags at pick {}", i + 1);
    }
}

fn run(text: &str) -> schedkit_core::Report {
    let sc = Scenario::parse("t.toml", text).expect("scenario");
    simulate_report(&sc, false).expect("sim").0
}

#[test]
fn long_run_shares_follow_the_weights() {
    // nice 0 against nice 5 (1024 : 335) on one core.
    let r = run(
        "cores = 1\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"20s\"\n\
         [[process]]\nname = \"a\"\n[[process]]\nname = \"b\"\nnice = 5\n",
    );
    let (a, b) = (r.processes[0].cpu_ns as f64, r.processes[1].cpu_ns as f64);
    let want = 1024.0 / 335.0;
    assert!((a / b - want).abs() / want < 0.01, "{a} / {b}");
}

#[test]
fn a_sleeper_beside_a_hog_is_served_at_once_and_keeps_its_share() {
    // A thread running 1 ms every 10 ms beside a hog on one core: it is owed service when
    // it wakes (positive lag from its sleep, placed at V), so it preempts the hog as soon as
    // the hog is no longer eligible, and gets all the CPU it asks for.
    let r = run(
        "cores = 1\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"2s\"\n\
         [[process]]\nname = \"hog\"\n[[process]]\nname = \"s\"\n\
         pattern = [{ run = \"1ms\" }, { sleep = \"9ms\" }]\n",
    );
    let s = r.processes[1].cpu_ns as f64 / 2e9;
    assert!(s > 0.09 && s <= 0.1001, "sleeper share {s}");
    assert_eq!(r.summary.migrations, 0);
}

#[test]
fn two_cores_take_a_thread_each_and_an_idle_core_pulls() {
    let r = run(
        "cores = 2\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"1s\"\n\
         [[process]]\nname = \"p\"\nthreads = 3\nburst = \"200ms\"\n",
    );
    // 600 ms of work on two cores: done by about 300 ms (the third thread shares a core,
    // moved between the two by the periodic balancer, then a freed core pulls it; 330.7 ms
    // with the 0.7 ms base slice, where the thread's last moves leave it behind).
    assert!(
        r.summary.makespan_ns <= 340_000_000,
        "{}",
        r.summary.makespan_ns
    );
    for t in &r.threads {
        assert_eq!(t.cpu_ns, 200_000_000);
    }
}

/// Seed 004's 4.2.2 case: one nice-0 thread beside four nice-5 threads on two cores.
const FOUR_TWO_TWO: &str = "cores = 2\n[policy]\nname = \"POLICY\"\n[run]\nhorizon = \"3s\"\n\
     [[process]]\nname = \"n0\"\n[[process]]\nname = \"n5\"\nnice = 5\nthreads = 4\n";

#[test]
fn failed_balances_escalate_until_a_light_thread_moves() {
    // Loads 1024 against 4 x 335 = 1340: the imbalance is 158, below a 335 thread's load,
    // so seed 004's CFS (eq. 4.3) never moves anything and the nice-0 thread keeps a core.
    let cfs = run(&FOUR_TWO_TWO.replace("POLICY", "cfs"));
    assert_eq!(cfs.processes[0].cpu_ns, 3_000_000_000);
    // The 6.x balancer halves a thread's load once per failed balance: at the third busy
    // balance a 335 thread (167 >> 1 = 83 <= 158) moves, and the nice-5 threads then shuttle
    // between the cores, so the nice-0 thread shares its core part of the time. Its share
    // of the two cores falls from 50 % to about its weight's 1024 / 2364 = 43.3 % (39.9 %
    // in this model: once a nice-5 thread has joined it, the nice-0 thread itself is moved
    // at times, to a queue of three; the kernel gave it 39.8-43.1 % on this machine,
    // docs/results/fidelity.md).
    let eevdf = run(&FOUR_TWO_TWO.replace("POLICY", "eevdf"));
    let share = eevdf.processes[0].cpu_ns as f64 / 6e9;
    assert!(share < 0.47 && share > 0.37, "nice-0 share {share}");
    assert!(eevdf.summary.migrations > 3, "{}", eevdf.summary.migrations);
}

#[test]
fn busy_cores_balance_busy_factor_times_less_often() {
    // get_sd_balance_interval for a busy CPU: sd->balance_interval x busy_factor 16, to
    // jiffies rounded up, less one jiffy, clamped to HZ x CPUs / 10 jiffies; rounds of 4 ms.
    // 2 CPUs: min_interval 2 ms -> 32 ms = 8 rounds, less 1: 7; max_interval 4 ms -> 15.
    let e = Eevdf::new(
        Scenario::parse(
            "t.toml",
            "cores = 2\n[policy]\nname = \"eevdf\"\n[[process]]\nname = \"p\"\n",
        )
        .expect("scenario")
        .policy(),
        2,
    );
    assert_eq!(e.interval, [2_000_000, 2_000_000], "sd_init: sd_weight ms");
    let ms = |x: u64| x * 1_000_000;
    assert_eq!(busy_rounds(e.interval[0], e.round_ns, 2), 7);
    assert_eq!(busy_rounds(ms(4), ms(4), 2), 15);
    // 64 CPUs: 64 ms x 16 = 1024 ms = 256 rounds, less 1.
    assert_eq!(busy_rounds(ms(64), ms(4), 64), 255);
    // All pinned: up to 512 ms x 16 = 2048 rounds, clamped to 250 x 2 / 10 = 50 jiffies.
    assert_eq!(busy_rounds(MAX_PINNED_INTERVAL, ms(4), 2), 50);
    // 100 ms rounds: 32 ms is one round, less one, at least one.
    assert_eq!(busy_rounds(ms(2), ms(100), 2), 1);
}

#[test]
fn five_against_four_nice_0_threads_shuttle() {
    // Nine nice-0 threads on two cores, all new at 0 (find_dst_cpu: core 0, the idle core 1,
    // then the lower utilisation while both have spare capacity, then the lower load once
    // both are overloaded: they alternate), so core 0 holds 5 and core 1 holds 4; every thread's PELT load stays at its weight 1024
    // (runnable from the start, new tasks start full). Both cores are overloaded, so the
    // imbalance_pct gate applies: 100 x 5120 > 117 x 4096 (sd_init's value for one LLC; the
    // 2.6.24 value 125 would call it balanced, 512000 = 125 x 4096). Avg 4608, imbalance
    // min(512, 512) = 512. Each core balances on its own schedule: 7 rounds (28 ms) after
    // its last balance while its sd->balance_interval is 2 ms (after an imbalance), 15
    // rounds (60 ms) once a balanced result doubled it to 4 ms; both start at 2 ms, last 0.
    // Core 0 goes first within a round; the busiest queue finds itself balanced:
    //   r7  (28 ms): core 0 is the busiest: balanced, interval 4 ms (next r22); core 1:
    //                1024 > 512, failed[1] = 1 (next r14).
    //   r14 (56 ms): core 1: 1024 >> 1 = 512 fits. The least recently picked waiting thread
    //                of core 0 is the one core 0 switches to at this tick (on its CPU by
    //                the time core 1 looks), so the next one moves (cold: it last ran
    //                40-44 ms): 4 / 5. It runs on core 1 from core 1's next slice end (the
    //                60 ms tick), where the migration is counted.
    //   r21 (84 ms): core 1, now the busiest: balanced, 4 ms (next r36).
    //   r22 (88 ms): core 0 fails (next r29).  r29 (116 ms): core 0 pulls one back: 5 / 4.
    //   r36 (144 ms): core 0 balanced (next r51); core 1 fails (next r43).
    //   r43 (172 ms): core 1 pulls: 4 / 5.  r50: core 1 balanced (r65).  r51: core 0 fails.
    //   r58 (232 ms): core 0 pulls.
    // So a move every 14.5 rounds (58 ms): 51 in 3 s, 17.0/s (the kernel moved 17.0/s on a
    // quiet machine, docs/results/fidelity.md). The migration is counted when the moved
    // thread first runs on its new core.
    let nine = "cores = 2\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"HZN\"\n\
         [[process]]\nname = \"one\"\n[[process]]\nname = \"eight\"\nthreads = 8\n";
    let sc = Scenario::parse("t.toml", &nine.replace("HZN", "1s")).expect("scenario");
    let e = Eevdf::new(sc.policy(), 2);
    assert_eq!(e.imbalance_pct, 117);
    let migrations = |h: &str| run(&nine.replace("HZN", h)).summary.migrations;
    assert_eq!(migrations("60ms"), 0);
    assert_eq!(migrations("64ms"), 1);
    assert_eq!(migrations("115ms"), 1);
    assert_eq!(migrations("120ms"), 2);
    assert_eq!(migrations("175ms"), 3);
    assert_eq!(migrations("235ms"), 4);
    assert_eq!(migrations("3s"), 51);
}

pub(super) fn ctx_at<'a>(
    now: u64,
    threads: &'a [SimThread],
    running: &'a [Option<Slot>],
    sc: &'a Scenario,
) -> Ctx<'a> {
    Ctx {
        now: Nanos(now),
        cores: running.len(),
        threads,
        running,
        spec: sc.policy(),
        scenario: sc,
        group_weights: &[],
    }
}

/// Two cores, three nice-0 threads arriving at 0 (A, B, C: A and C on core 0, B on core 1),
/// driven by hand up to 4 ms, when A's slice ends on core 0 (C takes the core) and B blocks
/// on core 1. Returns the dispatcher and the context's parts.
fn hot_setup() -> (Eevdf, Vec<SimThread>, Scenario) {
    hot_setup_at(1024)
}

/// `hot_setup` with each core's newidle balance starting at success ratio `ratio` (1024:
/// always tried, whatever the die says).
fn hot_setup_at(ratio: u32) -> (Eevdf, Vec<SimThread>, Scenario) {
    let sc = Scenario::parse(
        "t.toml",
        &format!(
            "cores = 2\n[policy]\nname = \"eevdf\"\nnewidle_ratio = {ratio}\n\
             [[process]]\nname = \"p\"\nthreads = 3\n"
        ),
    )
    .expect("scenario");
    let mut threads: Vec<SimThread> = (0..3).map(|i| thread(i, 1024)).collect();
    let mut d = Eevdf::new(sc.policy(), 2);
    let mut running = vec![None, None];
    for s in 0..3 {
        d.enqueue(&ctx_at(0, &threads, &running, &sc), s, Enqueue::New);
    }
    assert_eq!(d.ents.iter().map(|e| e.core).collect::<Vec<_>>(), [0, 1, 0]);
    for c in 0..2 {
        let s = d
            .pick_next(&ctx_at(0, &threads, &running, &sc), c)
            .expect("a thread");
        threads[s as usize].state = ThreadState::Running(c);
        running[c] = Some(s);
    }
    assert_eq!(running, [Some(0), Some(1)]);
    let ms4 = 4_000_000;
    d.charge(&ctx_at(ms4, &threads, &running, &sc), 0, 0, Nanos(ms4));
    d.charge(&ctx_at(ms4, &threads, &running, &sc), 1, 1, Nanos(ms4));
    threads[0].state = ThreadState::Ready;
    running[0] = None;
    d.enqueue(&ctx_at(ms4, &threads, &running, &sc), 0, Enqueue::Expired);
    assert_eq!(
        d.pick_next(&ctx_at(ms4, &threads, &running, &sc), 0),
        Some(2)
    );
    threads[2].state = ThreadState::Running(0);
    threads[1].state = ThreadState::Blocked;
    (d, threads, sc)
}

#[test]
fn a_cache_hot_thread_stays_until_cache_nice_tries_balances_failed() {
    // Core 1 goes idle at 4 ms; the only waiting thread, A, left core 0 at 4 ms: it is hot
    // until 4.5 ms (sysctl_sched_migration_cost). The newidle pull at 4.0 ms fails
    // (nr_balance_failed 1). Asked again while idle (4.2 ms) core 1 does not pull: an idle
    // CPU sleeps until its idle balance. Its idle balances at 4.2 and 4.3 ms: the first
    // fails (2); at the second 2 > cache_nice_tries = 1, so A moves though still hot.
    let (mut d, threads, sc) = hot_setup();
    let running = [Some(2), None];
    let at = |now| ctx_at(now, &threads, &running, &sc);
    assert_eq!(d.pick_next(&at(4_000_000), 1), None);
    assert_eq!(d.failed[1], 1);
    assert_eq!(d.pick_next(&at(4_200_000), 1), None);
    assert_eq!(d.failed[1], 1);
    assert_eq!(d.idle_pull(&at(4_200_000), 1), Lb::Failed);
    assert_eq!(d.failed[1], 2);
    assert_eq!(d.idle_pull(&at(4_300_000), 1), Lb::Moved);
    assert_eq!(d.failed[1], 0);
    assert_eq!(d.pick_next(&at(4_300_000), 1), Some(0));

    // A first pull at 4.5 ms finds A cold and takes it at once.
    let (mut d, threads, sc) = hot_setup();
    let at = |now| ctx_at(now, &threads, &running, &sc);
    assert_eq!(d.pick_next(&at(4_500_000), 1), Some(0));
    // PELT: B's load average stays attached to core 1 while it sleeps (blocked load; it
    // blocked at 4.5 ms, so no period of decay has passed: 1024), and A's 1024 moved in
    // with A; core 0 keeps C's 1024.
    assert_eq!(d.rqs[1].avg.load, 2048);
    assert_eq!(d.rqs[0].avg.load, 1024);
}

#[test]
fn a_core_that_empties_tries_newidle_balance_as_often_as_it_succeeds() {
    // hot_setup at 4.5 ms, where A is cold and waits on core 0 while core 1 empties. At
    // success ratio 1024 the die always allows the balance and A moves at once (above). At
    // ratio 0 a balance runs for 2 throws in 1024 (`d1k <= 1`); this seed's first throw is
    // not one of them, so core 1 stays idle, A stays, and the occasion counts as a call
    // without success; core 1's next periodic idle balance takes A.
    let (mut d, threads, sc) = hot_setup_at(0);
    let running = [Some(2), None];
    let at = |now| ctx_at(now, &threads, &running, &sc);
    assert_eq!(d.pick_next(&at(4_500_000), 1), None);
    assert_eq!(d.ents[0].core, 0);
    assert_eq!(
        d.newidle[1],
        newidle::NewIdle::starting_at(0).after_calls(1)
    );
    assert_eq!(d.idle_pull(&at(4_600_000), 1), Lb::Moved);
    assert_eq!(d.ents[0].core, 1);
}

#[test]
fn a_running_thread_that_may_move_makes_a_balance_failed_not_all_pinned() {
    // Core 0: a free thread R running, T pinned to core 0 waiting; core 1: U pinned to
    // core 1, running alone. New tasks count their full weight: PELT loads 2048 and 1024,
    // core 1 runs one thread, so any excess counts: imbalance min(512, 512) = 512. The only
    // waiting thread of core 0 may not run on core 1; can_migrate_task clears LBF_ALL_PINNED
    // for R (allowed on core 1) before refusing it as running (task_on_cpu), so the balance
    // failed: nr_balance_failed 1, balance_interval back to min_interval (2 ms). Were R
    // pinned too, it would be out_all_pinned: count 0, interval doubled.
    let sc = Scenario::parse(
        "t.toml",
        "cores = 2\n[policy]\nname = \"eevdf\"\n[[process]]\nname = \"p\"\nthreads = 3\n",
    )
    .expect("scenario");
    let mut threads: Vec<SimThread> = (0..3).map(|i| thread(i, 1024)).collect();
    threads[1].affinity = Some(vec![0]);
    threads[2].affinity = Some(vec![1]);
    let mut d = Eevdf::new(sc.policy(), 2);
    let mut running = vec![None, None];
    for s in 0..3 {
        d.enqueue(&ctx_at(0, &threads, &running, &sc), s, Enqueue::New);
    }
    assert_eq!(d.ents.iter().map(|e| e.core).collect::<Vec<_>>(), [0, 0, 1]);
    for c in 0..2 {
        let s = d
            .pick_next(&ctx_at(0, &threads, &running, &sc), c)
            .expect("a thread");
        threads[s as usize].state = ThreadState::Running(c);
        running[c] = Some(s);
    }
    assert_eq!(running, [Some(0), Some(2)], "R and U run, T waits");
    d.loads = vec![d.rqs[0].avg.load, d.rqs[1].avg.load];
    assert_eq!(d.loads, [2048, 1024]);
    // U as if it had run long enough to fill core 1 (utilisation 1024: fully busy; a new
    // thread's 512 would leave core 1 spare capacity, and a busy core with spare capacity
    // takes nothing, `has_spare`).
    d.rqs[1].util.load = 1024;
    d.interval[1] = 4_000_000;
    let lb = d.pull_from(&ctx_at(0, &threads, &running, &sc), 1, 0);
    assert_eq!((lb, d.failed[1]), (Lb::Failed, 1));
    d.tune(1, lb);
    assert_eq!(d.interval[1], 2_000_000);
    // R pinned to core 0 as well: nothing of core 0 may ever run on core 1.
    threads[0].affinity = Some(vec![0]);
    let lb = d.pull_from(&ctx_at(0, &threads, &running, &sc), 1, 0);
    assert_eq!((lb, d.failed[1]), (Lb::AllPinned, 0));
    d.tune(1, lb);
    assert_eq!(d.interval[1], 4_000_000);
}

#[test]
fn a_sleeper_joins_its_queue_one_wake_up_path_after_its_timer() {
    // One core, one thread running 1 ms then sleeping 9 ms. It arrives at 0 (a new thread
    // takes no wake-up path) and runs 0-1 ms; its timer fires at 10 ms, it is queued and
    // runs DEFAULT_WAKE_PATH.0 (8.7 us) later, at 10.0087 ms, so its next timer is 9 ms after
    // 11.0087 ms: the k-th run starts at k x (10 ms + 8.7 us). The trace's wake-up is at
    // the timer, so each wake-up latency is the path.
    let sc = Scenario::parse(
        "t.toml",
        "cores = 1\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"45ms\"\n\
         [[process]]\nname = \"s\"\npattern = [{ run = \"1ms\" }, { sleep = \"9ms\" }]\n",
    )
    .expect("scenario");
    let (_, log, _) = simulate_report(&sc, true).expect("sim");
    let log = log.expect("trace kept");
    let (mut wakes, mut runs) = (Vec::new(), Vec::new());
    for e in &log.events {
        match *e {
            schedkit_core::trace::Event::Wake { t, .. } => wakes.push(t.0),
            schedkit_core::trace::Event::Dispatch { t, .. } => runs.push(t.0),
            _ => {}
        }
    }
    let cycle = 10_000_000 + DEFAULT_WAKE_PATH.0;
    assert_eq!(runs, [0, cycle, 2 * cycle, 3 * cycle, 4 * cycle]);
    let timers: Vec<u64> = (1..5).map(|k| k * cycle - DEFAULT_WAKE_PATH.0).collect();
    assert_eq!(wakes, timers);
}

#[test]
fn a_thread_enqueued_after_another_was_picked_is_tried_after_it() {
    // One core's cfs_tasks, worked by hand: A, C and B (slots 0, 1, 2) arrive at 0 on core 0
    // (pinned there while the schedule is driven), slice 1.4 ms, tick 4 ms. Picks: A at 0,
    // C at 4 ms, B at 8 ms (a new thread's deadline is half a slice away: 0.7 ms). B blocks
    // at 9 ms, eligible (vruntimes 4, 4, 1 ms: V = 3 ms), so it leaves the queue at once; A
    // (deadline 5.4 ms, queued before C) runs 9-13 ms, then C. B wakes at 14 ms. Waiting: A,
    // last picked at 9 ms, and B, last picked at 8 ms but enqueued at 14 ms: the kernel put B
    // at the head of cfs_tasks (account_entity_enqueue), A is the tail, so detach_tasks
    // tries A first. By last pick alone B would be first.
    let sc = Scenario::parse(
        "t.toml",
        "cores = 2\n[policy]\nname = \"eevdf\"\n[[process]]\nname = \"p\"\nthreads = 3\n",
    )
    .expect("scenario");
    let mut threads: Vec<SimThread> = (0..3).map(|i| thread(i, 1024)).collect();
    for t in &mut threads {
        t.affinity = Some(vec![0]);
    }
    let mut d = Eevdf::new(sc.policy(), 2);
    let mut running = vec![None, None];
    let ms = |x: u64| x * 1_000_000;
    for s in 0..3 {
        d.enqueue(&ctx_at(0, &threads, &running, &sc), s, Enqueue::New);
    }
    // Picks at 0, 4 and 8 ms, each slice ending at the next tick.
    let mut now = 0;
    for (want, ran) in [(0, 4), (1, 4), (2, 1)] {
        let got = d.pick_next(&ctx_at(now, &threads, &running, &sc), 0);
        assert_eq!(got, Some(want), "pick at {now} ns");
        threads[want as usize].state = ThreadState::Running(0);
        running[0] = Some(want);
        now += ms(ran);
        d.charge(
            &ctx_at(now, &threads, &running, &sc),
            want,
            0,
            Nanos(ms(ran)),
        );
        running[0] = None;
        if want == 2 {
            threads[2].state = ThreadState::Blocked;
        } else {
            threads[want as usize].state = ThreadState::Ready;
            d.enqueue(
                &ctx_at(now, &threads, &running, &sc),
                want,
                Enqueue::Expired,
            );
        }
    }
    // 9 ms: B has left (not delayed); A runs to 13 ms, then C.
    assert_eq!(
        d.pick_next(&ctx_at(ms(9), &threads, &running, &sc), 0),
        Some(0)
    );
    assert_eq!(d.ents[2].at, At::Off);
    threads[0].state = ThreadState::Running(0);
    running[0] = Some(0);
    d.charge(&ctx_at(ms(13), &threads, &running, &sc), 0, 0, Nanos(ms(4)));
    threads[0].state = ThreadState::Ready;
    running[0] = None;
    d.enqueue(
        &ctx_at(ms(13), &threads, &running, &sc),
        0,
        Enqueue::Expired,
    );
    assert_eq!(
        d.pick_next(&ctx_at(ms(13), &threads, &running, &sc), 0),
        Some(1)
    );
    threads[1].state = ThreadState::Running(0);
    running[0] = Some(1);
    // 14 ms: B wakes on core 0.
    threads[2].state = ThreadState::Ready;
    d.enqueue(&ctx_at(ms(14), &threads, &running, &sc), 2, Enqueue::Woken);
    assert_eq!(d.ents[2].core, 0);
    for t in &mut threads {
        t.affinity = None;
    }
    // Both are cold at 14 ms (A stopped at 13, B at 9: more than 0.5 ms ago).
    let ctx = ctx_at(ms(14), &threads, &running, &sc);
    assert_eq!(d.movable(&ctx, 0, 1), [0, 2]);
    assert_eq!(d.first_movable(&ctx, 0, 1), Ok(0));
}

/// The start of each turn on the (single) core of `sc`'s simulation: (time, thread), a
/// thread picked again right after its own slice is the same turn.
fn turns(sc: &Scenario) -> Vec<(u64, Slot)> {
    let (_, log, _) = simulate_report(sc, true).expect("sim");
    let mut runs: Vec<(u64, Slot)> = Vec::new();
    for e in &log.expect("trace kept").events {
        if let schedkit_core::trace::Event::Dispatch { t, slot, .. } = *e {
            if runs.last().is_none_or(|&(_, s)| s != slot) {
                runs.push((t.0, slot));
            }
        }
    }
    runs
}

#[test]
fn a_thread_that_reads_its_clock_loses_its_core_when_another_is_the_pick() {
    // One core, slice 1 ms, tick 10 ms. H (weight 1024, no burst: reads no clock) and B
    // (weight 2048, a 30 ms burst: schedkit's workload reads its CPU clock, and each read is
    // an `update_curr`). Vruntimes in ms:
    //   0: both new at V = 0; deadlines half a slice away: H 0.5, B 0.25 (vslice 0.5). B,
    //      picked and protected to 0.25, reaches it after 0.5 ms of real time, noticed at
    //      once (a clock read): new deadline 0.75; V = (2048 x 0.25) / 3072 = 0.167, B is
    //      not eligible: H.
    //   0.5: H protected to 0.5 reaches it at 1 ms, but reads no clock: the 10 ms tick.
    //   10: v_H = 9.5, new deadline 10.5; V = 3.333: B (0.25, deadline 0.75), protected to
    //      0.75: 1 ms. At 11: new deadline 1.25, picked again (still the pick), so not
    //      protected: every clock read reschedules from now on. B runs while it is the
    //      pick: V = 3.667 + t/3 and v_B = 0.75 + t/2, so B stops being eligible (and H,
    //      v 9.5, becomes so) at t = 17.5 ms: 28.5 ms, between ticks (the 20 ms tick
    //      re-picks B). A protected B (picked anew at 11 ms) would keep the core to 30 ms.
    //   28.5: H, protected to 10.5 (1 ms), runs to the 30 ms tick.
    let sc = Scenario::parse(
        "t.toml",
        "cores = 1\n[policy]\nname = \"eevdf\"\nbase_slice = \"1ms\"\ntick = \"10ms\"\n\
         [run]\nhorizon = \"30ms\"\n[[process]]\nname = \"H\"\n\
         [[process]]\nname = \"B\"\nweight = 2048\nburst = \"30ms\"\n",
    )
    .expect("scenario");
    let runs = turns(&sc);
    let near = |t: u64, ms: f64| (t as f64 - ms * 1e6).abs() < 10.0;
    let want = [(0.0, 1), (0.5, 0), (10.0, 1), (28.5, 0)];
    assert!(runs.len() >= want.len(), "{runs:?}");
    for (&(t, s), &(ms, ws)) in runs.iter().zip(&want) {
        assert!(near(t, ms) && s == ws, "{runs:?}");
    }
}

#[test]
fn a_fifo_class_thread_runs_first_and_preempts_a_fair_one_at_once() {
    // One core: a fair hog H and a SCHED_FIFO thread R running 0.1 ms every 2 ms, both new
    // at 0. The real-time class is picked first: R 0-0.1 ms, then H. R's timer at 2.1 ms,
    // its wake-up path 8.7 us: queued at 2.1087 ms, it preempts H at once, runs 0.1 ms, and
    // H resumes at 2.2087; the next cycle starts 2.1087 ms later. The same under `cfs`, which
    // has no wake-up path.
    for (policy, path) in [("eevdf", DEFAULT_WAKE_PATH.0), ("cfs", 0)] {
        let sc = Scenario::parse(
            "t.toml",
            &format!(
                "cores = 1\n[policy]\nname = \"{policy}\"\n[run]\nhorizon = \"5ms\"\n\
                 [[process]]\nname = \"H\"\n[[process]]\nname = \"R\"\nclass = \"fifo\"\n\
                 pattern = [{{ run = \"100us\" }}, {{ sleep = \"2ms\" }}]\n"
            ),
        )
        .expect("scenario");
        let runs = turns(&sc);
        let cycle = 2_100_000 + path;
        let want = [
            (0, 1),
            (100_000, 0),
            (cycle, 1),
            (cycle + 100_000, 0),
            (2 * cycle, 1),
            (2 * cycle + 100_000, 0),
        ];
        assert_eq!(runs, want, "{policy}");
    }
}

impl Eevdf {
    /// The vlag of every thread on `core` now (tests: the lags at each pick).
    pub(super) fn lags(&mut self, core: usize) -> Vec<(Slot, i64)> {
        let v_avg = self.avg_vruntime(core);
        let mut v: Vec<(Slot, i64)> = (self.rqs[core].tree.iter().map(|k| k.2))
            .chain(self.rqs[core].curr)
            .map(|s| (s, v_avg - self.ents[s as usize].vruntime))
            .collect();
        v.sort_unstable();
        v
    }
}

#[test]
fn a_real_time_load_lowers_a_cores_capacity_in_the_kernels_integers() {
    // calculate_imbalance by hand for 5 against 4 nice-0 threads of one group (root loads
    // 1024 x 5/9 = 568 and 1024 x 4/9 = 455), both overloaded, imbalance_pct 117.
    let sc =
        Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"eevdf\"\n").expect("scenario");
    let mut d = Eevdf::new(sc.policy(), 2);
    d.loads = vec![568, 455];
    // Equal capacities: avg = 1023 x 1024 / 2048 = 511; min(568 - 511, 511 - 455) = 56. A
    // thread's task_h_load is 113; halved once (one failed balance) it fits: 56 <= 56.
    assert_eq!(d.imbalance(0, 1, 117), Some(56));
    // Core 1 (the puller) runs a real-time thread 20 % of the time: its PELT utilisation
    // after 500 ms of 2 ms in 10 swings about 205 (188 at the end of a sleep), capacity about
    // 836. Its avg_load is then 455 x 1024 / 836 = 557, and the busiest's 568 is not
    // imbalance_pct (17 %) above that: balanced, nothing moves (without the real-time load
    // 568 > 1.17 x 455 = 532).
    for i in 0..50u64 {
        let t = i * 10_000_000;
        d.rqs[1].rt_util.set(t, true);
        d.rqs[1].rt_util.set(t + 2_000_000, false);
    }
    d.now = 500_000_000;
    let cap = d.capacity(1);
    assert!((826..=846).contains(&cap), "capacity {cap}");
    d.caps = vec![d.capacity(0), cap];
    assert_eq!(d.imbalance(0, 1, 117), None);
    // The same load on the busiest core makes its threads look heavier: it gives more.
    d.loads = vec![455, 568];
    let more = d.imbalance(1, 0, 117).expect("an imbalance");
    assert!(more > 56, "{more}");
}

#[test]
fn a_real_time_thread_beside_greedy_threads_stops_their_shuttling() {
    // Measured on Linux 6.18 (docs/results/fidelity.md): one greedy thread and eight more of
    // one job on two CPUs shuttle one thread back and forth (50 migrations in 3 s); with a
    // SCHED_FIFO thread taking 2 ms in every 10 on CPU 0, CPU 0's capacity drops to about
    // 820 and the kernel keeps 4 threads there and 5 on the other (2 migrations in 3 s;
    // 1 with 8 %, 41-51 with 0.5-2 %). The model: 51 without it, 1 with it.
    let text = |rt: &str| {
        format!(
            "cores = 2\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"3s\"\n\
             [[process]]\nname = \"one\"\n[[process]]\nname = \"eight\"\nthreads = 8\n{rt}"
        )
    };
    let migrations = |r: &schedkit_core::Report| {
        r.threads
            .iter()
            .filter(|t| t.process != "rt")
            .map(|t| t.migrations)
            .sum::<u64>()
    };
    let free = run(&text(""));
    assert!(migrations(&free) >= 40, "{}", migrations(&free));
    let loaded = run(&text(
        "[[process]]\nname = \"rt\"\nclass = \"fifo\"\ncpus = [0]\n\
         pattern = [{ run = \"2ms\" }, { sleep = \"8ms\" }]\n",
    ));
    assert!(migrations(&loaded) <= 3, "{}", migrations(&loaded));
}

#[test]
fn a_busy_core_with_spare_capacity_pulls_nothing() {
    // group_has_capacity with capacity 1024, imbalance_pct 117: spare while the runnable
    // average stays within 117 % of the capacity and the utilisation below 1024 x 100 / 117
    // (875.2).
    let sc =
        Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"eevdf\"\n").expect("scenario");
    let mut d = Eevdf::new(sc.policy(), 2);
    d.rqs[0].nr = 1;
    d.rqs[0].runnable.load = 1024;
    d.rqs[0].util.load = 600;
    assert!(d.has_spare(0));
    d.rqs[0].util.load = 875;
    assert!(d.has_spare(0));
    d.rqs[0].util.load = 876;
    assert!(!d.has_spare(0));
    // A runnable average over 1.17 x the capacity: no spare capacity whatever the util.
    d.rqs[0].util.load = 600;
    d.rqs[0].runnable.load = 1200;
    assert!(!d.has_spare(0));
}
