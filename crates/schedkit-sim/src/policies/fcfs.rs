//! FCFS: first come, first served (seed 004, 2.7.2 I; seed 000's application task queue).
//!
//! One global FIFO queue; a thread runs until it finishes. Never preempts.
//! Key: enqueue ticket, so ties between simultaneous arrivals follow file order (the engine
//! creates threads in file order). Invariant: threads start in arrival order.

use crate::keyed::KeyPolicy;
use crate::policy::{Ctx, Enqueue};
use schedkit_core::trace::Slot;

pub struct Fcfs;

impl KeyPolicy for Fcfs {
    type Key = u64;
    const NAME: &'static str = "fcfs";
    const PREEMPTIVE: bool = false;
    const FIFO: bool = true;
    fn key(&self, _ctx: &Ctx, _slot: Slot, _why: Enqueue, ticket: u64) -> u64 {
        ticket
    }
}
