//! Command-line parsing and dispatch. Exit status: 0 success, 1 failure, 2 bad input,
//! 3 missing privileges, 4 another run holds the machine lease (`run --wait` queues), 5 a
//! dead run's changes must be restored first (`schedkit restore`, or `run --restore-stale`).

use crate::failure::{Failure, EXIT_BAD_INPUT};
use crate::output::{self, ReportArgs};
use clap::{Args, Parser, Subcommand};
use schedkit_core::scenario::Scenario;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "schedkit",
    version,
    about = "Scheduling toolkit for multicore Linux: simulate a scenario, run it on real cores, compare",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario file on modelled cores and print the report.
    Sim(SimArgs),
    /// Measure the simulator's speed (events/s, jobs/s, peak memory) and export task sets for
    /// peer simulators.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
    /// Simulate one scenario under several policies and compare them side by side.
    Compare(crate::compare::CompareArgs),
    /// Run a scenario on this machine's real cores (or one command: `run --exclusive -- CMD`).
    ///
    /// Exit status: 0 done, 1 failure, 2 bad input, 3 missing privilege, 4 another schedkit
    /// run holds what this run needs (`--wait` queues behind it), 5 a dead run's changes were
    /// never undone (`schedkit restore` first, or `--restore-stale`), 130 interrupted.
    Run(crate::run::RunArgs),
    /// Show the machine's topology (CPUs, cores, SMT siblings, caches, NUMA nodes).
    Topo(crate::topo::TopoArgs),
    /// Undo what a killed `schedkit run` left changed (IRQ masks, affinities, sysctls).
    Restore(crate::restore::RestoreArgs),
    /// Talk to a running `schedkit run` (policy tenants): `ctl set-weight GROUP WEIGHT`,
    /// `ctl status`.
    Ctl(crate::ctl::CtlArgs),
    /// Run one of the papers' experiments on this machine (tables, JSON, SVG charts).
    #[command(subcommand)]
    Experiment(ExperimentCommand),
    /// Turn another tool's configuration into a scenario: `import simso FILE.xml`.
    #[command(subcommand)]
    Import(crate::io_cmds::ImportCommand),
    /// Write a scenario for another tool: `export simso FILE.toml`.
    #[command(subcommand)]
    Export(crate::io_cmds::ExportCommand),
    /// Work on sweep results: `sweep merge SHARD.json...` (from `sim --sweep ... --shard I/N`).
    #[command(subcommand)]
    Sweep(crate::io_cmds::SweepCommand),
}

/// `schedkit experiment NAME`: one variant per experiment.
#[derive(Subcommand)]
enum ExperimentCommand {
    /// Seed 003: blocked Gaussian elimination with 32..7936 user threads under the scheduler
    /// architectures A0, A1, A2 and the `may` crate's coroutines.
    FibersGauss(crate::experiment_fibers::FibersGaussArgs),
    /// Seed 000 Table 2: a strided walk over 5 MB, 1..N threads, default (D) vs exclusive (C)
    /// configuration, under no load and two kinds of CPU hogs; mean with 95 % CI.
    Exclusive(crate::experiment_exclusive::ExclusiveExpArgs),
    /// Seed 002: two spin-barrier jobs under default vs gang (freezer) for several quanta on
    /// this machine, and slowdown vs time slice on a simulated 64-node cluster with the
    /// switch-overhead model; plus a 1,024-node scale row.
    Gang(crate::experiment_gang::GangExpArgs),
    /// Seed 004 ch. 3: greedy processes of 1, 8 and 50 threads, real and simulated, beside
    /// GPS (shares, gaps G(Z,Y), waiting, lag); recovery after a thread-count change.
    Greedy(crate::experiment_fair::GreedyArgs),
    /// Seed 004 ch. 4: one nice-0 and four nice-5 tasks on 2 cores, default vs global-fair:
    /// largest lag against GPS, 10 s error, migrations/s, balancer cost.
    GlobalFairness(crate::experiment_fair::GlobalArgs),
    /// Seed 004 ch. 5: tenant groups at weights 1:1..1:5 and 1:2:3, share vs weight fraction,
    /// and a mid-run `schedkit ctl set-weight`.
    Tenants(crate::experiment_fair::TenantsArgs),
    /// Seed 001 section 5: generated periodic fork-join task sets per utilisation window under
    /// paws, gedf, ws (the real-time pool) and sched-deadline on this machine, and paws, gedf,
    /// pedf in the simulator: Table 1 (sets with misses), Figs. 2-3 (migrations, switches).
    Paws(crate::experiment_paws::PawsExpArgs),
    /// The simulator's kernel models (eevdf, cfs) against the kernel itself: scenario files
    /// run for real and simulated, error per metric with 95 % CI, chart and JSON.
    Fidelity(crate::experiment_fidelity::FidelityArgs),
}

#[derive(Args)]
struct SimArgs {
    /// Scenario file (TOML; see docs/scenario.md).
    file: PathBuf,
    #[command(flatten)]
    report: ReportArgs,
    #[command(flatten)]
    sweep: crate::sweep::SweepArgs,
    /// Also draw a Gantt chart (one lane per core, a colour per process) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    gantt: Option<PathBuf>,
    /// Also write the trace as Chrome trace-event JSON (opens in Perfetto) into this file.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
    /// Also write summary, threads, processes, groups and intervals (with --sweep: the sweep
    /// rows) as Parquet files into this directory.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Sim(a) => sim(a),
        Command::Bench(b) => crate::bench::run(b),
        Command::Compare(a) => crate::compare::compare(a),
        Command::Run(a) => crate::run::run(a),
        Command::Topo(a) => crate::topo::topo(a),
        Command::Restore(a) => crate::restore::restore(a),
        Command::Ctl(a) => crate::ctl::ctl(a),
        Command::Experiment(e) => match e {
            ExperimentCommand::FibersGauss(a) => crate::experiment_fibers::run(a),
            ExperimentCommand::Exclusive(a) => crate::experiment_exclusive::run(a),
            ExperimentCommand::Gang(a) => crate::experiment_gang::run(a),
            ExperimentCommand::Greedy(a) => crate::experiment_fair::greedy(a),
            ExperimentCommand::GlobalFairness(a) => crate::experiment_fair::global_fairness(a),
            ExperimentCommand::Tenants(a) => crate::experiment_fair::tenants(a),
            ExperimentCommand::Paws(a) => crate::experiment_paws::run(a),
            ExperimentCommand::Fidelity(a) => crate::experiment_fidelity::run(a),
        },
        Command::Import(c) => crate::io_cmds::import(c),
        Command::Export(c) => crate::io_cmds::export(c),
        Command::Sweep(c) => crate::io_cmds::sweep(c),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("schedkit: error: {}", f.message);
            ExitCode::from(f.status)
        }
    }
}

fn sim(a: SimArgs) -> Result<(), Failure> {
    if a.sweep.sweep.is_some() {
        return crate::sweep::run(&a.file, &a.sweep, a.report.json, a.parquet.as_deref());
    }
    let scenario = Scenario::load(&a.file)?;
    let keep_trace = a.gantt.is_some() || a.trace.is_some() || a.parquet.is_some();
    let (report, trace, stats) = schedkit_sim::simulate_report(&scenario, keep_trace)?;
    output::emit(&report, &a.report)?;
    // The dispatcher's own counters (PAWS and WS steals, ...) after the shared table.
    if !a.report.json && !a.report.csv && !stats.policy_counters.is_empty() {
        let c: Vec<String> = stats
            .policy_counters
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("\n{} counters: {}", report.policy, c.join(", "));
    }
    if let (Some(dir), Some(trace)) = (&a.parquet, &trace) {
        crate::io_cmds::sim_parquet(dir, &scenario, &report, trace)?;
    }
    if let Some(trace) = trace {
        output::write_trace_outputs(
            &scenario,
            &report,
            &trace,
            stats.end,
            a.gantt.as_deref(),
            a.trace.as_deref(),
        )?;
    }
    Ok(())
}
