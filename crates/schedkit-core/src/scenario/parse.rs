//! Text to a validated [`Scenario`]: serde into the raw layer, then the checks.

use super::raw::RawScenario;
use super::{Diagnostic, Locator, Scenario, ScenarioError};
use std::path::Path;

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: "file".into(),
            message: format!("cannot read scenario: {e}"),
        })?;
        Scenario::parse(&file, &text)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_located(file, text).map_err(|d| d.error)
    }

    /// [`Scenario::parse`], with the byte span of the offending text beside the error (for a
    /// caret under it).
    pub fn parse_located(file: &str, text: &str) -> Result<Scenario, Diagnostic> {
        let loc = Locator::new(file, text);
        Scenario::parse_with(&loc).map_err(|error| Diagnostic {
            error,
            span: loc.last_span.get().map(|(a, b)| a..b),
        })
    }

    fn parse_with(loc: &Locator) -> Result<Scenario, ScenarioError> {
        let text = loc.text;
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            // The TOML parser leaves the message empty for some syntax errors (a key with
            // no value at the end of the text); the user still needs a sentence.
            let msg = if msg.is_empty() {
                "invalid TOML here (a value is missing or malformed)".to_string()
            } else {
                msg
            };
            // `unknown field `x`` errors point at the key itself; others at the value.
            let unknown = msg
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string);
            let field = unknown
                .clone()
                .or_else(|| loc.key_at(span.start))
                .unwrap_or_else(|| "document".into());
            let msg = match unknown {
                Some(key) => crate::validate::unknown_key_message(&key, &msg),
                None => msg,
            };
            loc.err(span, &field, msg)
        })?;
        super::check::build(loc, raw)
    }
}
