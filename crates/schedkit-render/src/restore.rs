//! The text of `schedkit restore`: what [`schedkit_linux::journal::restore_dir`] did, one
//! line per journal with indented details, then the files of dead runs that were removed.

use schedkit_linux::journal::{self, RestoreReport, Restored};

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

/// The one line of a journal that was not undone on purpose: its run still runs, it is of an
/// earlier boot, or another restore holds it.
fn not_undone(r: &Restored) -> Option<String> {
    let path = r.path.display();
    if r.left_alone {
        return Some(format!(
            "{path}: schedkit {} still runs; left alone (use --force to undo anyway)",
            r.owner_pid
        ));
    }
    if r.other_boot {
        return Some(format!(
            "{path}: run {} was before the machine last started; its changes went with that \
             boot; removed without undoing anything",
            r.owner_pid
        ));
    }
    if r.busy {
        return Some(format!(
            "{path}: another restore holds it; left to that one"
        ));
    }
    None
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
    if let Some(line) = not_undone(r) {
        out.push(line);
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
