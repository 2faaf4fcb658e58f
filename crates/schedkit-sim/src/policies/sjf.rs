//! SJF: shortest job first, non-preemptive (seed 004, 2.7.2 II).
//!
//! When a core is free, the waiting thread with the smallest CPU burst runs to completion.
//! Ties: arrival time, then file order (FCFS among equals, as the thesis says).
//! Threads without a burst (run until the horizon) count as infinitely long.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct Sjf;

impl KeyPolicy for Sjf {
    type Key = (u64, Nanos, u64);
    const NAME: &'static str = "sjf";
    const PREEMPTIVE: bool = false;
    fn key(&self, ctx: &Ctx, slot: Slot, _why: Enqueue, _ticket: u64) -> Self::Key {
        let t = ctx.thread(slot);
        (t.remaining_or_max(), t.arrival, t.seq)
    }
}
