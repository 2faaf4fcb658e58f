//! What an experiment needs from the machine it runs on, beyond the library: the real engine
//! and this program's own executable for helper processes (spinners, hogs, the `ctl` client).
//! The binary implements [`Machine`]; the experiments take it as `&dyn Machine`, so they run
//! from other Rust code too, and tests can stand in for the real engine.

use crate::Error;
use schedkit_core::scenario::Scenario;
use schedkit_linux::engine::{RunOptions, RunOutcome};
use std::path::PathBuf;

/// The real engine and the helper executable.
pub trait Machine: Sync {
    /// Runs `scenario` on this machine's cores (`schedkit run`'s engine). An interrupted run
    /// is returned as [`Error::Interrupted`].
    fn run(&self, scenario: &Scenario, options: RunOptions) -> Result<RunOutcome, Error>;

    /// The executable that serves the experiments' hidden helper flags (`--hog`, `--spin`,
    /// `ctl`): the `schedkit` binary itself.
    fn helper_exe(&self) -> Result<PathBuf, Error>;
}
