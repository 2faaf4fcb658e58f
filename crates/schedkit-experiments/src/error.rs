//! The experiments' error type. The binary maps it to its exit status: bad input (options,
//! scenario) is 2, anything else 1.

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
    /// The scenario file is unusable.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
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

    /// Whether the input (not the machine or the run) is at fault.
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::BadOption { .. } | Error::Scenario(_) => true,
            Error::Run { .. } => false,
        }
    }
}
