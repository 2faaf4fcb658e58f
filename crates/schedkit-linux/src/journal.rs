//! The journal: every change schedkit makes to state it does not own is written down, and
//! fsynced, *before* the change is made, so that any way a run ends leaves the machine as it
//! was.
//!
//! ```text
//!   change requested ──▶ read old value ──▶ append entry + fsync ──▶ apply change
//!   run ends normally / SIGINT / SIGTERM / panic (Drop) ──▶ undo entries newest first ──▶ delete file
//!   run killed (SIGKILL, power loss) ──▶ file stays ──▶ `schedkit restore` undoes it
//! ```
//!
//! File: `<state dir>/journal-<pid>.jsonl`, one JSON object per line; the first line is a
//! header naming the owning process (pid and start time, so a recycled pid is not mistaken
//! for the owner). Undo goes newest first, so when one thing changed twice the oldest value
//! wins. Thread entries carry the thread's start time and are skipped if the TID now names
//! another thread (or none): a journal never touches a thread it did not change.
//!
//! The state dir is `$SCHEDKIT_STATE_DIR`, else `/run/schedkit` when writable (root), else
//! `$XDG_RUNTIME_DIR/schedkit`, else `/tmp/schedkit-<uid>`.
//!
//! Rejected: undoing from a signal handler (not async-signal-safe; the run loop polls a flag
//! set by the handler instead), and an in-memory list only (lost on SIGKILL).

use crate::affinity::{self, CpuSet};
use crate::procfs::{self, ThreadStat};
use crate::sched::{self, Policy};
use crate::{irq, Error, Result, Roots};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

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
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    journal: u32,
    pid: i32,
    starttime: u64,
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

fn self_starttime(roots: &Roots, pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("stat")).ok()?;
    procfs::parse_stat(&s).map(|t| t.starttime)
}

fn thread_starttime(roots: &Roots, pid: i32, tid: i32) -> Option<u64> {
    ThreadStat::read(roots, pid, tid).ok().map(|t| t.starttime)
}

/// An open journal owned by this process. Dropping it undoes every entry.
pub struct Journal {
    roots: Roots,
    path: PathBuf,
    file: File,
    entries: Vec<Entry>,
    done: bool,
}

impl Journal {
    /// Creates `journal-<pid>.jsonl` in `dir` and writes the header.
    pub fn create(dir: &Path, roots: &Roots) -> Result<Journal> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create state dir {}", dir.display()), e))?;
        let pid = std::process::id() as i32;
        let path = dir.join(format!("journal-{pid}.jsonl"));
        let mut file = File::create(&path)
            .map_err(|e| Error::io(format!("create journal {}", path.display()), e))?;
        let h = Header {
            journal: 1,
            pid,
            starttime: self_starttime(roots, pid).unwrap_or(0),
        };
        writeln!(
            file,
            "{}",
            serde_json::to_string(&h).expect("header serialises")
        )
        .and_then(|_| file.sync_all())
        .map_err(|e| Error::io(format!("write journal {}", path.display()), e))?;
        // The directory entry must be durable too, or a crash loses the file itself.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(Journal {
            roots: roots.clone(),
            path,
            file,
            entries: Vec::new(),
            done: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Appends `e` and fsyncs: call before making the change.
    pub fn record(&mut self, e: Entry) -> Result<()> {
        writeln!(
            self.file,
            "{}",
            serde_json::to_string(&e).expect("entry serialises")
        )
        .and_then(|_| self.file.sync_data())
        .map_err(|err| Error::io(format!("write journal {}", self.path.display()), err))?;
        self.entries.push(e);
        Ok(())
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

    /// Undoes every entry, newest first, and removes the file. Idempotent.
    pub fn undo(&mut self) -> Vec<Undone> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let out = undo_entries(&self.roots, &self.entries);
        let _ = std::fs::remove_file(&self.path);
        out
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        for u in self.undo() {
            if let Err(m) = u.outcome {
                eprintln!("schedkit: warning: could not undo {:?}: {m}", u.entry);
            }
        }
    }
}

/// Undoes `entries` newest first, except that every job is ended before anything else is
/// undone (a job must not go on running once its placement, class or IRQ isolation has
/// been taken back) and its cgroups removed after everything else (a frozen v1 job dies
/// only once the freezer's own entry has thawed it).
pub fn undo_entries(roots: &Roots, entries: &[Entry]) -> Vec<Undone> {
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
            outcome: undo_one(roots, e),
        })
        .collect();
    out.extend(
        entries
            .iter()
            .rev()
            .filter(|e| matches!(e, Entry::Job { .. }))
            .map(|e| Undone {
                entry: e.clone(),
                outcome: undo_one(roots, e),
            }),
    );
    out
}

fn undo_one(roots: &Roots, e: &Entry) -> std::result::Result<bool, String> {
    let same_thread = |pid: i32, tid: i32, st: u64| thread_starttime(roots, pid, tid) == Some(st);
    match e {
        Entry::Irq { irq, old } => {
            // A write the kernel refused left the mask as it was: nothing to undo.
            if irq::read(roots, *irq)
                .is_ok_and(|cur| CpuSet::parse_mask(old).is_ok_and(|o| o == cur.affinity))
            {
                return Ok(false);
            }
            irq::write_mask_text(roots, *irq, old)
                .map(|_| true)
                .map_err(|e| e.to_string())
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
        Entry::Sysctl { name, old } => procfs::set_sysctl(roots, name, old)
            .map(|_| true)
            .map_err(|e| e.to_string()),
        Entry::File { path, old } => std::fs::write(path, old)
            .map(|_| true)
            .map_err(|e| format!("write {}: {e}", path.display())),
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

/// One journal found by [`restore`].
#[derive(Debug)]
pub struct Restored {
    pub path: PathBuf,
    pub owner_pid: i32,
    /// The owner still runs: the journal was left alone.
    pub owner_alive: bool,
    pub undone: Vec<Undone>,
    /// Lines that could not be parsed (a write cut short by the crash: the change it
    /// describes was never made, because entries are written before changes).
    pub skipped_lines: usize,
}

/// Reads a journal file: header and entries.
fn read_journal(path: &Path) -> Result<(Header, Vec<Entry>, usize)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    let mut lines = text.lines();
    let header: Header = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| Error::Input(format!("{}: not a schedkit journal", path.display())))?;
    let mut entries = Vec::new();
    let mut skipped = 0;
    for l in lines.filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str(l) {
            Ok(e) => entries.push(e),
            Err(_) => skipped += 1,
        }
    }
    Ok((header, entries, skipped))
}

/// Undoes every journal in `dir` whose owner no longer runs (or all, with `force`), and
/// removes them.
pub fn restore(dir: &Path, roots: &Roots, force: bool) -> Result<Vec<Restored>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("read {}", dir.display()), e)),
    };
    let mut paths: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("journal-") && n.ends_with(".jsonl"))
        })
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let (h, entries, skipped_lines) = read_journal(&path)?;
        let alive = h.pid != std::process::id() as i32
            && self_starttime(roots, h.pid).is_some_and(|s| s == h.starttime);
        if alive && !force {
            out.push(Restored {
                path,
                owner_pid: h.pid,
                owner_alive: true,
                undone: Vec::new(),
                skipped_lines,
            });
            continue;
        }
        let undone = undo_entries(roots, &entries);
        let _ = std::fs::remove_file(&path);
        out.push(Restored {
            path,
            owner_pid: h.pid,
            owner_alive: alive,
            undone,
            skipped_lines,
        });
    }
    Ok(out)
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
