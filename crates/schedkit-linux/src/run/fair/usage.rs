//! Each scenario process's CPU time from the kernel's own per-cgroup accounting.
//!
//! The share trim compares what each entity got in a period with its GPS share, so its input
//! must be exact, and the report's shares of a fair-share run are of the same count. Summing the sampler's per-thread readings is not: a command that forks
//! hundreds of short-lived or blocking tasks (hackbench: 400) has tasks the sampler has not
//! found yet, tasks read only every few samples while they look idle, and tasks that ended
//! between two samples with CPU time nobody read. The kernel counts every task of a cgroup,
//! ended ones included, so the trim and the report read the cgroup instead. Every process of
//! a `process-fair` or `tenants` run has a cpu cgroup that holds it alone (a tenant of one
//! process is that process's), so the count is per process:
//!
//! - cgroup v2: the process's cpu cgroup's `cpu.stat` (`usage_usec`);
//! - cgroup v1 with `cpuacct` mounted beside `cpu` (`cpu,cpuacct`): the cpu cgroup's
//!   `cpuacct.usage` (ns);
//! - cgroup v1 with `cpuacct` on its own mount (this project's test machine): one cpuacct
//!   cgroup per process, `<cpuacct mount>/schedkit-<pid>/<n>`, that the process's commands
//!   join when they join their cpu cgroup (before they are released, so all they fork is
//!   born inside) and built-in threads one by one. Journaled as the cpu cgroups are
//!   ([`Entry::Cgroup`](crate::journal::Entry::Cgroup), before each mkdir): undo moves the
//!   tasks back and removes the directories.
//!
//! Where none of these is available the trim and the report fall back to the sampler's sums
//! (and the run says so: its warnings, and each report row's `cpu_source`).

use crate::cgroup::{CpuController, CpuGroups};
use crate::journal::{Entry, Journal};
use crate::{Error, Result, Roots};
use std::path::{Path, PathBuf};

/// Where the processes' CPU time is read (index = scenario process).
pub(super) enum Usage {
    /// `cpu.stat` `usage_usec` of each process's cgroup (v2).
    V2Stat(Vec<PathBuf>),
    /// `cpuacct.usage` (ns) of each process's cgroup, co-mounted with cpu (v1).
    CoMounted(Vec<PathBuf>),
    /// Our own cpuacct cgroups, one per process (v1, cpuacct mounted alone).
    Own(Vec<PathBuf>),
}

impl Usage {
    /// The accounting for the processes whose cpu cgroups are `process_cgroups` (indices
    /// into `cg.groups()`, one process alone in each); `Ok(None)` when this machine has none.
    pub(super) fn new(
        roots: &Roots,
        journal: &mut Journal,
        cg: &CpuGroups,
        process_cgroups: &[usize],
    ) -> Result<Option<Usage>> {
        let dirs = || -> Vec<PathBuf> {
            process_cgroups
                .iter()
                .map(|&i| cg.groups()[i].path.clone())
                .collect()
        };
        if let CpuController::V2(_) = cg.controller() {
            return Ok(Some(Usage::V2Stat(
                dirs().into_iter().map(|d| d.join("cpu.stat")).collect(),
            )));
        }
        if cg.parent().join("cpuacct.usage").exists() {
            return Ok(Some(Usage::CoMounted(
                dirs()
                    .into_iter()
                    .map(|d| d.join("cpuacct.usage"))
                    .collect(),
            )));
        }
        let Some(mount) = crate::jobcg::mounts(roots)
            .into_iter()
            .find(|m| !m.v2 && m.options.iter().any(|o| o == "cpuacct"))
        else {
            return Ok(None);
        };
        let me = std::process::id() as i32;
        let back = own_cpuacct_cgroup(roots, me)
            .map(|rel| mount.path.join(rel.strip_prefix("/").unwrap_or(&rel)))
            .unwrap_or_else(|| mount.path.clone());
        let parent = mount.path.join(format!("schedkit-{me}"));
        let mkdir = |journal: &mut Journal, path: &Path| -> Result<()> {
            journal.record(Entry::Cgroup {
                path: path.into(),
                tasks_file: "tasks".into(),
                back: back.clone(),
            })?;
            std::fs::create_dir(path).map_err(|e| Error::io(format!("mkdir {}", path.display()), e))
        };
        mkdir(journal, &parent)?;
        let mut out = Vec::new();
        for e in 0..process_cgroups.len() {
            let d = parent.join(e.to_string());
            mkdir(journal, &d)?;
            out.push(d);
        }
        Ok(Some(Usage::Own(out)))
    }

    /// What the run's report says the CPU times were counted with.
    pub(super) fn describe(&self) -> &'static str {
        match self {
            Usage::V2Stat(_) => "cgroup v2 cpu.stat",
            Usage::CoMounted(_) => "cgroup v1 cpuacct.usage (with cpu)",
            Usage::Own(_) => "cgroup v1 cpuacct.usage (own groups)",
        }
    }

    /// Process `e`'s CPU time so far, ns; `None` when the file cannot be read.
    pub(super) fn cpu_ns(&self, e: usize) -> Option<u64> {
        match self {
            Usage::V2Stat(f) => {
                let text = std::fs::read_to_string(f.get(e)?).ok()?;
                let us: u64 = text
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))?
                    .trim()
                    .parse()
                    .ok()?;
                Some(us * 1000)
            }
            Usage::CoMounted(f) => crate::read_trim(f.get(e)?).ok()?.parse().ok(),
            Usage::Own(d) => crate::read_trim(&d.get(e)?.join("cpuacct.usage"))
                .ok()?
                .parse()
                .ok(),
        }
    }

    /// A command's process joins process `e`'s accounting (before it is released: what it
    /// forks later is born inside). Only our own cpuacct groups need it.
    pub(super) fn attach_process(&self, e: usize, pid: i32) -> Result<()> {
        self.attach(e, "cgroup.procs", pid)
    }

    /// One thread joins process `e`'s accounting (a built-in workload thread, or a command
    /// thread found outside it).
    pub(super) fn attach_thread(&self, e: usize, tid: i32) -> Result<()> {
        self.attach(e, "tasks", tid)
    }

    fn attach(&self, e: usize, file: &str, id: i32) -> Result<()> {
        let Usage::Own(d) = self else {
            return Ok(());
        };
        let Some(dir) = d.get(e) else {
            return Ok(());
        };
        let f = dir.join(file);
        match std::fs::write(&f, id.to_string()) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()), // already gone
            Err(e) => Err(Error::io(format!("write {id} to {}", f.display()), e)),
        }
    }
}

/// The cpuacct cgroup (relative to its mount) process `pid` sits in.
fn own_cpuacct_cgroup(roots: &Roots, pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("cgroup")).ok()?;
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls
            .split(',')
            .any(|c| c == "cpuacct")
            .then(|| PathBuf::from(path))
    })
}
