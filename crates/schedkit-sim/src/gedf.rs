//! Global EDF over plain periodic tasks: the engine's model, specialised.
//!
//! Researchers run global EDF over millions of UUniFast sets, and a set of plain periodic
//! tasks (one sequential region per job, no affinity, no processes, no context-switch cost)
//! needs little of the general [`crate::engine::Engine`]: no patterns, controllers, balancing
//! or dispatcher hooks, one thread per job. This module runs such a scenario with the
//! engine's exact rules and writes exactly the events, in exactly the order, that the engine
//! with the `Keyed<Edf>` dispatcher writes (the tests below compare the two traces event by
//! event, and the golden outputs pin both), at a fraction of the cost
//! (docs/results/speed.md):
//!
//! - releases come from their own heap of `(time, order, task)`, beside a second heap of
//!   slice ends, instead of one heap of every event kind: the engine's `(time, class,
//!   sequence)` order is kept, as releases are class 0 and slice ends class 2, and each heap
//!   keeps its own push order; a task's release is replaced in place by its next one (one
//!   sift down), and every heap compares its entries as one `u128` ([`Entry`]; the release
//!   and slice-end heaps' entries are 16 bytes, [`Timed`]);
//! - a job's thread is a 40-byte record (deadline, creation order, work left, task, job, last
//!   core), not the general `SimThread`;
//! - the ready queue is a binary heap of `(deadline, creation order, slot)`: the EDF key
//!   `(deadline, arrival, creation order)` orders exactly like `(deadline, creation order)`,
//!   as threads are created in time order;
//! - the worst running job is the root of a tournament tree (a max-tree) over the cores'
//!   keys, brought up to date in O(log cores) per changed core when asked (a scan of 64
//!   cores at every release that found no idle core was a tenth of a 1,000-task run);
//! - idle cores are a bitset, walked in core order;
//! - the engine tells its sink one call per fact of a job ([`sink::JobSink`]): for a trace
//!   sink these become the engine's events, and the report's fold
//!   ([`schedkit_core::report::Metrics`]) takes them directly, without the six or seven
//!   `record` calls per job the events cost (a third of a 20-task run); the unit tests
//!   require the same report to the bit either way.
//!
//! Every count of [`SimStats`] is the engine's too: events popped (stale slice ends
//! included), batches, jobs, the high-water marks of slots, job records and queued events.

use crate::engine::{SimStats, Watch, WATCH_EVERY};
use schedkit_core::scenario::{PolicyName, Region, Scenario};
use schedkit_core::trace::{Reason, Slot, TraceSink};
use schedkit_core::Nanos;
pub(crate) use sink::JobSink;
use sink::{Events, Job};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// No core / no slice end pending.
const NONE: u32 = u32::MAX;

/// Whether `scenario` is one this engine runs exactly like the general one: (global) EDF,
/// no context-switch cost, no processes, and tasks of one sequential region without
/// affinity.
pub(crate) fn eligible(scenario: &Scenario) -> bool {
    matches!(scenario.policy().name(), PolicyName::Edf | PolicyName::Gedf)
        && scenario.policy().context_switch() == Nanos::ZERO
        && scenario.processes().is_empty()
        && !scenario.tasks().is_empty()
        && scenario.cores() > 0
        && scenario.horizon() < Nanos::MAX
        && scenario.cores() < NONE as usize
        && scenario.tasks().len() < NONE as usize
        && scenario
            .tasks()
            .iter()
            .all(|t| t.cpus().is_none() && matches!(t.regions(), [Region::Seq(_)]))
        && orders_fit(scenario)
}

/// A job's thread.
#[derive(Clone, Copy)]
struct JobThread {
    deadline: u64,
    /// Global creation order (the engine's `SimThread::seq`).
    seq: u64,
    remaining: u64,
    job: u64,
    task: u32,
    /// The core it last ran on (`NONE`: not yet run).
    last_core: u32,
}

/// An EDF key `(deadline, seq)` as one number: deadline in the high half. Every job's is
/// above zero (`seq` starts at 1), so zero stands for an idle core in the [`MaxTree`].
fn key(deadline: u64, seq: u64) -> u128 {
    (deadline as u128) << 64 | seq as u128
}

/// An entry of the ready heap: its order as one number (a ready job's `(deadline, creation
/// order)`, high half first), unique within the heap, and its slot. Compared as
/// one `u128` in reverse, so that `BinaryHeap` is a min-heap: a tuple of three fields compared
/// field by field branched at every level of every sift (the heaps' pops were a quarter of a
/// 20-task run).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Entry {
    key: u128,
    id: u32,
}

impl Entry {
    fn new(high: u64, low: u64, id: u32) -> Entry {
        Entry {
            key: key(high, low),
            id,
        }
    }
}

/// An entry of the release and slice-end heaps in 16 bytes, half an [`Entry`]: `(time,
/// push order, id)` as one `u128`, the time in the high half and the push order shifted
/// above the id (a task or a core, `id_bits` wide) in the low half. Ordered like `(time,
/// push order)`, as push orders are unique within a heap; compared in reverse (min-heap).
/// [`eligible`] requires that every push order of the run fits beside the id.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Timed(u128);

impl Timed {
    fn time(&self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// Push order and id.
    fn low(&self) -> u64 {
        self.0 as u64
    }
}

impl Ord for Timed {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.cmp(&self.0)
    }
}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Bits that hold an id below `n` (at least 1).
fn id_bits(n: usize) -> u32 {
    (usize::BITS - n.leading_zeros()).max(1)
}

/// Whether every push order of a run of `scenario` fits beside an id in [`Timed`]: a run
/// pushes at most one release per job and, per core, one slice end per pick, and a job is
/// picked at its release and after each preemption or expiry (at most one per release, and
/// one per core at the horizon): below `2 * jobs + cores + 1` pushes per heap.
fn orders_fit(scenario: &Scenario) -> bool {
    let horizon = scenario.horizon().0 as u128;
    let jobs: u128 = scenario
        .tasks()
        .iter()
        .filter(|t| (t.offset().0 as u128) < horizon)
        .map(|t| (horizon - t.offset().0 as u128).div_ceil((t.period().0 as u128).max(1)))
        .sum();
    let bits = id_bits(scenario.tasks().len().max(scenario.cores()));
    2 * jobs + scenario.cores() as u128 + 1 < 1u128 << (64 - bits)
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Keys are unique within a heap, so `id` never decides.
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The largest key over the cores and the core holding it: a complete binary tree in an
/// array, leaves the cores' keys (zero: idle), each inner node the larger of its children.
///
/// A core's key changes twice per job (dispatch, finish), and often twice in one batch on the
/// same core (a job finishes, the next waiting one takes its core), while the largest key is
/// asked for only when more jobs wait than cores are idle. So [`MaxTree::set`] writes the leaf
/// and notes the core, and [`MaxTree::max`] brings the inner nodes up to date first: up to 8
/// cores by rebuilding them (at most 7 nodes), beyond that along the noted cores' paths.
struct MaxTree {
    /// Leaves start at `width` (a power of two); node 1 is the root.
    nodes: Vec<u128>,
    width: usize,
    /// Cores whose leaf changed since the inner nodes were last brought up to date (more
    /// than 8 cores only; may repeat), at most `width` of them: beyond that `all` is set and
    /// the next refresh rebuilds every node, so that the list stays bounded however long
    /// the largest key goes unasked (a set that never has more jobs waiting than idle cores).
    dirty: Vec<usize>,
    all: bool,
    stale: bool,
}

impl MaxTree {
    fn new(cores: usize) -> MaxTree {
        let width = cores.next_power_of_two();
        MaxTree {
            nodes: vec![0; 2 * width],
            width,
            dirty: Vec::new(),
            all: false,
            stale: false,
        }
    }

    #[inline]
    fn set(&mut self, core: usize, key: u128) {
        self.nodes[self.width + core] = key;
        self.stale = true;
        if self.width > 8 {
            if self.dirty.len() < self.width {
                self.dirty.push(core);
            } else {
                self.all = true;
            }
        }
    }

    /// Brings the inner nodes up to date with the leaves.
    fn refresh(&mut self) {
        self.stale = false;
        if self.width <= 8 || self.all {
            for i in (1..self.width).rev() {
                self.nodes[i] = self.nodes[2 * i].max(self.nodes[2 * i + 1]);
            }
            self.all = false;
            self.dirty.clear();
            return;
        }
        // One path per changed leaf, each stopping where a node is already the larger of
        // its children: a node above it is then only out of date through another changed
        // leaf below it, whose own path comes to it.
        for k in 0..self.dirty.len() {
            let mut i = self.width + self.dirty[k];
            while i > 1 {
                i /= 2;
                let m = self.nodes[2 * i].max(self.nodes[2 * i + 1]);
                if self.nodes[i] == m {
                    break;
                }
                self.nodes[i] = m;
            }
        }
        self.dirty.clear();
    }

    /// The largest key (zero when every core is idle), without the descent to its core.
    fn max_key(&mut self) -> u128 {
        if self.stale {
            self.refresh();
        }
        self.nodes[1]
    }

    /// The largest key and its core; `None` when every core is idle.
    fn max(&mut self) -> Option<(u128, usize)> {
        let top = self.max_key();
        if top == 0 {
            return None;
        }
        let mut i = 1;
        while i < self.width {
            i = if self.nodes[2 * i] == top {
                2 * i
            } else {
                2 * i + 1
            };
        }
        Some((top, i - self.width))
    }
}

/// A task: relative deadline, period, the work of one job, and its next job's number.
struct TaskParams {
    deadline: u64,
    period: u64,
    work: u64,
    next_job: u64,
}

#[derive(Clone, Copy)]
struct Core {
    /// The running slot (`NONE`: idle).
    running: u32,
    charged_at: u64,
    /// When the running slot was dispatched (its run interval's start, for the sink).
    since: u64,
    /// Push order and id of the live slice end of this core (`0`: none). A queued slice end
    /// whose push order and id differ is stale: the engine's generation check.
    pending: u64,
    /// Set by expiry or preemption, as in the engine: the slot that just left, and why.
    vacated: Option<(u32, Reason)>,
}

struct Gedf<'a, K: JobSink + ?Sized> {
    sink: &'a mut K,
    now: u64,
    horizon: u64,
    /// First releases, by time (stable: file order), and the next one.
    initial: Vec<(u64, u32)>,
    next_initial: usize,
    /// Later releases `(time, order; task)` and slice ends `(time, order; core)`, min-heaps,
    /// each with its own push order (only the order within a heap decides anything).
    releases: BinaryHeap<Timed>,
    ends: BinaryHeap<Timed>,
    /// Width of the id in a [`Timed`] entry, and its mask.
    id_bits: u32,
    id_mask: u64,
    release_order: u64,
    end_order: u64,
    /// Ready jobs `(deadline, seq; slot)`, min-heap. No entry is ever stale: nothing leaves
    /// the queue but by being picked.
    ready: BinaryHeap<Entry>,
    /// A job entered the ready queue in this batch (released or vacated).
    queued: bool,
    threads: Vec<JobThread>,
    free_slots: Vec<u32>,
    thread_seq: u64,
    /// Per task: its parameters and next job number, in one record (one bounds check and
    /// one cache line per release).
    params: Vec<TaskParams>,
    cores: Vec<Core>,
    /// The running jobs' keys.
    worst: MaxTree,
    /// Bit `c` set: core `c` runs nothing.
    idle: Vec<u64>,
    idle_count: usize,
    vacated_cores: Vec<usize>,
    picks: Vec<(usize, u32)>,
    out: Vec<usize>,
    taken: Vec<Entry>,
    stats: SimStats,
    watch: Option<&'a dyn Watch>,
    next_watch: u64,
}

/// Runs an [`eligible`] scenario, writing its events to `sink`.
pub(crate) fn run<S: TraceSink + ?Sized>(
    scenario: &Scenario,
    sink: &mut S,
    watch: Option<&dyn Watch>,
) -> SimStats {
    run_jobs(scenario, &mut Events(sink), watch)
}

/// Runs an [`eligible`] scenario, telling `sink` each job's facts (the report's fold takes
/// them without going through events: [`sink`]).
pub(crate) fn run_jobs<K: JobSink + ?Sized>(
    scenario: &Scenario,
    sink: &mut K,
    watch: Option<&dyn Watch>,
) -> SimStats {
    debug_assert!(eligible(scenario));
    let n = scenario.cores();
    let horizon = scenario.horizon().0;
    let mut initial: Vec<(u64, u32)> = scenario
        .tasks()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.offset().0 < horizon)
        .map(|(i, t)| (t.offset().0, i as u32))
        .collect();
    initial.sort_by_key(|&(t, _)| t);
    let params = scenario
        .tasks()
        .iter()
        .map(|t| {
            let [Region::Seq(c)] = t.regions() else {
                unreachable!("eligible")
            };
            TaskParams {
                deadline: t.deadline().0,
                period: t.period().0,
                work: c.0,
                next_job: 0,
            }
        })
        .collect();
    let mut idle = vec![0u64; n.div_ceil(64)];
    for c in 0..n {
        idle[c / 64] |= 1 << (c % 64);
    }
    let mut g = Gedf {
        sink,
        now: 0,
        horizon,
        initial,
        next_initial: 0,
        releases: BinaryHeap::with_capacity(scenario.tasks().len()),
        ends: BinaryHeap::new(),
        id_bits: id_bits(scenario.tasks().len().max(n)),
        id_mask: (1u64 << id_bits(scenario.tasks().len().max(n))) - 1,
        release_order: 0,
        end_order: 0,
        ready: BinaryHeap::new(),
        queued: false,
        threads: Vec::new(),
        free_slots: Vec::new(),
        thread_seq: 0,
        params,
        cores: vec![
            Core {
                running: NONE,
                charged_at: 0,
                since: 0,
                pending: 0,
                vacated: None,
            };
            n
        ],
        worst: MaxTree::new(n),
        idle,
        idle_count: n,
        vacated_cores: Vec::new(),
        picks: Vec::new(),
        out: Vec::new(),
        taken: Vec::new(),
        stats: SimStats::default(),
        watch,
        next_watch: 0,
    };
    g.run();
    g.stats
}

impl<K: JobSink + ?Sized> Gedf<'_, K> {
    fn run(&mut self) {
        while let Some(t) = self.next_time() {
            if t > self.horizon {
                break;
            }
            self.now = t;
            // The batch: first releases, later releases, slice ends (the engine's classes).
            while let Some(&(ts, task)) = self.initial.get(self.next_initial) {
                if ts != t {
                    break;
                }
                self.next_initial += 1;
                self.stats.events += 1;
                self.release(task as usize);
                if let Some(next) = self.next_release(task as usize) {
                    self.release_order += 1;
                    let e = self.timed(next, self.release_order, task);
                    self.releases.push(e);
                    self.note_queue();
                }
            }
            // A task's release is replaced in place by its next one (one sift down, not a
            // pop's and a push's): the same entries as popping it and pushing the next one
            // after the release, as no other release is pushed in between.
            while let Some(&e) = self.releases.peek() {
                if e.time() != t {
                    break;
                }
                let task = self.id(e);
                match self.next_release(task as usize) {
                    Some(next) => {
                        self.release_order += 1;
                        let next = self.timed(next, self.release_order, task);
                        // The `PeekMut` sifts the new top down when dropped.
                        *self.releases.peek_mut().expect("peeked") = next;
                        self.note_queue();
                    }
                    None => {
                        self.releases.pop();
                    }
                }
                self.stats.events += 1;
                self.release(task as usize);
            }
            while let Some(&e) = self.ends.peek() {
                if e.time() != t {
                    break;
                }
                self.ends.pop();
                self.stats.events += 1;
                let core = self.id(e) as usize;
                if self.cores[core].pending == e.low() {
                    self.slice_end(core);
                }
            }
            self.decide();
            if self.stats.events >= self.next_watch {
                if let Some(w) = self.watch {
                    self.next_watch = self.stats.events + WATCH_EVERY;
                    if !w.keep_going(Nanos(self.now), self.stats.events) {
                        self.stats.stopped_at = Some(Nanos(self.now));
                        break;
                    }
                }
            }
        }
        // Tasks are unbounded work: a run that was not stopped ends at the horizon.
        if self.stats.stopped_at.is_none() {
            self.now = self.horizon;
        }
        for core in 0..self.cores.len() {
            self.charge(core);
            let slot = std::mem::replace(&mut self.cores[core].running, NONE);
            if slot != NONE {
                let task = self.threads[slot as usize].task as usize;
                let since = self.cores[core].since;
                self.sink
                    .descheduled(self.now, core, slot, task, since, Reason::Horizon);
            }
        }
        // Jobs still open: every slot not free.
        let mut free = vec![false; self.threads.len()];
        for &s in &self.free_slots {
            free[s as usize] = true;
        }
        for (slot, th) in self.threads.iter().enumerate() {
            if !free[slot] {
                self.sink.open_at_end(self.job_of(th));
            }
        }
        self.stats.end = Nanos(self.now);
        // Slots and job records are allocated and freed together (one thread per job), so
        // both high-water marks are the slot vector's length.
        self.stats.peak_slots = self.threads.len();
        self.stats.peak_jobs = self.threads.len();
    }

    fn next_time(&self) -> Option<u64> {
        let a = self
            .initial
            .get(self.next_initial)
            .map_or(u64::MAX, |e| e.0);
        let b = self.releases.peek().map_or(u64::MAX, Timed::time);
        let c = self.ends.peek().map_or(u64::MAX, Timed::time);
        let t = a.min(b).min(c);
        // `u64::MAX` as a real time would be past every horizon anyway.
        (t != u64::MAX).then_some(t)
    }

    /// A release's or slice end's heap entry.
    fn timed(&self, time: u64, order: u64, id: u32) -> Timed {
        Timed(key(time, order << self.id_bits | id as u64))
    }

    fn id(&self, e: Timed) -> u32 {
        (e.low() & self.id_mask) as u32
    }

    fn note_queue(&mut self) {
        let len = self.releases.len() + self.ends.len();
        self.stats.peak_queue = self.stats.peak_queue.max(len);
    }

    /// When `task`, released now, is released next: `None` at or past the horizon.
    fn next_release(&self, task: usize) -> Option<u64> {
        let next = self.now + self.params[task].period;
        (next < self.horizon).then_some(next)
    }

    /// Releases a job of `task` now (its next release is the caller's to queue).
    fn release(&mut self, task: usize) {
        let now = self.now;
        let p = &mut self.params[task];
        let (job, work, deadline) = (p.next_job, p.work, now + p.deadline);
        p.next_job += 1;
        self.stats.jobs += 1;
        self.thread_seq += 1;
        let th = JobThread {
            deadline,
            seq: self.thread_seq,
            remaining: work,
            job,
            task: task as u32,
            last_core: NONE,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.threads[s as usize] = th;
                s
            }
            None => {
                self.threads.push(th);
                (self.threads.len() - 1) as Slot
            }
        };
        self.sink.released(now, task, job, deadline, slot);
        self.ready.push(Entry::new(deadline, th.seq, slot));
        self.queued = true;
    }

    /// Charges the running job of `core` up to now.
    fn charge(&mut self, core: usize) {
        let c = &mut self.cores[core];
        if c.running == NONE || self.now <= c.charged_at {
            return;
        }
        let ran = self.now - c.charged_at;
        c.charged_at = self.now;
        let t = &mut self.threads[c.running as usize];
        t.remaining = t.remaining.saturating_sub(ran);
    }

    #[inline]
    fn set_idle(&mut self, core: usize) {
        self.idle[core / 64] |= 1 << (core % 64);
        self.idle_count += 1;
        self.worst.set(core, 0);
    }

    fn set_busy(&mut self, core: usize) {
        self.idle[core / 64] &= !(1 << (core % 64));
        self.idle_count -= 1;
    }

    /// The live slice end of `core`: the job finished, or (at the horizon) its slice expired.
    fn slice_end(&mut self, core: usize) {
        self.charge(core);
        let slot = self.cores[core].running;
        if self.threads[slot as usize].remaining == 0 {
            self.finish(core, slot);
        } else {
            self.vacate(core, slot, Reason::Expired);
        }
    }

    /// Takes `slot` off `core` and queues it; the Deschedule waits for `decide`, which may
    /// pick it again on the same core (then the run continues without one).
    fn vacate(&mut self, core: usize, slot: u32, reason: Reason) {
        let c = &mut self.cores[core];
        c.running = NONE;
        c.pending = 0;
        c.vacated = Some((slot, reason));
        self.vacated_cores.push(core);
        self.set_idle(core);
        let t = &self.threads[slot as usize];
        self.ready.push(Entry::new(t.deadline, t.seq, slot));
        self.queued = true;
    }

    fn finish(&mut self, core: usize, slot: u32) {
        let c = &mut self.cores[core];
        c.running = NONE;
        c.pending = 0;
        let since = c.since;
        self.set_idle(core);
        self.free_slots.push(slot);
        let job = self.job_of(&self.threads[slot as usize]);
        self.sink.finished(self.now, core, slot, job, since);
    }

    /// The sinks' view of the job of a thread.
    fn job_of(&self, th: &JobThread) -> Job {
        let task = th.task as usize;
        Job {
            task,
            job: th.job,
            // Exact: the deadline is the release plus this.
            release: th.deadline - self.params[task].deadline,
            deadline: th.deadline,
        }
    }

    /// The engine's decision after a batch: preemptions, then picks (vacated cores first,
    /// then idle ones, each in core order), then Deschedules, then dispatches.
    fn decide(&mut self) {
        self.stats.batches += 1;
        // After every batch each waiting job's key is above every running one's (the
        // running jobs are the best of all), and a finish or expiry alone only takes a key
        // out of the running: only a job queued in this batch can preempt. Most batches that
        // find jobs waiting and no core idle queued none (a finish with more jobs waiting),
        // and skip the max-tree.
        if std::mem::take(&mut self.queued) && self.ready.len() > self.idle_count {
            self.preempt();
        }
        if self.vacated_cores.is_empty() {
            // Nothing to pick (a job finished with none waiting, or jobs wait with every core
            // busy): most batches. Otherwise nothing to deschedule either (a job finished
            // and the next waiting one takes its core, a release onto an idle core).
            if !self.ready.is_empty() && self.idle_count > 0 {
                self.dispatch_idle();
            }
            return;
        }
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        let mut vacated = std::mem::take(&mut self.vacated_cores);
        vacated.sort_unstable();
        for &core in &vacated {
            if self.ready.is_empty() {
                break;
            }
            self.pick_on(core, &mut picks);
        }
        'idle: for w in 0..self.idle.len() {
            let mut bits = self.idle[w];
            while bits != 0 {
                if self.ready.is_empty() {
                    break 'idle;
                }
                let core = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.cores[core].vacated.is_none() {
                    self.pick_on(core, &mut picks);
                }
            }
        }
        let t = self.now;
        for &core in &vacated {
            let c = &mut self.cores[core];
            if let Some((prev, reason)) = c.vacated {
                if c.running != prev {
                    c.vacated = None;
                    let since = c.since;
                    let task = self.threads[prev as usize].task as usize;
                    self.sink.descheduled(t, core, prev, task, since, reason);
                }
            }
        }
        for &(core, slot) in &picks {
            if self.cores[core].vacated.take().is_some() {
                self.begin_run(core, slot);
            } else {
                self.dispatch(core, slot);
            }
        }
        vacated.clear();
        self.vacated_cores = vacated;
        self.picks = picks;
    }

    /// `decide`'s picks when no core was vacated: the idle cores in core order take the
    /// best ready jobs. With no Deschedule to come between them, each pick is dispatched at
    /// once: the same pops, events and slice ends in the same order as picking all first,
    /// without the list of picks.
    fn dispatch_idle(&mut self) {
        for w in 0..self.idle.len() {
            let mut bits = self.idle[w];
            while bits != 0 {
                let Some(Entry { key, id: slot }) = self.ready.pop() else {
                    return;
                };
                let core = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.cores[core].running = slot;
                self.worst.set(core, key);
                self.set_busy(core);
                self.dispatch(core, slot);
            }
        }
    }

    /// Dispatches `slot`, just picked, on `core`, which it did not run on before this
    /// batch, and starts its run.
    fn dispatch(&mut self, core: usize, slot: u32) {
        let t = self.now;
        let th = &mut self.threads[slot as usize];
        let from = std::mem::replace(&mut th.last_core, core as u32);
        let from = (from != NONE && from as usize != core).then_some(from as usize);
        let (seq, task) = (th.seq, th.task as usize);
        self.cores[core].since = t;
        self.sink.dispatched(t, core, slot, seq, task, from);
        self.begin_run(core, slot);
    }

    /// `Keyed`'s preemption with static keys: the best waiting jobs first take the idle
    /// cores, then each takes the core of the worst running job while that job's key is
    /// larger than its own. Called only when more jobs wait than cores are idle.
    fn preempt(&mut self) {
        // Most calls end here (the new jobs wait): the key alone, not its core.
        let worst = self.worst.max_key();
        let Some(best) = self.ready.peek() else {
            return;
        };
        if worst == 0 || best.key >= worst {
            return;
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let mut idle = self.idle_count;
        for _ in 0..self.cores.len() {
            let Some(e) = self.ready.pop() else {
                break;
            };
            self.taken.push(e);
            if idle > 0 {
                idle -= 1;
                continue;
            }
            match self.worst.max() {
                Some((k, core)) if k > e.key => {
                    // Out of the running (its core is vacated below, which zeroes it too).
                    self.worst.set(core, 0);
                    out.push(core);
                }
                _ => break,
            }
        }
        self.ready.extend(self.taken.drain(..));
        for &core in &out {
            self.charge(core);
            let slot = self.cores[core].running;
            self.vacate(core, slot, Reason::Preempted);
        }
        self.out = out;
    }

    /// The idle `core` takes the best ready job.
    fn pick_on(&mut self, core: usize, picks: &mut Vec<(usize, u32)>) {
        let Some(Entry { key, id: slot }) = self.ready.pop() else {
            return;
        };
        self.cores[core].running = slot;
        self.worst.set(core, key);
        self.set_busy(core);
        picks.push((core, slot));
    }

    /// Starts or continues the run of `slot` on `core` and queues the end of its work.
    fn begin_run(&mut self, core: usize, slot: u32) {
        let now = self.now;
        let end = self
            .horizon
            .min(now + self.threads[slot as usize].remaining);
        let c = &mut self.cores[core];
        c.charged_at = now;
        if end > now {
            self.end_order += 1;
            let e = Timed(key(end, self.end_order << self.id_bits | core as u64));
            c.pending = e.low();
            self.ends.push(e);
            self.note_queue();
        } else {
            c.pending = 0;
        }
    }
}

mod sink;
#[cfg(test)]
mod tests;
