//! The policy interface: dispatchers (what runs next on a core) and the context they see.
//!
//! Shaped like the kernel's `struct sched_class` / `sched_ext_ops`: small named hooks that the
//! engine calls, with the engine owning time, events and thread state. A dispatcher owns its
//! queues and any per-thread bookkeeping (vruntime, pass, level) in side tables indexed by
//! [`Slot`]; slots are reused after a thread finishes, and [`Dispatcher::enqueue`] with
//! [`Enqueue::New`] announces a fresh thread in a slot.
//!
//! Calling contract, as sched_ext's ops table states its own: every hook is called by the
//! engine's single thread, between events, with a [`Ctx`] that shows the engine's state at
//! that moment; a hook may change only the dispatcher's own state (its queues, its side
//! tables) and answer. Each hook's documentation says who calls it, when, what it may do and
//! what its default does. The order within one instant is fixed: every event of the instant
//! (`enqueue` New/Expired/Woken, `exit`, `remove`, `reweight`, `place`, `balance`) first,
//! then `charge` (if [`Dispatcher::charge_before_preempt`]), `preempt`, `enqueue` Preempted
//! for each core it named, then `pick_next` for every idle core (cores that just gave up a
//! thread first, then the others in core order) until [`Dispatcher::nothing_queued`], then
//! `time_slice` for each dispatch.
//!
//! What the engine checks, and how it answers a broken dispatcher (counted in
//! [`crate::engine::Invariants`], with reasons in [`crate::SimStats::warnings`], never a
//! panic): a pick of a thread that is not ready, not allowed on the core, or already picked
//! for another core this instant is rejected (re-queued if it is ready) and the core stays
//! idle until the next event; a ready thread that waits longer than the dispatcher's
//! [`Dispatcher::starvation_bound`] is counted when its wait ends. `tests/contracts.rs` shows
//! each with a deliberately broken dispatcher.

use schedkit_core::scenario::{PolicySpec, Scenario};
use schedkit_core::trace::{Owner, Slot};
use schedkit_core::Nanos;

/// Why a thread is being queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// It just arrived (a process thread, or a real-time job's thread).
    New,
    /// Its time slice ran out.
    Expired,
    /// A more important thread took its core.
    Preempted,
    /// It was blocked or stopped and is runnable again.
    Woken,
}

/// The life of a simulated thread.
///
/// ```text
///            arrive            pick_next               finish
///  (none) ─────────▶ Ready ─────────────▶ Running(c) ─────────▶ Done
///                     ▲  ▲    expired / preempted │
///                     │  └────────────────────────┘
///               wake  │        stop / block
///                  Blocked ◀─────────────── (Ready or Running)
/// ```
/// The engine alone moves threads between states; dispatchers only see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    Ready,
    Running(usize),
    Blocked,
    Done,
}

/// A simulated thread as dispatchers see it.
#[derive(Clone, Debug)]
pub struct SimThread {
    pub owner: Owner,
    /// Scenario process or task index, for grouping.
    pub process: Option<usize>,
    pub task: Option<usize>,
    pub group: Option<usize>,
    /// When it became runnable for the first time.
    pub arrival: Nanos,
    /// Total CPU demand (`None`: runs until the horizon).
    pub demand: Option<Nanos>,
    /// Demand still to run.
    pub remaining: Option<Nanos>,
    /// CFS weight (controllers may change it).
    pub weight: u64,
    pub priority: i32,
    pub tickets: u64,
    /// Allowed cores (`None`: all).
    pub affinity: Option<Vec<usize>>,
    /// Real-time threads: absolute deadline of the job, period and relative deadline of the
    /// task. `Nanos::MAX` for others.
    pub deadline: Nanos,
    pub period: Nanos,
    pub rel_deadline: Nanos,
    /// Global creation order: the last tie-breaker (arrival, then file order).
    pub seq: u64,
    pub state: ThreadState,
    /// The core it last ran on. A real-time job's threads of a later region start with the
    /// core where the previous region ended (the fork/join point, where the job's master
    /// continues), so a thread run elsewhere counts as a migration (seed 001's definition:
    /// "a thread run on another core than where it was spawned, a job resumed on another core").
    pub last_core: Option<usize>,
    /// Whether it is one of the threads of a parallel region (`par = [...]`) of a job.
    pub par: bool,
    /// CPU time received so far (charged lazily for static-key policies).
    pub cpu: Nanos,
    /// Threads with a run/sleep `pattern`: the index of the current phase and the CPU time
    /// left in it (the thread blocks when it reaches zero). `None` for always-runnable threads.
    pub phase: Option<(usize, Nanos)>,
    /// Runs in the real-time class (`[[process]] class = "fifo"`): the kernel models
    /// (`eevdf`, `cfs`) run it before any fair thread, until it blocks; other policies
    /// ignore it.
    pub rt: bool,
}

impl SimThread {
    /// Whether `core` is in the thread's affinity.
    pub fn allowed_on(&self, core: usize) -> bool {
        self.affinity.as_ref().is_none_or(|a| a.contains(&core))
    }
    /// Remaining demand, with unbounded threads as `u64::MAX`.
    pub fn remaining_or_max(&self) -> u64 {
        self.remaining.map_or(u64::MAX, |r| r.0)
    }
}

/// What a dispatcher sees when the engine calls it.
pub struct Ctx<'a> {
    pub now: Nanos,
    pub cores: usize,
    /// Indexed by slot; finished slots may be reused.
    pub threads: &'a [SimThread],
    /// The thread running on each core.
    pub running: &'a [Option<Slot>],
    pub spec: &'a PolicySpec,
    pub scenario: &'a Scenario,
    /// Current group (tenant) weights; controllers may change them.
    pub group_weights: &'a [u64],
}

impl Ctx<'_> {
    pub fn thread(&self, slot: Slot) -> &SimThread {
        &self.threads[slot as usize]
    }
}

/// A dispatcher: decides what runs next on each core. See the module docs for the order of
/// the hooks within an instant and what the engine checks.
pub trait Dispatcher {
    /// The policy's scenario name. Called by the engine for reasons and by the registry; no
    /// default.
    fn name(&self) -> &'static str;

    /// Queues a runnable thread that is not running. Called by the engine when `slot` arrives
    /// (`New`: a process thread, or a real-time job's thread; a fresh thread in a possibly
    /// reused slot), when its slice ran out (`Expired`), when it lost its core (`Preempted`:
    /// to this dispatcher's `preempt`, to a controller's migration, or after an invalid pick
    /// of it was rejected) or when it was stopped and resumed (`Woken`). Never twice without a
    /// `pick_next` or `remove` of it in between. May: put it in its queues, update its keys.
    /// No default.
    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue);

    /// Removes and returns the thread to run on the idle `core`, or `None` to leave it idle.
    /// Called once per idle core after each instant's `preempt`. May: take a thread out of
    /// its queues (it must be ready, allowed on `core`, and not returned for another core this
    /// instant, else the engine rejects the pick). No default.
    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot>;

    /// How long the thread just dispatched (or continued) on `core` may run before the engine
    /// asks again (a slice end, then `enqueue` Expired). Called right after each dispatch.
    /// May: read its keys. Default: `None`, until it finishes or is preempted.
    fn time_slice(&mut self, _ctx: &Ctx, _core: usize, _slot: Slot) -> Option<Nanos> {
        None
    }

    /// Accounts `ran` nanoseconds of CPU to the running thread `slot` on `core` (already
    /// subtracted from its `remaining`). Called at every slice end, before a thread leaves a
    /// core, before controller ticks, and before every `preempt` if
    /// [`Dispatcher::charge_before_preempt`]. May: update its keys (vruntime, pass).
    /// Default: nothing.
    fn charge(&mut self, _ctx: &Ctx, _slot: Slot, _core: usize, _ran: Nanos) {}

    /// Whether `preempt` reads state that `charge` updates (remaining work, virtual runtime),
    /// so the engine must charge every running thread before each decision. Asked before
    /// each `preempt`. Default: true (always correct; policies with static keys return false
    /// to save O(cores) per decision).
    fn charge_before_preempt(&self) -> bool {
        true
    }

    /// Whether nothing is queued, so that `pick_next` would return `None` on every core and
    /// change nothing. Asked before each `pick_next`; once it says true, the idle cores left
    /// in the instant are not asked (on many mostly idle cores that saves a call per idle
    /// core per decision). Must not change state. Default: false (every idle core is asked).
    fn nothing_queued(&self) -> bool {
        false
    }

    /// Pushes into `out` the cores whose running thread must give way now. Called once per
    /// instant, after all its events. May: decide, and remember who is to run where (the
    /// engine then calls `enqueue` Preempted for each named core's thread and `pick_next`
    /// for it). A core named twice, an idle core or one that does not exist is ignored. Default: none
    /// (non-preemptive).
    fn preempt(&mut self, _ctx: &Ctx, _out: &mut Vec<usize>) {}

    /// Takes a queued (not running) thread out of the queues: a controller stopped its
    /// process while it waited. Called by the engine when it applies such an action. No
    /// default: a dispatcher that forgot it would hand out a stopped thread (an invalid pick).
    fn remove(&mut self, ctx: &Ctx, slot: Slot);

    /// The running thread `slot` finished its work on `core` (the exit hook, sched_ext's
    /// `exit_task`). Called by the engine right after the thread's Finish event and before
    /// its slot can be reused (by the next region of the same job, in the same instant). May:
    /// drop per-thread state, account the core as free. The thread is in no queue. Default:
    /// nothing.
    fn exit(&mut self, _ctx: &Ctx, _slot: Slot, _core: usize) {}

    /// The longest a ready thread may wait without running under this policy, if it
    /// guarantees one for the scenario it was built for (e.g. round robin: the slices of the
    /// other threads). Asked once, when the engine is built; every wait longer than it is
    /// counted in [`crate::engine::Invariants::starved`]. Default: `None`, no promise.
    fn starvation_bound(&self) -> Option<Nanos> {
        None
    }

    /// How long after a sleeping thread's timer fires it joins a run queue (a model of the
    /// kernel's wake-up path: timer interrupt, `try_to_wake_up`, the switch to it). The engine
    /// records the wake-up (`Event::Wake`) at the timer and calls `enqueue` Woken this much
    /// later; the thread stays blocked meanwhile. Asked at each `pattern` wake-up. Default:
    /// zero, at once.
    fn wake_latency(&self) -> Nanos {
        Nanos::ZERO
    }

    /// Period of [`Dispatcher::balance`] (per-core run queues only). Asked when the engine is
    /// built and after each balance. Default: never.
    fn balance_interval(&self) -> Option<Nanos> {
        None
    }

    /// Moves queued threads between per-core queues. Called every `balance_interval`, as the
    /// last event of its instant. May: move queued threads only. Default: nothing.
    fn balance(&mut self, _ctx: &Ctx) {}

    /// A controller changed `slot`'s weight (the new weight is in `ctx`; the thread may be
    /// queued, running or blocked). May: re-key it. Default: nothing.
    fn reweight(&mut self, _ctx: &Ctx, _slot: Slot, _old_weight: u64) {}

    /// A controller moved `slot` to `core` (its affinity is now `[core]`). Called before the
    /// engine re-queues it if it was running elsewhere; if queued, a per-core dispatcher
    /// should move it. Default: nothing.
    fn place(&mut self, _ctx: &Ctx, _slot: Slot, _core: usize) {}

    /// Whether the policy never idles a core while a thread that may run there waits. Read by
    /// the property tests, which check it for every policy that says so. Default: true.
    fn work_conserving(&self) -> bool {
        true
    }

    /// Policy-specific counters (e.g. PAWS steals), copied into [`crate::SimStats`] at the end
    /// of a run. Default: none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
