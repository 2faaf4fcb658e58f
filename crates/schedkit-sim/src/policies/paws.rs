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
//!   may preempt as above. The runtime pool's dispatcher makes the same decisions
//!   (`crates/schedkit/tests/paws_agree.rs` checks a one-core scenario dispatch by dispatch).
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
use schedkit_core::Nanos;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Where a queued or running thread belongs when it is preempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A job (or job-like entry) of the global queue: back to the global queue (i).
    Job,
    /// A thread spawned on this core: back to its deque there (ii).
    Local(usize),
    /// A thread stolen from another core: to the global queue (iii, rule F).
    Stolen,
}

/// One core's local priority queue of deques (rule C).
#[derive(Default)]
struct LocalQueue {
    deques: BTreeMap<Nanos, VecDeque<Slot>>,
    len: usize,
}

impl LocalQueue {
    fn push_bottom(&mut self, deadline: Nanos, slot: Slot) {
        self.deques.entry(deadline).or_default().push_back(slot);
        self.len += 1;
    }
    /// The bottom of the highest-priority deque (the owner's end).
    fn pop_bottom(&mut self) -> Option<Slot> {
        let mut e = self.deques.first_entry()?;
        let s = e.get_mut().pop_back().expect("empty deques are removed");
        if e.get().is_empty() {
            e.remove();
        }
        self.len -= 1;
        Some(s)
    }
    /// The top of the highest-priority deque (the thieves' end).
    fn pop_top(&mut self) -> Option<Slot> {
        let mut e = self.deques.first_entry()?;
        let s = e.get_mut().pop_front().expect("empty deques are removed");
        if e.get().is_empty() {
            e.remove();
        }
        self.len -= 1;
        Some(s)
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

/// The PAWS dispatcher.
pub struct Paws {
    global: BTreeSet<(Nanos, u64, Slot)>,
    /// Global-queue key of each queued slot (for removal).
    global_key: Vec<Option<(Nanos, u64)>>,
    local: Vec<LocalQueue>,
    origin: Vec<Origin>,
    /// Released jobs dispatched directly on a core this instant.
    assigned: Vec<Option<Slot>>,
    /// Jobs that became ready in the current batch (released or resumed after a join).
    released: Vec<Slot>,
    ticket: u64,
    rng: ChaCha8Rng,
    victims: Vec<usize>,
    pub counters: PawsCounters,
}

/// Rejects what PAWS cannot honour: pinned tasks or processes.
pub(crate) fn reject_affinity(name: &str, scenario: &Scenario) -> Result<(), ScenarioError> {
    let located = |line: usize, field: &str, what: &str| ScenarioError {
        file: scenario.file.clone(),
        line,
        column: 1,
        field: field.to_string(),
        message: format!(
            "policy \"{name}\" places work on cores itself (work stealing); remove `cpus` from \
             {what}"
        ),
    };
    if let Some(t) = scenario.tasks.iter().find(|t| t.cpus.is_some()) {
        return Err(located(
            t.line,
            "task.cpus",
            &format!("task \"{}\"", t.name),
        ));
    }
    if let Some(p) = scenario.processes.iter().find(|p| p.cpus.is_some()) {
        return Err(located(
            p.line,
            "process.cpus",
            &format!("process \"{}\"", p.name),
        ));
    }
    Ok(())
}

impl Paws {
    pub fn new(cores: usize, seed: u64) -> Paws {
        Paws {
            global: BTreeSet::new(),
            global_key: Vec::new(),
            local: (0..cores).map(|_| LocalQueue::default()).collect(),
            origin: Vec::new(),
            assigned: vec![None; cores],
            released: Vec::new(),
            ticket: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            victims: Vec::new(),
            counters: PawsCounters::default(),
        }
    }

    /// Builds PAWS for `scenario` (rejects `cpus`).
    pub fn build(scenario: &Scenario) -> Result<Paws, ScenarioError> {
        reject_affinity("paws", scenario)?;
        Ok(Paws::new(scenario.cores, scenario.policy.seed))
    }

    fn grow(&mut self, slot: Slot) {
        let i = slot as usize;
        if self.origin.len() <= i {
            self.origin.resize(i + 1, Origin::Job);
            self.global_key.resize(i + 1, None);
        }
    }

    fn push_global(&mut self, deadline: Nanos, slot: Slot) {
        self.ticket += 1;
        self.global.insert((deadline, self.ticket, slot));
        self.global_key[slot as usize] = Some((deadline, self.ticket));
        self.origin[slot as usize] = Origin::Job;
    }

    fn take_global(&mut self, slot: Slot) -> bool {
        match self.global_key[slot as usize].take() {
            Some((d, t)) => self.global.remove(&(d, t, slot)),
            None => false,
        }
    }
}

impl Dispatcher for Paws {
    fn name(&self) -> &'static str {
        "paws"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.grow(slot);
        let t = ctx.thread(slot);
        let deadline = t.deadline;
        match why {
            Enqueue::New => match (t.par, t.last_core) {
                // Rule B: spawned on the core running the job.
                (true, Some(core)) => {
                    self.local[core].push_bottom(deadline, slot);
                    self.origin[slot as usize] = Origin::Local(core);
                }
                (_, at) => {
                    self.push_global(deadline, slot);
                    // A job released or resumed after its join (not a process thread: with
                    // no deadline it could never preempt anyway).
                    if (at.is_none() || !t.par) && matches!(t.owner, Owner::Task { .. }) {
                        self.released.push(slot);
                    }
                }
            },
            // (i)-(iii).
            _ => match self.origin[slot as usize] {
                Origin::Local(core) => self.local[core].push_bottom(deadline, slot),
                Origin::Job | Origin::Stolen => self.push_global(deadline, slot),
            },
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        if let Some(s) = self.assigned[core].take() {
            return Some(s);
        }
        // Rule C.
        if let Some(s) = self.local[core].pop_bottom() {
            self.counters.local_picks += 1;
            return Some(s);
        }
        // Rule D.
        if let Some(&(d, t, s)) = self.global.first() {
            self.global.remove(&(d, t, s));
            self.global_key[s as usize] = None;
            self.counters.global_picks += 1;
            return Some(s);
        }
        // Rule E.
        self.victims.clear();
        self.victims
            .extend((0..ctx.cores).filter(|&c| c != core && self.local[c].len > 0));
        if self.victims.is_empty() {
            return None;
        }
        let v = self.victims[self.rng.gen_range(0..self.victims.len())];
        let s = self.local[v].pop_top().expect("victim has work");
        self.origin[s as usize] = Origin::Stolen;
        self.counters.steals += 1;
        Some(s)
    }

    fn charge_before_preempt(&self) -> bool {
        false
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        if self.released.is_empty() {
            return;
        }
        let mut released = std::mem::take(&mut self.released);
        // Cores that will take from the global queue this instant: idle, nothing local.
        let free = (0..ctx.cores)
            .filter(|&c| ctx.running[c].is_none() && self.local[c].len == 0)
            .count();
        // Ready jobs that the free cores will not take (they take the global queue's first
        // `free` entries in order) may preempt: the running thread of a core, or the best
        // local thread of a core about to pick it (rule C), `running` telling which.
        let mut busy: Vec<(Nanos, usize, bool)> = (0..ctx.cores)
            .filter_map(|c| match ctx.running[c] {
                Some(s) => Some((ctx.thread(s).deadline, c, true)),
                None if self.assigned[c].is_none() => {
                    self.local[c].deques.keys().next().map(|&d| (d, c, false))
                }
                None => None,
            })
            .collect();
        let waiting: Vec<(Nanos, u64, Slot)> = self.global.iter().skip(free).copied().collect();
        released.sort_unstable();
        for (deadline, _, slot) in waiting {
            if released.binary_search(&slot).is_err() {
                continue;
            }
            // The latest deadline running, the lowest core on a tie.
            let Some(i) =
                (0..busy.len()).max_by_key(|&i| (busy[i].0, std::cmp::Reverse(busy[i].1)))
            else {
                break;
            };
            if busy[i].0 <= deadline {
                break;
            }
            let (_, core, running) = busy.swap_remove(i);
            self.take_global(slot);
            self.assigned[core] = Some(slot);
            if running {
                self.counters.release_preemptions += 1;
                out.push(core);
            }
        }
        released.clear();
        self.released = released;
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        // Only blocked or stopped threads are removed; task threads never block. Processes
        // (the only threads a controller could stop) live in the global queue.
        self.grow(slot);
        self.take_global(slot);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = self.counters;
        vec![
            ("steals", c.steals),
            ("local_picks", c.local_picks),
            ("global_picks", c.global_picks),
            ("release_preemptions", c.release_preemptions),
        ]
    }
}
