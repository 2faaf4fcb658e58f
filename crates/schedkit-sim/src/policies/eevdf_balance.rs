//! The `eevdf` model's placement and load balancing (`select_task_rq_fair`,
//! `sched_balance_rq`, newidle balance, `can_migrate_task`): the second half of
//! `eevdf.rs`'s `impl Eevdf`, cut out to keep that file readable. The rules:
//!
//! - **Per-core queues and balancing** (`select_task_rq_fair`, `sched_balance_rq`, newidle):
//!   a new thread goes to the idlest core by `sched_balance_find_dst_cpu` (the fork path:
//!   spare capacity before fully busy before overloaded, by PELT utilisation and runnable
//!   averages; then more idle CPUs and less utilisation, or less load; against the
//!   spawner's core, the local group, when `[policy] spawner` names one; `find_dst_cpu`); a
//!   waking one to its previous core if that is idle, else to the first idle
//!   core it may use, else back to its previous core (`select_idle_sibling` on one LLC). A
//!   core that runs out of work may pull a waiting thread at once (newidle balance, tried with
//!   the chance its recent success rate gives, `eevdf_newidle.rs`; cores start idle, not out
//!   of work); idle cores
//!   balance every `balance_interval` (and only then: an idle CPU sleeps until a busy one's
//!   tick kicks its balance, where the engine asks every idle core at every event); busy ones each on its own schedule
//!   (`sched_balance_domains`, `get_sd_balance_interval`): its `sd->balance_interval` (one
//!   millisecond per CPU at first, `min_interval`, up to twice that) times `busy_factor` (16),
//!   in jiffies less one, after its own last balance. `sched_balance_rq` resets the interval
//!   to `min_interval` after an imbalance (moved or failed) and doubles it when it finds the
//!   domain balanced, so on 2 CPUs a busy core balances 28 ms after an imbalance and 60 ms
//!   after a balanced look (the busiest core finds itself balanced).
//! - **What decides a migration** (`sched_balance_find_src_group`, `calculate_imbalance`,
//!   `detach_tasks`, `can_migrate_task`, `task_hot`, `migrate_task_rq_fair`): busy cores
//!   balance **PELT** loads (`eevdf_pelt.rs`: every thread's load average follows its weight
//!   while runnable and decays with a 32 ms half-life while it sleeps; a queue's load is the
//!   sum of the averages attached to it, sleepers' blocked load included; a thread's average
//!   moves with it; with the task group a core's load is the group entity's and a thread's
//!   its `task_h_load` share of it, `eevdf_group.rs`). Loads are compared per unit of
//!   capacity (`avg_load = load x 1024 / capacity`), a core's capacity being 1024 less the
//!   PELT utilisation of its real-time threads (`scale_rt_capacity`; no IRQ-time part: this
//!   kernel has no IRQ time accounting), in the kernel's integers (`calculate_imbalance`).
//!   Between two overloaded cores nothing moves unless the busiest load
//!   exceeds the local one by `imbalance_pct` (117 for a one-LLC domain, `sd_init`, when the
//!   scenario keeps the spec's default 125, seed 004's value for `cfs`); a busy core running
//!   one thread takes any excess over the average if its utilisation leaves it no spare
//!   capacity (`group_has_capacity`: below 1024 x 100 / `imbalance_pct` of its capacity),
//!   and nothing if it does (`sibling_imbalance` is 0 for a CPU that is not idle; a hog
//!   that shared its core and has it back alone is such a core for tens of milliseconds).
//!   The imbalance is `min((busiest - avg) x cap_b, (avg - local) x cap_l) / 1024`. A waiting thread moves when its
//!   load average, halved once per earlier failed balance (`nr_balance_failed`), fits in
//!   what is left of it, least recently picked or enqueued first (the tail of `cfs_tasks`), and when it
//!   is not cache-hot: a thread that stopped running less than `sysctl_sched_migration_cost`
//!   (0.5 ms) ago stays unless more than `cache_nice_tries` (1) balances of the local core
//!   failed in a row; a thread whose slice ended at the balancing tick counts as still
//!   running (`task_on_cpu`: the kernel balances from the tick before it reschedules), so a
//!   lone thread never looks like a waiting one; and the thread a core switches to at that
//!   tick is on its CPU too when another core's balance looks (the switch happens at the
//!   tick's interrupt, the remote balance from a softirq after gathering every queue's
//!   statistics; traced on 6.18: of 368 tick instants at which a patterned thread waited on
//!   a core, the other core's balance took it 4 times). A balance that moves nothing counts
//!   as failed; a balanced pair, a move,
//!   or finding every candidate pinned elsewhere (`LBF_ALL_PINNED`: no thread of the busiest
//!   core, its running one included, may run here) resets the count. A
//!   moved thread keeps its lag and its relative deadline (the migration path since 6.12).

use super::*;

/// The kernel's `busy_factor`: a CPU that has work balances this many times less often.
pub(super) const BUSY_FACTOR: u64 = 16;

/// `LOAD_AVG_PERIOD` ms: how often the nohz idle balancer refreshes idle CPUs' blocked
/// load (`nohz.next_blocked`).
const NOHZ_BLOCKED_EVERY: u64 = 32_000_000;

/// `sd->min_interval` of the one domain (`sd_init`): `sd_weight` ms, the domain's CPU count
/// (`max_interval` is twice that).
pub(super) fn min_interval(cores: usize) -> u64 {
    cores as u64 * Nanos::from_ms(1).0
}

/// Rounds between two balances of a busy core whose `sd->balance_interval` is `interval`
/// (`get_sd_balance_interval` for a busy CPU): `interval x busy_factor`, to jiffies rounded
/// up (`msecs_to_jiffies`), less one jiffy (5.10 on: "preventing their balancing periods from
/// being multiples of each other"), clamped to 1 .. `max_load_balance_interval` (HZ x CPUs /
/// 10 jiffies, 0.1 s per CPU). The round stands for the jiffy. 2 CPUs, 4 ms rounds: 7 rounds
/// (28 ms) at the 2 ms minimum, 15 (60 ms) at the 4 ms maximum.
pub(super) fn busy_rounds(interval: u64, round: u64, cores: usize) -> u64 {
    let round = round.max(1);
    let max = (cores as u64 * Nanos::from_ms(100).0 / round).max(1);
    (BUSY_FACTOR * interval)
        .div_ceil(round)
        .saturating_sub(1)
        .clamp(1, max)
}

/// `MAX_PINNED_INTERVAL`: a balance that found every candidate pinned elsewhere may double
/// the interval up to 512 ms (past `max_interval`).
pub(super) const MAX_PINNED_INTERVAL: u64 = 512_000_000;

/// How a periodic balance of a core ended (`sched_balance_rq`), which tunes its
/// `sd->balance_interval` (`Eevdf::tune`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lb {
    /// A thread moved.
    Moved,
    /// An imbalance was found but nothing could move (too heavy or cache-hot).
    Failed,
    /// No imbalance (`out_balanced`).
    Balanced,
    /// Every candidate was pinned elsewhere (`out_all_pinned`).
    AllPinned,
}

impl Eevdf {
    /// The thread `pick_eevdf(core, None)` would pick now, without side effects: the eligible
    /// waiting thread with the earliest deadline (delayed ones, which a pick would dequeue
    /// on the way, are passed over).
    pub(super) fn peek_pick(&mut self, core: usize) -> Option<Slot> {
        let sums = self.sums(core);
        let rq = &self.rqs[core].tree;
        rq.iter()
            .find(|k| {
                let e = &self.ents[k.2 as usize];
                e.at == At::Queued && Self::eligible(sums, e.vruntime)
            })
            .or_else(|| rq.first())
            .map(|k| k.2)
    }

    /// One periodic balance round (`sched_balance_domains` over every core): the body of
    /// the dispatcher's `balance` hook.
    pub(super) fn balance_round(&mut self, ctx: &Ctx) {
        self.now = ctx.now.0;
        self.settle_all(ctx);
        self.rounds += 1;
        // entity_tick -> update_cfs_group: a core with work reweights its group entity at its
        // tick, before the balancing softirq reads the loads. An idle core's blocked load,
        // and so its contribution to the group's load, is brought up to date by the nohz
        // idle balancer's stats kick (`update_blocked_averages`), at most every
        // LOAD_AVG_PERIOD ms (`nohz.next_blocked`): without it a core whose threads exited
        // within a millisecond of its last refresh would count them in the group's load for
        // good, and keep the other cores' group weights low.
        let blocked = self.now >= self.next_blocked;
        if blocked {
            self.next_blocked = self.now + NOHZ_BLOCKED_EVERY;
        }
        for c in 0..self.rqs.len() {
            if self.rqs[c].nr > 0 || blocked {
                self.group_update(c);
            }
        }
        // sched_balance_domains: a core balances when its own interval since its own last
        // balance has passed; idle ones every round (an idle CPU's interval is
        // msecs_to_jiffies(sd_weight ms), one jiffy here), busy ones every `busy_rounds` of
        // their `sd->balance_interval`, which each balance's outcome tunes (`Lb`).
        let n = self.rqs.len();
        let mut busy_round = false;
        for k in 0..n {
            let idle = self.is_idle(ctx, k);
            let due = idle
                || self.rounds >= self.last[k] + busy_rounds(self.interval[k], self.round_ns, n);
            self.due[k] = due;
            busy_round |= due && !idle;
        }
        if self.waiting == 0 {
            // Nothing waits anywhere: every core that balances finds the domain balanced
            // (out_balanced, which also clears nr_balance_failed).
            for k in 0..n {
                if self.due[k] {
                    self.last[k] = self.rounds;
                    self.failed[k] = 0;
                    self.tune(k, Lb::Balanced);
                }
            }
            return;
        }
        // Busy cores balance by PELT load; idle ones pull any waiting thread (by runnable
        // weight, as newidle does).
        self.balancing = true;
        // A core whose running thread's slice ended at this tick switches (to the thread it
        // picks now) from the tick's interrupt, while the other cores' balances run from
        // their softirqs and must first gather every queue's statistics: the thread it
        // switches to is on its CPU by the time a remote `detach_tasks` looks.
        for c in 0..n {
            self.tick_next[c] = match self.rqs[c].prev {
                Some((_, t)) if t == self.now => self.peek_pick(c),
                _ => None,
            };
        }
        if busy_round {
            for c in 0..self.rqs.len() {
                self.loads[c] = self.root_load(c);
                self.caps[c] = self.capacity(c);
            }
        }
        // The most loaded queue with a waiting thread changes only when something moves, so
        // a round costs O(cores) when loads are even (as the cfs model's balance does).
        let busiest = |me: &Self| {
            (0..me.rqs.len())
                .filter(|&c| me.overloaded(c))
                .max_by_key(|&c| {
                    let l = if busy_round {
                        me.loads[c] * 1024 / me.caps[c]
                    } else {
                        me.rqs[c].load
                    };
                    (l, std::cmp::Reverse(c))
                })
        };
        // Found only once a core is due (most rounds none is, on many cores), as in the
        // kernel, where a CPU looks for the busiest group only when its own balance is due.
        let mut top = None;
        for k in 0..n {
            if !self.due[k] {
                continue;
            }
            let top = top.get_or_insert_with(|| busiest(self));
            self.last[k] = self.rounds;
            // No other overloaded queue (or k is the busiest itself): out_balanced.
            let Some(b) = top.filter(|&b| b != k) else {
                self.failed[k] = 0;
                self.tune(k, Lb::Balanced);
                continue;
            };
            let before = self.waiting_on(b);
            let lb = if self.is_idle(ctx, k) {
                self.idle_pull(ctx, k)
            } else {
                self.pull_from(ctx, k, b)
            };
            self.tune(k, lb);
            if self.waiting_on(b) != before {
                *top = busiest(self);
            }
        }
        self.balancing = false;
    }

    /// The end of `sched_balance_rq` for core `k`'s periodic balance: an imbalance (a
    /// thread moved, or none could) resets `sd->balance_interval` to `min_interval`; a
    /// balanced domain doubles it up to `max_interval` ("tune up the balancing interval"),
    /// up to `MAX_PINNED_INTERVAL` when every candidate was pinned elsewhere. So a core that
    /// keeps finding itself the busiest balances every 60 ms on 2 CPUs instead of 28.
    pub(super) fn tune(&mut self, k: usize, lb: Lb) {
        let min = min_interval(self.rqs.len());
        let iv = &mut self.interval[k];
        match lb {
            Lb::Moved | Lb::Failed => *iv = min,
            Lb::Balanced if *iv < 2 * min => *iv *= 2,
            Lb::AllPinned if *iv < MAX_PINNED_INTERVAL || *iv < 2 * min => *iv *= 2,
            _ => {}
        }
    }

    /// `task_hot`: it ran less than `sysctl_sched_migration_cost` ago.
    pub(super) fn hot(&self, slot: Slot) -> bool {
        let left = self.ents[slot as usize].left;
        left != u64::MAX && self.now < left.saturating_add(MIGRATION_COST)
    }

    /// `select_task_rq_fair` on one LLC (module docs).
    pub(super) fn select_core(&mut self, ctx: &Ctx, slot: Slot, woken: bool) -> usize {
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
        self.find_dst_cpu(ctx, slot)
    }

    /// `sched_balance_find_dst_cpu` for a new thread (`select_task_rq_fair` with
    /// `SD_BALANCE_FORK`): `sched_balance_find_dst_group` over the domain's one-CPU groups,
    /// each classed by `group_classify` from `update_sg_wakeup_stats` (capacity 1024):
    /// overloaded when more than one thread is runnable and `util x imbalance_pct` exceeds
    /// the capacity (or `runnable x 100` exceeds `capacity x imbalance_pct`), fully busy when
    /// it has no spare capacity left by the same tests, else with spare capacity. The
    /// idlest other group is the lowest class (`update_pick_idlest`); among groups with spare
    /// capacity the one with more idle CPUs, then the lower utilisation; among busy ones
    /// the lower load (`root_load`); the first on a tie. Against the local group (the
    /// spawner's core, the spawner counted as running there, `eevdf_group.rs`) the new thread
    /// stays local unless the idlest is of a lower class, or of the same class with more
    /// idle CPUs (spare capacity) or, both busy, with a load below the local one by more than
    /// `imbalance_pct` and `NICE_0_LOAD x (imbalance_pct - 100) / 100`. Without a spawner
    /// the idlest wins, as when the kernel skips the local group. So on two CPUs a new thread
    /// goes to an idle one first, then beside a new thread whose initial utilisation
    /// (`post_init_entity_util_avg`: half the spare capacity) still leaves room, before a
    /// core that a long-running thread fills.
    pub(super) fn find_dst_cpu(&mut self, ctx: &Ctx, slot: Slot) -> usize {
        const CAP: u64 = 1024;
        let t = ctx.thread(slot);
        let local = self.spawner_core(ctx).filter(|&c| t.allowed_on(c));
        let this = &*self;
        let pct = this.imbalance_pct as u64;
        let now = this.now;
        // (class, load, idle CPUs, utilisation) of core c.
        let stats = |c: usize| {
            let rq = &this.rqs[c];
            let nr = rq.nr as u64 + u64::from(Some(c) == local);
            let util = rq.util.at_time(now, if rq.nr > 0 { CAP } else { 0 });
            let runnable = rq.runnable.at_time(now, rq.nr as u64 * CAP);
            let busy_runnable = CAP * pct < runnable * 100;
            let class = if nr > 1 && (util * pct > CAP * 100 || busy_runnable) {
                2u8
            } else if nr >= 1 && (busy_runnable || CAP * 100 <= util * pct) {
                1
            } else {
                0
            };
            let idle = u64::from(nr == 0 && this.is_idle(ctx, c));
            (class, this.root_load(c), idle, util)
        };
        let idlest = (0..this.rqs.len())
            .filter(|&c| t.allowed_on(c) && Some(c) != local)
            .min_by_key(|&c| match stats(c) {
                (0, _, idle, util) => (0, 1 - idle, util),
                (class, load, _, _) => (class, load, 0),
            });
        let (Some(l), Some(i)) = (local, idlest) else {
            return idlest.or(local).unwrap_or(0);
        };
        let ((lc, ll, li, _), (ic, il, ii, _)) = (stats(l), stats(i));
        let stay = match lc.cmp(&ic) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            _ if lc == 0 => li >= ii,
            _ => il >= ll + NICE_0_LOAD * (pct - 100) / 100 || 100 * ll <= pct * il,
        };
        if stay {
            l
        } else {
            i
        }
    }

    /// `post_init_entity_util_avg`: a new thread starts with the queue's utilisation per
    /// unit of load times its weight, at most half the capacity the queue has left (all of
    /// that half on an idle queue), and as much runnable average; it joins the queue's sums.
    pub(super) fn post_init_util(&mut self, core: usize, weight: u64) -> u64 {
        let now = self.now;
        let rq = &mut self.rqs[core];
        rq.advance_nr(now);
        rq.avg.advance(now, rq.load);
        let cap = 1024u64.saturating_sub(rq.util.load) / 2;
        let u = if rq.util.load != 0 {
            (rq.util.load * weight / (rq.avg.load + 1)).min(cap)
        } else {
            cap
        };
        rq.util.load += u;
        rq.runnable.load += u;
        u
    }

    /// `update_curr` before a thread joins `core`'s queue (`enqueue_entity` calls it before
    /// `place_entity`): the running thread's CPU time up to now goes into its vruntime, so
    /// V is current when the newcomer is placed. The engine applies an instant's wake-ups
    /// and arrivals before it charges the running threads, so without this a thread waking
    /// mid-slice was placed against a V that lagged by the running thread's uncharged time
    /// over the queue's weight, and gained that much lag at every wake-up (a 1 ms-every-5 ms
    /// sleeper beside two hogs kept 2-3 ms of lag and preempted at every wake-up).
    pub(super) fn catch_up(&mut self, ctx: &Ctx, core: usize) {
        if !self.catch_up {
            return;
        }
        let Some(c) = self.rqs[core].curr else { return };
        if ctx.running[core] != Some(c) || self.ents[c as usize].at != At::Running {
            return;
        }
        let (at, pre) = self.acct[core];
        if self.now > at {
            let d = self.now - at;
            self.ents[c as usize].pending += d;
            self.acct[core] = (self.now, pre + d);
        }
    }

    pub(super) fn mark(&mut self, core: usize, slot: Slot) {
        if self.rqs[core].placed.is_empty() {
            self.to_check.push(core);
        }
        self.rqs[core].placed.push(slot);
    }

    /// Moves a waiting thread to `to`, keeping its lag and relative deadline.
    pub(super) fn move_to(&mut self, slot: Slot, to: usize) {
        let from = self.ents[slot as usize].core;
        if from == to {
            return;
        }
        let lag = self.lag(slot, from);
        self.erase(slot);
        self.sub_load(from, slot);
        self.move_load(slot, from, Some(to));
        let rel = self.ents[slot as usize].deadline - self.ents[slot as usize].vruntime;
        self.ents[slot as usize].vlag = lag;
        self.place(slot, to, false);
        let e = &mut self.ents[slot as usize];
        e.deadline = e.vruntime + rel;
        self.add_load(to, slot);
        self.insert(slot, to, At::Queued);
        // attach_task enqueues it: the head of the new queue's cfs_tasks.
        self.stamp(slot);
        self.mark(to, slot);
    }

    /// Whether `s` waits (not delayed) on its queue and may run on `k` (the cpumask part
    /// of `can_migrate_task`).
    pub(super) fn allowed(&self, ctx: &Ctx, s: Slot, k: usize) -> bool {
        self.ents[s as usize].at == At::Queued && ctx.thread(s).allowed_on(k)
    }

    /// The `task_hot` part of `can_migrate_task`: a cache-hot thread stays unless more than
    /// `cache_nice_tries` balances of `k` failed in a row.
    pub(super) fn cold_enough(&self, s: Slot, k: usize) -> bool {
        // The kernel balances from the tick's softirq, before the CPU reschedules: a thread
        // whose slice ended at this tick is still on its CPU (`task_on_cpu`), which the
        // engine's order (slice ends, then the balance, then picks) would otherwise hide.
        if self.balancing
            && (self.ents[s as usize].left == self.now
                || self.tick_next[self.ents[s as usize].core] == Some(s))
        {
            return false;
        }
        self.failed[k] > CACHE_NICE_TRIES || !self.hot(s)
    }

    /// `group_has_capacity` for a busy one-CPU group: spare capacity unless its runnable
    /// average exceeds the capacity by `imbalance_pct` or its utilisation reaches the
    /// capacity less that margin. A busy core with spare capacity pulls nothing in its
    /// periodic balance: `calculate_imbalance` gives a local group with spare capacity the
    /// difference in running tasks (`sibling_imbalance`), which is 0 for a CPU that is not
    /// idle. So a thread that shared a hog's core and left it leaves the hog's utilisation
    /// (about half while they shared) below the margin, and the hog's core takes nothing
    /// more until its utilisation has grown back (PELT, tens of milliseconds).
    pub(super) fn has_spare(&self, c: usize) -> bool {
        let rq = &self.rqs[c];
        let cap = self.capacity(c);
        let pct = self.imbalance_pct as u64;
        let util = rq.util.at_time(self.now, if rq.nr > 0 { 1024 } else { 0 });
        let runnable = rq.runnable.at_time(self.now, rq.nr as u64 * 1024);
        if cap * pct < runnable * 100 {
            return false;
        }
        cap * 100 > util * pct
    }

    /// Whether `c` has a thread that waits while another runs (an overloaded one-CPU group),
    /// counting a thread whose slice ended at this tick as still running (`cold_enough`).
    pub(super) fn overloaded(&self, c: usize) -> bool {
        self.rqs[c].nr >= 2 && self.waiting_on(c) > 0
    }

    /// The waiting (not delayed) thread of `core` picked or enqueued least recently that may
    /// move to `k` (`detach_one_task`: the tail of `cfs_tasks`); `Err(true)` when some were allowed
    /// on `k` but all cache-hot, `Err(false)` when none was allowed.
    pub(super) fn first_movable(&self, ctx: &Ctx, core: usize, k: usize) -> Result<Slot, bool> {
        // The first of `movable`'s order, without building the list (newidle pulls are
        // frequent).
        let mut any = false;
        self.rqs[core]
            .tree
            .iter()
            .filter(|x| self.allowed(ctx, x.2, k))
            .inspect(|_| any = true)
            .filter(|x| self.cold_enough(x.2, k))
            .map(|&(d, t, s)| (self.ents[s as usize].picked, d, t, s))
            .min()
            .map(|x| x.3)
            .ok_or(any)
    }

    /// Every waiting (not delayed) thread of `core` that may run on `k`, cache-hot or not,
    /// least recently picked or enqueued first (the kernel moves a task to the head of
    /// `cfs_tasks` when it is picked or enqueued, `Eevdf::stamp`, and `detach_tasks` walks
    /// from the tail: cache-cold threads, which have waited longest and so carry positive
    /// lag, move first). Ties by deadline, then ticket.
    pub(super) fn movable(&self, ctx: &Ctx, core: usize, k: usize) -> Vec<Slot> {
        let mut v: Vec<(u64, i64, u64, Slot)> = self.rqs[core]
            .tree
            .iter()
            .filter(|x| self.allowed(ctx, x.2, k))
            .map(|&(d, t, s)| (self.ents[s as usize].picked, d, t, s))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|x| x.3).collect()
    }

    /// Core `c`'s capacity for the fair class: 1024 less its real-time utilisation
    /// (`scale_rt_capacity`; no IRQ-time or deadline part).
    pub(super) fn capacity(&self, c: usize) -> u64 {
        1024u64
            .saturating_sub(self.rqs[c].rt_util.at_time(self.now))
            .max(1)
    }

    /// `calculate_imbalance` for a busy core `k` pulling from the busiest `b` (one-CPU
    /// groups, the domain's statistics over every core), in the kernel's integers: each
    /// group's `avg_load` is its load per unit of capacity (`load x 1024 / capacity`), the
    /// domain's the total load over the total capacity; nothing moves unless `b`'s is above
    /// both `k`'s and the domain's (and, when `k` is overloaded too, above `k`'s by
    /// `imbalance_pct`), and the imbalance is `min((b - avg) x cap_b, (avg - k) x cap_k) /
    /// 1024`. With equal capacities it is the spec's eq. 4.2; a core whose capacity a
    /// real-time thread takes a part of looks that much more loaded.
    /// Reads the loads and capacities of the balance round (`loads`, `caps`).
    pub(super) fn imbalance(&self, b: usize, k: usize, pct: u32) -> Option<u64> {
        let (cb, ck) = (self.caps[b], self.caps[k]);
        let total: u64 = self.loads.iter().sum();
        let total_cap: u64 = self.caps.iter().sum();
        let sds = total * 1024 / total_cap;
        let (bl, kl) = (self.loads[b] * 1024 / cb, self.loads[k] * 1024 / ck);
        if kl >= bl || kl >= sds || bl <= sds || 100 * bl <= pct as u64 * kl {
            return None;
        }
        Some(((bl - sds) * cb).min((sds - kl) * ck) / 1024)
    }

    /// Newidle (and idle) balance: one waiting thread `k` may run, from the most loaded
    /// queue having one. Returns how it ended; a pull that found only cache-hot threads
    /// counts as a failed balance of `k`, one that found none allowed (all pinned
    /// elsewhere: `LBF_ALL_PINNED`) resets the count.
    pub(super) fn idle_pull(&mut self, ctx: &Ctx, k: usize) -> Lb {
        let mut order: Vec<usize> = (0..self.rqs.len()).filter(|&c| c != k).collect();
        // By runnable weight now (a cheap stand-in for the PELT load the kernel's
        // find_busiest_queue reads; newidle pulls are frequent).
        order.sort_by_key(|&c| (std::cmp::Reverse(self.rqs[c].load), c));
        let mut hot = false;
        for b in order {
            match self.first_movable(ctx, b, k) {
                Ok(s) => {
                    self.move_to(s, k);
                    self.failed[k] = 0;
                    return Lb::Moved;
                }
                Err(h) => hot |= h,
            }
        }
        self.failed[k] = if hot { self.failed[k] + 1 } else { 0 };
        // None allowed here counts as balanced, not all-pinned: the queues looked at may
        // simply have had nothing waiting.
        if hot {
            Lb::Failed
        } else {
            Lb::Balanced
        }
    }

    /// Core `k` has just run out of work: a newidle balance, tried with the chance its
    /// success rate gives when the root domain is overloaded (`eevdf_newidle.rs`).
    pub(super) fn newidle(&mut self, ctx: &Ctx, k: usize) {
        if !self.rd_overloaded(ctx) {
            return;
        }
        // sched_balance_update_blocked_averages, before the domain loop and its die.
        self.group_update(k);
        let Some(weight) = self.newidle[k].throw(&mut self.rng) else {
            return;
        };
        let pulled = self.waiting > 0 && self.idle_pull(ctx, k) == Lb::Moved;
        self.newidle[k].ran(weight, pulled);
    }

    /// Whether some core has two or more runnable threads of either class (the kernel's
    /// `rd->overloaded`, read as it stands now rather than as last refreshed).
    fn rd_overloaded(&self, ctx: &Ctx) -> bool {
        (0..self.rqs.len()).any(|c| {
            let rt_running = ctx.running[c].is_some_and(|s| is_rt(ctx, s));
            self.rqs[c].nr + self.rt.queued_on(c) + rt_running as usize >= 2
        })
    }

    /// Periodic balance of busy core `k` against the busiest queue, by PELT load
    /// (`sched_balance_rq`, `sched_balance_find_src_group`, `calculate_imbalance`): when `k`
    /// is overloaded too (a thread waits there), nothing moves unless the busiest load
    /// exceeds `k`'s by `imbalance_pct`; when `k` runs one thread (fully busy) any excess
    /// over the average counts. A waiting thread moves when its load average, halved once
    /// per earlier failed balance of `k`, fits in what is left of the imbalance
    /// (`detach_tasks`, migrate_load) and it is not cache-hot (`can_migrate_task`). A balance
    /// that finds an imbalance and moves nothing counts as failed; a balanced pair or a move
    /// resets the count. So the thesis's 4.2.2 case (1024 against 4 x 335, imbalance 158)
    /// moves a 335 thread at the third balance, where seed 004's CFS (eq. 4.3) never moves
    /// it; and 5 against 4 nice-0 threads (5120 > 1.17 x 4096) moves one at the second.
    pub(super) fn pull_from(&mut self, ctx: &Ctx, k: usize, b: usize) -> Lb {
        // A moved thread is placed against k's V, which must include k's running time.
        self.catch_up(ctx, k);
        let pct = if self.overloaded(k) {
            self.imbalance_pct
        } else {
            100
        };
        // A busy core with spare capacity takes nothing (`has_spare`).
        if !self.overloaded(k) && self.has_spare(k) {
            self.failed[k] = 0;
            return Lb::Balanced;
        }
        let Some(imbalance) = self.imbalance(b, k, pct) else {
            self.failed[k] = 0;
            return Lb::Balanced;
        };
        let cand = self.movable(ctx, b, k);
        if cand.is_empty() {
            // can_migrate_task clears LBF_ALL_PINNED for any task allowed on k, the running
            // one too, before it refuses that one (task_on_cpu): then the balance merely
            // failed. Only when no thread of b may run on k is it out_all_pinned.
            let curr_allowed = ctx.running[b].is_some_and(|c| ctx.thread(c).allowed_on(k));
            if curr_allowed {
                self.failed[k] += 1;
                return Lb::Failed;
            }
            self.failed[k] = 0;
            return Lb::AllPinned;
        }
        let shift = self.failed[k].min(63);
        let mut rem = imbalance as i128;
        let mut moved = false;
        for s in cand {
            if rem <= 0 {
                break;
            }
            let load = self.h_load(s).max(1) as i128;
            if (load >> shift) > rem || !self.cold_enough(s, k) {
                continue;
            }
            self.move_to(s, k);
            moved = true;
            rem -= load;
        }
        if moved {
            self.loads[b] = self.root_load(b);
            self.loads[k] = self.root_load(k);
        }
        self.failed[k] = if moved { 0 } else { self.failed[k] + 1 };
        if moved {
            Lb::Moved
        } else {
            Lb::Failed
        }
    }
}

impl RunQueue {
    /// Brings the utilisation and runnable averages up to `now` before `nr` changes.
    pub(super) fn advance_nr(&mut self, now: u64) {
        let nr = self.nr as u64;
        self.util.advance(now, if nr > 0 { 1024 } else { 0 });
        self.runnable.advance(now, nr * 1024);
    }
}
