//! Undoing entries: jobs ended first, their cgroups removed last, everything else newest
//! first; a thread or process is touched only if its start time still matches.

use super::*;

/// Undoes `entries` newest first, except that every job is ended before anything else is
/// undone (a job must not go on running once its placement, class or IRQ isolation has
/// been taken back) and its cgroups removed after everything else (a frozen v1 job dies
/// only once the freezer's own entry has thawed it).
pub fn undo_entries(roots: &Roots, entries: &[Entry]) -> Vec<Undone> {
    undo_entries_vouched(roots, entries, &Vouched::new())
}

pub(super) fn undo_entries_vouched(
    roots: &Roots,
    entries: &[Entry],
    vouched: &Vouched,
) -> Vec<Undone> {
    for e in entries {
        if let Entry::Job { path, v2 } = e {
            crate::jobcg::kill_tree(path, *v2);
        }
    }
    let mut out: Vec<Undone> = entries
        .iter()
        .rev()
        .filter(|e| !matches!(e, Entry::Job { .. }))
        .map(|e| Undone {
            entry: e.clone(),
            outcome: undo_one(roots, e, vouched),
        })
        .collect();
    out.extend(
        entries
            .iter()
            .rev()
            .filter(|e| matches!(e, Entry::Job { .. }))
            .map(|e| Undone {
                entry: e.clone(),
                outcome: undo_one(roots, e, vouched),
            }),
    );
    out
}

fn undo_one(roots: &Roots, e: &Entry, vouched: &Vouched) -> std::result::Result<bool, String> {
    let same_thread = |pid: i32, tid: i32, st: u64| thread_starttime(roots, pid, tid) == Some(st);
    match e {
        Entry::Irq { irq, old } => {
            // A write the kernel refused left the mask as it was: nothing to undo.
            if irq::read_mask(roots, *irq)
                .is_ok_and(|(_, cur)| CpuSet::parse_mask(old).is_ok_and(|o| o == cur))
            {
                return Ok(false);
            }
            match irq::write_mask_text(roots, *irq, old) {
                Ok(()) => Ok(true),
                // The IRQ is gone (its device was removed).
                Err(e) if e.errno() == Some(libc::ENOENT) => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        }
        Entry::Affinity {
            pid,
            tid,
            starttime,
            old,
        } => {
            if !same_thread(*pid, *tid, *starttime) {
                return Ok(false);
            }
            match affinity::set_thread(*tid, old) {
                Ok(()) => Ok(true),
                // Exited between the check and the call.
                Err(e) if e.errno() == Some(libc::ESRCH) => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        }
        Entry::Affinities {
            pid,
            starttime,
            old,
            tids,
            pin,
            since,
        } => {
            let (same, crashed) = match vouched.get(pid) {
                Some((st, fd)) if st == starttime => (pidfd_alive(fd), false),
                _ => (self_starttime(roots, *pid) == Some(*starttime), true),
            };
            if !same {
                return Ok(false);
            }
            let undone = undo_affinities(*pid, old, tids);
            // A run that ends normally journals its inherited threads itself (its last
            // sweep); only a journal whose run died leaves them to this.
            let inherited = match (crashed, pin, since) {
                (true, Some(pin), Some(since)) => {
                    undo_inherited(roots, *pid, old, tids, pin, *since)
                }
                _ => 0,
            };
            undone.map(|any| any || inherited > 0)
        }
        Entry::Sched {
            pid,
            tid,
            starttime,
            old,
        } => {
            if !same_thread(*pid, *tid, *starttime) {
                return Ok(false);
            }
            match sched::set_thread(*tid, *old) {
                Ok(()) => Ok(true),
                Err(e) if e.errno() == Some(libc::ESRCH) => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        }
        Entry::Sysctl { name, old } if procfs::sysctl(roots, name).ok().as_deref() == Some(old) => {
            Ok(false)
        }
        Entry::Sysctl { name, old } => match procfs::set_sysctl(roots, name, old) {
            Ok(()) => Ok(true),
            Err(e) if e.errno() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e.to_string()),
        },
        // Never created: a file that is gone (its cgroup removed) has nothing to restore.
        Entry::File { path, old } => match std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(path)
            .and_then(|mut f| f.write_all(old.as_bytes()))
        {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("write {}: {e}", path.display())),
        },
        Entry::Mkdir { path } => match std::fs::remove_dir(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("rmdir {}: {e}", path.display())),
        },
        Entry::Cgroup {
            path,
            tasks_file,
            back,
        } => crate::cgroup::remove(path, tasks_file, back),
        Entry::Job { path, v2 } => crate::jobcg::reap(path, *v2, std::time::Duration::from_secs(3)),
        // Not schedkit's: left running, nothing to undo.
        Entry::Attached { .. } => Ok(false),
        Entry::Stopped { pid, starttime } => {
            if self_starttime(roots, *pid) != Some(*starttime) {
                return Ok(false);
            }
            // SAFETY: kill has no memory preconditions.
            if unsafe { libc::kill(*pid, libc::SIGCONT) } < 0 {
                return Err(std::io::Error::last_os_error().to_string());
            }
            Ok(true)
        }
    }
}

/// Undoes an [`Entry::Affinities`] whose process is the one journaled: `old` back on each
/// TID that is still a thread of it. A thread the kernel would not move (EINVAL:
/// PF_NO_SETAFFINITY, as io_uring's workers) refuses the undo too; its mask is then the one
/// journaled, nothing to do.
fn undo_affinities(pid: i32, old: &CpuSet, tids: &[i32]) -> std::result::Result<bool, String> {
    let (mut any, mut failed) = (false, Vec::new());
    for &tid in tids {
        // The process is the one journaled (checked by the caller), so its leader is too;
        // any other TID must still be one of its threads. SAFETY: signal 0 sends nothing;
        // tgkill fails (ESRCH) unless `tid` is a thread of `pid`.
        if tid != pid && unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) } != 0 {
            continue;
        }
        match affinity::set_thread(tid, old) {
            Ok(()) => any = true,
            Err(e) if e.errno() == Some(libc::ESRCH) => {}
            Err(e)
                if e.errno() == Some(libc::EINVAL)
                    && affinity::get_thread(tid).is_ok_and(|c| c == *old) => {}
            Err(e) => failed.push(e.to_string()),
        }
    }
    if failed.is_empty() {
        Ok(any)
    } else {
        Err(failed.join("; "))
    }
}

/// After a run died: gives `old` to each thread of process `pid` (not one of `tids`, which
/// [`undo_affinities`] handled) and of the processes it started, born at or after `since`,
/// whose mask is still `pin`: they inherited the pin from a moved thread after the run's last
/// sweep. User threads only; a child process older than `since` is left (it was on the
/// machine before the run, and its own journal line, if any, restores it). Returns how many
/// threads it gave back. Bounded: at most 4,096 processes are visited.
fn undo_inherited(
    roots: &Roots,
    pid: i32,
    old: &CpuSet,
    tids: &[i32],
    pin: &CpuSet,
    since: u64,
) -> usize {
    let mut given = 0;
    let mut stack = vec![pid];
    let mut visited = 0;
    while let Some(p) = stack.pop() {
        visited += 1;
        if visited > 4096 {
            break;
        }
        for (tid, _) in procfs::tasks(roots, p) {
            stack.extend(
                procfs::children(roots, p, tid)
                    .into_iter()
                    .filter(|c| procfs::process_starttime(roots, *c).is_some_and(|st| st >= since)),
            );
            if p == pid && tids.contains(&tid) {
                continue;
            }
            if affinity::get_thread(tid).ok().as_ref() != Some(pin) {
                continue;
            }
            let Some(st) = procfs::read_stat(roots, p, tid) else {
                continue;
            };
            if st.starttime < since || st.is_kthread() || st.affinity_locked() {
                continue;
            }
            if affinity::set_thread(tid, old).is_ok() {
                given += 1;
            }
        }
    }
    given
}
