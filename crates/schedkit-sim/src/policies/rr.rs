//! Round robin with a fixed quantum (seed 004, 2.7.2 IV).
//!
//! One global FIFO queue; the head runs for at most `quantum`, then goes to the tail. A
//! thread that arrives at the instant a quantum expires is queued *before* the preempted one
//! (the engine applies arrivals before slice ends at one instant). If the expired thread is
//! alone, it continues without a context switch.
//! Key: enqueue ticket. Invariant: no thread runs longer than one quantum while another waits.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

pub struct RoundRobin;

impl KeyPolicy for RoundRobin {
    type Key = u64;
    const NAME: &'static str = "rr";
    const PREEMPTIVE: bool = false;
    const FIFO: bool = true;
    fn key(&self, _ctx: &Ctx, _slot: Slot, _why: Enqueue, ticket: u64) -> u64 {
        ticket
    }
    fn slice(&self, ctx: &Ctx) -> Option<Nanos> {
        Some(ctx.spec.quantum())
    }
}
