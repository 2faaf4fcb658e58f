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

mod restore;
mod state_dir;
mod undo;
mod validate;

pub use restore::{
    dead_journals, read_owner, restore, restore_dir, Rejected, RestoreReport, Restored,
};
use state_dir::euid;
pub use state_dir::{check_state_dir, prepare_state_dir, state_dir};
pub use undo::undo_entries;
use undo::undo_entries_vouched;
pub use validate::{check_cgroup_path, check_sysctl_name, validate, CgroupMounts};

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
