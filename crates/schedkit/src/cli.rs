//! Command-line parsing and dispatch. Exit status: 0 success, 1 failure, 2 bad input,
//! 3 missing privileges, 4 another run holds the machine lease (`run --wait` queues), 5 a
//! dead run's changes must be restored first (`schedkit restore`, or `run --restore-stale`).

use crate::failure::{Failure, EXIT_BAD_INPUT};
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "schedkit",
    version = crate::VERSION,
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
    #[command(after_help = crate::help::sim())]
    Sim(crate::simcmd::SimArgs),
    /// Measure the simulator's speed (events/s, jobs/s, peak memory) and export task sets for
    /// peer simulators.
    #[command(subcommand, after_help = crate::help::BENCH)]
    Bench(crate::bench::BenchCommand),
    /// Simulate one scenario under several policies and compare them side by side.
    #[command(after_help = crate::help::compare())]
    Compare(crate::compare::CompareArgs),
    /// Run a scenario on this machine's real cores (or one command: `run --exclusive -- CMD`).
    ///
    /// Exit status: 0 done, 1 failure, 2 bad input, 3 missing privilege, 4 another schedkit
    /// run holds what this run needs (`--wait` queues behind it), 5 a dead run's changes were
    /// never undone (`schedkit restore` first, or `--restore-stale`), 130 interrupted.
    #[command(after_help = crate::help::RUN)]
    Run(crate::run::RunArgs),
    /// Show the machine's topology (CPUs, cores, SMT siblings, caches, NUMA nodes).
    #[command(after_help = crate::help::TOPO)]
    Topo(crate::topo::TopoArgs),
    /// Undo what a killed `schedkit run` left changed (IRQ masks, affinities, sysctls).
    #[command(after_help = crate::help::restore())]
    Restore(crate::restore::RestoreArgs),
    /// Talk to a running `schedkit run` (policy tenants): `ctl set-weight GROUP WEIGHT`,
    /// `ctl status`.
    #[command(after_help = crate::help::CTL)]
    Ctl(crate::ctl::CtlArgs),
    /// Run one of the experiments behind schedkit's results on this machine (tables, JSON,
    /// SVG charts).
    #[command(subcommand, after_help = crate::help::EXPERIMENT)]
    Experiment(ExperimentCommand),
    /// List the scheduling policies: what each does and which engines run it (sim, run).
    #[command(after_help = crate::help::POLICIES)]
    Policies(PoliciesArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    #[command(after_help = crate::help::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Write man pages: schedkit.1 and one per subcommand (schedkit-sim.1, ...).
    #[command(after_help = crate::help::MAN)]
    Man(ManArgs),
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

#[derive(Args)]
struct PoliciesArgs {
    /// Only the policies the simulator runs.
    #[arg(long)]
    sim: bool,
}

#[derive(Args)]
struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
struct ManArgs {
    /// Directory to write the pages into (created if missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
}

/// `schedkit experiment NAME`: one variant per experiment.
#[derive(Subcommand)]
enum ExperimentCommand {
    /// How fast user-level threads (fibers) run a blocked Gaussian elimination with 32 to
    /// 7936 threads, under three ways of scheduling them onto kernel threads and under the
    /// `may` crate's coroutines: solve time per thread count (seed 003).
    FibersGauss(crate::experiment_fibers::FibersGaussArgs),
    /// How much exclusive mode shields a job from noise: a memory-bound job (a strided walk
    /// over 5 MB) on 1..N threads, run under the kernel's default placement and in exclusive
    /// mode, alone and beside CPU hogs; run time, mean with 95 % CI (seed 000, Table 2).
    Exclusive(crate::experiment_exclusive::ExclusiveExpArgs),
    /// What gang scheduling (all of a job's threads run together) gains for jobs whose
    /// threads wait for each other: two barrier jobs, default vs gang, for several time
    /// slices on this machine, and slowdown vs time slice on a simulated 64-node cluster
    /// with switch costs, plus a 1,024-node row (seed 002).
    Gang(crate::experiment_gang::GangExpArgs),
    /// Whether a process gets more CPU by having more threads: processes of 1, 8 and 50
    /// threads under the fair-share policies, real and simulated, their shares beside the
    /// ideal (GPS), waiting and lag, and how fast shares recover when a thread count changes
    /// (seed 004, ch. 3).
    Greedy(crate::experiment_fair::GreedyArgs),
    /// Whether nice levels hold across cores: one nice-0 and four nice-5 tasks on 2 cores,
    /// the kernel's balancing vs `global-fair`: largest lag behind the ideal share, error
    /// over 10 s, migrations per second, balancer cost (seed 004, ch. 4).
    GlobalFairness(crate::experiment_fair::GlobalArgs),
    /// Whether tenants get the CPU share their weights promise: groups at weights 1:1 to 1:5
    /// and 1:2:3, measured share vs weight fraction, and a weight changed mid-run with
    /// `schedkit ctl set-weight` (seed 004, ch. 5).
    Tenants(crate::experiment_fair::TenantsArgs),
    /// How often real-time fork-join task sets miss deadlines: generated periodic task sets
    /// per utilisation level under paws, gedf, ws (the real-time pool) and sched-deadline on
    /// this machine, and paws, gedf, pedf in the simulator; sets with misses, migrations and
    /// context switches per policy (seed 001, section 5).
    Paws(crate::experiment_paws::PawsExpArgs),
    /// The simulator's kernel models (eevdf, cfs) against the kernel itself: scenario files
    /// run for real and simulated, error per metric with 95 % CI, chart and JSON.
    Fidelity(crate::experiment_fidelity::FidelityArgs),
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
        Command::Sim(a) => crate::simcmd::sim(a),
        Command::Bench(b) => crate::bench::run(b),
        Command::Compare(a) => crate::compare::compare(a),
        Command::Run(a) => crate::run::run(a),
        Command::Topo(a) => crate::topo::topo(a),
        Command::Restore(a) => crate::restore::restore(a),
        Command::Ctl(a) => crate::ctl::ctl(a),
        Command::Policies(a) => policies(a),
        Command::Completions(a) => completions(a),
        Command::Man(a) => man(a),
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

/// `schedkit policies`: the one list of the library, one line each.
fn policies(a: PoliciesArgs) -> Result<(), Failure> {
    if !a.sim {
        let w = schedkit_core::policies::POLICIES
            .iter()
            .map(|p| p.name.as_str().len())
            .max()
            .unwrap_or(0);
        println!("{:w$}  {:25}  what it does", "policy", "engines");
    }
    print!("{}", schedkit_core::policies::table(a.sim));
    Ok(())
}

/// `schedkit completions SHELL`: generated from the same clap definitions as the parser.
fn completions(a: CompletionsArgs) -> Result<(), Failure> {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "schedkit", &mut std::io::stdout());
    Ok(())
}

/// `schedkit man --out DIR`: `schedkit.1` and one page per subcommand and nested subcommand
/// (`schedkit-sim.1`, `schedkit-experiment-gang.1`), from the same definitions.
fn man(a: ManArgs) -> Result<(), Failure> {
    use anyhow::Context;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let cmd = Cli::command();
    clap_mangen::generate_to(cmd, &a.out)
        .with_context(|| format!("writing man pages into {}", a.out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// Every `$ schedkit ...` example in the help parses with the real parser.
    #[test]
    fn every_example_in_the_help_parses() {
        let mut n = 0;
        for (sub, text) in crate::help::all() {
            for line in text.lines().filter_map(|l| l.trim().strip_prefix("$ ")) {
                let words: Vec<&str> = line
                    .split_whitespace()
                    .take_while(|w| *w != ">" && *w != "&&")
                    .collect();
                assert_eq!(words[0], "schedkit", "{line}");
                assert_eq!(words[1], sub, "an example of `{sub}` runs `{}`", words[1]);
                if let Err(e) = Cli::try_parse_from(&words) {
                    panic!("`{line}` does not parse: {e}");
                }
                n += 1;
            }
        }
        assert!(n >= 2 * crate::help::all().len(), "{n} examples");
    }
}
