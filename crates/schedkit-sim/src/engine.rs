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

use crate::contract::refusal;
pub use crate::contract::Invariants;
use crate::policy::{Ctx, Dispatcher, Enqueue, SimThread, ThreadState};
use schedkit_core::control::{Action, Controller, Snapshot, ThreadView};
use schedkit_core::scenario::{Phase, Region, Scenario};
use schedkit_core::trace::{Event, Owner, Reason, Slot, TraceSink};
use schedkit_core::Nanos;
use std::collections::BinaryHeap;

/// Calls a dispatcher hook with a context borrowed from the engine's other fields.
macro_rules! pcall {
    ($s:ident, $method:ident($($arg:expr),*)) => {{
        let ctx = Ctx {
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

/// What an event does. Indices are `u32` so that a queued event stays small (see
/// [`Queued`]); the engine converts at the edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Release {
        task: u32,
    },
    Arrive {
        process: u32,
    },
    /// A thread's sleep phase (`pattern`) is over.
    Wake {
        slot: Slot,
    },
    Control,
    /// A core finished its context-switch overhead and starts running its thread.
    SwitchDone {
        core: u32,
        generation: u64,
    },
    SliceEnd {
        core: u32,
        generation: u64,
    },
    Balance,
}

impl Kind {
    fn class(&self) -> u8 {
        match self {
            Kind::Release { .. } | Kind::Arrive { .. } | Kind::Wake { .. } => 0,
            Kind::Control => 1,
            Kind::SwitchDone { .. } | Kind::SliceEnd { .. } => 2,
            Kind::Balance => 3,
        }
    }
}

/// Bits of [`Queued::order`] below the class.
const SEQ_BITS: u32 = 62;

/// An event in the heap, ordered by `(time, class, sequence)` with the class and the
/// sequence number packed into one word (`class << 62 | seq`), reversed so that
/// `BinaryHeap`, a max-heap, pops the earliest. 32 bytes instead of the 48 of a
/// `(Nanos, u8, u64, Kind)` tuple, and a two-word comparison: sifting the heap was a fifth
/// of a global-EDF run.
#[derive(Clone, Copy, Debug)]
struct Queued {
    time: Nanos,
    order: u64,
    kind: Kind,
}

impl Queued {
    fn class(&self) -> u8 {
        (self.order >> SEQ_BITS) as u8
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.order) == (other.time, other.order)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.time, other.order).cmp(&(self.time, self.order))
    }
}

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

    /// The first phase of a patterned thread: it arrives, and blocks at once if the pattern
    /// starts with a sleep.
    fn start_pattern(&mut self, slot: Slot) {
        let owner = self.threads[slot as usize].owner;
        self.emit(Event::Arrive {
            t: self.now,
            slot,
            owner,
        });
        self.enter_phase(slot, 0, None);
    }

    /// Moves `slot` to phase `i` of its pattern (wrapping), skipping over sleeps: a run phase
    /// makes it runnable (`woken`: it was blocked, else it just arrived); a sleep blocks it
    /// and schedules its wake-up.
    fn enter_phase(&mut self, slot: Slot, i: usize, woken: Option<()>) {
        let process = self.threads[slot as usize]
            .process
            .expect("patterned thread");
        let pattern = self.scenario.processes()[process]
            .pattern()
            .expect("patterned thread");
        let mut i = i % pattern.len();
        let mut sleep = Nanos::ZERO;
        while let Phase::Sleep(d) = pattern[i] {
            sleep += d;
            i = (i + 1) % pattern.len();
        }
        let Phase::Run(run) = pattern[i] else {
            unreachable!("a pattern has a run phase (scenario check)")
        };
        self.threads[slot as usize].phase = Some((i, run));
        if sleep > Nanos::ZERO {
            if self.threads[slot as usize].state != ThreadState::Blocked {
                self.threads[slot as usize].state = ThreadState::Blocked;
                self.emit(Event::Block { t: self.now, slot });
            }
            let at = self.now + sleep;
            if at <= self.horizon {
                self.push(at, Kind::Wake { slot });
            }
        } else if woken.is_some() {
            self.make_ready(slot);
        } else {
            pcall!(self, enqueue(slot, Enqueue::New));
        }
    }

    /// A patterned thread's run phase ran out on `core`: it leaves the core and sleeps.
    fn block(&mut self, core: usize, slot: Slot) {
        let c = &mut self.cores[core];
        c.running = None;
        c.generation += 1;
        self.running[core] = None;
        self.emit(Event::Deschedule {
            t: self.now,
            core,
            slot,
            reason: Reason::Blocked,
        });
        self.threads[slot as usize].state = ThreadState::Blocked;
        self.emit(Event::Block { t: self.now, slot });
        let (i, _) = self.threads[slot as usize].phase.expect("patterned thread");
        self.enter_phase(slot, i + 1, Some(()));
    }

    /// A patterned thread's sleep is over.
    fn wake(&mut self, slot: Slot) {
        if self.threads[slot as usize].state == ThreadState::Blocked {
            self.make_ready(slot);
        }
    }

    fn make_ready(&mut self, slot: Slot) {
        self.threads[slot as usize].state = ThreadState::Ready;
        self.emit(Event::Wake { t: self.now, slot });
        pcall!(self, enqueue(slot, Enqueue::Woken));
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

    fn finish(&mut self, core: usize, slot: Slot) {
        let c = &mut self.cores[core];
        c.running = None;
        c.generation += 1;
        self.running[core] = None;
        self.emit(Event::Deschedule {
            t: self.now,
            core,
            slot,
            reason: Reason::Finished,
        });
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

    /// One scheduling decision after a batch of simultaneous events.
    fn decide(&mut self) {
        self.stats.batches += 1;
        // Keys that depend on work done (SRTF's remaining time, CFS's vruntime) must be
        // current before the policy compares them; other policies are charged lazily (at
        // slice end, preemption, stop), which keeps a decision from costing O(cores).
        if self.policy.charge_before_preempt() {
            for core in 0..self.cores_n {
                self.charge(core);
            }
        }
        // Preemptions requested by the policy.
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        {
            pcall!(self, preempt(&mut out));
        }
        for &core in &out {
            // A core that does not exist is ignored like an idle one.
            if let Some(slot) = self.cores.get(core).and_then(|c| c.running) {
                self.charge(core);
                self.vacate(core, slot, Reason::Preempted);
                pcall!(self, enqueue(slot, Enqueue::Preempted));
            }
        }
        self.scratch = out;
        // Phase 1: every idle core picks (the dispatcher's queues change here only). Cores
        // that just gave up a thread pick first, so a thread whose slice ended with nothing
        // else waiting continues where it is instead of being pulled by an idle neighbour
        // (the kernel keeps running the current task in that case too).
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        let mut vacated = std::mem::take(&mut self.vacated_cores);
        vacated.sort_unstable();
        // The idle cores in pick order: vacated ones first, then the others, each in core
        // order (`self.running` is the compact copy of the cores' `running`). Once the
        // dispatcher has nothing queued every further core would get `None`, so the rest are
        // not asked: on a 64-core machine with a quarter of its cores idle, asking each of
        // them after every job's end was a tenth of a global-EDF run.
        for &core in &vacated {
            if self.policy.nothing_queued() {
                break;
            }
            self.pick_on(core, &mut picks);
        }
        for core in 0..self.cores_n {
            if self.running[core].is_none() && self.cores[core].vacated.is_none() {
                if self.policy.nothing_queued() {
                    break;
                }
                self.pick_on(core, &mut picks);
            }
        }
        // Phase 2: threads that left a core and were not picked again there are descheduled
        // before anything is dispatched, so a thread never appears on two cores at once.
        for &core in &vacated {
            if let Some((prev, reason)) = self.cores[core].vacated {
                if self.cores[core].running != Some(prev) {
                    self.cores[core].vacated = None;
                    self.emit(Event::Deschedule {
                        t: self.now,
                        core,
                        slot: prev,
                        reason,
                    });
                }
            }
        }
        // Phase 3: dispatch, or continue a thread picked again on its own core.
        for &(core, s) in &picks {
            if self.cores[core].vacated.take().is_some() {
                self.begin_run(core, s, false);
            } else {
                self.dispatch(core, s);
            }
        }
        vacated.clear();
        self.vacated_cores = vacated;
        self.picks = picks;
    }

    /// Phase 1 of `decide` on the idle `core`: asks the dispatcher, checks its pick (an
    /// invalid one is counted and re-queued, the core stays idle) and records it in `picks`.
    fn pick_on(&mut self, core: usize, picks: &mut Vec<(usize, Slot)>) {
        debug_assert!(self.cores[core].running.is_none());
        let picked = { pcall!(self, pick_next(core)) };
        let Some(s) = picked else { return };
        if s as usize >= self.threads.len() {
            let inv = &mut self.stats.invariants;
            Invariants::note(&mut inv.invalid_picks, &mut inv.reasons, || {
                format!(
                    "{}: invalid pick at {}: thread {s} on core {core}: no such thread",
                    self.policy.name(),
                    self.now
                )
            });
            return;
        }
        let t = &self.threads[s as usize];
        let taken = picks.iter().any(|&(_, p)| p == s);
        if t.state != ThreadState::Ready || !t.allowed_on(core) || taken {
            let why = if taken {
                "already picked for another core this instant"
            } else if t.state != ThreadState::Ready {
                "not ready"
            } else {
                "not allowed on that core by its affinity"
            };
            let inv = &mut self.stats.invariants;
            Invariants::note(&mut inv.invalid_picks, &mut inv.reasons, || {
                format!(
                    "{}: invalid pick at {}: thread {s} on core {core}: {why} (state {:?})",
                    self.policy.name(),
                    self.now,
                    t.state
                )
            });
            let t = &self.threads[s as usize];
            if t.state == ThreadState::Ready && !taken {
                pcall!(self, enqueue(s, Enqueue::Preempted));
            }
            return;
        }
        self.check_wait(s);
        self.threads[s as usize].state = ThreadState::Running(core);
        self.cores[core].running = Some(s);
        self.running[core] = Some(s);
        picks.push((core, s));
    }

    fn dispatch(&mut self, core: usize, slot: Slot) {
        let now = self.now;
        let from = self.threads[slot as usize].last_core.replace(core);
        if let Some(from) = from {
            if from != core {
                self.emit(Event::Migrate {
                    t: now,
                    slot,
                    from,
                    to: core,
                });
            }
        }
        let cost = self.scenario.policy().context_switch();
        let switch = cost > Nanos::ZERO && self.cores[core].last.is_some_and(|l| l != slot);
        self.cores[core].last = Some(slot);
        if switch {
            let c = &mut self.cores[core];
            c.generation += 1;
            c.switching = true;
            let g = c.generation;
            self.push(
                now + cost,
                Kind::SwitchDone {
                    core: core as u32,
                    generation: g,
                },
            );
        } else {
            self.begin_run(core, slot, true);
        }
    }

    /// Starts (`dispatched`) or continues the run of `slot` on `core` now and schedules the
    /// end of its slice.
    fn begin_run(&mut self, core: usize, slot: Slot, dispatched: bool) {
        let now = self.now;
        let c = &mut self.cores[core];
        c.charged_at = now;
        c.generation += 1;
        let generation = c.generation;
        if dispatched {
            self.emit(Event::Dispatch { t: now, core, slot });
        }
        let slice = { pcall!(self, time_slice(core, slot)) };
        let mut end = self.horizon;
        if let Some(r) = self.threads[slot as usize].remaining {
            end = end.min(now + r);
        }
        if let Some(s) = slice {
            end = end.min(now + s.max(Nanos(1)));
        }
        // A run phase that ran out while the thread was off its core (charged at a
        // preemption in the very instant) ends at once: it blocks in the next batch.
        let phase_over = match self.threads[slot as usize].phase {
            Some((_, left)) => {
                end = end.min(now + left);
                left == Nanos::ZERO
            }
            None => false,
        };
        // At the horizon itself the slice would end at `now` again and again (an endless
        // batch loop for sliced policies with unbounded work); `stop_all_at_end` stops it.
        if end > now || phase_over {
            self.push(
                end,
                Kind::SliceEnd {
                    core: core as u32,
                    generation,
                },
            );
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

    /// Runs the controller and applies its actions.
    fn control(&mut self) {
        let Some(mut ctl) = self.controller.take() else {
            return;
        };
        // Running threads may be charged lazily; the snapshot shows CPU time up to now.
        for core in 0..self.cores_n {
            self.charge(core);
        }
        let mut views: Vec<ThreadView> = self
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state != ThreadState::Done && t.process.is_some())
            .map(|(i, t)| ThreadView {
                id: i as u64,
                process: t.process.expect("filtered"),
                index: match t.owner {
                    Owner::Process { thread, .. } => thread as usize,
                    Owner::Task { .. } => 0,
                },
                group: t.group,
                core: match t.state {
                    ThreadState::Running(c) => Some(c),
                    _ => t.last_core.or_else(|| t.affinity.as_ref().map(|a| a[0])),
                },
                weight: t.weight,
                base_weight: self.scenario.processes()[t.process.expect("filtered")].weight(),
                runnable: matches!(t.state, ThreadState::Ready | ThreadState::Running(_)),
                cpu: t.cpu,
            })
            .collect();
        // Slots are reused, so slot order is not creation order: the snapshot goes in the
        // engine-independent order the controller contract promises.
        views.sort_unstable_by_key(ThreadView::key);
        let mut actions = Vec::new();
        {
            let snap = Snapshot {
                now: self.now,
                cores: self.cores_n,
                threads: &views,
                group_weights: &self.group_weights,
                scenario: self.scenario,
            };
            ctl.tick(&snap, &mut actions);
        }
        let period = ctl.period();
        self.controller = Some(ctl);
        for a in actions {
            self.act(a);
        }
        self.push(self.now + period, Kind::Control);
    }

    /// Applies one controller action to the model, or refuses it with a reason.
    pub(crate) fn act(&mut self, action: Action) {
        if let Some(why) = refusal(
            &action,
            self.scenario,
            &self.threads,
            self.group_weights.len(),
        ) {
            let inv = &mut self.stats.invariants;
            let ctl = self.controller.as_ref().map_or("controller", |c| c.name());
            Invariants::note(&mut inv.refused_actions, &mut inv.reasons, || {
                format!("{ctl}: refused {action:?} at {}: {why}", self.now)
            });
            return;
        }
        let now = self.now;
        match action {
            Action::SetWeight { thread, weight } => {
                let slot = thread as Slot;
                let old = std::mem::replace(&mut self.threads[slot as usize].weight, weight);
                if old != weight {
                    self.emit(Event::WeightChange {
                        t: now,
                        slot,
                        weight,
                    });
                    pcall!(self, reweight(slot, old));
                }
            }
            Action::Migrate { thread, core } => {
                let slot = thread as Slot;
                self.threads[slot as usize].affinity = Some(vec![core]);
                if let ThreadState::Running(c) = self.threads[slot as usize].state {
                    if c != core {
                        self.charge(c);
                        self.vacate(c, slot, Reason::Preempted);
                        pcall!(self, place(slot, core));
                        pcall!(self, enqueue(slot, Enqueue::Preempted));
                    }
                } else {
                    pcall!(self, place(slot, core));
                }
            }
            Action::SetGroupWeight { group, weight } => {
                self.group_weights[group] = weight;
                self.emit(Event::GroupWeightChange {
                    t: now,
                    group,
                    weight,
                });
            }
            Action::Stop { process } => {
                for slot in 0..self.threads.len() as Slot {
                    let t = &self.threads[slot as usize];
                    if t.process != Some(process) {
                        continue;
                    }
                    match t.state {
                        ThreadState::Running(c) => {
                            self.charge(c);
                            // A stop at the very instant the thread's work runs out (controller
                            // ticks come before slice ends in a batch) finishes it: stopped
                            // with nothing left, it would never get a slice end again.
                            if self.threads[slot as usize].remaining == Some(Nanos::ZERO)
                                && !self.cores[c].switching
                            {
                                self.finish(c, slot);
                                continue;
                            }
                            let cc = &mut self.cores[c];
                            cc.running = None;
                            cc.generation += 1;
                            // Not dispatched yet if still switching: no Deschedule then.
                            let dispatched = !std::mem::take(&mut cc.switching);
                            self.running[c] = None;
                            if dispatched {
                                self.emit(Event::Deschedule {
                                    t: now,
                                    core: c,
                                    slot,
                                    reason: Reason::Blocked,
                                });
                            }
                        }
                        ThreadState::Ready => {
                            pcall!(self, remove(slot));
                        }
                        _ => continue,
                    }
                    self.threads[slot as usize].state = ThreadState::Blocked;
                    self.emit(Event::Block { t: now, slot });
                }
            }
            Action::Resume { process } => {
                for slot in 0..self.threads.len() as Slot {
                    let t = &self.threads[slot as usize];
                    if t.process == Some(process) && t.state == ThreadState::Blocked {
                        self.threads[slot as usize].state = ThreadState::Ready;
                        self.became_ready(slot);
                        self.emit(Event::Wake { t: now, slot });
                        pcall!(self, enqueue(slot, Enqueue::Woken));
                    }
                }
            }
        }
    }

    // ---- Contract checks (issue 16 part 5) -------------------------------------------------

    /// `slot` became ready now (only tracked when the dispatcher declares a bound).
    fn became_ready(&mut self, slot: Slot) {
        if self.starvation_bound.is_none() {
            return;
        }
        let i = slot as usize;
        if self.ready_since.len() <= i {
            self.ready_since.resize(i + 1, Nanos::ZERO);
        }
        self.ready_since[i] = self.now;
    }

    /// The ready thread `slot` stops waiting now (dispatched, or the run ended): a wait
    /// longer than the declared bound is counted.
    fn check_wait(&mut self, slot: Slot) {
        let Some(bound) = self.starvation_bound else {
            return;
        };
        let since = self
            .ready_since
            .get(slot as usize)
            .copied()
            .unwrap_or(self.now);
        let waited = self.now.saturating_sub(since);
        if waited > bound {
            let inv = &mut self.stats.invariants;
            Invariants::note(&mut inv.starved, &mut inv.reasons, || {
                format!(
                    "{}: thread {slot} ({:?}) was ready from {since} to {} without running, \
                     longer than the policy's bound {bound}",
                    self.policy.name(),
                    self.threads[slot as usize].owner,
                    self.now
                )
            });
        }
    }

    /// Current group weights (tenants; changed by controllers).
    pub fn group_weights(&self) -> &[u64] {
        &self.group_weights
    }
}
