//! TFPS, the Thread Fair Preferential Scheduler (seed 004, 3.3.3).
//!
//! `w'_i = (n_op / n'_c) * w_i`, with n_op the number of online processors and n'_c the
//! number of (runnable) threads of the process. The thesis says TFPS gives a greedy process
//! the same CPU time as an optimally threaded one (n = n_op threads) and both more than a
//! single-threaded process; that holds only if processes with at most n_op threads keep their
//! weight, so the factor is `min(1, n_op / n)`: only greedy processes (n > n_op) are scaled.
//! On one core TFPS therefore equals PFS.
//!
//! Invariants: a process with n > n_op runnable threads has total weight n_op * weight(process)
//! (up to rounding to integers >= 1); others are untouched.

use crate::control::{Action, Controller, Snapshot};
use crate::controllers::pfs::runnable_per_process;
use crate::controllers::{div_round, set_weight};
use crate::time::Nanos;

pub struct Tfps {
    period: Nanos,
    count: Vec<u64>,
}

impl Tfps {
    pub fn new(period: Nanos) -> Tfps {
        Tfps {
            period,
            count: Vec::new(),
        }
    }
}

impl Controller for Tfps {
    fn name(&self) -> &'static str {
        "tfps"
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
        let n_op = snap.cores as u64;
        for t in snap.threads.iter().filter(|t| t.runnable) {
            let n = self.count[t.process];
            let w = if n > n_op {
                div_round(t.base_weight as u128 * n_op as u128, n as u128)
            } else {
                t.base_weight
            };
            set_weight(t, w, out);
        }
    }
}
