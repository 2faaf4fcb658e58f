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
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

/// Removes and returns the smallest entry of `queue` whose thread may run on `core`.
///
/// Shared by every dispatcher that keeps its ready threads in an ordered set (this module,
/// MLFQ, stride). Without affinities in play (`any_affinity` false) it is the set's first
/// entry, O(log n); otherwise it scans from the smallest key to the first allowed thread.
pub fn take_first_allowed<K: Ord + Copy>(
    queue: &mut BTreeSet<K>,
    ctx: &Ctx,
    core: usize,
    any_affinity: bool,
    slot_of: impl Fn(&K) -> Slot,
) -> Option<K> {
    if !any_affinity {
        // One descent instead of `first` then `remove`.
        return queue.pop_first();
    }
    let key = queue
        .iter()
        .find(|k| ctx.thread(slot_of(k)).allowed_on(core))
        .copied()?;
    queue.remove(&key);
    Some(key)
}

/// What a key-ordered policy must say.
pub trait KeyPolicy {
    /// Ordering key; smaller runs first. Must be unique per thread (end it with a ticket or
    /// the thread's `seq`).
    type Key: Ord + Copy + std::fmt::Debug;
    const NAME: &'static str;
    /// Whether a waiting thread with a smaller key takes the core of a running one.
    const PREEMPTIVE: bool;
    /// Whether keys only grow in enqueue order (the key is the ticket): the queue is then a
    /// plain FIFO.
    const FIFO: bool = false;
    /// Whether a running thread's key changes as it runs (SRTF's remaining time). Policies
    /// with static keys set false, so the engine need not charge every core per decision.
    const KEY_CHANGES_WHILE_RUNNING: bool = true;
    /// The key of `slot` now. `ticket` increases with every enqueue (FIFO order).
    fn key(&self, ctx: &Ctx, slot: Slot, why: Enqueue, ticket: u64) -> Self::Key;
    /// The time slice, if the policy has one.
    fn slice(&self, _ctx: &Ctx) -> Option<Nanos> {
        None
    }
}

/// The ready threads, in key order.
///
/// Policies whose key is the enqueue ticket (FCFS, RR) are plain FIFOs: for them a
/// `VecDeque` gives O(1) enqueue and pick instead of a B-tree's O(log n) with node moves
/// (the RR benchmark spends most of its time here). Removal from the FIFO is lazy: the
/// entry stays until it reaches the front, and is recognised as stale because the slot's
/// current key differs.
///
/// The other policies keep a binary heap while no thread has an affinity and the running
/// threads' keys do not change (all but SRTF): they need only the smallest key, which a heap
/// gives without a B-tree's node shifting (the B-tree was a tenth of a global-EDF run).
/// Removal is lazy there too. The first thread with an affinity turns the heap into the
/// ordered set, whose in-order scan finds the first thread allowed on a core.
enum Store<K: Ord + Copy> {
    Ordered(BTreeSet<(K, Slot)>),
    Heap {
        heap: BinaryHeap<Reverse<(K, Slot)>>,
        live: usize,
    },
    Fifo {
        queue: VecDeque<(K, Slot)>,
        live: usize,
    },
}

/// Whether `(key, slot)` is live: the slot is queued with that key (entries of removed or
/// picked threads stay in the lazy stores until they surface).
fn is_live<K: PartialEq + Copy>(keys: &[Option<K>], key: K, slot: Slot) -> bool {
    keys.get(slot as usize) == Some(&Some(key))
}

/// Drops stale entries from the top of `heap` and returns the live smallest one.
fn heap_first<K: Ord + Copy>(
    heap: &mut BinaryHeap<Reverse<(K, Slot)>>,
    keys: &[Option<K>],
) -> Option<(K, Slot)> {
    while let Some(&Reverse(e)) = heap.peek() {
        if is_live(keys, e.0, e.1) {
            return Some(e);
        }
        heap.pop();
    }
    None
}

/// The generic dispatcher over a [`KeyPolicy`].
pub struct Keyed<P: KeyPolicy> {
    policy: P,
    store: Store<P::Key>,
    /// Key of each queued slot.
    keys: Vec<Option<P::Key>>,
    ticket: u64,
    any_affinity: bool,
    /// Scratch for `preempt` (no allocation per decision).
    idle: Vec<usize>,
    busy: Vec<(P::Key, usize)>,
    /// Key of the thread running on each core, for static keys. Every thread reaches a core
    /// through `pick_next`, which refreshes the entry, and an entry is used only while its
    /// slot is the one running there.
    run_cache: Vec<Option<(Slot, P::Key)>>,
    /// Preemptive policies with static keys: `(key, core, slot)` of every pick, a max-heap,
    /// so that `preempt` finds the worst running thread without a pass over every core (the
    /// passes were an eighth of a 64-core global-EDF run). Entries go stale lazily: one is
    /// live while `run_cache[core]` still holds it and its slot runs there. Stale entries are
    /// dropped when they reach the top, and all at once when the heap outgrows the cores
    /// (so its size does not grow with simulated time).
    running: BinaryHeap<(P::Key, usize, Slot)>,
    /// Scratch for `preempt_from_heap`: waiting threads lent from the heap store.
    taken: Vec<(P::Key, Slot)>,
}

impl<P: KeyPolicy> Keyed<P> {
    pub fn new(policy: P) -> Keyed<P> {
        Keyed {
            policy,
            store: if P::FIFO {
                Store::Fifo {
                    queue: VecDeque::new(),
                    live: 0,
                }
            } else if P::PREEMPTIVE && P::KEY_CHANGES_WHILE_RUNNING {
                Store::Ordered(BTreeSet::new())
            } else {
                Store::Heap {
                    heap: BinaryHeap::new(),
                    live: 0,
                }
            },
            keys: Vec::new(),
            ticket: 0,
            any_affinity: false,
            idle: Vec::new(),
            busy: Vec::new(),
            run_cache: Vec::new(),
            running: BinaryHeap::new(),
            taken: Vec::new(),
        }
    }

    /// `preempt` without affinities and with static keys, from the `running` heap. It makes
    /// the same choices as the general pass in `preempt` (which sorts every running core):
    /// the best waiting threads first take the idle cores, then each takes the core of the
    /// worst running thread while that thread's key is larger than its own.
    fn preempt_from_heap(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        let (heap, cache) = (&mut self.running, &self.run_cache);
        // An entry is live while `run_cache` still holds it and its slot runs on its core.
        let live = |&(key, core, slot): &(P::Key, usize, Slot)| {
            ctx.running[core] == Some(slot) && cache[core] == Some((slot, key))
        };
        // The live entry with the worst key, after dropping the stale ones above it.
        let worst = |heap: &mut BinaryHeap<(P::Key, usize, Slot)>| {
            while let Some(top) = heap.peek() {
                if live(top) {
                    return Some(*top);
                }
                heap.pop();
            }
            None
        };
        let Some((worst_key, ..)) = worst(heap) else {
            return;
        };
        let keys = &self.keys;
        let (best, queued) = match &mut self.store {
            Store::Ordered(q) => (q.first().map(|e| e.0), q.len()),
            Store::Heap { heap, live } => (heap_first(heap, keys).map(|e| e.0), *live),
            Store::Fifo { .. } => unreachable!("FIFO policies are not preemptive"),
        };
        let best = best.expect("queue is not empty");
        if best >= worst_key {
            return;
        }
        let mut idle = ctx.running.iter().filter(|r| r.is_none()).count();
        if queued <= idle {
            return;
        }
        // The waiting threads in key order, as far as they take cores: the heap store lends
        // them by popping (into `taken`) and gets them back afterwards.
        let mut taken = std::mem::take(&mut self.taken);
        let (mut ordered, mut lent) = match &mut self.store {
            Store::Ordered(q) => (Some(q.iter()), None),
            Store::Heap { heap, .. } => (None, Some(heap)),
            Store::Fifo { .. } => unreachable!("FIFO policies are not preemptive"),
        };
        for _ in 0..ctx.cores {
            let key = match (&mut ordered, &mut lent) {
                (Some(it), _) => it.next().map(|e| e.0),
                (None, Some(h)) => heap_first(h, keys).map(|e| {
                    h.pop();
                    taken.push(e);
                    e.0
                }),
                _ => None,
            };
            let Some(key) = key else { break };
            if idle > 0 {
                idle -= 1;
                continue;
            }
            match worst(heap) {
                Some(top) if top.0 > key => {
                    out.push(top.1);
                    // A thread picked again on its own core has two equal entries.
                    while heap.peek() == Some(&top) {
                        heap.pop();
                    }
                }
                _ => break,
            }
        }
        if let Some(h) = lent {
            h.extend(taken.drain(..).map(Reverse));
        }
        self.taken = taken;
    }

    fn key_slot(&mut self, slot: Slot) -> &mut Option<P::Key> {
        let i = slot as usize;
        if self.keys.len() <= i {
            self.keys.resize(i + 1, None);
        }
        &mut self.keys[i]
    }

    /// The key of the thread running on `core`; cached per core when keys are static.
    fn running_key(&mut self, ctx: &Ctx, core: usize, slot: Slot) -> P::Key {
        if P::KEY_CHANGES_WHILE_RUNNING {
            return self.policy.key(ctx, slot, Enqueue::Preempted, 0);
        }
        if self.run_cache.len() < ctx.cores {
            self.run_cache.resize(ctx.cores, None);
        }
        match self.run_cache[core] {
            Some((s, k)) if s == slot => k,
            _ => {
                let k = self.policy.key(ctx, slot, Enqueue::Preempted, 0);
                self.run_cache[core] = Some((slot, k));
                k
            }
        }
    }

    fn len(&self) -> usize {
        match &self.store {
            Store::Ordered(q) => q.len(),
            Store::Heap { live, .. } | Store::Fifo { live, .. } => *live,
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The heap store turned into the ordered set (when the first thread with an affinity
    /// arrives): its live entries move over.
    fn switch_to_ordered(&mut self) {
        if let Store::Heap { heap, .. } = &mut self.store {
            let keys = &self.keys;
            let set = heap
                .drain()
                .map(|Reverse(e)| e)
                .filter(|e| is_live(keys, e.0, e.1))
                .collect();
            self.store = Store::Ordered(set);
        }
    }

    /// The smallest queued key (no allocation: this is on every preemption check).
    fn first_key(&self) -> Option<P::Key> {
        match &self.store {
            Store::Ordered(q) => q.first().map(|e| e.0),
            Store::Heap { .. } => self.queued().next().map(|e| e.0),
            Store::Fifo { queue, .. } => queue
                .iter()
                .find(|(k, s)| self.keys.get(*s as usize) == Some(&Some(*k)))
                .map(|e| e.0),
        }
    }

    /// Queued threads in key order, live ones only (FIFO entries may be stale).
    fn queued(&self) -> Box<dyn Iterator<Item = (P::Key, Slot)> + '_> {
        match &self.store {
            Store::Ordered(q) => Box::new(q.iter().copied()),
            // Not reached (the general `preempt` pass runs with affinities or changing keys,
            // where the store is ordered); correct anyway, at the cost of a sort.
            Store::Heap { heap, .. } => {
                let mut v: Vec<(P::Key, Slot)> = heap
                    .iter()
                    .map(|&Reverse(e)| e)
                    .filter(|e| is_live(&self.keys, e.0, e.1))
                    .collect();
                v.sort_unstable();
                Box::new(v.into_iter())
            }
            Store::Fifo { queue, .. } => Box::new(
                queue
                    .iter()
                    .filter(|(k, s)| self.keys.get(*s as usize) == Some(&Some(*k)))
                    .copied(),
            ),
        }
    }
}

impl<P: KeyPolicy> Dispatcher for Keyed<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.ticket += 1;
        let key = self.policy.key(ctx, slot, why, self.ticket);
        if ctx.thread(slot).affinity.is_some() && !self.any_affinity {
            self.any_affinity = true;
            self.switch_to_ordered();
        }
        *self.key_slot(slot) = Some(key);
        match &mut self.store {
            Store::Ordered(q) => {
                q.insert((key, slot));
            }
            Store::Heap { heap, live } => {
                heap.push(Reverse((key, slot)));
                *live += 1;
            }
            Store::Fifo { queue, live } => {
                debug_assert!(
                    queue.back().is_none_or(|(k, _)| *k < key),
                    "FIFO keys must grow"
                );
                queue.push_back((key, slot));
                *live += 1;
            }
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        let allowed = |s: Slot| !self.any_affinity || ctx.thread(s).allowed_on(core);
        let (key, slot) = match &mut self.store {
            Store::Ordered(q) => take_first_allowed(q, ctx, core, self.any_affinity, |e| e.1)?,
            // No affinities while the store is a heap: the smallest live entry.
            Store::Heap { heap, live } => {
                let e = heap_first(heap, &self.keys)?;
                heap.pop();
                *live -= 1;
                if heap.len() > 2 * *live + 64 {
                    let keys = &self.keys;
                    heap.retain(|&Reverse(e)| is_live(keys, e.0, e.1));
                }
                e
            }
            Store::Fifo { queue, live } => {
                let keys = &self.keys;
                let is_live = |k: &P::Key, s: Slot| keys.get(s as usize) == Some(&Some(*k));
                // Drop stale entries at the front, then take the first allowed live one.
                while queue.front().is_some_and(|(k, s)| !is_live(k, *s)) {
                    queue.pop_front();
                }
                let i = queue
                    .iter()
                    .position(|(k, s)| is_live(k, *s) && allowed(*s))?;
                let entry = queue.remove(i).expect("index found above");
                *live -= 1;
                if queue.len() > 2 * *live + 64 {
                    queue.retain(|(k, s)| is_live(k, *s));
                }
                entry
            }
        };
        if !P::KEY_CHANGES_WHILE_RUNNING {
            if self.run_cache.len() < ctx.cores {
                self.run_cache.resize(ctx.cores, None);
            }
            self.run_cache[core] = Some((slot, key));
            if P::PREEMPTIVE {
                if self.running.len() > 2 * ctx.cores + 64 {
                    let cache = &self.run_cache;
                    self.running
                        .retain(|&(k, c, s)| ctx.running[c] == Some(s) && cache[c] == Some((s, k)));
                }
                self.running.push((key, core, slot));
            }
        }
        *self.key_slot(slot) = None;
        Some(slot)
    }

    fn nothing_queued(&self) -> bool {
        self.is_empty()
    }

    fn time_slice(&mut self, ctx: &Ctx, _core: usize, _slot: Slot) -> Option<Nanos> {
        self.policy.slice(ctx)
    }

    fn charge_before_preempt(&self) -> bool {
        P::PREEMPTIVE && P::KEY_CHANGES_WHILE_RUNNING
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        if !P::PREEMPTIVE || self.is_empty() {
            return;
        }
        if !P::KEY_CHANGES_WHILE_RUNNING && !self.any_affinity {
            return self.preempt_from_heap(ctx, out);
        }
        // Pass 1, allocation-free: the worst running key and the idle cores.
        let mut worst: Option<P::Key> = None;
        let mut idle = 0;
        for (core, r) in ctx.running.iter().enumerate() {
            match r {
                None => idle += 1,
                Some(s) => {
                    let k = self.running_key(ctx, core, *s);
                    worst = Some(worst.map_or(k, |w| w.max(k)));
                }
            }
        }
        let Some(worst) = worst else { return };
        // Without affinities nothing is preempted when the best waiting thread does not beat
        // the worst running one, or when the idle cores can take everything that waits.
        if !self.any_affinity {
            let best = self.first_key().expect("queue is not empty");
            if best >= worst || self.len() <= idle {
                return;
            }
        }
        // Pass 2: place the best waiting threads one by one.
        self.idle.clear();
        self.busy.clear();
        for (core, r) in ctx.running.iter().enumerate() {
            match r {
                None => self.idle.push(core),
                Some(s) => {
                    let k = self.running_key(ctx, core, *s);
                    self.busy.push((k, core));
                }
            }
        }
        self.busy.sort();
        let candidates: Vec<_> = self.queued().take(ctx.cores).collect();
        for (key, slot) in candidates {
            let t = ctx.thread(slot);
            if let Some(i) = self.idle.iter().position(|&c| t.allowed_on(c)) {
                self.idle.swap_remove(i);
                continue;
            }
            // The worst running key this thread beats, on a core it may use.
            match self
                .busy
                .iter()
                .rposition(|&(k, c)| k > key && t.allowed_on(c))
            {
                Some(i) => {
                    out.push(self.busy.remove(i).1);
                }
                None => {
                    if !self.any_affinity {
                        break;
                    }
                }
            }
            if self.busy.is_empty() {
                break;
            }
        }
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        if let Some(key) = self.key_slot(slot).take() {
            match &mut self.store {
                Store::Ordered(q) => {
                    q.remove(&(key, slot));
                }
                Store::Heap { live, .. } | Store::Fifo { live, .. } => *live -= 1,
            }
        }
    }
}
