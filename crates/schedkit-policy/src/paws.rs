//! PAWS, global EDF and work stealing as one pure state machine: rules A-F of seed 001
//! (Fonseca, Nogueira, Maia, Pinho, "Real-time scheduling of parallel tasks in the Linux
//! kernel", section 4), plus the two comparison modes, with no clock, no threads and no
//! fibers. The runtime pool (`schedkit_runtime::paws::RtPool`) drives it under one lock; the
//! simulator's `paws` and `ws` dispatchers drive it on virtual time; the rule tests drive it
//! with scripted events and check each decision.
//!
//! # Structures
//! - Rule A: one global queue of ready entries ordered by absolute deadline, ties FIFO in
//!   enqueue order (a `BTreeMap` keyed by `(deadline, ticket)`, a fresh ticket at every push,
//!   so an entry put back after a preemption queues behind the entries of equal deadline that
//!   were already waiting).
//! - Rules B, C: per core, a priority queue of deques: `BTreeMap<deadline, VecDeque>`; an empty
//!   deque is removed at once, so the highest-priority non-empty deque is the first entry:
//!   O(log k) in the number k of distinct deadlines on that core, never a scan of threads.
//! - A "pending" slot per core: the dispatcher hands a ready job straight to the core that
//!   must run it (a free core, or the core it preempts), as the paper's dispatching routine
//!   does, so that two cores cannot race for it and the preempting core does not fall back to
//!   its local deque first (rule C) and run the preempted thread again.
//!
//! # Decisions
//! - `defer_ready` + `settle` (a batch of jobs that became ready at once: releases, jobs whose
//!   parallel region completed; under Gedf also parallel threads), and `ready`, a batch of one.
//!   A core is *free* when it runs nothing, has nothing pending and nothing local. The free
//!   cores, in index order, take the global queue's first entries in order (what each would
//!   pick by rule D); a new entry among those is handed to its core now (a sleeping core is
//!   woken). A new entry behind them (Paws, Gedf) preempts: the core whose pending, else
//!   running, else best local entry has the latest deadline (ties: the lowest index) gets it
//!   if that deadline is later than the entry's (asking it to preempt its running entry, if
//!   any; a pending entry it displaces goes back to the global queue), each core at most once
//!   per batch; else it waits in the global queue. A core with local threads is not free:
//!   rule C makes it run its best local thread next, so it counts as running that deadline.
//! - `pick`: pending first; then rule C (bottom of the highest-priority local deque), rule D
//!   (head of the global queue), rule E (top of the highest-priority deque of a random core that
//!   has local work; "busy" read as "has threads to steal", so a thief never picks a victim with
//!   nothing in it; the victim is drawn by the driver's [`Victims`]).
//! - `preempted`: (i) a job goes back to the global queue; (ii) a thread taken from this core's
//!   own deque goes back to the bottom of its deque; (iii)/rule F: a stolen thread (or one taken
//!   from the global queue) goes to the global queue.
//! - Modes: `Gedf` puts parallel threads into the global queue like jobs (no local deques);
//!   `Ws` is classic work stealing: one deque per core, no priorities (every key is 0), a FIFO
//!   global queue for releases and no preemption.
//!
//! # Invariants
//! Every entry is in exactly one place (global queue, one local deque, one pending slot, or
//! running on one core, where the driver holds it); a core is asked to preempt at most once
//! until it picks; an idle core with nothing pending has an empty local queue.

use std::collections::{BTreeMap, VecDeque};

/// Absolute deadline in nanoseconds on the pool's clock.
pub type Deadline = u64;

/// Which scheduler the pool runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Rules A-F of seed 001.
    Paws,
    /// Global EDF: parallel threads go to the global queue; no local deques.
    Gedf,
    /// Classic work stealing: one deque per core, no priorities, FIFO releases, no preemption.
    Ws,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Paws, Mode::Gedf, Mode::Ws];
    pub fn name(self) -> &'static str {
        match self {
            Mode::Paws => "paws",
            Mode::Gedf => "gedf",
            Mode::Ws => "ws",
        }
    }
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == s.trim())
    }
}

/// A job (a task's release) or one thread of a parallel region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Job,
    Thread,
}

/// Where the running entry was taken from: decides where a preemption puts it (rules i-iii).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// From the global queue or handed over by the dispatcher.
    Global,
    /// From this core's own local deque (rule C).
    Local,
    /// Stolen from another core's deque (rule E).
    Stolen,
}

/// A schedulable entry. `payload` is whatever the driver needs (a closure, a fiber, a label,
/// a simulator slot).
#[derive(Clone, Copy, Debug)]
pub struct Item<U> {
    pub seq: u64,
    pub deadline: Deadline,
    pub kind: Kind,
    /// Core whose deque the thread was pushed to (for migration counts); jobs: `usize::MAX`.
    pub spawned_on: usize,
    pub payload: U,
}

/// What the running entry of a core is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Running {
    pub seq: u64,
    pub deadline: Deadline,
    pub kind: Kind,
    pub origin: Origin,
}

/// What the driver must do after `ready` / `settle` / `spawn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    Nothing,
    /// Unpark this idle core (its pending slot holds work, or it should look for some).
    Wake(usize),
    /// Ask this core to stop its running entry at its next preemption point.
    Preempt(usize),
}

/// Where a picked entry came from, finer than [`Origin`] (drivers count these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Handed over to preempt (or to a core about to run a later local thread).
    Preempting,
    /// Handed over to a free core: the global-queue entry it would have picked (rule D).
    Free,
    /// Rule C.
    Local,
    /// Rule D.
    Global,
    /// Rule E.
    Stolen,
}

impl Source {
    /// Where a preemption of the entry puts it back (rules i-iii).
    pub fn origin(self) -> Origin {
        match self {
            Source::Local => Origin::Local,
            Source::Stolen => Origin::Stolen,
            _ => Origin::Global,
        }
    }
}

/// The choice of a victim among `n` candidate cores (rule E): the driver's random source.
pub trait Victims {
    /// An index in `0..n`, `n >= 1`.
    fn choose(&mut self, n: usize) -> usize;
}

/// xorshift64: cheap and reproducible from the seed; the runtime pool's victim choice.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }
}

impl Victims for XorShift {
    fn choose(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x % n as u64) as usize
    }
}

struct Core<U> {
    local: BTreeMap<Deadline, VecDeque<Item<U>>>,
    running: Option<Running>,
    pending: Option<(Item<U>, Source)>,
    idle: bool,
    preempt: bool,
}

impl<U> Core<U> {
    /// Runs nothing, has nothing pending, nothing local: takes the global queue's head next.
    fn free(&self) -> bool {
        self.running.is_none() && self.pending.is_none() && self.local.is_empty()
    }
}

/// A global-queue entry; `fresh` marks one made ready since the last [`Sched::settle`].
struct Queued<U> {
    item: Item<U>,
    fresh: bool,
}

/// The dispatcher state of a pool of `cores` cores.
pub struct Sched<U, V: Victims = XorShift> {
    mode: Mode,
    cores: Vec<Core<U>>,
    global: BTreeMap<(Deadline, u64), Queued<U>>,
    /// Entries marked fresh in `global`.
    fresh: usize,
    seq: u64,
    ticket: u64,
    victims: V,
    /// Scratch of `settle` and `pick` (no allocation per decision).
    scratch_free: Vec<usize>,
    scratch_keys: Vec<(Deadline, u64)>,
    scratch_busy: Vec<(Deadline, usize)>,
    scratch_victims: Vec<usize>,
    scratch_notes: Vec<Notify>,
}

impl<U> Sched<U, XorShift> {
    /// Every core starts idle. `seed` drives the choice of victim (rule E, [`XorShift`]).
    pub fn new(mode: Mode, cores: usize, seed: u64) -> Sched<U, XorShift> {
        Sched::with_victims(mode, cores, XorShift::new(seed))
    }
}

impl<U, V: Victims> Sched<U, V> {
    /// Every core starts idle; `victims` chooses the victim of each steal (rule E).
    pub fn with_victims(mode: Mode, cores: usize, victims: V) -> Sched<U, V> {
        Sched {
            mode,
            cores: (0..cores.max(1))
                .map(|_| Core {
                    local: BTreeMap::new(),
                    running: None,
                    pending: None,
                    idle: true,
                    preempt: false,
                })
                .collect(),
            global: BTreeMap::new(),
            fresh: 0,
            seq: 0,
            ticket: 0,
            victims,
            scratch_free: Vec::new(),
            scratch_keys: Vec::new(),
            scratch_busy: Vec::new(),
            scratch_victims: Vec::new(),
            scratch_notes: Vec::new(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn cores(&self) -> usize {
        self.cores.len()
    }

    /// A new entry; its sequence number identifies it (and orders it after every entry
    /// created before).
    pub fn item(&mut self, deadline: Deadline, kind: Kind, payload: U) -> Item<U> {
        self.seq += 1;
        Item {
            seq: self.seq,
            deadline,
            kind,
            spawned_on: usize::MAX,
            payload,
        }
    }

    /// The key of the queues: Ws has no priorities.
    fn key(&self, d: Deadline) -> Deadline {
        if self.mode == Mode::Ws {
            0
        } else {
            d
        }
    }

    fn push_global_marked(&mut self, it: Item<U>, fresh: bool) {
        self.ticket += 1;
        let k = (self.key(it.deadline), self.ticket);
        self.fresh += usize::from(fresh);
        self.global.insert(k, Queued { item: it, fresh });
    }

    /// Queues an entry in the global queue that takes no part in the next `settle` (a process
    /// woken, a background entry): the cores take it by rule D.
    pub fn push_queued(&mut self, it: Item<U>) {
        self.push_global_marked(it, false);
    }

    /// An entry became ready (a release, a job whose parallel region completed; under Gedf a
    /// parallel thread): it joins the global queue and the next [`Sched::settle`] decides
    /// whether a free core takes it or it preempts.
    pub fn defer_ready(&mut self, it: Item<U>) {
        self.push_global_marked(it, true);
    }

    /// Whether entries made ready wait for [`Sched::settle`].
    pub fn has_fresh(&self) -> bool {
        self.fresh > 0
    }

    /// A job became ready: [`Sched::defer_ready`] and [`Sched::settle`] as a batch of one,
    /// returning the decision about it (the scripted rule tests read it).
    pub fn ready(&mut self, it: Item<U>) -> Notify {
        self.ready_all(it)[0]
    }

    /// [`Sched::ready`] with every notification: the entry's own decision, then a wake for
    /// entries left waiting while a core sleeps ([`Notify::Nothing`] where there is none).
    /// No allocation: the pool calls it under its lock at every release.
    pub fn ready_all(&mut self, it: Item<U>) -> [Notify; 2] {
        self.defer_ready(it);
        let mut notes = std::mem::take(&mut self.scratch_notes);
        notes.clear();
        self.settle(&mut notes);
        debug_assert!(notes.len() <= 2, "one entry: its decision and one wake");
        let get = |i: usize| notes.get(i).copied().unwrap_or(Notify::Nothing);
        let n = [get(0), get(1)];
        self.scratch_notes = notes;
        n
    }

    /// Decides for every entry made ready since the last call (see the module docs): hands
    /// them to free cores, or to the cores they preempt; pushes into `out` the cores to wake
    /// or to ask to preempt, in the order decided.
    pub fn settle(&mut self, out: &mut Vec<Notify>) {
        if self.fresh == 0 {
            return;
        }
        let mut free = std::mem::take(&mut self.scratch_free);
        let mut keys = std::mem::take(&mut self.scratch_keys);
        free.clear();
        keys.clear();
        free.extend((0..self.cores.len()).filter(|&c| self.cores[c].free()));
        // The fresh entries, in queue order, with their position.
        let mut first_waiting = usize::MAX;
        for (i, (k, q)) in self.global.iter().enumerate() {
            if keys.len() == self.fresh {
                break;
            }
            if q.fresh {
                if i >= free.len() && first_waiting == usize::MAX {
                    first_waiting = keys.len();
                }
                keys.push(*k);
                // The i-th free core takes the i-th entry: `free[j]` becomes the core of the
                // j-th fresh entry (j <= i, so no position still to be read is overwritten).
                if i < free.len() {
                    free[keys.len() - 1] = free[i];
                }
            }
        }
        let handed = first_waiting.min(keys.len());
        for (j, k) in keys.iter().enumerate().take(handed) {
            let q = self.global.remove(k).expect("a fresh entry");
            let c = free[j];
            let core = &mut self.cores[c];
            core.pending = Some((q.item, Source::Free));
            if core.idle {
                core.idle = false;
                out.push(Notify::Wake(c));
            }
        }
        if handed < keys.len() && self.mode != Mode::Ws {
            self.preempt_for(&keys[handed..], out);
        }
        for k in &keys {
            if let Some(q) = self.global.get_mut(k) {
                q.fresh = false;
            }
        }
        self.fresh = 0;
        self.scratch_free = free;
        self.scratch_keys = keys;
        // Entries left waiting while a core sleeps (older entries ahead of the free cores'
        // share, a displaced hand-over): wake one, as after a preemption. Simulated cores
        // are never asleep, so this changes no simulated decision.
        if !self.global.is_empty() {
            match self.wake_for_queued() {
                Notify::Nothing => {}
                n => out.push(n),
            }
        }
    }

    /// The fresh entries `keys` (queue order) that no free core takes: each preempts the core
    /// with the latest effective deadline if that is later than its own (each core once).
    fn preempt_for(&mut self, keys: &[(Deadline, u64)], out: &mut Vec<Notify>) {
        let mut busy = std::mem::take(&mut self.scratch_busy);
        busy.clear();
        busy.extend(self.cores.iter().enumerate().filter_map(|(i, c)| {
            c.pending
                .as_ref()
                .map(|p| p.0.deadline)
                .or(c.running.map(|r| r.deadline))
                .or(c.local.keys().next().copied())
                .map(|d| (d, i))
        }));
        for k in keys {
            let deadline = self.global[k].item.deadline;
            // The latest deadline, the lowest core on a tie.
            let Some(i) =
                (0..busy.len()).max_by_key(|&i| (busy[i].0, std::cmp::Reverse(busy[i].1)))
            else {
                break;
            };
            if busy[i].0 <= deadline {
                // Later entries have later (or equal) deadlines: none preempts either.
                break;
            }
            let (_, c) = busy.swap_remove(i);
            let q = self.global.remove(k).expect("a fresh entry");
            let old = self.cores[c].pending.replace((q.item, Source::Preempting));
            if let Some((old, _)) = old {
                // Displaced before it ever ran: back to the global queue.
                self.push_global_marked(old, false);
            }
            let core = &mut self.cores[c];
            if core.running.is_some() && !core.preempt {
                core.preempt = true;
                out.push(Notify::Preempt(c));
            }
        }
        self.scratch_busy = busy;
    }

    /// Pushes a thread to the bottom of `core`'s deque for its deadline (rule B).
    fn push_local(&mut self, core: usize, mut it: Item<U>) {
        it.spawned_on = core;
        let k = self.key(it.deadline);
        self.cores[core].local.entry(k).or_default().push_back(it);
    }

    /// One thread of a parallel region opened by the job running on `core`: rule B (Paws, Ws),
    /// or ready like a job (Gedf; decided at the next [`Sched::settle`]). Wakes nobody.
    pub fn spawn_one(&mut self, core: usize, mut it: Item<U>) {
        if self.mode == Mode::Gedf {
            it.spawned_on = core;
            self.defer_ready(it);
        } else {
            self.push_local(core, it);
        }
    }

    /// The job running on `core` opened a parallel region with these threads (rule B). Returns
    /// the cores to unpark (idle cores that can steal them, or under Gedf the ready decisions).
    pub fn spawn(&mut self, core: usize, items: Vec<Item<U>>) -> Vec<Notify> {
        self.spawn_keeping(core, items, 0)
    }

    /// [`Sched::spawn`] where the spawning core itself will take `keep` of the threads next
    /// (a region whose job has nothing else to do before it waits: its core pops the bottom
    /// thread by rule C at once): at most `len - keep` idle cores are woken, one per thread
    /// they can steal, so that no core is woken for a thread its own core pops first (such a
    /// core would find nothing and sleep again: two kernel switches for nothing).
    pub fn spawn_keeping(&mut self, core: usize, items: Vec<Item<U>>, keep: usize) -> Vec<Notify> {
        let mut out = Vec::new();
        let n = items.len().saturating_sub(keep);
        for it in items {
            self.spawn_one(core, it);
        }
        if self.mode == Mode::Gedf {
            self.settle(&mut out);
            return out;
        }
        for (i, c) in self.cores.iter_mut().enumerate() {
            if out.len() >= n {
                break;
            }
            if c.idle {
                c.idle = false;
                out.push(Notify::Wake(i));
            }
        }
        out
    }

    /// What `core` runs next (rules C, D, E after its pending slot); `None` marks it idle.
    pub fn pick(&mut self, core: usize) -> Option<(Item<U>, Origin)> {
        self.pick_from(core).map(|(it, s)| (it, s.origin()))
    }

    /// [`Sched::pick`], saying where the entry came from.
    pub fn pick_from(&mut self, core: usize) -> Option<(Item<U>, Source)> {
        let got = self.take(core);
        let c = &mut self.cores[core];
        c.preempt = false;
        match &got {
            Some((it, s)) => {
                c.idle = false;
                c.running = Some(Running {
                    seq: it.seq,
                    deadline: it.deadline,
                    kind: it.kind,
                    origin: s.origin(),
                });
            }
            None => {
                c.running = None;
                c.idle = true;
            }
        }
        got
    }

    fn take(&mut self, core: usize) -> Option<(Item<U>, Source)> {
        if let Some(p) = self.cores[core].pending.take() {
            return Some(p);
        }
        // Rule C: bottom of the highest-priority local deque.
        if let Some(mut e) = self.cores[core].local.first_entry() {
            let it = e.get_mut().pop_back().expect("empty deques are removed");
            if e.get().is_empty() {
                e.remove();
            }
            return Some((it, Source::Local));
        }
        // Rule D: the global queue.
        if let Some((_, q)) = self.global.pop_first() {
            self.fresh -= usize::from(q.fresh);
            return Some((q.item, Source::Global));
        }
        // Rule E: the top of the highest-priority deque of a random core with local work.
        let mut victims = std::mem::take(&mut self.scratch_victims);
        victims.clear();
        victims.extend(
            (0..self.cores.len()).filter(|&v| v != core && !self.cores[v].local.is_empty()),
        );
        let v = (!victims.is_empty()).then(|| victims[self.victims.choose(victims.len())]);
        self.scratch_victims = victims;
        let mut e = self.cores[v?].local.first_entry()?;
        let it = e.get_mut().pop_front().expect("empty deques are removed");
        if e.get().is_empty() {
            e.remove();
        }
        Some((it, Source::Stolen))
    }

    /// The job running on `core` has opened a parallel region and has nothing else to do
    /// before it waits for it: if `pick` would now return the bottom thread of this core's
    /// highest-priority local deque (rule C: nothing pending for this core, which also means
    /// no preemption is requested) and `accept` takes it (a thread of that job's own region,
    /// not started yet), it is popped and becomes the running entry of `core` as a local
    /// thread (origin `Local`, so a preemption puts it back by rule ii). The driver runs it
    /// on the job's own fiber instead of switching to a fiber of its own; afterwards it calls
    /// [`Sched::resume_running`] to make the job the running entry again.
    pub fn take_inline(
        &mut self,
        core: usize,
        accept: impl FnOnce(&Item<U>) -> bool,
    ) -> Option<Item<U>> {
        let c = &mut self.cores[core];
        if c.pending.is_some() || c.preempt {
            return None;
        }
        let mut e = c.local.first_entry()?;
        if !accept(e.get().back()?) {
            return None;
        }
        let it = e.get_mut().pop_back().expect("empty deques are removed");
        if e.get().is_empty() {
            e.remove();
        }
        c.running = Some(Running {
            seq: it.seq,
            deadline: it.deadline,
            kind: it.kind,
            origin: Origin::Local,
        });
        Some(it)
    }

    /// A thread run inline (see [`Sched::take_inline`]) finished and the job whose fiber ran
    /// it goes on running on `core`.
    pub fn resume_running(&mut self, core: usize, r: Running) {
        self.cores[core].running = Some(r);
    }

    /// After a core put an entry back (a preemption, rules i-iii) or let its job wait with the
    /// region's threads still in its deque (an earlier entry came first) and picked its next
    /// entry: if an entry is left in the global queue or a thread in some core's deque
    /// (stealable, rule E) while a core sleeps idle, that core is woken (and marked busy, so
    /// it is woken once). Nothing else would wake it: the entry would wait for a busy core, or
    /// for the next release, and after the last release for ever busier cores.
    pub fn wake_for_queued(&mut self) -> Notify {
        let queued = !self.global.is_empty() || self.cores.iter().any(|c| !c.local.is_empty());
        if !queued {
            return Notify::Nothing;
        }
        match self.cores.iter().position(|c| c.idle) {
            Some(i) => {
                self.cores[i].idle = false;
                Notify::Wake(i)
            }
            None => Notify::Nothing,
        }
    }

    /// The running entry of `core` stopped at a preemption point; it goes back by rules (i)-(iii).
    pub fn preempted(&mut self, core: usize, it: Item<U>) {
        let r = self.cores[core]
            .running
            .take()
            .expect("preempted a running entry");
        match (it.kind, r.origin) {
            (Kind::Thread, Origin::Local) => {
                let k = self.key(it.deadline);
                self.cores[core].local.entry(k).or_default().push_back(it);
            }
            _ => self.push_global_marked(it, false),
        }
    }

    /// The running entry of `core` finished, or (a job) waits for its parallel region.
    pub fn stopped(&mut self, core: usize) {
        self.cores[core].running = None;
    }

    /// Takes a queued entry out (global queue or a local deque) whose payload `is` accepts:
    /// a thread that blocked or was stopped while waiting. O(queued).
    pub fn remove_where(&mut self, is: impl Fn(&U) -> bool) -> Option<Item<U>> {
        if let Some(k) = self
            .global
            .iter()
            .find(|(_, q)| is(&q.item.payload))
            .map(|(k, _)| *k)
        {
            let q = self.global.remove(&k).expect("found above");
            self.fresh -= usize::from(q.fresh);
            return Some(q.item);
        }
        for c in &mut self.cores {
            for (&k, d) in c.local.iter_mut() {
                if let Some(i) = d.iter().position(|it| is(&it.payload)) {
                    let it = d.remove(i).expect("found above");
                    if d.is_empty() {
                        c.local.remove(&k);
                    }
                    return Some(it);
                }
            }
        }
        None
    }

    /// Whether `core` was asked to preempt its running entry.
    pub fn preempt_requested(&self, core: usize) -> bool {
        self.cores[core].preempt
    }

    pub fn running(&self, core: usize) -> Option<Running> {
        self.cores[core].running
    }

    pub fn is_idle(&self, core: usize) -> bool {
        self.cores[core].idle
    }

    /// Sequence numbers in the global queue, in order.
    pub fn global_seqs(&self) -> Vec<u64> {
        self.global.values().map(|q| q.item.seq).collect()
    }

    /// `core`'s local queue: (key, seqs from top to bottom) by priority.
    pub fn local_seqs(&self, core: usize) -> Vec<(Deadline, Vec<u64>)> {
        self.cores[core]
            .local
            .iter()
            .map(|(k, d)| (*k, d.iter().map(|i| i.seq).collect()))
            .collect()
    }

    /// Seq of the entry handed to `core` and not yet picked.
    pub fn pending(&self, core: usize) -> Option<u64> {
        self.cores[core].pending.as_ref().map(|p| p.0.seq)
    }

    /// The payload handed to `core` and not yet picked.
    pub fn pending_payload(&self, core: usize) -> Option<&U> {
        self.cores[core].pending.as_ref().map(|p| &p.0.payload)
    }

    /// Nothing queued, pending or running anywhere.
    pub fn is_empty(&self) -> bool {
        self.global.is_empty()
            && self
                .cores
                .iter()
                .all(|c| c.local.is_empty() && c.pending.is_none() && c.running.is_none())
    }
}
