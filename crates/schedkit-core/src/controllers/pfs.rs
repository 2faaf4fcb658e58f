//! PFS, the Process Fair Scheduler (Wong et al., summarised in seed 004, 3.3.2).
//!
//! Every period each runnable thread gets `weight(thread) = weight(process) / alpha`, where
//! alpha is the number of runnable threads of its process, so every process receives the
//! same CPU time whatever its thread count (the thesis: multithreaded processes are not
//! rewarded, "considered as a defect in this algorithm").
//!
//! Invariants: the weights of one process's runnable threads sum to its scenario weight, up
//! to rounding (each weight is rounded to the nearest integer, at least 1). Threads that are
//! not runnable keep their weight. Ties: none (the rule is per thread).

use crate::control::{Action, Controller, Snapshot};
use crate::controllers::{div_round, set_weight};
use crate::time::Nanos;

pub struct Pfs {
    period: Nanos,
    /// Runnable threads per process (scratch, reused every tick).
    count: Vec<u64>,
}

impl Pfs {
    pub fn new(period: Nanos) -> Pfs {
        Pfs {
            period,
            count: Vec::new(),
        }
    }
}

/// Runnable threads of each scenario process.
pub(crate) fn runnable_per_process(snap: &Snapshot, count: &mut Vec<u64>) {
    count.clear();
    count.resize(snap.scenario.processes().len(), 0);
    for t in snap.threads.iter().filter(|t| t.runnable) {
        count[t.process] += 1;
    }
}

impl Controller for Pfs {
    fn name(&self) -> &'static str {
        "pfs"
    }
    fn period(&self) -> Nanos {
        self.period
    }
    fn emits(&self) -> &'static [crate::control::ActionKind] {
        use crate::control::ActionKind;
        &[ActionKind::SetWeight]
    }
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        runnable_per_process(snap, &mut self.count);
        for t in snap.threads.iter().filter(|t| t.runnable) {
            let alpha = self.count[t.process];
            set_weight(t, div_round(t.base_weight as u128, alpha as u128), out);
        }
    }
}
