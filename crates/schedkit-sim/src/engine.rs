//! The discrete-event engine: virtual time over modelled cores.
//!
//! # Model
//! Time is integer nanoseconds. The engine owns an event queue ordered by
//! `(time, class, sequence)`; all events of one instant are applied as a batch, then the
//! dispatcher is consulted once: first `charge` for every running thread, then `preempt`,
//! then `pick_next` for every idle core in core order. Only then does time advance. Batching
//! is what makes simultaneous events deterministic and cheap.
//!
//! Event classes at one instant, in this order: releases and arrivals, controller ticks,
//! slice ends, balancing. So in RR a process that arrives at the instant a quantum expires is
//! queued before the preempted one (the textbook convention), and a controller sees the
//! arrivals of its instant.
//!
//! A running thread has one pending `SliceEnd` event at `min(slice, remaining, horizon)`.
//! Preempting it bumps the core's generation, which makes that event stale instead of
//! searching the heap for it. If the dispatcher picks the same thread again on the same
//! core, the run simply continues: no Deschedule/Dispatch pair is written.
//!
//! # Invariants checked after every decision
//! A thread runs on at most one core; a picked thread is ready and allowed on the core. A
//! violating pick is rejected, the thread re-queued, and [`Invariants::invalid_picks`]
//! counts it (the kernel's "fall back and count" habit, not a panic). A dispatcher that
//! declares a [`Dispatcher::starvation_bound`] has every wait of a ready thread checked
//! against it ([`Invariants::starved`]); a controller action the model cannot apply is
//! refused ([`Invariants::refused_actions`]). Each kind keeps its first reasons, returned
//! by [`SimStats::warnings`]: libraries do not print.
//!
//! # Memory
//! Process threads get one slot each. Real-time job threads take a slot from a free list
//! when released and return it when they finish, so memory does not grow with simulated
//! time (only with the number of simultaneously live jobs).
//!
//! # Rejected alternatives
//! A fixed tick (advance time by 1 us and ask the policy) is simple but costs O(horizon) and
//! hides event-ordering questions; removing preempted slice-end events from the heap costs
//! O(n); per-event (rather than per-instant) dispatch decisions make the outcome depend on the
//! order of simultaneous events.

pub use crate::contract::Invariants;
use crate::policy::{Dispatcher, Enqueue, SimThread, ThreadState};
use schedkit_core::control::Controller;
use schedkit_core::scenario::{Region, Scenario};
use schedkit_core::trace::{Event, Owner, Reason, Slot, TraceSink};
use schedkit_core::Nanos;
use std::collections::BinaryHeap;

/// Calls a dispatcher hook with a context borrowed from the engine's other fields.
macro_rules! pcall {
    ($s:ident, $method:ident($($arg:expr),*)) => {{
        let ctx = $crate::policy::Ctx {
            now: $s.now,
            cores: $s.cores_n,
            threads: &$s.threads,
            running: &$s.running,
            spec: &$s.scenario.policy(),
            scenario: $s.scenario,
            group_weights: &$s.group_weights,
        };
        $s.policy.$method(&ctx, $($arg),*)
    }};
}

mod control;
mod decide;
mod patterns;
mod queue;

use queue::{Kind, Queued, SEQ_BITS};

/// Totals of one simulation, beside the trace-derived report.
#[derive(Clone, Debug, Default)]
pub struct SimStats {
    /// Events popped from the queue (including stale ones).
    pub events: u64,
    /// Scheduling decisions (batches).
    pub batches: u64,
    /// Real-time jobs released.
    pub jobs: u64,
    /// End of the simulated window.
    pub end: Nanos,
    pub invariants: Invariants,
    /// Memory high-water marks: thread slots and job records ever allocated (both are
    /// recycled, so these bound the live threads and jobs), and the longest the event queue
    /// ever was. None grows with the simulated length; `tests/realtime.rs` pins that.
    pub peak_slots: usize,
    pub peak_jobs: usize,
    pub peak_queue: usize,
    /// The dispatcher's own counters ([`Dispatcher::counters`]), e.g. PAWS steals.
    pub policy_counters: Vec<(&'static str, u64)>,
    /// Set when a [`Watch`] stopped the run: the simulated time it stopped at.
    pub stopped_at: Option<Nanos>,
}

/// Asked every [`WATCH_EVERY`] events during [`Engine::run`] whether to go on: what lets a
/// progress bar follow a long simulation and Ctrl-C stop it cleanly.
pub trait Watch {
    /// `now` is the simulated time, `events` the events so far; `false` stops the run.
    fn keep_going(&self, now: Nanos, events: u64) -> bool;
}

/// How often (in events) a [`Watch`] is asked: rare enough to cost nothing per event.
pub const WATCH_EVERY: u64 = 1 << 16;

#[derive(Clone, Copy, Debug, Default)]
struct Core {
    running: Option<Slot>,
    /// When the running thread was last charged.
    charged_at: Nanos,
    /// Bumped whenever the pending slice end becomes stale.
    generation: u64,
    /// The thread that last ran here, for context-switch cost.
    last: Option<Slot>,
    /// Context-switch overhead in progress: the thread starts running at `charged_at`.
    switching: bool,
    /// Set by expiry or preemption: the thread that just left, and why. If the dispatcher
    /// picks it again the run continues without a Deschedule/Dispatch pair.
    vacated: Option<(Slot, Reason)>,
}

struct Job {
    task: usize,
    job: u64,
    region: usize,
    threads_left: usize,
    deadline: Nanos,
}

/// The simulator. Build with [`Engine::new`], then [`Engine::run`].
///
/// Generic over the dispatcher `D` and the trace sink `S` so that a caller that knows them
/// (`simulate_report`: the metrics fold, and the global-EDF dispatcher) gets an engine with
/// their hooks called directly and inlined; the defaults are the trait objects every other
/// caller passes. A global-EDF job crosses about ten dispatcher hooks and seven trace events,
/// and their indirect calls were a good part of its cost (docs/results/speed.md).
pub struct Engine<
    'a,
    D: Dispatcher + ?Sized + 'a = dyn Dispatcher + 'a,
    S: TraceSink + ?Sized + 'a = dyn TraceSink + 'a,
> {
    scenario: &'a Scenario,
    cores_n: usize,
    now: Nanos,
    horizon: Nanos,
    queue: BinaryHeap<Queued>,
    /// Arrivals and first releases, sorted by time; `next_initial` is the next one.
    initial: Vec<(Nanos, Kind)>,
    next_initial: usize,
    seq: u64,
    thread_seq: u64,
    threads: Vec<SimThread>,
    job_of: Vec<Option<usize>>,
    free_slots: Vec<Slot>,
    jobs: Vec<Option<Job>>,
    free_jobs: Vec<usize>,
    next_job: Vec<u64>,
    cores: Vec<Core>,
    running: Vec<Option<Slot>>,
    policy: Box<D>,
    controller: Option<Box<dyn Controller + 'a>>,
    group_weights: Vec<u64>,
    sink: &'a mut S,
    stats: SimStats,
    live: usize,
    pending_arrivals: usize,
    scratch: Vec<usize>,
    /// Reused by `decide` (no allocation per decision).
    picks: Vec<(usize, Slot)>,
    /// The cores whose `vacated` is set, in the order they were vacated: `decide` reads these
    /// instead of scanning every core (three scans of all cores per decision were a good
    /// part of a 64-core run). Empty after every `decide`.
    vacated_cores: Vec<usize>,
    /// Contract checks (see the module docs): when each slot last became ready, and the
    /// dispatcher's declared bound on that wait (read once).
    ready_since: Vec<Nanos>,
    starvation_bound: Option<Nanos>,
    watch: Option<&'a dyn Watch>,
    next_watch: u64,
}

impl<'a, D: Dispatcher + ?Sized + 'a, S: TraceSink + ?Sized + 'a> Engine<'a, D, S> {
    pub fn new(
        scenario: &'a Scenario,
        policy: Box<D>,
        controller: Option<Box<dyn Controller + 'a>>,
        sink: &'a mut S,
    ) -> Engine<'a, D, S> {
        let cores_n = scenario.cores();
        let mut e = Engine {
            scenario,
            cores_n,
            now: Nanos::ZERO,
            horizon: scenario.horizon(),
            queue: BinaryHeap::new(),
            initial: Vec::new(),
            next_initial: 0,
            seq: 0,
            thread_seq: 0,
            threads: Vec::new(),
            job_of: Vec::new(),
            free_slots: Vec::new(),
            jobs: Vec::new(),
            free_jobs: Vec::new(),
            next_job: vec![0; scenario.tasks().len()],
            cores: vec![Core::default(); cores_n],
            running: vec![None; cores_n],
            policy,
            controller,
            group_weights: scenario.groups().iter().map(|g| g.weight()).collect(),
            sink,
            stats: SimStats::default(),
            live: 0,
            pending_arrivals: 0,
            scratch: Vec::new(),
            picks: Vec::new(),
            vacated_cores: Vec::new(),
            ready_since: Vec::new(),
            starvation_bound: None,
            watch: None,
            next_watch: 0,
        };
        e.starvation_bound = e.policy.starvation_bound();
        // The initial arrivals and first releases form a sorted stream beside the heap: known
        // up front, they need no heap operations at all (scenarios with 10,000 processes
        // would otherwise spend a good part of their run sifting them).
        for (i, p) in scenario.processes().iter().enumerate() {
            if p.arrival() <= e.horizon {
                e.initial
                    .push((p.arrival(), Kind::Arrive { process: i as u32 }));
                e.pending_arrivals += 1;
            }
        }
        for (i, t) in scenario.tasks().iter().enumerate() {
            if t.offset() < e.horizon {
                e.initial
                    .push((t.offset(), Kind::Release { task: i as u32 }));
            }
        }
        // Stable: equal times keep file order, processes before tasks.
        e.initial.sort_by_key(|&(t, _)| t);
        if let Some(c) = &e.controller {
            let _ = c.period();
            e.push(Nanos::ZERO, Kind::Control);
        }
        if let Some(iv) = e.policy.balance_interval() {
            e.push(iv, Kind::Balance);
        }
        e
    }

    /// Has `watch` asked every [`WATCH_EVERY`] events whether to go on.
    pub fn with_watch(mut self, watch: &'a dyn Watch) -> Engine<'a, D, S> {
        self.watch = Some(watch);
        self
    }

    /// Queues an event: events at one instant run by class, then in the order they were made.
    fn push(&mut self, t: Nanos, kind: Kind) {
        self.seq += 1;
        debug_assert!(self.seq < 1 << SEQ_BITS);
        self.queue.push(Queued {
            time: t,
            order: (kind.class() as u64) << SEQ_BITS | self.seq,
            kind,
        });
        self.stats.peak_queue = self.stats.peak_queue.max(self.queue.len());
    }

    fn emit(&mut self, e: Event) {
        self.sink.record(&e);
    }

    /// Runs to the end: all work done, or the horizon.
    pub fn run(mut self) -> SimStats {
        while let Some(t) = self.next_time() {
            if t > self.horizon {
                break;
            }
            if self.live == 0 && self.pending_arrivals == 0 && !self.has_future_releases() {
                break;
            }
            self.now = t;
            while let Some(kind) = self.pop_at(t) {
                self.stats.events += 1;
                self.apply(kind);
            }
            self.decide();
            if self.stats.events >= self.next_watch {
                if let Some(w) = self.watch {
                    self.next_watch = self.stats.events + WATCH_EVERY;
                    if !w.keep_going(self.now, self.stats.events) {
                        self.stats.stopped_at = Some(self.now);
                        break;
                    }
                }
            }
        }
        let end = if self.stats.stopped_at.is_some() {
            self.now
        } else if self.scenario.has_unbounded_work() || self.live > 0 {
            self.horizon
        } else {
            self.now
        };
        self.now = end;
        self.stop_all_at_end();
        for s in 0..self.threads.len() as Slot {
            if self.threads[s as usize].state == ThreadState::Ready {
                self.check_wait(s);
            }
        }
        self.stats.end = end;
        // Slots and job records are recycled through free lists, so the vectors' lengths are
        // their high-water marks.
        self.stats.peak_slots = self.threads.len();
        self.stats.peak_jobs = self.jobs.len();
        self.stats.policy_counters = self.policy.counters();
        self.stats
    }

    /// Time of the next event, from the initial stream or the heap.
    fn next_time(&self) -> Option<Nanos> {
        let stream = self.initial.get(self.next_initial).map(|e| e.0);
        let heap = self.queue.peek().map(|e| e.time);
        match (stream, heap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Pops the next event at time `t`, if any. Initial events are class 0 and older than
    /// every heap entry, so on a tie they go first unless the heap's entry has a lower class
    /// (none has): the order is exactly the heap's `(time, class, sequence)` order.
    fn pop_at(&mut self, t: Nanos) -> Option<Kind> {
        if let Some(&(ts, kind)) = self.initial.get(self.next_initial) {
            let heap_first = self
                .queue
                .peek()
                .is_some_and(|q| (q.time, q.class()) < (ts, kind.class()));
            if ts == t && !heap_first {
                self.next_initial += 1;
                return Some(kind);
            }
        }
        match self.queue.peek() {
            Some(&Queued { time, kind, .. }) if time == t => {
                self.queue.pop();
                Some(kind)
            }
            _ => None,
        }
    }

    fn has_future_releases(&self) -> bool {
        !self.scenario.tasks().is_empty()
    }

    fn new_slot(&mut self, t: SimThread, job: Option<usize>) -> Slot {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.threads[s as usize] = t;
                self.job_of[s as usize] = job;
                s
            }
            None => {
                self.threads.push(t);
                self.job_of.push(job);
                (self.threads.len() - 1) as Slot
            }
        };
        self.live += 1;
        slot
    }

    fn arrive(&mut self, slot: Slot) {
        let owner = self.threads[slot as usize].owner;
        self.emit(Event::Arrive {
            t: self.now,
            slot,
            owner,
        });
        self.became_ready(slot);
        pcall!(self, enqueue(slot, Enqueue::New));
    }

    fn apply(&mut self, kind: Kind) {
        match kind {
            Kind::Arrive { process } => {
                let process = process as usize;
                self.pending_arrivals -= 1;
                let p = &self.scenario.processes()[process];
                for k in 0..p.threads() {
                    self.thread_seq += 1;
                    let t = SimThread {
                        owner: Owner::Process { process, thread: k },
                        process: Some(process),
                        task: None,
                        group: p.group(),
                        arrival: self.now,
                        demand: p.burst(),
                        remaining: p.burst(),
                        weight: p.weight(),
                        priority: p.priority(),
                        tickets: p.tickets(),
                        affinity: p.cpus().map(<[_]>::to_vec),
                        deadline: Nanos::MAX,
                        period: Nanos::MAX,
                        rel_deadline: Nanos::MAX,
                        seq: self.thread_seq,
                        state: ThreadState::Ready,
                        last_core: None,
                        par: false,
                        cpu: Nanos::ZERO,
                        phase: p.pattern().map(|_| (0, Nanos::ZERO)),
                        rt: p.class() == schedkit_core::scenario::Class::Fifo,
                    };
                    let slot = self.new_slot(t, None);
                    match self.threads[slot as usize].phase {
                        Some(_) => self.start_pattern(slot),
                        None => self.arrive(slot),
                    }
                }
            }
            Kind::Release { task } => {
                let task = task as usize;
                let tk = &self.scenario.tasks()[task];
                let job = self.next_job[task];
                self.next_job[task] += 1;
                let deadline = self.now + tk.deadline();
                self.stats.jobs += 1;
                self.emit(Event::JobRelease {
                    t: self.now,
                    task,
                    job,
                    deadline,
                });
                let j = Job {
                    task,
                    job,
                    region: 0,
                    threads_left: 0,
                    deadline,
                };
                let id = match self.free_jobs.pop() {
                    Some(i) => {
                        self.jobs[i] = Some(j);
                        i
                    }
                    None => {
                        self.jobs.push(Some(j));
                        self.jobs.len() - 1
                    }
                };
                self.start_region(id, None);
                let next = self.now + tk.period();
                if next < self.horizon {
                    self.push(next, Kind::Release { task: task as u32 });
                }
            }
            Kind::Wake { slot } => self.wake(slot),
            Kind::WakePath { slot } => self.wake_path_done(slot),
            Kind::Control => self.control(),
            Kind::Balance => {
                pcall!(self, balance());
                if let Some(iv) = self.policy.balance_interval() {
                    self.push(self.now + iv, Kind::Balance);
                }
            }
            Kind::SwitchDone { core, generation } => {
                let core = core as usize;
                let c = self.cores[core];
                if c.generation != generation || !c.switching {
                    return;
                }
                self.cores[core].switching = false;
                let slot = c.running.expect("switching core has a thread");
                self.begin_run(core, slot, true);
            }
            Kind::SliceEnd { core, generation } => {
                let core = core as usize;
                let c = self.cores[core];
                if c.generation != generation || c.switching {
                    return;
                }
                let Some(slot) = c.running else { return };
                self.charge(core);
                let t = &self.threads[slot as usize];
                if t.remaining == Some(Nanos::ZERO) {
                    self.finish(core, slot);
                } else if t.phase.is_some_and(|(_, left)| left == Nanos::ZERO) {
                    self.block(core, slot);
                } else {
                    // Slice expired: back to the queue; `decide` may pick it again.
                    self.vacate(core, slot, Reason::Expired);
                    pcall!(self, enqueue(slot, Enqueue::Expired));
                }
            }
        }
    }

    /// Creates the threads of the current region of job `id`; `at` is the core where the
    /// previous region ended (the fork/join point), `None` for a job's first region.
    fn start_region(&mut self, id: usize, at: Option<usize>) {
        let (task, job, region, deadline) = {
            let j = self.jobs[id].as_ref().expect("live job");
            (j.task, j.job, j.region, j.deadline)
        };
        // The scenario outlives the engine: borrowing the region from it (not from `self`)
        // lets the loop below create threads without copying the demands into a Vec, which
        // was an allocation per job.
        let scenario: &'a Scenario = self.scenario;
        let tk = &scenario.tasks()[task];
        let (demands, par): (&[Nanos], bool) = match &tk.regions()[region] {
            Region::Seq(c) => (std::slice::from_ref(c), false),
            Region::Par(v) => (v, true),
        };
        self.jobs[id].as_mut().expect("live job").threads_left = demands.len();
        for &c in demands {
            self.thread_seq += 1;
            let t = SimThread {
                owner: Owner::Task { task, job },
                process: None,
                task: Some(task),
                group: None,
                arrival: self.now,
                demand: Some(c),
                remaining: Some(c),
                weight: 1024,
                priority: 0,
                tickets: 1,
                affinity: tk.cpus().map(<[_]>::to_vec),
                deadline,
                period: tk.period(),
                rel_deadline: tk.deadline(),
                seq: self.thread_seq,
                state: ThreadState::Ready,
                last_core: at,
                par,
                cpu: Nanos::ZERO,
                phase: None,
                rt: false,
            };
            let slot = self.new_slot(t, Some(id));
            self.arrive(slot);
        }
    }

    /// Charges the running thread of `core` up to now.
    fn charge(&mut self, core: usize) {
        let c = &mut self.cores[core];
        let Some(slot) = c.running else { return };
        if c.switching || self.now <= c.charged_at {
            return;
        }
        let ran = self.now - c.charged_at;
        c.charged_at = self.now;
        let t = &mut self.threads[slot as usize];
        t.cpu += ran;
        if let Some(r) = &mut t.remaining {
            *r = r.saturating_sub(ran);
        }
        if let Some((_, left)) = &mut t.phase {
            *left = left.saturating_sub(ran);
        }
        pcall!(self, charge(slot, core, ran));
    }

    /// Takes `slot` off `core` for `reason`, deferring the Deschedule event until `decide`
    /// knows whether the dispatcher picks it again.
    fn vacate(&mut self, core: usize, slot: Slot, reason: Reason) {
        let c = &mut self.cores[core];
        c.running = None;
        c.generation += 1;
        // A thread still in its context-switch overhead was never dispatched: there is
        // nothing to deschedule, and if it is picked again it is dispatched afresh.
        c.vacated = (!c.switching).then_some((slot, reason));
        if c.vacated.is_some() {
            self.vacated_cores.push(core);
        }
        c.switching = false;
        self.running[core] = None;
        self.threads[slot as usize].state = ThreadState::Ready;
        self.became_ready(slot);
    }

    /// `slot` leaves `core` for good (finished or blocked): the core is free, nothing is
    /// vacated for a preemption check, and the trace says why.
    #[inline]
    pub(super) fn leave_core(&mut self, core: usize, slot: Slot, reason: Reason) {
        let c = &mut self.cores[core];
        c.running = None;
        c.generation += 1;
        self.running[core] = None;
        self.emit(Event::Deschedule {
            t: self.now,
            core,
            slot,
            reason,
        });
    }

    fn finish(&mut self, core: usize, slot: Slot) {
        self.leave_core(core, slot, Reason::Finished);
        self.emit(Event::Finish { t: self.now, slot });
        self.threads[slot as usize].state = ThreadState::Done;
        self.live -= 1;
        // Before the slot can be reused by the job's next region.
        pcall!(self, exit(slot, core));
        if let Some(id) = self.job_of[slot as usize].take() {
            self.free_slots.push(slot);
            let j = self.jobs[id].as_mut().expect("live job");
            j.threads_left -= 1;
            if j.threads_left == 0 {
                let (task, job) = (j.task, j.job);
                if j.region + 1 < self.scenario.tasks()[task].regions().len() {
                    j.region += 1;
                    self.start_region(id, Some(core));
                } else {
                    self.jobs[id] = None;
                    self.free_jobs.push(id);
                    self.emit(Event::JobFinish {
                        t: self.now,
                        task,
                        job,
                    });
                }
            }
        }
    }

    /// Deschedules everything still running at the end of the window.
    fn stop_all_at_end(&mut self) {
        for core in 0..self.cores_n {
            if self.cores[core].switching {
                self.cores[core].switching = false;
                self.cores[core].running = None;
                continue;
            }
            self.charge(core);
            if let Some(slot) = self.cores[core].running.take() {
                self.running[core] = None;
                self.emit(Event::Deschedule {
                    t: self.now,
                    core,
                    slot,
                    reason: Reason::Horizon,
                });
            }
        }
    }

    /// Current group weights (tenants; changed by controllers).
    pub fn group_weights(&self) -> &[u64] {
        &self.group_weights
    }
}
