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
                },
            );
        }
        let j = self.jobs.get_mut(&job).expect("inserted");
        match (&j.dir, m) {
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
        for j in self.jobs.values() {
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

// ---------------------------------------------------------------------------------------------
// The gang hook of `schedkit run`

use crate::affinity::{self, CpuSet};
use schedkit_core::control::{Action, Controller, Snapshot, ThreadView};
use schedkit_core::controllers::gang::Gang;
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use serde::Serialize;
use std::time::Instant;

/// One job thread as the run engine knows it.
#[derive(Clone, Copy, Debug)]
pub struct RunThread {
    pub process: usize,
    /// Its number within the process (see `ThreadView::index`).
    pub index: usize,
    pub pid: i32,
    pub tid: i32,
    /// A built-in workload thread (inside schedkit) rather than a command's.
    pub builtin: bool,
    pub alive: bool,
}

/// What gang scheduling did in one real run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GangRunReport {
    pub backend_processes: String,
    pub backend_threads: Option<String>,
    /// Slot switches applied (each: stop the old slot + resume the new one).
    pub switches: u64,
    /// Microseconds per switch (stop all + resume all): median, 90th percentile, max.
    pub switch_us_median: f64,
    pub switch_us_p90: f64,
    pub switch_us_max: f64,
}

/// Applies the gang controller's actions to real threads: `Migrate` with
/// `sched_setaffinity`, `Stop`/`Resume` with the [`Freezer`].
pub struct GangRun {
    ctl: Gang,
    freezer: Freezer,
    /// Matrix column -> CPU: the CPUs schedkit may use (so `taskset -c 0,1 schedkit run`
    /// gangs on two CPUs of a larger machine).
    cpus: Vec<usize>,
    /// Warnings from setting up (the engine passes them on; nothing here prints).
    pub start_warnings: Vec<String>,
    /// Actions the controller pushed that this engine does not apply (a broken `emits`).
    pub refused: Vec<String>,
    switch_ns: Vec<u64>,
    /// The engine thread's class before the run (it runs SCHED_FIFO while it gangs).
    old_class: Option<crate::sched::Policy>,
}

impl GangRun {
    pub fn new(roots: &Roots, quantum: Nanos) -> GangRun {
        let cpus: Vec<usize> = affinity::get_thread(0)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let cpus = if cpus.is_empty() { vec![0] } else { cpus };
        // The engine thread switches the slots: like SCore-D's daemon it must not queue
        // behind the job threads it stops, or every switch waits for a CFS slice. SCHED_FIFO
        // 10 where allowed (the job threads are set back to SCHED_OTHER by their setup).
        let old_class = crate::sched::get_thread(0).ok();
        let mut start_warnings = Vec::new();
        if crate::sched::set_thread(0, crate::sched::Policy::Fifo { priority: 10 }).is_err() {
            start_warnings.push("gang: the engine thread stays SCHED_OTHER (no CAP_SYS_NICE); slot switches may be late under load".to_string());
        }
        GangRun {
            ctl: Gang::new(quantum, cpus.len()),
            freezer: Freezer::detect(roots),
            cpus,
            start_warnings,
            refused: Vec::new(),
            switch_ns: Vec::new(),
            old_class,
        }
    }

    /// How long until the controller wants to act again.
    pub fn period(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.ctl.period().0)
    }

    /// One controller tick at `now` over the live job threads.
    pub fn tick(
        &mut self,
        now: Nanos,
        scenario: &Scenario,
        threads: &[RunThread],
        journal: &mut Journal,
    ) -> Result<()> {
        let live: Vec<&RunThread> = threads.iter().filter(|t| t.alive).collect();
        for t in &live {
            let m = if t.builtin {
                Member::Thread(t.tid)
            } else {
                Member::Process(t.pid)
            };
            match self.freezer.add(journal, t.process, m) {
                Ok(()) => {}
                // The thread or process ended since the sample.
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
        }
        let mut views: Vec<ThreadView> = live
            .iter()
            .map(|t| ThreadView {
                id: t.tid as u64,
                process: t.process,
                index: t.index,
                group: None,
                core: None,
                weight: 1024,
                base_weight: 1024,
                runnable: true,
                cpu: Nanos::ZERO,
            })
            .collect();
        views.sort_unstable_by_key(ThreadView::key);
        let mut actions = Vec::new();
        self.ctl.tick(
            &Snapshot {
                now,
                cores: self.cpus.len(),
                threads: &views,
                group_weights: &[],
                scenario,
            },
            &mut actions,
        );
        let mut t0: Option<Instant> = None;
        for a in actions {
            match a {
                Action::Migrate { thread, core } => {
                    let cpu = self.cpus[core % self.cpus.len()];
                    // Journaled like every other change, so `restore` after a kill puts the
                    // thread's own affinity back.
                    let Some(t) = live.iter().find(|t| t.tid as u64 == thread) else {
                        continue;
                    };
                    match journal.set_affinity(t.pid, t.tid, &CpuSet::single(cpu)) {
                        Ok(()) => {}
                        // The thread ended since the sample.
                        Err(e) if e.errno() == Some(libc::ESRCH) => {}
                        Err(crate::Error::Input(_)) => {}
                        Err(e) => self.refused.push(format!(
                            "gang: thread {} not pinned to CPU {cpu}: {e}",
                            t.tid
                        )),
                    }
                }
                Action::Stop { process } => {
                    t0.get_or_insert_with(Instant::now);
                    self.freezer.freeze(journal, process)?;
                }
                Action::Resume { process } => {
                    t0.get_or_insert_with(Instant::now);
                    self.freezer.thaw(process)?;
                }
                // The gang controller declares only Migrate/Stop/Resume (`emits`); anything
                // else breaks that contract and is refused aloud, never dropped.
                other => self
                    .refused
                    .push(format!("{}: refused {other:?}", self.ctl.name())),
            }
        }
        if let Some(t0) = t0 {
            self.switch_ns.push(t0.elapsed().as_nanos() as u64);
        }
        Ok(())
    }

    /// Thaws everything (wind-down).
    pub fn thaw_all(&mut self) {
        self.freezer.thaw_all();
    }

    /// Removes the cgroups and summarises the switches.
    pub fn finish(mut self) -> GangRunReport {
        if let Some(c) = self.old_class {
            let _ = crate::sched::set_thread(0, c);
        }
        self.freezer.thaw_all();
        self.freezer.cleanup();
        let v = std::mem::take(&mut self.switch_ns);
        // The nearest-rank percentile every report uses (0 when nothing switched).
        let q = |f: f64| -> f64 {
            schedkit_core::stats::percentile(&v, f * 100.0).map_or(0.0, |ns| ns as f64 / 1e3)
        };
        GangRunReport {
            backend_processes: self.freezer.process_backend().name().into(),
            backend_threads: self.freezer.thread_backend().map(|b| b.name().into()),
            switches: v.len() as u64,
            switch_us_median: q(0.5),
            switch_us_p90: q(0.9),
            switch_us_max: q(1.0),
        }
    }
}
