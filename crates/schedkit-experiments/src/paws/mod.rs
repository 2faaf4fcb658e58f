//! `schedkit experiment paws`: seed 001's experiment (Fonseca et al., section 5) on this
//! machine and in the simulator.
//!
//! Task sets come from the paper's generator ([`Seed001`]: `m` cores, `u_i` in [0.1, 0.4],
//! `T_i` in [100, 150] ms, `n_i = x * 3m` threads per parallel region, each job
//! `seq, par(n_i), seq` with its parts summing to `C_i`), `sets` per utilisation window,
//! seeded (set `s` of window `w` uses seed `seed + 1000 w + s`), so every policy runs the
//! very same sets. Windows: the paper's four, read as total utilisation ([0.28, 0.30] ...
//! [0.83, 0.85]), and the same scaled by `m` (`m x` [0.28, 0.30] ...), where the global-EDF
//! bound `U <= m - u_max (m - 1)` (Goossens et al., the paper's [10]) is checked per set and
//! reported.
//!
//! Real runs (one after another through [`Machine::run_tasks`], the policies interleaved per
//! set so that machine noise spreads evenly): `paws`, `gedf`, `ws` on the runtime's real-time
//! pool (one pinned worker per CPU, SCHED_FIFO), and `sched-deadline` (kernel threads under
//! SCHED_DEADLINE); each run releases jobs for `duration` (default 1.5 s: 10 to 15 periods of
//! every task) and waits for the released jobs. Simulated runs: `paws`, `gedf`, `pedf` (and
//! `ws`) over `sim_horizon`.
//!
//! Reported per window and policy: task sets with at least one deadline miss (the paper's
//! Table 1), average migrations and context switches per set (its Figs. 2 and 3; real runs:
//! the kernel's counts for the threads that ran the work, plus for the pool its own
//! user-level counts, charted as the sum), response-time percentiles over all jobs, and for
//! the pool the steals and the preemption latency. [`Plan::new`] checks the options and
//! generates every set, [`run`] runs them into a [`PawsResult`], and [`render`] makes the
//! tables, the charts (Figs. 2 and 3) and the JSON.

mod flags;
pub mod render;

pub use flags::PawsFlags;

use crate::machine::{Machine, TaskRun, TaskRunOptions};
use crate::progress::Progress;
use crate::Error;
use schedkit_core::generate::{scenario as gen_scenario, Seed001};
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, Task};
use schedkit_core::trace::{Event, Tee, TraceSink};
use schedkit_core::Nanos;
use std::collections::HashMap;
use std::time::Duration;

/// The paper's four windows of total utilisation.
pub const WINDOWS: [(f64, f64); 4] = [(0.28, 0.30), (0.58, 0.60), (0.78, 0.80), (0.83, 0.85)];

/// Policies the simulated runs may use.
pub const SIM_POLICIES: [PolicyName; 4] = [
    PolicyName::Paws,
    PolicyName::Gedf,
    PolicyName::Pedf,
    PolicyName::Ws,
];

/// A short run for CI: at most this many sets per window, real runs of 300 ms, simulated
/// runs of 2 s.
pub const QUICK_SETS: usize = 2;
pub const QUICK_DURATION: Nanos = Nanos::from_ms(300);
pub const QUICK_HORIZON: Nanos = Nanos::from_secs(2);

/// Which windows to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSet {
    /// The paper's windows as total utilisation.
    Paper,
    /// The same scaled by the number of cores.
    Scaled,
    Both,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct PawsOptions {
    /// Cores `m` of the generated sets (`None`: this machine's CPUs; real runs use them all).
    pub cores: Option<usize>,
    /// Task sets per window.
    pub sets: usize,
    /// Release window of each real run.
    pub duration: Nanos,
    /// Simulated window of each simulated run.
    pub sim_horizon: Nanos,
    /// Base seed of the generator (and of the victim choice).
    pub seed: u64,
    pub windows: WindowSet,
    /// Policies run on real cores (through [`Machine::run_tasks`]).
    pub real: Vec<PolicyName>,
    /// Policies run in the simulator (of [`SIM_POLICIES`]).
    pub sim: Vec<PolicyName>,
    /// Run a stall witness beside every real run and say which misses the machine's stalls
    /// explain.
    pub stall_witness: bool,
}

/// One utilisation window.
#[derive(Clone, Debug)]
pub struct Window {
    pub label: String,
    /// Total utilisation bounds.
    pub lo: f64,
    pub hi: f64,
    pub scaled: bool,
}

/// Where a policy runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Real,
    Sim,
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Real => "real",
            Engine::Sim => "sim",
        }
    }
}

/// One run of one set under one policy: what it measured (a simulated run puts the
/// simulator's counts where a real run has the kernel's), or why it could not run.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub run: TaskRun,
    /// Why the policy could not run the set (P-EDF: no partition).
    pub rejected: Option<String>,
}

impl Outcome {
    /// Kernel (real) or simulated counts.
    pub fn migrations(&self) -> u64 {
        self.run.kernel_migrations.unwrap_or(0)
    }
    pub fn switches(&self) -> u64 {
        self.run.kernel_switches.unwrap_or(0)
    }
    /// With the pool's own counts (real pool runs only).
    pub fn total_migrations(&self) -> u64 {
        self.migrations() + self.run.user_migrations.unwrap_or(0)
    }
    pub fn total_switches(&self) -> u64 {
        self.switches() + self.run.user_switches.unwrap_or(0)
    }
}

/// Aggregates of one (window, engine, policy) cell.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub sets: usize,
    pub rejected: usize,
    pub sets_missing: usize,
    pub jobs: u64,
    pub misses: u64,
    pub migrations: Vec<u64>,
    pub switches: Vec<u64>,
    pub kernel_migrations: Vec<u64>,
    pub kernel_switches: Vec<u64>,
    pub steals: Vec<u64>,
    pub responses: Vec<u64>,
    pub latency: Vec<u64>,
    pub stages: Vec<[u64; 5]>,
    /// With a stall witness: sets with a miss that no stall explains, and every stall's
    /// lateness (ns).
    pub witnessed: bool,
    pub sets_unexplained: usize,
    pub stalls: Vec<u64>,
}

impl Cell {
    pub fn add(&mut self, outcome: &Outcome) {
        if outcome.rejected.is_some() {
            self.rejected += 1;
            return;
        }
        let o = &outcome.run;
        self.sets += 1;
        self.sets_missing += (o.misses > 0) as usize;
        self.jobs += o.jobs;
        self.misses += o.misses;
        self.migrations.push(outcome.total_migrations());
        self.switches.push(outcome.total_switches());
        self.kernel_migrations.push(outcome.migrations());
        self.kernel_switches.push(outcome.switches());
        if let Some(s) = o.steals {
            self.steals.push(s);
        }
        self.responses.extend(&o.responses);
        self.latency.extend(&o.preemption_latency);
        self.stages.extend(&o.preemption_stages);
        if let Some(u) = o.unexplained_misses {
            self.witnessed = true;
            self.sets_unexplained += (u > 0) as usize;
            self.stalls.extend(&o.stall_lateness);
        }
    }
}

/// One generated set and what every policy did with it.
#[derive(Clone, Debug)]
pub struct SetRun {
    /// Index into [`PawsResult::windows`].
    pub window: usize,
    pub seed: u64,
    pub tasks: Vec<Task>,
    pub gedf_bound_holds: bool,
    /// One per entry of [`PawsResult::engines`].
    pub runs: Vec<Outcome>,
}

/// The checked options and every generated set, before anything runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Cores `m`.
    pub cores: usize,
    pub sets: usize,
    pub seed: u64,
    pub duration: Nanos,
    pub horizon: Nanos,
    pub stall_witness: bool,
    pub windows: Vec<Window>,
    /// Real policies first, then simulated ones.
    pub engines: Vec<(Engine, PolicyName)>,
    /// Per window, its sets (seed, tasks).
    pub task_sets: Vec<Vec<(u64, Vec<Task>)>>,
}

/// Everything the experiment measured.
#[derive(Clone, Debug)]
pub struct PawsResult {
    pub plan: Plan,
    /// Per window, per engine.
    pub cells: Vec<Vec<Cell>>,
    /// Per window, the sets where the global-EDF bound holds.
    pub bound: Vec<usize>,
    pub set_runs: Vec<SetRun>,
    /// Warnings of the real runs, `policy: warning`.
    pub warnings: Vec<String>,
}

impl PawsResult {
    /// Whether the real runs include any.
    pub fn has_real(&self) -> bool {
        self.plan.engines.iter().any(|e| e.0 == Engine::Real)
    }
    /// Whether the simulated runs include any.
    pub fn has_sim(&self) -> bool {
        self.plan.engines.iter().any(|e| e.0 == Engine::Sim)
    }
}

/// The global-EDF bound of the paper's section 2.
pub fn gedf_bound_holds(tasks: &[Task], m: usize) -> bool {
    let u: f64 = tasks.iter().map(|t| t.utilisation()).sum();
    let umax = tasks.iter().map(|t| t.utilisation()).fold(0.0, f64::max);
    u <= m as f64 - umax * (m as f64 - 1.0) && umax <= 1.0
}

/// `list` as policies, each one of `allowed`; `flag` names the option in the error.
pub fn parse_policies(
    list: &[String],
    allowed: &[PolicyName],
    flag: &str,
) -> Result<Vec<PolicyName>, Error> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            PolicyName::parse(s.trim())
                .filter(|p| allowed.contains(p))
                .ok_or_else(|| {
                    Error::BadInput(format!(
                        "{flag}: \"{s}\" is not one of {}",
                        allowed
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
        })
        .collect()
}

fn windows_of(set: WindowSet, m: usize) -> Vec<Window> {
    let mut windows = Vec::new();
    if set != WindowSet::Scaled {
        for &(lo, hi) in &WINDOWS {
            windows.push(Window {
                label: format!("{lo:.2}-{hi:.2}"),
                lo,
                hi,
                scaled: false,
            });
        }
    }
    if set != WindowSet::Paper && !(m == 1 && set == WindowSet::Both) {
        for &(lo, hi) in &WINDOWS {
            windows.push(Window {
                label: format!("{:.2}-{:.2} ({m}x)", lo * m as f64, hi * m as f64),
                lo: lo * m as f64,
                hi: hi * m as f64,
                scaled: true,
            });
        }
    }
    windows
}

impl Plan {
    /// Checks `o` and generates every set: a window the generator cannot reach is bad input,
    /// found before anything runs.
    pub fn new(o: &PawsOptions) -> Result<Plan, Error> {
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
        let m = o.cores.unwrap_or(machine);
        if m == 0 {
            return Err(Error::BadInput("--cores: at least 1".into()));
        }
        if o.sets == 0 || o.duration.0 == 0 || o.sim_horizon.0 == 0 {
            return Err(Error::BadInput(
                "--sets, --duration and --sim-horizon must be greater than zero".into(),
            ));
        }
        if let Some(p) = o.sim.iter().find(|p| !SIM_POLICIES.contains(p)) {
            return Err(Error::BadInput(format!(
                "--sim: {p} is not a simulated policy of this experiment"
            )));
        }
        if !o.real.is_empty() && m != machine {
            return Err(Error::BadInput(format!(
                "--cores {m}: real runs use all {machine} CPUs of this machine; add --sim-only \
                 to simulate {m} cores"
            )));
        }
        if o.real.contains(&PolicyName::SchedDeadline)
            && !schedkit_linux::privilege::Privileges::current().sys_nice
        {
            return Err(Error::Linux(schedkit_linux::Error::Privilege(
                "the sched-deadline baseline needs root or CAP_SYS_NICE (run as root, or leave \
                 it out with --real paws,gedf,ws, or simulate only with --sim-only)"
                    .into(),
            )));
        }
        let windows = windows_of(o.windows, m);
        let mut task_sets = Vec::new();
        for (w, win) in windows.iter().enumerate() {
            let mut v = Vec::new();
            for s in 0..o.sets {
                let seed = o.seed + 1000 * w as u64 + s as u64;
                let tasks = Seed001::new(m, (win.lo / m as f64, win.hi / m as f64), seed)
                    .try_generate()
                    .map_err(Error::BadInput)?;
                v.push((seed, tasks));
            }
            task_sets.push(v);
        }
        let engines = o
            .real
            .iter()
            .map(|&p| (Engine::Real, p))
            .chain(o.sim.iter().map(|&p| (Engine::Sim, p)))
            .collect();
        Ok(Plan {
            cores: m,
            sets: o.sets,
            seed: o.seed,
            duration: o.duration,
            horizon: o.sim_horizon,
            stall_witness: o.stall_witness,
            windows,
            engines,
            task_sets,
        })
    }
}

/// Collects every job's response time from a simulated trace.
#[derive(Default)]
struct Responses {
    open: HashMap<(usize, u64), Nanos>,
    out: Vec<u64>,
}

impl TraceSink for Responses {
    fn record(&mut self, e: &Event) {
        match *e {
            Event::JobRelease { t, task, job, .. } => {
                self.open.insert((task, job), t);
            }
            Event::JobFinish { t, task, job } => {
                if let Some(r) = self.open.remove(&(task, job)) {
                    self.out.push((t - r).0);
                }
            }
            _ => {}
        }
    }
}

fn sim_run(tasks: &[Task], m: usize, policy: PolicyName, horizon: Nanos, seed: u64) -> Outcome {
    let s = gen_scenario("experiment paws", m, policy, horizon, tasks.to_vec())
        .expect("a generated task set is valid")
        .with_seed(seed);
    let mut metrics = Metrics::new(&s, "sim", m);
    let mut resp = Responses::default();
    let stats = {
        let mut tee = Tee(&mut metrics, &mut resp);
        match schedkit_sim::simulate(&s, &mut tee) {
            Ok(st) => st,
            Err(e) => {
                return Outcome {
                    rejected: Some(e.message),
                    ..Outcome::default()
                }
            }
        }
    };
    let r = metrics.finish(stats.end);
    let run = TaskRun {
        jobs: r.summary.jobs,
        misses: r.summary.deadline_misses,
        kernel_migrations: Some(r.summary.migrations),
        kernel_switches: Some(r.summary.context_switches),
        steals: stats
            .policy_counters
            .iter()
            .find(|c| c.0 == "steals")
            .map(|c| c.1),
        responses: resp.out,
        ..TaskRun::default()
    };
    Outcome {
        run,
        rejected: None,
    }
}

/// One real run; its warnings go to `warnings` as `policy: warning`.
fn real_run(
    machine: &dyn Machine,
    plan: &Plan,
    tasks: &[Task],
    policy: PolicyName,
    seed: u64,
    warnings: &mut Vec<String>,
) -> Result<Outcome, Error> {
    let options = TaskRunOptions {
        duration: Duration::from_nanos(plan.duration.0),
        perf: true,
        seed,
        stall_witness: plan.stall_witness,
    };
    match machine.run_tasks(tasks, policy, &options) {
        Ok(r) => {
            warnings.extend(r.warnings.iter().map(|w| format!("{policy}: {w}")));
            Ok(Outcome {
                run: r,
                rejected: None,
            })
        }
        // The kernel's admission control refused the set (its bandwidth with the budget
        // margins is over what it admits): the run is reported as rejected, like a set P-EDF
        // cannot partition.
        Err(e) if e.is_bad_input() && policy == PolicyName::SchedDeadline => Ok(Outcome {
            rejected: Some(e.to_string()),
            ..Outcome::default()
        }),
        Err(e) => Err(e),
    }
}

/// Runs every set of `plan` under every policy, the policies interleaved per set.
pub fn run(
    plan: Plan,
    machine: &dyn Machine,
    progress: &dyn Progress,
) -> Result<PawsResult, Error> {
    let nw = plan.windows.len();
    progress.start((nw * plan.sets * plan.engines.len()) as u64);
    let mut cells = vec![vec![Cell::default(); plan.engines.len()]; nw];
    let mut bound = vec![0; nw];
    let mut set_runs = Vec::new();
    let mut warnings = Vec::new();
    if plan.engines.iter().any(|(e, _)| *e == Engine::Real) {
        warnings.extend(crate::machine::narrowed_warning("the real runs' pool"));
    }
    for (w, win) in plan.windows.iter().enumerate() {
        for (seed, tasks) in &plan.task_sets[w] {
            let holds = gedf_bound_holds(tasks, plan.cores);
            bound[w] += holds as usize;
            let mut runs = Vec::new();
            for (e, &(engine, policy)) in plan.engines.iter().enumerate() {
                progress.message(&format!(
                    "{} · set {seed} · {} {policy}",
                    win.label,
                    engine.as_str()
                ));
                let o = match engine {
                    Engine::Real => real_run(machine, &plan, tasks, policy, *seed, &mut warnings)?,
                    Engine::Sim => sim_run(tasks, plan.cores, policy, plan.horizon, *seed),
                };
                cells[w][e].add(&o);
                runs.push(o);
                progress.step();
            }
            set_runs.push(SetRun {
                window: w,
                seed: *seed,
                tasks: tasks.clone(),
                gedf_bound_holds: holds,
                runs,
            });
        }
    }
    progress.finish();
    Ok(PawsResult {
        plan,
        cells,
        bound,
        set_runs,
        warnings,
    })
}
