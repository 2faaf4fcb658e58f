//! Partitioned scheduling, composed: a bin-packing heuristic assigns every periodic task to
//! one core, and each core runs its own instance of a *uniprocessor* dispatcher over the
//! threads of its tasks (EXAMPLES.md item 3; SimSo's `PartitionedScheduler` has the same
//! shape). `pedf` is `Partitioned<Keyed<Edf>>`; a partitioned RM or DM is the same two lines
//! with another key policy.
//!
//! # Packing: first-fit decreasing
//! [`first_fit_decreasing`] sorts the tasks by *density* `C / min(D, T)` (the utilisation
//! `C / T` for implicit deadlines), largest first, ties in file order, and puts each on the
//! lowest-numbered core whose density sum stays at most 1 (with a 1e-9 tolerance for
//! floating-point sums: a core holding exactly utilisation 1.0 is accepted). Density <= 1 is
//! the exact EDF test for implicit deadlines and a sufficient one for constrained deadlines,
//! so every packed core is EDF-schedulable. A task that fits on no core is a located error
//! that names the task (`task` field, its line), not a silent overload. For a parallel
//! (fork-join) task `C` is the sum of all its threads: all threads of a job run on the task's
//! core, one after another.
//!
//! # The one-core view
//! Each per-core dispatcher sees a [`Ctx`] with `cores = 1` and `running` = that core's
//! entry only, and is called with core index 0. So a uniprocessor dispatcher written for one
//! core runs unchanged, and its `preempt` answer (core 0) is mapped back to the real core.
//! Because the per-core dispatchers see core 0, threads must not carry an affinity that
//! excludes it: the partitioner is the only placement authority, so `pedf` rejects `cpus` on
//! tasks and rejects plain processes (which have no utilisation to pack) with located errors.
//!
//! # Invariants
//! A thread is only ever queued on the core of its task; the engine's pick checks (thread
//! ready, one core at a time) still apply. Partitioned scheduling is not work-conserving: a
//! core idles while another core's tasks wait ([`Dispatcher::work_conserving`] is `false`).
//!
//! Rejected alternative: one global queue filtered by each thread's core would cost O(n) per
//! pick and duplicate the key-ordered queue; composing per-core instances keeps every
//! decision O(log n_core) and reuses the uniprocessor policy exactly.

use crate::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_core::scenario::{Scenario, ScenarioError};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

/// Tolerance of the per-core density test (sums of f64 densities that are exactly 1 in
/// rational arithmetic may round slightly above 1).
const FIT_EPSILON: f64 = 1e-9;

/// Where first-fit decreasing put every item, or the index of the first item (in decreasing
/// order) that fits nowhere, with the core loads at that point.
pub fn first_fit_decreasing(sizes: &[f64], cores: usize) -> Result<Vec<usize>, (usize, Vec<f64>)> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    // Stable sort: equal sizes keep file order.
    order.sort_by(|&a, &b| sizes[b].total_cmp(&sizes[a]));
    let mut load = vec![0.0f64; cores];
    let mut place = vec![0usize; sizes.len()];
    for i in order {
        match (0..cores).find(|&c| load[c] + sizes[i] <= 1.0 + FIT_EPSILON) {
            Some(c) => {
                load[c] += sizes[i];
                place[i] = c;
            }
            None => return Err((i, load)),
        }
    }
    Ok(place)
}

/// A partitioned dispatcher: one `D` per core, each seeing a one-core machine.
pub struct Partitioned<D: Dispatcher> {
    name: &'static str,
    per_core: Vec<D>,
    /// Core of each scenario task.
    core_of_task: Vec<usize>,
    scratch: Vec<usize>,
}

impl<D: Dispatcher> Partitioned<D> {
    /// Packs `scenario`'s tasks with first-fit decreasing and builds one dispatcher per core
    /// with `make`. Errors name the task (or process) that cannot be partitioned.
    pub fn new(
        name: &'static str,
        scenario: &Scenario,
        make: impl Fn() -> D,
    ) -> Result<Partitioned<D>, ScenarioError> {
        let located = |line: usize, field: &str, message: String| ScenarioError {
            file: scenario.file().to_string(),
            line,
            column: 1,
            field: field.to_string(),
            message,
        };
        if let Some(p) = scenario.processes().first() {
            return Err(located(
                p.line(),
                "process",
                format!(
                    "policy \"{name}\" partitions periodic tasks; process \"{}\" has no period \
                     (write it as a [[task]], or use a global policy)",
                    p.name()
                ),
            ));
        }
        if let Some(t) = scenario.tasks().iter().find(|t| t.cpus().is_some()) {
            return Err(located(
                t.line(),
                "task.cpus",
                format!(
                    "policy \"{name}\" places tasks on cores itself (first-fit decreasing); \
                     remove `cpus` from task \"{}\"",
                    t.name()
                ),
            ));
        }
        let sizes: Vec<f64> = scenario.tasks().iter().map(density).collect();
        let core_of_task =
            first_fit_decreasing(&sizes, scenario.cores()).map_err(|(i, load)| {
                let t = &scenario.tasks()[i];
                located(
                    t.line(),
                    "task",
                    format!(
                        "task \"{}\" (density {:.4}) fits on no core by first-fit decreasing \
                     (core loads when it was placed: {}); policy \"{name}\" cannot run this set",
                        t.name(),
                        sizes[i],
                        load.iter()
                            .map(|l| format!("{l:.4}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        Ok(Partitioned {
            name,
            per_core: (0..scenario.cores()).map(|_| make()).collect(),
            core_of_task,
            scratch: Vec::new(),
        })
    }

    /// The core each scenario task was packed on.
    pub fn assignment(&self) -> &[usize] {
        &self.core_of_task
    }

    fn core_of(&self, ctx: &Ctx, slot: Slot) -> usize {
        let task = ctx
            .thread(slot)
            .task
            .expect("partitioned policies only see task threads (checked at build)");
        self.core_of_task[task]
    }
}

/// `C / min(D, T)`: the size first-fit decreasing packs.
pub fn density(t: &schedkit_core::scenario::Task) -> f64 {
    t.work().0 as f64 / t.deadline().min(t.period()).0 as f64
}

/// The one-core view of `core` (see the module docs).
fn view<'c>(ctx: &Ctx<'c>, core: usize) -> Ctx<'c> {
    Ctx {
        now: ctx.now,
        cores: 1,
        threads: ctx.threads,
        running: std::slice::from_ref(&ctx.running[core]),
        spec: ctx.spec,
        scenario: ctx.scenario,
        group_weights: ctx.group_weights,
    }
}

impl<D: Dispatcher> Dispatcher for Partitioned<D> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        let c = self.core_of(ctx, slot);
        self.per_core[c].enqueue(&view(ctx, c), slot, why);
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        self.per_core[core].pick_next(&view(ctx, core), 0)
    }

    fn time_slice(&mut self, ctx: &Ctx, core: usize, slot: Slot) -> Option<Nanos> {
        self.per_core[core].time_slice(&view(ctx, core), 0, slot)
    }

    fn charge(&mut self, ctx: &Ctx, slot: Slot, core: usize, ran: Nanos) {
        self.per_core[core].charge(&view(ctx, core), slot, 0, ran);
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        for c in 0..self.per_core.len() {
            self.scratch.clear();
            self.per_core[c].preempt(&view(ctx, c), &mut self.scratch);
            if !self.scratch.is_empty() {
                out.push(c);
            }
        }
    }

    fn remove(&mut self, ctx: &Ctx, slot: Slot) {
        let c = self.core_of(ctx, slot);
        self.per_core[c].remove(&view(ctx, c), slot);
    }

    fn work_conserving(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ffd_places_largest_first_on_the_first_core_that_fits() {
        // Sorted: 0.9 (core 0), 0.5 (core 1), 0.4 (core 1, now 0.9), 0.2 (core 2: both
        // others hold 0.9), 0.1 (core 0, now exactly 1.0).
        let place = first_fit_decreasing(&[0.2, 0.9, 0.4, 0.1, 0.5], 3).unwrap();
        assert_eq!(place, vec![2, 0, 1, 0, 1]);
    }

    #[test]
    fn ffd_accepts_a_core_at_exactly_one() {
        let third = 1.0 / 3.0;
        assert_eq!(
            first_fit_decreasing(&[third, third, third], 1).unwrap(),
            vec![0, 0, 0]
        );
    }

    #[test]
    fn ffd_reports_the_item_that_fits_nowhere() {
        let (i, load) = first_fit_decreasing(&[0.6, 0.7, 0.6], 2).unwrap_err();
        assert_eq!(i, 2, "0.7 then 0.6 placed; the second 0.6 fits nowhere");
        assert_eq!(load, vec![0.7, 0.6]);
    }
}
