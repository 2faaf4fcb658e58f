//! What a real run takes before it changes anything, in this order, and gives back after:
//!
//! 1. **the machine lease** ([`crate::lease`]) for the machine-wide state its policy
//!    changes: a second run that needs what a live one holds is refused (or waits) before
//!    it has touched anything;
//! 2. **the stale check**: a journal of a dead run (in this run's state directory, or named
//!    by a dead lease holder) means the machine is not as it was; starting over it would
//!    journal the dead run's changes as "original". The run refuses and names the journal,
//!    or restores it first when asked (`--restore-stale`);
//! 3. **the journal** ([`crate::journal`]), when anything will change;
//! 4. **job cgroups** ([`crate::jobcg`]) for the commands it starts, so nothing of the job
//!    outlives the run, however it ends;
//! 5. **the engine thread's class**: SCHED_FIFO below the job's real-time threads and above
//!    its normal ones (with `SCHED_RESET_ON_FORK`, so nothing it starts inherits it), so
//!    that sampling, the horizon and signals keep their times when the job or the machine
//!    saturates every CPU.
//!
//! Dropping a [`Guard`] undoes the journal and releases the lease, in that order.

use crate::engine::RunPolicy;
use crate::jobcg::{self, JobCgroups};
use crate::journal::{self, Journal};
use crate::lease::{self, Hold, Lease, Want};
use crate::privilege::Privileges;
use crate::sched::{self, Policy};
use crate::{Error, Result, Roots};
use schedkit_core::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `sched_attr.sched_flags`: children (processes and threads) start in SCHED_OTHER.
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// How a run meets other runs and dead runs' leftovers.
#[derive(Clone, Debug, Default)]
pub struct GuardOptions {
    /// Queue behind a live holder of the lease for this long (`None`: refuse at once).
    pub wait: Option<Duration>,
    /// Undo dead runs' journals before starting instead of refusing.
    pub restore_stale: bool,
    /// Leave the job's commands running after the run (no job cgroups, no SIGKILL).
    pub keep_running: bool,
    /// The lease directory (default [`lease::lease_dir`]).
    pub lease_dir: Option<PathBuf>,
    /// The command line, for other runs' messages.
    pub command_line: String,
}

/// What the lease of `policy` covers.
pub fn want_of(policy: &RunPolicy) -> Want {
    match policy {
        RunPolicy::Exclusive(cfg) => Want {
            machine: Some(Hold::Exclusive),
            sysctls: match cfg.rt_throttle {
                crate::exclusive::RtThrottle::Off => vec!["kernel/sched_rt_runtime_us".into()],
                crate::exclusive::RtThrottle::Keep => Vec::new(),
            },
        },
        RunPolicy::Rr { .. } => Want {
            machine: Some(Hold::Shared),
            sysctls: vec!["kernel/sched_rr_timeslice_ms".into()],
        },
        RunPolicy::Gang { .. } | RunPolicy::ProcessFair | RunPolicy::Fair { .. } => Want {
            machine: Some(Hold::Shared),
            sysctls: Vec::new(),
        },
        RunPolicy::Default | RunPolicy::Fifo { .. } => Want::default(),
    }
}

/// What a run holds while it runs.
pub struct Guard {
    pub journal: Option<Journal>,
    pub jobs: Option<JobCgroups>,
    /// Dead runs' journals undone before this run started (`--restore-stale`).
    pub restored: Vec<PathBuf>,
    // Last: released after the journal is undone (fields drop in order).
    pub lease: Lease,
}

/// Dead runs' journals: those that block this run (a dead lease holder's machine-wide
/// changes, when this run changes machine state too), and the others (dead runs in this
/// run's state directory: their jobs may still run, but their changes do not overlap).
fn stale_journals(
    state_dir: &Path,
    lease_dir: &Path,
    roots: &Roots,
    changes_machine: bool,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut blocking, mut other) = (Vec::new(), Vec::new());
    for s in lease::stale(lease_dir, roots) {
        if s.machine_wide && changes_machine {
            blocking.push(s.journal);
        } else {
            other.push(s.journal);
        }
    }
    for j in journal::dead_journals(state_dir, roots) {
        if !blocking.contains(&j) && !other.contains(&j) {
            other.push(j);
        }
    }
    (blocking, other)
}

/// ` --state-dir DIR` when the journals are not in this run's own state directory.
fn restore_hint(journals: &[PathBuf], state_dir: &Path) -> String {
    let dirs: std::collections::BTreeSet<&Path> =
        journals.iter().filter_map(|p| p.parent()).collect();
    match dirs.into_iter().collect::<Vec<_>>().as_slice() {
        [d] if *d != state_dir => format!(" --state-dir {}", d.display()),
        _ => String::new(),
    }
}

/// Takes the lease, checks for leftovers, opens the journal and the job cgroups.
pub fn prepare(
    scenario: &Scenario,
    policy: &RunPolicy,
    roots: &Roots,
    state_dir: &Path,
    o: &GuardOptions,
    warnings: &mut Vec<String>,
) -> Result<Guard> {
    let has_commands = scenario.processes().iter().any(|p| p.command().is_some());
    let want = want_of(policy);
    let journaled = !want.is_empty()
        || matches!(policy, RunPolicy::Fifo { .. } | RunPolicy::Default)
            && has_commands
            && !o.keep_running;
    let lease_dir = o.lease_dir.clone().unwrap_or_else(lease::lease_dir);
    let journal_path =
        journaled.then(|| state_dir.join(format!("journal-{}.jsonl", std::process::id())));
    let lease = lease::acquire(
        &lease_dir,
        lease::Acquire {
            roots,
            want: &want,
            command: o.command_line.clone(),
            journal: journal_path,
            wait: o.wait,
        },
    )?;
    let mut restored = Vec::new();
    if journaled {
        let (blocking, other) = stale_journals(state_dir, &lease_dir, roots, !want.is_empty());
        if !blocking.is_empty() && !o.restore_stale {
            let list: Vec<String> = blocking
                .iter()
                .map(|p| format!("  {}", p.display()))
                .collect();
            return Err(Error::Stale(format!(
                "a schedkit run died without undoing its machine-wide changes (IRQ masks, RT \
                 throttling, other threads' CPUs); its journal(s):\n{}\nstarting over them \
                 would make them permanent: run `schedkit restore{}` first, or pass \
                 --restore-stale",
                list.join("\n"),
                restore_hint(&blocking, state_dir)
            )));
        }
        if !o.restore_stale {
            for j in &other {
                warnings.push(format!(
                    "a dead schedkit run's journal was never undone ({}): its job may still \
                     run; `schedkit restore{}` ends it, or pass --restore-stale",
                    j.display(),
                    restore_hint(std::slice::from_ref(j), state_dir)
                ));
            }
        }
        let all: Vec<PathBuf> = if o.restore_stale {
            blocking.into_iter().chain(other).collect()
        } else {
            Vec::new()
        };
        let dirs: std::collections::BTreeSet<PathBuf> = all
            .iter()
            .filter_map(|p| p.parent().map(Path::to_path_buf))
            .collect();
        for d in dirs {
            for r in journal::restore(&d, roots, false)? {
                if r.owner_alive {
                    continue;
                }
                let failed = r.undone.iter().filter(|u| u.outcome.is_err()).count();
                if failed > 0 {
                    warnings.push(format!(
                        "--restore-stale: {}: {failed} change(s) could not be undone",
                        r.path.display()
                    ));
                }
                restored.push(r.path);
            }
        }
    }
    let mut journal = if journaled {
        Some(Journal::create(state_dir, roots)?)
    } else {
        None
    };
    let jobs = match (journal.as_mut(), has_commands && !o.keep_running) {
        (Some(j), true) => match jobcg::detect(roots) {
            Some((mount, kill)) => match JobCgroups::create(j, &mount, kill) {
                Ok(g) => Some(g),
                Err(e) => {
                    warnings.push(format!(
                        "no job cgroup ({e}): a command's children that leave its process \
                         group can outlive the run"
                    ));
                    None
                }
            },
            None => {
                warnings.push(
                    "no cgroup hierarchy to hold the job (cgroup v2 with cgroup.kill, or a v1 \
                     `pids` hierarchy): a command's children that leave its process group can \
                     outlive the run"
                        .into(),
                );
                None
            }
        },
        _ => None,
    };
    Ok(Guard {
        journal,
        jobs,
        restored,
        lease,
    })
}

/// The engine thread's real-time priority for `policy`: below every real-time job thread,
/// above every normal one. `None`: stay SCHED_OTHER (the lowest job priority is 1, so
/// there is no room below it; exclusive mode places the engine itself).
pub fn engine_priority(policy: &RunPolicy, scenario: &Scenario) -> Option<u32> {
    match policy {
        RunPolicy::Default
        | RunPolicy::Gang { .. }
        | RunPolicy::ProcessFair
        | RunPolicy::Fair { .. } => Some(1),
        RunPolicy::Fifo { priority } | RunPolicy::Rr { priority, .. } => {
            let lowest = match priority {
                Some(p) => *p,
                None => scenario
                    .processes()
                    .iter()
                    .map(|p| (50 - p.priority()).clamp(1, 99) as u32)
                    .min()
                    .unwrap_or(50),
            };
            (lowest > 1).then(|| lowest - 1)
        }
        RunPolicy::Exclusive(_) => None,
    }
}

/// The calling thread at SCHED_FIFO `priority` (reset on fork) until dropped.
pub struct EngineClass(Policy);

impl EngineClass {
    /// Raises the calling thread; `Err` says why it stays where it is.
    pub fn raise(priority: u32) -> std::result::Result<EngineClass, String> {
        let old = sched::get_thread(0).map_err(|e| e.to_string())?;
        if !(Privileges::current().root || Privileges::current().sys_nice) {
            return Err(format!(
                "the engine thread stays SCHED_OTHER ({}): under a saturating load its \
                 samples and the horizon can be late",
                Privileges::HOW_TO_NICE
            ));
        }
        sched::set_thread_with_flags(0, Policy::Fifo { priority }, SCHED_FLAG_RESET_ON_FORK)
            .map_err(|e| format!("the engine thread stays SCHED_OTHER: {e}"))?;
        Ok(EngineClass(old))
    }
}

impl Drop for EngineClass {
    fn drop(&mut self) {
        let _ = sched::set_thread(0, self.0);
    }
}

/// The horizon's guarantee when the engine runs below the job: a thread that sleeps until
/// the horizon (or a stop: a signal, an early end) and then raises the engine thread to
/// SCHED_FIFO 99, so that job threads at a higher real-time priority than the engine (fcfs
/// and rr runs, or a command that raises itself) which keep every CPU it may use busy cannot
/// hold the run past its horizon. It wakes every 50 ms to look at the stop flags: a few
/// microseconds per wake-up at the top priority, the price of ending on time.
pub struct HorizonWatch {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HorizonWatch {
    /// Watches for `deadline` or one of `stops`; boosts thread `engine_tid`. `None` without
    /// the right to use real-time priorities (then there is nothing above the engine to
    /// fear from the job either: it cannot raise itself).
    pub fn start(
        engine_tid: i32,
        deadline: std::time::Instant,
        stops: Vec<Arc<AtomicBool>>,
        signal: &'static AtomicBool,
    ) -> Option<HorizonWatch> {
        let p = Privileges::current();
        if !(p.root || p.sys_nice) {
            return None;
        }
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("schedkit-horizon".into())
            .spawn(move || {
                if sched::set_thread_with_flags(
                    0,
                    Policy::Fifo { priority: 99 },
                    SCHED_FLAG_RESET_ON_FORK,
                )
                .is_err()
                {
                    return;
                }
                loop {
                    if d.load(Ordering::Acquire) {
                        return;
                    }
                    let stop = signal.load(Ordering::Relaxed)
                        || stops.iter().any(|s| s.load(Ordering::Relaxed));
                    let now = std::time::Instant::now();
                    if stop || now >= deadline {
                        let _ = sched::set_thread_with_flags(
                            engine_tid,
                            Policy::Fifo { priority: 99 },
                            SCHED_FLAG_RESET_ON_FORK,
                        );
                        return;
                    }
                    std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
                }
            })
            .ok()?;
        Some(HorizonWatch {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for HorizonWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
