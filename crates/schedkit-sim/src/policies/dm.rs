//! DM: deadline monotonic, fixed priorities by relative deadline, preemptive
//! (Leung & Whitehead 1982).
//!
//! Shorter relative deadline = higher priority; equals RM for implicit deadlines. Ties:
//! release time, then creation order.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct Dm;

impl KeyPolicy for Dm {
    type Key = (Nanos, Nanos, u64);
    const NAME: &'static str = "dm";
    const PREEMPTIVE: bool = true;
    const KEY_CHANGES_WHILE_RUNNING: bool = false;
    fn key(&self, ctx: &Ctx, slot: Slot, _why: Enqueue, _ticket: u64) -> Self::Key {
        let t = ctx.thread(slot);
        (t.rel_deadline, t.arrival, t.seq)
    }
}
