//! TWRS, Thread Weight Readjustment Scheduling (seed 004, 3.4.3, eq. 3.3).
//!
//! Every period, on each processor k:
//! `weight(thread_ijk) = weight(process_jk) * (processor_k(No_threads) - process_jk(No_threads))`,
//! the number of threads on the core that do *not* belong to the thread's process. A process
//! with many threads on a core gets a small factor, a single-threaded one a large factor, so
//! the gap of CPU usage between them shrinks, while (unlike PFS) a multithreaded process is
//! still rewarded for its threads.
//!
//! Conventions (the thesis leaves them open):
//! - a process alone on its core would get factor 0; it keeps factor 1 (its weight does not
//!   matter against nobody, and 0 is not a CFS weight);
//! - a thread's processor is the core it runs on or whose queue last held it
//!   ([`crate::control::ThreadView::core`]); threads not placed yet (before their first
//!   dispatch, without affinity) are counted together as one extra "unplaced" processor, so at
//!   time 0 on several cores the formula uses machine-wide counts;
//! - only runnable threads count.

use crate::control::{Action, Controller, Snapshot};
use crate::controllers::set_weight;
use crate::time::Nanos;

pub struct Twrs {
    period: Nanos,
    /// Runnable threads per processor bucket (cores, then "unplaced").
    on_core: Vec<u64>,
    /// Runnable threads per (process, bucket), process-major.
    own: Vec<u64>,
}

impl Twrs {
    pub fn new(period: Nanos) -> Twrs {
        Twrs {
            period,
            on_core: Vec::new(),
            own: Vec::new(),
        }
    }
}

impl Controller for Twrs {
    fn name(&self) -> &'static str {
        "twrs"
    }
    fn period(&self) -> Nanos {
        self.period
    }
    fn emits(&self) -> &'static [crate::control::ActionKind] {
        use crate::control::ActionKind;
        &[ActionKind::SetWeight]
    }
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        let buckets = snap.cores + 1;
        let bucket = |c: Option<usize>| c.filter(|&c| c < snap.cores).unwrap_or(snap.cores);
        self.on_core.clear();
        self.on_core.resize(buckets, 0);
        self.own.clear();
        self.own
            .resize(snap.scenario.processes().len() * buckets, 0);
        for t in snap.threads.iter().filter(|t| t.runnable) {
            let b = bucket(t.core);
            self.on_core[b] += 1;
            self.own[t.process * buckets + b] += 1;
        }
        for t in snap.threads.iter().filter(|t| t.runnable) {
            let b = bucket(t.core);
            let others = self.on_core[b] - self.own[t.process * buckets + b];
            set_weight(t, t.base_weight * others.max(1), out);
        }
    }
}
