//! The real-time class above the kernel models' fair class (`eevdf`, `cfs`): threads of a
//! process with `class = "fifo"` (SCHED_FIFO, one priority).
//!
//! Source: `kernel/sched/rt.c` and the class order of `pick_next_task` (core.c): a runnable
//! real-time thread runs before any fair one, until it blocks (SCHED_FIFO has no slice);
//! when it is queued on a core running a fair thread, that thread is preempted at once
//! (`wakeup_preempt` across classes); it wakes on its previous core (`select_task_rq_rt`
//! keeps it there when that core runs a lower class). What the fair class sees: its running
//! thread stops (and is queued again) for the real-time thread's run, and the pick after it
//! is a fresh one (the previous task was of another class, so `set_next_entity` runs).
//!
//! Left out: priorities among real-time threads (one FIFO queue per core), real-time
//! balancing (`push_rt_task`, `pull_rt_task`), RT throttling, and the capacity a real-time
//! thread takes from the fair balancer's view (`scale_rt_capacity`).
//!
//! Invariant: a real-time thread is in at most one core's queue, and never in the fair
//! class's structures.

use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use std::collections::VecDeque;

pub(crate) struct RtClass {
    /// Per core: real-time threads waiting, first in first out.
    queued: Vec<VecDeque<Slot>>,
    /// Cores where a real-time thread was queued since the last `preempt` round.
    kick: Vec<usize>,
}

/// Whether `slot` runs in the real-time class.
pub(crate) fn is_rt(ctx: &Ctx, slot: Slot) -> bool {
    ctx.thread(slot).rt
}

impl RtClass {
    pub(crate) fn new(cores: usize) -> RtClass {
        RtClass {
            queued: (0..cores).map(|_| VecDeque::new()).collect(),
            kick: Vec::new(),
        }
    }

    /// Queues `slot` if it is a real-time thread (then the fair class must not see it);
    /// returns whether it was one.
    pub(crate) fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) -> bool {
        if !is_rt(ctx, slot) {
            return false;
        }
        let t = ctx.thread(slot);
        let n = self.queued.len();
        let core = t
            .last_core
            .filter(|&c| c < n && t.allowed_on(c))
            .or_else(|| (0..n).find(|&c| t.allowed_on(c)))
            .unwrap_or(0);
        if matches!(why, Enqueue::Preempted | Enqueue::Expired) {
            self.queued[core].push_front(slot);
        } else {
            self.queued[core].push_back(slot);
        }
        self.kick.push(core);
        true
    }

    /// The real-time thread `core` runs next, if any: before any fair thread.
    /// How many real-time threads wait on `core` (not counting one running there).
    pub(crate) fn queued_on(&self, core: usize) -> usize {
        self.queued[core].len()
    }

    pub(crate) fn pick(&mut self, core: usize) -> Option<Slot> {
        self.queued[core].pop_front()
    }

    /// Cores whose running fair thread a newly queued real-time thread preempts.
    pub(crate) fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        while let Some(core) = self.kick.pop() {
            if ctx.running[core].is_some_and(|c| !is_rt(ctx, c)) && !out.contains(&core) {
                out.push(core);
            }
        }
    }

    /// Drops `slot` from its queue (it finished or was stopped while waiting).
    pub(crate) fn remove(&mut self, slot: Slot) {
        for q in &mut self.queued {
            q.retain(|&s| s != slot);
        }
    }
}
