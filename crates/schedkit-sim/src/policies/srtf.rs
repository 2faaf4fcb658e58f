//! SRTF: shortest remaining time first, preemptive SJF (seed 004, 2.7.2 III).
//!
//! The thread with the least remaining CPU time runs; an arrival with less remaining time than
//! a running thread preempts the running thread with the most remaining time. Equal remaining
//! time does not preempt. Ties: arrival, then file order.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct Srtf;

impl KeyPolicy for Srtf {
    type Key = (u64, Nanos, u64);
    const NAME: &'static str = "srtf";
    const PREEMPTIVE: bool = true;
    fn key(&self, ctx: &Ctx, slot: Slot, _why: Enqueue, _ticket: u64) -> Self::Key {
        let t = ctx.thread(slot);
        (t.remaining_or_max(), t.arrival, t.seq)
    }
}
