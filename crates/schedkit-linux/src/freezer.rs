//! Stopping and resuming all of a job's threads at once, for gang scheduling (seed 002).
//!
//! Three mechanisms, detected (never assumed) in this order:
//!
//! | backend | what it stops | how | found where |
//! |---|---|---|---|
//! | cgroup v2 | whole processes (and everything they fork) | `cgroup.freeze` = 1/0 | a `cgroup2` mount whose child cgroups have `cgroup.freeze` (Linux >= 5.2) |
//! | cgroup v1 freezer | processes *or single threads* (v1 `tasks` takes TIDs) | `freezer.state` = FROZEN/THAWED | a `cgroup` mount with the `freezer` option |
//! | signals | whole processes | SIGSTOP / SIGCONT | always |
//!
//! Jobs that are commands (separate processes) use the first that works. The built-in
//! workloads of `schedkit run` are threads of schedkit itself: v2 can only freeze whole
//! processes (schedkit would freeze itself) and SIGSTOP stops every thread of a process, so
//! they need the v1 freezer; without it the freezer says so rather than pretending.
//!
//! Each job gets a cgroup `schedkit-<pid>/job-<n>` under the backend's mount. The cgroups are
//! created unjournaled (an empty cgroup is inert) and removed by [`Freezer::cleanup`] after the
//! run; a later run removes empty ones whose owner died. What *is* journaled, through the
//! run's [`Journal`] and before the first freeze of each job, is the thawed value of the job's
//! freeze file (or, for signals, a `Stopped` entry per process): so the run's undo, its Drop,
//! or `schedkit restore` after a SIGKILL thaws every job. One entry covers every later freeze
//! of the job, because undo writes the thawed value whatever the state.
//!
//! The cgroup v2 freezer completes asynchronously (`cgroup.events` says `frozen 1` when every
//! task stopped); the switch time schedkit reports is the time of the writes, not that
//! completion.

use crate::journal::{Entry, Journal};
use crate::{procfs, Error, Result, Roots};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How a job is stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// cgroup v2 `cgroup.freeze` under this mount.
    V2(PathBuf),
    /// cgroup v1 freezer under this mount.
    V1(PathBuf),
    /// SIGSTOP / SIGCONT.
    Signal,
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::V2(_) => "cgroup v2 freezer",
            Backend::V1(_) => "cgroup v1 freezer",
            Backend::Signal => "SIGSTOP/SIGCONT",
        }
    }
    fn mount(&self) -> Option<&Path> {
        match self {
            Backend::V2(p) | Backend::V1(p) => Some(p),
            Backend::Signal => None,
        }
    }
    fn values(&self) -> (&'static str, &'static str, &'static str) {
        // (freeze file, frozen value, thawed value)
        match self {
            Backend::V2(_) => ("cgroup.freeze", "1", "0"),
            _ => ("freezer.state", "FROZEN", "THAWED"),
        }
    }
}

/// What joins a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Member {
    /// A whole process (and its future children).
    Process(i32),
    /// One thread (needs the v1 freezer).
    Thread(i32),
}

/// The cgroup mounts of this machine, from `/proc/self/mountinfo`: (v2 mount, v1 freezer).
pub fn mounts(roots: &Roots) -> (Option<PathBuf>, Option<PathBuf>) {
    let text = std::fs::read_to_string(roots.proc.join("self/mountinfo")).unwrap_or_default();
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        // id parent major:minor root mountpoint options ... - fstype source superoptions
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mp = left.split_whitespace().nth(4).map(PathBuf::from);
        let mut r = right.split_whitespace();
        let fstype = r.next().unwrap_or("");
        let superopts = r.nth(1).unwrap_or("");
        match fstype {
            "cgroup2" if v2.is_none() => v2 = mp,
            "cgroup" if v1.is_none() && superopts.split(',').any(|o| o == "freezer") => v1 = mp,
            _ => {}
        }
    }
    (v2, v1)
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// Removes the empty cgroups that runs which no longer exist left under `mount`:
/// `schedkit-<pid>` (with its empty children) and `schedkit-probe-<pid>` (a capability
/// probe that a kill between its mkdir and rmdir would leave). Neither is journaled: each
/// lives for microseconds or holds only job cgroups that the journal covers. A cgroup that
/// still holds processes refuses `rmdir`, so a live job is never touched. Returns what it
/// removed.
pub(crate) fn sweep_stale(mount: &Path) -> Vec<std::path::PathBuf> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(mount) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("schedkit-")
            .map(|p| p.strip_prefix("probe-").unwrap_or(p))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if alive(pid) || !e.path().is_dir() {
            continue;
        }
        if let Ok(jobs) = std::fs::read_dir(e.path()) {
            for j in jobs.flatten().filter(|j| j.path().is_dir()) {
                if std::fs::remove_dir(j.path()).is_ok() {
                    removed.push(j.path());
                }
            }
        }
        if std::fs::remove_dir(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// A cgroup this run created, with its freeze file.
fn create_probe(backend: &Backend, base: &Path) -> bool {
    let (file, ..) = backend.values();
    if std::fs::create_dir_all(base).is_err() {
        return false;
    }
    // The v2 root cgroup has no cgroup.freeze; a child does on kernels >= 5.2.
    let probe = base.join("probe");
    let ok = std::fs::create_dir(&probe).is_ok() && probe.join(file).exists();
    let _ = std::fs::remove_dir(&probe);
    if !ok {
        let _ = std::fs::remove_dir(base);
    }
    ok
}

struct Job {
    dir: Option<PathBuf>,
    backend: Backend,
    members: BTreeSet<Member>,
    journaled: bool,
    frozen: bool,
    /// The job's own containment cgroup (`cmd-<n>`, see [`crate::jobcg`]) frozen in place:
    /// its members are never moved, and the directory is not this freezer's to remove.
    in_place: bool,
}

/// The freezer of one run.
pub struct Freezer {
    roots: Roots,
    /// For processes.
    process: Backend,
    /// For single threads (v1 only).
    thread: Option<Backend>,
    jobs: BTreeMap<usize, Job>,
}

impl Freezer {
    /// Detects what this machine offers (creating `schedkit-<pid>` cgroups to probe them).
    pub fn detect(roots: &Roots) -> Freezer {
        let (v2, v1) = mounts(roots);
        let me = std::process::id();
        let usable = |b: Backend| -> Option<Backend> {
            let m = b.mount()?.to_path_buf();
            let _ = sweep_stale(&m);
            create_probe(&b, &m.join(format!("schedkit-{me}"))).then_some(b)
        };
        let v2 = v2.and_then(|m| usable(Backend::V2(m)));
        let v1 = v1.and_then(|m| usable(Backend::V1(m)));
        Freezer {
            roots: roots.clone(),
            process: v2.clone().or_else(|| v1.clone()).unwrap_or(Backend::Signal),
            thread: v1,
            jobs: BTreeMap::new(),
        }
    }

    /// A freezer with chosen backends (tests).
    pub fn with_backends(roots: &Roots, process: Backend, thread: Option<Backend>) -> Freezer {
        Freezer {
            roots: roots.clone(),
            process,
            thread,
            jobs: BTreeMap::new(),
        }
    }

    pub fn process_backend(&self) -> &Backend {
        &self.process
    }
    pub fn thread_backend(&self) -> Option<&Backend> {
        self.thread.as_ref()
    }

    /// The backend of a job (after its first member joined).
    pub fn backend_of(&self, job: usize) -> Option<&Backend> {
        self.jobs.get(&job).map(|j| &j.backend)
    }

    /// Freezes command job `job` in its own job cgroup `dir` (`cmd-<n>` of [`crate::jobcg`])
    /// instead of a `job-<n>` of the freezer's, where the process backend is cgroup v2 and
    /// `dir` is on its hierarchy. Returns whether it did. Called before the job's first
    /// [`Freezer::add`].
    ///
    /// Why: moving a job's process into `job-<n>` takes only that process. A child it forked
    /// earlier stays in `cmd-<n>`, runs on while its job is "frozen" (and outlives the
    /// owner's SIGKILL unfrozen), and the move changes the task count the sampler reads to
    /// decide whether anything new started in `cmd-<n>`, so such a child could go unseen
    /// for the whole run. `cmd-<n>` holds the job's whole tree from its first instruction.
    pub fn use_job_cgroup(&mut self, job: usize, dir: &Path) -> bool {
        let Backend::V2(mount) = &self.process else {
            return false;
        };
        if self.jobs.contains_key(&job) || !dir.starts_with(mount) {
            return false;
        }
        if !dir.join("cgroup.freeze").exists() {
            return false;
        }
        self.jobs.insert(
            job,
            Job {
                dir: Some(dir.to_path_buf()),
                backend: self.process.clone(),
                members: BTreeSet::new(),
                journaled: false,
                frozen: false,
                in_place: true,
            },
        );
        true
    }

    /// Adds a process or thread to job `job` (idempotent). A member joining a frozen job is
    /// frozen at once.
    pub fn add(&mut self, journal: &mut Journal, job: usize, m: Member) -> Result<()> {
        if self.jobs.get(&job).is_some_and(|j| j.members.contains(&m)) {
            return Ok(());
        }
        let backend = match m {
            Member::Process(_) => self.process.clone(),
            Member::Thread(_) => self.thread.clone().ok_or_else(|| {
                Error::Input(
                    "gang: the built-in workloads are threads of schedkit, and freezing single \
                     threads needs the cgroup v1 freezer, which this machine lacks; run the jobs \
                     as commands (`command = [...]`)"
                        .into(),
                )
            })?,
        };
        if let Some(j) = self.jobs.get(&job) {
            if j.backend != backend {
                return Err(Error::Input(format!(
                    "gang: job {job} mixes processes and built-in threads"
                )));
            }
        } else {
            let dir = backend.mount().map(|m| {
                m.join(format!("schedkit-{}", std::process::id()))
                    .join(format!("job-{job}"))
            });
            if let Some(d) = &dir {
                if !d.exists() {
                    std::fs::create_dir_all(d)
                        .map_err(|e| Error::io(format!("mkdir {}", d.display()), e))?;
                }
            }
            self.jobs.insert(
                job,
                Job {
                    dir,
                    backend: backend.clone(),
                    members: BTreeSet::new(),
                    journaled: false,
                    frozen: false,
                    in_place: false,
                },
            );
        }
        let j = self.jobs.get_mut(&job).expect("inserted");
        match (&j.dir, m) {
            // Already inside, with everything it forked.
            (Some(_), Member::Process(_)) if j.in_place => {}
            (Some(d), Member::Process(pid)) => write(&d.join("cgroup.procs"), &pid.to_string())?,
            (Some(d), Member::Thread(tid)) => write(&d.join("tasks"), &tid.to_string())?,
            (None, Member::Process(pid)) => {
                if j.frozen {
                    stop_pid(&self.roots, journal, pid)?;
                }
            }
            (None, Member::Thread(_)) => unreachable!("threads only join v1 cgroups"),
        }
        j.members.insert(m);
        Ok(())
    }

    /// Stops every member of `job`, journaling first.
    pub fn freeze(&mut self, journal: &mut Journal, job: usize) -> Result<()> {
        let Some(j) = self.jobs.get_mut(&job) else {
            return Ok(());
        };
        match &j.dir {
            Some(d) => {
                let (file, frozen, thawed) = j.backend.values();
                let path = d.join(file);
                if !j.journaled {
                    journal.record(Entry::File {
                        path: path.clone(),
                        old: thawed.into(),
                    })?;
                    j.journaled = true;
                }
                write(&path, frozen)?;
            }
            None => {
                for m in &j.members {
                    if let Member::Process(pid) = *m {
                        stop_pid(&self.roots, journal, pid)?;
                    }
                }
            }
        }
        j.frozen = true;
        Ok(())
    }

    /// Resumes every member of `job`.
    pub fn thaw(&mut self, job: usize) -> Result<()> {
        let Some(j) = self.jobs.get_mut(&job) else {
            return Ok(());
        };
        match &j.dir {
            Some(d) => {
                let (file, _, thawed) = j.backend.values();
                write(&d.join(file), thawed)?;
            }
            None => {
                for m in &j.members {
                    if let Member::Process(pid) = *m {
                        // SAFETY: kill has no memory preconditions.
                        unsafe { libc::kill(pid, libc::SIGCONT) };
                    }
                }
            }
        }
        j.frozen = false;
        Ok(())
    }

    /// Whether `job` is frozen as far as the kernel says (cgroups) or we did (signals).
    pub fn is_frozen(&self, job: usize) -> bool {
        let Some(j) = self.jobs.get(&job) else {
            return false;
        };
        match (&j.backend, &j.dir) {
            (Backend::V2(_), Some(d)) => {
                crate::read_trim(&d.join("cgroup.freeze")).is_ok_and(|v| v == "1")
            }
            (Backend::V1(_), Some(d)) => {
                crate::read_trim(&d.join("freezer.state")).is_ok_and(|v| v != "THAWED")
            }
            _ => j.frozen,
        }
    }

    /// Thaws every job (before terminating commands: a frozen process cannot handle SIGTERM).
    pub fn thaw_all(&mut self) {
        let jobs: Vec<usize> = self.jobs.keys().copied().collect();
        for j in jobs {
            let _ = self.thaw(j);
        }
    }

    /// Removes the cgroups this run created (after its processes ended and the journal was
    /// undone). A cgroup that still holds a process stays (it is thawed).
    pub fn cleanup(&mut self) {
        let mut bases = BTreeSet::new();
        for j in self.jobs.values().filter(|j| !j.in_place) {
            if let Some(d) = &j.dir {
                let _ = std::fs::remove_dir(d);
                if let Some(b) = d.parent() {
                    bases.insert(b.to_path_buf());
                }
            }
        }
        for b in [
            &self.process,
            self.thread.as_ref().unwrap_or(&Backend::Signal),
        ] {
            if let Some(m) = b.mount() {
                bases.insert(m.join(format!("schedkit-{}", std::process::id())));
            }
        }
        for b in bases {
            let _ = std::fs::remove_dir(b);
        }
        self.jobs.clear();
    }
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// SIGSTOP with a `Stopped` journal entry first (one per call: the signal backend is the
/// fallback of last resort, and its entries are small).
fn stop_pid(roots: &Roots, journal: &mut Journal, pid: i32) -> Result<()> {
    let stat = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("stat"))
        .ok()
        .and_then(|s| procfs::parse_stat(&s));
    let Some(stat) = stat else {
        return Ok(()); // already gone
    };
    journal.record(Entry::Stopped {
        pid,
        starttime: stat.starttime,
    })?;
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    Ok(())
}
