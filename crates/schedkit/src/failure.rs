//! The binary's error: a message and the exit status it ends with, mapped from the
//! libraries' errors. Exit statuses: 0 success, 1 failure, 2 bad input, 3 missing
//! privileges, 4 another run holds the machine lease, 5 a dead run's changes must be
//! restored first, 130 interrupted.

use schedkit_core::scenario::ScenarioError;

/// Exit status for bad input (scenario or arguments).
pub const EXIT_BAD_INPUT: u8 = 2;

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

/// The binary's failures as the experiments' error, for what the binary does on their behalf
/// (`Machine::run_tasks`): each exit status to the error that maps back to it, with the same
/// message.
impl From<Failure> for schedkit_experiments::Error {
    fn from(f: Failure) -> schedkit_experiments::Error {
        use schedkit_experiments::Error;
        use schedkit_linux::Error as Linux;
        match f.status {
            EXIT_BAD_INPUT => Error::Linux(Linux::Input(f.message)),
            crate::run::EXIT_PRIVILEGE => Error::Linux(Linux::Privilege(f.message)),
            crate::run::EXIT_BUSY => Error::Linux(Linux::Busy(f.message)),
            crate::run::EXIT_STALE => Error::Linux(Linux::Stale(f.message)),
            EXIT_INTERRUPTED => Error::Interrupted,
            _ => Error::Failed(f.message),
        }
    }
}
