//! `schedkit bench`'s tables and JSON.

use super::{FileTiming, SimBench};
use schedkit_core::Nanos;
use schedkit_render::table::table;
use std::fmt::Write;

/// `12.3 M` style rates.
fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn secs(ns: u64) -> String {
    format!("{}", Nanos(ns))
}

/// `bench sim --json`.
pub fn sim_json(b: &SimBench) -> serde_json::Value {
    serde_json::json!({
        "repeats": b.repeats,
        "quick": b.quick,
        "workloads": b.measured,
        "skipped": b.skipped.iter().map(|w| &w.0).collect::<Vec<_>>(),
        "rss": b.rss,
        "eevdf_vs_cfs": eevdf_vs_cfs(b).iter().map(|r| serde_json::json!({
            "cores": r.cores,
            "cfs_events_per_cpu_s": r.cfs,
            "eevdf_events_per_cpu_s": r.eevdf,
            "ratio": r.ratio(),
        })).collect::<Vec<_>>(),
    })
}

/// One core count at which both fair models were measured (issue 19's speed target: `eevdf`
/// at no less than 70 % of `cfs`'s events per second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FairPair {
    pub cores: usize,
    /// Events per second of the simulating thread's CPU time (median run): on a machine
    /// shared with other work the wall-clock rate measures the other work too.
    pub cfs: f64,
    pub eevdf: f64,
}

impl FairPair {
    pub fn ratio(&self) -> f64 {
        self.eevdf / self.cfs
    }
}

/// The `cfs` and `eevdf` workloads measured at the same core count, paired.
pub fn eevdf_vs_cfs(b: &SimBench) -> Vec<FairPair> {
    let per_cpu_s = |m: &super::Measured| m.events as f64 / m.median_cpu_s.max(1e-9);
    b.measured
        .iter()
        .filter(|c| c.policy == "cfs")
        .filter_map(|c| {
            let e = b
                .measured
                .iter()
                .find(|e| e.policy == "eevdf" && e.cores == c.cores)?;
            Some(FairPair {
                cores: c.cores,
                cfs: per_cpu_s(c),
                eevdf: per_cpu_s(e),
            })
        })
        .collect()
}

/// `bench sim`'s tables.
pub fn sim_text(b: &SimBench) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "schedkit bench sim · single thread · metrics on, tracing off · median of {} runs{}",
        b.repeats,
        if b.quick {
            " · --quick (horizons / 10)"
        } else {
            ""
        }
    );
    let mut t = table(&[
        "workload",
        "policy",
        "cores",
        "simulated",
        "events",
        "jobs",
        "median s",
        "cpu s",
        "events/s",
        "jobs/s",
        "target",
        "met",
    ]);
    for m in &b.measured {
        t.add_row(vec![
            m.name.clone(),
            m.policy.clone(),
            m.cores.to_string(),
            secs(m.horizon_ns),
            m.events.to_string(),
            m.jobs.to_string(),
            format!("{:.4}", m.median_s),
            format!("{:.4}", m.median_cpu_s),
            rate(m.events_per_s),
            if m.jobs > 0 {
                rate(m.jobs_per_s)
            } else {
                "-".into()
            },
            format!("{} {}/s", rate(m.target_per_s), m.unit),
            if m.meets_target { "yes" } else { "NO" }.into(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    for (name, policy) in &b.skipped {
        let _ = writeln!(
            out,
            "skipped {name}: policy \"{policy}\" is not in the simulator yet"
        );
    }
    let pairs = eevdf_vs_cfs(b);
    if !pairs.is_empty() {
        let mut t = table(&[
            "cores",
            "cfs events/cpu-s",
            "eevdf events/cpu-s",
            "eevdf / cfs",
        ]);
        for p in &pairs {
            t.add_row(vec![
                p.cores.to_string(),
                rate(p.cfs),
                rate(p.eevdf),
                format!("{:.0} %", 100.0 * p.ratio()),
            ]);
        }
        let _ = writeln!(
            out,
            "\neevdf against cfs (events per second of the simulating thread's CPU time)\n{t}"
        );
    }
    if !b.rss.is_empty() {
        let mut t = table(&["workload", "simulated", "events", "peak RSS MiB"]);
        for r in &b.rss {
            t.add_row(vec![
                r.name.clone(),
                secs(r.horizon_ns),
                r.events.to_string(),
                format!("{:.1}", r.peak_rss_kib as f64 / 1024.0),
            ]);
        }
        let _ = writeln!(
            out,
            "\npeak resident memory of one run (child process, VmHWM)\n{t}"
        );
    }
    out
}

/// The sum of the files' median times (s).
pub fn total_s(rows: &[FileTiming]) -> f64 {
    rows.iter().map(|r| r.median_s).sum()
}

/// `bench files --json`.
pub fn files_json(rows: &[FileTiming], repeats: usize) -> serde_json::Value {
    let files: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "file": r.file.display().to_string(),
                "tasks": r.tasks,
                "cores": r.cores,
                "jobs": r.jobs,
                "events": r.events,
                "deadline_misses": r.deadline_misses,
                "median_s": r.median_s,
                "median_cpu_s": r.median_cpu_s,
            })
        })
        .collect();
    serde_json::json!({
        "repeats": repeats,
        "total_s": total_s(rows),
        "total_cpu_s": rows.iter().map(|r| r.median_cpu_s).sum::<f64>(),
        "files": files,
    })
}

/// `bench files`'s table and the total of medians.
pub fn files_text(rows: &[FileTiming], repeats: usize) -> String {
    let mut t = table(&[
        "file", "tasks", "cores", "jobs", "misses", "median s", "cpu s",
    ]);
    for r in rows {
        t.add_row(vec![
            r.file.display().to_string(),
            r.tasks.to_string(),
            r.cores.to_string(),
            r.jobs.to_string(),
            r.deadline_misses.to_string(),
            format!("{:.5}", r.median_s),
            format!("{:.5}", r.median_cpu_s),
        ]);
    }
    format!(
        "{t}\ntotal of medians: {:.5} s (median of {repeats} runs each)\n",
        total_s(rows)
    )
}
