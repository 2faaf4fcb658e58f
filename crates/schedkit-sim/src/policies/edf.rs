//! EDF: earliest deadline first, preemptive; `edf` on one core and `gedf` (global EDF) on
//! several share this file (seed 001 section 2; Liu & Layland for one core).
//!
//! One global queue ordered by absolute deadline; a released job whose deadline is earlier
//! than that of a running thread preempts the running thread with the latest deadline.
//! Ties: release time, then creation order (FIFO, as seed 001's rule A). Threads without a
//! deadline (plain processes) sort after every real-time thread.
//! Guarantee: on one core, every implicit-deadline set with utilisation <= 1 meets all
//! deadlines. Global EDF has no such bound (Dhall's effect), which the tests show.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct Edf;

impl KeyPolicy for Edf {
    type Key = (Nanos, Nanos, u64);
    const NAME: &'static str = "edf";
    const PREEMPTIVE: bool = true;
    const KEY_CHANGES_WHILE_RUNNING: bool = false;
    fn key(&self, ctx: &Ctx, slot: Slot, _why: Enqueue, _ticket: u64) -> Self::Key {
        let t = ctx.thread(slot);
        (t.deadline, t.arrival, t.seq)
    }
}
