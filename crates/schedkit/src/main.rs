//! The `schedkit` command line: plan in the simulator, run on real cores, compare.

mod bench;
mod cli;
mod compare;
mod ctl;
mod experiment_exclusive;
mod experiment_fair;
mod experiment_fibers;
mod experiment_fidelity;
mod experiment_gang;
mod experiment_paws;
mod failure;
mod io_cmds;
mod machine;
mod output;
mod progress;
mod restore;
mod run;
mod sweep;
mod taskrun;
mod topo;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}

/// The path that re-runs this very binary for the experiments' helper processes (spinners,
/// hogs, the `ctl` client): `/proc/self/exe`, which a child forked from us resolves to our own
/// executable even when the file on disk was replaced or deleted by a rebuild during a long
/// experiment; the named path where there is no procfs.
pub(crate) fn self_exe() -> std::io::Result<std::path::PathBuf> {
    let proc_exe = std::path::PathBuf::from("/proc/self/exe");
    if proc_exe.exists() {
        Ok(proc_exe)
    } else {
        std::env::current_exe()
    }
}
