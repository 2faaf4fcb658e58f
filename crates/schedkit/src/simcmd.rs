//! `schedkit sim`, and what `sim`, `compare` and `run FILE` do around a simulation: read the
//! scenario with the command line's overrides (`Scenario::load_for_run`; errors and warnings
//! drawn with a caret by `schedkit_render::diagnostic`, warnings printed), refuse what the
//! event budget says would not finish, and simulate with a progress bar on a terminal and a
//! clean stop on Ctrl-C.

use crate::failure::{Failure, EXIT_BAD_INPUT, EXIT_INTERRUPTED};
use crate::output::{self, ReportArgs};
use clap::Args;
use schedkit_core::scenario::{Diagnostic, Loaded, Overrides, Scenario};
use schedkit_core::Nanos;
use schedkit_render::diagnostic::{render, Severity};
use schedkit_sim::budget;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

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
    /// The scenario overrides (not the budget).
    pub fn overrides(&self) -> Overrides {
        Overrides {
            policy: self.policy.clone(),
            cores: self.cores,
            horizon: self.horizon,
            seed: self.seed,
        }
    }
}

#[derive(Args)]
pub struct SimArgs {
    /// Scenario file (TOML; see docs/scenario.md).
    file: PathBuf,
    #[command(flatten)]
    overrides: SimOverrides,
    #[command(flatten)]
    report: ReportArgs,
    #[command(flatten)]
    sweep: crate::sweep::SweepArgs,
    /// Also draw a Gantt chart (one lane per core, a colour per process) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    gantt: Option<PathBuf>,
    /// Also write the trace as Chrome trace-event JSON (opens in Perfetto) into this file.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
    /// Limit --gantt and --trace to a time window, e.g. `2s..2.1s`.
    #[arg(long, value_name = "FROM..TO")]
    window: Option<String>,
    /// Also write summary, threads, processes, groups and intervals (with --sweep: the sweep
    /// rows) as Parquet files into this directory.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
}

/// `schedkit sim FILE`: one simulation (or, with `--sweep`, a sweep of generated task sets).
pub fn sim(a: SimArgs) -> Result<(), Failure> {
    if a.sweep.sweep.is_some() {
        if a.overrides.overrides().any() {
            return Err(Failure {
                status: EXIT_BAD_INPUT,
                message: "--policy, --cores, --horizon and --seed apply to one simulation; \
                          with --sweep, name policies with --policies and set the rest in \
                          the file"
                    .into(),
            });
        }
        return crate::sweep::run(&a.file, &a.sweep, a.report.json, a.parquet.as_deref());
    }
    let loaded = load(&a.file, &a.overrides)?;
    let scenario = &loaded.scenario;
    let keep_trace = a.gantt.is_some() || a.trace.is_some() || a.parquet.is_some();
    let window = output::window(a.window.as_deref(), keep_trace)?;
    let (report, trace, stats) = simulate(&loaded, a.overrides.max_events, keep_trace)?;
    output::emit(&report, &a.report)?;
    // The dispatcher's own counters (PAWS and WS steals, ...) after the shared table.
    if !a.report.json && !a.report.csv {
        if let Some(line) =
            schedkit_render::table::policy_counters(&report.policy, &stats.policy_counters)
        {
            println!("{line}");
        }
    }
    if let (Some(dir), Some(trace)) = (&a.parquet, &trace) {
        let tables = schedkit_io::tables::sim_tables(scenario, &report, trace);
        crate::io_cmds::write_parquet(dir, &tables)?;
    }
    if let Some(trace) = trace {
        output::write_trace_outputs(
            scenario,
            &report,
            &trace,
            stats.end,
            a.gantt.as_deref(),
            a.trace.as_deref(),
            window,
        )?;
    }
    Ok(())
}

/// An input error as printed: the located line, then the offending line with a caret.
fn bad_input(d: &Diagnostic, text: Option<&str>) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: render(d, text, Severity::Error),
    }
}

/// Reads a scenario for a run with `overrides` applied: errors as input failures with a
/// caret; warnings printed on stderr.
pub fn load(path: &Path, overrides: &SimOverrides) -> Result<Loaded, Failure> {
    let loaded = Scenario::load_for_run(path, &overrides.overrides())
        .map_err(|e| bad_input(&e.diagnostic, e.text.as_deref()))?;
    for w in &loaded.warnings {
        let shown = render(w, Some(&loaded.text), Severity::Warning);
        eprintln!("schedkit: warning: {shown}");
    }
    Ok(loaded)
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
