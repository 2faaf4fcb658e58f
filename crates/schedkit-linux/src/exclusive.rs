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
use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;

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
    /// Every thread a sweep has looked at: TID -> (its process, the inode of its
    /// `/proc/PID/task/TID` entry). A later sweep passes over an unchanged pair without a
    /// system call ([`procfs::tasks`]: a reused TID has a new inode).
    known: HashMap<i32, (i32, u64)>,
    /// Every process a sweep has listed: PID -> the inode of its `/proc/PID` entry.
    procs: HashMap<i32, u64>,
    kept_seen: HashSet<i32>,
    /// The affinity each moved process had before (its first moved thread's): a thread or
    /// child born after the move inherits the system CPUs, and must be given back this, not
    /// the inherited pin.
    originals: HashMap<i32, CpuSet>,
    /// Start time (ticks since boot) of this process: threads younger than it may have
    /// inherited a pin from a moved elder.
    since: u64,
    /// Sweeps so far: the first can find no inherited pin (nothing was moved before it).
    sweeps: u64,
    /// Pidfds of the processes the sweep being made moves threads of, with their start
    /// times: handed to the journal ([`Journal::vouch`]) so that undo checks each process
    /// with one system call.
    pidfds: Vec<(i32, u64, std::os::fd::OwnedFd)>,
    pub report: ExclusiveReport,
    move_threads: bool,
}

/// The inode recorded for a process's leader thread met without a listing of its task
/// directory (see [`Isolation::plan_sweep`]): no real inode is `u64::MAX`.
const LEADER: u64 = u64::MAX;

/// One process's threads that had the same mask, to move to `target`: one journal entry.
struct Moves {
    pid: i32,
    starttime: u64,
    old: CpuSet,
    target: CpuSet,
    tids: Vec<i32>,
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
            known: HashMap::new(),
            procs: HashMap::new(),
            kept_seen: HashSet::new(),
            originals: HashMap::new(),
            since: procfs::read_stat(roots, std::process::id() as i32, std::process::id() as i32)
                .map_or(u64::MAX, |t| t.starttime),
            sweeps: 0,
            pidfds: Vec::new(),
            move_threads: cfg.move_threads,
        })
    }

    /// Marks a process as part of the job (never moved to the system cores).
    pub fn exempt(&mut self, pid: i32) {
        self.exempt.insert(pid);
    }

    /// Applies RT throttling and IRQ moves, then sweeps threads: every change is journaled
    /// in one batch (one write) before any is made.
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
        let moves = self.plan_sweep(&mut batch);
        journal.record_all(batch)?;
        self.vouch(journal);
        for c in changes {
            self.make(c)?;
        }
        self.make_moves(moves);
        Ok(())
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
            let Ok((text, cur)) = irq::read_mask(&self.roots, n) else {
                continue;
            };
            if cur.intersection(&self.job).is_empty() {
                continue;
            }
            batch.push(Entry::Irq { irq: n, old: text });
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
    /// every move journaled in one batch (one write) before any is made.
    pub fn sweep(&mut self, journal: &mut Journal) -> Result<()> {
        let mut batch = Vec::new();
        let moves = self.plan_sweep(&mut batch);
        journal.record_all(batch)?;
        self.vouch(journal);
        self.make_moves(moves);
        Ok(())
    }

    fn vouch(&mut self, journal: &mut Journal) {
        for (pid, starttime, fd) in self.pidfds.drain(..) {
            journal.vouch(pid, starttime, fd);
        }
    }

    /// The last sweep, just before undo: journals the threads born since the previous sweep
    /// that inherited the system CPUs from a moved elder, so that undo gives them the
    /// machine back, and moves nothing (the run is over). Only the processes that can hold
    /// such a thread are listed: those with moved threads, and those new since the previous
    /// sweep (a child of a moved thread); a process none of whose threads moved gives its
    /// new threads its own masks, which undo has nothing to do with.
    pub fn final_sweep(&mut self, journal: &mut Journal) -> Result<()> {
        let batch = self.inherited_since_last();
        journal.record_all(batch)
    }

    /// After undo: gives the machine back to threads born between [`Isolation::final_sweep`]
    /// and the undo of their creator's pin (they inherited the system CPUs and no journal
    /// names them: a test harness or a server spawning threads all the time has some).
    /// Once every creator has its own mask back, a new thread inherits that, so a few passes
    /// find every straggler; each pass lists only the processes that can hold one. Returns
    /// how many threads it gave back. Not journaled: the window a kill could hit is one
    /// pass, and the threads are given what their process had, not what schedkit chose.
    pub fn repair_after_undo(&mut self) -> usize {
        let mut given = 0;
        for _ in 0..4 {
            let batch = self.inherited_since_last();
            if batch.is_empty() {
                break;
            }
            given += crate::journal::undo_entries(&self.roots, &batch)
                .iter()
                .filter(|u| u.outcome == Ok(true))
                .count();
        }
        given
    }

    /// The threads new since the last look that inherited the system CPUs from a moved
    /// elder, as journal entries giving back what their elders had (see
    /// [`Isolation::final_sweep`]).
    fn inherited_since_last(&mut self) -> Vec<Entry> {
        let mut batch = Vec::new();
        if !self.move_threads || self.sweeps == 0 {
            return batch;
        }
        self.sweeps += 1;
        for (pid, pino) in procfs::pids_with_ino(&self.roots) {
            if self.exempt.contains(&pid) {
                continue;
            }
            let same_proc = self.procs.insert(pid, pino) == Some(pino);
            if same_proc && !self.originals.contains_key(&pid) {
                continue;
            }
            for (tid, ino) in procfs::tasks(&self.roots, pid) {
                if self.seen(pid, tid, ino, same_proc) {
                    continue;
                }
                if let Ok(cur) = affinity::get_thread(tid) {
                    if cur.intersection(&self.job).is_empty() {
                        self.inherited(pid, tid, &cur, &mut batch);
                    }
                }
            }
        }
        batch
    }

    /// The thread moves of one sweep, and their journal entries pushed onto `batch`.
    ///
    /// What a thread costs is what a run's set-up and tear-down cost on a machine of
    /// thousands of threads (docs/results/run-cost.md), so each costs the fewest system
    /// calls: a thread seen by an earlier sweep none (its `/proc` entry's inode says it is
    /// the same one, see [`procfs::tasks`]); a new one its `sched_getaffinity`, and, when it
    /// is on the job cores, a share of one `stat` read of its process (its start time for
    /// the journal, and for a lone thread its flags: a per-CPU kernel thread is its own
    /// process) and its `sched_setaffinity`. A thread the kernel will not move (EINVAL)
    /// is reported and left. Only a new thread found *off* the job cores after the first
    /// sweep reads its own `stat`: it may have inherited the system CPUs from a moved elder.
    fn plan_sweep(&mut self, batch: &mut Vec<Entry>) -> Vec<Moves> {
        let mut moves: Vec<Moves> = Vec::new();
        if !self.move_threads {
            return moves;
        }
        let first = self.sweeps == 0;
        self.sweeps += 1;
        for (pid, pino) in procfs::pids_with_ino(&self.roots) {
            if self.exempt.contains(&pid) {
                continue;
            }
            let same_proc = self.procs.insert(pid, pino) == Some(pino);
            // The process's (its leader's) stat, read once and only when needed, and a
            // pidfd of it opened just before (see `Journal::vouch`).
            let mut leader: Option<Option<(procfs::ThreadStat, Option<OwnedFd>)>> = None;
            // (tid, inode of its task entry, its mask when already read)
            let mut threads: Vec<(i32, u64, Option<CpuSet>)> = Vec::new();
            if first {
                // Most processes of a machine have one thread (kernel threads, daemons): the
                // leader's stat, read anyway when it is on the job cores, says so, and then
                // the task directory needs no listing. Its leader is then known by the
                // process's own entry (LEADER), which a later sweep's listing accepts.
                if let Ok(cur) = affinity::get_thread(pid) {
                    if !cur.intersection(&self.job).is_empty() {
                        let l = leader.get_or_insert_with(|| self.read_leader(pid));
                        if l.as_ref().is_some_and(|(st, _)| st.num_threads == 1) {
                            threads.push((pid, LEADER, Some(cur)));
                        }
                    }
                }
            }
            if threads.is_empty() {
                threads = procfs::tasks(&self.roots, pid)
                    .into_iter()
                    .map(|(t, i)| (t, i, None))
                    .collect();
            }
            for (tid, ino, cur) in threads {
                if self.seen(pid, tid, ino, same_proc) {
                    continue;
                }
                let Some(cur) = cur.or_else(|| affinity::get_thread(tid).ok()) else {
                    continue;
                };
                if cur.intersection(&self.job).is_empty() {
                    if !first {
                        self.inherited(pid, tid, &cur, batch);
                    }
                    continue;
                }
                let Some((st, fd)) = leader.get_or_insert_with(|| self.read_leader(pid)).as_mut()
                else {
                    continue; // the process ended
                };
                if tid == pid && st.affinity_locked() {
                    let comm = st.comm.clone();
                    self.keep(
                        pid,
                        tid,
                        &comm,
                        "kernel thread bound to its CPU (PF_NO_SETAFFINITY)",
                    );
                    continue;
                }
                let starttime = st.starttime;
                if let Some(fd) = fd.take() {
                    self.pidfds.push((pid, starttime, fd));
                }
                match moves.iter_mut().find(|m| m.pid == pid && m.old == cur) {
                    Some(m) => m.tids.push(tid),
                    None => {
                        let mut target = cur.difference(&self.job);
                        if target.is_empty() {
                            target = self.system.clone();
                        }
                        moves.push(Moves {
                            pid,
                            starttime,
                            old: cur,
                            target,
                            tids: vec![tid],
                        });
                    }
                }
            }
        }
        batch.extend(moves.iter().map(|m| Entry::Affinities {
            pid: m.pid,
            starttime: m.starttime,
            old: m.old.clone(),
            tids: m.tids.clone(),
            pin: Some(m.target.clone()),
            since: Some(self.since),
        }));
        moves
    }

    /// Whether thread `tid` of `pid` (task entry inode `ino`) was looked at by an earlier
    /// sweep; records it otherwise. A leader met without a listing (LEADER) is the same
    /// thread as long as its process is the same (`same_proc`: the `/proc/PID` entry kept
    /// its inode).
    fn seen(&mut self, pid: i32, tid: i32, ino: u64, same_proc: bool) -> bool {
        if tid == pid && same_proc && self.known.get(&tid) == Some(&(pid, LEADER)) {
            return true;
        }
        self.known.insert(tid, (pid, ino)) == Some((pid, ino))
    }

    /// A process's stat (its leader's flags and start time), with a pidfd of it opened just
    /// before the read (see [`Journal::vouch`]); `None` when the process is gone.
    fn read_leader(&self, pid: i32) -> Option<(procfs::ThreadStat, Option<OwnedFd>)> {
        let fd = crate::journal::pidfd(pid);
        procfs::read_process_stat(&self.roots, pid).map(|st| (st, fd))
    }

    /// A thread new since the last sweep and off the job cores: born after its process (or
    /// parent) was moved, it inherited the pin. Journal what its elders had, so undo gives
    /// it the machine back too. Only user threads born while schedkit ran (a per-CPU kernel
    /// thread on the system CPU is bound there, not moved).
    fn inherited(&mut self, pid: i32, tid: i32, cur: &CpuSet, batch: &mut Vec<Entry>) {
        if *cur != self.system {
            return;
        }
        let Some(st) = procfs::read_stat(&self.roots, pid, tid) else {
            return;
        };
        let born_since = st.starttime >= self.since && !st.is_kthread();
        if !born_since || st.affinity_locked() {
            return;
        }
        let elder = self
            .originals
            .get(&pid)
            .or_else(|| parent_of(&self.roots, pid).and_then(|pp| self.originals.get(&pp)))
            .cloned();
        if let Some(old) = elder.filter(|o| o != cur) {
            batch.push(Entry::Affinity {
                pid,
                tid,
                starttime: st.starttime,
                old: old.clone(),
            });
            self.originals.entry(pid).or_insert(old);
            self.report.inherited_threads += 1;
        }
    }

    /// Makes the moves of [`Isolation::plan_sweep`], journaled already.
    fn make_moves(&mut self, moves: Vec<Moves>) {
        for m in moves {
            for &tid in &m.tids {
                match affinity::set_thread(tid, &m.target) {
                    Ok(()) => {
                        self.originals.entry(m.pid).or_insert_with(|| m.old.clone());
                        self.report.moved_threads += 1
                    }
                    Err(e) if e.errno() == Some(libc::ESRCH) => {}
                    Err(e) => {
                        let why = match e.errno() {
                            Some(libc::EINVAL) => {
                                "the kernel refused (EINVAL): per-CPU thread".to_string()
                            }
                            Some(libc::EPERM) => {
                                "not permitted (EPERM): needs CAP_SYS_NICE".to_string()
                            }
                            _ => e.to_string(),
                        };
                        let comm = procfs::read_stat(&self.roots, m.pid, tid)
                            .map(|t| t.comm)
                            .unwrap_or_default();
                        self.keep(m.pid, tid, &comm, &why);
                    }
                }
            }
        }
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
