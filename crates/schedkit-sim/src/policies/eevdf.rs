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
//!   reaches the deadline. The slice is `sysctl_sched_base_slice` = `min_granularity` (0.75 ms)
//!   x `1 + ilog2(min(cores, 8))` (the kernel's log scaling of the boot-time CPU count:
//!   1.5 ms on 2 CPUs, 3 ms on 8 or more).
//! - **The tick**: without HRTICK (off by default) the kernel notices a used-up slice only at
//!   the next scheduler tick, so a slice here ends at the first multiple of `tick` (default
//!   4 ms, HZ = 250) at or after the vruntime reaches the deadline.
//! - **`place_entity`**: a new or waking thread starts at `V - lag * (W + w) / W` (`W` the
//!   queue's weight before it joins: PLACE_LAG keeps its lag across the sleep, scaled so that
//!   adding it does not move V by more than its own lag); a new thread has lag 0 and a
//!   deadline half a slice away (PLACE_DEADLINE_INITIAL). A thread's lag is clamped to
//!   `(max(2 x slice, tick)) * 1024 / w` when it leaves (`update_entity_lag`).
//! - **RUN_TO_PARITY** (`set_protect_slice`, `protect_slice`): a thread picked to run keeps the
//!   core until its deadline while it stays eligible; with equal slices (schedkit has no
//!   `sched_attr.sched_runtime` slices) the protected vruntime is the deadline.
//! - **Wakeup preemption** (`check_preempt_wakeup_fair`): when a thread is placed on a busy
//!   queue, the running one is preempted if `pick_eevdf` (with protection) now returns the
//!   newcomer, i.e. the running thread is no longer eligible or no longer protected and the
//!   newcomer has the earliest eligible deadline.
//! - **DELAY_DEQUEUE and DELAY_ZERO** (6.12 and later): a thread that blocks while not eligible
//!   stays in the queue ("delayed"), still counted in V, until it would be picked (then it
//!   leaves, its positive lag cut to 0) or wakes (then it stays where it is: a positive lag it
//!   gained meanwhile is dropped and it is placed afresh at V).
//! - **Per-core queues and balancing** (`select_task_rq_fair`, `sched_balance_rq`, newidle):
//!   a new thread goes to the core with the fewest runnable threads (then the least load, the
//!   lower index); a waking one to its previous core if that is idle, else to the first idle
//!   core it may use, else back to its previous core (`select_idle_sibling` on one LLC). A
//!   core that runs out of work pulls a waiting thread at once (newidle balance); idle cores
//!   balance every `balance_interval`, busy ones `busy_factor` (16) times less often than the
//!   kernel's domain interval of one millisecond per CPU (2 CPUs: every 32 ms); they balance
//!   weighted load (`load_imbalance`: eqs. 4.1-4.2 and
//!   `imbalance_pct`, as `calculate_imbalance` for overloaded groups), moving waiting threads
//!   whose load, halved once per earlier failed balance (`nr_balance_failed`), fits in the
//!   imbalance (`detach_tasks`). A moved thread keeps its lag and its relative deadline (the
//!   kernel's migration path since 6.12).
//!
//! # Left out
//! PELT: loads are the weights of the runnable threads now, not decayed averages; no active
//! balancing (moving a running thread after `cache_nice_tries + 2` failures: only waiting
//! threads move); busy and idle cores balance at the same interval; no NUMA, SMT or capacity asymmetry; no
//! cgroup hierarchy (every thread is a task entity of the root); no custom slices
//! (`sched_attr`), PREEMPT_SHORT or NEXT_BUDDY (off by default); no `sched_yield`. Ticks of all
//! cores are aligned at multiples of `tick`.
//!
//! # Invariants
//! Every runnable thread is in exactly one queue (its tree, or as its `curr`); a delayed thread
//! is in its tree but not runnable. A queue's `sum_w` and `sum_wv` are the sums of `w` and
//! `w * vruntime` over its tree; `load` and `nr` count runnable threads (curr included).
//!
//! # Cost
//! Enqueue, pick and charge are O(log n) (a `BTreeSet` ordered by deadline); the pick scans
//! past ineligible threads with earlier deadlines, which with mixed weights are few.

use crate::policy::{Ctx, Dispatcher, Enqueue, ThreadState};
use schedkit_core::controllers::load_imbalance;
use schedkit_core::scenario::PolicySpec;
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;
use std::collections::BTreeSet;

const NICE_0_LOAD: u64 = 1024;

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
    /// When it was last picked, as a count of picks: balancing looks at the least recently
    /// picked threads first, as the kernel walks `rq->cfs_tasks` from its tail.
    picked: u64,
}

const OFF: Ent = Ent {
    vruntime: 0,
    deadline: 0,
    vlag: 0,
    pending: 0,
    rem: 0,
    weight: NICE_0_LOAD,
    core: 0,
    at: At::Off,
    ticket: 0,
    picked: 0,
};

#[derive(Default)]
struct RunQueue {
    /// Waiting and delayed threads by (deadline, ticket).
    tree: BTreeSet<(i64, u64, Slot)>,
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
}

/// The EEVDF dispatcher.
pub struct Eevdf {
    ents: Vec<Ent>,
    rqs: Vec<RunQueue>,
    ticket: u64,
    /// Picks so far, all cores together (stamps `Ent::picked`).
    picks: u64,
    /// Balance rounds so far, and how many of them pass between two balances of a busy core.
    rounds: u64,
    busy_every: u64,
    /// Runnable threads waiting in trees, all cores together.
    waiting: usize,
    total_load: u64,
    slice: u64,
    tick: u64,
    balance_interval: Nanos,
    imbalance_pct: u32,
    /// Each core's `nr_balance_failed`: periodic balances in a row that found an imbalance
    /// and moved nothing. Each failure halves the load a thread counts as when it is checked
    /// against the imbalance (`detach_tasks`' `shr_bound(load, nr_balance_failed)`).
    failed: Vec<u32>,
    to_check: Vec<usize>,
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

/// The kernel's `busy_factor`: a CPU that has work balances this many times less often.
const BUSY_FACTOR: u64 = 16;

/// Balance rounds between two balances of a busy core: `get_sd_balance_interval` for a busy
/// CPU, `sd_weight` ms (the domain's CPU count, `sd_init`) times [`BUSY_FACTOR`], in units
/// of the round (`balance_interval`), at least one. 2 CPUs, 4 ms rounds: every 8th round.
fn busy_every(cores: usize, round: Nanos) -> u64 {
    let busy = BUSY_FACTOR * cores as u64 * Nanos::from_ms(1).0;
    (busy / round.0.max(1)).max(1)
}

/// `delta * 1024 / weight` (the kernel's `calc_delta_fair`).
fn delta_fair(delta: u64, w: u64) -> i64 {
    (delta as u128 * NICE_0_LOAD as u128 / w.max(1) as u128) as i64
}

impl Eevdf {
    pub fn new(spec: &PolicySpec, cores: usize) -> Eevdf {
        Eevdf {
            ents: Vec::new(),
            rqs: (0..cores).map(|_| RunQueue::default()).collect(),
            ticket: 0,
            picks: 0,
            rounds: 0,
            busy_every: busy_every(cores, spec.balance_interval()),
            waiting: 0,
            total_load: 0,
            slice: spec.min_granularity().0 * slice_factor(cores),
            tick: spec.tick().0.max(1),
            balance_interval: spec.balance_interval(),
            imbalance_pct: spec.imbalance_pct(),
            failed: vec![0; cores],
            to_check: Vec::with_capacity(cores),
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
        rq.tree.remove(&(e.deadline, e.ticket, slot));
        rq.sum_w -= e.weight;
        rq.sum_wv -= e.weight as i128 * e.vruntime as i128;
        if e.at == At::Queued {
            self.waiting -= 1;
        }
    }

    /// Sums over the tree and the running thread (flushed).
    fn sums(&mut self, core: usize) -> (i128, u64) {
        let rq = &self.rqs[core];
        let (mut wv, mut w) = (rq.sum_wv, rq.sum_w);
        if let Some(c) = rq.curr {
            self.flush(c);
            let e = &self.ents[c as usize];
            wv += e.weight as i128 * e.vruntime as i128;
            w += e.weight;
        }
        (wv, w)
    }

    /// V, the queue's weighted average vruntime (floored), or its last value when empty.
    fn avg_vruntime(&mut self, core: usize) -> i64 {
        let (wv, w) = self.sums(core);
        if w > 0 {
            self.rqs[core].zero = wv.div_euclid(w as i128) as i64;
        }
        self.rqs[core].zero
    }

    fn eligible(sums: (i128, u64), v: i64) -> bool {
        sums.0 >= v as i128 * sums.1 as i128
    }

    /// The eligible thread with the earliest deadline among the tree and `with` (the running
    /// thread, if it is still on the queue). Delayed threads found first leave the queue.
    fn pick_eevdf(&mut self, core: usize, with: Option<Slot>) -> Option<Slot> {
        loop {
            let sums = self.sums(core);
            let curr = with.filter(|&c| Self::eligible(sums, self.ents[c as usize].vruntime));
            let found = self.rqs[core]
                .tree
                .iter()
                .find(|k| Self::eligible(sums, self.ents[k.2 as usize].vruntime))
                .copied();
            let best = match (found, curr) {
                // entity_before: the running thread wins only with a strictly earlier deadline.
                (Some(b), Some(c)) if self.ents[c as usize].deadline < b.0 => return Some(c),
                (Some(b), _) => b.2,
                (None, Some(c)) => return Some(c),
                // Nothing eligible (only after rounding): the earliest deadline.
                (None, None) => self.rqs[core].tree.first()?.2,
            };
            if self.ents[best as usize].at != At::Delayed {
                return Some(best);
            }
            self.finish_delayed(best);
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

    fn add_load(&mut self, core: usize, w: u64) {
        self.rqs[core].load += w;
        self.rqs[core].nr += 1;
        self.total_load += w;
    }

    fn sub_load(&mut self, core: usize, w: u64) {
        self.rqs[core].load -= w;
        self.rqs[core].nr -= 1;
        self.total_load -= w;
    }

    /// Notices that `core`'s running thread finished or blocked.
    fn settle(&mut self, ctx: &Ctx, core: usize) {
        let Some(s) = self.rqs[core].curr else { return };
        let state = ctx.thread(s).state;
        if !matches!(state, ThreadState::Done | ThreadState::Blocked) {
            return;
        }
        self.flush(s);
        let sums = self.sums(core);
        let lag = self.lag(s, core);
        self.rqs[core].curr = None;
        let w = self.ents[s as usize].weight;
        self.sub_load(core, w);
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

    /// Runnable threads waiting (not running) on `core`.
    fn waiting_on(&self, core: usize) -> usize {
        self.rqs[core].nr - usize::from(self.rqs[core].curr.is_some())
    }

    fn is_idle(&self, ctx: &Ctx, c: usize) -> bool {
        ctx.running[c].is_none() && self.rqs[c].nr == 0
    }

    /// `select_task_rq_fair` on one LLC (module docs).
    fn select_core(&self, ctx: &Ctx, slot: Slot, woken: bool) -> usize {
        let t = ctx.thread(slot);
        let n = self.rqs.len();
        if woken {
            let prev = t.last_core.filter(|&c| c < n && t.allowed_on(c));
            if let Some(p) = prev.filter(|&p| self.is_idle(ctx, p)) {
                return p;
            }
            if let Some(c) = (0..n).find(|&c| t.allowed_on(c) && self.is_idle(ctx, c)) {
                return c;
            }
            if let Some(p) = prev {
                return p;
            }
        }
        (0..n)
            .filter(|&c| t.allowed_on(c))
            .min_by_key(|&c| (self.rqs[c].nr, self.rqs[c].load, c))
            .unwrap_or(0)
    }

    fn mark(&mut self, core: usize, slot: Slot) {
        if self.rqs[core].placed.is_empty() {
            self.to_check.push(core);
        }
        self.rqs[core].placed.push(slot);
    }

    /// Moves a waiting thread to `to`, keeping its lag and relative deadline.
    fn move_to(&mut self, slot: Slot, to: usize) {
        let from = self.ents[slot as usize].core;
        if from == to {
            return;
        }
        let lag = self.lag(slot, from);
        self.erase(slot);
        let w = self.ents[slot as usize].weight;
        self.sub_load(from, w);
        let rel = self.ents[slot as usize].deadline - self.ents[slot as usize].vruntime;
        self.ents[slot as usize].vlag = lag;
        self.place(slot, to, false);
        let e = &mut self.ents[slot as usize];
        e.deadline = e.vruntime + rel;
        self.add_load(to, w);
        self.insert(slot, to, At::Queued);
        self.mark(to, slot);
    }

    /// Whether `s` waits (not delayed) on its queue and may run on `k`.
    fn can_move(&self, ctx: &Ctx, s: Slot, k: usize) -> bool {
        self.ents[s as usize].at == At::Queued && ctx.thread(s).allowed_on(k)
    }

    /// The waiting (not delayed) thread of `core` picked least recently that may run on `k`
    /// (`detach_one_task`: the tail of `cfs_tasks`).
    fn first_movable(&self, ctx: &Ctx, core: usize, k: usize) -> Option<Slot> {
        // The first of `movable`'s order, without building the list (newidle pulls are
        // frequent).
        self.rqs[core]
            .tree
            .iter()
            .filter(|x| self.can_move(ctx, x.2, k))
            .map(|&(d, t, s)| (self.ents[s as usize].picked, d, t, s))
            .min()
            .map(|x| x.3)
    }

    /// Every waiting (not delayed) thread of `core` that may run on `k`, least recently
    /// picked first (the kernel moves a task to the head of `cfs_tasks` when it is picked and
    /// `detach_tasks` walks from the tail: cache-cold threads, which have waited longest and
    /// so carry positive lag, move first). Ties (never picked) by deadline, then ticket.
    fn movable(&self, ctx: &Ctx, core: usize, k: usize) -> Vec<Slot> {
        let mut v: Vec<(u64, i64, u64, Slot)> = self.rqs[core]
            .tree
            .iter()
            .filter(|x| self.can_move(ctx, x.2, k))
            .map(|&(d, t, s)| (self.ents[s as usize].picked, d, t, s))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|x| x.3).collect()
    }

    /// Newidle balance: one waiting thread `k` may run, from the most loaded queue having one.
    fn idle_pull(&mut self, ctx: &Ctx, k: usize) -> bool {
        let mut order: Vec<usize> = (0..self.rqs.len()).filter(|&c| c != k).collect();
        order.sort_by_key(|&c| (std::cmp::Reverse(self.rqs[c].load), c));
        for b in order {
            if let Some(s) = self.first_movable(ctx, b, k) {
                self.move_to(s, k);
                return true;
            }
        }
        false
    }

    /// Periodic balance of busy core `k` against the busiest queue, by weighted load
    /// (`sched_balance_rq`): a waiting thread moves when its load, halved once per earlier
    /// failed balance of `k`, fits in what is left of the imbalance (`detach_tasks`,
    /// migrate_load). A balance that finds an imbalance and moves nothing counts as failed; a
    /// balanced pair or a move resets the count. So the thesis's 4.2.2 case (1024 against
    /// 4 x 335, imbalance 158) moves a 335 thread at the third balance, where seed 004's CFS
    /// (eq. 4.3) never moves it.
    fn pull_from(&mut self, ctx: &Ctx, k: usize, b: usize) {
        let cores = self.rqs.len();
        let Some(imbal_n) = load_imbalance(
            self.rqs[b].load,
            self.rqs[k].load,
            self.total_load,
            cores,
            self.imbalance_pct,
        ) else {
            self.failed[k] = 0;
            return;
        };
        let cand = self.movable(ctx, b, k);
        let shift = self.failed[k].min(63);
        let (n, mut rem) = (cores as i128, imbal_n as i128);
        let mut moved = false;
        for s in cand {
            if rem <= 0 {
                break;
            }
            let w = self.ents[s as usize].weight as i128;
            if (w >> shift) * n > rem {
                continue;
            }
            self.move_to(s, k);
            moved = true;
            rem -= w * n;
        }
        self.failed[k] = if moved { 0 } else { self.failed[k] + 1 };
    }

    /// `check_preempt_wakeup_fair` for the threads `placed` on `core` while `curr` runs.
    fn wakeup_preempts(&mut self, core: usize, curr: Slot, placed: &[Slot]) -> bool {
        self.flush(curr);
        let sums = self.sums(core);
        let e = &mut self.ents[curr as usize];
        if e.vruntime >= e.deadline {
            // update_curr finds the slice used up between two ticks: new deadline, resched.
            e.deadline = e.vruntime + delta_fair(self.slice, e.weight);
            return true;
        }
        // RUN_TO_PARITY: an eligible thread keeps the core until its deadline.
        if Self::eligible(sums, e.vruntime) {
            return false;
        }
        self.pick_eevdf(core, Some(curr))
            .is_some_and(|b| placed.contains(&b))
    }

    /// The vlag of every thread on `core` now (tests: the lags at each pick).
    #[cfg(test)]
    fn lags(&mut self, core: usize) -> Vec<(Slot, i64)> {
        let v_avg = self.avg_vruntime(core);
        let mut v: Vec<(Slot, i64)> = (self.rqs[core].tree.iter().map(|k| k.2))
            .chain(self.rqs[core].curr)
            .map(|s| (s, v_avg - self.ents[s as usize].vruntime))
            .collect();
        v.sort_unstable();
        v
    }
}

impl Dispatcher for Eevdf {
    fn name(&self) -> &'static str {
        "eevdf"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.ensure(slot);
        if matches!(why, Enqueue::Expired | Enqueue::Preempted)
            && self.ents[slot as usize].at == At::Running
        {
            let e = self.ents[slot as usize];
            // put_prev_entity, after update_deadline if the slice is used up.
            self.flush(slot);
            let core = e.core;
            if self.rqs[core].curr == Some(slot) {
                self.rqs[core].curr = None;
            }
            let e = &mut self.ents[slot as usize];
            if e.vruntime >= e.deadline {
                e.deadline = e.vruntime + delta_fair(self.slice, e.weight);
            }
            self.insert(slot, core, At::Queued);
            return;
        }
        self.settle_all(ctx);
        let e = self.ents[slot as usize];
        if e.at == At::Delayed {
            // Woken while delayed: it stays on its queue (ttwu_runnable); DELAY_ZERO.
            let core = e.core;
            let lag = self.lag(slot, core);
            self.erase(slot);
            if lag > 0 {
                self.ents[slot as usize].vlag = 0;
                self.place(slot, core, false);
            }
            let w = self.ents[slot as usize].weight;
            self.add_load(core, w);
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
        self.place(slot, core, new);
        self.add_load(core, weight);
        self.insert(slot, core, At::Queued);
        self.mark(core, slot);
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        self.settle(ctx, core);
        if self.rqs[core].nr == 0 && self.waiting > 0 {
            self.idle_pull(ctx, core);
        }
        if self.rqs[core].nr == 0 {
            return None;
        }
        let slot = self.pick_eevdf(core, None)?;
        #[cfg(test)]
        {
            let lags = self.lags(core);
            self.log.push((ctx.now.0, slot, lags));
        }
        self.erase(slot);
        self.picks += 1;
        self.ents[slot as usize].picked = self.picks;
        self.ents[slot as usize].at = At::Running;
        self.rqs[core].curr = Some(slot);
        Some(slot)
    }

    fn time_slice(&mut self, ctx: &Ctx, _core: usize, slot: Slot) -> Option<Nanos> {
        // Real time until the vruntime reaches the deadline, then on to the next tick.
        self.flush(slot);
        let e = &self.ents[slot as usize];
        let left_v = (e.deadline - e.vruntime).max(0) as u128;
        let left = (left_v * e.weight as u128).div_ceil(NICE_0_LOAD as u128) as u64;
        let end = (ctx.now.0 + left.max(1)).div_ceil(self.tick) * self.tick;
        Some(Nanos(end - ctx.now.0))
    }

    fn charge(&mut self, _ctx: &Ctx, slot: Slot, _core: usize, ran: Nanos) {
        self.ents[slot as usize].pending += ran.0;
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        while let Some(core) = self.to_check.pop() {
            let placed = std::mem::take(&mut self.rqs[core].placed);
            if let Some(curr) = ctx.running[core].filter(|&c| self.rqs[core].curr == Some(c)) {
                if self.wakeup_preempts(core, curr, &placed) {
                    out.push(core);
                }
            }
            self.rqs[core].placed = placed;
            self.rqs[core].placed.clear();
        }
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        if slot as usize >= self.ents.len() || self.ents[slot as usize].at != At::Queued {
            return;
        }
        let core = self.ents[slot as usize].core;
        let lag = self.lag(slot, core);
        self.erase(slot);
        let w = self.ents[slot as usize].weight;
        self.sub_load(core, w);
        let e = &mut self.ents[slot as usize];
        e.vlag = lag;
        e.at = At::Off;
    }

    fn balance_interval(&self) -> Option<Nanos> {
        (self.rqs.len() > 1).then_some(self.balance_interval)
    }

    fn balance(&mut self, ctx: &Ctx) {
        self.settle_all(ctx);
        self.rounds += 1;
        if self.waiting == 0 {
            return;
        }
        // The most loaded queue with a waiting thread changes only when something moves, so
        // a round costs O(cores) when loads are even (as the cfs model's balance does).
        let busiest = |me: &Self| {
            (0..me.rqs.len())
                .filter(|&c| me.waiting_on(c) > 0)
                .max_by_key(|&c| (me.rqs[c].load, std::cmp::Reverse(c)))
        };
        let mut top = busiest(self);
        for k in 0..self.rqs.len() {
            let Some(b) = top.filter(|&b| b != k) else {
                continue;
            };
            let before = self.waiting_on(b);
            if self.is_idle(ctx, k) {
                self.idle_pull(ctx, k);
            } else if self.rounds.is_multiple_of(self.busy_every) {
                self.pull_from(ctx, k, b);
            }
            if self.waiting_on(b) != before {
                top = busiest(self);
            }
        }
    }

    fn reweight(&mut self, ctx: &Ctx, slot: Slot, old: u64) {
        if slot as usize >= self.ents.len() || self.ents[slot as usize].at == At::Off {
            if (slot as usize) < self.ents.len() {
                self.ents[slot as usize].weight = ctx.thread(slot).weight.max(1);
            }
            return;
        }
        // reweight_entity: the lag and the relative deadline scale by old / new.
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
        if e.at != At::Delayed {
            self.rqs[core].load = self.rqs[core].load - old + new;
            self.total_load = self.total_load - old + new;
        }
        if in_tree {
            self.insert(slot, core, e.at);
        }
    }

    fn place(&mut self, _ctx: &Ctx, slot: Slot, core: usize) {
        self.ensure(slot);
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
#[path = "eevdf_tests.rs"]
mod tests;
