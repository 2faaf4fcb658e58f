//! `schedkit restore`: undo what a run killed with SIGKILL (or a power cut) left behind, from
//! the journals in the state directory (see `schedkit_linux::journal`). Each journal is taken
//! on its own: one that cannot be used is reported and set aside, and the others are still
//! undone.

use crate::failure::Failure;
use clap::Args;
use schedkit_linux::journal;
use schedkit_linux::Roots;
use std::path::PathBuf;

pub(crate) const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  every journal of a dead run was undone (or there was nothing to do; a change whose
     object is gone, such as a removed cgroup or an exited thread, counts as done)
  1  something is left: a change could not be undone (its journal stays, holding only
     those changes, for a later restore), or a journal was unreadable, empty, not a
     journal, held corrupt lines or entries refused as unsafe (set aside as <name>.bad)
  2  bad arguments, or the state directory was refused (owned by another user, or
     writable by group or others)";

#[derive(Args)]
#[command(after_help = EXIT_STATUS_HELP)]
pub struct RestoreArgs {
    /// State directory holding the journals (default: $SCHEDKIT_STATE_DIR, else /run/schedkit
    /// for root).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Also undo journals whose schedkit process still runs.
    #[arg(long)]
    pub force: bool,
}

pub fn restore(a: RestoreArgs) -> Result<(), Failure> {
    let dir = a.state_dir.unwrap_or_else(journal::state_dir);
    let report = journal::restore_dir(&dir, &Roots::host(), a.force)?;
    for line in schedkit_render::restore::lines(&report) {
        println!("{line}");
    }
    match report.incomplete() {
        None => Ok(()),
        Some(what) => Err(Failure {
            status: 1,
            message: format!("restore incomplete: {what} (see above)"),
        }),
    }
}
