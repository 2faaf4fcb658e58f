//! `schedkit run`: run a scenario on this machine's real cores, or one command in exclusive
//! mode (`schedkit run --exclusive -- CMD ARGS...`), and print the same report as `sim`.
//!
//! The report (`--json`, the table, `--gantt`, `--trace`) has exactly the schema of `sim`'s,
//! so the two can be compared key for key. What only a real run knows (the kernel's own
//! switch and migration counts, perf counters, the longest stall, what exclusive mode moved
//! and what the kernel refused) follows the table, and goes to `--linux-json FILE`; both are
//! `schedkit_render::kernel`'s. This module turns the flags into the engine's options.

use crate::failure::{Failure, EXIT_BAD_INPUT};
use crate::output;
use crate::output::ReportArgs;
use clap::{Args, ValueEnum};
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::Nanos;
use schedkit_linux::affinity::CpuSet;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};

mod one;
pub use one::OneArgs;
use one::{attach, exclusive_config, request_of, wait_of};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RtThrottleArg {
    /// Leave RT throttling as the kernel has it (the cost is reported).
    Keep,
    /// Turn it off for the run (journaled and restored).
    Off,
}

#[derive(Args)]
pub struct RunArgs {
    /// Scenario file (TOML; see docs/scenario.md and docs/run.md). Omit it to run one command
    /// given after `--`.
    pub file: Option<PathBuf>,
    /// Exclusive mode (seed 000): system cores keep everything else, the job gets the rest,
    /// pinned, SCHED_FIFO, IRQs moved away. Overrides the scenario's policy.
    #[arg(long)]
    pub exclusive: bool,
    /// CPUs left to the system in exclusive mode (a list: `0`, `0-1,4`). Default: CPU 0 and
    /// its SMT siblings.
    #[arg(long, value_name = "CPUS")]
    pub system_cores: Option<String>,
    /// SCHED_FIFO/RR priority of job threads, 1..99 (exclusive default 99; fcfs/rr default
    /// 50 minus the process' `priority`; with one command: needs --policy fifo or rr).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=99))]
    pub priority: Option<u32>,
    /// One-command mode and work already running (boxed: clap keeps every flag inline).
    #[command(flatten)]
    pub one: Box<OneArgs>,
    /// RT throttling in exclusive mode (`kernel/sched_rt_runtime_us`).
    #[arg(long, value_enum, default_value = "keep")]
    pub rt_throttle: RtThrottleArg,
    /// Stop after this long (`30s`); default: the scenario's horizon, or until the command
    /// exits.
    #[arg(long, value_name = "DURATION")]
    pub horizon: Option<String>,
    /// Sampling period of the threads: the shortest, which `--sample-budget` may lengthen
    /// (the SPEC bounds lag sampling at 10ms; up to 1s is accepted and said in the report).
    #[arg(long, default_value = "10ms", value_name = "DURATION")]
    pub sample: String,
    /// The sampler's CPU budget in percent of one core: sampling slows down (up to ten
    /// times `--sample`, at least 100ms, at most 1s) while it would cost more, and the
    /// report says so; `off`: sample every `--sample` whatever it costs.
    #[arg(long, default_value = "2", value_name = "PERCENT|off")]
    pub sample_budget: String,
    /// Do not open perf counters.
    #[arg(long)]
    pub no_perf: bool,
    /// `[[task]]` scenarios: run a stall witness beside the set and say which deadline misses
    /// the machine's stalls explain (a virtual machine's host can hold every CPU for
    /// milliseconds). Its wake-ups count in the kernel context switches of the threads it
    /// preempts.
    #[arg(long)]
    pub stall_witness: bool,
    #[command(flatten)]
    pub report: ReportArgs,
    /// Also draw a Gantt chart from the sampled placements into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub gantt: Option<PathBuf>,
    /// Also write the trace as Chrome trace-event JSON into this file.
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// Also write what only a real run knows (kernel counts, perf counters, longest stall,
    /// exclusive-mode actions) as JSON into this file.
    #[arg(long, value_name = "FILE.json")]
    pub linux_json: Option<PathBuf>,
    /// When another schedkit run holds what this run needs (exclusive mode, the SCHED_RR
    /// time slice, machine state a fair-share run changes), wait for it instead of exiting 4;
    /// with a DURATION (`30s`), wait at most that long.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "forever")]
    pub wait: Option<String>,
    /// When a dead schedkit run's changes were never undone, undo them first (as `schedkit
    /// restore` would) instead of exiting 5.
    #[arg(long)]
    pub restore_stale: bool,
    /// Leave the command running when the run ends (no job cgroup, no SIGTERM at the
    /// horizon, no SIGKILL when schedkit dies); its placement stays as set.
    #[arg(long)]
    pub keep_running: bool,
    /// Run even where the run cannot do what the scenario asks (fewer CPUs than its
    /// `cores`, e.g. under `taskset` or a cpuset; real-time tasks without real-time
    /// priority), and say so in the report; without it such a run exits 3.
    #[arg(long)]
    pub allow_degraded: bool,
    /// The command to run (after `--`), e.g. `schedkit run --exclusive -- ./solver input`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `--system-cores`, as a CPU list.
fn system_cores(a: &RunArgs) -> Result<Option<CpuSet>, Failure> {
    a.system_cores
        .as_deref()
        .map(CpuSet::parse_list)
        .transpose()
        .map_err(|m| bad(format!("--system-cores: {m}")))
}

fn bad(msg: impl Into<String>) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: msg.into(),
    }
}

pub fn run(a: RunArgs) -> Result<(), Failure> {
    let request = request_of(&a)?;
    if a.one.pid.is_some() || a.one.cgroup.is_some() || a.one.unit.is_some() {
        return attach(&a, request);
    }
    let oneshot = one::command_plan(&a, &request)?;
    let (sample, sample_budget) = sampling(&a)?;
    let horizon = one::duration_ns("--horizon", &a.horizon)?.map(Nanos);
    let system = system_cores(&a)?;
    let scenario = scenario_of(&a, horizon)?;
    // Periodic fork-join tasks (seed 001) have their own real engines.
    if !scenario.tasks().is_empty() && !a.exclusive {
        let options = schedkit_runtime::tasks::ScenarioOptions {
            perf: !a.no_perf,
            stall_witness: a.stall_witness,
            allow_degraded: a.allow_degraded,
            keep_trace: false,
        };
        return crate::taskrun::run_scenario(&scenario, &a.report, &options);
    }
    if a.stall_witness {
        return Err(bad(
            "--stall-witness: only scenarios of [[task]] entries have deadlines to explain",
        ));
    }
    let (scenario, policy) = policy_of(&a, scenario, system, oneshot.as_ref())?;
    let wait = wait_of(&a)?;
    if a.keep_running && (a.command.is_empty() || a.exclusive) {
        return Err(bad(
            "--keep-running: applies to one command run without --exclusive (`schedkit run \
             --keep-running -- CMD`)",
        ));
    }
    engine::install_signal_handlers();
    let mut opts = RunOptions::new(policy);
    opts.guard = schedkit_linux::guard::GuardOptions {
        wait,
        restore_stale: a.restore_stale,
        keep_running: a.keep_running,
        lease_dir: None,
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
    };
    opts.sample = std::time::Duration::from_nanos(sample.0);
    opts.sample_budget = sample_budget;
    opts.max_sample =
        std::time::Duration::from_nanos((sample.0 * 10).clamp(100_000_000, 1_000_000_000));
    opts.perf = !a.no_perf;
    opts.allow_degraded = a.allow_degraded;
    let bounded = a.command.is_empty() || horizon.is_some();
    opts.bounded = bounded;
    let bar = crate::progress::RunBar::new(
        bounded,
        "the run ends when the command exits (Ctrl-C ends it sooner)",
    );
    opts.progress = bar.callback();
    let b = bar.clone();
    opts.notice = Some(Box::new(move |n| b.eprintln(&format!("schedkit: {n}"))));
    bar.show();
    if let Some(plan) = oneshot.filter(|p| !p.exclusive && *p != Default::default()) {
        one::before_exec(&mut opts, plan, &a.command[0]);
    }
    let outcome = engine::run(&scenario, opts);
    bar.finish();
    print_outcome(&a, &outcome?)
}

/// `--sample` and `--sample-budget` (a fraction of one core; `None`: off).
fn sampling(a: &RunArgs) -> Result<(Nanos, Option<f64>), Failure> {
    let sample = Nanos::parse(&a.sample).map_err(|m| bad(format!("--sample: {m}")))?;
    if sample.0 == 0 || sample > Nanos::from_secs(1) {
        return Err(bad("--sample: must be between 1ns and 1s"));
    }
    let budget = match a.sample_budget.as_str() {
        "off" => None,
        b => match b.trim_end_matches('%').parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => Some(p / 100.0),
            _ => {
                return Err(bad(format!(
                    "--sample-budget: `{b}` is not a percentage in (0, 100] or `off`"
                )))
            }
        },
    };
    Ok((sample, budget))
}

/// The scenario FILE, or the one-liner's scenario, with `--horizon` applied.
fn scenario_of(a: &RunArgs, horizon: Option<Nanos>) -> Result<Scenario, Failure> {
    let scenario = match (&a.file, a.command.is_empty()) {
        (Some(_), false) => {
            return Err(bad(
                "give either a scenario FILE or a command after `--`, not both",
            ))
        }
        (None, true) => {
            return Err(bad(
                "nothing to run: give a scenario FILE or a command after `--` (schedkit run --exclusive -- CMD ARGS...)",
            ))
        }
        // The same parse and runnability checks as `sim` (no work, work after the horizon:
        // exit 2 with the line and a caret; far-off durations: a warning).
        (Some(f), true) => crate::simcmd::load(f, &crate::simcmd::SimOverrides::default())?.scenario,
        (None, false) => schedkit_linux::oneshot::command_scenario(
            &a.command,
            if a.exclusive {
                PolicyName::Exclusive
            } else {
                PolicyName::Default
            },
            Nanos::from_secs(365 * 24 * 3600),
        )?,
    };
    match horizon {
        Some(h) if h.0 == 0 => Err(bad("--horizon: must be greater than zero")),
        Some(h) => Ok(scenario.with_horizon(h)?),
        None => Ok(scenario),
    }
}

/// The run's policy on the kernel from the scenario and the flags (`--exclusive`,
/// `--priority`, `--system-cores`, `--rt-throttle`, one command's `--cpus`), each flag
/// applied or refused.
fn policy_of(
    a: &RunArgs,
    mut scenario: Scenario,
    system: Option<CpuSet>,
    oneshot: Option<&schedkit_linux::oneshot::Plan>,
) -> Result<(Scenario, RunPolicy), Failure> {
    if a.exclusive {
        scenario = scenario
            .with_policy_spec(scenario.policy().clone().with_name(PolicyName::Exclusive))?;
    }
    if let Some(c) = oneshot.and_then(|p| p.cpus.as_ref()) {
        // The command asked for these CPUs: the report's frame is theirs.
        scenario = scenario.with_cores(c.len())?;
    }
    let mut policy = RunPolicy::from_scenario(&scenario)?;
    match &mut policy {
        RunPolicy::Exclusive(cfg) => *cfg = exclusive_config(a, system, a.priority.unwrap_or(99)),
        RunPolicy::Fifo { priority } | RunPolicy::Rr { priority, .. } => *priority = a.priority,
        RunPolicy::Default
        | RunPolicy::Gang { .. }
        | RunPolicy::ProcessFair
        | RunPolicy::Fair { .. } => {}
    }
    if !matches!(policy, RunPolicy::Exclusive(_))
        && (a.system_cores.is_some() || matches!(a.rt_throttle, RtThrottleArg::Off))
    {
        return Err(bad(
            "--system-cores and --rt-throttle apply to exclusive mode only (add --exclusive)",
        ));
    }
    // One command's --priority went into its plan (with --policy fifo or rr).
    let oneshot_rt = oneshot.is_some_and(|p| {
        matches!(
            p.class,
            Some(
                schedkit_linux::sched::Policy::Fifo { .. }
                    | schedkit_linux::sched::Policy::Rr { .. }
            )
        )
    });
    if a.priority.is_some() && !policy_takes_priority(&policy) && !oneshot_rt {
        return Err(bad(
            "--priority: this run's policy does not use real-time priorities (it applies to \
             fcfs, rr and exclusive runs: add --exclusive, or give `policy.name = \"fcfs\"` \
             or `\"rr\"` in the scenario)",
        ));
    }
    Ok((scenario, policy))
}

/// Prints a process run's outcome: its warnings, the shared report as asked, the kernel's
/// view (`schedkit_render::kernel`), and the files of `--gantt`, `--trace`, `--linux-json`.
fn print_outcome(a: &RunArgs, outcome: &engine::RunOutcome) -> Result<(), Failure> {
    for w in &outcome.warnings {
        eprintln!("schedkit: warning: {w}");
    }
    let keep_trace = a.gantt.is_some() || a.trace.is_some();
    let (report, trace) = schedkit_linux::honest::report(outcome, keep_trace);
    output::emit(&report, &a.report)?;
    if a.report.json || a.report.csv {
        // The table lists them after the summary; machine-readable output on stdout keeps
        // them in the JSON, and a person watching stderr still sees them.
        for w in &report.warnings {
            eprintln!("schedkit: warning: {w}");
        }
    }
    if !a.report.json && !a.report.csv {
        print!("{}", schedkit_render::kernel::text(outcome));
    }
    if let Some(trace) = trace {
        output::write_trace_outputs(
            &outcome.scenario,
            &report,
            &trace,
            outcome.end,
            a.gantt.as_deref(),
            a.trace.as_deref(),
            None,
        )?;
    }
    if let Some(p) = &a.linux_json {
        std::fs::write(p, schedkit_render::kernel::json(outcome).to_string())
            .map_err(|e| Failure::from(anyhow::anyhow!("writing {}: {e}", p.display())))?;
    }
    if outcome.interrupted {
        eprintln!("schedkit: interrupted; every change was undone");
        return Err(Failure {
            status: crate::failure::EXIT_INTERRUPTED,
            message: "interrupted".into(),
        });
    }
    Ok(())
}

fn policy_takes_priority(p: &RunPolicy) -> bool {
    matches!(
        p,
        RunPolicy::Exclusive(_) | RunPolicy::Fifo { .. } | RunPolicy::Rr { .. }
    )
}
