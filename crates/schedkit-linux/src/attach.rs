//! Work already running: `schedkit run --pid PID`, `--cgroup PATH`, `--unit NAME` with the
//! flags of one-command mode ([`crate::oneshot`]) or `--exclusive`, for as long as schedkit
//! runs (`--for`, Ctrl-C, SIGTERM, or until the work is gone), then undone.
//!
//! ## What is changed, and how it reaches what the work starts later
//!
//! - **Class, nice, CPUs** (`--policy`, `--priority`, `--nice`, `--cpus`): every thread of
//!   the target (the process and its descendants; or every process of the cgroup) gets them
//!   by `sched_setattr` / `sched_setaffinity`. A thread or child created later inherits them
//!   from its creator, and schedkit polls (`/proc/PID/task`, the children lists, or the
//!   cgroup's `cgroup.procs`, every [`POLL`]) to set any that started from a thread not yet
//!   reached.
//! - **Weight** (`--weight`): `--pid` moves the target's tasks into a cgroup of schedkit's
//!   own ([`crate::oneshot::WeightGroup`]) whose cpu weight is the one asked for; children
//!   are born inside. `--cgroup` / `--unit` write the existing group's own `cpu.weight` (v2)
//!   or `cpu.shares` (v1).
//! - **Exclusive mode** (`--exclusive`): [`crate::exclusive`] as for a job schedkit starts:
//!   every other thread and IRQ moves to the system CPUs, the target's threads are pinned one
//!   per job CPU at SCHED_FIFO (a thread that already runs a real-time class keeps it, and a
//!   warning says so), and new threads elsewhere are swept off the job CPUs as they appear.
//!
//! ## Not schedkit's to end
//!
//! The work is *attached*, not owned: no job cgroup, no signal, ever. The journal's first
//! entry names it ([`Entry::Attached`]); undo (schedkit's exit, or `schedkit restore` after
//! a `kill -9` of schedkit) gives every thread its class and CPUs back (entries carry each
//! thread's start time: a thread that is gone, or a recycled id, is left alone), moves tasks
//! out of schedkit's cgroup into the one the target came from, and leaves the work running.
//!
//! A thread born after the target was changed inherited the change: it is journaled with
//! the *original* settings of its process (or of the nearest ancestor schedkit changed), so
//! undo gives it what it would have had without schedkit.
//!
//! schedkit's own thread runs SCHED_FIFO (reset on fork) one above the work's real-time
//! priority (1 for other classes, 10 on the system CPUs in exclusive mode) while it waits, so
//! a saturating real-time target cannot delay its end and undo.
//!
//! ## systemd units
//!
//! `--unit NAME` asks `systemctl show -p ControlGroup --value NAME` for the unit's cgroup
//! (relative to the hierarchy root) and then acts as `--cgroup`. A machine whose PID 1 is not
//! systemd (`/run/systemd/system` missing, as sd_booted(3) checks) is refused with exit 3.

use crate::affinity::{self, CpuSet};
use crate::cgroup::{self, CpuController};
use crate::exclusive::{ExclusiveConfig, ExclusiveReport, Isolation};
use crate::journal::{Entry, Journal, Undone};
use crate::oneshot::{self, Plan};
use crate::procfs::{self, ThreadStat};
use crate::sched::{self, Policy};
use crate::topo::Topology;
use crate::{Error, Result, Roots};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often new threads and children are looked for.
pub const POLL: Duration = Duration::from_millis(50);

/// What to attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A process, its threads and its descendants.
    Pid(i32),
    /// An existing cgroup: an absolute directory under a cgroup mount, or a path relative
    /// to the hierarchies' roots (`/system.slice/foo.service`).
    Cgroup(PathBuf),
    /// A systemd unit's cgroup.
    Unit(String),
}

/// Options of [`run`].
pub struct AttachOptions {
    pub target: Target,
    pub plan: Plan,
    /// Exclusive mode's settings (with `plan.exclusive`).
    pub exclusive: ExclusiveConfig,
    /// Stop after this long; `None`: at a signal or when the work is gone.
    pub duration: Option<Duration>,
    pub guard: crate::guard::GuardOptions,
    pub roots: Roots,
    pub state_dir: PathBuf,
    /// Set to stop (SIGINT/SIGTERM set [`crate::engine::signal_flag`] too).
    pub stop: Arc<AtomicBool>,
    /// Called with what the user needs to know once the changes are in force.
    pub notice: Option<crate::engine::Notice>,
}

/// What an attach did.
#[derive(Debug, Default)]
pub struct AttachReport {
    /// `process 123 (spin)` or `cgroup /sys/fs/cgroup/cpu/foo`.
    pub target: String,
    /// Why it ended: `--for elapsed`, `signal`, `the process exited`, `the cgroup is gone`.
    pub ended_by: String,
    /// Threads changed (class, CPUs, or cgroup), of how many processes.
    pub threads: usize,
    pub processes: usize,
    pub exclusive: Option<ExclusiveReport>,
    pub warnings: Vec<String>,
    pub undone: Vec<Undone>,
}

/// The process ids below `pid` and `pid` itself (through `/proc/PID/task/TID/children`).
pub fn descendants(roots: &Roots, pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < 65_536 {
        let p = out[i];
        for tid in procfs::tids(roots, p) {
            let f = roots.proc.join(format!("{p}/task/{tid}/children"));
            if let Ok(s) = std::fs::read_to_string(f) {
                out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
            }
        }
        i += 1;
    }
    out
}

fn parent_of(roots: &Roots, pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(roots.proc.join(format!("{pid}/status"))).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether PID 1 is systemd (sd_booted(3)).
pub fn systemd_runs(roots: &Roots) -> bool {
    let _ = roots;
    Path::new("/run/systemd/system").is_dir()
}

/// A unit's cgroup path relative to the hierarchy root (`/system.slice/nginx.service`).
pub fn unit_cgroup(roots: &Roots, unit: &str) -> Result<PathBuf> {
    if !systemd_runs(roots) {
        let init = std::fs::read_to_string(roots.proc.join("1/comm")).unwrap_or_default();
        return Err(Error::Privilege(format!(
            "--unit {unit}: systemd is not running on this machine (PID 1 is `{}`; \
             /run/systemd/system is missing): give the work's cgroup with --cgroup PATH or a \
             process with --pid",
            init.trim()
        )));
    }
    let out = std::process::Command::new("systemctl")
        .args(["show", "-p", "ControlGroup", "--value", "--", unit])
        .output()
        .map_err(|e| Error::io("run systemctl show", e))?;
    let cg = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || cg.is_empty() {
        return Err(Error::Input(format!(
            "--unit {unit}: systemd knows no running unit of that name (its ControlGroup is \
             empty; `systemctl status {unit}`){}",
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .next()
                .map(|l| format!(": {l}"))
                .unwrap_or_default()
        )));
    }
    Ok(PathBuf::from(cg))
}

/// A cgroup target resolved: its directory (for its members) and, when a weight is asked
/// for, the directory of the same group in the cpu controller's hierarchy.
struct Group {
    dir: PathBuf,
    cpu_dir: Option<(CpuController, PathBuf)>,
}

fn resolve_group(roots: &Roots, path: &Path, want_cpu: bool) -> Result<Group> {
    let mounts = crate::jobcg::mounts(roots);
    // Absolute under a mount: that hierarchy, and the path within it.
    let (dir, rel) = match mounts
        .iter()
        .find(|m| path.starts_with(&m.path) && path != m.path)
    {
        Some(m) => (
            path.to_path_buf(),
            path.strip_prefix(&m.path).expect("prefix").to_path_buf(),
        ),
        None => {
            let rel = path.strip_prefix("/").unwrap_or(path).to_path_buf();
            if rel.as_os_str().is_empty() {
                return Err(Error::Input(
                    "--cgroup /: the root cgroup is the whole machine; name a group below it"
                        .into(),
                ));
            }
            // The first hierarchy that has it (v2 first: it holds processes whole).
            let mut ordered: Vec<&crate::jobcg::Mount> = mounts.iter().filter(|m| m.v2).collect();
            ordered.extend(mounts.iter().filter(|m| !m.v2));
            let Some(m) = ordered.into_iter().find(|m| m.path.join(&rel).is_dir()) else {
                return Err(Error::Input(format!(
                    "--cgroup {}: no such cgroup under any cgroup mount ({})",
                    path.display(),
                    mounts
                        .iter()
                        .map(|m| m.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            (m.path.join(&rel), rel)
        }
    };
    if !dir.is_dir() {
        return Err(Error::Input(format!(
            "--cgroup {}: not a cgroup directory",
            path.display()
        )));
    }
    let cpu_dir = if want_cpu {
        let ctl = cgroup::detect(roots).ok_or_else(|| {
            Error::Privilege("--weight: no cgroup hierarchy has the cpu controller".into())
        })?;
        let d = ctl.mount().join(&rel);
        if !d.is_dir() {
            return Err(Error::Input(format!(
                "--weight: the group {} has no directory in the cpu controller's hierarchy ({} \
                 is missing)",
                rel.display(),
                d.display()
            )));
        }
        Some((ctl, d))
    } else {
        None
    };
    Ok(Group { dir, cpu_dir })
}

/// The class and CPUs a thread had before schedkit (or its creator) changed them.
#[derive(Clone, Debug)]
struct Original {
    class: Policy,
    cpus: CpuSet,
}

struct Attached {
    roots: Roots,
    plan: Plan,
    /// (tid, start time) already handled.
    seen: HashSet<(i32, u64)>,
    /// Per process: what its first thread had when schedkit first saw it.
    originals: HashMap<i32, Original>,
    /// Processes journaled as attached.
    processes: HashSet<i32>,
    weight_group: Option<oneshot::WeightGroup>,
    /// Exclusive mode: the job CPUs to pin threads on, round robin.
    job_cpus: Vec<usize>,
    next_pin: usize,
    kept_rt: HashSet<i32>,
    threads: usize,
    warnings: Vec<String>,
}

impl Attached {
    /// The original settings for a thread of `pid` seen now: its process's, else its nearest
    /// changed ancestor's (it inherited our change), else its own current ones.
    fn original_for(&self, pid: i32, tid: i32, first_pass: bool) -> Result<Original> {
        let current = || -> Result<Original> {
            Ok(Original {
                class: sched::get_thread(tid)?,
                cpus: affinity::get_thread(tid)?,
            })
        };
        if first_pass {
            return current();
        }
        let mut p = Some(pid);
        for _ in 0..64 {
            let Some(q) = p.filter(|q| *q > 1) else { break };
            if let Some(o) = self.originals.get(&q) {
                return Ok(o.clone());
            }
            p = parent_of(&self.roots, q);
        }
        current()
    }

    /// Applies the plan to every thread of `pids` not handled yet.
    fn pass(&mut self, journal: &mut Journal, pids: &[i32], first_pass: bool) -> Result<()> {
        for &pid in pids {
            for tid in procfs::tids(&self.roots, pid) {
                let Ok(st) = ThreadStat::read(&self.roots, pid, tid) else {
                    continue; // gone meanwhile
                };
                if st.is_kthread() || !self.seen.insert((tid, st.starttime)) {
                    continue;
                }
                let orig = match self.original_for(pid, tid, first_pass) {
                    Ok(o) => o,
                    Err(_) => continue, // exited between the read and the query
                };
                if !self.processes.contains(&pid) {
                    // The process itself, before anything of it changes.
                    let pst = ThreadStat::read(&self.roots, pid, pid).unwrap_or(st.clone());
                    journal.record(Entry::Attached {
                        pid,
                        starttime: pst.starttime,
                        comm: pst.comm.clone(),
                    })?;
                    self.processes.insert(pid);
                }
                self.originals.entry(pid).or_insert_with(|| orig.clone());
                match self.thread(journal, pid, tid, &st, &orig) {
                    Ok(()) => self.threads += 1,
                    // Exited meanwhile.
                    Err(e) if e.errno() == Some(libc::ESRCH) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    fn thread(
        &mut self,
        journal: &mut Journal,
        pid: i32,
        tid: i32,
        st: &ThreadStat,
        orig: &Original,
    ) -> Result<()> {
        if let Some(g) = &self.weight_group {
            // v1 takes threads one by one; v2 whole processes (the first thread moves it).
            if matches!(g.ctl, CpuController::V1(_)) || tid == pid {
                g.attach(tid)?;
            }
        }
        let cur_class = sched::get_thread(tid)?;
        let cur_cpus = affinity::get_thread(tid)?;
        let (cpus, class) = if self.plan.exclusive {
            let own_rt = matches!(
                cur_class,
                Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. }
            );
            let cpu = self.job_cpus[self.next_pin % self.job_cpus.len()];
            self.next_pin += 1;
            let class = if own_rt {
                // The work chose a real-time class itself: pinned, but its choice is kept.
                if Some(cur_class) != self.plan.class && self.kept_rt.insert(pid) {
                    self.warnings.push(format!(
                        "process {pid} ({}): kept its own {} (exclusive mode gives {} only to \
                         threads that chose no real-time class)",
                        st.comm,
                        cur_class.name_with_priority(),
                        self.plan
                            .class
                            .map_or(String::new(), |c| c.name_with_priority())
                    ));
                }
                None
            } else {
                self.plan.class
            };
            (Some(CpuSet::single(cpu)), class)
        } else if self.plan.nice_only {
            let nice = match self.plan.class {
                Some(Policy::Other { nice }) => nice,
                _ => 0,
            };
            let class = match cur_class {
                Policy::Other { .. } => Some(Policy::Other { nice }),
                Policy::Batch { .. } => Some(Policy::Batch { nice }),
                other => {
                    if self.kept_rt.insert(pid) {
                        self.warnings.push(format!(
                            "process {pid} ({}): runs {}, which has no nice value: --nice left \
                             it as it is",
                            st.comm,
                            other.name_with_priority()
                        ));
                    }
                    None
                }
            };
            (self.plan.cpus.clone(), class)
        } else {
            (self.plan.cpus.clone(), self.plan.class)
        };
        // Journaled whenever the thread's original differs from what it gets, even when it
        // has it already: a thread born after the change inherited it, and undo must give it
        // its elders' original, not leave the inherited change behind.
        if let Some(c) = cpus.filter(|c| *c != cur_cpus || *c != orig.cpus) {
            journal.record(Entry::Affinity {
                pid,
                tid,
                starttime: st.starttime,
                old: orig.cpus.clone(),
            })?;
            if c != cur_cpus {
                affinity::set_thread(tid, &c)
                    .map_err(|e| oneshot::privilege_of(e, "set the CPUs of"))?;
            }
        }
        let flags = self.plan.sched_flags();
        if let Some(c) = class.filter(|c| *c != cur_class || *c != orig.class || flags != 0) {
            journal.record(Entry::Sched {
                pid,
                tid,
                starttime: st.starttime,
                old: orig.class,
            })?;
            if c != cur_class || flags != 0 {
                oneshot::set_class(tid, c, flags)
                    .map_err(|e| oneshot::privilege_of(e, "set the scheduling class of"))?;
            }
        }
        Ok(())
    }
}

/// A target resolved: its description, its cgroup, or its process and start time.
type Resolved = (String, Option<Group>, Option<(i32, u64)>);

/// What `target` names: a description, the cgroup (for `--cgroup`, `--unit`), or the
/// process and its start time (for `--pid`). Nothing changes yet.
fn resolve_target(roots: &Roots, target: &Target, want_weight: bool) -> Result<Resolved> {
    let me = std::process::id() as i32;
    Ok(match target {
        Target::Pid(pid) => {
            let st = ThreadStat::read(roots, *pid, *pid)
                .map_err(|_| Error::Input(format!("--pid {pid}: no such process")))?;
            if *pid == me {
                return Err(Error::Input("--pid: that is schedkit itself".into()));
            }
            if st.is_kthread() {
                return Err(Error::Input(format!(
                    "--pid {pid}: `{}` is a kernel thread; schedkit attaches to user processes",
                    st.comm
                )));
            }
            if st.state == 'Z' {
                return Err(Error::Input(format!(
                    "--pid {pid}: the process has exited (zombie)"
                )));
            }
            (
                format!("process {pid} ({})", st.comm),
                None,
                Some((*pid, st.starttime)),
            )
        }
        Target::Cgroup(p) => {
            let g = resolve_group(roots, p, want_weight)?;
            (format!("cgroup {}", g.dir.display()), Some(g), None)
        }
        Target::Unit(u) => {
            let rel = unit_cgroup(roots, u)?;
            let g = resolve_group(roots, &rel, want_weight)?;
            (
                format!("unit {u} (cgroup {})", g.dir.display()),
                Some(g),
                None,
            )
        }
    })
}

/// `--weight`: an existing group's own weight file (journaled), or for `--pid` a group of
/// schedkit's own whose tasks go back to the process's cgroup at undo.
fn apply_weight(
    roots: &Roots,
    journal: &mut Journal,
    w: u64,
    group: Option<&Group>,
    pid_target: Option<(i32, u64)>,
) -> Result<Option<oneshot::WeightGroup>> {
    match (group, pid_target) {
        (Some(g), _) => {
            let (ctl, d) = g.cpu_dir.as_ref().expect("resolved with want_cpu");
            let file = d.join(match ctl {
                CpuController::V2(_) => "cpu.weight",
                CpuController::V1(_) => "cpu.shares",
            });
            journal.write_file(&file, &ctl.weight_value(w).to_string())?;
            Ok(None)
        }
        (None, Some((pid, _))) => {
            let ctl = cgroup::detect(roots)
                .ok_or_else(|| Error::Privilege("--weight: no cpu controller".into()))?;
            let rel = cgroup::cgroup_of(roots, &ctl, pid).unwrap_or_else(|| "/".into());
            let back = ctl.mount().join(rel.strip_prefix("/").unwrap_or(&rel));
            Ok(Some(oneshot::WeightGroup::create(
                roots,
                journal,
                w,
                Some(back),
            )?))
        }
        (None, None) => Ok(None),
    }
}

/// Why the attach ends now, if it does: a signal, `--for` elapsed, or the work gone.
fn end_of(
    o: &AttachOptions,
    t0: Instant,
    roots: &Roots,
    group: Option<&Group>,
    pid_target: Option<(i32, u64)>,
) -> Option<&'static str> {
    if crate::engine::signal_flag().load(Ordering::Relaxed) || o.stop.load(Ordering::Relaxed) {
        return Some("a signal");
    }
    if o.duration.is_some_and(|d| t0.elapsed() >= d) {
        return Some("--for elapsed");
    }
    match (group, pid_target) {
        (None, Some((pid, start))) => {
            let alive = ThreadStat::read(roots, pid, pid)
                .is_ok_and(|s| s.starttime == start && s.state != 'Z');
            (!alive).then_some("the process exited")
        }
        (Some(g), _) if !g.dir.is_dir() => Some("the cgroup is gone"),
        _ => None,
    }
}

/// The lease (exclusive: the whole machine; otherwise shared, like any run that changes
/// machine state beside others), dead runs' leftovers, the journal. The scenario has no
/// process: guard::prepare then opens no job cgroup (the work is not schedkit's).
fn open_guard(
    o: &AttachOptions,
    roots: &Roots,
    warnings: &mut Vec<String>,
) -> Result<(Journal, crate::lease::Lease)> {
    let policy = if o.plan.exclusive {
        crate::engine::RunPolicy::Exclusive(o.exclusive.clone())
    } else {
        // Any policy whose lease is `Shared` (crate::guard::want_of).
        crate::engine::RunPolicy::ProcessFair
    };
    let scenario = schedkit_core::scenario::Scenario::builder("command line")
        .with_policy(schedkit_core::scenario::PolicySpec::new(
            schedkit_core::scenario::PolicyName::Default,
        ))
        .with_horizon(schedkit_core::Nanos(u64::MAX / 4))
        .build()
        .expect("an empty scenario with a positive horizon is valid");
    let guard = crate::guard::prepare(&scenario, &policy, roots, &o.state_dir, &o.guard, warnings)?;
    let crate::guard::Guard { journal, lease, .. } = guard;
    if let Some(w) = &lease.warning {
        warnings.push(w.clone());
    }
    let journal = journal.ok_or_else(|| {
        Error::Privilege("no journal could be opened, so no change could be undone".into())
    })?;
    Ok((journal, lease))
}

/// schedkit's own thread above the work, so that polls, the end and the undo keep their
/// times when the work saturates its CPUs at a real-time priority (it sleeps between polls:
/// microseconds every POLL). Not inherited by anything (SCHED_RESET_ON_FORK).
fn own_priority(plan: &Plan) -> u32 {
    match plan.class {
        _ if plan.exclusive => 10, // on the system CPUs, as the engine in exclusive mode
        Some(Policy::Fifo { priority } | Policy::Rr { priority }) => (priority + 1).min(99),
        _ => 1,
    }
}

/// Exclusive mode: plan, exempt the work (`members`), move the rest of the machine off.
fn isolate(
    o: &AttachOptions,
    roots: &Roots,
    members: &[i32],
    journal: &mut Journal,
) -> Result<Isolation> {
    let topo = Topology::read(roots)?;
    let mut cfg = o.exclusive.clone();
    if let Some(Policy::Fifo { priority }) = o.plan.class {
        cfg.priority = priority;
    }
    let mut iso = Isolation::plan(&topo, roots, &cfg)?;
    for p in members {
        iso.exempt(*p);
    }
    // schedkit waits on the system CPUs, out of the work's way.
    let _ = affinity::set_thread(0, &iso.system);
    iso.apply(journal, &cfg)?;
    Ok(iso)
}

/// Attaches, holds until the end (see [`AttachOptions`]), undoes, reports.
pub fn run(mut o: AttachOptions) -> Result<AttachReport> {
    let roots = o.roots.clone();
    let me = std::process::id() as i32;
    let (desc, group, pid_target) = resolve_target(&roots, &o.target, o.plan.weight.is_some())?;
    let members = |roots: &Roots| -> Vec<i32> {
        match (&group, pid_target) {
            (Some(g), _) => {
                let mut v = crate::jobcg::members(&g.dir);
                v.retain(|p| *p != me);
                v
            }
            (None, Some((pid, _))) => descendants(roots, pid),
            (None, None) => Vec::new(),
        }
    };

    let mut warnings = Vec::new();
    let (mut journal, lease) = open_guard(&o, &roots, &mut warnings)?;

    let mut at = Attached {
        roots: roots.clone(),
        plan: o.plan.clone(),
        seen: HashSet::new(),
        originals: HashMap::new(),
        processes: HashSet::new(),
        weight_group: None,
        job_cpus: Vec::new(),
        next_pin: 0,
        kept_rt: HashSet::new(),
        threads: 0,
        warnings: Vec::new(),
    };
    let _own_class = match crate::guard::EngineClass::raise(own_priority(&o.plan)) {
        Ok(c) => Some(c),
        Err(m) => {
            warnings.push(m);
            None
        }
    };
    let mut isolation: Option<Isolation> = None;
    let mut ended_by = String::new();
    let result: Result<()> = (|| {
        if let Some(w) = o.plan.weight {
            at.weight_group = apply_weight(&roots, &mut journal, w, group.as_ref(), pid_target)?;
        }
        if o.plan.exclusive {
            let iso = isolate(&o, &roots, &members(&roots), &mut journal)?;
            at.job_cpus = iso.job.iter().collect();
            isolation = Some(iso);
        }
        at.pass(&mut journal, &members(&roots), true)?;
        if let Some(cb) = o.notice.as_mut() {
            cb(&format!(
                "{desc}: {} ({} thread(s) of {} process(es)); until {}",
                o.plan.describe(),
                at.threads,
                at.processes.len(),
                match o.duration {
                    Some(d) => format!("{} s have passed, Ctrl-C, or it ends", d.as_secs_f64()),
                    None => "Ctrl-C (or SIGTERM), or it ends".into(),
                }
            ));
        }
        let t0 = Instant::now();
        let mut last_sweep = Instant::now();
        loop {
            if let Some(why) = end_of(&o, t0, &roots, group.as_ref(), pid_target) {
                ended_by = why.into();
                break;
            }
            let now_members = members(&roots);
            if let Some(iso) = isolation.as_mut() {
                for p in &now_members {
                    iso.exempt(*p);
                }
            }
            at.pass(&mut journal, &now_members, false)?;
            if let Some(iso) = isolation.as_mut() {
                if last_sweep.elapsed() >= Duration::from_millis(500) {
                    last_sweep = Instant::now();
                    iso.sweep(&mut journal)?;
                }
            }
            std::thread::sleep(POLL);
        }
        Ok(())
    })();
    // A last sweep: threads born since the previous one are journaled too.
    if let Some(iso) = isolation.as_mut() {
        let _ = iso.final_sweep(&mut journal);
    }
    let undone = journal.finish();
    if let Some(iso) = isolation.as_mut() {
        iso.repair_after_undo();
    }
    drop(lease);
    result?;
    warnings.append(&mut at.warnings);
    let mut exclusive = isolation.map(|i| i.report);
    if let Some(x) = exclusive.as_mut() {
        warnings.append(&mut x.warnings);
    }
    Ok(AttachReport {
        target: desc,
        ended_by,
        threads: at.threads,
        processes: at.processes.len(),
        exclusive,
        warnings,
        undone,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_start_with_the_process() {
        let me = std::process::id() as i32;
        assert_eq!(descendants(&Roots::host(), me).first(), Some(&me));
    }

    #[test]
    fn unit_refused_without_systemd() {
        if systemd_runs(&Roots::host()) {
            eprintln!("skipped: systemd runs here");
            return;
        }
        match unit_cgroup(&Roots::host(), "ssh.service") {
            Err(Error::Privilege(m)) => assert!(m.contains("systemd is not running"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
