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
pub trait Controller: Send {
    /// Its scenario name.
    fn name(&self) -> &'static str;
    /// How often `tick` runs.
    fn period(&self) -> Nanos;
    /// Looks at the snapshot and pushes actions. Called every `period`, first at time 0.
    fn tick(&mut self, snapshot: &Snapshot, out: &mut Vec<Action>);
}
