//! What an experiment needs from the machine it runs on, beyond the library: the real engine
//! and this program's own executable for helper processes (spinners, hogs, the `ctl` client).
//! The binary implements [`Machine`]; the experiments take it as `&dyn Machine`, so they run
//! from other Rust code too, and tests can stand in for the real engine.

use crate::Error;
use schedkit_core::scenario::{PolicyName, Scenario, Task};
use schedkit_linux::engine::{RunOptions, RunOutcome};
use std::path::PathBuf;
use std::time::Duration;

/// The real engine and the helper executable.
pub trait Machine: Sync {
    /// Runs `scenario` on this machine's cores (`schedkit run`'s engine). An interrupted run
    /// is returned as [`Error::Interrupted`].
    fn run(&self, scenario: &Scenario, options: RunOptions) -> Result<RunOutcome, Error>;

    /// The executable that serves the experiments' hidden helper flags (`--hog`, `--spin`,
    /// `ctl`): the `schedkit` binary itself.
    fn helper_exe(&self) -> Result<PathBuf, Error>;

    /// Runs a periodic task set on every CPU of this machine under `policy` (one of the
    /// real task-set policies: `sched-deadline`, or `paws`, `gedf`, `ws` on the runtime's
    /// real-time pool), as `schedkit run` runs a `[[task]]` scenario
    /// ([`schedkit_runtime::tasks`], which the default calls; a test may stand in). A set
    /// the kernel's admission control refuses is bad input ([`Error::is_bad_input`]).
    fn run_tasks(
        &self,
        tasks: &[Task],
        policy: PolicyName,
        o: &TaskRunOptions,
    ) -> Result<TaskRun, Error> {
        let options = schedkit_runtime::tasks::RealOptions {
            duration: o.duration,
            perf: o.perf,
            seed: o.seed,
            stall_witness: o.stall_witness,
        };
        Ok(schedkit_runtime::tasks::run_real(tasks, policy, &options)?.into())
    }
}

/// Options of a real task-set run ([`Machine::run_tasks`]).
#[derive(Clone, Debug)]
pub struct TaskRunOptions {
    /// How long jobs are released; the run then waits for the released jobs.
    pub duration: Duration,
    /// Read the kernel's migration and context-switch counts (perf).
    pub perf: bool,
    /// Victim-choice seed of the pool (rule E).
    pub seed: u64,
    /// Run a stall witness beside the set (`schedkit_linux::stall`): its wake-ups count in
    /// the kernel context switches of whatever it preempts.
    pub stall_witness: bool,
}

/// What a real task-set run measured ([`Machine::run_tasks`]).
#[derive(Clone, Debug, Default)]
pub struct TaskRun {
    /// Jobs released, and those that finished after their deadline.
    pub jobs: u64,
    pub misses: u64,
    /// Kernel counts of every thread that ran the work (`None`: perf refused).
    pub kernel_migrations: Option<u64>,
    pub kernel_switches: Option<u64>,
    /// The pool's own counts (`None` for sched-deadline, which has no user-level scheduler).
    pub user_migrations: Option<u64>,
    pub user_switches: Option<u64>,
    pub steals: Option<u64>,
    /// Every job's response time (release to finish), ns.
    pub responses: Vec<u64>,
    /// Release to first instruction of each preempting job (pool only), ns.
    pub preemption_latency: Vec<u64>,
    /// The same preemptions split into stages (timer, request, reach, pick, switch), ns.
    pub preemption_stages: Vec<[u64; 5]>,
    /// With a stall witness: the misses its stalls do not explain, and how late it woke in
    /// each stall (ns).
    pub unexplained_misses: Option<u64>,
    pub stall_lateness: Vec<u64>,
    /// What the run warns about (perf refused, a horizon overrun).
    pub warnings: Vec<String>,
}

impl From<schedkit_runtime::tasks::RealRun> for TaskRun {
    fn from(r: schedkit_runtime::tasks::RealRun) -> TaskRun {
        TaskRun {
            jobs: r.jobs.len() as u64,
            misses: r.misses(),
            kernel_migrations: r.kernel_migrations,
            kernel_switches: r.kernel_switches,
            user_migrations: r.user_migrations,
            user_switches: r.user_switches,
            steals: r.steals,
            responses: r.jobs.iter().map(|j| j.response()).collect(),
            unexplained_misses: r.stalls.is_some().then(|| r.unexplained_misses()),
            stall_lateness: r.stalls.iter().flatten().map(|s| s.late_ns).collect(),
            preemption_latency: r.preemption_latency,
            preemption_stages: r.preemption_stages,
            warnings: r.warnings,
        }
    }
}

/// The CPUs this process may use (its affinity, among the online ones) and the online count.
pub fn allowed_cpus() -> (schedkit_linux::affinity::CpuSet, usize) {
    let online = schedkit_linux::topo::Topology::host()
        .map(|t| t.online)
        .unwrap_or_default();
    let allowed = if online.is_empty() {
        schedkit_linux::affinity::get_thread(0).unwrap_or_default()
    } else {
        schedkit_linux::honest::allowed_cpus(&online)
    };
    (allowed, online.len())
}

/// A warning when this process may use fewer CPUs than are online (a taskset, or a cpuset of
/// its cgroup, perhaps left by another run): an experiment that starts one worker per CPU
/// then runs on fewer, and a reader of its numbers must know.
pub fn narrowed_warning(what: &str) -> Option<String> {
    let (allowed, online) = allowed_cpus();
    (online > allowed.len()).then(|| {
        format!(
            "{what} on {} CPU(s): this process may use only CPUs {} of the {online} online \
             (a taskset, or a cpuset of its cgroup)",
            allowed.len(),
            allowed.to_list()
        )
    })
}
