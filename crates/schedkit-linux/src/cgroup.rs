//! CPU-weight cgroups for the fair-share policies of `schedkit run` (`process-fair`,
//! `tenants`; seed 004, chapters 3 and 5).
//!
//! ## Where the cpu controller lives
//!
//! Detected from `/proc/self/mountinfo`, never assumed: a `cgroup2` mount whose
//! `cgroup.controllers` lists `cpu` wins (file `cpu.weight`, 1..10000, default 100);
//! otherwise a v1 `cgroup` mount whose super options include `cpu` (file `cpu.shares`,
//! 2..262144, default 1024). On a machine with both (v1 `cpu` at `/sys/fs/cgroup/cpu`, v2 at
//! `/sys/fs/cgroup/unified` without `cpu`) that is v1.
//!
//! ## Weights
//!
//! Callers speak v2 units (`cpu.weight`, 1..10000, 100 = a nice-0 process). On v1 the same
//! weight is written as `shares = weight * 1024 / 100` (at least 2): the kernel's own v1<->v2
//! conversion, so 100 <-> 1024 and ratios are kept (1:5 stays 1:5 up to rounding of one
//! share in 1024).
//!
//! ## Layout and clean-up
//!
//! `<mount>/schedkit-<pid>/` (the run's parent) with one child per key (a process for
//! `process-fair`, a group for `tenants`, a process inside its group's cgroup for tenants
//! with several member processes). Every directory is journaled *before* it is created, as an
//! [`Entry::Cgroup`] naming the cgroup the run itself sat in: undo (normal exit, SIGINT,
//! SIGTERM, a panic through the journal's Drop, or `schedkit restore` after SIGKILL) first
//! moves whatever tasks are still inside back to that cgroup, then removes the directory,
//! children before parents (the journal undoes newest first).
//!
//! v1 `tasks` takes thread ids, so the built-in workloads (threads of schedkit itself) join
//! one by one; commands join before they are released from their start gate, so every thread
//! and child they create later is born inside (the kernel puts a new task in its creator's
//! cgroup). v2 `cgroup.procs` takes whole processes only: built-in workloads cannot be placed
//! on v2 (schedkit would move itself), and [`CpuGroups::attach_thread`] says so.
//!
//! v1 refuses a SCHED_FIFO/RR thread in a group whose `cpu.rt_runtime_us` is 0 (the default
//! for a new group): the fair-share policies run every job thread SCHED_OTHER, and a write
//! refused for that reason is reported as such rather than as a bare EINVAL.

use crate::journal::{Entry, Journal};
use crate::{Error, Result, Roots};
use std::path::{Path, PathBuf};

/// Which hierarchy holds the cpu controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuController {
    /// cgroup v2 mount with `cpu` in `cgroup.controllers`.
    V2(PathBuf),
    /// cgroup v1 mount with the `cpu` option.
    V1(PathBuf),
}

impl CpuController {
    pub fn mount(&self) -> &Path {
        match self {
            CpuController::V2(p) | CpuController::V1(p) => p,
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            CpuController::V2(_) => "cgroup v2 cpu.weight",
            CpuController::V1(_) => "cgroup v1 cpu.shares",
        }
    }
    /// The file tasks are written to: v1 takes thread ids, v2 process ids.
    pub fn tasks_file(&self) -> &'static str {
        match self {
            CpuController::V2(_) => "cgroup.procs",
            CpuController::V1(_) => "tasks",
        }
    }
    fn weight_file(&self) -> &'static str {
        match self {
            CpuController::V2(_) => "cpu.weight",
            CpuController::V1(_) => "cpu.shares",
        }
    }
    /// The value written for a v2 weight (see the module docs).
    pub fn weight_value(&self, weight: u64) -> u64 {
        let w = weight.clamp(1, 10_000);
        match self {
            CpuController::V2(_) => w,
            CpuController::V1(_) => (w * 1024 / 100).max(2),
        }
    }
}

/// v1 `cpu.shares` for a v2 `cpu.weight` (1..10000 -> 10..102400, 100 -> 1024).
pub fn weight_to_shares(weight: u64) -> u64 {
    CpuController::V1(PathBuf::new()).weight_value(weight)
}

/// v2 `cpu.weight` for v1 `cpu.shares` (rounded, clamped to 1..10000).
pub fn shares_to_weight(shares: u64) -> u64 {
    ((shares * 100 + 512) / 1024).clamp(1, 10_000)
}

/// Finds the cpu controller (see the module docs), or `None`.
pub fn detect(roots: &Roots) -> Option<CpuController> {
    let text = std::fs::read_to_string(roots.proc.join("self/mountinfo")).unwrap_or_default();
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        // id parent major:minor root mountpoint options ... - fstype source superoptions
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mp) = left.split_whitespace().nth(4).map(PathBuf::from) else {
            continue;
        };
        let mut r = right.split_whitespace();
        let fstype = r.next().unwrap_or("");
        let superopts = r.nth(1).unwrap_or("");
        match fstype {
            "cgroup2" if v2.is_none() => {
                let ctrls =
                    std::fs::read_to_string(mp.join("cgroup.controllers")).unwrap_or_default();
                if ctrls.split_whitespace().any(|c| c == "cpu") {
                    v2 = Some(mp);
                }
            }
            "cgroup" if v1.is_none() && superopts.split(',').any(|o| o == "cpu") => v1 = Some(mp),
            _ => {}
        }
    }
    v2.map(CpuController::V2).or(v1.map(CpuController::V1))
}

/// The cgroup `pid` sits in within `ctl`'s hierarchy, relative to the mount (from
/// `/proc/PID/cgroup`), e.g. `/` or `/user.slice`.
pub fn cgroup_of(roots: &Roots, ctl: &CpuController, pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("cgroup")).ok()?;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let hit = match ctl {
            CpuController::V2(_) => id == "0" && ctrls.is_empty(),
            CpuController::V1(_) => ctrls.split(',').any(|c| c == "cpu"),
        };
        if hit {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// One cgroup of the run.
#[derive(Clone, Debug)]
pub struct CpuGroup {
    pub key: String,
    pub path: PathBuf,
    /// Current weight, v2 units.
    pub weight: u64,
}

/// The run's cgroups: `schedkit-<pid>` and its children.
pub struct CpuGroups {
    ctl: CpuController,
    parent: PathBuf,
    /// Where the run itself sat (tasks go back there on undo).
    back: PathBuf,
    groups: Vec<CpuGroup>,
}

impl CpuGroups {
    /// Detects the controller and creates (journaled) the run's parent cgroup.
    pub fn create(roots: &Roots, journal: &mut Journal) -> Result<CpuGroups> {
        let ctl = detect(roots).ok_or_else(|| {
            Error::Input(
                "no cgroup hierarchy with the cpu controller is mounted (looked for a cgroup2 mount listing `cpu` in cgroup.controllers and a cgroup v1 mount with the `cpu` option in /proc/self/mountinfo)".into(),
            )
        })?;
        let me = std::process::id() as i32;
        let rel = cgroup_of(roots, &ctl, me).unwrap_or_else(|| PathBuf::from("/"));
        let back = ctl.mount().join(rel.strip_prefix("/").unwrap_or(&rel));
        // The parent sits at the mount's root: under it, only our children compete, and a
        // v2 root is exempt from the "no processes in inner cgroups" rule.
        let parent = ctl.mount().join(format!("schedkit-{me}"));
        let g = CpuGroups {
            ctl,
            parent: parent.clone(),
            back,
            groups: Vec::new(),
        };
        g.mkdir(journal, &parent)?;
        if let CpuController::V2(m) = &g.ctl {
            // Children of the parent need the cpu controller enabled in the subtree; the
            // mount root's subtree_control must carry it too (enabling it there is not undone:
            // it only makes the controller available, it changes nobody's share).
            for dir in [m.as_path(), parent.as_path()] {
                let f = dir.join("cgroup.subtree_control");
                let cur = std::fs::read_to_string(&f).unwrap_or_default();
                if !cur.split_whitespace().any(|c| c == "cpu") {
                    write(&f, "+cpu")?;
                }
            }
        }
        Ok(g)
    }

    pub fn controller(&self) -> &CpuController {
        &self.ctl
    }
    pub fn parent(&self) -> &Path {
        &self.parent
    }
    pub fn groups(&self) -> &[CpuGroup] {
        &self.groups
    }

    fn mkdir(&self, journal: &mut Journal, path: &Path) -> Result<()> {
        journal.record(Entry::Cgroup {
            path: path.into(),
            tasks_file: self.ctl.tasks_file().into(),
            back: self.back.clone(),
        })?;
        std::fs::create_dir(path).map_err(|e| Error::io(format!("mkdir {}", path.display()), e))
    }

    /// Creates child `key` under `under` (a previous child's index) or the run's parent,
    /// with `weight` (v2 units). Returns its index.
    pub fn add(
        &mut self,
        journal: &mut Journal,
        key: &str,
        under: Option<usize>,
        weight: u64,
    ) -> Result<usize> {
        let base = under.map_or(self.parent.clone(), |i| self.groups[i].path.clone());
        let safe: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = base.join(format!("{}-{safe}", self.groups.len()));
        self.mkdir(journal, &path)?;
        if let CpuController::V2(_) = self.ctl {
            if under.is_none() {
                // Only needed when this child gets children of its own; harmless otherwise.
                let _ = write(&path.join("cgroup.subtree_control"), "+cpu");
            }
        }
        self.groups.push(CpuGroup {
            key: key.into(),
            path,
            weight: 0,
        });
        let i = self.groups.len() - 1;
        self.set_weight(i, weight)?;
        Ok(i)
    }

    /// Gives the run's parent cgroup the weight its threads would carry without cgroups
    /// (`load`: the sum of their CFS weights, 1024 per nice-0 thread), so the job as a whole
    /// competes with the rest of the machine as it would under `default` and only the split
    /// inside it changes. Clamped to the file's range (v1 262144 shares, v2 10000).
    pub fn set_parent_load(&self, load: u64) -> Result<()> {
        let (file, v) = match self.ctl {
            CpuController::V1(_) => ("cpu.shares", load.clamp(2, 262_144)),
            CpuController::V2(_) => ("cpu.weight", shares_to_weight(load)),
        };
        write(&self.parent.join(file), &v.to_string())
    }

    /// Sets child `i`'s weight (v2 units, 1..10000). The cgroup is the run's own: not
    /// journaled, it goes away with the directory.
    pub fn set_weight(&mut self, i: usize, weight: u64) -> Result<()> {
        let g = &mut self.groups[i];
        write(
            &g.path.join(self.ctl.weight_file()),
            &self.ctl.weight_value(weight).to_string(),
        )?;
        g.weight = weight.clamp(1, 10_000);
        Ok(())
    }

    /// Writes child `i`'s weight as `weight` (v2 units, fractional) without changing its
    /// nominal weight: the share trim's corrections. v1 keeps the fraction (shares are 10.24
    /// per v2 unit); v2 rounds.
    pub fn set_weight_trimmed(&self, i: usize, weight: f64) -> Result<()> {
        let v = match self.ctl {
            CpuController::V1(_) => (weight * 10.24).round().clamp(2.0, 262_144.0),
            CpuController::V2(_) => weight.round().clamp(1.0, 10_000.0),
        };
        write(
            &self.groups[i].path.join(self.ctl.weight_file()),
            &(v as u64).to_string(),
        )
    }

    /// The weight file's current content (what the kernel holds).
    pub fn read_weight_value(&self, i: usize) -> Option<u64> {
        crate::read_trim(&self.groups[i].path.join(self.ctl.weight_file()))
            .ok()?
            .parse()
            .ok()
    }

    /// Moves a whole process (v2; on v1 its main thread only, and what it creates later).
    pub fn attach_process(&self, i: usize, pid: i32) -> Result<()> {
        self.attach(i, pid)
    }

    /// Moves one thread: v1 only.
    pub fn attach_thread(&self, i: usize, tid: i32) -> Result<()> {
        if let CpuController::V2(_) = self.ctl {
            return Err(Error::Input(format!(
                "cgroup v2 places whole processes only: thread {tid} is a built-in workload thread of schedkit itself; use `command` processes on this machine"
            )));
        }
        self.attach(i, tid)
    }

    fn attach(&self, i: usize, id: i32) -> Result<()> {
        let f = self.groups[i].path.join(self.ctl.tasks_file());
        match std::fs::write(&f, id.to_string()) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()), // already gone
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && is_rt(id) => Err(Error::Input(
                format!(
                    "task {id} runs a real-time class and {} has cpu.rt_runtime_us = 0: cgroup v1 refuses it; the fair-share policies need SCHED_OTHER job threads",
                    self.groups[i].path.display()
                ),
            )),
            Err(e) => Err(Error::io(format!("write {id} to {}", f.display()), e)),
        }
    }

    /// Ids listed in child `i`'s tasks file.
    pub fn members(&self, i: usize) -> Vec<i32> {
        read_ids(&self.groups[i].path.join(self.ctl.tasks_file()))
    }
}

fn is_rt(tid: i32) -> bool {
    matches!(
        crate::sched::get_thread(tid),
        Ok(crate::sched::Policy::Fifo { .. } | crate::sched::Policy::Rr { .. })
    )
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

fn read_ids(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Undo of [`Entry::Cgroup`]: moves the tasks still inside `path` to `back`, then removes
/// `path`. `Ok(false)` when it was already gone.
pub fn remove(path: &Path, tasks_file: &str, back: &Path) -> std::result::Result<bool, String> {
    if !path.exists() {
        return Ok(false);
    }
    // A task can be forked into the group while we move the others: a few passes.
    for _ in 0..20 {
        for id in read_ids(&path.join(tasks_file)) {
            // Gone meanwhile (ESRCH) or a zombie: nothing to move.
            let _ = std::fs::write(back.join(tasks_file), id.to_string());
        }
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) => return Err(format!("rmdir {}: {e}", path.display())),
        }
    }
    Err(format!(
        "rmdir {}: still busy after moving its tasks to {}",
        path.display(),
        back.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_mapping_round_trips() {
        assert_eq!(weight_to_shares(100), 1024);
        assert_eq!(weight_to_shares(1), 10);
        assert_eq!(weight_to_shares(10_000), 102_400);
        assert_eq!(weight_to_shares(0), 10, "clamped to 1");
        for w in [1, 7, 100, 250, 9999, 10_000] {
            assert_eq!(shares_to_weight(weight_to_shares(w)), w);
        }
    }

    #[test]
    fn detects_v1_when_v2_lacks_cpu() {
        let dir = std::env::temp_dir().join(format!("sk-cg-{}", std::process::id()));
        let proc_ = dir.join("proc/self");
        let v2 = dir.join("unified");
        std::fs::create_dir_all(&proc_).unwrap();
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("cgroup.controllers"), "hugetlb\n").unwrap();
        let mi = format!(
            "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
             41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            v2.display()
        );
        std::fs::write(proc_.join("mountinfo"), &mi).unwrap();
        let roots = Roots::at(&dir);
        assert_eq!(
            detect(&roots),
            Some(CpuController::V1("/sys/fs/cgroup/cpu".into()))
        );
        // Once v2 lists cpu, v2 wins.
        std::fs::write(v2.join("cgroup.controllers"), "cpu io memory\n").unwrap();
        assert_eq!(detect(&roots), Some(CpuController::V2(v2.clone())));
        std::fs::write(
            proc_.join("mountinfo"),
            "32 31 0:29 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n",
        )
        .unwrap();
        assert_eq!(detect(&roots), None, "cpuacct is not cpu");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
