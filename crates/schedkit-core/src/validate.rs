//! What makes a parsed scenario *runnable*, beside what makes it well-formed
//! ([`Scenario::parse`]): it has work, its work starts before the horizon, and (warnings)
//! its durations are not far beyond the horizon. [`Scenario::parse`] stays permissive about
//! these, because library code and the sweep's base files parse scenarios without work on
//! purpose; the engines' entry points call [`Scenario::runnable`] after any command-line
//! override, so a `--horizon` is checked exactly as the file's `[run] horizon` would be.
//!
//! Also here: "did you mean" suggestions, and [`Diagnostic`], an error with the byte span of
//! the offending text so that the binary can print the line with a caret under the value.

use crate::scenario::{Locator, Phase, Scenario, ScenarioError};
use crate::time::Nanos;
use std::fmt;
use std::ops::Range;

/// A scenario error, with the byte span of the offending text when it is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub error: ScenarioError,
    /// Byte range in the scenario text (for a caret under the value); `None` when the
    /// problem is not at one place in the text (no work at all, a command-line override).
    pub span: Option<Range<usize>>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Diagnostic {}

impl From<ScenarioError> for Diagnostic {
    fn from(error: ScenarioError) -> Diagnostic {
        Diagnostic { error, span: None }
    }
}

/// A duration more than this many times the horizon gets a warning: the work cannot be
/// done before the simulation stops (`"8m"`, eight minutes, where `"8ms"` was meant).
pub const FAR_BEYOND_HORIZON: u64 = 10;

/// `: did you mean "x"?` for the candidate closest to `word`, or nothing if none is close.
pub fn did_you_mean<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> String {
    closest(word, candidates).map_or(String::new(), |c| format!(": did you mean \"{c}\"?"))
}

/// The candidate most similar to `word` (Jaro-Winkler at least 0.8, as clap's own
/// suggestions), if any.
fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The TOML parser's "unknown field `x`, expected one of `a`, `b`" with the closest known key
/// first: "unknown field `x`: did you mean `b`? (expected one of ...)".
pub(crate) fn unknown_key_message(key: &str, toml_message: &str) -> String {
    let Some((_, expected)) = toml_message.split_once("expected") else {
        return toml_message.to_string();
    };
    let known = expected.split('`').skip(1).step_by(2);
    match closest(key, known) {
        Some(best) => format!(
            "unknown field `{key}`: did you mean `{best}`? (expected{expected})",
            expected = expected.trim_end()
        ),
        None => toml_message.to_string(),
    }
}

/// Where an override or a check puts its error when the scenario text is not at hand (or
/// the key is not written in it): the entry's line.
fn at_line(s: &Scenario, line: usize, field: &str, message: String) -> Diagnostic {
    Diagnostic {
        error: ScenarioError {
            file: s.file().to_string(),
            line,
            column: usize::from(line > 0),
            field: field.to_string(),
            message,
        },
        span: None,
    }
}

/// Finds `key = value` in the text of the entry starting at `line` (1-based), and makes the
/// diagnostic point at the value.
struct Finder<'a> {
    loc: Option<Locator<'a>>,
}

impl Finder<'_> {
    fn diag(
        &self,
        s: &Scenario,
        entry_line: usize,
        key: &str,
        field: &str,
        message: String,
    ) -> Diagnostic {
        if let Some(loc) = &self.loc {
            if let Some(span) = value_span(loc, entry_line, key) {
                let error = loc.err(span.clone(), field, message);
                return Diagnostic {
                    error,
                    span: Some(span),
                };
            }
        }
        at_line(s, entry_line, field, message)
    }

    /// The value's text as written (`"8m"`), if found.
    fn written(&self, entry_line: usize, key: &str) -> Option<&str> {
        let loc = self.loc.as_ref()?;
        value_span(loc, entry_line, key).map(|r| &loc.text[r])
    }
}

/// The byte span of the value of `key` in the table that starts at line `entry_line` (its
/// header, or its first line): the lines up to the next `[header]`. Starts at the entry's
/// line (no scan from the top: a warning per process of a huge file stays linear).
fn value_span(loc: &Locator, entry_line: usize, key: &str) -> Option<Range<usize>> {
    let entry_line = entry_line.max(1);
    let mut offset = loc.line_offset(entry_line);
    for (i, line) in loc.text[offset..].split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') && !trimmed.starts_with("[ ") {
            if i == 0 {
                continue; // the entry's own header
            }
            return None;
        }
        let Some(rest) = trimmed.strip_prefix(key) else {
            continue;
        };
        let Some(value) = rest.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        let begin = start + (line.len() - value.len());
        let len = token_len(value);
        return Some(begin..begin + len);
    }
    None
}

/// The length of the TOML value at the start of `v`: a quoted string, a bracketed list on
/// one line, or a bare word.
fn token_len(v: &str) -> usize {
    let v = v.trim_end_matches(['\n', '\r']);
    match v.chars().next() {
        Some(q @ ('"' | '\'')) => v[1..].find(q).map_or(v.len(), |i| i + 2),
        Some(open @ ('[' | '{')) => {
            let close = if open == '[' { ']' } else { '}' };
            let mut depth = 0;
            for (i, c) in v.char_indices() {
                if c == open {
                    depth += 1;
                } else if c == close {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
            }
            v.trim_end().len()
        }
        _ => v
            .find(|c: char| c.is_whitespace() || c == ',' || c == '#' || c == '}')
            .unwrap_or(v.len()),
    }
}

/// The 1-based line of a `[name]` header, if any.
fn header_line(text: &str, name: &str) -> Option<usize> {
    let header = format!("[{name}]");
    text.lines()
        .position(|l| l.trim() == header || l.trim().starts_with(&format!("{header} ")))
        .map(|i| i + 1)
}

impl Scenario {
    /// `error` (made without the text, e.g. by the simulator's event budget) pointed at its
    /// field in the text when the field is a top-level key or a key of `[policy]` or `[run]`
    /// written there (`cores`, `policy.quantum`, `run.horizon`); unchanged otherwise.
    pub fn locate(&self, text: &str, error: ScenarioError) -> Diagnostic {
        let loc = Locator::new(self.file(), text);
        let (line, key) = match error.field.split_once('.') {
            Some((table @ ("policy" | "run"), key)) => (header_line(text, table), key),
            None => (Some(1), error.field.as_str()),
            Some(_) => (None, ""),
        };
        match line.and_then(|l| value_span(&loc, l, key)) {
            Some(span) if error.line == 0 => {
                let field = error.field.clone();
                Diagnostic {
                    error: loc.err(span.clone(), &field, error.message),
                    span: Some(span),
                }
            }
            _ => error.into(),
        }
    }

    /// Checks that the scenario can run (see the module docs): an error for no work at all,
    /// and for work that cannot start before the horizon; warnings for durations more than
    /// [`FAR_BEYOND_HORIZON`] times the horizon. With the scenario's `text`, each problem
    /// points at the value in the file; without, at the entry's line.
    pub fn runnable(&self, text: Option<&str>) -> Result<Vec<Diagnostic>, Diagnostic> {
        let f = Finder {
            loc: text.map(|t| Locator::new(self.file(), t)),
        };
        if self.processes().is_empty() && self.tasks().is_empty() {
            return Err(at_line(
                self,
                1,
                "process",
                "nothing to run: the scenario has no [[process]] or [[task]] entries (a base \
                 file for `schedkit sim --sweep` gets its tasks from `--sweep seeds=A..B`; see \
                 `schedkit sim --help`)"
                    .into(),
            ));
        }
        let h = self.horizon();
        let horizon_is = format!("the simulation stops at run.horizon = {h}");
        for p in self.processes() {
            if p.arrival() >= h {
                return Err(f.diag(
                    self,
                    p.line(),
                    "arrival",
                    "process.arrival",
                    format!(
                        "process \"{}\" arrives at {} but {horizon_is}: it would never run \
                         (raise `horizon` under [run], or lower `arrival`)",
                        p.name(),
                        p.arrival()
                    ),
                ));
            }
        }
        for t in self.tasks() {
            if t.offset() >= h {
                return Err(f.diag(
                    self,
                    t.line(),
                    "offset",
                    "task.offset",
                    format!(
                        "task \"{}\" is first released at {} but {horizon_is}: it would never \
                         run (raise `horizon` under [run], or lower `offset`)",
                        t.name(),
                        t.offset()
                    ),
                ));
            }
        }
        let mut warnings = Vec::new();
        let far = |d: Nanos| d.0 / FAR_BEYOND_HORIZON > h.0;
        let mut warn = |line: usize, key: &str, field: &str, what: &str, d: Nanos| {
            let minutes = f
                .written(line, key)
                .is_some_and(|w| w.trim_matches(['"', '\'']).ends_with('m'));
            let hint = if minutes {
                " (`m` is minutes; milliseconds are `ms`)"
            } else {
                ""
            };
            warnings.push(f.diag(
                self,
                line,
                key,
                field,
                format!(
                    "{what} {d} is {}x run.horizon = {h}: it cannot be done before the \
                     simulation stops{hint}",
                    d.0 / h.0.max(1)
                ),
            ));
        };
        for p in self.processes() {
            if let Some(b) = p.burst().filter(|&b| far(b)) {
                warn(p.line(), "burst", "process.burst", "a burst of", b);
            }
            for ph in p.pattern().into_iter().flatten() {
                let (Phase::Run(d) | Phase::Sleep(d)) = *ph;
                if far(d) {
                    warn(
                        p.line(),
                        "pattern",
                        "process.pattern",
                        "a pattern phase of",
                        d,
                    );
                    break;
                }
            }
        }
        for t in self.tasks() {
            if far(t.period()) {
                warn(t.line(), "period", "task.period", "a period of", t.period());
            }
            if far(t.work()) {
                let key = if f.written(t.line(), "wcet").is_some() {
                    "wcet"
                } else {
                    "regions"
                };
                let field = format!("task.{key}");
                warn(t.line(), key, &field, "a job's work of", t.work());
            }
        }
        // Policy durations only where the file writes them: their defaults are fine.
        if let Some(text) = text {
            if let Some(line) = header_line(text, "policy") {
                for (key, d) in [
                    ("quantum", self.policy().quantum()),
                    ("period", self.policy().period()),
                ] {
                    if far(d) && f.written(line, key).is_some() {
                        let field = format!("policy.{key}");
                        warn(line, key, &field, &format!("a {key} of"), d);
                    }
                }
            }
        }
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Vec<Diagnostic>, Diagnostic> {
        Scenario::parse("t.toml", text)
            .unwrap()
            .runnable(Some(text))
    }

    #[test]
    fn no_work_is_an_error_naming_line_one() {
        for text in ["", "cores = 2\n", "cores = 2\n[policy]\nname = \"gedf\"\n"] {
            let e = check(text).unwrap_err();
            assert_eq!((e.error.line, e.error.field.as_str()), (1, "process"));
            assert!(e.error.message.contains("--sweep"), "{e}");
        }
    }

    #[test]
    fn work_after_the_horizon_is_an_error_at_the_value() {
        let text = "[run]\nhorizon = \"40ms\"\n[[process]]\nname = \"a\"\narrival = \"50ms\"\n";
        let e = check(text).unwrap_err();
        assert_eq!((e.error.line, e.error.column), (5, 11), "{e}");
        assert_eq!(e.error.field, "process.arrival");
        assert_eq!(&text[e.span.clone().unwrap()], "\"50ms\"");
        let text = "[run]\nhorizon = \"1s\"\n[[task]]\nname = \"t\"\nperiod = \"10ms\"\nwcet = \"1ms\"\noffset = \"2s\"\n";
        let e = check(text).unwrap_err();
        assert_eq!((e.error.line, e.error.field.as_str()), (7, "task.offset"));
        // Without the text (an override), the entry's line.
        let s = Scenario::parse("t.toml", text).unwrap();
        assert_eq!(s.runnable(None).unwrap_err().error.line, 3);
    }

    #[test]
    fn a_duration_far_beyond_the_horizon_is_a_warning() {
        let text =
            "[run]\nhorizon = \"40ms\"\n[[process]]\nname = \"a\"\nburst = \"8m\"\n[[process]]\nname = \"b\"\nburst = \"8ms\"\n";
        let w = check(text).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].error.line, w[0].error.field.as_str()),
            (5, "process.burst")
        );
        assert!(w[0].error.message.contains("minutes"), "{}", w[0]);
        assert_eq!(&text[w[0].span.clone().unwrap()], "\"8m\"");
        let text = "[policy]\nname = \"rr\"\nquantum = \"1s\"\n[run]\nhorizon = \"10ms\"\n[[process]]\nname = \"a\"\n";
        let w = check(text).unwrap();
        assert_eq!(w[0].error.field, "policy.quantum");
    }

    #[test]
    fn unknown_keys_and_names_get_a_suggestion() {
        let e =
            Scenario::parse("t.toml", "[[process]]\nname = \"a\"\nbrust = \"8ms\"\n").unwrap_err();
        assert!(e.message.contains("did you mean `burst`?"), "{e}");
        let e = Scenario::parse("t.toml", "[policy]\nname = \"eevfd\"\n").unwrap_err();
        assert!(e.message.contains("did you mean \"eevdf\"?"), "{e}");
        let e = Scenario::parse("t.toml", "[[process]]\nname = \"a\"\nxyzzy = 1\n").unwrap_err();
        assert!(!e.message.contains("did you mean"), "{e}");
    }

    #[test]
    fn errors_made_without_the_text_are_located_in_it() {
        let text =
            "cores = 4\n[policy]\nname = \"rr\"\nquantum = \"1ns\"\n[[process]]\nname = \"a\"\n";
        let s = Scenario::parse("t.toml", text).unwrap();
        for (field, line) in [("policy.quantum", 4), ("cores", 1), ("run.horizon", 0)] {
            let e = ScenarioError {
                file: "t.toml".into(),
                line: 0,
                column: 0,
                field: field.into(),
                message: "m".into(),
            };
            assert_eq!(s.locate(text, e).error.line, line, "{field}");
        }
    }

    #[test]
    fn parse_errors_keep_their_span() {
        let text = "[policy]\nname = \"rr\"\nquantum = \"0ms\"\n";
        let d = Scenario::parse_located("t.toml", text).unwrap_err();
        assert_eq!(&text[d.span.unwrap()], "\"0ms\"");
    }
}
