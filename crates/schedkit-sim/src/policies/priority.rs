//! Static priority scheduling, non-preemptive (`priority`) and preemptive
//! (`priority-preemptive`) (seed 004, 2.7.2).
//!
//! The waiting thread with the smallest `priority` value runs. The preemptive variant lets an
//! arrival with a strictly smaller value take the core of the running thread with the largest
//! value. Ties: arrival, then file order.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct Priority<const PREEMPTIVE: bool>;

impl<const PREEMPTIVE: bool> KeyPolicy for Priority<PREEMPTIVE> {
    type Key = (i32, Nanos, u64);
    const NAME: &'static str = if PREEMPTIVE {
        "priority-preemptive"
    } else {
        "priority"
    };
    const PREEMPTIVE: bool = PREEMPTIVE;
    const KEY_CHANGES_WHILE_RUNNING: bool = false;
    fn key(&self, ctx: &Ctx, slot: Slot, _why: Enqueue, _ticket: u64) -> Self::Key {
        let t = ctx.thread(slot);
        (t.priority, t.arrival, t.seq)
    }
}
