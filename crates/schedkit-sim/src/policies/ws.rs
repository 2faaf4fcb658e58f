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

use crate::policies::paws::reject_affinity;
use crate::policy::{Ctx, Dispatcher, Enqueue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedkit_core::scenario::{Scenario, ScenarioError};
use schedkit_core::trace::Slot;
use std::collections::VecDeque;

/// Where a queued thread is, for `remove`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    None,
    Injector,
    Deque(usize),
}

pub struct Ws {
    injector: VecDeque<Slot>,
    deques: Vec<VecDeque<Slot>>,
    place: Vec<Place>,
    rng: ChaCha8Rng,
    victims: Vec<usize>,
    steals: u64,
}

impl Ws {
    pub fn new(cores: usize, seed: u64) -> Ws {
        Ws {
            injector: VecDeque::new(),
            deques: vec![VecDeque::new(); cores],
            place: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            victims: Vec::new(),
            steals: 0,
        }
    }

    /// Builds WS for `scenario` (rejects `cpus`).
    pub fn build(scenario: &Scenario) -> Result<Ws, ScenarioError> {
        reject_affinity("ws", scenario)?;
        Ok(Ws::new(scenario.cores, scenario.policy.seed))
    }

    fn set(&mut self, slot: Slot, p: Place) {
        let i = slot as usize;
        if self.place.len() <= i {
            self.place.resize(i + 1, Place::None);
        }
        self.place[i] = p;
    }
}

impl Dispatcher for Ws {
    fn name(&self) -> &'static str {
        "ws"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        let t = ctx.thread(slot);
        match (why, t.par, t.last_core) {
            (Enqueue::New, true, Some(core)) => {
                self.deques[core].push_back(slot);
                self.set(slot, Place::Deque(core));
            }
            // Never preempted (no priorities, no slices); a woken thread rejoins the injector.
            _ => {
                self.injector.push_back(slot);
                self.set(slot, Place::Injector);
            }
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        let s = if let Some(s) = self.deques[core].pop_back() {
            s
        } else if let Some(s) = self.injector.pop_front() {
            s
        } else {
            self.victims.clear();
            self.victims
                .extend((0..ctx.cores).filter(|&c| c != core && !self.deques[c].is_empty()));
            if self.victims.is_empty() {
                return None;
            }
            let v = self.victims[self.rng.gen_range(0..self.victims.len())];
            self.steals += 1;
            self.deques[v].pop_front().expect("victim has work")
        };
        self.set(s, Place::None);
        Some(s)
    }

    fn charge_before_preempt(&self) -> bool {
        false
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        let q = match self
            .place
            .get(slot as usize)
            .copied()
            .unwrap_or(Place::None)
        {
            Place::None => return,
            Place::Injector => &mut self.injector,
            Place::Deque(c) => &mut self.deques[c],
        };
        if let Some(i) = q.iter().position(|&s| s == slot) {
            q.remove(i);
        }
        self.set(slot, Place::None);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("steals", self.steals)]
    }
}
