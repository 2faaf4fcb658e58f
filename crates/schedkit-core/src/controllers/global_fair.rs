//! Global fairness by a shuttle process (seed 004, 4.4), generalised to any number of cores
//! and to threads that come and go.
//!
//! CFS balances per-core loads (eqs. 4.1-4.3) but leaves imbalances smaller than half the
//! lightest movable weight alone: 1024 vs 4 x 335 on two cores stays as it is, and the 1024
//! thread runs 4x as long as each 335 thread instead of 3.06x (4.2.2). The thesis moves the
//! lightest thread of the heavy core, the *shuttle*, to the light core for one period and back
//! for the next, so that over two periods the heavy core's threads run faster and the light
//! core's slower, closer to GPS (lemma of 4.6.4).
//!
//! Phases, every `policy.period` (the thesis's flowchart, fig. 4.2):
//! - first period: nothing; CFS's own placement stands;
//! - **positioning (return)**: if shuttles are away (flag 1), each goes back to its home core
//!   (if it still exists and is runnable), and nothing else happens this period;
//! - otherwise **condition**: cores are ranked by load (eq. 4.1, runnable threads' weights) and
//!   paired heaviest with lightest, second heaviest with second lightest, and so on (on two
//!   cores this is the thesis's heavy and light core). A pair qualifies when the heavy core has
//!   at least two more runnable threads than the light one;
//! - **decision**: if eqs. 4.2-4.3 ([`crate::controllers::cfs_imbalance`]) say CFS itself will
//!   move load between the pair, CFS's migration has priority and the shuttle stays; otherwise
//!   the load to transfer is one thread, the lightest on the heavy core;
//! - **positioning (out)**: the shuttle moves to the light core (flag 0 -> 1).
//!
//! Generalisation: with more than two cores the pairing above runs one shuttle per pair per
//! period; loads and thread counts are recomputed from the snapshot at every "out" phase, so
//! threads that arrived, finished or blocked since are accounted for, and a shuttle that
//! finished while away is simply forgotten. Threads whose core is not known yet (before their
//! first dispatch) are left out of the loads.
//!
//! Tie-breaking: among the lightest threads of a heavy core the shuttle rotates (the next
//! thread id after the previous shuttle of that core, cyclically), so that the cost of
//! shuttling is shared by equal-weight threads instead of falling on one. Cores of equal load
//! rank by index.
//!
//! `Migrate` pins the thread to its target core (sched_setaffinity in real runs), which is the
//! thesis's "flag enforces the transfer": CFS's balancer cannot undo a shuttle move.

use crate::control::{Action, Controller, Snapshot};
use crate::controllers::cfs_imbalance;
use crate::time::Nanos;

/// A shuttle away from its home core.
#[derive(Clone, Copy, Debug)]
struct Away {
    thread: u64,
    home: usize,
}

pub struct GlobalFair {
    period: Nanos,
    imbalance_pct: u32,
    ticks: u64,
    away: Vec<Away>,
    /// Previous shuttle of each core, for rotation.
    last: Vec<Option<u64>>,
    load: Vec<u64>,
    nr: Vec<u64>,
    order: Vec<usize>,
}

impl GlobalFair {
    pub fn new(period: Nanos, imbalance_pct: u32) -> GlobalFair {
        GlobalFair {
            period,
            imbalance_pct,
            ticks: 0,
            away: Vec::new(),
            last: Vec::new(),
            load: Vec::new(),
            nr: Vec::new(),
            order: Vec::new(),
        }
    }
}

impl Controller for GlobalFair {
    fn name(&self) -> &'static str {
        "global-fair"
    }
    fn period(&self) -> Nanos {
        self.period
    }
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        self.ticks += 1;
        let cores = snap.cores;
        if self.ticks == 1 || cores < 2 {
            return; // first period: CFS's assignment
        }
        if !self.away.is_empty() {
            for a in self.away.drain(..) {
                if snap.threads.iter().any(|t| t.id == a.thread && t.runnable) {
                    out.push(Action::Migrate {
                        thread: a.thread,
                        core: a.home,
                    });
                }
            }
            return;
        }
        // Condition phase: loads (eq. 4.1) and thread counts per core.
        self.load.clear();
        self.load.resize(cores, 0);
        self.nr.clear();
        self.nr.resize(cores, 0);
        self.last.resize(cores, None);
        for t in snap.threads.iter().filter(|t| t.runnable) {
            if let Some(c) = t.core.filter(|&c| c < cores) {
                self.load[c] += t.weight;
                self.nr[c] += 1;
            }
        }
        let total: u64 = self.load.iter().sum();
        self.order.clear();
        self.order.extend(0..cores);
        let load = &self.load;
        self.order.sort_by_key(|&c| (std::cmp::Reverse(load[c]), c));
        for i in 0..cores / 2 {
            let (heavy, light) = (self.order[i], self.order[cores - 1 - i]);
            if self.nr[heavy] < self.nr[light] + 2 {
                continue;
            }
            // The lightest weight on the heavy core, and the shuttle among those threads.
            let on_heavy = || {
                snap.threads
                    .iter()
                    .filter(move |t| t.runnable && t.core == Some(heavy))
            };
            let Some(min_w) = on_heavy().map(|t| t.weight).min() else {
                continue;
            };
            // Decision phase: CFS's own migration has priority.
            if cfs_imbalance(
                self.load[heavy],
                self.load[light],
                total,
                cores,
                self.imbalance_pct,
                || min_w,
            )
            .is_some()
            {
                continue;
            }
            let prev = self.last[heavy];
            let candidates = || on_heavy().filter(|t| t.weight == min_w).map(|t| t.id);
            let shuttle = candidates()
                .filter(|&id| prev.is_none_or(|p| id > p))
                .min()
                .or_else(|| candidates().min());
            let Some(shuttle) = shuttle else { continue };
            self.last[heavy] = Some(shuttle);
            self.away.push(Away {
                thread: shuttle,
                home: heavy,
            });
            out.push(Action::Migrate {
                thread: shuttle,
                core: light,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ThreadView;
    use crate::scenario::Scenario;

    fn view(id: u64, core: usize, weight: u64) -> ThreadView {
        ThreadView {
            id,
            process: id as usize,
            group: None,
            core: Some(core),
            weight,
            base_weight: weight,
            runnable: true,
            cpu: Nanos::ZERO,
        }
    }

    #[test]
    fn shuttle_alternates_and_rotates() {
        let sc = Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"global-fair\"\n")
            .expect("scenario");
        let mut g = GlobalFair::new(Nanos::from_ms(100), 125);
        let mut threads = vec![view(0, 0, 1024)];
        threads.extend((1..5).map(|i| view(i, 1, 335)));
        let mut tick = |threads: &[ThreadView]| {
            let snap = Snapshot {
                now: Nanos::ZERO,
                cores: 2,
                threads,
                group_weights: &[],
                scenario: &sc,
            };
            let mut out = Vec::new();
            g.tick(&snap, &mut out);
            out
        };
        assert!(tick(&threads).is_empty(), "first period: CFS placement");
        let out = tick(&threads);
        assert_eq!(out, vec![Action::Migrate { thread: 1, core: 0 }]);
        threads[1].core = Some(0);
        assert_eq!(tick(&threads), vec![Action::Migrate { thread: 1, core: 1 }]);
        threads[1].core = Some(1);
        // The next shuttle is the next 335 thread.
        assert_eq!(tick(&threads), vec![Action::Migrate { thread: 2, core: 0 }]);
    }
}
