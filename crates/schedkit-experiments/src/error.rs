//! The experiments' error type. The binary maps it to its exit status: bad input (options,
//! scenario) is 2, the Linux layer's errors keep their own statuses, an interrupted run is
//! 130, anything else 1.

use schedkit_core::scenario::ScenarioError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option's value is unusable: `--FLAG VALUE: why`.
    #[error("--{flag} {value}: {why}")]
    BadOption {
        flag: String,
        value: String,
        why: String,
    },
    /// Options that are unusable together, or a list that is unusable as a whole.
    #[error("{0}")]
    BadInput(String),
    /// The scenario file is unusable.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The real engine or the Linux layer failed (privilege, busy machine, OS error).
    #[error(transparent)]
    Linux(#[from] schedkit_linux::Error),
    /// A real run was interrupted (SIGINT/SIGTERM); the engine undid its changes.
    #[error("interrupted; every change was undone")]
    Interrupted,
    /// Reading or writing a file, or starting a helper process.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A measurement that could not be made (a helper that failed, a run without results).
    #[error("{0}")]
    Failed(String),
    /// A real run failed (the machine, not the input).
    #[error("real run of {scenario}: {message}")]
    Run { scenario: String, message: String },
}

impl Error {
    /// `--flag value: why`.
    pub fn bad_option(flag: &str, value: &str, why: impl std::fmt::Display) -> Error {
        Error::BadOption {
            flag: flag.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        }
    }

    /// An I/O failure on `what` (usually a path).
    pub fn io(what: impl std::fmt::Display, source: std::io::Error) -> Error {
        Error::Io {
            what: what.to_string(),
            source,
        }
    }

    /// Whether the input (not the machine or the run) is at fault.
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::BadOption { .. } | Error::BadInput(_) | Error::Scenario(_) => true,
            Error::Linux(e) => matches!(e, schedkit_linux::Error::Input(_)),
            Error::Interrupted | Error::Io { .. } | Error::Failed(_) | Error::Run { .. } => false,
        }
    }
}
