//! The `eevdf` model's task group and spawner (`[policy] task_group`, `[policy] spawner`):
//! what the balancer and the fork path see of a job whose threads share one task group, and
//! where the thread that creates them runs. Part of `eevdf.rs`'s `impl Eevdf`.
//!
//! Source: `kernel/sched/fair.c` of Linux 6.6 and later: `calc_group_shares`,
//! `update_cfs_group`, `update_tg_load_avg`, `update_tg_cfs_load` (attach and detach
//! propagation), `task_h_load`, and `sched_balance_find_dst_group`'s local group.
//!
//! **Why.** In `schedkit run` the job's threads are threads of schedkit, in its session's
//! autogroup (or its cgroup): one task group. The root run queue of each CPU then holds one
//! entity for the group, whose weight is the group's shares (1024 at nice 0) split over the
//! CPUs in proportion to the group's load on each (`calc_group_shares`), and whose load
//! average is that weight times its runnable average. So three new threads on a free CPU
//! weigh 3/4 of the group (768), less than a hog alone on the other CPU (1024, until that
//! CPU's own next update recomputes it), and a fork path comparing the two sends a fourth
//! thread to the free CPU too, where with root-level threads (3,072 against 1,024) it would
//! go beside the hog. `bench/fidelity/fork-split.c` shows both on Linux 6.18
//! (docs/results/fidelity.md, "short-lived: the fork path").
//!
//! **What is modelled.** Per core: the group entity's weight `gw`, recomputed at that core's
//! own updates only (a thread joining or leaving its queue, its tick while it has work) from
//! `max(runnable weight, load average)` of the group's queue there and the group's total
//! load `tg_load`, in which each core's contribution is refreshed at most once a millisecond
//! and only when it moved by more than 1/64 (`update_tg_load_avg`); the entity's runnable
//! average `grun` (0..1024: 1024 while the group has a runnable thread there, decaying
//! otherwise), which jumps by a thread's runnable share when one attaches (a new or moved
//! thread) and is cut to the queue's load per unit of runnable weight when one leaves
//! (`update_tg_cfs_load`'s estimate). The core's load is `gw x grun / 1024`; a thread's
//! load for `detach_tasks` is its own average times that over the queue's
//! (`task_h_load`). The group's shares are 1024 (a nice-0 autogroup): the balancer's
//! decisions depend on ratios of these loads, not on their scale, except through the
//! `MIN_SHARES` floor and the fork path's fixed margin (`NICE_0_LOAD x (imbalance_pct -
//! 100) / 100`, 174), which under a nice -20 autogroup's 88761 shares (the fidelity runs')
//! is negligible and here is not.
//!
//! **The spawner.** The kernel's fork path compares the CPU the forking thread runs on (the
//! local group, the forking thread counted in its `nr_running`) with the idlest other one,
//! and keeps the new thread local unless the other is of a lower class, or as loaded but
//! with more idle CPUs, or (both busy) less loaded by more than `imbalance_pct`. With a
//! spawner the model does the same, the spawner's core being where its first thread last
//! ran; without one no core is local and the idlest wins.
//!
//! Left out: nested groups, groups other than the one, several groups' entities on one
//! queue, and the group entity's own vruntime (threads are scheduled within a core as
//! before: the group is the only entity at the root, so its weight does not change who runs).
//!
//! Invariants: `tg_load` is the sum of the cores' `contrib`; `gw` is within
//! `[MIN_SHARES, SHARES]`; `grun` is at most 1024.

use super::*;

/// The group's shares: a nice-0 autogroup (`scale_load_down(NICE_0_LOAD)`).
pub(super) const SHARES: u64 = 1024;
/// `MIN_SHARES`: the least weight a group entity gets.
const MIN_SHARES: u64 = 2;
/// `update_tg_load_avg` refreshes a queue's contribution at most this often (ns).
const TG_UPDATE_EVERY: u64 = 1_000_000;

impl Eevdf {
    /// `update_tg_load_avg` and `update_cfs_group` for core `c`'s group entity: its
    /// contribution to the group's load, then its weight.
    pub(super) fn group_update(&mut self, c: usize) {
        if !self.task_group {
            return;
        }
        let now = self.now;
        let rq = &mut self.rqs[c];
        rq.avg.advance(now, rq.load);
        let la = rq.avg.load;
        let g = &mut rq.group;
        g.run.advance(now, if rq.nr > 0 { 1024 } else { 0 });
        if g.contrib_at.is_none_or(|t| now >= t + TG_UPDATE_EVERY) {
            let d = la.abs_diff(g.contrib);
            if d * 64 > g.contrib || (g.contrib == 0 && d > 0) {
                self.tg_load = self.tg_load + la - g.contrib;
                g.contrib = la;
                g.contrib_at = Some(now);
            }
        }
        let l = rq.load.max(la);
        let tg_weight = self.tg_load - g.contrib + l;
        g.weight = (SHARES * l)
            .checked_div(tg_weight)
            .map_or(MIN_SHARES, |w| w.clamp(MIN_SHARES, SHARES));
    }

    /// Brings core `c`'s group runnable average up to now before its `nr` changes.
    pub(super) fn group_advance(&mut self, c: usize) {
        if self.task_group {
            let now = self.now;
            let rq = &mut self.rqs[c];
            rq.group.run.advance(now, if rq.nr > 0 { 1024 } else { 0 });
        }
    }

    /// Attach propagation: a thread with load average `la` and weight `w` joined core
    /// `c`'s group queue; the entity's runnable average grows by the thread's (clipped).
    pub(super) fn group_attach(&mut self, c: usize, la: u64, w: u64) {
        if !self.task_group {
            return;
        }
        self.group_advance(c);
        let g = &mut self.rqs[c].group;
        g.run.load = (g.run.load + la * 1024 / w.max(1)).min(1024);
        self.group_update(c);
    }

    /// Detach propagation: a thread left core `c` for good or for another core; the
    /// entity's runnable average is at most the queue's load per unit of runnable weight
    /// (0 when nothing runnable is left).
    pub(super) fn group_detach(&mut self, c: usize) {
        if !self.task_group {
            return;
        }
        self.group_advance(c);
        let rq = &mut self.rqs[c];
        let est = (1024 * rq.avg.load)
            .checked_div(rq.load)
            .map_or(0, |e| e.min(1024));
        rq.group.run.load = rq.group.run.load.min(est);
        self.group_update(c);
    }

    /// Core `c`'s load as the balancer sees it (`cfs_rq_load_avg` of the root): the group
    /// entity's load, or without a group the sum of the threads' averages.
    pub(super) fn root_load(&self, c: usize) -> u64 {
        let rq = &self.rqs[c];
        if !self.task_group {
            return rq.avg.at_time(self.now, rq.load);
        }
        let run = rq
            .group
            .run
            .at_time(self.now, if rq.nr > 0 { 1024 } else { 0 });
        rq.group.weight * run / 1024
    }

    /// `task_h_load`: thread `s`'s share of its core's load.
    pub(super) fn h_load(&self, s: Slot) -> u64 {
        let e = &self.ents[s as usize];
        let la = e.la.at_time(self.now, e.weight);
        if !self.task_group {
            return la;
        }
        let rq = &self.rqs[e.core];
        la * self.root_load(e.core) / (rq.avg.at_time(self.now, rq.load) + 1)
    }

    /// The core of the spawner (where its first thread, still alive, last ran), if the
    /// scenario names one and it has run. The thread is looked up once and then kept while
    /// its slot still holds it (slots of finished threads are reused), since the fork path
    /// asks at every arrival.
    pub(super) fn spawner_core(&mut self, ctx: &Ctx) -> Option<usize> {
        let p = self.spawner?;
        let alive = |s: usize| {
            ctx.threads
                .get(s)
                .is_some_and(|t| t.process == Some(p) && t.state != ThreadState::Done)
        };
        if !self.spawner_slot.is_some_and(alive) {
            self.spawner_slot = (0..ctx.threads.len()).find(|&s| alive(s));
        }
        ctx.threads[self.spawner_slot?]
            .last_core
            .filter(|&c| c < self.rqs.len())
    }
}

/// A core's task-group entity.
#[derive(Clone, Copy, Debug)]
pub(super) struct GroupEnt {
    /// Its weight (`se->load.weight`); a group entity starts at `NICE_0_LOAD`.
    pub weight: u64,
    /// Its runnable average, 0..1024 (`load_sum / divider`).
    pub run: Avg,
    /// The queue's contribution to the group's load (`tg_load_avg_contrib`) and when it was
    /// last refreshed.
    pub contrib: u64,
    pub contrib_at: Option<u64>,
}

impl Default for GroupEnt {
    fn default() -> GroupEnt {
        GroupEnt {
            weight: SHARES,
            run: Avg::default(),
            contrib: 0,
            contrib_at: None,
        }
    }
}
