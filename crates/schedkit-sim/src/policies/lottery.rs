//! Lottery scheduling (seed 004, 2.7.2 V; Waldspurger & Weihl, "Lottery Scheduling:
//! Flexible Proportional-Share Resource Management", OSDI 1994).
//!
//! Every quantum (`policy.quantum`) an idle core holds a lottery among the ready threads that
//! may run on it: a thread wins with probability `tickets / sum of tickets`. The thread whose
//! quantum just expired takes part (the engine re-queues it before the core draws), and when
//! it wins again it simply continues. Over many quanta each thread's share of the CPU
//! converges to its ticket fraction (Table 2.5: 8/26, 4/26, 9/26, 5/26).
//!
//! Randomness: one ChaCha8 stream seeded from `policy.seed`, consumed in engine order (cores
//! in index order at each decision), so the same scenario and seed give the same schedule
//! byte for byte, and a different seed a different one.
//!
//! Cost: O(log n) per draw and per enqueue. Tickets live in Fenwick trees indexed by slot;
//! a draw picks a number in `[0, total)` and descends the tree to the slot whose ticket range
//! holds it. Affinity is exact, not by rejection: threads without affinity share one global
//! tree; a thread restricted to some cores is entered in one tree per allowed core, and a core
//! draws over the global tree plus its own (O(k log n) for a thread allowed on k cores).
//!
//! Invariants: a queued thread is in exactly one placement (the global tree, or the trees of
//! the cores it was allowed on when queued); every tree's total equals the tickets of the
//! threads in it; a draw on core c only returns a thread allowed on c.
//!
//! Tie-breaking: none is needed, a draw has one winner. Which slot owns which ticket range
//! (slot order) is fixed, so results depend only on the seed. Lottery never preempts before a
//! quantum ends; it is work-conserving (a core with an allowed ready thread always draws).

use crate::policy::{Ctx, Dispatcher, Enqueue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

/// A Fenwick (binary indexed) tree of ticket counts indexed by slot, growing on demand.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fenwick {
    /// 1-based tree over `cap` positions (`cap` a power of two, so a descent needs no bounds
    /// checks beyond `cap`).
    tree: Vec<u128>,
    /// The value at each position, to compute deltas and rebuild on growth.
    vals: Vec<u128>,
    total: u128,
}

impl Fenwick {
    fn cap(&self) -> usize {
        self.vals.len()
    }

    /// Sets position `i` to `v`.
    pub(crate) fn set(&mut self, i: usize, v: u128) {
        if i >= self.cap() {
            self.grow(i + 1);
        }
        let old = self.vals[i];
        if old == v {
            return;
        }
        self.vals[i] = v;
        self.total = self.total - old + v;
        let mut k = i + 1;
        while k <= self.cap() {
            self.tree[k] = self.tree[k] - old + v;
            k += k & k.wrapping_neg();
        }
    }

    /// Rebuilds for at least `need` positions (amortised O(1) per position).
    fn grow(&mut self, need: usize) {
        let cap = need.max(2 * self.cap()).max(16).next_power_of_two();
        self.vals.resize(cap, 0);
        self.tree = vec![0; cap + 1];
        for i in 1..=cap {
            self.tree[i] += self.vals[i - 1];
            let parent = i + (i & i.wrapping_neg());
            if parent <= cap {
                let v = self.tree[i];
                self.tree[parent] += v;
            }
        }
    }

    pub(crate) fn total(&self) -> u128 {
        self.total
    }

    /// The position whose range `[prefix(i), prefix(i) + vals[i])` holds `r` (`r < total`).
    pub(crate) fn find(&self, mut r: u128) -> usize {
        debug_assert!(r < self.total);
        let cap = self.cap();
        let mut pos = 0;
        let mut step = cap;
        while step > 0 {
            let next = pos + step;
            if next <= cap && self.tree[next] <= r {
                pos = next;
                r -= self.tree[next];
            }
            step >>= 1;
        }
        pos
    }
}

/// Where a queued thread's tickets are.
#[derive(Clone, Debug)]
enum Placement {
    Global,
    /// The cores it was allowed on when queued.
    Cores(Vec<usize>),
}

/// The lottery dispatcher.
pub struct Lottery {
    rng: ChaCha8Rng,
    global: Fenwick,
    /// Per-core trees for threads with affinity; created on first use.
    per_core: Vec<Fenwick>,
    queued: Vec<Option<Placement>>,
}

impl Lottery {
    pub fn new(seed: u64, cores: usize) -> Lottery {
        Lottery {
            rng: ChaCha8Rng::seed_from_u64(seed),
            global: Fenwick::default(),
            per_core: vec![Fenwick::default(); cores],
            queued: Vec::new(),
        }
    }

    fn insert(&mut self, ctx: &Ctx, slot: Slot) {
        let t = ctx.thread(slot);
        let tickets = t.tickets.max(1) as u128;
        let i = slot as usize;
        let placement = match &t.affinity {
            None => {
                self.global.set(i, tickets);
                Placement::Global
            }
            Some(cores) => {
                for &c in cores {
                    self.per_core[c].set(i, tickets);
                }
                Placement::Cores(cores.clone())
            }
        };
        if self.queued.len() <= i {
            self.queued.resize(i + 1, None);
        }
        self.queued[i] = Some(placement);
    }

    fn take(&mut self, slot: Slot) -> bool {
        let i = slot as usize;
        match self.queued.get_mut(i).and_then(Option::take) {
            None => false,
            Some(Placement::Global) => {
                self.global.set(i, 0);
                true
            }
            Some(Placement::Cores(cores)) => {
                for c in cores {
                    self.per_core[c].set(i, 0);
                }
                true
            }
        }
    }
}

impl Dispatcher for Lottery {
    fn name(&self) -> &'static str {
        "lottery"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, _why: Enqueue) {
        self.insert(ctx, slot);
    }

    fn pick_next(&mut self, _ctx: &Ctx, core: usize) -> Option<Slot> {
        let global = self.global.total();
        let total = global + self.per_core[core].total();
        if total == 0 {
            return None;
        }
        let r = self.rng.gen_range(0..total);
        let slot = if r < global {
            self.global.find(r)
        } else {
            self.per_core[core].find(r - global)
        } as Slot;
        self.take(slot);
        Some(slot)
    }

    fn time_slice(&mut self, ctx: &Ctx, _core: usize, _slot: Slot) -> Option<Nanos> {
        Some(ctx.spec.quantum())
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        self.take(slot);
    }

    fn place(&mut self, ctx: &Ctx, slot: Slot, _core: usize) {
        // The thread's affinity changed: move its tickets to the trees it may now use.
        if self.take(slot) {
            self.insert(ctx, slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fenwick_find_matches_linear_scan(
            vals in proptest::collection::vec(0u64..50, 1..70),
            probes in proptest::collection::vec(any::<u64>(), 1..20),
        ) {
            let mut f = Fenwick::default();
            for (i, &v) in vals.iter().enumerate() {
                f.set(i, v as u128);
            }
            // Zero some out again to exercise updates after growth.
            for i in (0..vals.len()).step_by(3) {
                f.set(i, 0);
            }
            let cur: Vec<u128> = vals
                .iter()
                .enumerate()
                .map(|(i, &v)| if i % 3 == 0 { 0 } else { v as u128 })
                .collect();
            prop_assert_eq!(f.total(), cur.iter().sum::<u128>());
            if f.total() > 0 {
                for p in probes {
                    let r = p as u128 % f.total();
                    let mut acc = 0;
                    let want = cur.iter().position(|&v| { acc += v; acc > r }).unwrap();
                    prop_assert_eq!(f.find(r), want);
                }
            }
        }
    }
}
