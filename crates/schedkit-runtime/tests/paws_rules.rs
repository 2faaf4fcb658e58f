//! Rules A-F of seed 001 (section 4), one scripted scenario each, on the pure dispatcher
//! (`paws::queues::Sched`): every decision is checked step by step, no clock involved.

use schedkit_runtime::paws::queues::{Kind, Mode, Notify, Origin, Sched};

type S = Sched<&'static str>;

/// Releases a job labelled `l` with deadline `d`.
fn release(s: &mut S, l: &'static str, d: u64) -> Notify {
    let it = s.item(d, Kind::Job, l);
    s.ready(it)
}

/// The job running on `core` opens a parallel region of threads `ls`, deadline `d`.
fn spawn(s: &mut S, core: usize, d: u64, ls: &[&'static str]) -> Vec<Notify> {
    let items = ls.iter().map(|l| s.item(d, Kind::Thread, *l)).collect();
    s.spawn(core, items)
}

fn pick(s: &mut S, core: usize) -> Option<(&'static str, Origin)> {
    s.pick(core).map(|(it, o)| (it.payload, o))
}

fn labels(s: &mut S, core: usize, n: usize) -> Vec<&'static str> {
    (0..n)
        .map(|_| {
            let (l, _) = pick(s, core).expect("work");
            s.stopped(core);
            l
        })
        .collect()
}

#[test]
fn rule_a_one_global_queue_by_deadline_ties_fifo() {
    let mut s = S::new(Mode::Paws, 1, 1);
    // An idle core gets the first release directly.
    assert_eq!(release(&mut s, "j0", 5), Notify::Wake(0));
    assert_eq!(pick(&mut s, 0), Some(("j0", Origin::Global)));
    // Later deadlines than the running j0: queued, no preemption.
    assert_eq!(release(&mut s, "j1", 30), Notify::Nothing);
    assert_eq!(release(&mut s, "j2", 20), Notify::Nothing);
    assert_eq!(release(&mut s, "j3", 20), Notify::Nothing);
    assert_eq!(release(&mut s, "j4", 10), Notify::Nothing);
    s.stopped(0);
    // Non-decreasing deadlines; j2 before j3 (same deadline, released first).
    assert_eq!(labels(&mut s, 0, 4), vec!["j4", "j2", "j3", "j1"]);
    assert_eq!(pick(&mut s, 0), None);
    assert!(s.is_idle(0));
}

#[test]
fn rule_b_parallel_threads_go_to_the_local_queue_of_the_jobs_core() {
    let mut s = S::new(Mode::Paws, 2, 1);
    release(&mut s, "j", 10);
    release(&mut s, "k", 50);
    assert_eq!(pick(&mut s, 0), Some(("j", Origin::Global)));
    assert_eq!(pick(&mut s, 1), Some(("k", Origin::Global)));
    release(&mut s, "late", 90);
    spawn(&mut s, 0, 10, &["t1", "t2", "t3"]);
    // Not in the global queue (only the queued job is), all in core 0's deque for deadline 10.
    assert_eq!(s.global_seqs().len(), 1);
    assert_eq!(s.local_seqs(0).len(), 1);
    assert_eq!(s.local_seqs(0)[0].0, 10);
    assert_eq!(s.local_seqs(0)[0].1.len(), 3);
    assert!(s.local_seqs(1).is_empty());
}

#[test]
fn rule_c_bottom_of_the_highest_priority_local_deque_first() {
    let mut s = S::new(Mode::Paws, 1, 1);
    release(&mut s, "j20", 20);
    pick(&mut s, 0);
    spawn(&mut s, 0, 20, &["a1", "a2"]);
    s.stopped(0); // j20 waits for its region
    assert_eq!(pick(&mut s, 0), Some(("a2", Origin::Local)));
    // An earlier-deadline job preempts a2, which goes back to the bottom of its deque (ii).
    assert_eq!(release(&mut s, "j10", 10), Notify::Preempt(0));
    let a2 = s.item(20, Kind::Thread, "a2");
    s.preempted(0, a2);
    assert_eq!(pick(&mut s, 0), Some(("j10", Origin::Global)));
    spawn(&mut s, 0, 10, &["b1", "b2"]);
    s.stopped(0);
    // Two deques on the core (deadlines 10 and 20): the earliest one, bottom first.
    let keys: Vec<u64> = s.local_seqs(0).iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, vec![10, 20]);
    assert_eq!(labels(&mut s, 0, 2), vec!["b2", "b1"]);
    // The emptied deque is gone at once.
    let keys: Vec<u64> = s.local_seqs(0).iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, vec![20]);
    assert_eq!(labels(&mut s, 0, 2), vec!["a2", "a1"]);
    assert!(s.local_seqs(0).is_empty());
}

#[test]
fn rule_d_global_queue_before_stealing() {
    let mut s = S::new(Mode::Paws, 2, 1);
    release(&mut s, "j", 10);
    release(&mut s, "k", 40);
    assert_eq!(pick(&mut s, 0).unwrap().0, "j");
    assert_eq!(pick(&mut s, 1).unwrap().0, "k");
    spawn(&mut s, 0, 10, &["t1", "t2"]);
    release(&mut s, "g", 60); // no preemption: later than both
    s.stopped(1); // core 1 finished k: its local queue is empty
                  // Core 0 has stealable threads with an earlier deadline, but rule D comes before E.
    assert_eq!(pick(&mut s, 1), Some(("g", Origin::Global)));
}

#[test]
fn rule_e_steal_the_top_of_the_highest_priority_deque_of_a_core_with_work() {
    let mut s = S::new(Mode::Paws, 3, 7);
    assert_eq!(release(&mut s, "j20", 20), Notify::Wake(0));
    assert_eq!(release(&mut s, "k", 15), Notify::Wake(1));
    assert_eq!(release(&mut s, "m", 16), Notify::Wake(2));
    assert_eq!(pick(&mut s, 0).unwrap().0, "j20");
    assert_eq!(pick(&mut s, 1).unwrap().0, "k");
    assert_eq!(pick(&mut s, 2).unwrap().0, "m");
    // j20's region: no idle core to wake; j20 waits, core 0 runs x2 (bottom).
    assert!(spawn(&mut s, 0, 20, &["x1", "x2"]).is_empty());
    s.stopped(0);
    assert_eq!(pick(&mut s, 0), Some(("x2", Origin::Local)));
    // j10 preempts x2 (deadline 20, the latest running), which goes back to its deque.
    assert_eq!(release(&mut s, "j10", 10), Notify::Preempt(0));
    let x2 = s.item(20, Kind::Thread, "x2");
    s.preempted(0, x2);
    assert_eq!(pick(&mut s, 0), Some(("j10", Origin::Global)));
    spawn(&mut s, 0, 10, &["a", "b", "c"]);
    let keys: Vec<u64> = s.local_seqs(0).iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, vec![10, 20]);
    // Cores 2 then 1 finish; nothing local, nothing global: they steal from core 0 (the only
    // core with threads), the top (oldest) of its highest-priority deque.
    s.stopped(2);
    assert_eq!(pick(&mut s, 2), Some(("a", Origin::Stolen)));
    s.stopped(1);
    assert_eq!(pick(&mut s, 1), Some(("b", Origin::Stolen)));
    // The owner keeps taking from the bottom; the emptied deque disappears.
    s.stopped(0);
    assert_eq!(pick(&mut s, 0), Some(("c", Origin::Local)));
    assert_eq!(s.local_seqs(0).len(), 1);
    s.stopped(0);
    assert_eq!(pick(&mut s, 0), Some(("x2", Origin::Local)));
}

#[test]
fn rule_f_and_i_to_iii_where_a_preempted_entry_goes() {
    let mut s = S::new(Mode::Paws, 2, 1);
    // Core 0 runs job j (d 30) which spawns; core 1 steals one of its threads.
    release(&mut s, "j", 30);
    release(&mut s, "k", 40);
    assert_eq!(pick(&mut s, 0).unwrap().0, "j");
    assert_eq!(pick(&mut s, 1).unwrap().0, "k");
    spawn(&mut s, 0, 30, &["t1", "t2", "t3"]);
    s.stopped(0);
    s.stopped(1);
    assert_eq!(pick(&mut s, 0), Some(("t3", Origin::Local)));
    assert_eq!(pick(&mut s, 1), Some(("t1", Origin::Stolen)));
    // k went nowhere: it "finished"; the global queue is empty.
    assert!(s.global_seqs().is_empty());

    // A release with an earlier deadline preempts the core with the latest deadline. Both
    // run deadline 30: the tie goes to the lowest index, core 0.
    assert_eq!(release(&mut s, "r1", 5), Notify::Preempt(0));
    assert!(s.preempt_requested(0));
    // (ii) the locally generated thread t3 goes back to the bottom of its deque...
    let t3 = s.item(30, Kind::Thread, "t3");
    let t3 = schedkit_runtime::paws::queues::Item {
        spawned_on: 0,
        ..t3
    };
    s.preempted(0, t3);
    assert_eq!(s.local_seqs(0)[0].1.len(), 2);
    // ...and the core runs the released job, not its local thread (hand-over).
    assert_eq!(pick(&mut s, 0), Some(("r1", Origin::Global)));

    // Rule F / (iii): the stolen thread t1 on core 1 (deadline 30, the latest) is preempted
    // by r2 and goes to the global queue, not back to core 0's deque.
    assert_eq!(release(&mut s, "r2", 6), Notify::Preempt(1));
    let t1 = s.item(30, Kind::Thread, "t1");
    s.preempted(1, t1);
    assert_eq!(s.local_seqs(0)[0].1.len(), 2);
    assert_eq!(s.global_seqs().len(), 1);
    assert_eq!(pick(&mut s, 1), Some(("r2", Origin::Global)));

    // (i) a preempted job goes back to the global queue.
    s.stopped(0);
    assert_eq!(pick(&mut s, 0), Some(("t3", Origin::Local)));
    s.stopped(0);
    s.stopped(1);
    let mut s2 = S::new(Mode::Paws, 1, 1);
    release(&mut s2, "long", 100);
    pick(&mut s2, 0);
    assert_eq!(release(&mut s2, "short", 10), Notify::Preempt(0));
    let long = s2.item(100, Kind::Job, "long");
    s2.preempted(0, long);
    assert_eq!(s2.global_seqs().len(), 1);
    assert_eq!(labels(&mut s2, 0, 2), vec!["short", "long"]);
    // No preemption when the new deadline is not earlier.
    let mut s3 = S::new(Mode::Paws, 1, 1);
    release(&mut s3, "a", 10);
    pick(&mut s3, 0);
    assert_eq!(release(&mut s3, "b", 10), Notify::Nothing);
}

#[test]
fn a_second_earlier_release_displaces_a_pending_hand_over() {
    let mut s = S::new(Mode::Paws, 1, 1);
    release(&mut s, "run", 100);
    pick(&mut s, 0);
    assert_eq!(release(&mut s, "p1", 50), Notify::Preempt(0));
    // Already asked to preempt: no second request, but the earlier job takes the slot.
    assert_eq!(release(&mut s, "p2", 20), Notify::Nothing);
    assert_eq!(s.global_seqs().len(), 1); // p1 back in the global queue
    let run = s.item(100, Kind::Job, "run");
    s.preempted(0, run);
    assert_eq!(labels(&mut s, 0, 3), vec!["p2", "p1", "run"]);
}

#[test]
fn gedf_puts_parallel_threads_in_the_global_queue() {
    let mut s = S::new(Mode::Gedf, 2, 1);
    release(&mut s, "j", 10);
    release(&mut s, "k", 50);
    pick(&mut s, 0);
    pick(&mut s, 1);
    // Threads of j (deadline 10) preempt k (deadline 50) on core 1 like jobs would.
    let n = spawn(&mut s, 0, 10, &["t1", "t2"]);
    assert_eq!(n, vec![Notify::Preempt(1)]);
    assert!(s.local_seqs(0).is_empty());
    assert_eq!(s.global_seqs().len(), 1);
    let k = s.item(50, Kind::Job, "k");
    s.preempted(1, k);
    assert_eq!(pick(&mut s, 1), Some(("t1", Origin::Global)));
    s.stopped(0);
    assert_eq!(labels(&mut s, 0, 2), vec!["t2", "k"]);
}

#[test]
fn ws_is_fifo_without_priorities_or_preemption() {
    let mut s = S::new(Mode::Ws, 2, 1);
    release(&mut s, "j", 50);
    release(&mut s, "k", 60);
    pick(&mut s, 0);
    pick(&mut s, 1);
    // An earlier deadline does not preempt; releases are served in release order.
    assert_eq!(release(&mut s, "late", 90), Notify::Nothing);
    assert_eq!(release(&mut s, "urgent", 1), Notify::Nothing);
    // One deque per core whatever the deadlines.
    spawn(&mut s, 0, 50, &["a1", "a2"]);
    spawn(&mut s, 0, 5, &["b1"]);
    assert_eq!(s.local_seqs(0).len(), 1);
    s.stopped(0);
    s.stopped(1);
    // Owner: bottom (LIFO); thief: top; then the FIFO global queue.
    assert_eq!(pick(&mut s, 0), Some(("b1", Origin::Local)));
    assert_eq!(pick(&mut s, 1), Some(("late", Origin::Global)));
    s.stopped(0);
    assert_eq!(pick(&mut s, 0), Some(("a2", Origin::Local)));
    s.stopped(1);
    assert_eq!(pick(&mut s, 1), Some(("urgent", Origin::Global)));
    s.stopped(1);
    assert_eq!(pick(&mut s, 1), Some(("a1", Origin::Stolen)));
}

#[test]
fn an_awake_core_with_local_threads_is_not_free_for_an_earlier_release() {
    let mut s = S::new(Mode::Paws, 2, 1);
    release(&mut s, "bg", 50);
    release(&mut s, "other", 60);
    assert_eq!(pick(&mut s, 0).unwrap().0, "bg");
    assert_eq!(pick(&mut s, 1).unwrap().0, "other");
    spawn(&mut s, 0, 50, &["t1", "t2"]);
    // bg waits for its region: core 0 is awake, runs nothing yet, but has local threads.
    s.stopped(0);
    // A short job must not wait in the global queue behind them (rule C would run t2 first):
    // the core with the latest effective deadline (core 1: 60) gets it.
    assert_eq!(release(&mut s, "short", 5), Notify::Preempt(1));
    // Against core 0's best local deadline (50) when that is the latest.
    let mut s = S::new(Mode::Paws, 2, 1);
    release(&mut s, "bg", 50);
    release(&mut s, "other", 20);
    pick(&mut s, 0);
    pick(&mut s, 1);
    spawn(&mut s, 0, 50, &["t1", "t2"]);
    s.stopped(0);
    assert_eq!(release(&mut s, "short", 5), Notify::Nothing);
    assert_eq!(pick(&mut s, 0), Some(("short", Origin::Global)));
    assert!(s.global_seqs().is_empty());
}

#[test]
fn a_waiting_job_runs_its_own_bottom_thread_inline_exactly_when_pick_would() {
    let mut s = S::new(Mode::Paws, 2, 1);
    release(&mut s, "j", 50);
    release(&mut s, "k", 40);
    pick(&mut s, 0);
    pick(&mut s, 1);
    spawn(&mut s, 0, 50, &["t1", "t2", "t3"]);
    let mine =
        |it: &schedkit_runtime::paws::queues::Item<&'static str>| it.payload.starts_with('t');
    // Rule C's pick: the bottom of the best deque, as a local thread.
    let it = s.take_inline(0, mine).expect("t3 is next");
    assert_eq!(it.payload, "t3");
    let r = s.running(0).unwrap();
    assert_eq!((r.kind, r.origin), (Kind::Thread, Origin::Local));
    // Preempted while inline: back to the bottom of its deque (rule ii), not the global queue.
    assert_eq!(release(&mut s, "urgent", 5), Notify::Preempt(0));
    let it2 = s.item(50, Kind::Thread, "t3 (inline)");
    s.preempted(0, it2);
    assert_eq!(s.local_seqs(0)[0].1.len(), 3);
    assert!(s.global_seqs().is_empty());
    assert_eq!(pick(&mut s, 0), Some(("urgent", Origin::Global)));
    s.stopped(0);
    assert_eq!(pick(&mut s, 0), Some(("t3 (inline)", Origin::Local)));
    // Nothing inline while a hand-over is pending for this core (it must switch to it).
    let mut s = S::new(Mode::Paws, 1, 1);
    release(&mut s, "j", 50);
    pick(&mut s, 0);
    spawn(&mut s, 0, 50, &["t1", "t2"]);
    assert_eq!(release(&mut s, "urgent", 5), Notify::Preempt(0));
    assert!(s.take_inline(0, mine).is_none());
    // Nor when the bottom of the best deque is not the job's (an earlier deadline's thread,
    // or one `accept` refuses): the job waits and `pick` decides.
    let mut s = S::new(Mode::Paws, 1, 1);
    release(&mut s, "j", 50);
    pick(&mut s, 0);
    spawn(&mut s, 0, 50, &["t1"]);
    spawn(&mut s, 0, 20, &["x1"]);
    assert!(s.take_inline(0, mine).is_none());
    assert_eq!(s.take_inline(0, |_| true).unwrap().payload, "x1");
}

#[test]
fn a_region_whose_core_takes_one_thread_wakes_no_core_for_it() {
    let mut s = S::new(Mode::Paws, 3, 1);
    release(&mut s, "j", 50);
    pick(&mut s, 0);
    // Two idle cores, one thread kept by core 0: nobody is woken.
    let one = vec![s.item(50, Kind::Thread, "t1")];
    assert!(s.spawn_keeping(0, one, 1).is_empty());
    // Three threads, one kept: two thieves.
    let three = (0..3).map(|_| s.item(50, Kind::Thread, "u")).collect();
    assert_eq!(
        s.spawn_keeping(0, three, 1),
        vec![Notify::Wake(1), Notify::Wake(2)]
    );
}
