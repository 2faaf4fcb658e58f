//! The one list of scheduling policies: each name, one line of what it does, and which engines
//! run it. [`PolicyName::ALL`], the simulator's `SIM_POLICIES`, `schedkit policies` and the
//! policy lists in `sim --help` and `compare --help` are all read from [`POLICIES`], so a
//! policy added here shows up everywhere at once (and a policy left out fails the tests that
//! build every [`PolicyName`]).

use crate::scenario::PolicyName;

/// Whether `schedkit run` (real cores) runs a policy, and for which kind of scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RealEngine {
    /// Simulator only.
    No,
    /// Scenarios of `[[process]]` entries.
    Processes,
    /// Scenarios of periodic `[[task]]` entries (the real-time pool or SCHED_DEADLINE).
    Tasks,
}

/// One policy: its name, one line of what it does, and its engines.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInfo {
    pub name: PolicyName,
    /// One line, in plain words, of what the policy does.
    pub about: &'static str,
    /// `schedkit sim` (and `compare`, `sim --sweep`) runs it.
    pub sim: bool,
    /// `schedkit run` runs it, and on which scenarios.
    pub run: RealEngine,
}

impl PolicyInfo {
    /// The engines as `schedkit policies` prints them: `sim`, `run`, `sim, run`, with the
    /// kind of scenario `run` takes for tasks.
    pub fn engines(&self) -> &'static str {
        match (self.sim, self.run) {
            (true, RealEngine::No) => "sim",
            (true, RealEngine::Processes) => "sim, run",
            (true, RealEngine::Tasks) => "sim, run ([[task]] files)",
            (false, RealEngine::Processes) => "run",
            (false, RealEngine::Tasks) => "run ([[task]] files)",
            (false, RealEngine::No) => "none",
        }
    }
}

const fn p(name: PolicyName, about: &'static str, sim: bool, run: RealEngine) -> PolicyInfo {
    PolicyInfo {
        name,
        about,
        sim,
        run,
    }
}

use PolicyName as N;
use RealEngine::{No, Processes, Tasks};

/// Every policy, in the order help and error messages list them.
#[rustfmt::skip]
pub const POLICIES: &[PolicyInfo] = &[
    p(N::Fcfs, "first come, first served: the thread ready first runs until it finishes (SCHED_FIFO on real cores)", true, Processes),
    p(N::Sjf, "shortest job first: the shortest `burst` runs to completion, never preempted", true, No),
    p(N::Srtf, "shortest remaining time first: SJF that preempts for a shorter remaining time", true, No),
    p(N::Rr, "round robin: each thread runs at most `quantum`, then waits at the tail (SCHED_RR on real cores)", true, Processes),
    p(N::Priority, "static priorities: the smallest `priority` runs to completion", true, No),
    p(N::PriorityPreemptive, "static priorities: a more important thread takes the core at once", true, No),
    p(N::Lottery, "lottery: each `quantum` goes to a thread drawn in proportion to its `tickets`", true, No),
    p(N::Stride, "stride: shares in proportion to `tickets`, without randomness", true, No),
    p(N::Mlfq, "multilevel feedback queue: `levels` queues, the quantum doubles per level, a `boost` lifts all", true, No),
    p(N::Cfs, "model of Linux's CFS (before 6.6): weights from `nice`, `sched_latency`, `min_granularity`, load balancing", true, No),
    p(N::Eevdf, "model of Linux's EEVDF fair class (6.6 and later): virtual deadlines, slices ended at the `tick`", true, No),
    p(N::Pfs, "process-fair share: every process gets the same CPU share whatever its thread count", true, Processes),
    p(N::Tfps, "thread-fair process share: a process's threads beyond the core count get no extra share", true, Processes),
    p(N::Twrs, "thread-weighted share: processes weighted by the threads they have beside the others", true, Processes),
    p(N::GlobalFair, "global fairness across cores: moves threads between cores so shares match nice levels machine-wide", true, Processes),
    p(N::Tenants, "tenant groups share the machine by `[[group]] weight`; threads share their group's part", true, Processes),
    p(N::Edf, "earliest deadline first for periodic `[[task]]`s", true, No),
    p(N::Rm, "rate monotonic: fixed priorities, the shorter period first", true, No),
    p(N::Dm, "deadline monotonic: fixed priorities, the shorter relative deadline first", true, No),
    p(N::Gedf, "global EDF: one deadline queue for all cores (the real-time pool on real cores)", true, Tasks),
    p(N::Pedf, "partitioned EDF: each task placed on one core, EDF on each core", true, No),
    p(N::Paws, "priority-aware work stealing: global EDF for jobs, stealing for their parallel regions", true, Tasks),
    p(N::Ws, "plain work stealing: one deque per core, no deadlines, no preemption", true, Tasks),
    p(N::SchedDeadline, "the kernel's SCHED_DEADLINE, one reservation per task", false, Tasks),
    p(N::Gang, "gang scheduling: all threads of a process run together in time slots of `quantum`", true, Processes),
    p(N::Default, "the kernel's own scheduler on real cores; its model in sim (eevdf from Linux 6.6, cfs before)", true, Processes),
    p(N::Exclusive, "exclusive mode: the job's CPUs cleared of other tasks and interrupts while it runs", false, Processes),
    p(N::ProcessFair, "every process in its own cgroup with an equal weight (the kernel does the rest)", false, Processes),
];

/// The entry of `name`.
pub fn info(name: PolicyName) -> &'static PolicyInfo {
    POLICIES
        .iter()
        .find(|i| i.name == name)
        .expect("every PolicyName is in POLICIES (checked by a test)")
}

/// How many policies the simulator runs (the length of [`SIM`]).
const fn sim_count() -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < POLICIES.len() {
        if POLICIES[i].sim {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The names of [`POLICIES`], or of those the simulator runs, in list order. Const so that
/// [`PolicyName::ALL`] and [`SIM`] stay slices known at compile time.
const fn names<const N: usize>(sim_only: bool) -> [PolicyName; N] {
    let mut out = [PolicyName::Fcfs; N];
    let (mut i, mut n) = (0, 0);
    while i < POLICIES.len() {
        if !sim_only || POLICIES[i].sim {
            out[n] = POLICIES[i].name;
            n += 1;
        }
        i += 1;
    }
    out
}

/// Every policy name, in list order (what [`PolicyName::ALL`] is).
pub const ALL: &[PolicyName] = &names::<{ POLICIES.len() }>(false);

/// The policies the simulator runs, in list order (what `schedkit_sim::policies::SIM_POLICIES`
/// is).
pub const SIM: &[PolicyName] = &names::<{ sim_count() }>(true);

/// One line per policy, `name  engines  what it does`, aligned: the list `schedkit policies`
/// prints, and (with `sim_only`) the one in `sim --help` and `compare --help`.
pub fn table(sim_only: bool) -> String {
    let rows: Vec<&PolicyInfo> = POLICIES.iter().filter(|i| !sim_only || i.sim).collect();
    let w = rows
        .iter()
        .map(|i| i.name.as_str().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for i in rows {
        if sim_only {
            out.push_str(&format!("  {:w$}  {}\n", i.name.as_str(), i.about));
        } else {
            out.push_str(&format!(
                "{:w$}  {:25}  {}\n",
                i.name.as_str(),
                i.engines(),
                i.about
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A match with no wildcard: adding a variant to `PolicyName` fails to compile here
    /// until it is handled, and the loop below then fails until it is in `POLICIES`.
    fn every_variant() -> Vec<PolicyName> {
        let check = |p: PolicyName| match p {
            N::Fcfs | N::Sjf | N::Srtf | N::Rr | N::Priority | N::PriorityPreemptive => p,
            N::Lottery | N::Stride | N::Mlfq | N::Cfs | N::Eevdf | N::Pfs | N::Tfps => p,
            N::Twrs | N::GlobalFair | N::Tenants | N::Edf | N::Rm | N::Dm | N::Gedf => p,
            N::Pedf | N::Paws | N::Ws | N::SchedDeadline | N::Gang | N::Default => p,
            N::Exclusive | N::ProcessFair => p,
        };
        ALL.iter().map(|&p| check(p)).collect()
    }

    #[test]
    fn the_list_names_each_policy_once_and_parses_back() {
        let all = every_variant();
        assert_eq!(all.len(), 28, "a PolicyName is missing from POLICIES");
        for (i, p) in all.iter().enumerate() {
            assert!(!all[..i].contains(p), "{p} twice");
            assert_eq!(PolicyName::parse(p.as_str()), Some(*p));
            assert!(!info(*p).about.is_empty());
        }
        assert_eq!(PolicyName::ALL, ALL);
        assert!(SIM.iter().all(|p| info(*p).sim));
        assert_eq!(SIM.len(), POLICIES.iter().filter(|i| i.sim).count());
    }

    #[test]
    fn the_table_has_a_line_per_policy() {
        assert_eq!(table(false).lines().count(), POLICIES.len());
        assert_eq!(table(true).lines().count(), SIM.len());
        assert!(table(false).contains("sched-deadline"));
        assert!(!table(true).contains("sched-deadline"));
    }
}
