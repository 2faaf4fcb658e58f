//! The binary's error: a message and the exit status it ends with, mapped from the
//! libraries' errors. Exit statuses: 0 success, 1 failure, 2 bad input, 3 missing
//! privileges, 4 another run holds the machine lease, 5 a dead run's changes must be
//! restored first, 130 interrupted.

use schedkit_core::scenario::ScenarioError;

/// Exit status for bad input (scenario or arguments).
pub const EXIT_BAD_INPUT: u8 = 2;

/// Exit status for missing privileges, or a run that cannot do what the scenario asks.
pub const EXIT_PRIVILEGE: u8 = 3;
/// Exit status when another live schedkit run holds what this run needs (the machine
/// lease); `--wait` queues instead.
pub const EXIT_BUSY: u8 = 4;
/// Exit status when a dead run's changes were never undone; `schedkit restore` first, or
/// `--restore-stale`.
pub const EXIT_STALE: u8 = 5;

/// Exit status of a run stopped by SIGINT or SIGTERM.
pub const EXIT_INTERRUPTED: u8 = 130;

/// A failure with its exit status.
pub struct Failure {
    pub status: u8,
    pub message: String,
}

impl From<ScenarioError> for Failure {
    fn from(e: ScenarioError) -> Failure {
        Failure {
            status: EXIT_BAD_INPUT,
            message: e.to_string(),
        }
    }
}

/// The Linux layer's errors (the real engine, the task runner of `schedkit_runtime::tasks`):
/// bad input 2, a refusal (privilege, a degraded run not allowed) 3, busy 4, stale 5, an OS
/// failure 1.
impl From<schedkit_linux::Error> for Failure {
    fn from(e: schedkit_linux::Error) -> Failure {
        use schedkit_linux::Error;
        Failure {
            status: match e {
                Error::Input(_) => EXIT_BAD_INPUT,
                Error::Privilege(_) | Error::Degraded(_) => EXIT_PRIVILEGE,
                Error::Busy(_) => EXIT_BUSY,
                Error::Stale(_) => EXIT_STALE,
                Error::Os { .. } => 1,
            },
            message: e.to_string(),
        }
    }
}

/// `import`, `export`, `sweep merge` and the Parquet outputs: bad input 2, else 1.
impl From<schedkit_io::Error> for Failure {
    fn from(e: schedkit_io::Error) -> Failure {
        Failure {
            status: if e.is_bad_input() { EXIT_BAD_INPUT } else { 1 },
            message: e.to_string(),
        }
    }
}

/// `schedkit ctl`'s failures: a refused input 2, an unreachable, busy or gone run 1.
impl From<schedkit_linux::ctl::ClientError> for Failure {
    fn from(e: schedkit_linux::ctl::ClientError) -> Failure {
        Failure {
            status: if e.bad_input { EXIT_BAD_INPUT } else { 1 },
            message: e.message,
        }
    }
}

impl From<schedkit_experiments::Error> for Failure {
    fn from(e: schedkit_experiments::Error) -> Failure {
        use schedkit_experiments::Error;
        match e {
            // The Linux layer's own statuses (privilege 3, busy 4, stale 5).
            Error::Linux(e) => Failure::from(e),
            Error::Interrupted => Failure {
                status: EXIT_INTERRUPTED,
                message: e.to_string(),
            },
            e => Failure {
                status: if e.is_bad_input() { EXIT_BAD_INPUT } else { 1 },
                message: e.to_string(),
            },
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure {
            status: 1,
            message: format!("{e:#}"),
        }
    }
}
