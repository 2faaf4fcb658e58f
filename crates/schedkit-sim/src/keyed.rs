//! A global ready queue ordered by a per-policy key, shared by every policy that is "run the
//! thread with the smallest key": FCFS, SJF, SRTF, priority, RR, EDF/global EDF, RM, DM.
//!
//! Each of those policies is a small file that states its key, whether it preempts and its
//! time slice; this module holds the mechanism once, so tie-breaking and preemption behave
//! identically everywhere.
//!
//! - The queue is a `BTreeSet<(key, slot)>`: O(log n) enqueue, pick and remove. Keys end
//!   with the thread's global creation order or an enqueue ticket, so they are unique and
//!   ties break by arrival, then file order.
//! - Picking respects affinity by scanning from the smallest key to the first thread allowed
//!   on the core (O(log n) when no affinities are set).
//! - Preemption (preemptive policies only): walk the queue from the best thread while
//!   threads remain to place; give each an idle core it may use if there is one, else the
//!   core running the *worst* key it beats. This preempts exactly as many threads as needed
//!   (one per better waiting thread), never a chain of swaps.

use crate::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;
use std::collections::BTreeSet;

/// What a key-ordered policy must say.
pub trait KeyPolicy {
    /// Ordering key; smaller runs first. Must be unique per thread (end it with a ticket or
    /// the thread's `seq`).
    type Key: Ord + Copy + std::fmt::Debug;
    const NAME: &'static str;
    /// Whether a waiting thread with a smaller key takes the core of a running one.
    const PREEMPTIVE: bool;
    /// The key of `slot` now. `ticket` increases with every enqueue (FIFO order).
    fn key(&self, ctx: &Ctx, slot: Slot, why: Enqueue, ticket: u64) -> Self::Key;
    /// The time slice, if the policy has one.
    fn slice(&self, _ctx: &Ctx) -> Option<Nanos> {
        None
    }
}

/// The generic dispatcher over a [`KeyPolicy`].
pub struct Keyed<P: KeyPolicy> {
    policy: P,
    queue: BTreeSet<(P::Key, Slot)>,
    /// Key of each queued slot.
    keys: Vec<Option<P::Key>>,
    ticket: u64,
    any_affinity: bool,
}

impl<P: KeyPolicy> Keyed<P> {
    pub fn new(policy: P) -> Keyed<P> {
        Keyed {
            policy,
            queue: BTreeSet::new(),
            keys: Vec::new(),
            ticket: 0,
            any_affinity: false,
        }
    }

    fn key_slot(&mut self, slot: Slot) -> &mut Option<P::Key> {
        let i = slot as usize;
        if self.keys.len() <= i {
            self.keys.resize(i + 1, None);
        }
        &mut self.keys[i]
    }
}

impl<P: KeyPolicy> Dispatcher for Keyed<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.ticket += 1;
        let key = self.policy.key(ctx, slot, why, self.ticket);
        if ctx.thread(slot).affinity.is_some() {
            self.any_affinity = true;
        }
        *self.key_slot(slot) = Some(key);
        self.queue.insert((key, slot));
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        let found = if self.any_affinity {
            self.queue
                .iter()
                .find(|(_, s)| ctx.thread(*s).allowed_on(core))
                .copied()
        } else {
            self.queue.first().copied()
        };
        let (key, slot) = found?;
        self.queue.remove(&(key, slot));
        *self.key_slot(slot) = None;
        Some(slot)
    }

    fn time_slice(&mut self, ctx: &Ctx, _core: usize, _slot: Slot) -> Option<Nanos> {
        self.policy.slice(ctx)
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        if !P::PREEMPTIVE || self.queue.is_empty() {
            return;
        }
        // Current keys of running threads (a key may depend on remaining work).
        let mut idle: Vec<usize> = Vec::new();
        let mut busy: Vec<(P::Key, usize)> = Vec::new();
        for (core, r) in ctx.running.iter().enumerate() {
            match r {
                None => idle.push(core),
                Some(s) => busy.push((self.policy.key(ctx, *s, Enqueue::Preempted, 0), core)),
            }
        }
        if busy.is_empty() {
            return;
        }
        busy.sort();
        for &(key, slot) in self.queue.iter().take(ctx.cores) {
            let t = ctx.thread(slot);
            if let Some(i) = idle.iter().position(|&c| t.allowed_on(c)) {
                idle.swap_remove(i);
                continue;
            }
            // The worst running key this thread beats, on a core it may use.
            match busy.iter().rposition(|&(k, c)| k > key && t.allowed_on(c)) {
                Some(i) => {
                    out.push(busy.remove(i).1);
                }
                None => {
                    if !self.any_affinity {
                        break;
                    }
                }
            }
            if busy.is_empty() {
                break;
            }
        }
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        if let Some(key) = self.key_slot(slot).take() {
            self.queue.remove(&(key, slot));
        }
    }
}
