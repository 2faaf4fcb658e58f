//! The simulator and the runtime pool take the same PAWS, global-EDF and work-stealing
//! decisions (issue 16, "each policy once"), over random task sets.
//!
//! Each case draws a machine (1-4 cores) and a periodic fork-join task set (regions
//! `seq (par seq)*`, so every parallel region has the job's master before and after it, as
//! in the runtime pool, where a job is one fiber), runs it through `schedkit sim` and through
//! the runtime pool's dispatcher (`schedkit_runtime::paws::queues::Sched`, the state machine
//! the pool's workers execute) driven by a virtual clock below, and requires the same
//! dispatches: the same thread on the same core at the same instant, in the same order.
//!
//! The virtual clock treats a preemption request as honoured at once (an ideal preemption
//! point) and applies the events of one instant as the simulator's engine does (releases in
//! event order, then ends of runs, then one decision for the batch; the cores that were asked
//! to preempt pick first, then the others in core order). The victim of a steal is drawn by
//! the same seeded source on both sides (the pool's default is xorshift; the choice of
//! source is a parameter of the shared state machine, not part of its rules).
//!
//! `PROPTEST_CASES` sets the number of task sets per policy (default 1,000).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use schedkit_core::scenario::{Region, Scenario};
use schedkit_core::trace::{Event, Owner};
use schedkit_runtime::paws::queues::{Item, Kind, Mode, Notify, Sched};
use schedkit_sim::policies::paws::ChaChaVictims;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt::Write;

/// One dispatch: time (ns), core, `<task>.<job>#<k>` (k: the job's k-th thread, in order).
type Dispatch = (u64, usize, String);

#[derive(Clone, Debug)]
struct Task {
    period: u64,
    deadline: u64,
    offset: u64,
    /// Work of a sequential region, then (parallel threads, sequential work) pairs.
    first: u64,
    rest: Vec<(Vec<u64>, u64)>,
}

const MS: u64 = 1_000_000;
const UNIT: u64 = 250_000;

fn task() -> impl Strategy<Value = Task> {
    // A coarse grid so that equal deadlines and simultaneous events are common.
    (
        prop::sample::select(vec![4u64, 5, 6, 8, 10, 12]),
        0u64..3,
        0u64..3,
        1u64..8,
        prop::collection::vec((prop::collection::vec(1u64..8, 1..5), 1u64..6), 0..3),
    )
        .prop_map(|(p, dl, off, first, rest)| Task {
            period: p * MS,
            deadline: (p - dl) * MS,
            offset: off * MS,
            first: first * UNIT,
            rest: rest
                .into_iter()
                .map(|(v, s)| (v.into_iter().map(|c| c * UNIT).collect(), s * UNIT))
                .collect(),
        })
}

fn scenario(policy: &str, cores: usize, seed: u64, tasks: &[Task]) -> Scenario {
    let mut s = format!(
        "cores = {cores}\n[policy]\nname = \"{policy}\"\nseed = {seed}\n[run]\nhorizon = \"30ms\"\n"
    );
    let ns = |n: u64| format!("\"{n}ns\"");
    for (i, t) in tasks.iter().enumerate() {
        let mut regions = vec![format!("{{ seq = {} }}", ns(t.first))];
        for (par, seq) in &t.rest {
            let p: Vec<String> = par.iter().map(|&c| ns(c)).collect();
            regions.push(format!("{{ par = [{}] }}", p.join(", ")));
            regions.push(format!("{{ seq = {} }}", ns(*seq)));
        }
        write!(
            s,
            "[[task]]\nname = \"t{i}\"\nperiod = {}\ndeadline = {}\noffset = {}\nregions = [{}]\n",
            ns(t.period),
            ns(t.deadline),
            ns(t.offset),
            regions.join(", ")
        )
        .unwrap();
    }
    Scenario::parse("agree.toml", &s).expect("generated scenarios are valid")
}

/// The simulator's dispatches.
fn simulated(s: &Scenario) -> Vec<Dispatch> {
    let (_, log, _) = schedkit_sim::simulate_report(s, true).expect("simulates");
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut created: HashMap<(usize, u64), usize> = HashMap::new();
    let mut out = Vec::new();
    for e in log.expect("a trace").events {
        match e {
            Event::Arrive {
                slot,
                owner: Owner::Task { task, job },
                ..
            } => {
                let k = created.entry((task, job)).or_default();
                names.insert(slot, format!("{task}.{job}#{k}"));
                *k += 1;
            }
            Event::Dispatch { t, core, slot } if t < s.horizon() => {
                out.push((t.0, core, names[&slot].clone()))
            }
            _ => {}
        }
    }
    out
}

/// What an entry of the runtime's queues carries in this driver.
struct Work {
    label: String,
    left: u64,
    job: (usize, u64),
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Release(usize),
    End { core: usize, generation: u64 },
}

struct Clock<'a> {
    s: &'a Scenario,
    sched: Sched<Work, ChaChaVictims>,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u8, u64, Ev)>>,
    /// Per core: the running entry, since when, and the generation of its end event.
    running: Vec<Option<(Item<Work>, u64)>>,
    generation: Vec<u64>,
    /// Per job: region, threads left in it, deadline, threads created.
    jobs: HashMap<(usize, u64), (usize, usize, u64, usize)>,
    next_job: Vec<u64>,
    out: Vec<Dispatch>,
}

impl Clock<'_> {
    fn push(&mut self, t: u64, class: u8, e: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, class, self.seq, e)));
    }

    /// Entries of region `r` of `job`; `at` is the core where the previous region ended.
    fn start_region(&mut self, job: (usize, u64), r: usize, at: Option<usize>) {
        let (deadline, created) = {
            let j = self.jobs.get_mut(&job).expect("live job");
            j.0 = r;
            (j.2, j.3)
        };
        let (kind, work) = match &self.s.tasks()[job.0].regions()[r] {
            Region::Seq(c) => (Kind::Job, vec![c.0]),
            Region::Par(v) => (Kind::Thread, v.iter().map(|c| c.0).collect()),
        };
        let j = self.jobs.get_mut(&job).expect("live job");
        j.1 = work.len();
        j.3 += work.len();
        for (i, left) in work.into_iter().enumerate() {
            let label = format!("{}.{}#{}", job.0, job.1, created + i);
            let it = self.sched.item(deadline, kind, Work { label, left, job });
            match (kind, at) {
                // Rule B: on the core where the job forked.
                (Kind::Thread, Some(core)) => self.sched.spawn_one(core, it),
                // A release, or the job again after its join.
                _ => self.sched.defer_ready(it),
            }
        }
    }

    fn apply(&mut self, e: Ev) {
        match e {
            Ev::Release(task) => {
                let tk = &self.s.tasks()[task];
                let job = (task, self.next_job[task]);
                self.next_job[task] += 1;
                let deadline = self.now + tk.deadline().0;
                let next = self.now + tk.period().0;
                self.jobs.insert(job, (0, 0, deadline, 0));
                self.start_region(job, 0, None);
                if next < self.s.horizon().0 {
                    self.push(next, 0, Ev::Release(task));
                }
            }
            Ev::End { core, generation } => {
                if self.generation[core] != generation {
                    return;
                }
                let (it, _) = self.running[core].take().expect("a running entry");
                self.sched.stopped(core);
                let j = self.jobs.get_mut(&it.payload.job).expect("live job");
                j.1 -= 1;
                let r = j.0 + 1;
                if j.1 == 0 && r < self.s.tasks()[it.payload.job.0].regions().len() {
                    self.start_region(it.payload.job, r, Some(core));
                }
            }
        }
    }

    /// One decision after the instant's events, as the engine's `decide`.
    fn decide(&mut self) {
        let mut notes = Vec::new();
        self.sched.settle(&mut notes);
        let mut vacated = Vec::new();
        for n in notes {
            if let Notify::Preempt(c) = n {
                // An ideal preemption point: the entry stops now, rules (i)-(iii).
                let (mut it, since) = self.running[c].take().expect("a running entry");
                it.payload.left -= self.now - since;
                self.generation[c] += 1;
                self.sched.preempted(c, it);
                vacated.push(c);
            }
        }
        vacated.sort_unstable();
        let n = self.running.len();
        let order: Vec<usize> = vacated
            .iter()
            .copied()
            .chain((0..n).filter(|c| !vacated.contains(c)))
            .collect();
        for c in order {
            if self.running[c].is_some() {
                continue;
            }
            let Some((it, _)) = self.sched.pick(c) else {
                continue;
            };
            self.out.push((self.now, c, it.payload.label.clone()));
            self.generation[c] += 1;
            let end = (self.now + it.payload.left).min(self.s.horizon().0);
            let generation = self.generation[c];
            self.running[c] = Some((it, self.now));
            if end > self.now {
                self.push(
                    end,
                    2,
                    Ev::End {
                        core: c,
                        generation,
                    },
                );
            }
        }
    }
}

/// The runtime pool's dispatcher on a virtual clock.
fn runtime(s: &Scenario, mode: Mode) -> Vec<Dispatch> {
    let mut c = Clock {
        s,
        sched: Sched::with_victims(mode, s.cores(), ChaChaVictims::new(s.policy().seed())),
        now: 0,
        seq: 0,
        events: BinaryHeap::new(),
        running: (0..s.cores()).map(|_| None).collect(),
        generation: vec![0; s.cores()],
        jobs: HashMap::new(),
        next_job: vec![0; s.tasks().len()],
        out: Vec::new(),
    };
    for (i, t) in s.tasks().iter().enumerate() {
        if t.offset() < s.horizon() {
            c.push(t.offset().0, 0, Ev::Release(i));
        }
    }
    while let Some(&Reverse((t, ..))) = c.events.peek() {
        if t > s.horizon().0 {
            break;
        }
        c.now = t;
        while let Some(&Reverse((t2, _, _, e))) = c.events.peek() {
            if t2 != t {
                break;
            }
            c.events.pop();
            c.apply(e);
        }
        c.decide();
    }
    c.out.retain(|d| d.0 < s.horizon().0);
    c.out
}

fn agree(policy: &str, mode: Mode) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        1usize..5,
        0u64..(1 << 62),
        prop::collection::vec(task(), 1..5),
    );
    let dispatches = std::cell::Cell::new(0usize);
    runner
        .run(&strategy, |(cores, seed, tasks)| {
            let s = scenario(policy, cores, seed, &tasks);
            let sim = simulated(&s);
            let rt = runtime(&s, mode);
            dispatches.set(dispatches.get() + sim.len());
            if sim != rt {
                let at = sim.iter().zip(&rt).position(|(a, b)| a != b);
                return Err(TestCaseError::fail(format!(
                    "{policy}: first difference at dispatch {at:?}: sim {:?} vs runtime {:?}",
                    at.map(|i| &sim[i]),
                    at.map(|i| &rt[i])
                )));
            }
            Ok(())
        })
        .unwrap();
    // The cases exercised something.
    let dispatches = dispatches.get();
    assert!(dispatches > cases as usize, "{dispatches} dispatches");
}

#[test]
fn paws_simulator_and_runtime_pool_take_the_same_decisions() {
    agree("paws", Mode::Paws);
}

#[test]
fn ws_simulator_and_runtime_pool_take_the_same_decisions() {
    agree("ws", Mode::Ws);
}
