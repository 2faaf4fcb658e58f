//! `[[task]]` scenarios on real cores (`schedkit run`), and the real half of
//! `schedkit experiment paws`: periodic fork-join tasks (seed 001) under
//!
//! - `sched-deadline`: every task's master and parallel threads as kernel threads under
//!   SCHED_DEADLINE ([`schedkit_linux::deadline`]);
//! - `paws`, `gedf`, `ws`: the user-space real-time pool of `schedkit_runtime::paws`, one pinned
//!   worker per CPU, through its harness (`paws::harness::run_taskset`).
//!
//! Both give per-job release/start/finish; [`report_of`] folds them into the report `sim`
//! prints (the same `Metrics` code: jobs, deadline misses, worst response per task), with the
//! measured CPU time, migrations and context switches filled in. What the counts are differs
//! by engine, and the table after the report says which: for `sched-deadline` the kernel's
//! counts for the task's threads (perf software counters); for the pool, per task the pool's
//! own user-level counts (a thread run on another core than where it was spawned, a job resumed
//! on another core; fiber switch-ins), and in the summary those plus the kernel's counts for the
//! worker threads.

use crate::failure::{Failure, EXIT_BAD_INPUT};
use crate::output;
use crate::output::ReportArgs;
use schedkit_core::report::{MeasuredTask, Metrics, Report};
use schedkit_core::scenario::{PolicyName, Scenario, Task};
use schedkit_core::trace::{Event, TraceSink};
use schedkit_core::Nanos;
use schedkit_linux::deadline::{self, DeadlineOptions};
use schedkit_linux::stall::{explains_miss, Stall};
use schedkit_runtime::paws::harness::{self, HarnessOpts};
use schedkit_runtime::paws::Mode;
use std::time::Duration;

/// Policies a `[[task]]` scenario runs under in `schedkit run`.
pub const REAL_TASK_POLICIES: [PolicyName; 4] = [
    PolicyName::SchedDeadline,
    PolicyName::Paws,
    PolicyName::Gedf,
    PolicyName::Ws,
];

/// One job, times in ns from the run's origin (the first possible release).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    pub task: usize,
    pub job: u64,
    pub release: u64,
    pub deadline: u64,
    pub start: u64,
    pub finish: u64,
}

impl Job {
    pub fn response(&self) -> u64 {
        self.finish.saturating_sub(self.release)
    }
    pub fn missed(&self) -> bool {
        self.finish > self.deadline
    }
}

/// What a real run of a task set measured, whichever engine ran it.
#[derive(Clone, Debug, Default)]
pub struct RealRun {
    pub cores: usize,
    /// Release window.
    pub window_ns: u64,
    pub jobs: Vec<Job>,
    /// Per task: CPU time (when measured per task), migrations, context switches (see the
    /// module docs for whose counts they are).
    pub task_cpu: Vec<Option<u64>>,
    pub task_migrations: Vec<u64>,
    pub task_switches: Vec<u64>,
    /// Kernel counts of every thread that ran the work (`None`: perf refused).
    pub kernel_switches: Option<u64>,
    pub kernel_migrations: Option<u64>,
    /// The pool's own counts (`None` for sched-deadline, which has no user-level scheduler).
    pub user_switches: Option<u64>,
    pub user_migrations: Option<u64>,
    pub steals: Option<u64>,
    pub preemptions: Option<u64>,
    /// Release to first instruction of each preempting job (pool only), ns.
    pub preemption_latency: Vec<u64>,
    /// The same preemptions split into stages (timer, request, reach, pick, switch; see
    /// `paws::PreemptionStages`), ns.
    pub preemption_stages: Vec<[u64; 5]>,
    /// Machine stalls on the run's clock when a stall witness ran (`RealOptions::stall_witness`).
    pub stalls: Option<Vec<Stall>>,
    pub warnings: Vec<String>,
    /// What the run could not do as the scenario asks and went on with (`--allow-degraded`).
    pub degraded: Vec<String>,
}

impl RealRun {
    pub fn misses(&self) -> u64 {
        self.jobs.iter().filter(|j| j.missed()).count() as u64
    }

    /// Misses the witnessed machine stalls do not explain (`stall::explains_miss`); every
    /// miss when no witness ran.
    pub fn unexplained_misses(&self) -> u64 {
        let stalls = self.stalls.as_deref().unwrap_or(&[]);
        self.jobs
            .iter()
            .filter(|j| j.missed() && !explains_miss(stalls, j.release, j.deadline, j.finish))
            .count() as u64
    }
}

/// Options of a real task-set run.
#[derive(Clone, Debug)]
pub struct RealOptions {
    pub duration: Duration,
    pub perf: bool,
    /// Victim-choice seed of the pool (rule E).
    pub seed: u64,
    /// Run a stall witness beside the set (`schedkit_linux::stall`): its wake-ups count in
    /// the kernel context switches of whatever it preempts.
    pub stall_witness: bool,
}

fn bad(m: impl Into<String>) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: m.into(),
    }
}

/// How many workers the pool gets and whether they run SCHED_FIFO (`None` workers: every
/// CPU schedkit may use).
#[derive(Clone, Copy, Debug)]
pub struct PoolShape {
    pub workers: Option<usize>,
    pub realtime: bool,
}

impl Default for PoolShape {
    fn default() -> PoolShape {
        PoolShape {
            workers: None,
            realtime: true,
        }
    }
}

/// Runs `tasks` for real under `policy`.
pub fn run_real(tasks: &[Task], policy: PolicyName, o: &RealOptions) -> Result<RealRun, Failure> {
    run_real_shaped(tasks, policy, o, PoolShape::default())
}

/// [`run_real`] with the pool's shape given.
pub fn run_real_shaped(
    tasks: &[Task],
    policy: PolicyName,
    o: &RealOptions,
    shape: PoolShape,
) -> Result<RealRun, Failure> {
    let mode = match policy {
        PolicyName::SchedDeadline => return run_deadline(tasks, o),
        PolicyName::Paws => Mode::Paws,
        PolicyName::Gedf => Mode::Gedf,
        PolicyName::Ws => Mode::Ws,
        other => {
            return Err(bad(format!(
                "policy \"{other}\" does not run [[task]] scenarios on real cores (real: {})",
                REAL_TASK_POLICIES.map(|p| p.as_str()).join(", ")
            )))
        }
    };
    let defaults = HarnessOpts::default();
    let opts = HarnessOpts {
        perf: o.perf,
        seed: o.seed,
        stall_witness: o.stall_witness,
        workers: shape.workers,
        fifo_priority: defaults.fifo_priority.filter(|_| shape.realtime),
        ..defaults
    };
    let h = harness::run_taskset(tasks, mode, o.duration, &opts)
        .map_err(|e| Failure::from(anyhow::anyhow!("the {policy} pool: {e}")))?;
    let r = &h.report;
    // The pool's epoch is not the first release: shift every time so that job 0 of a task is
    // released at the task's offset, as in the simulator and the sched-deadline runner.
    let origin = r
        .jobs
        .iter()
        .filter(|j| j.task < tasks.len())
        .map(|j| j.release - tasks[j.task].offset().0 - j.index * tasks[j.task].period().0)
        .min()
        .unwrap_or(0);
    let n = tasks.len();
    let mut run = RealRun {
        cores: h.workers,
        window_ns: o.duration.as_nanos() as u64,
        task_cpu: vec![None; n],
        task_migrations: vec![0; n],
        task_switches: vec![0; n],
        kernel_switches: r.kernel_context_switches(),
        kernel_migrations: r.kernel_migrations(),
        user_switches: Some(h.switches),
        user_migrations: Some(h.migrations),
        steals: Some(h.steals),
        preemptions: Some(h.preemptions),
        preemption_latency: r.preemption_latency.clone(),
        preemption_stages: r.preemption_stages.iter().map(|s| s.stages()).collect(),
        stalls: o
            .stall_witness
            .then(|| h.stalls.iter().map(|s| s.shifted(origin)).collect()),
        warnings: r.warnings.clone(),
        ..RealRun::default()
    };
    for j in r.jobs.iter().filter(|j| j.task < n) {
        run.jobs.push(Job {
            task: j.task,
            job: j.index,
            release: j.release - origin,
            deadline: j.deadline - origin,
            start: j.start - origin,
            finish: j.finish - origin,
        });
        run.task_migrations[j.task] += j.migrations;
        run.task_switches[j.task] += j.switches;
    }
    run.jobs.sort_by_key(|j| (j.release, j.task, j.job));
    Ok(run)
}

fn run_deadline(tasks: &[Task], o: &RealOptions) -> Result<RealRun, Failure> {
    let opts = DeadlineOptions {
        duration: o.duration,
        perf: o.perf,
        stall_witness: o.stall_witness,
        ..DeadlineOptions::default()
    };
    let r = deadline::run_taskset(tasks, &opts)?;
    let sum = |f: fn(&deadline::TaskTotals) -> Option<u64>| -> Option<u64> {
        r.tasks.iter().map(f).sum()
    };
    Ok(RealRun {
        cores: r.cores,
        window_ns: r.window_ns,
        jobs: r
            .jobs
            .iter()
            .map(|j| Job {
                task: j.task,
                job: j.job,
                release: j.release_ns,
                deadline: j.deadline_ns,
                start: j.start_ns,
                finish: j.finish_ns,
            })
            .collect(),
        task_cpu: r.tasks.iter().map(|t| Some(t.cpu_ns)).collect(),
        task_migrations: r.tasks.iter().map(|t| t.migrations.unwrap_or(0)).collect(),
        task_switches: r
            .tasks
            .iter()
            .map(|t| t.context_switches.unwrap_or(0))
            .collect(),
        kernel_switches: sum(|t| t.context_switches),
        kernel_migrations: sum(|t| t.migrations),
        stalls: o.stall_witness.then(|| r.stalls.clone()),
        warnings: r.stall_warning.iter().cloned().collect(),
        ..RealRun::default()
    })
}

/// The shared report of a real task-set run: jobs, misses and worst responses folded by the
/// same [`Metrics`] as the simulator's; CPU time, migrations and switches as measured.
pub fn report_of(scenario: &Scenario, run: &RealRun) -> Report {
    let mut events: Vec<Event> = Vec::with_capacity(2 * run.jobs.len());
    for j in &run.jobs {
        events.push(Event::JobRelease {
            t: Nanos(j.release),
            task: j.task,
            job: j.job,
            deadline: Nanos(j.deadline),
        });
        events.push(Event::JobFinish {
            t: Nanos(j.finish),
            task: j.task,
            job: j.job,
        });
    }
    // Time order; at one instant releases first (a job released and finished at the same
    // nanosecond does not exist, but two different jobs may meet).
    events.sort_by_key(|e| (e.time(), !matches!(e, Event::JobRelease { .. })));
    let end = run
        .jobs
        .iter()
        .map(|j| j.finish)
        .max()
        .unwrap_or(0)
        .max(run.window_ns);
    let mut m = Metrics::new(scenario, "run", run.cores);
    for e in &events {
        m.record(e);
    }
    for k in 0..scenario.tasks().len() {
        m.measured_task(
            k,
            MeasuredTask {
                cpu_ns: run.task_cpu[k],
                migrations: run.task_migrations[k],
                context_switches: run.task_switches[k],
            },
        );
    }
    // The summary counts: per task (the pool's user-level counts, or the kernel's for the
    // task's threads under sched-deadline), plus for the pool the kernel's counts of its
    // worker threads (render_extra says whose counts they are).
    let pool = run.user_switches.is_some();
    let kernel = |v: Option<u64>| if pool { v.unwrap_or(0) } else { 0 };
    m.measured_totals(
        run.task_switches.iter().sum::<u64>() + kernel(run.kernel_switches),
        run.task_migrations.iter().sum::<u64>() + kernel(run.kernel_migrations),
    );
    let mut r = m.finish(Nanos(end));
    r.cpus = Some(format!("{} worker(s)", run.cores));
    r.warnings = run
        .degraded
        .iter()
        .map(|d| format!("degraded (--allow-degraded): {d}"))
        .collect();
    let horizon = run.window_ns;
    if end > horizon + (horizon / 50).max(20_000_000) {
        r.warnings.push(format!(
            "the horizon ran over: asked {}, the last job finished at {} (+{:.1} %)",
            Nanos(horizon),
            Nanos(end),
            100.0 * (end - horizon) as f64 / horizon.max(1) as f64
        ));
    }
    r
}

/// Percentile (nearest rank) of unsorted values: the pool's own statistics use the same.
pub use schedkit_runtime::paws::stats::percentile;

/// What only a real task-set run knows, after the shared table.
pub fn render_extra(policy: PolicyName, run: &RealRun) -> String {
    let opt = |v: Option<u64>| v.map_or("n/a (perf refused)".to_string(), |v| v.to_string());
    let resp: Vec<u64> = run.jobs.iter().map(|j| j.response()).collect();
    let q = |p| percentile(&resp, p).map_or("-".into(), output::ms);
    let mut out = format!(
        "\n{policy} on {} cores: {} jobs, {} missed; response p50 {} ms, p99 {} ms, max {} ms\n",
        run.cores,
        run.jobs.len(),
        run.misses(),
        q(50.0),
        q(99.0),
        q(100.0)
    );
    out += &format!(
        "kernel (perf, threads that ran the work): {} context switches, {} migrations\n",
        opt(run.kernel_switches),
        opt(run.kernel_migrations)
    );
    if let (Some(sw), Some(mig)) = (run.user_switches, run.user_migrations) {
        out += &format!(
            "pool (user level): {sw} switches, {mig} migrations, {} steals, {} preemptions; \
             preemption latency p50 {} us, p99 {} us\n",
            run.steals.unwrap_or(0),
            run.preemptions.unwrap_or(0),
            percentile(&run.preemption_latency, 50.0)
                .map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e3)),
            percentile(&run.preemption_latency, 99.0)
                .map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e3)),
        );
    }
    if let Some(stalls) = &run.stalls {
        let seen = match stalls.iter().map(|s| s.late_ns).max() {
            Some(longest) => format!(
                "{} machine stalls over 2 ms (longest {} ms)",
                stalls.len(),
                output::ms(longest)
            ),
            None => "no machine stall over 2 ms".to_string(),
        };
        out += &format!(
            "stall witness: {seen}; {} of {} misses not explained by them\n",
            run.unexplained_misses(),
            run.misses()
        );
    }
    if run.task_cpu.iter().any(Option::is_none) {
        out +=
            "cpu ms per task: not measured (the pool accounts CPU time per worker, not per task)\n";
    }
    out += &group_warnings(&run.warnings);
    out
}

/// The run's warnings, one line each, except that refused perf counters (one per thread and
/// counter) become a single line.
fn group_warnings(warnings: &[String]) -> String {
    let (perf, other): (Vec<&String>, Vec<&String>) = warnings
        .iter()
        .partition(|w| w.contains("perf_event_open") && w.contains("refused"));
    let mut out = String::new();
    if !perf.is_empty() {
        out += &format!(
            "warning: {} perf counter(s) of the pool's threads refused: run as root or lower \
             /proc/sys/kernel/perf_event_paranoid\n",
            perf.len()
        );
    }
    for w in other {
        out += &format!("warning: {w}\n");
    }
    out
}

/// The pool a `[[task]]` scenario asks for on this machine: the scenario's `cores` as
/// workers at SCHED_FIFO, and what of it cannot be had (fewer CPUs, no real-time priority).
fn pool_shape(scenario: &Scenario) -> Result<(PoolShape, Vec<String>), Failure> {
    let topo = schedkit_linux::topo::Topology::host()?;
    let allowed = schedkit_linux::honest::allowed_cpus(&topo.online);
    let mut degraded = Vec::new();
    if let Some(w) = schedkit_linux::honest::fewer_cpus(scenario.cores(), &topo.online, &allowed) {
        degraded.push(w);
    }
    let privs = schedkit_linux::privilege::Privileges::current();
    let realtime = privs.root || privs.sys_nice;
    if !realtime && scenario.policy().name() != PolicyName::SchedDeadline {
        degraded.push(format!(
            "the {} pool's workers need SCHED_FIFO to preempt everything else on their CPUs, \
             which needs root or CAP_SYS_NICE (they would run SCHED_OTHER, sharing their \
             CPUs with every other process)",
            scenario.policy().name()
        ));
    }
    let shape = PoolShape {
        workers: Some(scenario.cores().min(allowed.len()).max(1)),
        realtime,
    };
    Ok((shape, degraded))
}

/// `schedkit run FILE` on a scenario with `[[task]]` entries.
pub fn run_scenario(
    scenario: &Scenario,
    report: &ReportArgs,
    perf: bool,
    stall_witness: bool,
    allow_degraded: bool,
) -> Result<(), Failure> {
    if let Some(p) = scenario.processes().first() {
        return Err(bad(format!(
            "{}:{}: process: a scenario with [[task]] entries runs them alone on real cores; \
             move process \"{}\" to another scenario",
            scenario.file(),
            p.line(),
            p.name()
        )));
    }
    if let Some(t) = scenario.tasks().iter().find(|t| t.cpus().is_some()) {
        return Err(bad(format!(
            "{}:{}: task.cpus: policy \"{}\" places threads itself on real cores; remove \
             `cpus` from task \"{}\"",
            scenario.file(),
            t.line(),
            scenario.policy().name(),
            t.name()
        )));
    }
    if !REAL_TASK_POLICIES.contains(&scenario.policy().name()) {
        return Err(bad(format!(
            "{}: policy.name: [[task]] scenarios run on real cores under {} (`{}` is \
             simulator-only here: try `schedkit sim`)",
            scenario.file(),
            REAL_TASK_POLICIES.map(|p| p.as_str()).join(", "),
            scenario.policy().name()
        )));
    }
    if scenario.policy().name() == PolicyName::SchedDeadline
        && !schedkit_linux::privilege::Privileges::current().sys_nice
    {
        return Err(Failure {
            status: crate::run::EXIT_PRIVILEGE,
            message: "policy sched-deadline puts every task thread under SCHED_DEADLINE, which \
                      needs root or CAP_SYS_NICE: run as root (sudo) or grant the capability \
                      (setcap cap_sys_nice+ep $(which schedkit))"
                .into(),
        });
    }
    let (shape, degraded) = pool_shape(scenario)?;
    if !degraded.is_empty() && !allow_degraded {
        return Err(Failure {
            status: crate::run::EXIT_PRIVILEGE,
            message: format!(
                "{}: this run cannot do what the scenario asks: {}; pass --allow-degraded to \
                 run anyway and say so in the report",
                scenario.file(),
                degraded.join("; ")
            ),
        });
    }
    let mut run = run_real_shaped(
        scenario.tasks(),
        scenario.policy().name(),
        &RealOptions {
            duration: Duration::from_nanos(scenario.horizon().0),
            perf,
            seed: scenario.policy().seed(),
            stall_witness,
        },
        shape,
    )?;
    run.degraded = degraded;
    let r = report_of(scenario, &run);
    output::emit(&r, report)?;
    if !report.json && !report.csv {
        print!("{}", render_extra(scenario.policy().name(), &run));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_counts_jobs_misses_and_worst_response_per_task_like_sim() {
        let s = Scenario::parse(
            "t.toml",
            "cores = 2\n[policy]\nname = \"sched-deadline\"\n[[task]]\nname = \"a\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\" }]\n[[task]]\nname = \"b\"\nperiod = \"20ms\"\nregions = [{ seq = \"1ms\" }]\n",
        )
        .unwrap();
        let ms = |x: u64| x * 1_000_000;
        let job = |task, job, release, finish, d| Job {
            task,
            job,
            release: ms(release),
            deadline: ms(release + d),
            start: ms(release),
            finish: ms(finish),
        };
        let run = RealRun {
            cores: 2,
            window_ns: ms(20),
            jobs: vec![
                job(0, 0, 0, 3, 10),
                job(1, 0, 0, 25, 20),
                job(0, 1, 10, 12, 10),
            ],
            task_cpu: vec![Some(ms(2)), Some(ms(1))],
            task_migrations: vec![1, 2],
            task_switches: vec![4, 5],
            kernel_switches: Some(9),
            kernel_migrations: Some(3),
            ..RealRun::default()
        };
        let r = report_of(&s, &run);
        let a = r.threads.iter().find(|t| t.name == "a").unwrap();
        let b = r.threads.iter().find(|t| t.name == "b").unwrap();
        assert_eq!((a.jobs, a.deadline_misses), (Some(2), Some(0)));
        assert_eq!(a.max_response_ns, Some(ms(3)));
        assert_eq!((b.jobs, b.deadline_misses), (Some(1), Some(1)));
        assert_eq!((a.cpu_ns, a.migrations, a.context_switches), (ms(2), 1, 4));
        assert_eq!(r.summary.deadline_misses, 1);
        assert_eq!(r.summary.jobs, 3);
        assert_eq!((r.summary.context_switches, r.summary.migrations), (9, 3));
        assert_eq!(r.window_ns, ms(25));
    }
}
