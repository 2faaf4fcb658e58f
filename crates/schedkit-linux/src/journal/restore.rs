//! `schedkit restore`: every journal of a state directory on its own, dead owners' undone,
//! live ones left alone, unreadable ones reported and set aside.

use super::*;

/// An entry read from a journal that [`validate`] refused: not applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    /// 1-based line number in the journal file.
    pub line: usize,
    pub entry: Entry,
    pub reason: String,
}

/// One journal found by [`restore_dir`].
#[derive(Debug, Default)]
pub struct Restored {
    pub path: PathBuf,
    /// The header's pid (0 when there is no readable header).
    pub owner_pid: i32,
    /// The owner still runs (pid and start time match).
    pub owner_alive: bool,
    /// The owner still runs and `force` was not given: the journal was left alone.
    pub left_alone: bool,
    /// Another restore holds the journal's lock: left to it.
    pub busy: bool,
    pub undone: Vec<Undone>,
    /// Lines that could not be parsed: the torn tail and the corrupt lines.
    pub skipped_lines: usize,
    /// The last line could not be parsed: a write cut short by the crash (the change it
    /// describes was never made, because entries are written before changes). Normal.
    pub torn_tail: bool,
    /// 1-based numbers of lines before the last that could not be parsed: changes that
    /// cannot be undone from this journal.
    pub corrupt_lines: Vec<usize>,
    /// Entries refused by [`validate`].
    pub rejected: Vec<Rejected>,
    /// Why the journal as a whole could not be used (unreadable, empty, not a journal, not a
    /// regular file).
    pub unusable: Option<String>,
    /// Where the journal was moved for a human (`<name>.bad`), when it was unusable or held
    /// corrupt lines or rejected entries.
    pub set_aside: Option<PathBuf>,
    /// Kept in place holding only the entries whose undo failed (a later restore retries).
    pub kept: bool,
    /// Written in an earlier boot of the machine: nothing it names is changed any more, so
    /// it was removed without undoing anything.
    pub other_boot: bool,
}

impl Restored {
    /// Undo outcomes that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Undone> {
        self.undone.iter().filter(|u| u.outcome.is_err())
    }
    /// Everything this journal described is undone, or was left alone on purpose (a live
    /// owner, another restore at work).
    pub fn ok(&self) -> bool {
        self.unusable.is_none()
            && self.corrupt_lines.is_empty()
            && self.rejected.is_empty()
            && self.failed().next().is_none()
    }
}

/// What [`restore_dir`] did in one state directory.
#[derive(Debug, Default)]
pub struct RestoreReport {
    pub dir: PathBuf,
    pub journals: Vec<Restored>,
    /// Control sockets (`<pid>.sock`) of dead runs, removed.
    pub sockets_removed: Vec<PathBuf>,
    /// Temporary journal files of dead runs (killed while creating their journal), removed.
    pub temps_removed: Vec<PathBuf>,
    /// Empty `schedkit-<pid>` / `schedkit-probe-<pid>` cgroups of dead runs, removed.
    pub cgroups_removed: Vec<PathBuf>,
}

impl RestoreReport {
    pub fn ok(&self) -> bool {
        self.journals.iter().all(Restored::ok)
    }

    /// What is left undone over every journal, one clause per kind (changes that failed,
    /// unusable journals, corrupt lines, refused entries); `None` when [`ok`](Self::ok).
    /// `schedkit restore` ends with exit status 1 and this text when there is any.
    pub fn incomplete(&self) -> Option<String> {
        let (mut unusable, mut corrupt, mut rejected, mut failed) = (0, 0, 0, 0);
        for r in &self.journals {
            unusable += usize::from(r.unusable.is_some());
            corrupt += r.corrupt_lines.len();
            rejected += r.rejected.len();
            failed += r.failed().count();
        }
        if self.ok() {
            return None;
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
        Some(parts.join(", "))
    }
}

/// A parsed journal file.
struct Parsed {
    header: Header,
    /// (1-based line, entry)
    entries: Vec<(usize, Entry)>,
    torn_tail: bool,
    corrupt_lines: Vec<usize>,
}

/// Parses a journal's bytes: `Err` says why it is no journal at all.
fn parse_journal(bytes: &[u8]) -> std::result::Result<Parsed, String> {
    if bytes.is_empty() {
        return Err("empty file (no header)".into());
    }
    let mut lines: Vec<(usize, &[u8])> = bytes
        .split(|&c| c == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .collect();
    while lines
        .last()
        .is_some_and(|(_, l)| l.iter().all(|c| c.is_ascii_whitespace()))
    {
        lines.pop();
    }
    let Some(((_, first), rest)) = lines.split_first() else {
        return Err("no header (only blank lines)".into());
    };
    let header: Header = serde_json::from_slice(first)
        .map_err(|_| "not a schedkit journal (the first line is no journal header)".to_string())?;
    if header.journal != 1 {
        return Err(format!("journal format {} is not known", header.journal));
    }
    if header.pid <= 0 {
        return Err(format!("header names pid {}", header.pid));
    }
    let mut p = Parsed {
        header,
        entries: Vec::new(),
        torn_tail: false,
        corrupt_lines: Vec::new(),
    };
    let last = rest.last().map(|(n, _)| *n);
    for (n, l) in rest {
        if l.iter().all(|c| c.is_ascii_whitespace()) {
            continue;
        }
        match serde_json::from_slice(l) {
            Ok(e) => p.entries.push((*n, e)),
            Err(_) if Some(*n) == last => p.torn_tail = true,
            Err(_) => p.corrupt_lines.push(*n),
        }
    }
    Ok(p)
}

fn owner_alive(roots: &Roots, h: &Header) -> bool {
    h.pid != std::process::id() as i32 && self_starttime(roots, h.pid) == Some(h.starttime)
}

/// Moves `path` aside as `<name>.bad` (or `<name>.bad.N`), for a human.
fn set_aside(path: &Path) -> std::result::Result<PathBuf, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let to = fresh_name(dir, &name, ".bad");
    std::fs::rename(path, &to)
        .map(|_| to)
        .map_err(|e| format!("could not set it aside: {e}"))
}

/// Opens and reads a journal file without trusting it: a regular file (not a directory, a
/// symlink or a device), owned by this user, opened without following a link or blocking.
/// `Err((why, set_aside))`: whether the file is to be set aside (all but a failed stat).
fn read_journal_file(path: &Path) -> std::result::Result<(std::fs::File, Vec<u8>), (String, bool)> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| (format!("cannot stat: {e}"), false))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_symlink() {
            "a symlink"
        } else {
            "not a regular file"
        };
        return Err((format!("is {what}, not a journal"), true));
    }
    if meta.uid() != euid() {
        return Err((
            format!("is owned by uid {}, not uid {}", meta.uid(), euid()),
            true,
        ));
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| (format!("cannot open: {e}"), true))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| (format!("cannot read: {e}"), true))?;
    Ok((file, bytes))
}

/// Restores one journal file (see [`restore_dir`]).
fn restore_one(path: &Path, roots: &Roots, mounts: &CgroupMounts, force: bool) -> Restored {
    let mut r = Restored {
        path: path.into(),
        ..Restored::default()
    };
    let unusable = |r: &mut Restored, why: String| {
        r.unusable = Some(why);
        match set_aside(path) {
            Ok(to) => r.set_aside = Some(to),
            Err(m) => r.unusable = r.unusable.take().map(|w| format!("{w}; {m}")),
        }
    };
    let (file, bytes) = match read_journal_file(path) {
        Ok(x) => x,
        Err((why, false)) => {
            r.unusable = Some(why);
            return r;
        }
        Err((why, true)) => {
            unusable(&mut r, why);
            return r;
        }
    };
    let p = match parse_journal(&bytes) {
        Ok(p) => p,
        Err(why) => {
            unusable(&mut r, why);
            return r;
        }
    };
    r.owner_pid = p.header.pid;
    if let (Some(then), Some(now)) = (p.header.boot.as_deref(), boot_id(roots)) {
        if then != now {
            // Written before the machine last started: every change it names went with
            // that boot, and its pids and IRQs now name other things.
            r.other_boot = true;
            let _ = std::fs::remove_file(path);
            return r;
        }
    }
    r.owner_alive = owner_alive(roots, &p.header);
    r.torn_tail = p.torn_tail;
    r.corrupt_lines = p.corrupt_lines;
    r.skipped_lines = r.corrupt_lines.len() + usize::from(r.torn_tail);
    if r.owner_alive && !force {
        r.left_alone = true;
        return r;
    }
    // The owner (alive, with `force`) or another restore holds the lock. A journal of this
    // very process (leaked, as tests do to play a crash) holds our own lock.
    let own = p.header.pid == std::process::id() as i32;
    if !own && !lock(&file) && !r.owner_alive && !lock_soon(&file) {
        r.busy = true;
        return r;
    }
    let mut valid = Vec::new();
    for (line, e) in p.entries {
        match validate(&e, roots, mounts) {
            Ok(()) => valid.push(e),
            Err(reason) => r.rejected.push(Rejected {
                line,
                entry: e,
                reason,
            }),
        }
    }
    r.undone = undo_entries(roots, &valid);
    if !r.owner_alive {
        // Empty `schedkit-<owner>` cgroups the dead run made unjournaled (the gang
        // freezer's probes and job groups: inert while empty) go too.
        crate::jobcg::remove_empty_run_dirs(roots, p.header.pid);
    }
    if !r.corrupt_lines.is_empty() || !r.rejected.is_empty() {
        // Kept for a human: what it holds cannot (or must not) be undone.
        match set_aside(path) {
            Ok(to) => r.set_aside = Some(to),
            Err(m) => r.unusable = Some(m),
        }
        return r;
    }
    let failed: Vec<Entry> = r
        .undone
        .iter()
        .rev()
        .filter(|u| u.outcome.is_err())
        .map(|u| u.entry.clone())
        .collect();
    if failed.is_empty() || keep_only(path, &p.header, &failed).is_err() {
        let _ = std::fs::remove_file(path);
    } else {
        r.kept = true;
    }
    r
}

fn pid_alive(roots: &Roots, pid: i32) -> bool {
    pid > 0 && roots.proc.join(pid.to_string()).exists()
}

/// Undoes every journal in `dir` whose owner no longer runs (or all, with `force`), each on
/// its own (see the module docs), and removes the control sockets and temporary files of dead
/// runs. `Err` only when `dir` itself is refused ([`check_state_dir`]) or cannot be listed; a
/// missing `dir` has nothing to restore.
pub fn restore_dir(dir: &Path, roots: &Roots, force: bool) -> Result<RestoreReport> {
    let mut report = RestoreReport {
        dir: dir.into(),
        ..RestoreReport::default()
    };
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        for m in &CgroupMounts::read(roots).0 {
            report
                .cgroups_removed
                .extend(crate::freezer::sweep_stale(m));
        }
        return Ok(report);
    }
    check_state_dir(dir)?;
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(format!("read {}", dir.display()), e))?;
    let mut journals = Vec::new();
    for d in rd.flatten() {
        let Some(name) = d.file_name().to_str().map(String::from) else {
            continue;
        };
        if name.starts_with("journal-") && name.ends_with(".jsonl") {
            journals.push(d.path());
        } else if let Some(pid) = name
            .strip_prefix(".journal-")
            .filter(|n| n.ends_with(".tmp"))
            .and_then(|n| n.split(['.', '-']).next())
            .and_then(|n| n.parse::<i32>().ok())
        {
            if !pid_alive(roots, pid) && std::fs::remove_file(d.path()).is_ok() {
                report.temps_removed.push(d.path());
            }
        }
    }
    journals.sort();
    let mounts = CgroupMounts::read(roots);
    for path in journals {
        report
            .journals
            .push(restore_one(&path, roots, &mounts, force));
    }
    // After the journals, so a dead run's journaled job cgroups are emptied first.
    for m in &mounts.0 {
        report
            .cgroups_removed
            .extend(crate::freezer::sweep_stale(m));
    }
    for (pid, path) in crate::ctl::sockets(dir) {
        let is_socket = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if !is_socket || pid == std::process::id() as i32 {
            continue;
        }
        // A live server accepts; a socket nobody listens on refuses (a recycled pid).
        let stale = !pid_alive(roots, pid)
            || std::os::unix::net::UnixStream::connect(&path)
                .is_err_and(|e| e.raw_os_error() == Some(libc::ECONNREFUSED));
        if stale && std::fs::remove_file(&path).is_ok() {
            report.sockets_removed.push(path);
        }
    }
    Ok(report)
}

/// [`restore_dir`]'s journals (kept for older callers).
pub fn restore(dir: &Path, roots: &Roots, force: bool) -> Result<Vec<Restored>> {
    restore_dir(dir, roots, force).map(|r| r.journals)
}

/// The owner (pid, start time) named by a journal's header, if it has a readable one.
pub fn read_owner(path: &Path) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let h: Header = serde_json::from_str(text.lines().next()?).ok()?;
    Some((h.pid, h.starttime))
}

/// Journals in `dir` whose owner no longer runs: changes a dead run never undid.
pub fn dead_journals(dir: &Path, roots: &Roots) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("journal-") && n.ends_with(".jsonl"))
        })
        .filter(|p| match read_owner(p) {
            Some((pid, st)) => {
                pid != std::process::id() as i32 && self_starttime(roots, pid) != Some(st)
            }
            // Unreadable: not ours to judge here; `restore` reports it.
            None => false,
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod incomplete_tests {
    use super::*;

    #[test]
    fn a_clean_restore_is_complete_and_each_problem_is_counted() {
        let clean = RestoreReport {
            journals: vec![Restored::default()],
            ..RestoreReport::default()
        };
        assert_eq!(clean.incomplete(), None);
        let bad = RestoreReport {
            journals: vec![
                Restored {
                    unusable: Some("empty file (no header)".into()),
                    ..Restored::default()
                },
                Restored {
                    corrupt_lines: vec![3, 5],
                    ..Restored::default()
                },
            ],
            ..RestoreReport::default()
        };
        assert_eq!(
            bad.incomplete().as_deref(),
            Some("1 journal(s) could not be used, 2 corrupt line(s)")
        );
    }
}
