//! `[policy]`: the policy's name and parameters.
//!
//! A [`PolicySpec`] made in code (with the `with_*` setters) is checked when the scenario
//! that holds it is built ([`super::ScenarioBuilder::build`]), by the checks a file's
//! `[policy]` table gets; inside a [`super::Scenario`] it is valid.

use crate::time::Nanos;
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

    /// Every policy name, comma-separated in [`PolicyName::ALL`]'s order: the "(known: …)"
    /// list of an unknown-policy error, written once for the file parser and the overrides.
    pub fn known_list() -> String {
        PolicyName::ALL
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ")
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
    pub(super) name: PolicyName,
    /// Time slice of RR, lottery, stride, MLFQ's top level, gang. Default 4 ms (100 ms for gang).
    pub(super) quantum: Nanos,
    /// Seed of every random choice (lottery draws, generators). Default 1.
    pub(super) seed: u64,
    /// CFS targeted latency. Default 6 ms (the kernel's `sched_latency_ns`).
    pub(super) sched_latency: Nanos,
    /// CFS minimum granularity. Default 0.75 ms.
    pub(super) min_granularity: Nanos,
    /// The `eevdf` model's base slice before its scaling with the CPU count (the kernel's
    /// `sysctl_sched_base_slice`). Default 0.70 ms (Linux 6.15 and later, and the stable
    /// releases that took the change; 0.75 ms before).
    #[serde(skip_serializing_if = "is_default_base_slice")]
    pub(super) base_slice: Nanos,
    /// The `eevdf` model's wake-up path: from a sleeper's timer to its thread joining its
    /// run queue and running where nothing else is in its way (hrtimer interrupt,
    /// `try_to_wake_up`, the switch). Default [`DEFAULT_WAKE_PATH`]; `schedkit experiment
    /// fidelity` measures the machine's own.
    #[serde(skip_serializing_if = "is_default_wake_path")]
    pub(super) wake_path: Nanos,
    /// CFS load-balancing interval. Default 4 ms.
    pub(super) balance_interval: Nanos,
    /// The scheduler tick (1 / CONFIG_HZ) of the `eevdf` model: a thread whose slice is used
    /// up is switched out at the next tick. Default 4 ms (HZ = 250).
    #[serde(skip_serializing_if = "is_default_tick")]
    pub(super) tick: Nanos,
    /// Controller period (PFS/TFPS/TWRS readjustment, shuttle balancer, tenant weights).
    /// Default 100 ms.
    pub(super) period: Nanos,
    /// Cost charged for every context switch in the simulator. Default 0.
    pub(super) context_switch: Nanos,
    /// MLFQ: number of levels (default 3); quantum doubles per level.
    pub(super) levels: u32,
    /// MLFQ: priority boost interval (default 1 s; 0 disables).
    pub(super) boost: Nanos,
    /// CFS: percentage the busiest core's load must exceed the local one by before the
    /// balancer moves anything (the kernel's `imbalance_pct`, default 125 = 25 %).
    pub(super) imbalance_pct: u32,
    /// Gang: charge every slot switch with seed 002's overhead model for a cluster of
    /// `cores / cores_per_node` nodes whose jobs communicate with this pattern. `None` (no
    /// `comm` key): switches are free.
    pub(super) gang_overhead: Option<GangOverheadSpec>,
    /// `process-fair` and `tenants` on real cores: correct the cgroup weights every period
    /// so that measured shares follow GPS (the kernel splits a group's weight over CPUs by
    /// its load there, which biases the shares of groups of different thread counts).
    /// Default true; the simulator's groups are exact and ignore it.
    pub(super) trim: bool,
    /// The `eevdf` model: the scenario's fair threads form one task group (in `schedkit run`
    /// they are threads of schedkit, in its session's autogroup), so each core's load as the
    /// balancer sees it is the group entity's share of the group's weight there. Default
    /// true; false makes every thread a root-level task (autogroup off).
    #[serde(skip_serializing_if = "is_true")]
    pub(super) task_group: bool,
    /// The `eevdf` model: the process whose first thread creates every new thread (in
    /// `schedkit run`, schedkit's engine thread): a new thread's fork path takes that thread's
    /// core as its local group. Default none (no thread is the local one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) spawner: Option<String>,
    /// The `eevdf` model: each core's newidle success ratio at the start (0..=1024; the
    /// kernel's `sd->newidle_ratio`, NI_RANDOM). Default [`DEFAULT_NEWIDLE_RATIO`], the
    /// kernel's boot value.
    #[serde(skip_serializing_if = "is_default_newidle_ratio")]
    pub(super) newidle_ratio: u32,
}

/// The default `newidle_ratio`: `sd_init`'s 512 (a 50 % success rate), the state a kernel
/// boots with.
pub const DEFAULT_NEWIDLE_RATIO: u32 = 512;

fn is_default_newidle_ratio(r: &u32) -> bool {
    *r == DEFAULT_NEWIDLE_RATIO
}

fn is_true(b: &bool) -> bool {
    *b
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

/// The default `base_slice`: `sysctl_sched_base_slice` since Linux 6.15 (commit 2ae891b82695).
pub const DEFAULT_BASE_SLICE: Nanos = Nanos::from_us(700);

/// The default `wake_path`: 8.7 us, the median wake-up latency of a sleeper that preempts a
/// pinned hog at once, measured on a Linux 6.18 virtual machine (docs/results/fidelity.md;
/// another build of the same kernel and VM measured 16-20 us).
pub const DEFAULT_WAKE_PATH: Nanos = Nanos(8_700);

/// Keeps `wake_path` out of serialised scenarios that do not set it.
fn is_default_wake_path(t: &Nanos) -> bool {
    *t == DEFAULT_WAKE_PATH
}

/// Keeps `base_slice` out of serialised scenarios that do not set it (their outputs predate it).
fn is_default_base_slice(t: &Nanos) -> bool {
    *t == DEFAULT_BASE_SLICE
}

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
            base_slice: DEFAULT_BASE_SLICE,
            wake_path: DEFAULT_WAKE_PATH,
            balance_interval: Nanos::from_ms(4),
            tick: DEFAULT_TICK,
            period: Nanos::from_ms(100),
            context_switch: Nanos::ZERO,
            levels: 3,
            boost: Nanos::from_secs(1),
            imbalance_pct: 125,
            gang_overhead: None,
            trim: true,
            task_group: true,
            spawner: None,
            newidle_ratio: DEFAULT_NEWIDLE_RATIO,
        }
    }
}

/// Read accessors and unchecked setters (checked when the scenario is built) for the
/// parameters that are plain values.
macro_rules! params {
    ($($(#[$doc:meta])* $field:ident / $set:ident: $ty:ty;)*) => {
        impl PolicySpec {
            $(
                $(#[$doc])*
                pub fn $field(&self) -> $ty {
                    self.$field
                }
                /// Sets the parameter; checked when the scenario is built.
                pub fn $set(mut self, v: $ty) -> PolicySpec {
                    self.$field = v;
                    self
                }
            )*
        }
    };
}

params! {
    /// The policy.
    name / with_name: PolicyName;
    /// Time slice of RR, lottery, stride, MLFQ's top level, gang.
    quantum / with_quantum: Nanos;
    /// Seed of every random choice.
    seed / with_seed: u64;
    /// CFS targeted latency.
    sched_latency / with_sched_latency: Nanos;
    /// CFS minimum granularity.
    min_granularity / with_min_granularity: Nanos;
    /// The `eevdf` model's base slice.
    base_slice / with_base_slice: Nanos;
    /// The `eevdf` model's wake-up path.
    wake_path / with_wake_path: Nanos;
    /// CFS load-balancing interval.
    balance_interval / with_balance_interval: Nanos;
    /// The `eevdf` model's scheduler tick.
    tick / with_tick: Nanos;
    /// Controller period.
    period / with_period: Nanos;
    /// Simulated cost of a context switch.
    context_switch / with_context_switch: Nanos;
    /// MLFQ levels.
    levels / with_levels: u32;
    /// MLFQ boost interval.
    boost / with_boost: Nanos;
    /// CFS balancer's imbalance percentage.
    imbalance_pct / with_imbalance_pct: u32;
    /// Whether `process-fair` and `tenants` correct cgroup weights on real cores.
    trim / with_trim: bool;
    /// Whether the `eevdf` model puts the fair threads in one task group.
    task_group / with_task_group: bool;
    /// The `eevdf` model's newidle success ratio at the start.
    newidle_ratio / with_newidle_ratio: u32;
}

impl PolicySpec {
    /// The process whose first thread creates the others in the `eevdf` model's fork path.
    pub fn spawner(&self) -> Option<&str> {
        self.spawner.as_deref()
    }
    /// Sets the spawner; checked (it must name a process) when the scenario is built.
    pub fn with_spawner(mut self, name: Option<String>) -> PolicySpec {
        self.spawner = name;
        self
    }
}

impl PolicySpec {
    /// Gang's switch-overhead model, if `comm` is set.
    pub fn gang_overhead(&self) -> Option<&GangOverheadSpec> {
        self.gang_overhead.as_ref()
    }

    /// Sets gang's switch-overhead model; checked when the scenario is built.
    pub fn with_gang_overhead(mut self, g: Option<GangOverheadSpec>) -> PolicySpec {
        self.gang_overhead = g;
        self
    }
}
