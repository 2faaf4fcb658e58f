//! RM: rate monotonic, fixed priorities by period, preemptive (Liu & Layland 1973).
//!
//! Shorter period = higher priority. Ties: release time, then creation order.
//! Guarantee: implicit-deadline sets with utilisation <= n(2^(1/n) - 1) are schedulable on one
//! core; above that bound RM may miss where EDF does not (the tests show {(2,5),(4,7)}).

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct Rm;

impl KeyPolicy for Rm {
    type Key = (Nanos, Nanos, u64);
    const NAME: &'static str = "rm";
    const PREEMPTIVE: bool = true;
    const KEY_CHANGES_WHILE_RUNNING: bool = false;
    fn key(&self, ctx: &Ctx, slot: Slot, _why: Enqueue, _ticket: u64) -> Self::Key {
        let t = ctx.thread(slot);
        (t.period, t.arrival, t.seq)
    }
}
