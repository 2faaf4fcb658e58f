//! `schedkit compare FILE --policies cfs,twrs,...`: one scenario under several simulator
//! policies, side by side.
//!
//! Each run is the scenario with only `policy.name` replaced; every other `[policy]`
//! parameter (quantum, seed, sched_latency, period, ...) is kept, so the comparison is of
//! policies, not of settings. Runs are independent and go in parallel (rayon); results come
//! back in the order the policies were given.
//!
//! The table puts policies in columns and (process, metric) pairs in rows, so it stays
//! readable for many policies and many processes alike. The chart has three panels: per
//! process CPU share (with each run's GPS share as a tick), average waiting and average
//! turnaround.

use crate::progress::Progress;
use crate::Error;
use comfy_table::{presets::UTF8_BORDERS_ONLY, CellAlignment, Table};
use rayon::prelude::*;
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_render::chart::{self, Axis, BarChart, BarSeries, Chart};
use schedkit_sim::policies::SIM_POLICIES;

/// Parses the `--policies` list: known simulator policies, no duplicates.
pub fn parse_policies(list: &[String]) -> Result<Vec<PolicyName>, Error> {
    let known = || {
        SIM_POLICIES
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for raw in list {
        let name = raw.trim();
        let p = PolicyName::parse(name).ok_or_else(|| {
            Error::BadInput(format!(
                "--policies: unknown policy \"{name}\" (simulator policies: {})",
                known()
            ))
        })?;
        if !SIM_POLICIES.contains(&p) {
            return Err(Error::BadInput(format!(
                "--policies: policy \"{name}\" is not available in the simulator (simulator policies: {})",
                known()
            )));
        }
        if out.contains(&p) {
            return Err(Error::BadInput(format!(
                "--policies: \"{name}\" is listed twice"
            )));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(Error::BadInput(
            "--policies: name at least one policy".into(),
        ));
    }
    Ok(out)
}

/// Runs the scenario once per policy (in parallel), the reports in the order of `policies`;
/// one progress step per run.
pub fn run_all(
    scenario: &Scenario,
    policies: &[PolicyName],
    progress: &dyn Progress,
) -> Result<Vec<Report>, Error> {
    progress.start(policies.len() as u64);
    let results: Vec<_> = policies
        .par_iter()
        .map(|p| {
            let r = scenario
                .with_policy_spec(scenario.policy().clone().with_name(*p))
                .map_err(Error::from)
                .and_then(|s| Ok(schedkit_sim::simulate_report(&s, false).map(|(r, _, _)| r)?));
            progress.step();
            r
        })
        .collect();
    progress.finish();
    results.into_iter().collect()
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
    for c in [&mut share, &mut wait, &mut turn] {
        c.legend_title = Some("policy".into());
    }
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
        assert!(e.is_bad_input());
        assert!(e.to_string().contains("\"nope\""), "{e}");
        let e = parse_policies(&names(&["rr", "rr"])).err().unwrap();
        assert!(e.to_string().contains("twice"));
        // A known name the simulator does not run.
        let e = parse_policies(&names(&["exclusive"])).err().unwrap();
        assert!(e.to_string().contains("not available"), "{e}");
    }

    #[test]
    fn textbook_policies_side_by_side() {
        let s =
            Scenario::parse("t.toml", include_str!("../../../examples/textbook/rr.toml")).unwrap();
        let reports = run_all(
            &s,
            &[PolicyName::Fcfs, PolicyName::Sjf, PolicyName::Rr],
            &crate::progress::Silent,
        )
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
