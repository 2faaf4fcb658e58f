//! The binary's side of the experiments' [`Machine`]: the real engine of `schedkit run` (with
//! the binary's signal handlers) and this executable as the helper for spinners, hogs and the
//! `ctl` client. Task sets run through the trait's default (`schedkit_runtime::tasks`).

use schedkit_core::scenario::Scenario;
use schedkit_experiments::machine::Machine;
use schedkit_experiments::Error;
use schedkit_linux::engine::{self, RunOptions, RunOutcome};
use std::path::PathBuf;

/// This machine, driven by `schedkit_linux`'s engine.
pub struct ThisMachine;

impl Machine for ThisMachine {
    fn run(&self, scenario: &Scenario, options: RunOptions) -> Result<RunOutcome, Error> {
        // Before the first real run, not at start: SIGINT should still end an experiment
        // that only simulates. With them, an interrupted run undoes its changes and returns.
        static HANDLERS: std::sync::Once = std::sync::Once::new();
        HANDLERS.call_once(engine::install_signal_handlers);
        let o = engine::run(scenario, options)?;
        if o.interrupted {
            return Err(Error::Interrupted);
        }
        Ok(o)
    }

    fn helper_exe(&self) -> Result<PathBuf, Error> {
        crate::self_exe().map_err(|e| Error::io("locating the schedkit binary", e))
    }
}
