//! A scenario file read for a run (`schedkit sim`, `compare`, `run FILE`): parsed, the
//! command line's overrides applied through the same checks as the file's keys, then checked
//! as a whole for being worth running. Errors and warnings are [`Diagnostic`]s with the text
//! they point into, for a caller to show with a caret.

use super::{Diagnostic, Scenario, ScenarioError};
use crate::time::Nanos;
use std::path::Path;

/// The command line's overrides of a scenario file (`sim --policy --cores --horizon --seed`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub policy: Option<String>,
    pub cores: Option<usize>,
    pub horizon: Option<Nanos>,
    pub seed: Option<u64>,
}

impl Overrides {
    /// Whether any override is given.
    pub fn any(&self) -> bool {
        self.policy.is_some()
            || self.cores.is_some()
            || self.horizon.is_some()
            || self.seed.is_some()
    }

    /// `s` with the overrides applied in this order (policy, cores, horizon, seed), each
    /// checked as its key in the file would be.
    pub fn apply(&self, mut s: Scenario) -> Result<Scenario, ScenarioError> {
        if let Some(p) = &self.policy {
            s = s.with_policy(p)?;
        }
        if let Some(c) = self.cores {
            s = s.with_cores(c)?;
        }
        if let Some(h) = self.horizon {
            s = s.with_horizon(h)?;
        }
        if let Some(seed) = self.seed {
            s = s.with_seed(seed);
        }
        Ok(s)
    }
}

/// A scenario read for a run.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The scenario, overrides applied.
    pub scenario: Scenario,
    /// The file's text (where diagnostics, such as the event budget's refusal, point).
    pub text: String,
    /// What [`Scenario::runnable`] warns about (durations far beyond the horizon).
    pub warnings: Vec<Diagnostic>,
}

/// Why a file could not be read for a run: the diagnostic, and the text its span points into
/// (`None` when the file could not be read at all).
#[derive(Clone, Debug)]
pub struct LoadError {
    pub diagnostic: Diagnostic,
    pub text: Option<String>,
}

impl Scenario {
    /// Reads `path` for a run: parse errors, override errors and runnability errors (no
    /// work, work after the horizon) as a [`LoadError`]. Overrides come first, then the
    /// scenario as a whole, so that `--horizon` meets the same checks as `[run] horizon`.
    pub fn load_for_run(path: &Path, overrides: &Overrides) -> Result<Loaded, Box<LoadError>> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Box::new(LoadError {
                diagnostic: Diagnostic::from(ScenarioError {
                    file: file.clone(),
                    line: 0,
                    column: 0,
                    field: "file".into(),
                    message: format!("cannot read scenario: {e}"),
                }),
                text: None,
            })
        })?;
        let located = |d: Diagnostic, text: &str| {
            Box::new(LoadError {
                diagnostic: d,
                text: Some(text.to_string()),
            })
        };
        let scenario = Scenario::parse_located(&file, &text).map_err(|d| located(d, &text))?;
        let scenario = overrides
            .apply(scenario)
            .map_err(|e| located(e.into(), &text))?;
        let warnings = scenario
            .runnable(Some(&text))
            .map_err(|d| located(d, &text))?;
        Ok(Loaded {
            scenario,
            text,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RR: &str =
        "cores = 2\n[policy]\nname = \"rr\"\n[[process]]\nname = \"a\"\nburst = \"4ms\"\n";

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("schedkit-load-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn overrides_apply_with_the_file_checks() {
        let p = file("rr.toml", RR);
        let none = Overrides::default();
        assert!(!none.any());
        let loaded = Scenario::load_for_run(&p, &none).unwrap();
        assert_eq!(loaded.text, RR);
        let o = Overrides {
            policy: Some("srtf".into()),
            cores: Some(1),
            horizon: Some(Nanos::from_ms(50)),
            seed: Some(7),
        };
        assert!(o.any());
        let s = Scenario::load_for_run(&p, &o).unwrap().scenario;
        assert_eq!(s.policy().name(), crate::scenario::PolicyName::Srtf);
        assert_eq!((s.cores(), s.horizon()), (1, Nanos::from_ms(50)));
        let bad = Overrides {
            cores: Some(0),
            ..Overrides::default()
        };
        let e = Scenario::load_for_run(&p, &bad).unwrap_err();
        assert_eq!(e.diagnostic.error.field, "cores");
        assert_eq!(e.text.as_deref(), Some(RR));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_missing_file_and_a_bad_value_are_located() {
        let missing = std::env::temp_dir().join("schedkit-load-no-such-file.toml");
        let e = Scenario::load_for_run(&missing, &Overrides::default()).unwrap_err();
        assert_eq!(e.diagnostic.error.field, "file");
        assert!(e.text.is_none());
        let p = file("bad.toml", "cores = 0\n");
        let e = Scenario::load_for_run(&p, &Overrides::default()).unwrap_err();
        assert_eq!(e.diagnostic.error.line, 1);
        assert!(e.diagnostic.span.is_some());
        std::fs::remove_file(p).unwrap();
    }
}
