//! P-EDF: partitioned earliest deadline first (seed 001 section 2 names it as the partitioned
//! alternative to global EDF; SimSo's `P_EDF` is the same composition).
//!
//! Tasks are packed onto cores by first-fit decreasing density (`C / min(D, T)`; see
//! [`crate::partition`] for the heuristic and its tolerance), then each core runs
//! uniprocessor [`Edf`] over its own tasks' threads: exactly the `edf` policy, one instance
//! per core, composed rather than copied.
//!
//! Guarantee: if the packing succeeds, every core's density is at most 1, so for implicit
//! deadlines no job misses (EDF is optimal on one core); Dhall's set (two tasks 2/10, one
//! 10/11 on two cores), which global EDF fails, is scheduled without a miss. A task that fits
//! on no core is a located error naming it. Threads never migrate. Ties within a core follow
//! `edf`: deadline, then release time, then creation order. Not work-conserving across cores.

use crate::keyed::Keyed;
use crate::partition::Partitioned;
use crate::policies::edf::Edf;
use schedkit_core::scenario::{Scenario, ScenarioError};

/// Builds P-EDF for `scenario`'s tasks.
pub fn build(scenario: &Scenario) -> Result<Partitioned<Keyed<Edf>>, ScenarioError> {
    Partitioned::new("pedf", scenario, || Keyed::new(Edf))
}
