//! The fair-share engine's side of the one controller host: each action on live threads.

use super::{set_nice, FairRun};
use crate::affinity::{self, CpuSet};
use crate::journal::Journal;
use crate::run::host::Apply;
use crate::run::sampler::Track;
use crate::sched::Policy;
use crate::{Error, Result};
use schedkit_core::control::Action;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::Event;
use schedkit_core::Nanos;
use std::collections::HashMap;

/// The fair-share engine's side of the host ([`Host`](crate::run::host::Host)): one controller action on the live
/// threads, through the journal (see [`FairRun`]'s docs for what each does).
pub(super) struct FairApply<'a> {
    pub(super) run: &'a mut FairRun,
    pub(super) now: u64,
    pub(super) scenario: &'a Scenario,
    pub(super) tracks: (&'a [Track], &'a HashMap<i32, usize>),
    pub(super) journal: &'a mut Journal,
    pub(super) events: &'a mut Vec<Event>,
    pub(super) warnings: &'a mut Vec<String>,
}

impl FairApply<'_> {
    /// A live thread by its handle (TID); `None` once it ended.
    fn track_of(&self, id: u64) -> Option<&Track> {
        let (tracks, by_tid) = self.tracks;
        by_tid
            .get(&(id as i32))
            .map(|&i| &tracks[i])
            .filter(|t| !t.finished)
    }

    /// `SetWeight`: the nearest nice value, the first change of a thread journaled.
    fn set_weight(&mut self, thread: u64, weight: u64) {
        self.run.weight.insert(thread as i32, weight);
        let Some(tr) = self.track_of(thread).filter(|_| self.run.thread_weights) else {
            return;
        };
        let (pid, tid, slot) = (tr.pid, tr.tid, tr.slot);
        let run = &mut *self.run;
        let nice = schedkit_core::weights::nearest_nice(weight as f64);
        if run.nice.get(&tid) == Some(&nice) && run.sched_journaled.contains(&tid) {
            return;
        }
        if run.sched_journaled.insert(tid) {
            // First change of this thread: its original class and nice go into the journal
            // before anything changes.
            if let Err(e) = self.journal.set_sched(pid, tid, Policy::Other { nice }) {
                // A thread that ended since the sample is not worth a warning.
                if matches!(e, Error::Privilege(_))
                    || matches!(e.errno(), Some(libc::EPERM | libc::EACCES))
                {
                    run.warn_nice(self.warnings, &e.to_string());
                }
                run.sched_journaled.remove(&tid);
                return;
            }
        } else if let Err(e) = set_nice(tid, nice) {
            if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EACCES)) {
                run.warn_nice(self.warnings, &e.to_string());
            }
            return;
        }
        run.nice.insert(tid, nice);
        run.nice_changes += 1;
        self.events.push(Event::WeightChange {
            t: Nanos(self.now),
            slot,
            weight,
        });
    }
}

impl Apply for FairApply<'_> {
    fn apply(&mut self, action: &Action) -> Result<()> {
        match *action {
            Action::SetWeight { thread, weight } => self.set_weight(thread, weight),
            Action::Migrate { thread, core } => {
                let Some(tr) = self.track_of(thread) else {
                    return Ok(());
                };
                let (pid, tid) = (tr.pid, tr.tid);
                let set = CpuSet::single(core);
                let r = if self.run.affinity_journaled.insert(tid) {
                    self.journal.set_affinity(pid, tid, &set)
                } else {
                    affinity::set_thread(tid, &set)
                };
                if r.is_ok() {
                    self.run.migrations += 1;
                }
            }
            Action::SetGroupWeight { group, weight } => {
                if let Err(e) =
                    self.run
                        .set_group_weight(group, weight, self.now, self.scenario, self.events)
                {
                    self.warnings.push(format!("group weight not set: {e}"));
                }
            }
            Action::SetEntityWeight { entity, weight } => {
                self.run.set_entity_weight(entity, weight, self.warnings)
            }
            // Never handed over: not in FAIR_APPLIES, so the host refuses them aloud (a
            // controller declaring them is refused when the run is built).
            Action::Stop { .. } | Action::Resume { .. } => {}
        }
        Ok(())
    }
}
