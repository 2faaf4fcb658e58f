//! `schedkit bench`: how fast the simulator is, measured, not claimed.
//!
//! - `bench sim` runs the issue-2 suite ([`schedkit_core::generate::bench_workloads`]: RR with
//!   10,000 processes, CFS with 1,000 threads on 2/8/64 cores, global EDF on UUniFast sets)
//!   single-threaded, metrics on, tracing off, and prints simulated events/s and jobs/s as the
//!   median of `--repeats` runs, beside each target. `--rss` also measures the peak resident
//!   memory of one run at two horizons (10 s and 100 s; 1 s and 10 s with `--quick`) in child
//!   processes, to show memory does not grow with simulated time.
//! - `bench export` writes UUniFast task sets as scenario files, and `bench files` times the
//!   simulation of scenario files: `bench/simso/run.sh` uses both to measure SimSo and
//!   schedkit on the same task sets.
//!
//! Wall time covers `simulate_report` (engine + streaming metrics + the final report), not
//! building the scenario. Workloads whose policy the simulator does not have yet are listed
//! as skipped, not dropped silently.

use crate::failure::Failure;
use crate::output::table;
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use schedkit_experiments::stats::median;

use schedkit_core::generate::{bench_workloads, gedf_workload, tasks_toml, Workload};
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use schedkit_sim::policies::SIM_POLICIES;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Simulator throughput: events/s and jobs/s for RR, CFS and global EDF workloads.
    Sim(SimBenchArgs),
    /// Write UUniFast global-EDF task sets as scenario files (inputs for peer simulators).
    Export(ExportArgs),
    /// Time the simulation of scenario files (median of repeats), e.g. exported task sets.
    Files(FilesArgs),
    /// One run of one `bench sim` workload, reporting its peak RSS (used by `--rss`).
    #[command(hide = true)]
    One(OneArgs),
}

#[derive(Args)]
pub struct SimBenchArgs {
    /// Short horizons (a tenth) and 3 repeats: a smoke run for CI.
    #[arg(long)]
    quick: bool,
    /// Runs per workload; the median is reported (default 5, or 3 with --quick).
    #[arg(long)]
    repeats: Option<usize>,
    /// Only workloads whose name contains this text (e.g. `gedf`).
    #[arg(long)]
    only: Option<String>,
    /// Also measure peak RSS at two horizons (child processes).
    #[arg(long)]
    rss: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ExportArgs {
    /// Directory to write `set-NNN.toml` into (created if missing).
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, default_value_t = 20)]
    tasks: usize,
    #[arg(long, default_value_t = 4)]
    cores: usize,
    /// Total utilisation (e.g. 3.0 on 4 cores).
    #[arg(long, default_value_t = 3.0)]
    utilisation: f64,
    /// Number of task sets (seeds `seed`, `seed + 1`, ...).
    #[arg(long, default_value_t = 10)]
    sets: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated time per set (e.g. `10s`).
    #[arg(long, default_value = "10s")]
    horizon: String,
}

#[derive(Args)]
pub struct FilesArgs {
    /// Scenario files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct OneArgs {
    name: String,
    #[arg(long)]
    horizon: String,
}

/// One measured workload.
#[derive(Serialize, Clone, Debug)]
pub struct Measured {
    pub name: String,
    pub policy: String,
    pub cores: usize,
    pub horizon_ns: u64,
    pub events: u64,
    pub jobs: u64,
    /// Median wall time of one simulation.
    pub median_s: f64,
    pub repeats: usize,
    pub events_per_s: f64,
    pub jobs_per_s: f64,
    /// `events` or `jobs`: what the target counts.
    pub unit: String,
    pub target_per_s: f64,
    pub meets_target: bool,
    pub deadline_misses: u64,
}

/// Peak RSS of a child run at one horizon.
#[derive(Serialize, Clone, Debug)]
pub struct Rss {
    pub name: String,
    pub horizon_ns: u64,
    pub events: u64,
    pub peak_rss_kib: u64,
}

/// Runs `scenario` `repeats` times; returns the stats of the last run and the median time.
fn time_scenario(
    scenario: &Scenario,
    repeats: usize,
) -> Result<(schedkit_sim::SimStats, u64, f64), Failure> {
    let mut times = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        let (report, _, stats) = schedkit_sim::simulate_report(scenario, false)?;
        times.push(t.elapsed().as_secs_f64());
        last = Some((stats, report.summary.deadline_misses));
    }
    let (stats, misses) = last.expect("at least one run");
    Ok((stats, misses, median(&times)))
}

fn measure(w: &Workload, repeats: usize) -> Result<Measured, Failure> {
    let scenario = w.scenario();
    let (stats, misses, secs) = time_scenario(&scenario, repeats)?;
    let events_per_s = stats.events as f64 / secs;
    let jobs_per_s = stats.jobs as f64 / secs;
    let rate = if w.unit == "jobs" {
        jobs_per_s
    } else {
        events_per_s
    };
    Ok(Measured {
        name: w.name.clone(),
        policy: w.policy.to_string(),
        cores: w.cores,
        horizon_ns: w.horizon.0,
        events: stats.events,
        jobs: stats.jobs,
        median_s: secs,
        repeats,
        events_per_s,
        jobs_per_s,
        unit: w.unit.to_string(),
        target_per_s: w.target,
        meets_target: rate >= w.target,
        deadline_misses: misses,
    })
}

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

fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>14} [{bar:30}] {pos}/{len} {elapsed}<{eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

pub fn run(cmd: BenchCommand) -> Result<(), Failure> {
    match cmd {
        BenchCommand::Sim(a) => sim(a),
        BenchCommand::Export(a) => export(a),
        BenchCommand::Files(a) => files(a),
        BenchCommand::One(a) => one(a),
    }
}

fn sim(a: SimBenchArgs) -> Result<(), Failure> {
    let repeats = a.repeats.unwrap_or(if a.quick { 3 } else { 5 });
    let all = bench_workloads(a.quick, None);
    let chosen: Vec<&Workload> = all
        .iter()
        .filter(|w| a.only.as_ref().is_none_or(|o| w.name.contains(o.as_str())))
        .collect();
    let (runnable, skipped): (Vec<&Workload>, Vec<&Workload>) = chosen
        .into_iter()
        .partition(|w| SIM_POLICIES.contains(&w.policy));
    let pb = progress(runnable.len() as u64, "bench sim");
    let mut measured = Vec::new();
    for w in &runnable {
        pb.set_message(w.name.clone());
        measured.push(measure(w, repeats)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let mut rss = Vec::new();
    if a.rss {
        let horizons = if a.quick {
            [Nanos::from_secs(1), Nanos::from_secs(10)]
        } else {
            [Nanos::from_secs(10), Nanos::from_secs(100)]
        };
        let pb = progress((runnable.len() * 2) as u64, "peak RSS");
        for w in &runnable {
            for h in horizons {
                pb.set_message(format!("{} {}", w.name, Nanos(h.0)));
                rss.push(child_rss(&w.name, h)?);
                pb.inc(1);
            }
        }
        pb.finish_and_clear();
    }
    if a.json {
        let doc = serde_json::json!({
            "repeats": repeats,
            "quick": a.quick,
            "workloads": measured,
            "skipped": skipped.iter().map(|w| &w.name).collect::<Vec<_>>(),
            "rss": rss,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(());
    }
    println!(
        "schedkit bench sim · single thread · metrics on, tracing off · median of {repeats} runs{}",
        if a.quick {
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
        "events/s",
        "jobs/s",
        "target",
        "met",
    ]);
    for m in &measured {
        t.add_row(vec![
            m.name.clone(),
            m.policy.clone(),
            m.cores.to_string(),
            secs(m.horizon_ns),
            m.events.to_string(),
            m.jobs.to_string(),
            format!("{:.4}", m.median_s),
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
    println!("{t}");
    for w in &skipped {
        println!(
            "skipped {}: policy \"{}\" is not in the simulator yet",
            w.name, w.policy
        );
    }
    if !rss.is_empty() {
        let mut t = table(&["workload", "simulated", "events", "peak RSS MiB"]);
        for r in &rss {
            t.add_row(vec![
                r.name.clone(),
                secs(r.horizon_ns),
                r.events.to_string(),
                format!("{:.1}", r.peak_rss_kib as f64 / 1024.0),
            ]);
        }
        println!("\npeak resident memory of one run (child process, VmHWM)\n{t}");
    }
    Ok(())
}

/// Runs `schedkit bench one NAME --horizon H` and reads its report.
fn child_rss(name: &str, horizon: Nanos) -> Result<Rss, Failure> {
    let exe = crate::self_exe().context("locating the schedkit binary")?;
    let out = std::process::Command::new(exe)
        .args([
            "bench",
            "one",
            name,
            "--horizon",
            &format!("{}ns", horizon.0),
        ])
        .output()
        .context("running a child benchmark")?;
    if !out.status.success() {
        return Err(anyhow!(
            "child benchmark {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .map_err(anyhow::Error::from)
        .and_then(|v| {
            Ok(Rss {
                name: name.to_string(),
                horizon_ns: horizon.0,
                events: v["events"].as_u64().ok_or_else(|| anyhow!("no events"))?,
                peak_rss_kib: v["peak_rss_kib"]
                    .as_u64()
                    .ok_or_else(|| anyhow!("no peak_rss_kib"))?,
            })
        })
        .map_err(Failure::from)
}

/// Peak resident set size of this process (`VmHWM` in /proc/self/status), in KiB.
fn peak_rss_kib() -> Result<u64, Failure> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no VmHWM in /proc/self/status").into())
}

fn parse_duration(s: &str, field: &str) -> Result<Nanos, Failure> {
    Nanos::parse(s).map_err(|e| Failure {
        status: crate::failure::EXIT_BAD_INPUT,
        message: format!("--{field} {s}: {e}"),
    })
}

fn one(a: OneArgs) -> Result<(), Failure> {
    let horizon = parse_duration(&a.horizon, "horizon")?;
    let w = bench_workloads(false, Some(horizon))
        .into_iter()
        .find(|w| w.name == a.name)
        .ok_or_else(|| Failure {
            status: crate::failure::EXIT_BAD_INPUT,
            message: format!("no benchmark workload named {}", a.name),
        })?;
    let (report, _, stats) = schedkit_sim::simulate_report(&w.scenario(), false)?;
    let doc = serde_json::json!({
        "events": stats.events,
        "jobs": stats.jobs,
        "deadline_misses": report.summary.deadline_misses,
        "peak_rss_kib": peak_rss_kib()?,
    });
    println!("{doc}");
    Ok(())
}

fn export(a: ExportArgs) -> Result<(), Failure> {
    let horizon = parse_duration(&a.horizon, "horizon")?;
    if a.utilisation > a.tasks as f64 || a.utilisation <= 0.0 || a.cores == 0 {
        return Err(Failure {
            status: crate::failure::EXIT_BAD_INPUT,
            message: format!(
                "--utilisation {} must be in (0, tasks = {}] and --cores at least 1",
                a.utilisation, a.tasks
            ),
        });
    }
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    for k in 0..a.sets {
        let s = gedf_workload(a.tasks, a.cores, a.utilisation, horizon, a.seed + k);
        let path = a.dir.join(format!("set-{k:03}.toml"));
        std::fs::write(&path, tasks_toml(&s))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!("wrote {} task sets to {}", a.sets, a.dir.display());
    Ok(())
}

fn files(a: FilesArgs) -> Result<(), Failure> {
    let pb = progress(a.files.len() as u64, "bench files");
    let mut rows = Vec::new();
    for f in &a.files {
        let s = Scenario::load(f)?;
        let (stats, misses, secs) = time_scenario(&s, a.repeats)?;
        rows.push(serde_json::json!({
            "file": f.display().to_string(),
            "tasks": s.tasks.len(),
            "cores": s.cores,
            "jobs": stats.jobs,
            "events": stats.events,
            "deadline_misses": misses,
            "median_s": secs,
        }));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let total: f64 = rows
        .iter()
        .map(|r| r["median_s"].as_f64().unwrap_or(0.0))
        .sum();
    if a.json {
        let doc = serde_json::json!({ "repeats": a.repeats, "total_s": total, "files": rows });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
        return Ok(());
    }
    let mut t = table(&["file", "tasks", "cores", "jobs", "misses", "median s"]);
    for r in &rows {
        t.add_row(vec![
            r["file"].as_str().unwrap_or("").to_string(),
            r["tasks"].to_string(),
            r["cores"].to_string(),
            r["jobs"].to_string(),
            r["deadline_misses"].to_string(),
            format!("{:.5}", r["median_s"].as_f64().unwrap_or(0.0)),
        ]);
    }
    println!(
        "{t}\ntotal of medians: {total:.5} s (median of {} runs each)",
        a.repeats
    );
    Ok(())
}
