//! Job containment: every command a run starts lives in a cgroup of the run's, so that the
//! run's end, a signal, or `schedkit restore` after `kill -9` ends the job's whole process
//! tree, children that double-forked and left the process group included, and removes every
//! directory schedkit created.
//!
//! ## Where
//!
//! `<mount>/schedkit-<pid>/cmd-<n>`, one child per command, in the first of:
//! 1. the cgroup v2 hierarchy, when it has `cgroup.kill` (Linux >= 5.14): one write kills
//!    the whole subtree, atomically with respect to forks;
//! 2. a cgroup v1 hierarchy no other part of schedkit moves processes in (`pids`, else the
//!    named `systemd` one): the job is ended by SIGKILL to every member until none is left
//!    (a child forked meanwhile is born inside, so the loop converges).
//!
//! The v2 base is the same `schedkit-<pid>` directory under which the gang freezer and the
//! v2 cpu-weight groups put their own children, so a job they moved is still inside the
//! subtree that `cgroup.kill` ends. (On v1 each controller is its own hierarchy, so moving a
//! job in the `cpu` or `freezer` hierarchy leaves it where it is here.)
//!
//! ## Journal
//!
//! [`crate::journal::Entry::Job`] is recorded (and fsynced) *before* the base directory is
//! created, so a kill at any instant leaves a journal that names it. Undo ends every
//! process in the subtree first (before any other entry of the journal is undone, so a job
//! is never left running with its placement taken back) and removes the directories last.
//!
//! Built-in workloads are threads of schedkit itself and need none of this: they end with
//! it. A run started with `--keep-running` creates no job cgroup, and its command outlives it.
//!
//! Rejected: process groups alone (a daemonising child calls `setsid` and escapes; today's
//! `terminate` still signals the group first, for a clean SIGTERM), and `PR_SET_CHILD_SUBREAPER`
//! (orphans are re-parented to schedkit, but a SIGKILL of schedkit re-parents them to init).

use crate::{Error, Result, Roots};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a hierarchy ends its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// `cgroup.kill` (cgroup v2).
    V2,
    /// SIGKILL to each pid of `cgroup.procs`, until empty (cgroup v1).
    V1,
}

/// A cgroup mount from `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub path: PathBuf,
    /// `cgroup2`, or `cgroup` (v1).
    pub v2: bool,
    /// The v1 super options (`cpu`, `freezer`, `name=systemd`, ...).
    pub options: Vec<String>,
}

/// Every cgroup (v1 and v2) mount of this machine, in mountinfo order.
pub fn mounts(roots: &Roots) -> Vec<Mount> {
    let text = std::fs::read_to_string(roots.proc.join("self/mountinfo")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            // id parent major:minor root mountpoint options ... - fstype source superoptions
            let (left, right) = line.split_once(" - ")?;
            let path = PathBuf::from(left.split_whitespace().nth(4)?);
            let mut r = right.split_whitespace();
            let fstype = r.next()?;
            let superopts = r.nth(1).unwrap_or("");
            match fstype {
                "cgroup2" | "cgroup" => Some(Mount {
                    path,
                    v2: fstype == "cgroup2",
                    options: superopts.split(',').map(str::to_string).collect(),
                }),
                _ => None,
            }
        })
        .collect()
}

/// Where this machine keeps job cgroups: a mount and how it kills, or `None` (then a job's
/// escaped descendants can outlive a killed run; the engine warns).
pub fn detect(roots: &Roots) -> Option<(PathBuf, Kill)> {
    let ms = mounts(roots);
    if let Some(m) = ms.iter().find(|m| m.v2) {
        // The root cgroup has no cgroup.kill; its children do when the kernel has it. Read
        // it off a child of ours rather than guess from the version.
        if kernel_has_cgroup_kill(&m.path) {
            return Some((m.path.clone(), Kill::V2));
        }
    }
    for want in ["pids", "name=systemd"] {
        if let Some(m) = ms
            .iter()
            .find(|m| !m.v2 && m.options.iter().any(|o| o == want))
        {
            return Some((m.path.clone(), Kill::V1));
        }
    }
    None
}

fn kernel_has_cgroup_kill(mount: &Path) -> bool {
    // Any existing child cgroup tells (cgroup.kill exists in every non-root cgroup).
    if let Ok(rd) = std::fs::read_dir(mount) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                return e.path().join("cgroup.kill").exists();
            }
        }
    }
    // No child to look at: make one.
    let probe = mount.join(format!("schedkit-probe-{}", std::process::id()));
    let ok = std::fs::create_dir(&probe).is_ok() && probe.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&probe);
    ok
}

/// The job cgroups of one run.
pub struct JobCgroups {
    base: PathBuf,
    kill: Kill,
    next: usize,
}

impl JobCgroups {
    /// Journals and creates `<mount>/schedkit-<pid>` (it may exist already: the gang
    /// freezer and the v2 cpu groups use the same base).
    pub fn create(
        journal: &mut crate::journal::Journal,
        mount: &Path,
        kill: Kill,
    ) -> Result<JobCgroups> {
        let base = mount.join(format!("schedkit-{}", std::process::id()));
        journal.record(crate::journal::Entry::Job {
            path: base.clone(),
            v2: kill == Kill::V2,
        })?;
        match std::fs::create_dir(&base) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("mkdir {}", base.display()), e)),
        }
        Ok(JobCgroups {
            base,
            kill,
            next: 0,
        })
    }

    pub fn base(&self) -> &Path {
        &self.base
    }

    /// A new `cmd-<n>` cgroup, and on cgroup v2 an open descriptor of it for
    /// [`crate::spawn::fork_gated`] to create the child inside; without one (v1, or the
    /// kernel refused), move the child with [`JobCgroups::attach`] before releasing it.
    pub fn next_dir(&mut self) -> Result<(PathBuf, Option<std::fs::File>)> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = self.base.join(format!("cmd-{}", self.next));
        self.next += 1;
        std::fs::create_dir(&dir).map_err(|e| Error::io(format!("mkdir {}", dir.display()), e))?;
        let fd = (self.kill == Kill::V2)
            .then(|| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECTORY)
                    .open(&dir)
                    .ok()
            })
            .flatten();
        Ok((dir, fd))
    }

    /// Moves `pid` into `dir` (one of [`JobCgroups::next_dir`]'s).
    pub fn attach(&self, dir: &Path, pid: i32) -> Result<()> {
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| Error::io(format!("move {pid} into {}", dir.display()), e))
    }

    /// Every process still in the run's job cgroups.
    pub fn members(&self) -> Vec<i32> {
        members(&self.base)
    }

    /// SIGTERM to every member, then (after `grace`, or at once when none is left) ends the
    /// rest. Returns how many processes were still there for the SIGKILL.
    pub fn terminate(&self, grace: Duration) -> usize {
        for pid in members(&self.base) {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let t0 = Instant::now();
        while t0.elapsed() < grace && !members(&self.base).is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let left = members(&self.base).len();
        if left > 0 {
            kill_tree(&self.base, self.kill == Kill::V2);
        }
        left
    }
}

/// The file that counts the tasks (threads) of job cgroup `dir`, for the sampler: v1's
/// `pids.current` (the whole subtree), else v2's `cgroup.threads` (the TIDs of this cgroup,
/// one a line; v2 counts tasks in `pids.current` only where the pids controller is enabled,
/// and on a machine whose pids controller is bound to v1 it is not). While the count equals
/// the threads the sampler tracks, nothing new was started and it looks for nothing: a
/// job of a thousand threads whose wake-ups each made it read a `children` file cost the
/// sampler more than its samples.
pub fn task_counter(dir: &Path) -> Option<PathBuf> {
    ["pids.current", "cgroup.threads"]
        .iter()
        .map(|f| dir.join(f))
        .find(|f| f.exists())
}

/// A [`task_counter`] file kept open and read again with `pread` at offset 0 each sample
/// (the kernel starts its listing again there): opening it by path every sample (a path
/// walk through cgroupfs and a new seq_file) was about a third of reading it, and reading it
/// was 13 % of schedkit's CPU with a job of 1,000 threads (docs/results/run-cost.md). The
/// buffer is kept too: no allocation per sample.
#[derive(Debug)]
pub struct TaskCount {
    path: PathBuf,
    file: Option<std::fs::File>,
    buf: Vec<u8>,
}

impl TaskCount {
    pub fn new(path: PathBuf) -> TaskCount {
        TaskCount {
            path,
            file: None,
            buf: vec![0; 16 << 10],
        }
    }

    /// The count now; `None` when the file cannot be read (the cgroup is gone).
    pub fn count(&mut self) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let f = self.file.as_ref()?;
        // Whole text: a listing longer than the buffer is read on at its offset; the buffer
        // grows to the longest listing seen, so the next sample reads it in one call.
        let mut n = 0;
        loop {
            if n == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match f.read_at(&mut self.buf[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(_) => {
                    self.file = None;
                    return None;
                }
            }
        }
        let text = &self.buf[..n];
        if self.path.ends_with("cgroup.threads") {
            Some(
                text.split(|&b| b == b'\n')
                    .filter(|l| !l.trim_ascii().is_empty())
                    .count(),
            )
        } else {
            std::str::from_utf8(text).ok()?.trim().parse().ok()
        }
    }
}

/// The pids in `dir` and every cgroup below it.
pub fn members(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    out
}

/// Sends the end to every process in the subtree at `dir` (does not wait).
pub fn kill_tree(dir: &Path, v2: bool) {
    if v2 && std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in members(dir) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Undo of [`crate::journal::Entry::Job`], second half: waits (up to `timeout`) for the
/// subtree to empty, signalling again as it goes (a v1 job can fork between passes), and
/// removes its directories, deepest first. `Ok(false)` when the base was already gone.
pub fn reap(dir: &Path, v2: bool, timeout: Duration) -> std::result::Result<bool, String> {
    if !dir.exists() {
        return Ok(false);
    }
    let t0 = Instant::now();
    loop {
        let left = members(dir);
        if left.is_empty() {
            break;
        }
        if t0.elapsed() >= timeout {
            return Err(format!(
                "{}: {} process(es) still alive after SIGKILL ({}); a frozen v1 job dies once \
                 thawed",
                dir.display(),
                left.len(),
                left.iter()
                    .take(8)
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        kill_tree(dir, v2);
        std::thread::sleep(Duration::from_millis(10));
    }
    // Deepest first.
    let mut dirs = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        dirs.push(d);
    }
    for d in dirs.iter().rev() {
        // An emptied cgroup can stay busy for a moment while its last task is released.
        let mut tries = 0;
        loop {
            match std::fs::remove_dir(d) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(format!("rmdir {}: {e}", d.display())),
            }
        }
    }
    Ok(true)
}

/// Removes `<mount>/schedkit-<pid>` under every cgroup mount where it is empty of processes
/// (deepest first; a directory still holding a process stays). For the leftovers of a dead
/// run `pid`; returns how many directories were removed.
pub fn remove_empty_run_dirs(roots: &Roots, pid: i32) -> usize {
    let mut removed = 0;
    for m in mounts(roots) {
        let base = m.path.join(format!("schedkit-{pid}"));
        if !base.is_dir() || !members(&base).is_empty() {
            continue;
        }
        let mut dirs = Vec::new();
        let mut stack = vec![base];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            if std::fs::remove_dir(d).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}
