//! The machine lease: one machine-wide place where every `schedkit run` that changes shared
//! state (IRQ masks, RT throttling, CPUs reserved for an exclusive job, the SCHED_RR time
//! slice, cgroup parents) says so, so that two runs never fight over the same knob.
//!
//! ## Where
//!
//! `/run/lock/schedkit/` (or `$SCHEDKIT_LEASE_DIR`, for tests and containers that share a
//! `/run`). Deliberately *not* under the journal's state directory: two runs with different
//! `SCHEDKIT_STATE_DIR`s still touch the same machine, so they must still see each other.
//!
//! ## How
//!
//! Each resource is a lock file held with `flock(2)`: `machine.lock` (shared by every run
//! that changes machine state, exclusive for `--exclusive`, which moves every other thread
//! and IRQ) and `sysctl-<name>.lock` (exclusive, for a run that writes that sysctl). The
//! kernel drops an `flock` when its holder dies, even by SIGKILL, so a lease can never be
//! left held by a dead run; there is nothing to "break".
//!
//! Beside the locks, `holders/<pid>.json` names each holder (pid and start time, what it
//! holds, the command line, and the journal it writes), so a refusal can say who holds what,
//! and so a run that starts after a dead one can see that the dead run's changes were never
//! undone (its record is still there and its journal still exists): it then refuses with the
//! journal's path and tells the user to run `schedkit restore`, or restores it first when
//! asked (`--restore-stale`). Taking a lease over an un-restored dead run would journal the
//! dead run's changes as the machine's "original" state and make them permanent.
//!
//! ## Trust
//!
//! Run as root, the lease directory must belong to root and be writable by no one else
//! (`/run/lock` is world-writable, so anyone could pre-create it); otherwise the run
//! refuses. A holder record is only ever *read* for a message and for the path of a journal
//! to point at; `restore` validates journals on its own.
//!
//! Rejected: a lock inside the state directory (per user and overridable, so two runs would
//! not see each other); a pid file without `flock` (stale after SIGKILL, and two runs could
//! both decide it is stale and both take it); System V semaphores (`SEM_UNDO` works, but
//! they cannot carry who holds them).

use crate::{procfs, Error, Result, Roots};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a run holds the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hold {
    /// Changes that live beside other runs' (cgroup parents of its own, nice values of its
    /// own threads): any number of shared holders, but no exclusive one.
    Shared,
    /// The whole machine (exclusive mode: every other thread and IRQ is moved).
    Exclusive,
}

/// What a run asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Want {
    pub machine: Option<Hold>,
    /// Sysctls (`kernel/sched_rr_timeslice_ms`) the run writes: one writer at a time.
    pub sysctls: Vec<String>,
}

impl Want {
    pub fn is_empty(&self) -> bool {
        self.machine.is_none() && self.sysctls.is_empty()
    }
}

/// A holder's record in `holders/<pid>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: i32,
    /// Start time of `pid` (clock ticks since boot): with the pid, names the process.
    pub starttime: u64,
    pub machine: Option<Hold>,
    #[serde(default)]
    pub sysctls: Vec<String>,
    /// The command line, for people.
    pub command: String,
    /// The journal this run writes, if any.
    pub journal: Option<PathBuf>,
    /// Seconds since the epoch when the lease was taken.
    pub since: u64,
}

impl Holder {
    /// One line for a message: `pid 123 (schedkit run --exclusive -- cyclictest), exclusive,
    /// since 12 s`.
    pub fn describe(&self) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut what = Vec::new();
        match self.machine {
            Some(Hold::Exclusive) => what.push("the whole machine (exclusive)".to_string()),
            Some(Hold::Shared) => what.push("machine state (shared)".to_string()),
            None => {}
        }
        for s in &self.sysctls {
            what.push(format!("sysctl {s}"));
        }
        format!(
            "pid {} ({}), holding {}, for {} s",
            self.pid,
            self.command,
            what.join(" and "),
            now.saturating_sub(self.since)
        )
    }
}

/// A dead run whose changes were never undone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    pub pid: i32,
    pub journal: PathBuf,
    /// It held machine-wide knobs (exclusive mode, a sysctl): a new run that changes them
    /// would journal the dead run's values as the machine's own.
    pub machine_wide: bool,
}

/// A held lease: dropped, it releases every lock and removes its holder record.
#[derive(Debug)]
pub struct Lease {
    _locks: Vec<File>,
    record: Option<PathBuf>,
    /// Where the lease lives (`None`: no lease could be taken, see `warning`).
    pub dir: Option<PathBuf>,
    /// Why this run holds no lease although it asked for one (an unprivileged run on a
    /// machine whose lease directory does not exist yet).
    pub warning: Option<String>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(r) = &self.record {
            let _ = std::fs::remove_file(r);
        }
    }
}

/// The lease directory (see the module docs).
pub fn lease_dir() -> PathBuf {
    match std::env::var_os("SCHEDKIT_LEASE_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from("/run/lock/schedkit"),
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn starttime_of(roots: &Roots, pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("stat")).ok()?;
    procfs::parse_stat(&s).map(|t| t.starttime)
}

/// Whether the process named by `pid` and `starttime` still runs.
pub fn alive(roots: &Roots, pid: i32, starttime: u64) -> bool {
    starttime_of(roots, pid) == Some(starttime)
}

/// Checks that `dir` may be trusted by this user: owned by us (root: by root) and writable
/// by no one else.
fn check_dir(dir: &Path) -> Result<()> {
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::io(format!("lease directory {}", dir.display()), e))?;
    if !m.is_dir() {
        return Err(Error::Privilege(format!(
            "lease directory {} is not a directory; remove it (schedkit recreates it)",
            dir.display()
        )));
    }
    let me = euid();
    if me == 0 && m.uid() != 0 {
        return Err(Error::Privilege(format!(
            "lease directory {} belongs to uid {}, not root: schedkit will not trust it; \
             remove it (schedkit recreates it)",
            dir.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 {
        return Err(Error::Privilege(format!(
            "lease directory {} is writable by group or others (mode {:o}): schedkit will \
             not trust it; `chmod 755` it or remove it",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

fn lock_name(sysctl: &str) -> String {
    format!(
        "sysctl-{}.lock",
        sysctl
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '.'
            })
            .collect::<String>()
    )
}

/// Opens (creating where we may) a lock file.
fn open_lock(dir: &Path, name: &str) -> std::io::Result<File> {
    let p = dir.join(name);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&p)
        .or_else(|_| {
            // Not ours to write (an unprivileged run): flock works on a read-only file too.
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&p)
        })
}

fn try_flock(f: &File, exclusive: bool) -> std::io::Result<bool> {
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    } | libc::LOCK_NB;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Every holder record in `dir`, each with whether its process still runs.
pub fn holders(dir: &Path, roots: &Roots) -> Vec<(Holder, bool)> {
    let Ok(rd) = std::fs::read_dir(dir.join("holders")) else {
        return Vec::new();
    };
    let mut out: Vec<(Holder, bool)> = rd
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            let h: Holder = serde_json::from_str(&text).ok()?;
            let live = alive(roots, h.pid, h.starttime);
            Some((h, live))
        })
        .collect();
    out.sort_by_key(|(h, _)| h.pid);
    out
}

/// Dead runs (by their holder records) whose journals are still on disk, i.e. whose
/// changes were never undone. Records of dead runs whose journals are gone are removed.
pub fn stale(dir: &Path, roots: &Roots) -> Vec<Stale> {
    let mut out = Vec::new();
    for (h, live) in holders(dir, roots) {
        if live {
            continue;
        }
        match &h.journal {
            Some(j) if j.exists() => out.push(Stale {
                pid: h.pid,
                journal: j.clone(),
                machine_wide: h.machine == Some(Hold::Exclusive) || !h.sysctls.is_empty(),
            }),
            _ => {
                let _ = std::fs::remove_file(dir.join("holders").join(format!("{}.json", h.pid)));
            }
        }
    }
    out
}

/// The machine lease alone (`hold`, no sysctls, no journal) on this host's lease directory,
/// waiting up to `wait` for its holders: what a program that measures or changes the machine
/// without being a run takes (the suite's real-run tests, which must not run beside an
/// exclusive run that would move their threads).
pub fn machine(hold: Hold, command: String, wait: Option<Duration>) -> Result<Lease> {
    acquire(
        &lease_dir(),
        Acquire {
            roots: &Roots::host(),
            want: &Want {
                machine: Some(hold),
                sysctls: Vec::new(),
            },
            command,
            journal: None,
            wait,
        },
    )
}

/// The options of [`acquire`].
pub struct Acquire<'a> {
    pub roots: &'a Roots,
    pub want: &'a Want,
    /// For the holder record.
    pub command: String,
    pub journal: Option<PathBuf>,
    /// Wait this long for the holders to finish (`None`: refuse at once).
    pub wait: Option<Duration>,
}

/// Takes the lease `a.want` names in `dir`.
///
/// Refuses with [`Error::Busy`] naming the live holders when another run holds what this one
/// needs (after `a.wait`, if given). Whether dead holders left changes behind is the
/// caller's to check, with the lease held ([`stale`]). An unprivileged run on a machine without a lease directory gets a
/// `Lease` with a warning and no locks (it cannot change machine-wide state anyway).
///
/// One function (about 140 lines) on purpose: the order of its steps (create the directory
/// and its holders folder, take every lock or none and name the live holders when refused,
/// write the record whole) is what makes two concurrent runs safe, and it is reviewed as one
/// sequence.
pub fn acquire(dir: &Path, a: Acquire<'_>) -> Result<Lease> {
    if a.want.is_empty() {
        return Ok(Lease {
            _locks: Vec::new(),
            record: None,
            dir: None,
            warning: None,
        });
    }
    let root = euid() == 0;
    if !dir.exists() {
        if root {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("create lease directory {}", dir.display()), e))?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
        } else {
            return Ok(Lease {
                _locks: Vec::new(),
                record: None,
                dir: None,
                warning: Some(format!(
                    "no machine lease: {} does not exist (a run as root creates it), so this \
                     run cannot see other schedkit runs",
                    dir.display()
                )),
            });
        }
    }
    check_dir(dir)?;
    let holders_dir = dir.join("holders");
    if root && !holders_dir.exists() {
        std::fs::create_dir(&holders_dir)
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| Error::io(format!("create {}", holders_dir.display()), e))?;
        let _ = std::fs::set_permissions(&holders_dir, std::fs::Permissions::from_mode(0o755));
    }
    let mut wanted: Vec<(String, bool)> = Vec::new();
    if let Some(h) = a.want.machine {
        wanted.push(("machine.lock".into(), h == Hold::Exclusive));
    }
    for s in &a.want.sysctls {
        wanted.push((lock_name(s), true));
    }
    let mut files = Vec::new();
    for (name, _) in &wanted {
        let f = open_lock(dir, name).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Privilege(format!(
                    "cannot take the machine lease: {} has no {name} yet and this user may \
                     not create it (run once as root, or as the owner of {})",
                    dir.display(),
                    dir.display()
                ))
            } else {
                Error::io(format!("open {}", dir.join(name).display()), e)
            }
        })?;
        files.push(f);
    }
    let t0 = Instant::now();
    loop {
        // All or nothing: a partial set is released before waiting, so two waiting runs
        // never hold one lock each while wanting the other's.
        let mut got = 0;
        for (f, (_, ex)) in files.iter().zip(&wanted) {
            match try_flock(f, *ex) {
                Ok(true) => got += 1,
                Ok(false) => break,
                Err(e) => return Err(Error::io(format!("flock {}", dir.display()), e)),
            }
        }
        if got == files.len() {
            break;
        }
        for f in &files[..got] {
            // SAFETY: unlock an fd we own.
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        }
        let waited_out = a.wait.is_none_or(|w| t0.elapsed() >= w);
        if waited_out {
            let live: Vec<String> = holders(dir, a.roots)
                .into_iter()
                .filter(|(h, live)| *live && h.pid != std::process::id() as i32)
                .map(|(h, _)| format!("  {}", h.describe()))
                .collect();
            let who = if live.is_empty() {
                "  (a process that left no record: an unprivileged run, or one starting)"
                    .to_string()
            } else {
                live.join("\n")
            };
            return Err(Error::Busy(format!(
                "another schedkit run holds what this run needs{}:\n{who}\nwait for it to \
                 end, or pass --wait to queue behind it",
                a.wait
                    .map(|w| format!(" (waited {:.1} s)", w.as_secs_f64()))
                    .unwrap_or_default()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The record, written whole (temporary file, then rename) so a reader never sees half.
    let me = std::process::id() as i32;
    let record = if holders_dir.is_dir() {
        let h = Holder {
            pid: me,
            starttime: starttime_of(a.roots, me).unwrap_or(0),
            machine: a.want.machine,
            sysctls: a.want.sysctls.clone(),
            command: a.command,
            journal: a.journal,
            since: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let path = holders_dir.join(format!("{me}.json"));
        let tmp = holders_dir.join(format!(".{me}.json.tmp"));
        let text = serde_json::to_string(&h).expect("holder serialises");
        match std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &path)) {
            Ok(()) => Some(path),
            Err(_) => {
                let _ = std::fs::remove_file(&tmp);
                None
            }
        }
    } else {
        None
    };
    Ok(Lease {
        _locks: files,
        record,
        dir: Some(dir.to_path_buf()),
        warning: None,
    })
}
