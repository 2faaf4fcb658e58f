//! What a scenario's policy means on this kernel: the classes, priorities and knobs each
//! [`RunPolicy`] uses, and the checks made before a run changes anything ([`preflight`]).

use crate::exclusive::{ExclusiveConfig, Isolation};
use crate::privilege::Privileges;
use crate::sched::Policy;
use crate::spawn;
use crate::topo::Topology;
use crate::{Error, Result, Roots};
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::Nanos;

/// How job threads are scheduled.
#[derive(Clone, Debug)]
pub enum RunPolicy {
    /// The kernel decides (SCHED_OTHER, the scenario's nice values, `cpus` affinity).
    Default,
    /// SCHED_FIFO at `50 - priority` (clamped to 1..99) or the given priority.
    Fifo { priority: Option<u32> },
    /// SCHED_RR, likewise; the scenario's quantum becomes `sched_rr_timeslice_ms`.
    Rr {
        priority: Option<u32>,
        quantum_ms: u64,
    },
    /// Seed 000's exclusive mode.
    Exclusive(ExclusiveConfig),
    /// Gang scheduling (seed 002): the matrix controller pins threads and stops / resumes
    /// whole jobs through the freezer ([`GangRun`](super::GangRun)).
    Gang { quantum: Nanos },
    /// `process-fair` (seed 004, ch. 3): every scenario process in its own cgroup, equal
    /// weights ([`crate::cgroup`]).
    ProcessFair,
    /// A fair-share controller of `schedkit_core::controllers` (`pfs`, `tfps`, `twrs`,
    /// `tenants`, `global-fair`) run every `period` on the live threads; see [`FairRun`].
    Fair { name: PolicyName, period: Nanos },
}

impl RunPolicy {
    /// The policy a scenario asks for, or an input error for simulator-only policies.
    pub fn from_scenario(s: &Scenario) -> Result<RunPolicy> {
        Ok(match s.policy().name() {
            PolicyName::Default => RunPolicy::Default,
            PolicyName::Fcfs => RunPolicy::Fifo { priority: None },
            PolicyName::Rr => RunPolicy::Rr {
                priority: None,
                quantum_ms: (s.policy().quantum().0 / 1_000_000).max(1),
            },
            PolicyName::Exclusive => RunPolicy::Exclusive(ExclusiveConfig::default()),
            PolicyName::Gang => RunPolicy::Gang {
                quantum: s.policy().quantum(),
            },
            PolicyName::ProcessFair => RunPolicy::ProcessFair,
            name @ (PolicyName::Pfs
            | PolicyName::Tfps
            | PolicyName::Twrs
            | PolicyName::Tenants
            | PolicyName::GlobalFair) => RunPolicy::Fair {
                name,
                period: s.policy().period(),
            },
            other => {
                return Err(Error::Input(format!(
                    "{}: policy.name: `{other}` runs in `schedkit sim` only; `schedkit run` supports default, fcfs, rr, exclusive, gang, process-fair, pfs, tfps, twrs, tenants and global-fair",
                    s.file()
                )))
            }
        })
    }
    fn needs_rt(&self) -> bool {
        !matches!(
            self,
            RunPolicy::Default
                | RunPolicy::Gang { .. }
                | RunPolicy::ProcessFair
                | RunPolicy::Fair { .. }
        )
    }
    /// Policies that place job threads in cgroups of their own.
    fn uses_cgroups(&self) -> bool {
        matches!(
            self,
            RunPolicy::ProcessFair
                | RunPolicy::Fair {
                    name: PolicyName::Tenants,
                    ..
                }
        )
    }
}

/// Checks a scenario against the machine before anything changes: commands exist, CPUs
/// exist, priorities are in range, privileges suffice for what was asked.
pub fn preflight(s: &Scenario, policy: &RunPolicy, topo: &Topology) -> Result<()> {
    for p in s.processes() {
        if let Some(cmd) = p.command() {
            if spawn::resolve(&cmd[0]).is_none() {
                return Err(Error::Input(format!(
                    "{}:{}: process.command: `{}` not found (not in PATH or not executable)",
                    s.file(),
                    p.line(),
                    cmd[0]
                )));
            }
        }
        if let Some(cpus) = p.cpus() {
            for &c in cpus {
                if !topo.online.contains(c) {
                    return Err(Error::Input(format!(
                        "{}:{}: process.cpus: CPU {c} does not exist on this machine (online CPUs: {})",
                        s.file(), p.line(), topo.online
                    )));
                }
            }
        }
    }
    if !s.tasks().is_empty() {
        return Err(Error::Input(format!(
            "{}: task: periodic [[task]] entries run in `schedkit sim` only for now",
            s.file()
        )));
    }
    match policy {
        RunPolicy::Fifo { priority: Some(p) }
        | RunPolicy::Rr {
            priority: Some(p), ..
        } => Policy::Fifo { priority: *p }.validate()?,
        RunPolicy::Exclusive(cfg) => {
            Isolation::plan(topo, &Roots::host(), cfg)?;
        }
        _ => {}
    }
    let privs = Privileges::current();
    if policy.uses_cgroups() && !privs.root {
        return Err(Error::Privilege(
            "policies process-fair and tenants create cgroups under the cpu controller's mount: run as root".into(),
        ));
    }
    if let RunPolicy::Fair {
        name: PolicyName::Tenants,
        ..
    } = policy
    {
        for g in s.groups() {
            if let Err(m) = crate::ctl::check_weight(g.weight()) {
                return Err(Error::Input(format!(
                    "{}: group.weight: group `{}`: {m}",
                    s.file(),
                    g.name()
                )));
            }
        }
    }
    if policy.needs_rt() && !(privs.root || privs.sys_nice) {
        return Err(Error::Privilege(format!(
            "policy {} needs real-time scheduling (CAP_SYS_NICE): {}",
            match policy {
                RunPolicy::Fifo { .. } => "fcfs (SCHED_FIFO)",
                RunPolicy::Rr { .. } => "rr (SCHED_RR)",
                _ => "exclusive",
            },
            Privileges::HOW_TO_NICE
        )));
    }
    Ok(())
}

pub(super) fn rt_priority(explicit: Option<u32>, scenario_priority: i32) -> u32 {
    explicit.unwrap_or_else(|| (50 - scenario_priority).clamp(1, 99) as u32)
}
