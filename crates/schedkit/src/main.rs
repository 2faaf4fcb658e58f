//! The `schedkit` command line: plan in the simulator, run on real cores, compare.

mod bench;
mod cli;
mod compare;
mod ctl;
mod experiment_args;
mod experiment_exclusive;
mod experiment_fair;
mod experiment_fibers;
mod experiment_fidelity;
mod experiment_gang;
mod experiment_paws;
mod failure;
mod help;
mod io_cmds;
mod machine;
mod output;
mod progress;
mod restore;
mod run;
mod simcmd;
mod sweep;
mod taskrun;
mod topo;

use std::process::ExitCode;

/// What `--version` prints: the release and the commit it was built from (`build.rs`;
/// "unknown" outside a git checkout).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SCHEDKIT_COMMIT"),
    ")"
);

fn main() -> ExitCode {
    let code = cli::main();
    // A journal dropped on an error path (not finished) undid what it could: what it could
    // not is said here, by the binary; so is what went wrong on a run's control socket
    // thread (a failing accept, say) that the run did not report itself.
    for w in schedkit_linux::journal::take_drop_warnings()
        .into_iter()
        .chain(schedkit_linux::ctl::take_unclaimed_warnings())
    {
        eprintln!("schedkit: warning: {w}");
    }
    code
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
