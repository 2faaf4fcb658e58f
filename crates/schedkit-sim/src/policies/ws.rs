//! WS: classic randomized work stealing without priorities (Blumofe & Leiserson, cited by
//! seed 001 section 3 as [6]; the baseline the paper's PAWS makes priority-aware).
//!
//! Queues: one deque per core and one FIFO injector for released jobs (a work-stealing runtime
//! needs a way in for work that no worker spawned; Rayon's global injector is the model). The
//! threads of a parallel region are pushed to the bottom of the deque of the core where the
//! job forked (where its previous region ended). A core takes the bottom of its own deque,
//! else the head of the injector, else the top of the deque of a random core with work
//! (seeded ChaCha8 from `[policy] seed`; drawing among non-empty victims is the distribution
//! of retrying random steals until one succeeds). A job's continuation after a join goes to
//! the injector, like a release.
//!
//! No deadlines anywhere: nothing is ordered by priority and nothing is preempted, so a job
//! released while all cores are busy waits for a core to run out of work, however close its
//! deadline. That is exactly the unbounded response time seed 001 section 3 warns about.
//! Ties: FIFO in the injector, LIFO at a deque's bottom. Work-conserving. Affinities (`cpus`)
//! are rejected. Counters: steals.
//!
//! The decisions are `schedkit_policy::paws::Sched` in mode `Ws` (the runtime pool's `ws`),
//! driven through the same adapter as `paws` (`policies/paws.rs`); its global queue is the
//! injector.

use crate::policies::paws::{reject_affinity, Driver};
use crate::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_core::scenario::{Scenario, ScenarioError};
use schedkit_core::trace::Slot;
use schedkit_policy::paws::Mode;

pub struct Ws {
    driver: Driver,
}

impl Ws {
    pub fn new(cores: usize, seed: u64) -> Ws {
        Ws {
            driver: Driver::new(Mode::Ws, cores, seed),
        }
    }

    /// Builds WS for `scenario` (rejects `cpus`).
    pub fn build(scenario: &Scenario) -> Result<Ws, ScenarioError> {
        reject_affinity("ws", scenario)?;
        Ok(Ws::new(scenario.cores(), scenario.policy().seed()))
    }
}

impl Dispatcher for Ws {
    fn name(&self) -> &'static str {
        "ws"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        // Nothing preempts: released jobs wait in the injector for a core's rule D.
        self.driver.enqueue(ctx, slot, why, false);
    }

    fn pick_next(&mut self, _ctx: &Ctx, core: usize) -> Option<Slot> {
        self.driver.pick_next(core)
    }

    fn charge_before_preempt(&self) -> bool {
        false
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        self.driver.remove(slot);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("steals", self.driver.counters.steals)]
    }
}
