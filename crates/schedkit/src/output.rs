//! Writing a report: the table, JSON or CSV on stdout, the Gantt chart and Chrome trace into
//! files. The rendering itself lives in `schedkit_render`.

use anyhow::Result;
use clap::Args;
use schedkit_core::report::Report;
use schedkit_core::Nanos;
use schedkit_render::table::{render_csv, render_table};

/// Where a report goes besides the table on stdout.
#[derive(Args, Clone, Default)]
pub struct ReportArgs {
    /// Print the report as JSON (integer nanoseconds) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print the per-thread report as CSV instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

/// Writes the report to stdout in the requested form.
pub fn emit(r: &Report, args: &ReportArgs) -> Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else if args.csv {
        print!("{}", render_csv(r));
    } else {
        print!("{}", render_table(r));
    }
    Ok(())
}

/// `--window FROM..TO`: the time window of the Gantt chart and the trace (`has_outputs`:
/// whether --gantt or --trace was given; a window without them is refused).
pub fn window(
    arg: Option<&str>,
    has_outputs: bool,
) -> Result<Option<(Nanos, Nanos)>, crate::failure::Failure> {
    let bad = |why: String| crate::failure::Failure {
        status: crate::failure::EXIT_BAD_INPUT,
        message: format!("--window {}: {why}", arg.unwrap_or_default()),
    };
    let Some(w) = arg else { return Ok(None) };
    if !has_outputs {
        return Err(bad("limits --gantt and --trace; give one of them".into()));
    }
    Nanos::parse_window(w).map(Some).map_err(bad)
}

/// Writes the Gantt chart (SVG) and/or the Chrome trace (JSON) of a run, limited to `window`
/// when given.
pub fn write_trace_outputs(
    scenario: &schedkit_core::Scenario,
    report: &Report,
    trace: &schedkit_core::TraceLog,
    end: schedkit_core::Nanos,
    gantt: Option<&std::path::Path>,
    chrome: Option<&std::path::Path>,
    window: Option<(Nanos, Nanos)>,
) -> Result<()> {
    use anyhow::Context;
    if let Some(path) = gantt {
        let svg = schedkit_render::gantt::render_window(scenario, report, trace, end, window);
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = chrome {
        let doc = schedkit_render::chrome::render_window(scenario, report, trace, end, window);
        let f =
            std::fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
        serde_json::to_writer(std::io::BufWriter::new(f), &doc)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
