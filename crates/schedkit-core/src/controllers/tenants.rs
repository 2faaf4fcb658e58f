//! Tenant (VM) weights set by the user (seed 004, chapter 5, Algorithm 1), as a hierarchical
//! split of group weights onto thread weights.
//!
//! The thesis lets the user give each VM (here: a `[[group]]`) an arbitrary weight, changeable
//! while running, and gives VM i CPU time `W_i * period / M` per period. schedkit models the
//! hierarchy the way its GPS reference does ([`crate::gps`]): every period, a group's current
//! weight (`Snapshot::group_weights`, changed by `Action::SetGroupWeight`) is split among its
//! runnable member processes in proportion to their weights, and a process's part equally
//! among its runnable threads; an ungrouped process is its own tenant. The thread weight is
//!
//! `w(thread) = SCALE * W_tenant * (w_process / sum of runnable member weights) / n_threads`
//!
//! with `SCALE` = 1024, so a tenant of weight 1 carries the weight of one nice-0 thread and
//! small tenant weights (1:3) still split into integers with rounding error below 0.5 %.
//! On one run queue this gives each tenant exactly its GPS share; on several cores the CFS
//! balancer spreads the weights as it would any others.
//!
//! A weight changed between two ticks takes effect at the next tick, within one period.
//! Invariants: the runnable threads of one tenant carry `SCALE * W_tenant` in total, up to
//! rounding (weights are integers >= 1).

use crate::control::{Action, Controller, Snapshot};
use crate::controllers::pfs::runnable_per_process;
use crate::controllers::{div_round, set_weight};
use crate::time::Nanos;

/// Thread-weight units per unit of tenant weight.
pub const SCALE: u64 = 1024;

pub struct Tenants {
    period: Nanos,
    count: Vec<u64>,
    /// Sum of the weights of each group's runnable member processes.
    member_weight: Vec<u64>,
}

impl Tenants {
    pub fn new(period: Nanos) -> Tenants {
        Tenants {
            period,
            count: Vec::new(),
            member_weight: Vec::new(),
        }
    }
}

impl Controller for Tenants {
    fn name(&self) -> &'static str {
        "tenants"
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
        self.member_weight.clear();
        self.member_weight.resize(snap.group_weights.len(), 0);
        for (p, proc_) in snap.scenario.processes().iter().enumerate() {
            if let (Some(g), true) = (proc_.group(), self.count[p] > 0) {
                self.member_weight[g] += proc_.weight();
            }
        }
        for t in snap.threads.iter().filter(|t| t.runnable) {
            let p = &snap.scenario.processes()[t.process];
            let n = self.count[t.process] as u128;
            let w = match p.group() {
                Some(g) => div_round(
                    SCALE as u128 * snap.group_weights[g] as u128 * p.weight() as u128,
                    self.member_weight[g] as u128 * n,
                ),
                None => div_round(SCALE as u128 * p.weight() as u128, n),
            };
            set_weight(t, w, out);
        }
    }
}
