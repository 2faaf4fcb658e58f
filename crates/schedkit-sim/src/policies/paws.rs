//! PAWS: global EDF with priority-aware work stealing for periodic fork-join tasks (seed 001,
//! Fonseca et al., section 4, rules A-F).
//!
//! Queues:
//! - **Rule A**: one global queue of jobs ordered by absolute deadline, ties FIFO (enqueue
//!   order). A job's sequential regions (its master) live here; so do threads of a parallel
//!   region that opens a job (no core runs the job yet), and background processes (deadline
//!   "never", so they sort after every real-time job and never preempt one).
//! - **Rule B**: the threads of a parallel region are pushed to the local queue of the core
//!   where the job forked (the core where its previous region ended; see
//!   [`crate::policy::SimThread::last_core`]), not to the global queue.
//! - **Rule C**: a local queue is a priority queue by deadline whose entries are deques of
//!   threads of equal deadline (a `BTreeMap<deadline, VecDeque>`, empty deques removed, so the
//!   highest-priority non-empty deque is found in O(log k), k = distinct deadlines on the
//!   core). A core takes the *bottom* of its highest-priority deque first.
//! - **Rule D**: with nothing local, it takes the head of the global queue.
//! - **Rule E**: with nothing there either, it picks a random busy core (seeded ChaCha8 from
//!   `[policy] seed`) and steals the *top* of that core's highest-priority deque. A failed
//!   steal attempt (a victim with an empty local queue) would just be retried, so the victim
//!   is drawn uniformly among the cores whose local queue holds work: the same distribution as
//!   retrying until a steal succeeds, without modelling the failed attempts.
//! - **Preemption** happens only when a job becomes ready: at its release, or when it resumes
//!   after its join (the kernel's PAWS wakes the master thread, and a wake-up goes through the
//!   same check). A ready job that no free core will take preempts the running job or thread
//!   with the latest deadline if its own deadline is earlier (ties: the lowest core index), and
//!   is dispatched directly on that core (the paper's "dispatching routine"). A core that just
//!   became idle with threads in its local queue counts as running its best local deadline
//!   (rule C would make it run that next); the job is then handed to it before those threads.
//!   Parallel threads never preempt. What was preempted goes
//!   back (i) to the global queue if it is a job, (ii) to the bottom of its deque in its core's
//!   local queue if it is a locally spawned thread, (iii) to the global queue if it was stolen
//!   (**rule F**: a stolen thread preempted is not returned to a deque).
//! - A job's continuation after a join (its next sequential region) is the job again: it goes
//!   to the global queue (the paper's master thread is woken, it is not a spawned thread), and
//!   may preempt as above.
//!
//! The decisions are not written here: they are `schedkit_policy::paws::Sched`, the state
//! machine the runtime pool runs, in mode `Paws`. This file only translates the engine's hooks
//! (an instant's releases are one `settle` batch, decided in `preempt`) and draws victims from
//! a seeded ChaCha8. `tests/policy_agree.rs` runs the runtime's driver and this dispatcher on
//! random task sets and requires the same decisions.
//!
//! Invariants: every ready thread is in exactly one place (global queue, one local deque, or
//! directly assigned to a core for this instant); an idle core always finds work if any is
//! ready, so the policy is work-conserving. Affinities (`cpus`) are rejected: PAWS places
//! work itself. Counters: steals, picks from the local queue, picks from the global queue,
//! release preemptions.

use crate::policy::{Ctx, Dispatcher, Enqueue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedkit_core::scenario::{Scenario, ScenarioError};
use schedkit_core::trace::{Owner, Slot};
use schedkit_policy::paws::{Item, Kind, Mode, Notify, Sched, Source, Victims};

/// Rule E's victim choice in the simulator: uniform from `[policy] seed`.
pub struct ChaChaVictims(ChaCha8Rng);

impl ChaChaVictims {
    pub fn new(seed: u64) -> ChaChaVictims {
        ChaChaVictims(ChaCha8Rng::seed_from_u64(seed))
    }
}

impl Victims for ChaChaVictims {
    fn choose(&mut self, n: usize) -> usize {
        self.0.gen_range(0..n)
    }
}

/// Counters reported through [`Dispatcher::counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PawsCounters {
    pub steals: u64,
    pub local_picks: u64,
    pub global_picks: u64,
    pub release_preemptions: u64,
}

/// The engine's side of the shared state machine, for `paws` and `ws`: the entry each core
/// runs (handed back on a preemption) and the counters.
pub(crate) struct Driver {
    pub sched: Sched<Slot, ChaChaVictims>,
    on_core: Vec<Option<Item<Slot>>>,
    notes: Vec<Notify>,
    pub counters: PawsCounters,
}

impl Driver {
    pub fn new(mode: Mode, cores: usize, seed: u64) -> Driver {
        Driver {
            sched: Sched::with_victims(mode, cores, ChaChaVictims::new(seed)),
            on_core: vec![None; cores],
            notes: Vec::new(),
            counters: PawsCounters::default(),
        }
    }

    /// Queues `slot` for `why`; `ready` says whether a new job takes part in the next settle
    /// (may be handed to a core or preempt) rather than waiting for rule D.
    pub fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue, ready: bool) {
        let t = ctx.thread(slot);
        let kind = if t.par { Kind::Thread } else { Kind::Job };
        let it = self.sched.item(t.deadline.0, kind, slot);
        match (why, t.par, t.last_core) {
            // Rule B: spawned on the core running the job.
            (Enqueue::New, true, Some(core)) => self.sched.spawn_one(core, it),
            (Enqueue::New, ..) if ready && matches!(t.owner, Owner::Task { .. }) => {
                self.sched.defer_ready(it)
            }
            (Enqueue::New | Enqueue::Woken, ..) => self.sched.push_queued(it),
            // (i)-(iii): the core it ran on (set at dispatch) puts it back.
            (Enqueue::Expired | Enqueue::Preempted, ..) => {
                let core = t.last_core.expect("a preempted thread ran somewhere");
                let it = self.on_core[core].take().unwrap_or(it);
                self.sched.preempted(core, it);
            }
        }
    }

    pub fn pick_next(&mut self, core: usize) -> Option<Slot> {
        // The engine asks only idle cores: whatever ran here has finished.
        self.sched.stopped(core);
        let (it, source) = self.sched.pick_from(core)?;
        match source {
            Source::Local => self.counters.local_picks += 1,
            Source::Global | Source::Free => self.counters.global_picks += 1,
            Source::Stolen => self.counters.steals += 1,
            Source::Preempting => {}
        }
        self.on_core[core] = Some(it);
        Some(it.payload)
    }

    /// Decides the instant's batch of ready jobs; the cores to preempt go to `out`.
    pub fn settle(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        if !self.sched.has_fresh() {
            return;
        }
        // Threads that finished this instant left their cores without a hook.
        for (c, r) in ctx.running.iter().enumerate() {
            if r.is_none() && self.sched.running(c).is_some() {
                self.sched.stopped(c);
                self.on_core[c] = None;
            }
        }
        let mut notes = std::mem::take(&mut self.notes);
        notes.clear();
        self.sched.settle(&mut notes);
        for n in &notes {
            if let Notify::Preempt(c) = *n {
                self.counters.release_preemptions += 1;
                out.push(c);
            }
        }
        self.notes = notes;
    }

    pub fn remove(&mut self, slot: Slot) {
        self.sched.remove_where(|&s| s == slot);
    }
}

/// The PAWS dispatcher.
pub struct Paws {
    driver: Driver,
}

/// Rejects what PAWS cannot honour: pinned tasks or processes.
pub(crate) fn reject_affinity(name: &str, scenario: &Scenario) -> Result<(), ScenarioError> {
    let located = |line: usize, field: &str, what: &str| ScenarioError {
        file: scenario.file().to_string(),
        line,
        column: 1,
        field: field.to_string(),
        message: format!(
            "policy \"{name}\" places work on cores itself (work stealing); remove `cpus` from \
             {what}"
        ),
    };
    if let Some(t) = scenario.tasks().iter().find(|t| t.cpus().is_some()) {
        return Err(located(
            t.line(),
            "task.cpus",
            &format!("task \"{}\"", t.name()),
        ));
    }
    if let Some(p) = scenario.processes().iter().find(|p| p.cpus().is_some()) {
        return Err(located(
            p.line(),
            "process.cpus",
            &format!("process \"{}\"", p.name()),
        ));
    }
    Ok(())
}

impl Paws {
    pub fn new(cores: usize, seed: u64) -> Paws {
        Paws {
            driver: Driver::new(Mode::Paws, cores, seed),
        }
    }

    /// Builds PAWS for `scenario` (rejects `cpus`).
    pub fn build(scenario: &Scenario) -> Result<Paws, ScenarioError> {
        reject_affinity("paws", scenario)?;
        Ok(Paws::new(scenario.cores(), scenario.policy().seed()))
    }

    pub fn counters(&self) -> PawsCounters {
        self.driver.counters
    }
}

impl Dispatcher for Paws {
    fn name(&self) -> &'static str {
        "paws"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.driver.enqueue(ctx, slot, why, true);
    }

    fn pick_next(&mut self, _ctx: &Ctx, core: usize) -> Option<Slot> {
        self.driver.pick_next(core)
    }

    fn charge_before_preempt(&self) -> bool {
        false
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        self.driver.settle(ctx, out);
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        // Only blocked or stopped threads are removed; task threads never block.
        self.driver.remove(slot);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.driver.counters;
        vec![
            ("steals", c.steals),
            ("local_picks", c.local_picks),
            ("global_picks", c.global_picks),
            ("release_preemptions", c.release_preemptions),
        ]
    }
}
