//! The scenario file: one TOML document that both engines (`sim` and `run`) read.
//!
//! Parsing happens in two steps. Serde turns the text into the `Raw*` structs (`raw.rs`),
//! which reject unknown keys and malformed values with the byte span of the offending value;
//! then `check.rs` checks what serde cannot (duplicate names, groups that do not exist, zero
//! quanta, CPUs beyond `cores`) using those spans. Every error is a [`ScenarioError`] naming
//! file, line, column and field.
//!
//! Scenarios made in code (experiments, generators, importers, overrides) are described with
//! a [`ScenarioBuilder`], which fills the same raw structs (without spans) and runs the same
//! checks. A [`Scenario`]'s fields are private, so these two are the only ways to make one:
//! a `Scenario` value is valid by construction, and nothing downstream re-checks it.
//!
//! Files: `spec.rs` (the validated types and their accessors), `policy.rs` (`[policy]`),
//! `raw.rs`, `check.rs`, `parse.rs` (text in), `builder.rs` (code in), `locator.rs` (byte
//! offsets to lines and columns).
//!
//! The format is documented key by key in `docs/scenario.md`.

mod builder;
mod check;
mod load;
mod locator;
mod parse;
mod policy;
mod raw;
mod spec;
#[cfg(test)]
mod tests;

pub use builder::ScenarioBuilder;
pub use load::{LoadError, Loaded, Overrides};
pub(crate) use locator::Locator;
pub use policy::*;
pub use spec::*;

use std::fmt;

pub use crate::validate::Diagnostic;

/// A scenario error with its location. Displayed as `file:line:col: field: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: `{}`: {}",
                self.file, self.line, self.column, self.field, self.message
            )
        }
    }
}
