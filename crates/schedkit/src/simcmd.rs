//! What `schedkit sim` and `compare` do around the simulation: read the scenario for a run
//! (errors show the offending line with a caret under the value, warnings are printed), apply
//! the command-line overrides through the same checks as the file, refuse what the event
//! budget says would not finish, and simulate with a progress bar on a terminal and a clean
//! stop on Ctrl-C.

use crate::failure::{Failure, EXIT_BAD_INPUT, EXIT_INTERRUPTED};
use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use clap::Args;
use schedkit_core::scenario::{Diagnostic, Scenario, ScenarioError};
use schedkit_core::Nanos;
use schedkit_sim::budget;
use std::io::IsTerminal;
use std::path::Path;

/// [`DEFAULT_MAX_EVENTS`] as help prints it (a test keeps the two equal).
pub const DEFAULT_MAX_EVENTS_TEXT: &str = "100000000";

/// `sim`'s overrides of the file and its event budget.
#[derive(Args, Clone)]
pub struct SimOverrides {
    /// Simulate under this policy instead of the file's `[policy] name` (its other `[policy]`
    /// keys kept). The policies are listed below.
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,
    /// Model this many cores instead of the file's `cores`.
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// Stop at this simulated time instead of the file's `[run] horizon` (`500ms`, `2s`).
    #[arg(long, value_name = "DURATION", value_parser = Nanos::parse)]
    pub horizon: Option<Nanos>,
    /// The seed of every random choice instead of the file's `[policy] seed`.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Refuse a scenario estimated to need more simulation steps than this (see below).
    #[arg(long, value_name = "N", default_value = DEFAULT_MAX_EVENTS_TEXT)]
    pub max_events: u64,
}

/// No overrides, the default budget (what `compare` reads a file with).
impl Default for SimOverrides {
    fn default() -> SimOverrides {
        SimOverrides {
            policy: None,
            cores: None,
            horizon: None,
            seed: None,
            max_events: budget::DEFAULT_MAX_EVENTS,
        }
    }
}

impl SimOverrides {
    /// Whether any of the scenario overrides is given (not the budget).
    pub fn any(&self) -> bool {
        self.policy.is_some()
            || self.cores.is_some()
            || self.horizon.is_some()
            || self.seed.is_some()
    }
}

/// An input error as printed: the located line, then the offending line with a caret.
fn bad_input(d: &Diagnostic, text: Option<&str>) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: render(d, text, Level::ERROR),
    }
}

/// `file:line:col: `field`: message`, then, where the span is known, the line with a caret
/// under the value (annotate-snippets; only the one line is handed over, so a file of a
/// million lines costs nothing here).
fn render(d: &Diagnostic, text: Option<&str>, level: Level<'_>) -> String {
    let head = d.error.to_string();
    let (Some(text), Some(span)) = (text, d.span.clone()) else {
        return head;
    };
    if span.start > text.len() {
        return head;
    }
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[span.start..]
        .find('\n')
        .map_or(text.len(), |i| span.start + i);
    let line = &text[line_start..line_end];
    let start = span.start - line_start;
    let end = (span.end.min(line_end) - line_start)
        .max(start + 1)
        .min(line.len());
    if start >= end {
        return head;
    }
    let report = &[Group::with_level(level).element(
        Snippet::source(line)
            .line_start(d.error.line.max(1))
            .path(d.error.file.as_str())
            .annotation(
                AnnotationKind::Primary
                    .span(start..end)
                    .label(&d.error.field),
            ),
    )];
    let snippet = Renderer::plain().render(report);
    format!("{head}\n{snippet}")
}

/// A scenario read for a run, and its text (where the budget's refusal points).
pub struct Loaded {
    pub scenario: Scenario,
    pub text: String,
}

/// Reads a scenario for a run: parse errors and runnability errors (no work, work after
/// the horizon) as input failures with a caret; warnings printed on stderr.
pub fn load(path: &Path, overrides: &SimOverrides) -> Result<Loaded, Failure> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(
            &Diagnostic::from(ScenarioError {
                file: file.clone(),
                line: 0,
                column: 0,
                field: "file".into(),
                message: format!("cannot read scenario: {e}"),
            }),
            None,
        )
    })?;
    let mut scenario =
        Scenario::parse_located(&file, &text).map_err(|d| bad_input(&d, Some(&text)))?;
    // Overrides first, each checked as its key in the file would be; then the scenario as a
    // whole, so that `--horizon` meets the same horizon checks as `[run] horizon`.
    let over = |r: Result<Scenario, ScenarioError>| r.map_err(|e| bad_input(&e.into(), None));
    if let Some(p) = &overrides.policy {
        scenario = over(scenario.with_policy(p))?;
    }
    if let Some(c) = overrides.cores {
        scenario = over(scenario.with_cores(c))?;
    }
    if let Some(h) = overrides.horizon {
        scenario = over(scenario.with_horizon(h))?;
    }
    if let Some(s) = overrides.seed {
        scenario = scenario.with_seed(s);
    }
    let warnings = scenario
        .runnable(Some(&text))
        .map_err(|d| bad_input(&d, Some(&text)))?;
    for w in &warnings {
        eprintln!(
            "schedkit: warning: {}",
            render(w, Some(&text), Level::WARNING)
        );
    }
    Ok(Loaded { scenario, text })
}

/// Refuses (exit 2) a scenario whose estimated work exceeds `max_events`, naming the keys
/// (and, where the largest term's key is written in `text`, its line with a caret).
pub fn check_budget(s: &Scenario, text: &str, max_events: u64) -> Result<(), Failure> {
    budget::check(s, max_events)
        .map(|_| ())
        .map_err(|e| bad_input(&s.locate(text, e), Some(text)))
}

/// The progress bar and Ctrl-C of a simulation. The bar is drawn only on a terminal, and only
/// once the simulation has taken a second (short ones stay quiet).
struct Watcher {
    bar: indicatif::ProgressBar,
    terminal: bool,
    started: std::time::Instant,
    shown: std::cell::Cell<bool>,
}

impl schedkit_sim::Watch for Watcher {
    fn keep_going(&self, now: Nanos, events: u64) -> bool {
        if self.terminal && !self.shown.get() && self.started.elapsed().as_secs() >= 1 {
            self.shown.set(true);
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
            self.bar
                .enable_steady_tick(std::time::Duration::from_millis(500));
        }
        self.bar.set_position(now.0 / 1_000_000);
        self.bar
            .set_message(format!("{} events", budget::human(events as f64)));
        !schedkit_linux::engine::signal_flag().load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Simulates `loaded` after the budget check, showing progress when stderr is a terminal; a
/// Ctrl-C stops it with exit status 130 and nothing written.
pub fn simulate(
    loaded: &Loaded,
    max_events: u64,
    keep_trace: bool,
) -> Result<
    (
        schedkit_core::Report,
        Option<schedkit_core::TraceLog>,
        schedkit_sim::SimStats,
    ),
    Failure,
> {
    let s = &loaded.scenario;
    check_budget(s, &loaded.text, max_events)?;
    schedkit_linux::engine::install_signal_handlers();
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(s.horizon().0 / 1_000_000),
        indicatif::ProgressDrawTarget::hidden(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "simulating [{bar:30}] {pos}/{len} ms simulated · {msg} · {elapsed}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let watcher = Watcher {
        bar,
        terminal: std::io::stderr().is_terminal(),
        started: std::time::Instant::now(),
        shown: std::cell::Cell::new(false),
    };
    let out = schedkit_sim::simulate_report_watched(s, keep_trace, Some(&watcher))?;
    watcher.bar.finish_and_clear();
    if let Some(at) = out.2.stopped_at {
        return Err(Failure {
            status: EXIT_INTERRUPTED,
            message: format!(
                "interrupted at {at} of {} simulated ({} events): nothing written",
                s.horizon(),
                budget::human(out.2.events as f64)
            ),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_text_of_the_budget_is_the_budget() {
        assert_eq!(
            DEFAULT_MAX_EVENTS_TEXT.parse::<u64>().unwrap(),
            budget::DEFAULT_MAX_EVENTS
        );
    }
}
