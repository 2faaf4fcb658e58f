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
    /// Engine identifier (simulator slot, or kernel TID for real runs).
    pub id: u64,
    /// Scenario process index.
    pub process: usize,
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

/// What a controller sees each period.
pub struct Snapshot<'a> {
    pub now: Nanos,
    pub cores: usize,
    pub threads: &'a [ThreadView],
    /// Current group weights (index = scenario group).
    pub group_weights: &'a [u64],
    pub scenario: &'a Scenario,
}

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
}
