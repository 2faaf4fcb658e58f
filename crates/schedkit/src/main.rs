//! The `schedkit` command line: plan in the simulator, run on real cores, compare.

mod cli;
mod output;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
