//! schedkit-io's error. Bad input (a scenario, a SimSo file, an option, a shard file that does
//! not fit) names what is wrong and where; the binary maps it to exit status 2, the Python
//! module to `ScenarioError` / `OptionError`.

use schedkit_core::scenario::ScenarioError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A located problem in an input file (a scenario, a SimSo configuration).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// An option or sweep argument that cannot be used.
    #[error(transparent)]
    Experiment(#[from] schedkit_experiments::Error),
    /// `--FLAG VALUE: why` (or `--FLAG: why` without a value) for options this crate
    /// checks itself.
    #[error("--{flag}{}: {why}", if value.is_empty() { String::new() } else { format!(" {value}") })]
    BadOption {
        flag: String,
        value: String,
        why: String,
    },
    /// A file that is read or written: its path and what went wrong.
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

impl Error {
    pub fn bad_option(flag: &str, value: &str, why: impl std::fmt::Display) -> Error {
        Error::BadOption {
            flag: flag.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        }
    }

    pub fn file(path: impl std::fmt::Display, message: impl std::fmt::Display) -> Error {
        Error::File {
            path: path.to_string(),
            message: message.to_string(),
        }
    }

    /// Whether the input (not the machine) is at fault. Writing a file that fails is the
    /// machine's; a shard document that does not parse or fit is the input's, and says so
    /// through [`Error::BadOption`].
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::Scenario(_) | Error::BadOption { .. } => true,
            Error::Experiment(e) => e.is_bad_input(),
            Error::File { .. } => false,
        }
    }
}
