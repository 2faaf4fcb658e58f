//! Exclusive mode (seed 000, "Software implementation"): give a job whole cores.
//!
//! 1. Detect the topology; keep the *system cores* (CPU 0 and its SMT siblings by default) for
//!    everything else on the machine, and give the rest (the *job cores*) to the job.
//! 2. Move every other thread whose affinity reaches a job core onto what is left of its mask
//!    (or the system cores), as `tuna --isolate` does. Threads the kernel will not move
//!    (per-CPU kernel threads: PF_NO_SETAFFINITY, or EINVAL) stay and are reported. New
//!    threads are swept again periodically ([`Isolation::sweep`]).
//! 3. Move every IRQ that reaches a job core to the system cores, and the default IRQ mask;
//!    refusals (managed IRQs: EIO/EPERM) are reported with their errno.
//! 4. RT throttling (`kernel/sched_rt_runtime_us`): `keep` leaves it, so a FIFO-99 thread is
//!    stopped for (period - runtime) every period when anything else wants its CPU; `off`
//!    writes -1. The job never runs on a system core, so the system is not starved either way.
//! 5. The engine pins job threads one per job core (round robin when there are more threads)
//!    and makes them SCHED_FIFO at `priority` (99 by default).
//!
//! Every change goes through the [`Journal`] first.

use crate::affinity::{self, CpuSet};
use crate::irq::{self, Refusal};
use crate::journal::{Entry, Journal};
use crate::procfs;
use crate::topo::Topology;
use crate::{Error, Result, Roots};
use serde::Serialize;
use std::collections::HashSet;

/// What to do with RT throttling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RtThrottle {
    Keep,
    Off,
}

/// Exclusive-mode settings.
#[derive(Clone, Debug)]
pub struct ExclusiveConfig {
    /// System cores; `None`: CPU 0 and its SMT siblings.
    pub system: Option<CpuSet>,
    /// SCHED_FIFO priority of job threads (1..=99).
    pub priority: u32,
    pub rt_throttle: RtThrottle,
    /// Move IRQs (needs root; off: reported).
    pub move_irqs: bool,
    /// Move other threads (needs CAP_SYS_NICE for other users' threads).
    pub move_threads: bool,
}

impl Default for ExclusiveConfig {
    fn default() -> Self {
        ExclusiveConfig {
            system: None,
            priority: 99,
            rt_throttle: RtThrottle::Keep,
            move_irqs: true,
            move_threads: true,
        }
    }
}

/// A thread left where it was.
#[derive(Clone, Debug, Serialize)]
pub struct Kept {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    pub reason: String,
}

/// What exclusive mode did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExclusiveReport {
    pub system_cpus: String,
    pub job_cpus: String,
    pub priority: u32,
    pub moved_threads: usize,
    /// Threads born after their process or parent was moved (they inherited the system
    /// CPUs): journaled with their elders' original affinity, so undo gives it back.
    pub inherited_threads: usize,
    pub kept_threads: Vec<Kept>,
    pub moved_irqs: Vec<u32>,
    pub refused_irqs: Vec<IrqRefusal>,
    /// `sched_rt_runtime_us` / `sched_rt_period_us` as found, and the policy applied.
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    pub rt_throttle: Option<RtThrottle>,
    /// With throttling kept: the longest a FIFO thread may be held off per period (ns).
    pub rt_throttle_cost_ns: Option<u64>,
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct IrqRefusal {
    pub irq: u32,
    pub errno: Option<i32>,
    pub message: String,
}

impl From<Refusal> for IrqRefusal {
    fn from(r: Refusal) -> Self {
        IrqRefusal {
            irq: r.irq,
            errno: r.errno,
            message: r.message,
        }
    }
}

/// Exclusive mode in force.
pub struct Isolation {
    roots: Roots,
    pub system: CpuSet,
    pub job: CpuSet,
    /// Processes not to move (ours and the job's).
    exempt: HashSet<i32>,
    /// (tid, starttime) already looked at.
    seen: HashSet<(i32, u64)>,
    /// TIDs already looked at (a cheap first test; `seen` tells a reused TID apart).
    seen_tids: HashSet<i32>,
    kept_seen: HashSet<i32>,
    /// The affinity each moved process had before (its first moved thread's): a thread or
    /// child born after the move inherits the system CPUs, and must be given back this, not
    /// the inherited pin.
    originals: std::collections::HashMap<i32, CpuSet>,
    /// Start time (ticks since boot) of this process: threads younger than it may have
    /// inherited a pin from a moved elder.
    since: u64,
    pub report: ExclusiveReport,
    move_threads: bool,
}

impl Isolation {
    /// Checks the configuration against the machine (nothing changes yet).
    pub fn plan(topo: &Topology, roots: &Roots, cfg: &ExclusiveConfig) -> Result<Isolation> {
        let system = topo.system_cpus(cfg.system.as_ref())?;
        let job = topo.online.difference(&system);
        if job.is_empty() {
            return Err(Error::Input(format!(
                "exclusive mode needs at least two CPUs (online: {})",
                topo.online
            )));
        }
        crate::sched::Policy::Fifo {
            priority: cfg.priority,
        }
        .validate()?;
        Ok(Isolation {
            roots: roots.clone(),
            report: ExclusiveReport {
                system_cpus: system.to_list(),
                job_cpus: job.to_list(),
                priority: cfg.priority,
                ..ExclusiveReport::default()
            },
            system,
            job,
            exempt: HashSet::from([std::process::id() as i32]),
            seen: HashSet::new(),
            seen_tids: HashSet::new(),
            kept_seen: HashSet::new(),
            originals: Default::default(),
            since: procfs::read_stat(roots, std::process::id() as i32, std::process::id() as i32)
                .map_or(u64::MAX, |t| t.starttime),
            move_threads: cfg.move_threads,
        })
    }

    /// Marks a process as part of the job (never moved to the system cores).
    pub fn exempt(&mut self, pid: i32) {
        self.exempt.insert(pid);
    }

    /// Applies RT throttling and IRQ moves, then sweeps threads. Each step journals its
    /// changes as one batch (one fsync) before it makes any of them.
    pub fn apply(&mut self, journal: &mut Journal, cfg: &ExclusiveConfig) -> Result<()> {
        // RT throttling.
        let rt = procfs::sysctl(&self.roots, "kernel/sched_rt_runtime_us")
            .ok()
            .and_then(|v| v.parse::<i64>().ok());
        let period = procfs::sysctl(&self.roots, "kernel/sched_rt_period_us")
            .ok()
            .and_then(|v| v.parse::<i64>().ok());
        self.report.rt_runtime_us = rt;
        self.report.rt_period_us = period;
        self.report.rt_throttle = Some(cfg.rt_throttle);
        let mut batch = Vec::new();
        let mut changes = Vec::new();
        match cfg.rt_throttle {
            RtThrottle::Off => {
                if let Some(r) = rt.filter(|r| *r >= 0) {
                    batch.push(Entry::Sysctl {
                        name: "kernel/sched_rt_runtime_us".into(),
                        old: r.to_string(),
                    });
                    changes.push(Change::RtOff);
                }
            }
            RtThrottle::Keep => {
                if let (Some(r), Some(p)) = (rt, period) {
                    if r >= 0 && p > r {
                        self.report.rt_throttle_cost_ns = Some((p - r) as u64 * 1000);
                    }
                }
            }
        }
        if cfg.move_irqs {
            self.plan_irqs(&mut batch, &mut changes)?;
        } else {
            self.report
                .warnings
                .push("IRQs not moved (needs root)".into());
        }
        journal.record_all(batch)?;
        for c in changes {
            self.make(c)?;
        }
        self.sweep(journal)
    }

    /// The IRQ moves (and the default mask for new IRQs), as journal entries and changes.
    fn plan_irqs(&mut self, batch: &mut Vec<Entry>, changes: &mut Vec<Change>) -> Result<()> {
        let def = self.roots.proc.join("irq/default_smp_affinity");
        if let Ok(t) = crate::read_trim(&def) {
            if let Ok(m) = CpuSet::parse_mask(&t) {
                if !m.intersection(&self.job).is_empty() {
                    batch.push(Entry::File {
                        path: def.clone(),
                        old: t,
                    });
                    changes.push(Change::DefaultIrqMask(def));
                }
            }
        }
        for n in irq::list(&self.roots)? {
            let Ok(cur) = irq::read(&self.roots, n) else {
                continue;
            };
            if cur.affinity.intersection(&self.job).is_empty() {
                continue;
            }
            batch.push(Entry::Irq {
                irq: n,
                old: cur.mask_text,
            });
            changes.push(Change::Irq(n));
        }
        Ok(())
    }

    /// Makes one change already journaled; a refusal is reported, not an error (the journal
    /// entry then restores the value the kernel kept: harmless).
    fn make(&mut self, c: Change) -> Result<()> {
        match c {
            Change::RtOff => procfs::set_sysctl(&self.roots, "kernel/sched_rt_runtime_us", "-1")?,
            Change::DefaultIrqMask(def) => {
                if let Err(e) = std::fs::write(&def, self.system.to_mask(1)) {
                    self.report
                        .warnings
                        .push(format!("default IRQ mask not changed: {e}"));
                }
            }
            Change::Irq(n) => match irq::set(&self.roots, n, &self.system) {
                Ok(()) => self.report.moved_irqs.push(n),
                Err(e) => self.report.refused_irqs.push(IrqRefusal {
                    irq: n,
                    errno: e.errno(),
                    message: e.to_string(),
                }),
            },
        }
        Ok(())
    }

    /// Moves threads (new since the last sweep) off the job cores: one pass over `/proc`,
    /// every move journaled in one batch (one fsync) before any is made.
    ///
    /// A thread seen by an earlier sweep costs one `sched_getaffinity` while it stays off the
    /// job cores; its `stat` (start time, flags) is read only for a thread not seen before or
    /// found on a job core again. (A TID reused by a new thread that stays off the job cores
    /// is left alone: nothing to move.)
    pub fn sweep(&mut self, journal: &mut Journal) -> Result<()> {
        if !self.move_threads {
            return Ok(());
        }
        // (pid, tid, comm, current mask, target) of the threads to move.
        let mut moves: Vec<(i32, i32, String, CpuSet, CpuSet)> = Vec::new();
        let mut batch = Vec::new();
        for (pid, tid) in procfs::all_threads(&self.roots) {
            if self.exempt.contains(&pid) {
                continue;
            }
            let Ok(cur) = affinity::get_thread(tid) else {
                continue;
            };
            let off_job = cur.intersection(&self.job).is_empty();
            if off_job && self.seen_tids.contains(&tid) {
                continue;
            }
            let Some(st) = procfs::read_stat(&self.roots, pid, tid) else {
                continue;
            };
            self.seen_tids.insert(tid);
            if !self.seen.insert((tid, st.starttime)) {
                continue;
            }
            if off_job {
                // Born after its process (or parent) was moved: it inherited the pin.
                // Journal what its elders had, so undo gives it the machine back too.
                // Only user threads born while schedkit ran (a per-CPU kernel thread on the
                // system CPU is bound there, not moved).
                let born_since = st.starttime >= self.since && !st.is_kthread();
                if !born_since || st.affinity_locked() || cur != self.system {
                    continue;
                }
                let elder = self
                    .originals
                    .get(&pid)
                    .or_else(|| parent_of(&self.roots, pid).and_then(|pp| self.originals.get(&pp)))
                    .cloned();
                if let Some(old) = elder.filter(|o| *o != cur) {
                    batch.push(crate::journal::Entry::Affinity {
                        pid,
                        tid,
                        starttime: st.starttime,
                        old: old.clone(),
                    });
                    self.originals.entry(pid).or_insert(old);
                    self.report.inherited_threads += 1;
                }
                continue;
            }
            if st.affinity_locked() {
                self.keep(
                    pid,
                    tid,
                    &st.comm,
                    "kernel thread bound to its CPU (PF_NO_SETAFFINITY)",
                );
                continue;
            }
            let mut target = cur.difference(&self.job);
            if target.is_empty() {
                target = self.system.clone();
            }
            batch.push(Entry::Affinity {
                pid,
                tid,
                starttime: st.starttime,
                old: cur.clone(),
            });
            moves.push((pid, tid, st.comm, cur, target));
        }
        journal.record_all(batch)?;
        for (pid, tid, comm, cur, target) in moves {
            match affinity::set_thread(tid, &target) {
                Ok(()) => {
                    self.originals.entry(pid).or_insert(cur);
                    self.report.moved_threads += 1
                }
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) if e.errno() == Some(libc::EINVAL) => self.keep(
                    pid,
                    tid,
                    &comm,
                    "the kernel refused (EINVAL): per-CPU thread",
                ),
                Err(e) if e.errno() == Some(libc::EPERM) => {
                    self.keep(pid, tid, &comm, "not permitted (EPERM): needs CAP_SYS_NICE")
                }
                Err(e) => self.keep(pid, tid, &comm, &e.to_string()),
            }
        }
        Ok(())
    }

    /// Reports a thread left on the job cores (once).
    fn keep(&mut self, pid: i32, tid: i32, comm: &str, why: &str) {
        if self.kept_seen.insert(tid) {
            self.report.kept_threads.push(Kept {
                pid,
                tid,
                comm: comm.into(),
                reason: why.into(),
            });
        }
    }
}

/// A change exclusive mode makes once it is journaled.
enum Change {
    RtOff,
    DefaultIrqMask(std::path::PathBuf),
    Irq(u32),
}

/// The parent of process `pid` (`PPid:` of its status).
fn parent_of(roots: &Roots, pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}
