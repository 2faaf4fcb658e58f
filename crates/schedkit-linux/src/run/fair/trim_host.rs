//! The fair-share engine's side of the share trim (`schedkit_core::controllers::trim`,
//! hosted like any controller): each process's CPU time for its snapshots, its
//! `SetEntityWeight` written to the entities' cgroups, and the kernel's counts at the end of
//! the window for the report.

use super::FairRun;
use crate::run::sampler::Track;
use schedkit_core::control::{Entity, ENTITY_WEIGHT_SCALE};
use schedkit_core::Nanos;

impl FairRun {
    /// Each scenario process's CPU time so far, every thread, ended ones too: the kernel's
    /// per-cgroup accounting, or where the run has none (or it became unreadable, said once
    /// in the warnings, the source's epoch bumped) the sampler's sums over every track.
    pub(super) fn process_cpu(
        &mut self,
        now: u64,
        tracks: &[Track],
        warnings: &mut Vec<String>,
    ) -> Vec<Nanos> {
        let n = self.cg_of_process.len();
        if let Some(u) = &self.usage {
            match (0..n).map(|p| u.cpu_ns(p)).collect::<Option<Vec<u64>>>() {
                Some(v) => return v.into_iter().map(Nanos).collect(),
                None => {
                    warnings.push(format!(
                        "per-cgroup CPU accounting: {} could not be read at {}; the share trim and the report's shares measure from the sampler's readings from then on",
                        u.describe(),
                        Nanos(now)
                    ));
                    self.usage = None;
                    self.cpu_epoch += 1;
                }
            }
        }
        let mut cpu = vec![Nanos::ZERO; n];
        for tr in tracks {
            cpu[tr.process] += Nanos(tr.prev_run);
        }
        cpu
    }

    /// `SetEntityWeight`: the entity's cgroup written `weight` (the trim's nominal x
    /// correction), its nominal weight kept; a failed write stops the trim, with a warning.
    pub(super) fn set_entity_weight(
        &mut self,
        entity: Entity,
        weight: u64,
        warnings: &mut Vec<String>,
    ) {
        let (Some(cg), Some(e)) = (
            self.cgroups.as_ref(),
            self.trim_entities.iter().position(|&x| x == entity),
        ) else {
            warnings.push(format!(
                "share trim: refused a weight for {entity:?}, which has no cgroup of its own in this run"
            ));
            return;
        };
        if self.trim_failed {
            return;
        }
        let i = self.trim_cgroup[e];
        let w = weight as f64 / ENTITY_WEIGHT_SCALE as f64;
        match cg.set_weight_trimmed(i, w) {
            Ok(()) => {
                self.trim_writes += 1;
                self.trim_factor[e] = w / cg.groups()[i].weight.max(1) as f64;
            }
            Err(err) => {
                warnings.push(format!("share trim stopped: {err}"));
                self.trim_failed = true;
            }
        }
    }

    /// The kernel's per-process counts at the end of the window (`end`, before the job is
    /// torn down: what the job runs while it is ended is outside the window).
    pub(in crate::run) fn read_final_cpu(&mut self) {
        self.final_cpu = self
            .usage
            .as_ref()
            .map(|u| (0..self.cg_of_process.len()).map(|p| u.cpu_ns(p)).collect());
    }
}
