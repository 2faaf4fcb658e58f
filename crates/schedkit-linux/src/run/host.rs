//! The one controller host of the real engine: what feeds a `schedkit_core`
//! [`Controller`] its snapshots and hands its [`Action`]s to the engine that applies them.
//!
//! Every real path that runs a controller (the fair-share policies' [`FairRun`](super::FairRun),
//! gang scheduling's [`GangRun`](super::GangRun)) hosts it here, so the contract of
//! `schedkit_core::control` holds the same way for all of them:
//!
//! - **Refused when built, never dropped.** [`Host::new`] takes the kinds of action the
//!   engine can apply and refuses a controller that declares ([`Controller::emits`]) any
//!   other. An action of an undeclared kind that a controller pushes anyway (a broken
//!   `emits`) is not applied but refused aloud: [`Host::refused`], which the engine puts in the
//!   run's warnings.
//! - **One identity.** The snapshot's threads are sorted by [`ThreadView::key`] (scenario
//!   process, thread number) before every tick, as the simulator does, so a controller makes
//!   the same decision in both engines whatever TIDs the threads have.
//! - **No controller where nothing applies.** An engine that can apply no action at all (the
//!   periodic-task engine, [`super::tasks`]) refuses a controller through [`refuse`], with
//!   why, before anything runs.
//! - **Applied in order, through the engine.** Each action goes to the engine's [`Apply`],
//!   which makes the change through the run's journal (so undo and `schedkit restore` put
//!   it back); an error from it stops the tick and the run.

use crate::{Error, Result};
use schedkit_core::control::{Action, ActionKind, Controller, Snapshot, ThreadView};
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;

/// How an engine applies a controller's actions.
pub(super) trait Apply {
    /// Applies `action`, one of the kinds given to [`Host::new`]. What cannot be applied to
    /// this thread now (it ended since the sample) is skipped; an `Err` ends the run.
    fn apply(&mut self, action: &Action) -> Result<()>;
}

/// A controller hosted on real threads (see the module docs).
pub struct Host {
    controller: Box<dyn Controller>,
    /// The kinds the engine applies.
    applies: &'static [ActionKind],
    /// The engine, in refusals ("the fair-share engine").
    engine: &'static str,
    views: Vec<ThreadView>,
    /// The next snapshot's `process_cpu` and its source's epoch ([`Host::set_process_cpu`]).
    process_cpu: Vec<Nanos>,
    process_cpu_epoch: u64,
    actions: Vec<Action>,
    /// Actions refused since the engine last took them, in words.
    pub refused: Vec<String>,
}

impl Host {
    /// Hosts `controller` on `engine`, which applies `applies`; `Err` with the kinds the
    /// controller may push that the engine cannot apply.
    pub fn new(
        controller: Box<dyn Controller>,
        applies: &'static [ActionKind],
        engine: &'static str,
    ) -> std::result::Result<Host, Vec<ActionKind>> {
        let missing = schedkit_core::control::unsupported(controller.as_ref(), applies);
        if !missing.is_empty() {
            return Err(missing);
        }
        Ok(Host {
            controller,
            applies,
            engine,
            views: Vec::new(),
            process_cpu: Vec::new(),
            process_cpu_epoch: 0,
            actions: Vec::new(),
            refused: Vec::new(),
        })
    }

    /// How often the controller wants to tick.
    pub fn period(&self) -> Nanos {
        self.controller.period()
    }

    /// The next snapshot's threads: `threads`, in the (process, thread number) order the
    /// controller contract promises. The engine may still adjust them (global-fair places
    /// new threads first) through the returned slice.
    pub fn set_threads(
        &mut self,
        threads: impl IntoIterator<Item = ThreadView>,
    ) -> &mut [ThreadView] {
        self.views.clear();
        self.views.extend(threads);
        self.views.sort_unstable_by_key(ThreadView::key);
        &mut self.views
    }

    /// The next snapshot's per-process CPU time (every thread, ended ones too) and the epoch
    /// of its source (see `Snapshot::process_cpu`). An engine that never sets it hands its
    /// controller zeros: its controllers do not read it (gang scheduling).
    pub fn set_process_cpu(&mut self, cpu: impl IntoIterator<Item = Nanos>, epoch: u64) {
        self.process_cpu.clear();
        self.process_cpu.extend(cpu);
        self.process_cpu_epoch = epoch;
    }

    /// One controller tick over the threads set last: its actions go to `engine` in order;
    /// one of a kind the engine does not apply is refused ([`Host::refused`]).
    pub(super) fn tick(
        &mut self,
        now: Nanos,
        cores: usize,
        group_weights: &[u64],
        scenario: &Scenario,
        engine: &mut dyn Apply,
    ) -> Result<()> {
        self.actions.clear();
        // One entry per scenario process, whatever the engine set.
        self.process_cpu
            .resize(scenario.processes().len(), Nanos::ZERO);
        self.controller.tick(
            &Snapshot {
                now,
                cores,
                threads: &self.views,
                group_weights,
                process_cpu: &self.process_cpu,
                process_cpu_epoch: self.process_cpu_epoch,
                scenario,
            },
            &mut self.actions,
        );
        let actions = std::mem::take(&mut self.actions);
        let mut result = Ok(());
        for a in &actions {
            if !self.applies.contains(&a.kind()) {
                // A controller that pushes what it did not declare breaks its own `emits`
                // contract, and the run says so.
                self.refused.push(format!(
                    "{}: refused {a:?}: {} cannot apply it",
                    self.controller.name(),
                    self.engine
                ));
                continue;
            }
            result = engine.apply(a);
            if result.is_err() {
                break;
            }
        }
        self.actions = actions;
        result
    }
}

/// The refusal of `controller` by `engine`, which applies no action at all, and `why`: an
/// input error that names the controller, so that a run never goes on with its controller
/// silently left out.
pub fn refuse(controller: &dyn Controller, engine: &str, why: &str) -> Error {
    Error::Input(format!(
        "controller `{}` cannot run on {engine}: {why}",
        controller.name()
    ))
}
