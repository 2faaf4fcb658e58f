//! `schedkit restore`: undo what a run killed with SIGKILL (or a power cut) left behind, from
//! the journals in the state directory (see `schedkit_linux::journal`).

use crate::cli::Failure;
use clap::Args;
use schedkit_linux::journal;
use schedkit_linux::Roots;
use std::path::PathBuf;

#[derive(Args)]
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
    let found = journal::restore(&dir, &Roots::host(), a.force)?;
    if found.is_empty() {
        println!("nothing to restore in {}", dir.display());
        return Ok(());
    }
    let mut failed = 0;
    for r in &found {
        if r.owner_alive && r.undone.is_empty() {
            println!(
                "{}: schedkit {} still runs; left alone (use --force to undo anyway)",
                r.path.display(),
                r.owner_pid
            );
            continue;
        }
        let ok = r.undone.iter().filter(|u| u.outcome == Ok(true)).count();
        let gone = r.undone.iter().filter(|u| u.outcome == Ok(false)).count();
        let bad: Vec<_> = r.undone.iter().filter(|u| u.outcome.is_err()).collect();
        failed += bad.len();
        println!(
            "{}: run {} — {} change(s) undone, {} no longer applicable (thread or process gone), {} failed{}",
            r.path.display(),
            r.owner_pid,
            ok,
            gone,
            bad.len(),
            if r.skipped_lines > 0 {
                format!(", {} torn line(s) skipped", r.skipped_lines)
            } else {
                String::new()
            }
        );
        for u in bad {
            println!(
                "  could not undo {:?}: {}",
                u.entry,
                u.outcome.as_ref().unwrap_err()
            );
        }
    }
    if failed > 0 {
        return Err(Failure {
            status: 1,
            message: format!("{failed} change(s) could not be undone (see above)"),
        });
    }
    Ok(())
}
