//! `schedkit compare FILE --policies cfs,twrs,...`: one scenario under several simulator
//! policies, side by side.
//!
//! Each run is the scenario with only `policy.name` replaced; every other `[policy]`
//! parameter (quantum, seed, sched_latency, period, ...) is kept, so the comparison is of
//! policies, not of settings. Runs are independent and go in parallel (rayon); results are
//! printed in the order the policies were given.
//!
//! The table puts policies in columns and (process, metric) pairs in rows, so it stays
//! readable for many policies and many processes alike. `--chart` draws three panels: per
//! process CPU share (with each run's GPS share as a tick), average waiting and average
//! turnaround.

use crate::cli::Failure;
#[cfg(test)]
use crate::cli::EXIT_BAD_INPUT;
use anyhow::Context;
use clap::Args;
use comfy_table::{presets::UTF8_BORDERS_ONLY, CellAlignment, Table};
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_render::chart::{self, Axis, BarChart, BarSeries, Chart};
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

/// Parses the `--policies` list: known simulator policies, no duplicates
/// (`schedkit_io::compare`, shared with the Python module).
fn parse_policies(list: &[String]) -> Result<Vec<PolicyName>, Failure> {
    Ok(schedkit_io::compare::parse_policies(list)?)
}

/// Runs the scenario once per policy, keeping traces for `--parquet`.
fn run_traced(
    scenario: &Scenario,
    policies: &[PolicyName],
    keep_trace: bool,
) -> Result<Vec<schedkit_io::compare::Run>, Failure> {
    let bar = indicatif::ProgressBar::new(policies.len() as u64);
    let runs = schedkit_io::compare::run_all(scenario, policies, keep_trace, &|| bar.inc(1));
    bar.finish_and_clear();
    Ok(runs?)
}

/// Runs the scenario once per policy (the tests' entry point).
#[cfg(test)]
fn run_all(scenario: &Scenario, policies: &[PolicyName]) -> Result<Vec<Report>, Failure> {
    Ok(run_traced(scenario, policies, false)?
        .into_iter()
        .map(|r| r.report)
        .collect())
}

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn pct(x: f64) -> String {
    format!("{:.2}", x * 100.0)
}

/// The side-by-side table: policies in columns.
pub fn render_table(reports: &[Report]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    let mut header = vec!["process".to_string(), "metric".to_string()];
    header.extend(reports.iter().map(|r| r.policy.clone()));
    t.set_header(header);
    for i in 2..2 + reports.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let Some(first) = reports.first() else {
        return String::new();
    };
    type Metric = (
        &'static str,
        fn(&schedkit_core::report::ShareReport) -> String,
    );
    let metrics: [Metric; 4] = [
        ("share %", |p| pct(p.share)),
        ("GPS %", |p| pct(p.ideal_share)),
        ("avg wait ms", |p| ms(p.avg_waiting_ns)),
        ("avg turn ms", |p| ms(p.avg_turnaround_ns)),
    ];
    for (i, proc_) in first.processes.iter().enumerate() {
        for (m, (label, f)) in metrics.iter().enumerate() {
            let mut row = vec![
                if m == 0 {
                    proc_.name.clone()
                } else {
                    String::new()
                },
                label.to_string(),
            ];
            row.extend(reports.iter().map(|r| f(&r.processes[i])));
            t.add_row(row);
        }
    }
    type Summary = (&'static str, fn(&Report) -> String);
    let summary: [Summary; 9] = [
        ("avg waiting ms", |r| ms(r.summary.avg_waiting_ns)),
        ("avg turnaround ms", |r| ms(r.summary.avg_turnaround_ns)),
        ("avg response ms", |r| ms(r.summary.avg_response_ns)),
        ("makespan ms", |r| ms(r.summary.makespan_ns)),
        ("max |share - GPS| pp", |r| {
            pct(r.summary.max_abs_share_error)
        }),
        ("mean |error| vs GPS %", |r| {
            format!("{:.2}", r.summary.mean_abs_pct_error)
        }),
        ("context switches", |r| {
            r.summary.context_switches.to_string()
        }),
        ("migrations", |r| r.summary.migrations.to_string()),
        ("deadline misses", |r| r.summary.deadline_misses.to_string()),
    ];
    for (k, (label, f)) in summary.iter().enumerate() {
        let mut row = vec![
            if k == 0 {
                "summary".into()
            } else {
                String::new()
            },
            label.to_string(),
        ];
        row.extend(reports.iter().map(f));
        t.add_row(row);
    }
    format!(
        "sim · {} · {} cores · policies {}\n\n{}\n",
        first.scenario,
        first.cores,
        reports
            .iter()
            .map(|r| r.policy.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        t
    )
}

/// The three-panel chart: shares (with GPS ticks), waiting, turnaround per process.
pub fn render_chart(reports: &[Report]) -> String {
    let names: Vec<String> = reports
        .first()
        .map(|r| r.processes.iter().map(|p| p.name.clone()).collect())
        .unwrap_or_default();
    let mut share = BarChart::new(
        "CPU share per process",
        "process",
        Axis::new("share of the machine", "%"),
        names.clone(),
    );
    share.marks_label = "GPS share".into();
    let mut wait = BarChart::new(
        "Average waiting time",
        "process",
        Axis::new("avg waiting", "ms"),
        names.clone(),
    );
    let mut turn = BarChart::new(
        "Average turnaround time",
        "process",
        Axis::new("avg turnaround", "ms"),
        names,
    );
    for r in reports {
        let col = |f: &dyn Fn(&schedkit_core::report::ShareReport) -> f64| -> Vec<f64> {
            r.processes.iter().map(f).collect()
        };
        share.series(
            BarSeries::new(&r.policy, col(&|p| p.share * 100.0))
                .with_marks(col(&|p| p.ideal_share * 100.0)),
        );
        wait.series(BarSeries::new(
            &r.policy,
            col(&|p| p.avg_waiting_ns as f64 / 1e6),
        ));
        turn.series(BarSeries::new(
            &r.policy,
            col(&|p| p.avg_turnaround_ns as f64 / 1e6),
        ));
    }
    let stem = reports.first().map_or(String::new(), |r| {
        std::path::Path::new(&r.scenario)
            .file_stem()
            .map_or(r.scenario.clone(), |s| s.to_string_lossy().into_owned())
    });
    let n = reports.first().map_or(1, |r| r.processes.len()).max(1);
    // Wide enough that each process group has room for one bar per policy; panels that get
    // wide (many processes or policies) are stacked instead of set side by side.
    let panel_w = (120.0 + (n * reports.len().max(1)) as f64 * 14.0).clamp(480.0, 2400.0);
    let cols = if panel_w > 700.0 { 1 } else { 3 };
    let panels: [&dyn Chart; 3] = [&share, &wait, &turn];
    let cores = reports.first().map_or(0, |r| r.cores);
    chart::grid(
        &format!(
            "{stem}: {} policies compared ({} core{}, simulated)",
            reports.len(),
            cores,
            if cores == 1 { "" } else { "s" }
        ),
        &panels,
        cols,
        panel_w,
        430.0,
    )
}

pub fn compare(a: CompareArgs) -> Result<(), Failure> {
    let policies = parse_policies(&a.policies)?;
    let scenario = Scenario::load(&a.file)?;
    let runs = run_traced(&scenario, &policies, a.parquet.is_some())?;
    if let Some(dir) = &a.parquet {
        crate::io_cmds::compare_parquet(dir, &scenario, &runs)?;
    }
    let reports: Vec<Report> = runs.into_iter().map(|r| r.report).collect();
    if a.json {
        let doc = serde_json::json!({ "scenario": scenario.file, "reports": reports });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn policy_lists_are_checked() {
        assert_eq!(
            parse_policies(&names(&["rr", "fcfs"])).ok().unwrap(),
            vec![PolicyName::Rr, PolicyName::Fcfs]
        );
        let e = parse_policies(&names(&["rr", "nope"])).err().unwrap();
        assert_eq!(e.status, EXIT_BAD_INPUT);
        assert!(e.message.contains("\"nope\""), "{}", e.message);
        let e = parse_policies(&names(&["rr", "rr"])).err().unwrap();
        assert!(e.message.contains("twice"));
        // A known name the simulator does not run.
        let e = parse_policies(&names(&["exclusive"])).err().unwrap();
        assert!(e.message.contains("not available"), "{}", e.message);
    }

    #[test]
    fn textbook_policies_side_by_side() {
        let s =
            Scenario::parse("t.toml", include_str!("../../../examples/textbook/rr.toml")).unwrap();
        let reports = run_all(&s, &[PolicyName::Fcfs, PolicyName::Sjf, PolicyName::Rr])
            .ok()
            .unwrap();
        let avg: Vec<u64> = reports.iter().map(|r| r.summary.avg_waiting_ns).collect();
        // Seed 004 tables 2.1, 2.2, 2.4 on the same four processes.
        assert_eq!(avg, vec![10_250_000, 7_500_000, 13_250_000]);
        let table = render_table(&reports);
        assert!(table.contains("13.250") && table.contains("10.250") && table.contains("7.500"));
        // Every row has the same width: the table lines up.
        let widths: std::collections::BTreeSet<usize> = table
            .lines()
            .skip(2)
            .filter(|l| !l.is_empty())
            .map(|l| l.chars().count())
            .collect();
        assert_eq!(widths.len(), 1, "{table}");
        let svg = render_chart(&reports);
        for needle in [
            "CPU share per process",
            "Average waiting time",
            "avg turnaround (ms)",
            ">GPS share<",
            ">fcfs<",
            ">rr<",
        ] {
            assert!(svg.contains(needle), "{needle}");
        }
    }
}
