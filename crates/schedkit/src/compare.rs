//! `schedkit compare FILE --policies cfs,twrs,...`: the flags, and printing what
//! `schedkit_experiments::compare` returns (see there for what a comparison is).

use crate::failure::Failure;
use crate::progress::Bar;
use anyhow::Context;
use clap::Args;
use schedkit_experiments::compare::{parse_policies, render_chart, render_table, run_all};
use std::path::PathBuf;

#[derive(Args)]
pub struct CompareArgs {
    /// Scenario file (TOML; see docs/scenario.md). Its `[policy]` parameters apply to every run.
    file: PathBuf,
    /// Comma-separated simulator policies, e.g. `cfs,twrs,pfs`.
    #[arg(long, value_delimiter = ',', required = true)]
    policies: Vec<String>,
    /// Draw per-process shares, waiting and turnaround side by side into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    chart: Option<PathBuf>,
    /// Print `{"scenario", "reports": [...]}` as JSON (one report per policy) instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write summary, threads, processes, groups and intervals of every run (with a
    /// `policy` column) as Parquet files into this directory.
    #[arg(long, value_name = "DIR")]
    parquet: Option<PathBuf>,
}

pub fn compare(a: CompareArgs) -> Result<(), Failure> {
    let policies = parse_policies(&a.policies)?;
    let loaded = crate::simcmd::load(&a.file, &Default::default())?;
    let scenario = loaded.scenario;
    for p in &policies {
        let s = scenario.with_policy(p.as_str())?;
        let max = schedkit_sim::budget::DEFAULT_MAX_EVENTS;
        crate::simcmd::check_budget(&s, &loaded.text, max)?;
    }
    // The intervals table needs every run's trace, which `run_all` does not keep.
    let reports = if let Some(dir) = &a.parquet {
        let runs = schedkit_io::compare::run_traced(&scenario, &policies, &bar())?;
        let tables = schedkit_io::tables::compare_tables(&scenario, &runs)?;
        crate::io_cmds::write_parquet(dir, &tables)?;
        runs.into_iter().map(|r| r.report).collect()
    } else {
        run_all(&scenario, &policies, &bar())?
    };
    if a.json {
        let doc = serde_json::json!({ "scenario": scenario.file(), "reports": reports });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).context("serialising the reports")?
        );
    } else {
        print!("{}", render_table(&reports));
    }
    if let Some(path) = &a.chart {
        std::fs::write(path, render_chart(&reports))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// One step per policy simulated.
fn bar() -> Bar {
    Bar::styled("compare [{bar:30}] {pos}/{len} policies {elapsed}<{eta}")
}
