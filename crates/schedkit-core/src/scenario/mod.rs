//! The scenario file: one TOML document that both engines (`sim` and `run`) read.
//!
//! Parsing happens in two steps. Serde turns the text into the `Raw*` structs, which reject
//! unknown keys and malformed values with the byte span of the offending value; then
//! [`Scenario::from_raw`] checks what serde cannot (duplicate names, groups that do not exist,
//! zero quanta, CPUs beyond `cores`) using the spans kept by `toml::Spanned`. Every error is a
//! [`ScenarioError`] naming file, line, column and field. After this module, nothing
//! downstream re-checks the scenario: a `Scenario` value is valid by construction.
//!
//! The format is documented key by key in `docs/scenario.md`.

mod check;
mod locator;
mod parse;
mod raw;
mod spec;
#[cfg(test)]
mod tests;

pub(crate) use locator::Locator;
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
