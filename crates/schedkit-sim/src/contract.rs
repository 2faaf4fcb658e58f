//! The engine's answers to broken contracts (see `policy.rs` and
//! `schedkit_core::control::Controller`): what it counts, the reasons it keeps, and which
//! controller actions it refuses. Nothing here prints; [`crate::SimStats::warnings`] returns
//! the lines for the caller.

use crate::policy::{SimThread, ThreadState};
use crate::SimStats;
use schedkit_core::control::{Action, Entity};
use schedkit_core::scenario::Scenario;

/// Counters of corrected policy mistakes (EXAMPLES.md item 4), with the first reasons.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invariants {
    /// Picks of a thread that was not ready or not allowed on the core.
    pub invalid_picks: u64,
    /// Waits of a ready thread longer than the dispatcher's declared starvation bound
    /// (counted when the wait ends, or at the end of the run for a thread still waiting).
    pub starved: u64,
    /// Controller actions the engine refused (an unknown or finished thread, a core, group
    /// or process that does not exist, a zero weight).
    pub refused_actions: u64,
    /// The first [`Invariants::KEPT`] reasons of each kind, as sentences.
    pub reasons: Vec<String>,
}

impl Invariants {
    /// Reasons kept per kind: enough to see what went wrong, bounded in memory.
    pub const KEPT: u64 = 8;

    pub(crate) fn note(count: &mut u64, reasons: &mut Vec<String>, why: impl FnOnce() -> String) {
        *count += 1;
        if *count <= Self::KEPT {
            reasons.push(why());
        }
    }
}

/// Why the model cannot apply `action`, if it cannot.
pub(crate) fn refusal(
    action: &Action,
    scenario: &Scenario,
    threads: &[SimThread],
    groups: usize,
) -> Option<String> {
    let live_process_thread = |thread: u64| {
        threads
            .get(thread as usize)
            .is_some_and(|t| t.process.is_some() && t.state != ThreadState::Done)
    };
    match *action {
        Action::SetWeight { weight: 0, .. } => Some("a weight of 0".into()),
        Action::SetWeight { thread, .. } | Action::Migrate { thread, .. }
            if !live_process_thread(thread) =>
        {
            Some(format!("thread {thread} is not a live process thread"))
        }
        Action::Migrate { core, .. } if core >= scenario.cores() => Some(format!(
            "core {core} does not exist ({} cores)",
            scenario.cores()
        )),
        Action::SetGroupWeight { group, .. } if group >= groups => {
            Some(format!("group {group} does not exist"))
        }
        Action::SetGroupWeight { weight: 0, .. } => Some("a weight of 0".into()),
        Action::Stop { process } | Action::Resume { process }
            if process >= scenario.processes().len() =>
        {
            Some(format!("process {process} does not exist"))
        }
        Action::SetEntityWeight { weight: 0, .. } => Some("a weight of 0".into()),
        Action::SetEntityWeight {
            entity: Entity::Process(p),
            ..
        } if p >= scenario.processes().len() => Some(format!("process {p} does not exist")),
        Action::SetEntityWeight {
            entity: Entity::Group(g),
            ..
        } if g >= groups => Some(format!("group {g} does not exist")),
        _ => None,
    }
}

impl SimStats {
    /// One line per corrected mistake kind (count and first reasons), for the caller to show;
    /// empty when the dispatcher and controller kept their contracts.
    pub fn warnings(&self) -> Vec<String> {
        let i = &self.invariants;
        let mut out = Vec::new();
        for (n, what) in [
            (i.invalid_picks, "invalid picks (rejected and re-queued)"),
            (i.starved, "waits longer than the policy's starvation bound"),
            (i.refused_actions, "controller actions refused"),
        ] {
            if n > 0 {
                out.push(format!("{n} {what}"));
            }
        }
        out.extend(i.reasons.iter().cloned());
        out
    }
}
