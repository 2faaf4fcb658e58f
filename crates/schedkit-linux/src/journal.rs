//! The journal: every change schedkit makes to state it does not own is written down
//! *before* the change is made, so that any way a run ends leaves the machine as it was.
//!
//! ```text
//!   change requested ──▶ read old value ──▶ append entry (one write) ──▶ apply change
//!   run ends normally / SIGINT / SIGTERM / panic (Drop) ──▶ undo entries newest first ──▶ delete file
//!   run killed (SIGKILL) ──▶ file stays ──▶ `schedkit restore` undoes it
//!   machine restarts ──▶ every change went with it ──▶ `restore` removes the journal (other boot)
//! ```
//!
//! File: `<state dir>/journal-<pid>.jsonl`, one JSON object per line; the first line is a
//! header naming the owning process (pid and start time, so a recycled pid is not mistaken
//! for the owner). Undo goes newest first, so when one thing changed twice the oldest value
//! wins. Thread entries carry the thread's start time and are skipped if the TID now names
//! another thread (or none): a journal never touches a thread it did not change.
//!
//! The state dir is `$SCHEDKIT_STATE_DIR`, else `/run/schedkit` when writable (root), else
//! `$XDG_RUNTIME_DIR/schedkit`, else `/tmp/schedkit-<uid>`. It must be owned by the effective
//! user and not writable by group or others ([`check_state_dir`]); it is created 0700 and
//! journals are 0600.
//!
//! ## Created whole
//!
//! The header is written to `.journal-<pid>.tmp`, then renamed (never over an existing
//! journal) to `journal-<pid>.jsonl`: a kill at any instant leaves no journal, or one with a
//! valid header. Each batch of entries is one `write`, made before any of its changes. The
//! owner holds an `flock` on its journal while it lives, so two restores never undo one
//! journal twice.
//!
//! ## Not fsynced, on purpose
//!
//! What a journal must survive is the death of its process (SIGKILL, a crash of schedkit):
//! a `write` that returned is in the page cache, where `restore` reads it, whatever becomes
//! of the writer; a rename is atomic whether or not it reached the disk. An fsync adds
//! durability across a *machine* crash only, and every change a journal records (IRQ masks,
//! affinities, scheduling classes, sysctls under `/proc/sys`, cgroup files and directories,
//! stopped processes) is kernel state that a restart resets: after one there is nothing to
//! undo. So a journal is never fsynced (measured on this project's shared VM: an fsync took
//! 8-12 ms, the median, under other work's disk load; six of them were most of an exclusive
//! run's set-up). The header names the boot (`/proc/sys/kernel/random/boot_id`): a journal
//! found after a restart (a state directory on a disk) is removed by `restore` as
//! [`Restored::other_boot`], never applied to the new boot's pids and IRQs.
//!
//! ## Restore never gives up and never trusts
//!
//! [`restore_dir`] takes each journal on its own ([`Restored`]): one that cannot be read, is
//! empty, is not a journal, or is a directory is reported and set aside as `<name>.bad` (kept
//! for a human, not retried); the others are still undone. A torn *last* line is normal (its
//! change was never made: entries are written before changes); an unparsable line before the
//! last is reported as corrupt by line number. Every entry read from a file is checked by
//! [`validate`] before it is applied (sysctl names stay under `/proc/sys`, cgroup paths under
//! a cgroup mount of `/proc/self/mountinfo`, see [`CgroupMounts`]); a rejected entry is
//! reported with the reason and not applied. An undo whose object is gone (directory removed,
//! thread exited) is "nothing to do", not a failure. Control sockets (`<pid>.sock`) of dead
//! runs are removed.
//!
//! Rejected: undoing from a signal handler (not async-signal-safe; the run loop polls a flag
//! set by the handler instead), and an in-memory list only (lost on SIGKILL).

use crate::affinity::{self, CpuSet};
use crate::procfs;
use crate::sched::{self, Policy};
use crate::{irq, Error, Result, Roots};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// One change, with what is needed to undo it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Entry {
    /// `/proc/irq/<irq>/smp_affinity` was `old`.
    Irq { irq: u32, old: String },
    /// Thread `tid` (start time `starttime`) had affinity `old`.
    Affinity {
        pid: i32,
        tid: i32,
        starttime: u64,
        old: CpuSet,
    },
    /// Threads `tids` of process `pid` (whose start time is `starttime`) each had affinity
    /// `old`: exclusive mode's sweep writes one entry per process and original mask, so a
    /// machine of five thousand threads in a hundred processes costs a hundred lines, and no
    /// per-thread `stat` read for a start time. Undo gives `old` back to each TID that is
    /// still a thread of that same process (start time, then `tgkill(pid, tid, 0)`). The
    /// one case this tells apart less well than [`Entry::Affinity`]: a TID freed by one of
    /// the process's threads and reused by a new thread of the same process (the pid
    /// counter must wrap meanwhile), which then gets the mask its process's threads had.
    Affinities {
        pid: i32,
        starttime: u64,
        old: CpuSet,
        tids: Vec<i32>,
        /// The mask the threads were moved to, and the start time (clock ticks since boot)
        /// of the run that moved them. A thread the process (or a child process of it) starts
        /// during the run inherits `pin`; the run names it in its journal at its next sweep or
        /// its last one, which a SIGKILL prevents. So `restore` also gives `old` to every
        /// thread of the process and of its children born since `since` whose mask is still
        /// `pin` ([`undo_inherited`]). Absent in journals of older schedkits.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pin: Option<CpuSet>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<u64>,
    },
    /// Thread `tid` had scheduling class `old`.
    Sched {
        pid: i32,
        tid: i32,
        starttime: u64,
        old: Policy,
    },
    /// `/proc/sys/<name>` was `old`.
    Sysctl { name: String, old: String },
    /// A file (a cgroup attribute) held `old`.
    File { path: PathBuf, old: String },
    /// A directory (a cgroup) was created.
    Mkdir { path: PathBuf },
    /// Process `pid` was stopped with SIGSTOP: undo sends SIGCONT.
    Stopped { pid: i32, starttime: u64 },
    /// A cgroup was created (fair-share policies): undo moves the tasks still listed in its
    /// `tasks_file` back to `back`, then removes it ([`crate::cgroup::remove`]).
    Cgroup {
        path: PathBuf,
        tasks_file: String,
        back: PathBuf,
    },
    /// The run's job cgroups (`<mount>/schedkit-<pid>`, see [`crate::jobcg`]): undo ends
    /// every process in the subtree, before any other entry is undone, and removes it.
    Job { path: PathBuf, v2: bool },
    /// Work already running that a run attached to (`schedkit run --pid`, see
    /// [`crate::attach`]): not schedkit's, so undo never signals it; the entries after this
    /// one give its threads their settings back. Undo has nothing to do for it.
    Attached {
        pid: i32,
        starttime: u64,
        comm: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    journal: u32,
    pid: i32,
    starttime: u64,
    /// The machine's boot id when the journal was made (absent in older journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boot: Option<String>,
}

/// This boot's id (`<proc>/sys/kernel/random/boot_id`), if readable.
fn boot_id(roots: &Roots) -> Option<String> {
    crate::read_trim(&roots.proc.join("sys/kernel/random/boot_id"))
        .ok()
        .filter(|b| !b.is_empty())
}

/// What undoing one entry did.
#[derive(Clone, Debug, PartialEq)]
pub struct Undone {
    pub entry: Entry,
    /// `Ok(true)`: restored; `Ok(false)`: nothing to do (the thread is gone); `Err`: failed.
    pub outcome: std::result::Result<bool, String>,
}

/// The default state directory (see the module docs).
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SCHEDKIT_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/schedkit");
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("schedkit");
    }
    PathBuf::from(format!("/tmp/schedkit-{uid}"))
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Checks that `dir` is fit to hold journals: a directory (or a symlink of ours to one) owned
/// by the effective user and not writable by group or others. A directory of ours that is
/// merely readable by others (0755, as older versions made it) is narrowed to 0700.
pub fn check_state_dir(dir: &Path) -> Result<()> {
    let refuse = |what: String| {
        Error::Input(format!(
            "state directory {}: {what}; refusing to use it (remove it or set SCHEDKIT_STATE_DIR)",
            dir.display()
        ))
    };
    let me = euid();
    let l = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::io(format!("state directory {}", dir.display()), e))?;
    if l.file_type().is_symlink() && l.uid() != me {
        return Err(refuse(format!(
            "is a symlink owned by uid {}, not uid {me}",
            l.uid()
        )));
    }
    let m = std::fs::metadata(dir)
        .map_err(|e| Error::io(format!("state directory {}", dir.display()), e))?;
    if !m.is_dir() {
        return Err(refuse("is not a directory".into()));
    }
    if m.uid() != me {
        return Err(refuse(format!(
            "is owned by uid {}, not by uid {me} (this process)",
            m.uid()
        )));
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refuse(format!(
            "is writable by {} (mode {mode:04o})",
            if mode & 0o020 != 0 && mode & 0o002 != 0 {
                "group and others"
            } else if mode & 0o020 != 0 {
                "its group"
            } else {
                "others"
            }
        )));
    }
    if mode & 0o077 != 0 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Creates `dir` (mode 0700) if missing, then [`check_state_dir`].
pub fn prepare_state_dir(dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io(format!("create state dir {}", dir.display()), e))?;
    }
    check_state_dir(dir)
}

/// The cgroup (v1 `cgroup` and v2 `cgroup2`) mount points of `/proc/self/mountinfo` (under
/// [`Roots::proc`], so tests can list a fake tree): the only places where journal entries
/// may name files and directories.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CgroupMounts(pub Vec<PathBuf>);

impl CgroupMounts {
    pub fn read(roots: &Roots) -> CgroupMounts {
        let text = std::fs::read_to_string(roots.proc.join("self/mountinfo")).unwrap_or_default();
        let mut v = Vec::new();
        for line in text.lines() {
            // id parent major:minor root mountpoint options ... - fstype source superoptions
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let fstype = right.split_whitespace().next().unwrap_or("");
            if fstype != "cgroup" && fstype != "cgroup2" {
                continue;
            }
            if let Some(mp) = left.split_whitespace().nth(4) {
                let mp = PathBuf::from(unescape_mountinfo(mp));
                if mp.is_absolute() && !v.contains(&mp) {
                    v.push(mp);
                }
            }
        }
        CgroupMounts(v)
    }

    /// Whether `path` is one of the mount points.
    pub fn is_mount(&self, path: &Path) -> bool {
        self.0.iter().any(|m| m == path)
    }

    /// Ok when `path` is absolute, has no `.` or `..` component and lies strictly below one of
    /// the mounts (`or_mount`: or is a mount point itself).
    pub fn check(&self, path: &Path, or_mount: bool) -> std::result::Result<(), String> {
        plain_absolute(path)?;
        let hit = self
            .0
            .iter()
            .any(|m| path.starts_with(m) && (or_mount || path != m.as_path()));
        if hit {
            Ok(())
        } else if self.0.is_empty() {
            Err(format!(
                "{} is not under a cgroup mount (none found in mountinfo)",
                path.display()
            ))
        } else {
            Err(format!(
                "{} is not under a cgroup mount ({})",
                path.display(),
                self.0
                    .iter()
                    .map(|m| m.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}

/// Ok when `path` lies below a cgroup mount of `roots` (see [`CgroupMounts::check`]).
pub fn check_cgroup_path(roots: &Roots, path: &Path) -> std::result::Result<(), String> {
    CgroupMounts::read(roots).check(path, false)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn plain_absolute(path: &Path) -> std::result::Result<(), String> {
    let text = path.as_os_str().as_encoded_bytes();
    if !path.is_absolute() {
        return Err(format!("{} is not an absolute path", path.display()));
    }
    if text.split(|&c| c == b'/').any(|c| c == b".." || c == b".") {
        return Err(format!("{} has a `.` or `..` component", path.display()));
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(format!("{} is not a plain path", path.display()));
    }
    Ok(())
}

/// Ok when `name` is a sysctl path relative to `/proc/sys` made of plain components
/// (`kernel/sched_rt_runtime_us`): not absolute, no empty, `.` or `..` component.
pub fn check_sysctl_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty sysctl name".into());
    }
    if name.starts_with('/') {
        return Err(format!("sysctl name {name:?} is absolute"));
    }
    if name.contains('\0') {
        return Err(format!("sysctl name {name:?} holds a NUL byte"));
    }
    if let Some(c) = name
        .split('/')
        .find(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(format!(
            "sysctl name {name:?} has a{} component {c:?}",
            if c.is_empty() { "n empty" } else { "" }
        ));
    }
    Ok(())
}

/// Checks an entry read from a journal file before it is applied: one arm per kind of entry
/// (a new kind of entry is one more arm). Files and directories must lie under a cgroup mount
/// (`mounts`); the one file outside them schedkit writes is `<proc>/irq/default_smp_affinity`
/// (exclusive mode), whose value must be a mask. Thread and process entries are also checked
/// at undo time: they act only on a pid/tid whose start time matches.
pub fn validate(
    e: &Entry,
    roots: &Roots,
    mounts: &CgroupMounts,
) -> std::result::Result<(), String> {
    let positive = |what: &str, id: i32| {
        if id > 0 {
            Ok(())
        } else {
            Err(format!("{what} {id} is not a positive id"))
        }
    };
    match e {
        // The path is `/proc/irq/<irq>/smp_affinity` by construction (`irq` is a number);
        // the value must be a mask.
        Entry::Irq { old, .. } => CpuSet::parse_mask(old)
            .map(|_| ())
            .map_err(|m| format!("IRQ mask {old:?}: {m}")),
        Entry::Affinity { pid, tid, .. } | Entry::Sched { pid, tid, .. } => {
            positive("pid", *pid).and_then(|_| positive("tid", *tid))
        }
        Entry::Affinities { pid, tids, .. } => {
            positive("pid", *pid)?;
            tids.iter().try_for_each(|t| positive("tid", *t))
        }
        Entry::Sysctl { name, .. } => check_sysctl_name(name),
        Entry::File { path, old } if *path == roots.proc.join("irq/default_smp_affinity") => {
            CpuSet::parse_mask(old)
                .map(|_| ())
                .map_err(|m| format!("default IRQ mask {old:?}: {m}"))
        }
        Entry::File { path, .. } | Entry::Mkdir { path } => mounts.check(path, false),
        Entry::Stopped { pid, .. } => positive("pid", *pid),
        Entry::Attached { pid, .. } => positive("pid", *pid),
        // Undo kills every process below `path`: it must be a run's own `schedkit-<pid>`
        // directory directly under a cgroup mount, never a mount or anyone else's group.
        Entry::Job { path, .. } => {
            mounts.check(path, false)?;
            let named = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("schedkit-"))
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            let at_mount = path.parent().is_some_and(|parent| mounts.is_mount(parent));
            if named && at_mount {
                Ok(())
            } else {
                Err(format!(
                    "job cgroup {} is not a `schedkit-<pid>` directory directly under a cgroup mount",
                    path.display()
                ))
            }
        }
        Entry::Cgroup {
            path,
            tasks_file,
            back,
        } => {
            mounts.check(path, false)?;
            mounts.check(back, true)?;
            if tasks_file.is_empty()
                || tasks_file.contains('/')
                || tasks_file == "."
                || tasks_file == ".."
            {
                return Err(format!(
                    "tasks file {tasks_file:?} is not a plain file name"
                ));
            }
            Ok(())
        }
    }
}

fn self_starttime(roots: &Roots, pid: i32) -> Option<u64> {
    procfs::process_starttime(roots, pid)
}

fn thread_starttime(roots: &Roots, pid: i32, tid: i32) -> Option<u64> {
    procfs::read_stat(roots, pid, tid).map(|t| t.starttime)
}

/// An open journal owned by this process. Dropping it undoes every entry (prefer
/// [`Journal::finish`], which returns what undo did).
pub struct Journal {
    roots: Roots,
    path: PathBuf,
    file: File,
    header: Header,
    entries: Vec<Entry>,
    done: bool,
    /// Processes vouched for ([`Journal::vouch`]): pid -> (start time, pidfd).
    vouched: Vouched,
}

/// pid -> (start time, a pidfd opened before that start time was read).
type Vouched = std::collections::HashMap<i32, (u64, std::os::fd::OwnedFd)>;

/// A pidfd of process `pid` (`pidfd_open`; close-on-exec), where the kernel has them.
pub fn pidfd(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes no pointers; the descriptor is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether the process a pidfd names still exists (signal 0: nothing is sent). A pidfd
/// names its process, not its number: once that process is gone it answers ESRCH, even
/// if the number now names another.
fn pidfd_alive(fd: &std::os::fd::OwnedFd) -> bool {
    // SAFETY: signal 0 with no siginfo: nothing is sent or read.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

fn write_line(file: &mut File, json: String) -> std::io::Result<()> {
    // One write per line: a kill leaves a whole line or a torn last one.
    let mut line = json;
    line.push('\n');
    file.write_all(line.as_bytes())
}

/// Renames `from` to `to` unless `to` exists (`renameat2(RENAME_NOREPLACE)`; where the
/// filesystem lacks it, a checked plain rename).
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let cs = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let (f, t) = (cs(from)?, cs(to)?);
    // SAFETY: both are valid NUL-terminated paths.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            if std::fs::symlink_metadata(to).is_ok() {
                return Err(std::io::Error::from_raw_os_error(libc::EEXIST));
            }
            std::fs::rename(from, to)
        }
        _ => Err(e),
    }
}

/// A name `<base><suffix>` in `dir` that does not exist yet (`<base>.1<suffix>`, ... if it
/// does).
fn fresh_name(dir: &Path, base: &str, suffix: &str) -> PathBuf {
    let first = dir.join(format!("{base}{suffix}"));
    if std::fs::symlink_metadata(&first).is_err() {
        return first;
    }
    (1..)
        .map(|n| dir.join(format!("{base}.{n}{suffix}")))
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("a free name")
}

fn lock(file: &File) -> bool {
    // SAFETY: flock on a valid descriptor.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// [`lock`], retried for up to two seconds. The lock of a dead run's journal can outlive it
/// briefly: a command it had forked but not yet started holds a copy of the descriptor until
/// it sees the start gate close and exits (at once), and a concurrent `restore` holds it
/// while it undoes the journal (milliseconds).
fn lock_soon(file: &File) -> bool {
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if lock(file) {
            return true;
        }
    }
    false
}

fn temp_name(pid: i32) -> String {
    format!(".journal-{pid}.tmp")
}

impl Journal {
    /// Creates `journal-<pid>.jsonl` in `dir` (made 0700 if missing, see
    /// [`prepare_state_dir`]) holding the header, whole: written to a temporary file,
    /// fsynced, renamed, the directory fsynced (see the module docs).
    pub fn create(dir: &Path, roots: &Roots) -> Result<Journal> {
        prepare_state_dir(dir)?;
        let pid = std::process::id() as i32;
        let tmp = dir.join(temp_name(pid));
        let _ = std::fs::remove_file(&tmp); // left by a dead run with this pid
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(|e| Error::io(format!("create journal {}", tmp.display()), e))?;
        lock(&file);
        let header = Header {
            journal: 1,
            pid,
            starttime: self_starttime(roots, pid).unwrap_or(0),
            boot: boot_id(roots),
        };
        let fail = |e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(format!("write journal {}", tmp.display()), e)
        };
        write_line(
            &mut file,
            serde_json::to_string(&header).expect("header serialises"),
        )
        .map_err(fail)?;
        // Never over a journal left by a dead run that had this pid: it is still to undo.
        let mut path = dir.join(format!("journal-{pid}.jsonl"));
        let mut n = 0;
        loop {
            match rename_noreplace(&tmp, &path) {
                Ok(()) => break,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && n < 1000 => {
                    n += 1;
                    path = dir.join(format!("journal-{pid}.{n}.jsonl"));
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(Error::io(format!("create journal {}", path.display()), e));
                }
            }
        }
        Ok(Journal {
            roots: roots.clone(),
            path,
            file,
            header,
            entries: Vec::new(),
            done: false,
            vouched: Vouched::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Appends `e` (one write; not fsynced, see the module docs): call before making the
    /// change.
    pub fn record(&mut self, e: Entry) -> Result<()> {
        write_line(
            &mut self.file,
            serde_json::to_string(&e).expect("entry serialises"),
        )
        .map_err(|err| Error::io(format!("write journal {}", self.path.display()), err))?;
        self.entries.push(e);
        Ok(())
    }

    /// Appends every entry of `batch` with one write: the way to journal many changes at once
    /// (exclusive mode's IRQs and threads). The guarantee is the same as
    /// [`Journal::record`]'s, for the whole batch: the caller makes none of the changes
    /// until this returns `Ok`.
    pub fn record_all(&mut self, batch: Vec<Entry>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut text = String::new();
        for e in &batch {
            text += &serde_json::to_string(e).expect("entry serialises");
            text.push('\n');
        }
        // One write: a kill leaves whole lines and at most one torn last line, which
        // `restore` reports; the entries before it are undone.
        self.file
            .write_all(text.as_bytes())
            .map_err(|err| Error::io(format!("write journal {}", self.path.display()), err))?;
        self.entries.extend(batch);
        Ok(())
    }

    /// Vouches for process `pid` with start time `starttime`, by `fd`, a pidfd of it opened
    /// *before* that start time was read (so it names that very process): undo then tells
    /// whether the process still lives with one system call on `fd` instead of reading its
    /// `stat` again (exclusive mode undoes an entry per process of the machine). Entries of
    /// a process not vouched for are checked by their start time, as after a crash.
    pub fn vouch(&mut self, pid: i32, starttime: u64, fd: std::os::fd::OwnedFd) {
        self.vouched.insert(pid, (starttime, fd));
    }

    /// Sets an IRQ's affinity, journaled.
    pub fn set_irq(&mut self, irq_no: u32, cpus: &CpuSet) -> Result<()> {
        let old = irq::read(&self.roots, irq_no)?;
        if old.affinity == *cpus {
            return Ok(());
        }
        self.record(Entry::Irq {
            irq: irq_no,
            old: old.mask_text,
        })?;
        irq::set(&self.roots, irq_no, cpus)
    }

    /// Sets another thread's affinity, journaled.
    pub fn set_affinity(&mut self, pid: i32, tid: i32, cpus: &CpuSet) -> Result<()> {
        let old = affinity::get_thread(tid)?;
        if old == *cpus {
            return Ok(());
        }
        let starttime = thread_starttime(&self.roots, pid, tid)
            .ok_or_else(|| Error::Input(format!("thread {tid} is gone")))?;
        self.record(Entry::Affinity {
            pid,
            tid,
            starttime,
            old,
        })?;
        affinity::set_thread(tid, cpus)
    }

    /// Sets another thread's scheduling class, journaled.
    pub fn set_sched(&mut self, pid: i32, tid: i32, policy: Policy) -> Result<()> {
        let old = sched::get_thread(tid)?;
        let starttime = thread_starttime(&self.roots, pid, tid)
            .ok_or_else(|| Error::Input(format!("thread {tid} is gone")))?;
        self.record(Entry::Sched {
            pid,
            tid,
            starttime,
            old,
        })?;
        sched::set_thread(tid, policy)
    }

    /// Writes a sysctl, journaled.
    pub fn set_sysctl(&mut self, name: &str, value: &str) -> Result<()> {
        let old = procfs::sysctl(&self.roots, name)?;
        if old == value {
            return Ok(());
        }
        self.record(Entry::Sysctl {
            name: name.into(),
            old,
        })?;
        procfs::set_sysctl(&self.roots, name, value)
    }

    /// Writes a file (cgroup attribute), journaled.
    pub fn write_file(&mut self, path: &Path, value: &str) -> Result<()> {
        let old =
            crate::read_trim(path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        self.record(Entry::File {
            path: path.into(),
            old,
        })?;
        std::fs::write(path, value).map_err(|e| Error::io(format!("write {}", path.display()), e))
    }

    /// Creates a directory (a cgroup), journaled: undo removes it.
    pub fn mkdir(&mut self, path: &Path) -> Result<()> {
        self.record(Entry::Mkdir { path: path.into() })?;
        std::fs::create_dir(path).map_err(|e| Error::io(format!("mkdir {}", path.display()), e))
    }

    /// Stops a process with SIGSTOP, journaled: undo continues it.
    pub fn stop(&mut self, pid: i32) -> Result<()> {
        let starttime = self_starttime(&self.roots, pid)
            .ok_or_else(|| Error::Input(format!("process {pid} is gone")))?;
        self.record(Entry::Stopped { pid, starttime })?;
        // SAFETY: kill has no memory preconditions.
        if unsafe { libc::kill(pid, libc::SIGSTOP) } < 0 {
            return Err(Error::last_os(format!("SIGSTOP {pid}")));
        }
        Ok(())
    }

    /// Undoes every entry, newest first. Idempotent. The file is removed when every undo
    /// succeeded (or had nothing to do); otherwise it is rewritten to hold only the entries
    /// that failed, so that `schedkit restore` can retry them once this process is gone.
    pub fn undo(&mut self) -> Vec<Undone> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let out = undo_entries_vouched(&self.roots, &self.entries, &self.vouched);
        self.vouched.clear();
        let failed: Vec<Entry> = out
            .iter()
            .rev()
            .filter(|u| u.outcome.is_err())
            .map(|u| u.entry.clone())
            .collect();
        if failed.is_empty() || keep_only(&self.path, &self.header, &failed).is_err() {
            let _ = std::fs::remove_file(&self.path);
        }
        out
    }

    /// Undoes every entry (see [`Journal::undo`]) and returns what was done: the way to end
    /// a journal and report failures (its `Drop` is the silent last resort).
    pub fn finish(mut self) -> Vec<Undone> {
        self.undo()
    }
}

/// Replaces the journal at `path` by one with `header` and `entries` (temporary file,
/// rename).
fn keep_only(path: &Path, header: &Header, entries: &[Entry]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    let mut text = serde_json::to_string(header).expect("header serialises") + "\n";
    for e in entries {
        text += &serde_json::to_string(e).expect("entry serialises");
        text.push('\n');
    }
    let r = f
        .write_all(text.as_bytes())
        .and_then(|_| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

impl Drop for Journal {
    /// The last resort (a panic, or an owner that never called [`Journal::finish`]): undo,
    /// and when something could not be undone, a warning for [`take_drop_warnings`] (a
    /// library does not print; the binary says it before it exits).
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let failed = self.undo().iter().filter(|u| u.outcome.is_err()).count();
        if failed > 0 {
            drop_warnings().push(format!(
                "{failed} change(s) could not be undone; `schedkit restore` retries them from {}",
                self.path.display()
            ));
        }
    }
}

fn drop_warnings() -> std::sync::MutexGuard<'static, Vec<String>> {
    static W: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    W.lock().unwrap_or_else(|p| p.into_inner())
}

/// What journals dropped without [`Journal::finish`] could not undo (the warnings their
/// `Drop` would otherwise have had nowhere to put), emptied by the call.
pub fn take_drop_warnings() -> Vec<String> {
    std::mem::take(&mut *drop_warnings())
}

/// Undoes `entries` newest first, except that every job is ended before anything else is
/// undone (a job must not go on running once its placement, class or IRQ isolation has
/// been taken back) and its cgroups removed after everything else (a frozen v1 job dies
/// only once the freezer's own entry has thawed it).
pub fn undo_entries(roots: &Roots, entries: &[Entry]) -> Vec<Undone> {
    undo_entries_vouched(roots, entries, &Vouched::new())
}

fn undo_entries_vouched(roots: &Roots, entries: &[Entry], vouched: &Vouched) -> Vec<Undone> {
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
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            r.unusable = Some(format!("cannot stat: {e}"));
            return r;
        }
    };
    let ft = meta.file_type();
    if !ft.is_file() {
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_symlink() {
            "a symlink"
        } else {
            "not a regular file"
        };
        unusable(&mut r, format!("is {what}, not a journal"));
        return r;
    }
    if meta.uid() != euid() {
        unusable(
            &mut r,
            format!("is owned by uid {}, not uid {}", meta.uid(), euid()),
        );
        return r;
    }
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => {
            unusable(&mut r, format!("cannot open: {e}"));
            return r;
        }
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.read_to_end(&mut bytes) {
        unusable(&mut r, format!("cannot read: {e}"));
        return r;
    }
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
