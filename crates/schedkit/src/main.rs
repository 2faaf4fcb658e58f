//! The `schedkit` command line: plan in the simulator, run on real cores, compare.

mod bench;
// The charting API is shared by every subcommand and experiment; not each uses every chart kind.
#[allow(dead_code)]
mod chart;
mod chrome;
mod cli;
mod compare;
mod ctl;
mod experiment_exclusive;
mod experiment_fair;
mod experiment_fibers;
mod experiment_gang;
mod experiment_paws;
mod gantt;
mod output;
mod restore;
mod run;
mod stats;
mod sweep;
mod taskrun;
mod topo;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
