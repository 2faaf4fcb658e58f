//! `schedkit restore`: undo what a run killed with SIGKILL (or a power cut) left behind, from
//! the journals in the state directory (see `schedkit_linux::journal`). Each journal is taken
//! on its own: one that cannot be used is reported and set aside, and the others are still
//! undone.

use crate::failure::Failure;
use clap::Args;
use schedkit_linux::journal::{self, RestoreReport, Restored};
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
    for line in lines(&report) {
        println!("{line}");
    }
    let (mut unusable, mut corrupt, mut rejected, mut failed) = (0, 0, 0, 0);
    for r in &report.journals {
        unusable += usize::from(r.unusable.is_some());
        corrupt += r.corrupt_lines.len();
        rejected += r.rejected.len();
        failed += r.failed().count();
    }
    if report.ok() {
        return Ok(());
    }
    let mut parts = Vec::new();
    if failed > 0 {
        parts.push(format!("{failed} change(s) could not be undone"));
    }
    if unusable > 0 {
        parts.push(format!("{unusable} journal(s) could not be used"));
    }
    if corrupt > 0 {
        parts.push(format!("{corrupt} corrupt line(s)"));
    }
    if rejected > 0 {
        parts.push(format!("{rejected} entry(ies) refused"));
    }
    Err(Failure {
        status: 1,
        message: format!("restore incomplete: {} (see above)", parts.join(", ")),
    })
}

/// The report, one line per journal with indented details.
pub fn lines(report: &RestoreReport) -> Vec<String> {
    let mut out = Vec::new();
    if report.journals.is_empty() {
        out.push(format!("nothing to restore in {}", report.dir.display()));
    }
    for r in &report.journals {
        journal_lines(r, &mut out);
    }
    for p in &report.temps_removed {
        out.push(format!(
            "{}: removed (a run killed while creating its journal; nothing was changed yet)",
            p.display()
        ));
    }
    for p in &report.sockets_removed {
        out.push(format!(
            "{}: removed (control socket of a run that is gone)",
            p.display()
        ));
    }
    for p in &report.cgroups_removed {
        out.push(format!(
            "{}: removed (empty cgroup of a run that is gone)",
            p.display()
        ));
    }
    out
}

fn journal_lines(r: &Restored, out: &mut Vec<String>) {
    let path = r.path.display();
    if let Some(why) = &r.unusable {
        out.push(match &r.set_aside {
            Some(to) => format!("{path}: unusable: {why}; set aside as {}", to.display()),
            None => format!("{path}: unusable: {why}"),
        });
        if r.undone.is_empty() {
            return;
        }
    }
    if r.left_alone {
        out.push(format!(
            "{path}: schedkit {} still runs; left alone (use --force to undo anyway)",
            r.owner_pid
        ));
        return;
    }
    if r.other_boot {
        out.push(format!(
            "{path}: run {} was before the machine last started; its changes went with that \
             boot; removed without undoing anything",
            r.owner_pid
        ));
        return;
    }
    if r.busy {
        out.push(format!(
            "{path}: another restore holds it; left to that one"
        ));
        return;
    }
    let done = r.undone.iter().filter(|u| u.outcome == Ok(true)).count();
    let nothing = r.undone.iter().filter(|u| u.outcome == Ok(false)).count();
    let failed = r.failed().count();
    let mut head = format!(
        "{path}: run {} — {done} change(s) undone, {nothing} already as they were (object gone or unchanged), {failed} failed",
        r.owner_pid
    );
    if !r.rejected.is_empty() {
        head += &format!(", {} refused", r.rejected.len());
    }
    if !r.corrupt_lines.is_empty() {
        head += &format!(", {} corrupt line(s)", r.corrupt_lines.len());
    }
    if r.torn_tail {
        head += ", torn last line skipped (its change was never made)";
    }
    out.push(head);
    for u in &r.undone {
        if let journal::Entry::Attached { pid, comm, .. } = &u.entry {
            out.push(format!(
                "  process {pid} ({comm}) was attached (`run --pid`), not started by schedkit: \
                 its settings are back, and it was left running"
            ));
        }
    }
    for n in &r.corrupt_lines {
        out.push(format!(
            "  line {n}: corrupt (not an entry); the change it described cannot be undone"
        ));
    }
    for x in &r.rejected {
        out.push(format!(
            "  line {}: refused {:?}: {}; not applied",
            x.line, x.entry, x.reason
        ));
    }
    for u in r.failed() {
        out.push(format!(
            "  could not undo {:?}: {}",
            u.entry,
            u.outcome.as_ref().unwrap_err()
        ));
    }
    if let Some(to) = &r.set_aside {
        if r.unusable.is_none() {
            out.push(format!("  set aside as {} for inspection", to.display()));
        }
    }
    if r.kept {
        out.push(format!(
            "  kept with the {failed} change(s) that failed; a later restore retries them"
        ));
    }
}
