//! The PAWS dispatcher as a pure state machine: rules A-F of seed 001 (Fonseca, Nogueira, Maia,
//! Pinho, "Real-time scheduling of parallel tasks in the Linux kernel", section 4), plus the two
//! comparison modes, with no clock, no threads and no fibers. The real pool
//! ([`super::RtPool`]) drives it under one lock; the tests drive it with scripted events and
//! check each decision.
//!
//! # Structures
//! - Rule A: one global queue of ready entries ordered by absolute deadline, ties FIFO (a
//!   `BTreeMap` keyed by `(deadline, seq)`, `seq` given at creation, so a preempted job keeps
//!   its place among equal deadlines).
//! - Rules B, C: per core, a priority queue of deques: `BTreeMap<deadline, VecDeque>`; an empty
//!   deque is removed at once, so the highest-priority non-empty deque is the first entry:
//!   O(log k) in the number k of distinct deadlines on that core, never a scan of threads.
//! - A "pending" slot per core: the dispatcher hands a released job straight to the core that
//!   must run it (an idle core, or the core it preempts), as the paper's dispatching routine
//!   does, so that two cores cannot race for it and the preempting core does not fall back to
//!   its local deque first (rule C) and run the preempted thread again.
//!
//! # Decisions
//! - `ready` (a release, or a job whose parallel region completed): an idle core gets it; else
//!   if some awake core has nothing yet (nothing running, pending or local), it goes to the
//!   global queue (that core picks it by rule D); else (Paws, Gedf) the core whose pending,
//!   running or next local entry has the latest deadline gets it if that deadline is later
//!   than the job's (preempting its running entry, if any); else the global queue.
//! - `pick`: pending first; then rule C (bottom of the highest-priority local deque), rule D
//!   (head of the global queue), rule E (top of the highest-priority deque of a random core that
//!   has local work; "busy" read as "has threads to steal", so a thief never picks a victim with
//!   nothing in it).
//! - `preempted`: (i) a job goes back to the global queue; (ii) a thread taken from this core's
//!   own deque goes back to the bottom of its deque; (iii)/rule F: a stolen thread (or one taken
//!   from the global queue) goes to the global queue.
//! - Modes: `Gedf` puts parallel threads into the global queue like jobs (no local deques);
//!   `Ws` is classic work stealing: one deque per core, no priorities (every key is 0), a FIFO
//!   global queue for releases and no preemption.

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

/// A schedulable entry. `payload` is whatever the driver needs (a closure, a fiber, a label).
#[derive(Debug)]
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

/// What the driver must do after `ready` / `spawn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    Nothing,
    /// Unpark this idle core (its pending slot holds work, or it should look for some).
    Wake(usize),
    /// Ask this core to stop its running entry at its next preemption point.
    Preempt(usize),
}

struct Core<U> {
    local: BTreeMap<Deadline, VecDeque<Item<U>>>,
    running: Option<Running>,
    pending: Option<Item<U>>,
    idle: bool,
    preempt: bool,
}

/// The dispatcher state of a pool of `cores` cores.
pub struct Sched<U> {
    mode: Mode,
    cores: Vec<Core<U>>,
    global: BTreeMap<(Deadline, u64), Item<U>>,
    seq: u64,
    rng: u64,
}

impl<U> Sched<U> {
    /// Every core starts idle. `seed` drives the choice of victim (rule E).
    pub fn new(mode: Mode, cores: usize, seed: u64) -> Sched<U> {
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
            seq: 0,
            rng: seed | 1,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn cores(&self) -> usize {
        self.cores.len()
    }

    /// A new entry; its sequence number orders it after every entry created before.
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

    fn push_global(&mut self, it: Item<U>) {
        let k = (self.key(it.deadline), it.seq);
        self.global.insert(k, it);
    }

    /// A job became ready (release, or its parallel region completed); under Gedf also a
    /// parallel thread.
    pub fn ready(&mut self, it: Item<U>) -> Notify {
        if let Some(c) = self.cores.iter().position(|c| c.idle) {
            let core = &mut self.cores[c];
            core.idle = false;
            core.pending = Some(it);
            return Notify::Wake(c);
        }
        // An awake core with nothing to run and nothing local takes the job from the global
        // queue (rule D) when it picks. An awake core with local threads is not free: rule C
        // makes it run its best local thread first, so it counts as running that deadline
        // (else a released job could wait behind a later-deadline thread with nobody
        // preempting it).
        let free = self.cores.iter().any(|c| {
            c.running.is_none()
                && c.pending.is_none()
                && (c.local.is_empty() || self.mode == Mode::Ws)
        });
        if self.mode == Mode::Ws || free {
            self.push_global(it);
            return Notify::Nothing;
        }
        // The core whose entry (pending, else running, else best local) has the latest
        // deadline; ties: the lowest index, so scripted scenarios are deterministic.
        let eff = |c: &Core<U>| {
            c.pending
                .as_ref()
                .map(|p| p.deadline)
                .or(c.running.map(|r| r.deadline))
                .or(c.local.keys().next().copied())
                .unwrap_or(0)
        };
        let (mut target, mut latest) = (0, eff(&self.cores[0]));
        for (i, c) in self.cores.iter().enumerate().skip(1) {
            if eff(c) > latest {
                target = i;
                latest = eff(c);
            }
        }
        if it.deadline >= latest {
            self.push_global(it);
            return Notify::Nothing;
        }
        let old = self.cores[target].pending.replace(it);
        if let Some(old) = old {
            // Displaced before it ever ran: back to the global queue.
            self.push_global(old);
        }
        let core = &mut self.cores[target];
        if core.running.is_some() && !core.preempt {
            core.preempt = true;
            Notify::Preempt(target)
        } else {
            Notify::Nothing
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
        if self.mode == Mode::Gedf {
            for mut it in items {
                it.spawned_on = core;
                match self.ready(it) {
                    Notify::Nothing => {}
                    n => out.push(n),
                }
            }
            return out;
        }
        let n = items.len().saturating_sub(keep);
        for mut it in items {
            it.spawned_on = core;
            let k = self.key(it.deadline);
            self.cores[core].local.entry(k).or_default().push_back(it);
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
        let got = self.take(core);
        let c = &mut self.cores[core];
        c.preempt = false;
        match &got {
            Some((it, o)) => {
                c.idle = false;
                c.running = Some(Running {
                    seq: it.seq,
                    deadline: it.deadline,
                    kind: it.kind,
                    origin: *o,
                });
            }
            None => {
                c.running = None;
                c.idle = true;
            }
        }
        got
    }

    fn take(&mut self, core: usize) -> Option<(Item<U>, Origin)> {
        if let Some(p) = self.cores[core].pending.take() {
            return Some((p, Origin::Global));
        }
        // Rule C: bottom of the highest-priority local deque.
        if let Some(mut e) = self.cores[core].local.first_entry() {
            let it = e.get_mut().pop_back().expect("empty deques are removed");
            if e.get().is_empty() {
                e.remove();
            }
            return Some((it, Origin::Local));
        }
        // Rule D: the global queue.
        if let Some((_, it)) = self.global.pop_first() {
            return Some((it, Origin::Global));
        }
        // Rule E: the top of the highest-priority deque of a random core with local work.
        let victims: Vec<usize> = (0..self.cores.len())
            .filter(|&v| v != core && !self.cores[v].local.is_empty())
            .collect();
        if victims.is_empty() {
            return None;
        }
        let v = victims[(self.next_rand() % victims.len() as u64) as usize];
        let mut e = self.cores[v].local.first_entry()?;
        let it = e.get_mut().pop_front().expect("empty deques are removed");
        if e.get().is_empty() {
            e.remove();
        }
        Some((it, Origin::Stolen))
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

    fn next_rand(&mut self) -> u64 {
        // xorshift64: cheap and reproducible from the seed.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
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
            _ => self.push_global(it),
        }
    }

    /// The running entry of `core` finished, or (a job) waits for its parallel region.
    pub fn stopped(&mut self, core: usize) {
        self.cores[core].running = None;
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
        self.global.values().map(|i| i.seq).collect()
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
        self.cores[core].pending.as_ref().map(|p| p.seq)
    }

    /// The payload handed to `core` and not yet picked.
    pub fn pending_payload(&self, core: usize) -> Option<&U> {
        self.cores[core].pending.as_ref().map(|p| &p.payload)
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
