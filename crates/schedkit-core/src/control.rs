//! Controllers: policies that act every period on a snapshot of the system.
//!
//! PFS, TFPS, TWRS (weight readjustment), the shuttle balancer (global fairness), tenant
//! weights and the gang matrix are controllers. The *same* controller code runs in both
//! engines: the simulator applies the returned [`Action`]s to its model, `schedkit run`
//! applies them with setpriority, sched_setaffinity, cgroup writes and the freezer. That is
//! what makes "plan in the simulator, run for real" honest.

use crate::scenario::Scenario;
use crate::time::Nanos;

/// One thread as a controller sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadView {
    /// Engine handle, for actions only (simulator slot, or kernel TID for real runs). Slots
    /// are reused and TIDs are the kernel's, so neither orders threads the same way in both
    /// engines: controllers order and break ties by [`ThreadView::key`], never by `id`.
    pub id: u64,
    /// Scenario process index.
    pub process: usize,
    /// The thread's number within its process: the scenario's thread number for threads the
    /// engine starts itself, the order of first sighting (then TID) for a command's threads.
    pub index: usize,
    pub group: Option<usize>,
    /// The core it runs on, or the core whose queue holds it (last core it ran on).
    pub core: Option<usize>,
    /// Its current weight.
    pub weight: u64,
    /// The weight the scenario gave it (from `nice` or `weight`).
    pub base_weight: u64,
    /// Runnable (ready or running), as opposed to blocked, stopped or finished.
    pub runnable: bool,
    /// CPU time consumed so far.
    pub cpu: Nanos,
}

impl ThreadView {
    /// The thread's identity in both engines: (scenario process, thread number). Controllers
    /// order threads by it, so the simulator and `schedkit run` make the same decision from
    /// the same snapshot whatever slots or TIDs the threads have.
    pub fn key(&self) -> (usize, usize) {
        (self.process, self.index)
    }
}

/// What a controller sees each period.
pub struct Snapshot<'a> {
    pub now: Nanos,
    pub cores: usize,
    /// Live threads, sorted by [`ThreadView::key`] (both engines sort before every tick, so
    /// a controller that walks or sums the slice in order sees the same order in each).
    pub threads: &'a [ThreadView],
    /// Current group weights (index = scenario group).
    pub group_weights: &'a [u64],
    /// Each scenario process's CPU time so far over all its threads, ended ones included
    /// (index = scenario process): the simulator's exact count; in a real run the kernel's
    /// per-cgroup accounting where the run has it, the sampler's per-thread sums otherwise.
    /// A controller that needs an entity's CPU time whole (the share trim) reads this, not
    /// the live threads' `cpu`, which loses what ended threads ran.
    pub process_cpu: &'a [Nanos],
    /// Changes whenever the source of `process_cpu` changes (a real run whose accounting
    /// became unreadable falls back to its samples): totals of two sources are not
    /// comparable, so a controller differencing them starts afresh.
    pub process_cpu_epoch: u64,
    pub scenario: &'a Scenario,
}

/// A top-level entity of the fair-share hierarchy: in a real run, what one cgroup of its own
/// holds (a process under `process-fair`; a tenant group, or an ungrouped process, under
/// `tenants`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    /// Scenario process `p`.
    Process(usize),
    /// Scenario group `g`.
    Group(usize),
}

/// Units of [`Action::SetEntityWeight`]'s weight per unit of cgroup v2 `cpu.weight` (100: a
/// nice-0 process): millionths, so the share trim's fractional weights pass unrounded (a
/// cgroup v1 `cpu.shares` file holds 10.24 per v2 unit).
pub const ENTITY_WEIGHT_SCALE: u64 = 1_000_000;

/// What a controller asks the engine to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Give thread `thread` weight `weight` (real runs: the nearest nice value).
    SetWeight { thread: u64, weight: u64 },
    /// Move thread `thread` to `core` (affinity set to that core).
    Migrate { thread: u64, core: usize },
    /// Set group `group`'s weight.
    SetGroupWeight { group: usize, weight: u64 },
    /// Stop every thread of process `process` (gang scheduling).
    Stop { process: usize },
    /// Resume every thread of process `process`.
    Resume { process: usize },
    /// Give top-level entity `entity` the weight `weight` / [`ENTITY_WEIGHT_SCALE`] in
    /// cgroup v2 units, without changing its nominal weight (the share trim's correction).
    /// Real runs: the entity's cgroup weight file. The simulator: the entity's threads share
    /// that weight (10.24 thread-weight units per v2 unit, a nice-0 thread's 1024 per 100),
    /// a group's split among its member processes by their weights.
    SetEntityWeight { entity: Entity, weight: u64 },
}

/// What an [`Action`] does, without its operands: what a controller declares it may push,
/// and what an engine declares it can apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionKind {
    SetWeight,
    Migrate,
    SetGroupWeight,
    Stop,
    Resume,
    SetEntityWeight,
}

impl ActionKind {
    /// Every kind (the simulator applies them all).
    pub const ALL: &'static [ActionKind] = &[
        ActionKind::SetWeight,
        ActionKind::Migrate,
        ActionKind::SetGroupWeight,
        ActionKind::Stop,
        ActionKind::Resume,
        ActionKind::SetEntityWeight,
    ];
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::SetWeight { .. } => ActionKind::SetWeight,
            Action::Migrate { .. } => ActionKind::Migrate,
            Action::SetGroupWeight { .. } => ActionKind::SetGroupWeight,
            Action::Stop { .. } => ActionKind::Stop,
            Action::Resume { .. } => ActionKind::Resume,
            Action::SetEntityWeight { .. } => ActionKind::SetEntityWeight,
        }
    }
}

/// The kinds `controller` may push that an engine applying only `supported` cannot: an
/// engine refuses to build a run when this is not empty, rather than drop actions later.
pub fn unsupported(controller: &dyn Controller, supported: &[ActionKind]) -> Vec<ActionKind> {
    controller
        .emits()
        .iter()
        .copied()
        .filter(|k| !supported.contains(k))
        .collect()
}

/// A periodic controller.
///
/// Calling contract: both engines call it from one thread. The simulator calls `tick` at time
/// 0 and then every `period` of virtual time, as the second event class of its instant (after
/// releases and arrivals, before slice ends), with every running thread charged up to now;
/// `schedkit run` calls it every `period` of real time on a sampled snapshot. A controller may
/// change only its own state and push [`Action`]s; it never touches the engine. The engine
/// applies the actions in order; one it cannot apply (an unknown or finished thread, a core,
/// group or process that does not exist, a zero weight) is refused and counted with its
/// reason (the simulator's `Invariants::refused_actions`), the rest still apply.
pub trait Controller: Send {
    /// Its scenario name, used in refusal reasons. No default.
    fn name(&self) -> &'static str;
    /// How often `tick` runs. Asked when the engine starts and after every tick (a controller
    /// may change it). No default.
    fn period(&self) -> Nanos;
    /// Looks at the snapshot and pushes actions into `out` (empty on entry). Called every
    /// `period`, first at time 0. No default.
    fn tick(&mut self, snapshot: &Snapshot, out: &mut Vec<Action>);
    /// Every kind of action `tick` may push. Asked once, when a run is built: an engine that
    /// cannot apply one of them refuses the run ([`unsupported`]). No default.
    fn emits(&self) -> &'static [ActionKind];
}
