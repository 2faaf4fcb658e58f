//! The policy interface: dispatchers (what runs next on a core) and the context they see.
//!
//! Shaped like the kernel's `struct sched_class` / `sched_ext_ops`: small named hooks that the
//! engine calls, with the engine owning time, events and thread state. A dispatcher owns its
//! queues and any per-thread bookkeeping (vruntime, pass, level) in side tables indexed by
//! [`Slot`]; slots are reused after a thread finishes, and [`Dispatcher::enqueue`] with
//! [`Enqueue::New`] announces a fresh thread in a slot.
//!
//! Calling contract (all hooks are called by the engine's single thread, between events):
//! - `enqueue` is called for every thread that becomes runnable and is not running: on
//!   arrival (`New`), when its slice expired (`Expired`), when it was preempted (`Preempted`),
//!   or when it wakes (`Woken`). A thread is never enqueued twice without a pick or `remove`
//!   in between.
//! - `pick_next(core)` removes and returns the thread to run on an idle core, or `None`. The
//!   engine checks the answer: a thread that is not ready, or not allowed on `core` by its
//!   affinity, is rejected, counted in [`crate::engine::Invariants::invalid_picks`] and
//!   re-enqueued, and the core stays idle until the next event.
//! - `time_slice` is asked right after a dispatch (and after a continued slice): `None` runs
//!   the thread until it finishes or is preempted.
//! - `charge` reports CPU time consumed by a running thread since the last charge; it is
//!   called at every slice end and before every `preempt` round, so keys that depend on
//!   remaining work or virtual runtime are current.
//! - `preempt` is called once per batch of simultaneous events, after all of them were
//!   applied; it pushes the cores whose running thread must give way now.
//! - `remove` takes a queued thread out (blocked or stopped while waiting).

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

/// A dispatcher: decides what runs next on each core.
pub trait Dispatcher {
    /// The policy's scenario name.
    fn name(&self) -> &'static str;

    /// Queues a runnable thread. See the module docs for when it is called.
    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue);

    /// Removes and returns the thread to run on the idle `core`.
    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot>;

    /// How long the thread just dispatched on `core` may run before the engine asks again.
    /// Default: until it finishes or is preempted.
    fn time_slice(&mut self, _ctx: &Ctx, _core: usize, _slot: Slot) -> Option<Nanos> {
        None
    }

    /// Accounts `ran` nanoseconds of CPU to the running thread `slot` (already subtracted
    /// from its `remaining`). Default: nothing.
    fn charge(&mut self, _ctx: &Ctx, _slot: Slot, _core: usize, _ran: Nanos) {}

    /// Whether `preempt` reads state that `charge` updates (remaining work, virtual
    /// runtime), so the engine must charge every running thread before each decision.
    /// Default: true (always correct; policies with static keys return false to save
    /// O(cores) per decision).
    fn charge_before_preempt(&self) -> bool {
        true
    }

    /// Pushes into `out` the cores whose running thread must be preempted now. Default: none
    /// (non-preemptive).
    fn preempt(&mut self, _ctx: &Ctx, _out: &mut Vec<usize>) {}

    /// Takes a queued thread out of the queues (it blocked or was stopped while waiting).
    fn remove(&mut self, ctx: &Ctx, slot: Slot);

    /// Period of [`Dispatcher::balance`] (per-core run queues only). Default: never.
    fn balance_interval(&self) -> Option<Nanos> {
        None
    }

    /// Moves queued threads between per-core queues. Default: nothing.
    fn balance(&mut self, _ctx: &Ctx) {}

    /// A controller changed `slot`'s weight (the new weight is in `ctx`). Default: nothing.
    fn reweight(&mut self, _ctx: &Ctx, _slot: Slot, _old_weight: u64) {}

    /// A controller moved `slot` to `core` (its affinity is now `[core]`). The thread may be
    /// queued or running elsewhere; if queued, a per-core dispatcher should move it.
    fn place(&mut self, _ctx: &Ctx, _slot: Slot, _core: usize) {}

    /// Whether the policy never idles a core while a thread that may run there waits. The
    /// property tests check this for every policy that says so.
    fn work_conserving(&self) -> bool {
        true
    }

    /// Policy-specific counters (e.g. PAWS steals), copied into [`crate::SimStats`] at the end
    /// of a run. Default: none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
