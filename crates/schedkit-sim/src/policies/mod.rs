//! The policy registry: scenario name -> dispatcher (and controller).
//!
//! One file per policy; each opens with the policy, its source and its invariants.

pub mod cfs;
pub mod dm;
pub mod edf;
pub mod eevdf;
pub mod fcfs;
pub mod gang;
pub mod lottery;
pub mod mlfq;
pub mod paws;
pub mod pedf;
pub mod priority;
pub mod rm;
pub mod rr;
pub(crate) mod rt_class;
pub mod sjf;
pub mod srtf;
pub mod stride;
pub mod ws;

use crate::keyed::Keyed;
use crate::policy::Dispatcher;
use schedkit_core::control::Controller;
use schedkit_core::scenario::{PolicyName, Scenario, ScenarioError};

/// A dispatcher and optional controller for a scenario's policy.
pub struct Policy<'a> {
    pub dispatcher: Box<dyn Dispatcher + 'a>,
    pub controller: Option<Box<dyn Controller + 'a>>,
}

/// Policies the simulator runs: those marked `sim` in schedkit-core's one list
/// ([`schedkit_core::policies::POLICIES`]); [`build`] has an arm for each (a test checks).
pub const SIM_POLICIES: &[PolicyName] = schedkit_core::policies::SIM;

/// The variable that overrides the kernel release `policy = "default"` is modelled for
/// (e.g. `6.5`): the golden outputs pin it, so they do not depend on the machine.
pub const KERNEL_ENV: &str = "SCHEDKIT_SIM_KERNEL";

/// The kernel release `schedkit run` would meet: `SCHEDKIT_SIM_KERNEL` if set, else this
/// machine's (`/proc/sys/kernel/osrelease`, what `uname -r` prints); `None` if neither is
/// readable.
pub fn kernel_release() -> Option<String> {
    std::env::var(KERNEL_ENV)
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/osrelease").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The model of a kernel release's fair class: `eevdf` from Linux 6.6 on, `cfs` before. An
/// unreadable release is taken as current (`eevdf`).
pub fn model_of_release(release: Option<&str>) -> PolicyName {
    let version = release.and_then(|r| {
        let mut it = r.split(|c: char| !c.is_ascii_digit());
        Some((
            it.next()?.parse::<u32>().ok()?,
            it.next()?.parse::<u32>().ok()?,
        ))
    });
    match version {
        Some(v) if v < (6, 6) => PolicyName::Cfs,
        _ => PolicyName::Eevdf,
    }
}

/// What `policy = "default"` means in the simulator, as the report names it: the model and
/// the release it stands for, e.g. `default (eevdf, Linux 6.18)`.
pub fn default_label() -> String {
    let release = kernel_release();
    let model = model_of_release(release.as_deref());
    let short = release.as_deref().map_or("unknown".to_string(), |r| {
        r.split('.').take(2).collect::<Vec<_>>().join(".")
    });
    format!("default ({model}, Linux {short})")
}

/// Builds the policy named in the scenario, or a located error if the simulator lacks it.
pub fn build(scenario: &Scenario) -> Result<Policy<'static>, ScenarioError> {
    let plain = |d: Box<dyn Dispatcher>| Policy {
        dispatcher: d,
        controller: None,
    };
    let name = match scenario.policy().name() {
        PolicyName::Default => model_of_release(kernel_release().as_deref()),
        n => n,
    };
    Ok(match name {
        PolicyName::Fcfs => plain(Box::new(Keyed::new(fcfs::Fcfs))),
        PolicyName::Sjf => plain(Box::new(Keyed::new(sjf::Sjf))),
        PolicyName::Srtf => plain(Box::new(Keyed::new(srtf::Srtf))),
        PolicyName::Rr => plain(Box::new(Keyed::new(rr::RoundRobin))),
        PolicyName::Priority => plain(Box::new(Keyed::new(priority::Priority::<false>))),
        PolicyName::PriorityPreemptive => plain(Box::new(Keyed::new(priority::Priority::<true>))),
        PolicyName::Edf | PolicyName::Gedf => plain(Box::new(Keyed::new(edf::Edf))),
        PolicyName::Rm => plain(Box::new(Keyed::new(rm::Rm))),
        // The CFS model alone, or under a fair-share controller that changes weights or
        // moves threads (schedkit_core::controllers).
        PolicyName::Cfs
        | PolicyName::Pfs
        | PolicyName::Tfps
        | PolicyName::Twrs
        | PolicyName::GlobalFair
        | PolicyName::Tenants => Policy {
            dispatcher: Box::new(cfs::Cfs::new(scenario.policy(), scenario.cores())),
            controller: schedkit_core::controllers::build(scenario),
        },
        PolicyName::Eevdf => plain(Box::new(eevdf::Eevdf::new(
            scenario.policy(),
            scenario.cores(),
        ))),
        PolicyName::Dm => plain(Box::new(Keyed::new(dm::Dm))),
        PolicyName::Pedf => plain(Box::new(pedf::build(scenario)?)),
        PolicyName::Paws => plain(Box::new(paws::Paws::build(scenario)?)),
        PolicyName::Ws => plain(Box::new(ws::Ws::build(scenario)?)),
        PolicyName::Lottery => plain(Box::new(lottery::Lottery::new(
            scenario.policy().seed(),
            scenario.cores(),
        ))),
        PolicyName::Stride => plain(Box::<stride::Stride>::default()),
        PolicyName::Mlfq => plain(Box::new(mlfq::Mlfq::new(
            scenario.policy().levels(),
            scenario.policy().quantum(),
            scenario.policy().boost(),
        ))),
        // Gang scheduling (seed 002): the matrix controller stops and resumes whole jobs and
        // pins their threads to its columns; the dispatcher runs only what is pinned.
        PolicyName::Gang => {
            if !scenario.tasks().is_empty() {
                return Err(scenario.policy_error(
                    "policy \"gang\" schedules [[process]] jobs; [[task]] entries are not supported",
                ));
            }
            // Its controller stops and resumes whole processes, which a thread's own sleeps
            // would contradict.
            if scenario.processes().iter().any(|p| p.pattern().is_some()) {
                return Err(
                    scenario.policy_error("policy \"gang\" does not run threads with a `pattern`")
                );
            }
            Policy {
                dispatcher: Box::new(gang::GangDispatch::new(scenario.cores())),
                controller: schedkit_core::controllers::build(scenario),
            }
        }
        other => {
            return Err(scenario.policy_error(format!(
                "policy \"{other}\" is not available in the simulator (simulator policies: {})",
                SIM_POLICIES
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one list's `sim` marks and `build` agree: a policy marked `sim` builds for a
    /// scenario of processes or one of tasks, the others build for neither.
    #[test]
    fn the_simulator_builds_exactly_the_policies_marked_sim() {
        for &p in PolicyName::ALL {
            let builds = [
                "cores = 2\n[[process]]\nname = \"a\"\n",
                "cores = 2\n[[task]]\nname = \"t\"\nperiod = \"10ms\"\nwcet = \"1ms\"\n",
            ]
            .iter()
            .any(|text| {
                let s = Scenario::parse("t.toml", text).unwrap();
                build(&s.with_policy(p.as_str()).unwrap()).is_ok()
            });
            assert_eq!(builds, SIM_POLICIES.contains(&p), "{p}");
        }
    }

    #[test]
    fn default_follows_the_kernel_release() {
        for (release, want) in [
            (Some("6.18.44-fc-v782"), PolicyName::Eevdf),
            (Some("6.6.0"), PolicyName::Eevdf),
            (Some("6.5.13-generic"), PolicyName::Cfs),
            (Some("5.15.0-91-generic"), PolicyName::Cfs),
            (Some("7.0"), PolicyName::Eevdf),
            (Some("garbage"), PolicyName::Eevdf),
            (None, PolicyName::Eevdf),
        ] {
            assert_eq!(model_of_release(release), want, "{release:?}");
        }
    }
}
