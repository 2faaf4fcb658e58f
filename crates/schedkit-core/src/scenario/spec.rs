//! The validated scenario's types.

use crate::time::Nanos;
use crate::weights::nice_to_weight;
use serde::{Deserialize, Serialize};
use std::fmt;


/// Every policy name the scenario format knows. Which engine runs which is decided by the
/// engines (`sim` rejects `run`-only policies with a located error, and vice versa).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    Fcfs,
    Sjf,
    Srtf,
    Rr,
    Priority,
    PriorityPreemptive,
    Lottery,
    Stride,
    Mlfq,
    Cfs,
    Eevdf,
    Pfs,
    Tfps,
    Twrs,
    GlobalFair,
    Tenants,
    Edf,
    Rm,
    Dm,
    Gedf,
    Pedf,
    Paws,
    Ws,
    SchedDeadline,
    Gang,
    Default,
    Exclusive,
    ProcessFair,
}

impl PolicyName {
    /// Every policy, in the order of [`crate::policies::POLICIES`] (the one list, with what
    /// each does and which engines run it).
    pub const ALL: &'static [PolicyName] = crate::policies::ALL;

    /// The name as written in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Fcfs => "fcfs",
            PolicyName::Sjf => "sjf",
            PolicyName::Srtf => "srtf",
            PolicyName::Rr => "rr",
            PolicyName::Priority => "priority",
            PolicyName::PriorityPreemptive => "priority-preemptive",
            PolicyName::Lottery => "lottery",
            PolicyName::Stride => "stride",
            PolicyName::Mlfq => "mlfq",
            PolicyName::Cfs => "cfs",
            PolicyName::Eevdf => "eevdf",
            PolicyName::Pfs => "pfs",
            PolicyName::Tfps => "tfps",
            PolicyName::Twrs => "twrs",
            PolicyName::GlobalFair => "global-fair",
            PolicyName::Tenants => "tenants",
            PolicyName::Edf => "edf",
            PolicyName::Rm => "rm",
            PolicyName::Dm => "dm",
            PolicyName::Gedf => "gedf",
            PolicyName::Pedf => "pedf",
            PolicyName::Paws => "paws",
            PolicyName::Ws => "ws",
            PolicyName::SchedDeadline => "sched-deadline",
            PolicyName::Gang => "gang",
            PolicyName::Default => "default",
            PolicyName::Exclusive => "exclusive",
            PolicyName::ProcessFair => "process-fair",
        }
    }

    pub fn parse(s: &str) -> Option<PolicyName> {
        PolicyName::ALL.iter().copied().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[policy]`: the policy and every parameter any policy reads. Defaults are documented in
/// `docs/scenario.md` and applied here, so engines never guess.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicySpec {
    pub name: PolicyName,
    /// Time slice of RR, lottery, stride, MLFQ's top level, gang. Default 4 ms (100 ms for gang).
    pub quantum: Nanos,
    /// Seed of every random choice (lottery draws, generators). Default 1.
    pub seed: u64,
    /// CFS targeted latency. Default 6 ms (the kernel's `sched_latency_ns`).
    pub sched_latency: Nanos,
    /// CFS minimum granularity. Default 0.75 ms.
    pub min_granularity: Nanos,
    /// CFS load-balancing interval. Default 4 ms.
    pub balance_interval: Nanos,
    /// The scheduler tick (1 / CONFIG_HZ) of the `eevdf` model: a thread whose slice is used
    /// up is switched out at the next tick. Default 4 ms (HZ = 250).
    #[serde(skip_serializing_if = "is_default_tick")]
    pub tick: Nanos,
    /// Controller period (PFS/TFPS/TWRS readjustment, shuttle balancer, tenant weights).
    /// Default 100 ms.
    pub period: Nanos,
    /// Cost charged for every context switch in the simulator. Default 0.
    pub context_switch: Nanos,
    /// MLFQ: number of levels (default 3); quantum doubles per level.
    pub levels: u32,
    /// MLFQ: priority boost interval (default 1 s; 0 disables).
    pub boost: Nanos,
    /// CFS: percentage the busiest core's load must exceed the local one by before the
    /// balancer moves anything (the kernel's `imbalance_pct`, default 125 = 25 %).
    pub imbalance_pct: u32,
    /// Gang: charge every slot switch with seed 002's overhead model for a cluster of
    /// `cores / cores_per_node` nodes whose jobs communicate with this pattern. `None` (no
    /// `comm` key): switches are free.
    pub gang_overhead: Option<GangOverheadSpec>,
    /// `process-fair` and `tenants` on real cores: correct the cgroup weights every period
    /// so that measured shares follow GPS (the kernel splits a group's weight over CPUs by
    /// its load there, which biases the shares of groups of different thread counts).
    /// Default true; the simulator's groups are exact and ignore it.
    pub trim: bool,
}

/// `[policy] comm` and `cores_per_node`: the simulated cluster behind gang switch costs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GangOverheadSpec {
    /// Consecutive cores that form one node (default 1).
    pub cores_per_node: usize,
    #[serde(skip)]
    pub pattern: crate::gang_overhead::Pattern,
}

/// The default `tick`: HZ = 250.
pub const DEFAULT_TICK: Nanos = Nanos::from_ms(4);

/// Keeps `tick` out of serialised scenarios that do not set it (their outputs predate it).
fn is_default_tick(t: &Nanos) -> bool {
    *t == DEFAULT_TICK
}

impl PolicySpec {
    pub fn new(name: PolicyName) -> PolicySpec {
        PolicySpec {
            name,
            quantum: if name == PolicyName::Gang {
                Nanos::from_ms(100)
            } else {
                Nanos::from_ms(4)
            },
            seed: 1,
            sched_latency: Nanos::from_ms(6),
            min_granularity: Nanos::from_us(750),
            balance_interval: Nanos::from_ms(4),
            tick: DEFAULT_TICK,
            period: Nanos::from_ms(100),
            context_switch: Nanos::ZERO,
            levels: 3,
            boost: Nanos::from_secs(1),
            imbalance_pct: 125,
            gang_overhead: None,
            trim: true,
        }
    }
}

/// A built-in synthetic workload for `schedkit run` (the simulator models every workload as
/// CPU demand).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Work {
    /// A busy loop.
    Spin,
    /// A strided walk over an array of `array` bytes, `stride` bytes apart.
    Stride { array: u64, stride: u64 },
    /// Iterations of `compute` busy work followed by a spin barrier across the process' threads.
    Barrier { compute: Nanos },
    /// Two threads passing a token through shared memory with busy waiting.
    PingPong,
}

/// One `[[process]]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Process {
    pub name: String,
    pub arrival: Nanos,
    /// CPU demand per thread; `None` runs until the horizon.
    pub burst: Option<Nanos>,
    pub threads: u32,
    pub nice: i32,
    /// CFS weight per thread (from `weight`, or from `nice` via prio_to_weight).
    pub weight: u64,
    /// Smaller is more important.
    pub priority: i32,
    pub tickets: u64,
    /// Index into [`Scenario::groups`].
    pub group: Option<usize>,
    /// Initial placement / affinity.
    pub cpus: Option<Vec<usize>>,
    pub work: Work,
    /// External command (`run` only; the simulator treats it as CPU-bound demand).
    pub command: Option<Vec<String>>,
    /// Run and sleep phases each thread repeats (`None`: always runnable). `burst`, if given,
    /// still bounds the thread's total CPU time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Vec<Phase>>,
    /// 1-based line of the `[[process]]` entry in the file, for messages from engines.
    pub line: usize,
}

impl Process {
    /// A process built in code (experiments, the one-line `run`): arrives at 0, runs until
    /// the horizon, nice 0, one ticket, no group or affinity, the scenario defaults otherwise.
    pub fn new(name: impl Into<String>, threads: u32, work: Work) -> Process {
        Process {
            name: name.into(),
            arrival: Nanos::ZERO,
            burst: None,
            threads,
            nice: 0,
            weight: nice_to_weight(0),
            priority: 0,
            tickets: 1,
            group: None,
            cpus: None,
            work,
            command: None,
            pattern: None,
            line: 0,
        }
    }
}

/// One phase of a thread's `pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Be runnable until this much CPU time was received.
    Run(Nanos),
    /// Block for this much wall-clock (simulated) time, then wake.
    Sleep(Nanos),
}

/// One `[[group]]` (tenant).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    pub name: String,
    pub weight: u64,
}

/// One region of a periodic task's job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Region {
    /// Sequential work.
    Seq(Nanos),
    /// Parallel threads with these execution times; the next region starts when all finish.
    Par(Vec<Nanos>),
}

impl Region {
    /// Total execution time of the region.
    pub fn work(&self) -> Nanos {
        match self {
            Region::Seq(c) => *c,
            Region::Par(v) => Nanos(v.iter().map(|c| c.0).sum()),
        }
    }
}

/// One `[[task]]`: a periodic real-time task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Task {
    pub name: String,
    pub period: Nanos,
    /// Relative deadline (defaults to the period).
    pub deadline: Nanos,
    /// First release.
    pub offset: Nanos,
    pub regions: Vec<Region>,
    pub cpus: Option<Vec<usize>>,
    pub line: usize,
}

impl Task {
    /// Total execution time of one job.
    pub fn work(&self) -> Nanos {
        Nanos(self.regions.iter().map(|r| r.work().0).sum())
    }
    /// Utilisation C / T.
    pub fn utilisation(&self) -> f64 {
        self.work().0 as f64 / self.period.0 as f64
    }
    /// Critical path length: the longest chain through the regions.
    pub fn critical_path(&self) -> Nanos {
        Nanos(
            self.regions
                .iter()
                .map(|r| match r {
                    Region::Seq(c) => c.0,
                    Region::Par(v) => v.iter().map(|c| c.0).max().unwrap_or(0),
                })
                .sum(),
        )
    }
}

/// A validated scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scenario {
    /// File the scenario came from (for messages).
    pub file: String,
    /// Modelled cores (`sim`); `run` detects the machine.
    pub cores: usize,
    pub policy: PolicySpec,
    /// Stop time for unbounded work.
    pub horizon: Nanos,
    pub processes: Vec<Process>,
    pub groups: Vec<Group>,
    pub tasks: Vec<Task>,
}


impl Scenario {
    /// Total threads across processes.
    pub fn total_threads(&self) -> usize {
        self.processes.iter().map(|p| p.threads as usize).sum()
    }

    /// Whether any work is unbounded (runs until the horizon).
    pub fn has_unbounded_work(&self) -> bool {
        !self.tasks.is_empty() || self.processes.iter().any(|p| p.burst.is_none())
    }

    /// A located error for an engine that cannot run this scenario's policy.
    pub fn policy_error(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.clone(),
            line: 0,
            column: 0,
            field: "policy.name".into(),
            message: message.into(),
        }
    }
}
