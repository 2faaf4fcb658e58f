//! The EEVDF model: the fair class of Linux 6.6 and later (checked against the behaviour of
//! 6.6 through 6.18), which replaced the CFS of seed 004. Earliest Eligible Virtual Deadline
//! First is Stoica and Abdel-Wahab's algorithm (1995); the kernel's version is in
//! `kernel/sched/fair.c`, and this file follows its functions by name:
//!
//! - **`update_curr`**: a running thread's vruntime grows by `ran * 1024 / weight`, exactly
//!   (the remainder is carried, as in the `cfs` model).
//! - **`avg_vruntime` / `entity_eligible`**: V is the weight-averaged vruntime of the queue
//!   (waiting threads, delayed ones and the running one). A thread is eligible when its
//!   vruntime is at most V, i.e. its lag `V - v` is not negative. The test is exact in
//!   integers: `sum(w * v) >= v_i * sum(w)` (128-bit sums, so no re-basing is needed).
//! - **`pick_eevdf`**: the eligible thread with the earliest virtual deadline; equal deadlines
//!   go to the thread queued first (the kernel's rbtree puts an equal key to the right).
//! - **`update_deadline`**: `deadline = vruntime + slice * 1024 / weight` once the vruntime
//!   reaches the deadline. The slice is `sysctl_sched_base_slice` (`[policy] base_slice`,
//!   0.70 ms since Linux 6.15, 0.75 ms before) x `1 + ilog2(min(cores, 8))` (the kernel's log
//!   scaling of the boot-time CPU count: 1.4 ms on 2 CPUs, 2.8 ms on 8 or more).
//! - **When a slice end is noticed** (`update_curr`): without HRTICK (off by default) at the
//!   next scheduler tick (`tick`, default 4 ms, HZ = 250), or at any other `update_curr` of
//!   the running thread. schedkit's `spin` workload in a thread with a `burst` or a `pattern`
//!   reads its own CPU clock every few microseconds, which the kernel serves with
//!   `task_sched_runtime` -> `update_curr`: such a thread's slice ends exactly at its
//!   deadline; other threads' at the first tick at or after it. (Traced on 6.18: a patterned
//!   thread is switched out 1.39-1.40 ms into its turns, between ticks; a hog at ticks.)
//! - **`place_entity`**: a new or waking thread starts at `V - lag * (W + w) / W` (`W` the
//!   queue's weight before it joins: PLACE_LAG keeps its lag across the sleep, scaled so that
//!   adding it does not move V by more than its own lag); a new thread has lag 0 and a
//!   deadline half a slice away (PLACE_DEADLINE_INITIAL). A thread's lag is clamped to
//!   `(max(2 x slice, tick)) * 1024 / w` when it leaves (`update_entity_lag`). V includes
//!   the running thread's time up to the instant of the placement (`update_curr` first).
//! - **RUN_TO_PARITY** (`set_protect_slice`, `protect_slice`): a thread picked to run keeps the
//!   core until its deadline while it stays eligible; with equal slices (schedkit has no
//!   `sched_attr.sched_runtime` slices) the protected vruntime (`vprot`) is the deadline it
//!   was picked with. A thread picked again when its slice ends (`pick_next_task_fair` with
//!   `prev == p` calls no `set_next_entity`) is not protected anew, so from then on every
//!   `update_curr` reschedules (6.17 and later: `resched || !protect_slice(curr)`): at each
//!   tick, at each enqueue beside it (a wake-up), and, for a thread that reads its clock, at
//!   once when another thread becomes the pick (`lose_in`).
//! - **Wakeup preemption** (`check_preempt_wakeup_fair`): when a thread is placed on a busy
//!   queue, the running one is preempted if `pick_eevdf` (with protection) now returns the
//!   newcomer, i.e. the running thread is no longer eligible and the newcomer has the
//!   earliest eligible deadline; a running thread that is not protected is rescheduled by the
//!   enqueue's `update_curr`, and the next pick decides.
//! - **The wake-up path** (`[policy] wake_path`, default 8.7 us): a sleeper joins its queue
//!   that long after its timer (the machine's median, which `experiment fidelity` measures),
//!   so its wake-up latency includes it and its cycle drifts against the tick.
//! - **DELAY_DEQUEUE and DELAY_ZERO** (6.12 and later): a thread that blocks while not eligible
//!   stays in the queue ("delayed"), still counted in V, until it would be picked (then it
//!   leaves, its positive lag cut to 0) or wakes (then it stays where it is: a positive lag it
//!   gained meanwhile is dropped and it is placed afresh at V).
//! - **Per-core queues, placement and balancing** (`select_task_rq_fair`, the fork path,
//!   periodic, idle and newidle balance, what decides a migration): stated in
//!   `eevdf_balance.rs`'s module docs, beside the code; newidle balance's proportional
//!   randomisation (NI_RANDOM, 6.19 and 6.18.5 and later) in `eevdf_newidle.rs`.
//! - **One task group** (`[policy] task_group`, default on; `eevdf_group.rs`): the threads
//!   are one group's, as a `schedkit run` job's are (schedkit's session autogroup), so a
//!   core's load for the balancer and the fork path is the group entity's share of the
//!   group's weight there, recomputed at that core's own updates, and a thread's is its
//!   share of that (`task_h_load`).
//!
//! The placement and balancing code is in `eevdf_balance.rs`, PELT in `eevdf_pelt.rs`, the
//! task group and the spawner in `eevdf_group.rs`, V, eligibility and the pick in
//! `eevdf_pick.rs`.
//!
//! # Left out
//! **Active balancing** (`need_active_balance`, stopping a running thread to push it). On one
//! LLC with one-CPU groups, a core with spare capacity against an overloaded one is a
//! `migrate_task` imbalance (`calculate_imbalance` takes `migrate_util` only in domains that
//! do not share the LLC; `sibling_imbalance` counts tasks), so after more than
//! `cache_nice_tries + 2` failed periodic balances of an idle core (its waiting candidates
//! cache-hot or pinned each time) the kernel may push the busiest core's running thread; the
//! model never does, and only waiting threads move. Its idle cores pull any waiting thread,
//! which is what `migrate_task` does. Of PELT: utilisation and runnable averages outside the
//! fork path (`find_dst_cpu`), partial periods, `LB_MIN`; newidle pulls rank queues by runnable weight, not by
//! PELT load; newidle balance is never skipped for a short `avg_idle`; no NUMA, SMT or capacity asymmetry; one task
//! group at most (`eevdf_group.rs` says what of it); the capacity real-time work takes
//! (`scale_rt_capacity`: tried, it broke greedy-1-8's migrations, docs/results/fidelity.md);
//! no custom slices (`sched_attr`),
//! PREEMPT_SHORT or NEXT_BUDDY (off by default); no `sched_yield`. Ticks of all cores are
//! aligned at multiples of `tick`.
//!
//! # Invariants
//! Every runnable thread is in exactly one queue (its tree, or as its `curr`); a delayed thread
//! is in its tree but not runnable. A queue's `sum_w` and `sum_wv` are the sums of `w` and
//! `w * vruntime` over its tree; `load` and `nr` count runnable threads (curr included).
//!
//! # Cost
//! Enqueue, pick and charge are O(log n) (a timeline ordered by deadline, `eevdf_queue.rs`:
//! O(1) for the common deadline later than every queued one); the pick scans past ineligible
//! threads with earlier deadlines, which with mixed weights are few.

use crate::policy::{Ctx, Dispatcher, Enqueue, ThreadState};
use schedkit_core::scenario::PolicySpec;
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

#[path = "eevdf_balance.rs"]
mod balance;
use balance::min_interval;
#[cfg(test)]
use balance::{busy_rounds, Lb, MAX_PINNED_INTERVAL};
#[path = "eevdf_pelt.rs"]
mod pelt;
use super::rt_class::{is_rt, RtClass};
use pelt::Avg;
#[path = "eevdf_group.rs"]
mod group;
use group::GroupEnt;
#[path = "eevdf_newidle.rs"]
mod newidle;
use newidle::NewIdle;
#[path = "eevdf_pick.rs"]
mod pick;
#[path = "eevdf_queue.rs"]
mod queue;
#[path = "eevdf_slice.rs"]
mod slice;
use queue::Timeline;

const NICE_0_LOAD: u64 = 1024;

/// `sysctl_sched_migration_cost`: a thread that ran less than this long ago is cache-hot
/// (`task_hot`) and the balancer leaves it where it is.
const MIGRATION_COST: u64 = 500_000;

/// `sd->cache_nice_tries` of a one-LLC domain (`sd_init`): once more balances than this have
/// failed in a row, cache-hot threads may move too (`can_migrate_task`).
const CACHE_NICE_TRIES: u32 = 1;

/// `sd->imbalance_pct` of a one-LLC domain (`sd_init`), used when the scenario keeps the
/// spec's default 125 (seed 004's 2.6.24 value, which the `cfs` model reads).
const IMBALANCE_PCT_LLC: u32 = 117;
const SPEC_DEFAULT_IMBALANCE_PCT: u32 = 125;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Off,
    Queued,
    Running,
    /// Blocked but still in its tree (DELAY_DEQUEUE).
    Delayed,
}

#[derive(Clone, Copy, Debug)]
struct Ent {
    vruntime: i64,
    deadline: i64,
    /// The kernel's `se->vprot`: the vruntime up to which it keeps its core (RUN_TO_PARITY),
    /// its deadline when it was last picked from the queue (`set_protect_slice`). Picked
    /// again straight after its slice ended (the kernel's `prev == p`), it is not set anew.
    vprot: i64,
    /// The kernel's `se->vlag`: `V - vruntime` when it left its queue.
    vlag: i64,
    /// CPU time charged but not yet folded into `vruntime`, and the division remainder.
    pending: u64,
    rem: u64,
    weight: u64,
    core: usize,
    at: At,
    /// Its key in the tree while queued or delayed.
    ticket: u64,
    /// When it was last picked or enqueued (new, waking, migrated), as a count of those
    /// events (`stamp`): balancing looks at the least recent first, as the kernel walks
    /// `rq->cfs_tasks` from its tail.
    picked: u64,
    /// When it last stopped running (ns; `u64::MAX`: never ran), for `task_hot`.
    left: u64,
    /// Its PELT load average, attached to the queue of `core` (also while it sleeps).
    la: Avg,
    /// Its PELT utilisation (1024 while it runs), part of its queue's `util` until it exits
    /// or moves (`remove_entity_load_avg`, `attach_entity_load_avg`).
    ua: Avg,
}

const OFF: Ent = Ent {
    vruntime: 0,
    deadline: 0,
    vprot: 0,
    vlag: 0,
    pending: 0,
    rem: 0,
    weight: NICE_0_LOAD,
    core: 0,
    at: At::Off,
    ticket: 0,
    picked: 0,
    left: u64::MAX,
    la: Avg { load: 0, at: 0 },
    ua: Avg { load: 0, at: 0 },
};

#[derive(Default)]
struct RunQueue {
    /// Waiting and delayed threads by (deadline, ticket) (`eevdf_queue.rs`).
    tree: Timeline,
    sum_w: u64,
    sum_wv: i128,
    curr: Option<Slot>,
    /// Weight and number of runnable threads (curr and waiting, not delayed).
    load: u64,
    nr: usize,
    /// V when the queue was last non-empty (the kernel's zero_vruntime).
    zero: i64,
    /// Threads placed here since the last `preempt` round (wakeup preemption candidates).
    placed: Vec<Slot>,
    /// The thread that left this core's CPU at `prev.1` (slice ended or preempted) and is
    /// queued again: picked at that instant, it continues without `set_next_entity`.
    prev: Option<(Slot, u64)>,
    /// PELT: the sum of the load averages attached here (`cfs_rq->avg.load_avg`), following
    /// `load`.
    avg: Avg,
    /// PELT utilisation and runnable averages of the queue (`util_avg`, `runnable_avg`):
    /// 1024 while anything is runnable here, and 1024 per runnable thread; a thread that
    /// exits or moves takes its own share with it (its `ua`, and its load average per unit
    /// of weight), as `remove_entity_load_avg` does; read only where a new thread is placed
    /// (`find_dst_cpu`).
    util: Avg,
    runnable: Avg,
    /// The task group's entity on this core (`eevdf_group.rs`).
    group: GroupEnt,
    /// PELT utilisation of the real-time class here (`avg_rt`), which the CPU's capacity
    /// for the fair class excludes (`scale_rt_capacity`, `eevdf_balance.rs`).
    rt_util: pelt::RtUtil,
}

/// The EEVDF dispatcher.
pub struct Eevdf {
    ents: Vec<Ent>,
    rqs: Vec<RunQueue>,
    ticket: u64,
    /// Picks and enqueues so far, all cores together (stamps `Ent::picked`).
    picks: u64,
    /// Balance rounds so far (a round stands for the jiffy at which the kernel's tick
    /// raises the balancing softirq).
    rounds: u64,
    /// Each core's `sd->balance_interval` (ns of the kernel's ms: `sd_weight` ms at first,
    /// between `min_interval` and twice that) and the round of its last balance
    /// (`sd->last_balance`); see `busy_rounds`.
    interval: Vec<u64>,
    last: Vec<u64>,
    /// Scratch: which cores balance in the current round.
    due: Vec<bool>,
    round_ns: u64,
    /// Runnable threads waiting in trees, all cores together.
    waiting: usize,
    total_load: u64,
    slice: u64,
    tick: u64,
    /// The wake-up path (`Dispatcher::wake_latency`, `[policy] wake_path`), from a sleeper's
    /// timer to its enqueue: hrtimer interrupt, `try_to_wake_up` (`select_task_rq_fair`,
    /// `enqueue_task_fair`), and the reschedule and switch to it. Besides the latency itself
    /// it lets a periodic sleeper's cycle drift against the tick, as real ones do, where
    /// exact cycles lock onto fixed phases of it.
    wake_path: Nanos,
    balance_interval: Nanos,
    imbalance_pct: u32,
    /// Each core's `nr_balance_failed`: periodic balances in a row that found an imbalance
    /// and moved nothing. Each failure halves the load a thread counts as when it is checked
    /// against the imbalance (`detach_tasks`' `shr_bound(load, nr_balance_failed)`).
    failed: Vec<u32>,
    to_check: Vec<usize>,
    /// The time of the hook being served (ns): PELT and `task_hot` read it.
    now: u64,
    /// Each core's PELT load during a balance round.
    loads: Vec<u64>,
    /// Each core's capacity during a balance round (`Eevdf::capacity`), read once per round
    /// with the loads: the imbalance and the busiest core's choice read it per pair.
    caps: Vec<u64>,
    /// Whether a periodic balance is being served: a thread whose slice ended at this very
    /// tick still counts as running then (below).
    balancing: bool,
    /// Per core: the time up to which its running thread's CPU time is in `pending`, and how
    /// much of that the engine has not charged yet (`catch_up`).
    acct: Vec<(u64, u64)>,
    /// Whether `catch_up` may charge ahead of the engine: not with a context-switch cost,
    /// where a picked thread starts running only after it.
    catch_up: bool,
    /// The real-time class above this one (`class = "fifo"` threads).
    rt: RtClass,
    /// During a periodic balance: per core, the thread it switches to at this tick
    /// (`eevdf_balance.rs`), which counts as on its CPU.
    tick_next: Vec<Option<Slot>>,
    /// Per core: whether its last pick found something to run. Asked again, it has just
    /// run out of work (newidle balance); asked while already idle (the engine asks every
    /// idle core whenever a thread waits anywhere), it pulls only in its periodic idle
    /// balance, as an idle CPU sleeps until a busy one's tick kicks its balance.
    was_busy: Vec<bool>,
    /// `[policy] task_group`, and the group's total load (`tg->load_avg`), `eevdf_group.rs`.
    task_group: bool,
    tg_load: u64,
    /// `[policy] spawner`: its process index, resolved on the first arrival.
    spawner: Option<usize>,
    spawner_name: Option<String>,
    /// The spawner's thread (its first live one), found at the first arrival after it ran.
    spawner_slot: Option<usize>,
    /// Per core: newidle balance's success statistics (`eevdf_newidle.rs`), and the model's
    /// own random stream for its die.
    newidle: Vec<NewIdle>,
    rng: rand_chacha::ChaCha8Rng,
    /// When idle cores' blocked load is next refreshed (`eevdf_balance.rs`).
    next_blocked: u64,
    #[cfg(test)]
    log: Vec<PickLog>,
}

/// Tests: the time of a pick, the thread picked, and every queued thread's lag then.
#[cfg(test)]
type PickLog = (u64, Slot, Vec<(Slot, i64)>);

/// `1 + ilog2(min(cpus, 8))`: the kernel's SCHED_TUNABLESCALING_LOG factor.
pub fn slice_factor(cores: usize) -> u64 {
    1 + cores.clamp(1, 8).ilog2() as u64
}

/// `delta * 1024 / weight` (the kernel's `calc_delta_fair`).
fn delta_fair(delta: u64, w: u64) -> i64 {
    // In 64 bits when it fits (always, for runs shorter than 208 days): a 128-bit division
    // is a library call several times slower, and this runs at every slice end.
    match delta.checked_mul(NICE_0_LOAD) {
        Some(x) => (x / w.max(1)) as i64,
        None => (delta as u128 * NICE_0_LOAD as u128 / w.max(1) as u128) as i64,
    }
}

impl Eevdf {
    pub fn new(spec: &PolicySpec, cores: usize) -> Eevdf {
        Eevdf {
            ents: Vec::new(),
            rqs: (0..cores).map(|_| RunQueue::default()).collect(),
            ticket: 0,
            picks: 0,
            rounds: 0,
            interval: vec![min_interval(cores); cores],
            last: vec![0; cores],
            due: vec![false; cores],
            round_ns: spec.balance_interval().0,
            waiting: 0,
            total_load: 0,
            slice: spec.base_slice().0 * slice_factor(cores),
            tick: spec.tick().0.max(1),
            wake_path: spec.wake_path(),
            balance_interval: spec.balance_interval(),
            imbalance_pct: if spec.imbalance_pct() == SPEC_DEFAULT_IMBALANCE_PCT {
                IMBALANCE_PCT_LLC
            } else {
                spec.imbalance_pct()
            },
            failed: vec![0; cores],
            to_check: Vec::with_capacity(cores),
            now: 0,
            loads: vec![0; cores],
            caps: vec![1024; cores],
            balancing: false,
            acct: vec![(0, 0); cores],
            catch_up: spec.context_switch().0 == 0,
            rt: RtClass::new(cores),
            tick_next: vec![None; cores],
            // Cores start idle: an idle CPU pulls at its periodic idle balance, not as one that
            // just ran out of work (newidle).
            was_busy: vec![false; cores],
            task_group: spec.task_group(),
            tg_load: 0,
            spawner: None,
            spawner_name: spec.spawner().map(str::to_string),
            spawner_slot: None,
            newidle: vec![NewIdle::starting_at(spec.newidle_ratio()); cores],
            // Its own stream ("newidle" in ASCII mixed into the seed), so that the die does not
            // shift other policies' draws of the same seed.
            rng: rand::SeedableRng::seed_from_u64(spec.seed() ^ 0x006e_6577_6964_6c65),
            next_blocked: 0,
            #[cfg(test)]
            log: Vec::new(),
        }
    }

    fn ensure(&mut self, slot: Slot) {
        if self.ents.len() <= slot as usize {
            self.ents.resize(slot as usize + 1, OFF);
        }
    }

    fn flush(&mut self, slot: Slot) {
        let e = &mut self.ents[slot as usize];
        let ran = std::mem::take(&mut e.pending);
        if ran == 0 {
            return;
        }
        // 64-bit division when it fits (see `delta_fair`); the same quotient and remainder.
        if let Some(num) = ran
            .checked_mul(NICE_0_LOAD)
            .and_then(|x| x.checked_add(e.rem))
        {
            e.vruntime += (num / e.weight) as i64;
            e.rem = num % e.weight;
            return;
        }
        let num = ran as u128 * NICE_0_LOAD as u128 + e.rem as u128;
        e.vruntime += (num / e.weight as u128) as i64;
        e.rem = (num % e.weight as u128) as u64;
    }

    // --- the tree and V --------------------------------------------------------------------

    fn insert(&mut self, slot: Slot, core: usize, at: At) {
        self.ticket += 1;
        let e = &mut self.ents[slot as usize];
        e.ticket = self.ticket;
        e.core = core;
        e.at = at;
        let (w, v, d, t) = (e.weight, e.vruntime, e.deadline, e.ticket);
        let rq = &mut self.rqs[core];
        rq.tree.insert((d, t, slot));
        rq.sum_w += w;
        rq.sum_wv += w as i128 * v as i128;
        if at == At::Queued {
            self.waiting += 1;
        }
    }

    fn erase(&mut self, slot: Slot) {
        let e = self.ents[slot as usize];
        let rq = &mut self.rqs[e.core];
        let key = (e.deadline, e.ticket, slot);
        // A pick usually takes the earliest deadline: taking it costs no comparisons, where
        // a keyed removal compares along its path (profile at 64 cores: tree updates were a
        // quarter of the run).
        if rq.tree.first() == Some(&key) {
            rq.tree.pop_first();
        } else {
            rq.tree.remove(&key);
        }
        rq.sum_w -= e.weight;
        rq.sum_wv -= e.weight as i128 * e.vruntime as i128;
        if e.at == At::Queued {
            self.waiting -= 1;
        }
    }

    // --- leaving and joining ----------------------------------------------------------------

    /// `V - v`, clamped to the lag limit.
    fn lag(&mut self, slot: Slot, core: usize) -> i64 {
        let v_avg = self.avg_vruntime(core);
        let e = &self.ents[slot as usize];
        let limit = delta_fair((2 * self.slice).max(self.tick), e.weight);
        (v_avg - e.vruntime).clamp(-limit, limit)
    }

    /// A delayed thread leaves its tree for good (DELAY_ZERO: no positive lag kept).
    fn finish_delayed(&mut self, slot: Slot) {
        let core = self.ents[slot as usize].core;
        let lag = self.lag(slot, core).min(0);
        self.erase(slot);
        let e = &mut self.ents[slot as usize];
        e.vlag = lag;
        e.at = At::Off;
    }

    /// Notices that `core`'s running thread finished or blocked.
    fn settle(&mut self, ctx: &Ctx, core: usize) {
        let Some(s) = self.rqs[core].curr else { return };
        let state = ctx.thread(s).state;
        if !matches!(state, ThreadState::Done | ThreadState::Blocked) {
            return;
        }
        self.flush(s);
        self.ents[s as usize].ua.advance(self.now, 1024);
        let sums = self.sums(core);
        let lag = self.lag(s, core);
        self.rqs[core].curr = None;
        self.ents[s as usize].left = self.now;
        self.sub_load(core, s);
        if state == ThreadState::Done {
            // detach_entity_load_avg at exit: its load leaves the queue's sum at once.
            self.move_load(s, core, None);
        }
        if state == ThreadState::Blocked && !Self::eligible(sums, self.ents[s as usize].vruntime) {
            self.insert(s, core, At::Delayed);
        } else {
            let e = &mut self.ents[s as usize];
            e.vlag = lag;
            e.at = At::Off;
        }
    }

    fn settle_all(&mut self, ctx: &Ctx) {
        for c in 0..self.rqs.len() {
            self.settle(ctx, c);
        }
    }

    /// `place_entity`: vruntime from V and the kept lag, deadline a slice (half for a new
    /// thread) later.
    fn place(&mut self, slot: Slot, core: usize, initial: bool) {
        let v_avg = self.avg_vruntime(core);
        let (_, load) = self.sums(core);
        let e = &mut self.ents[slot as usize];
        let mut lag = e.vlag as i128;
        if load > 0 && lag != 0 {
            lag = lag * (load + e.weight) as i128 / load as i128;
        } else {
            lag = 0;
        }
        e.vruntime = v_avg - lag as i64;
        let mut vslice = delta_fair(self.slice, e.weight);
        if initial {
            vslice /= 2;
        }
        e.deadline = e.vruntime + vslice;
    }

    /// Puts `slot` at the head of its queue's `cfs_tasks` order (most recently used): the
    /// kernel does so when a task is picked (`set_next_entity`'s `list_move`) and whenever it
    /// is enqueued, new, waking or migrated (`account_entity_enqueue`'s `list_add`), so
    /// `detach_tasks`, walking from the tail, tries it last.
    fn stamp(&mut self, slot: Slot) {
        self.picks += 1;
        self.ents[slot as usize].picked = self.picks;
    }

    /// Runnable threads waiting (not running) on `core`.
    fn waiting_on(&self, core: usize) -> usize {
        self.rqs[core].nr - usize::from(self.rqs[core].curr.is_some())
    }

    fn is_idle(&self, ctx: &Ctx, c: usize) -> bool {
        ctx.running[c].is_none() && self.rqs[c].nr == 0
    }
}

impl Dispatcher for Eevdf {
    fn name(&self) -> &'static str {
        "eevdf"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.ensure(slot);
        self.now = ctx.now.0;
        if let Some(name) = self.spawner_name.take() {
            self.spawner = ctx
                .scenario
                .processes()
                .iter()
                .position(|p| p.name() == name);
        }
        if self.rt.enqueue(ctx, slot, why) {
            return;
        }
        if matches!(why, Enqueue::Expired | Enqueue::Preempted)
            && self.ents[slot as usize].at == At::Running
        {
            let e = self.ents[slot as usize];
            // put_prev_entity, after update_deadline if the slice is used up.
            self.flush(slot);
            self.ents[slot as usize].ua.advance(self.now, 1024);
            let core = e.core;
            if self.rqs[core].curr == Some(slot) {
                self.rqs[core].curr = None;
            }
            let e = &mut self.ents[slot as usize];
            if e.vruntime >= e.deadline {
                e.deadline = e.vruntime + delta_fair(self.slice, e.weight);
            }
            e.left = self.now;
            self.insert(slot, core, At::Queued);
            self.rqs[core].prev = Some((slot, self.now));
            return;
        }
        self.settle_all(ctx);
        let e = self.ents[slot as usize];
        if e.at == At::Delayed {
            // Woken while delayed: it stays on its queue (ttwu_runnable); DELAY_ZERO.
            let core = e.core;
            self.catch_up(ctx, core);
            let lag = self.lag(slot, core);
            self.erase(slot);
            if lag > 0 {
                self.ents[slot as usize].vlag = 0;
                self.place(slot, core, false);
            }
            self.add_load(core, slot);
            self.insert(slot, core, At::Queued);
            self.mark(core, slot);
            return;
        }
        // A reused slot was settled above (its thread finished), so it is Off here.
        let new = why == Enqueue::New;
        if new {
            self.ents[slot as usize] = OFF;
        }
        let weight = ctx.thread(slot).weight.max(1);
        self.ents[slot as usize].weight = weight;
        self.ents[slot as usize].pending = 0;
        let core = self.select_core(ctx, slot, !new);
        if new {
            let u = self.post_init_util(core, weight);
            self.ents[slot as usize].ua = Avg::new(u, self.now);
            // init_entity_runnable_average: a new task counts its full weight at once.
            self.ents[slot as usize].la = Avg::new(weight, self.now);
            let rq = &mut self.rqs[core];
            rq.avg.advance(self.now, rq.load);
            rq.avg.load += weight;
            self.group_attach(core, weight, weight);
        } else {
            let from = self.ents[slot as usize].core;
            self.ents[slot as usize].la.advance(self.now, 0);
            if from != core {
                self.move_load(slot, from, Some(core));
            }
        }
        self.catch_up(ctx, core);
        self.place(slot, core, new);
        self.add_load(core, slot);
        self.insert(slot, core, At::Queued);
        self.stamp(slot);
        self.mark(core, slot);
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        self.now = ctx.now.0;
        self.settle(ctx, core);
        let rt = self.rt.pick(core);
        self.rqs[core].rt_util.set(self.now, rt.is_some());
        if let Some(s) = rt {
            // The real-time class comes first (`pick_next_task`); the fair pick after it is
            // a fresh one (its `prev` is of another class).
            self.was_busy[core] = true;
            return Some(s);
        }
        if self.rqs[core].nr == 0 && self.was_busy[core] {
            self.newidle(ctx, core);
        }
        if self.rqs[core].nr == 0 {
            self.was_busy[core] = false;
            return None;
        }
        self.was_busy[core] = true;
        let slot = self.pick_eevdf(core, None)?;
        #[cfg(test)]
        {
            let lags = self.lags(core);
            self.log.push((ctx.now.0, slot, lags));
        }
        self.erase(slot);
        // The thread whose slice just ended, picked again: the kernel's `pick_next_task_fair`
        // with `prev == p` neither moves it in `cfs_tasks` nor protects a new slice.
        if self.rqs[core].prev.take() != Some((slot, self.now)) {
            self.stamp(slot);
            let e = &mut self.ents[slot as usize];
            e.vprot = e.deadline;
        }
        self.ents[slot as usize].ua.advance(self.now, 0);
        self.ents[slot as usize].at = At::Running;
        self.rqs[core].curr = Some(slot);
        // The engine has charged every running thread up to now before it asks for picks.
        self.acct[core] = (self.now, 0);
        Some(slot)
    }

    fn time_slice(&mut self, ctx: &Ctx, core: usize, slot: Slot) -> Option<Nanos> {
        if is_rt(ctx, slot) {
            return None;
        }
        Some(Nanos(self.slice_end(ctx, core, slot) - ctx.now.0))
    }

    fn charge(&mut self, ctx: &Ctx, slot: Slot, core: usize, ran: Nanos) {
        if is_rt(ctx, slot) {
            return;
        }
        // Less what `catch_up` already counted of the same interval.
        let (_, pre) = self.acct[core];
        self.ents[slot as usize].pending += ran.0.saturating_sub(pre);
        self.acct[core] = (ctx.now.0, 0);
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        self.rt.preempt(ctx, out);
        while let Some(core) = self.to_check.pop() {
            let placed = std::mem::take(&mut self.rqs[core].placed);
            if let Some(curr) = ctx.running[core].filter(|&c| self.rqs[core].curr == Some(c)) {
                if self.wakeup_preempts(core, curr, &placed) && !out.contains(&core) {
                    out.push(core);
                }
            }
            self.rqs[core].placed = placed;
            self.rqs[core].placed.clear();
        }
    }

    fn remove(&mut self, ctx: &Ctx, slot: Slot) {
        if is_rt(ctx, slot) {
            self.rt.remove(slot);
            return;
        }
        if slot as usize >= self.ents.len() || self.ents[slot as usize].at != At::Queued {
            return;
        }
        self.now = ctx.now.0;
        let core = self.ents[slot as usize].core;
        let lag = self.lag(slot, core);
        self.erase(slot);
        self.sub_load(core, slot);
        let e = &mut self.ents[slot as usize];
        e.vlag = lag;
        e.at = At::Off;
    }

    /// Not strictly: like the kernel (`task_hot` in `can_migrate_task`), an idle core leaves
    /// a thread that stopped running less than `sysctl_sched_migration_cost` ago where it
    /// waits, until that time has passed or more than `cache_nice_tries` pulls failed; the
    /// kernel's idle CPU likewise waits for the busy one's tick to kick its idle balance.
    fn work_conserving(&self) -> bool {
        false
    }

    fn wake_latency(&self) -> Nanos {
        self.wake_path
    }

    fn balance_interval(&self) -> Option<Nanos> {
        (self.rqs.len() > 1).then_some(self.balance_interval)
    }

    fn balance(&mut self, ctx: &Ctx) {
        self.balance_round(ctx);
    }

    fn reweight(&mut self, ctx: &Ctx, slot: Slot, old: u64) {
        if slot as usize >= self.ents.len() || self.ents[slot as usize].at == At::Off {
            if (slot as usize) < self.ents.len() {
                self.ents[slot as usize].weight = ctx.thread(slot).weight.max(1);
            }
            return;
        }
        // reweight_entity: the lag and the relative deadline scale by old / new, and so
        // does the load average (its load_sum is kept per unit of weight).
        self.now = ctx.now.0;
        self.flush(slot);
        let new = ctx.thread(slot).weight.max(1);
        let e = self.ents[slot as usize];
        let core = e.core;
        let in_tree = matches!(e.at, At::Queued | At::Delayed);
        if in_tree {
            self.erase(slot);
        }
        let v_avg = self.avg_vruntime(core);
        let scale = |x: i64| (x as i128 * old as i128 / new as i128) as i64;
        let lag = scale(v_avg - e.vruntime);
        let rel = scale(e.deadline - e.vruntime);
        let ent = &mut self.ents[slot as usize];
        ent.weight = new;
        ent.rem = 0;
        ent.vruntime = v_avg - lag;
        ent.deadline = ent.vruntime + rel;
        let runnable = e.at != At::Delayed;
        let now = self.now;
        let rq = &mut self.rqs[core];
        rq.avg.advance(now, rq.load);
        let ent = &mut self.ents[slot as usize];
        ent.la.advance(now, if runnable { old } else { 0 });
        let la = ent.la.load;
        ent.la.load = (la as u128 * new as u128 / old.max(1) as u128) as u64;
        rq.avg.load = rq.avg.load.saturating_sub(la) + ent.la.load;
        if runnable {
            rq.load = rq.load - old + new;
            self.total_load = self.total_load - old + new;
        }
        if in_tree {
            self.insert(slot, core, e.at);
        }
    }

    fn place(&mut self, ctx: &Ctx, slot: Slot, core: usize) {
        self.ensure(slot);
        self.now = ctx.now.0;
        let e = self.ents[slot as usize];
        match e.at {
            At::Off | At::Delayed => {}
            At::Queued => self.move_to(slot, core),
            At::Running => {
                // The engine took it off its core and re-enqueues it right after.
                self.flush(slot);
                if self.rqs[e.core].curr == Some(slot) {
                    self.rqs[e.core].curr = None;
                }
                self.insert(slot, e.core, At::Queued);
                self.move_to(slot, core);
                self.erase(slot);
                self.ents[slot as usize].at = At::Running;
            }
        }
    }
}

#[cfg(test)]
#[path = "eevdf_placement_tests.rs"]
mod placement_tests;
#[cfg(test)]
#[path = "eevdf_tests.rs"]
mod tests;
