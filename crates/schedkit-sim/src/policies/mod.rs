//! The policy registry: scenario name -> dispatcher (and controller).
//!
//! One file per policy; each opens with the policy, its source and its invariants.

pub mod cfs;
pub mod dm;
pub mod edf;
pub mod fcfs;
pub mod gang;
pub mod lottery;
pub mod mlfq;
pub mod paws;
pub mod pedf;
pub mod priority;
pub mod rm;
pub mod rr;
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

/// Policies the simulator runs.
pub const SIM_POLICIES: &[PolicyName] = &[
    PolicyName::Fcfs,
    PolicyName::Sjf,
    PolicyName::Srtf,
    PolicyName::Rr,
    PolicyName::Priority,
    PolicyName::PriorityPreemptive,
    PolicyName::Lottery,
    PolicyName::Stride,
    PolicyName::Mlfq,
    PolicyName::Cfs,
    PolicyName::Pfs,
    PolicyName::Tfps,
    PolicyName::Twrs,
    PolicyName::GlobalFair,
    PolicyName::Tenants,
    PolicyName::Edf,
    PolicyName::Rm,
    PolicyName::Dm,
    PolicyName::Gedf,
    PolicyName::Pedf,
    PolicyName::Paws,
    PolicyName::Ws,
    PolicyName::Gang,
];

/// Builds the policy named in the scenario, or a located error if the simulator lacks it.
pub fn build(scenario: &Scenario) -> Result<Policy<'static>, ScenarioError> {
    let plain = |d: Box<dyn Dispatcher>| Policy {
        dispatcher: d,
        controller: None,
    };
    Ok(match scenario.policy.name {
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
            dispatcher: Box::new(cfs::Cfs::new(&scenario.policy, scenario.cores)),
            controller: schedkit_core::controllers::build(scenario),
        },
        PolicyName::Dm => plain(Box::new(Keyed::new(dm::Dm))),
        PolicyName::Pedf => plain(Box::new(pedf::build(scenario)?)),
        PolicyName::Paws => plain(Box::new(paws::Paws::build(scenario)?)),
        PolicyName::Ws => plain(Box::new(ws::Ws::build(scenario)?)),
        PolicyName::Lottery => plain(Box::new(lottery::Lottery::new(
            scenario.policy.seed,
            scenario.cores,
        ))),
        PolicyName::Stride => plain(Box::<stride::Stride>::default()),
        PolicyName::Mlfq => plain(Box::new(mlfq::Mlfq::new(
            scenario.policy.levels,
            scenario.policy.quantum,
            scenario.policy.boost,
        ))),
        // Gang scheduling (seed 002): the matrix controller stops and resumes whole jobs and
        // pins their threads to its columns; the dispatcher runs only what is pinned.
        PolicyName::Gang => {
            if !scenario.tasks.is_empty() {
                return Err(scenario.policy_error(
                    "policy \"gang\" schedules [[process]] jobs; [[task]] entries are not supported",
                ));
            }
            Policy {
                dispatcher: Box::new(gang::GangDispatch::new(scenario.cores)),
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
