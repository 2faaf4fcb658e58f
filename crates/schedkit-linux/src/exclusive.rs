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
use crate::journal::Journal;
use crate::procfs::{self, ThreadStat};
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
            kept_seen: HashSet::new(),
            originals: Default::default(),
            since: ThreadStat::read(roots, std::process::id() as i32, std::process::id() as i32)
                .map_or(u64::MAX, |t| t.starttime),
            move_threads: cfg.move_threads,
        })
    }

    /// Marks a process as part of the job (never moved to the system cores).
    pub fn exempt(&mut self, pid: i32) {
        self.exempt.insert(pid);
    }

    /// Applies IRQ moves and RT throttling, then sweeps threads.
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
        match cfg.rt_throttle {
            RtThrottle::Off => {
                if rt.is_some_and(|r| r >= 0) {
                    journal.set_sysctl("kernel/sched_rt_runtime_us", "-1")?;
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
            self.move_irqs(journal)?;
        } else {
            self.report
                .warnings
                .push("IRQs not moved (needs root)".into());
        }
        self.sweep(journal)
    }

    fn move_irqs(&mut self, journal: &mut Journal) -> Result<()> {
        // New IRQs get the default mask.
        let def = self.roots.proc.join("irq/default_smp_affinity");
        if let Ok(t) = crate::read_trim(&def) {
            if let Ok(m) = CpuSet::parse_mask(&t) {
                if !m.intersection(&self.job).is_empty() {
                    if let Err(e) = journal.write_file(&def, &self.system.to_mask(1)) {
                        self.report
                            .warnings
                            .push(format!("default IRQ mask not changed: {e}"));
                    }
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
            match journal.set_irq(n, &self.system) {
                Ok(()) => self.report.moved_irqs.push(n),
                Err(e) => {
                    let errno = e.errno();
                    // The write failed: the journal entry restores the same value, harmless.
                    self.report.refused_irqs.push(IrqRefusal {
                        irq: n,
                        errno,
                        message: e.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Moves threads (new since the last sweep) off the job cores.
    pub fn sweep(&mut self, journal: &mut Journal) -> Result<()> {
        if !self.move_threads {
            return Ok(());
        }
        for (pid, tid) in procfs::all_threads(&self.roots) {
            if self.exempt.contains(&pid) {
                continue;
            }
            let Ok(st) = ThreadStat::read(&self.roots, pid, tid) else {
                continue;
            };
            if !self.seen.insert((tid, st.starttime)) {
                continue;
            }
            let Ok(cur) = affinity::get_thread(tid) else {
                continue;
            };
            if cur.intersection(&self.job).is_empty() {
                // Born after its process (or parent) was moved: it inherited the pin.
                // Journal what its elders had, so undo gives it the machine back too.
                let elder = self
                    .originals
                    .get(&pid)
                    .or_else(|| parent_of(&self.roots, pid).and_then(|pp| self.originals.get(&pp)))
                    .cloned();
                // Only user threads born while schedkit ran (a per-CPU kernel thread on the
                // system CPU is bound there, not moved).
                let born_since = st.starttime >= self.since && !st.is_kthread();
                if let Some(old) = elder.filter(|o| {
                    born_since && !st.affinity_locked() && *o != cur && cur == self.system
                }) {
                    journal.record(crate::journal::Entry::Affinity {
                        pid,
                        tid,
                        starttime: st.starttime,
                        old: old.clone(),
                    })?;
                    self.originals.entry(pid).or_insert(old);
                    self.report.inherited_threads += 1;
                }
                continue;
            }
            let keep = |why: &str, me: &mut Isolation| {
                if me.kept_seen.insert(tid) {
                    me.report.kept_threads.push(Kept {
                        pid,
                        tid,
                        comm: st.comm.clone(),
                        reason: why.into(),
                    });
                }
            };
            if st.affinity_locked() {
                keep("kernel thread bound to its CPU (PF_NO_SETAFFINITY)", self);
                continue;
            }
            let mut target = cur.difference(&self.job);
            if target.is_empty() {
                target = self.system.clone();
            }
            match journal.set_affinity(pid, tid, &target) {
                Ok(()) => {
                    self.originals.entry(pid).or_insert(cur);
                    self.report.moved_threads += 1
                }
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) if e.errno() == Some(libc::EINVAL) => {
                    keep("the kernel refused (EINVAL): per-CPU thread", self)
                }
                Err(e) if e.errno() == Some(libc::EPERM) => {
                    keep("not permitted (EPERM): needs CAP_SYS_NICE", self)
                }
                Err(e) => keep(&e.to_string(), self),
            }
        }
        Ok(())
    }
}

/// The parent of process `pid` (`PPid:` of its status).
fn parent_of(roots: &Roots, pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}
