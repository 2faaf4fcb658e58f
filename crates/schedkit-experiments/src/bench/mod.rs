//! `schedkit bench`: how fast the simulator is, measured, not claimed.
//!
//! - [`sim`] runs the issue-2 suite ([`schedkit_core::generate::bench_workloads`]: RR with
//!   10,000 processes, CFS with 1,000 threads on 2/8/64 cores, global EDF on UUniFast sets)
//!   single-threaded, metrics on, tracing off, and measures simulated events/s and jobs/s as
//!   the median of `repeats` runs, beside each target. With `rss` it also measures the peak
//!   resident memory of one run at two horizons (10 s and 100 s; 1 s and 10 s when quick) in
//!   child processes (the helper executable's `bench one`, whose body is [`one`]), to show
//!   memory does not grow with simulated time.
//! - [`export`] makes UUniFast task sets as scenario files, and [`files`] times the
//!   simulation of scenario files: `bench/simso/run.sh` uses both to measure SimSo and
//!   schedkit on the same task sets.
//!
//! Wall time covers `simulate_report` (engine + streaming metrics + the final report), not
//! building the scenario. Workloads whose policy the simulator does not have yet are listed
//! as skipped, not dropped silently. [`render`] makes the tables.

pub mod render;

use crate::machine::Machine;
use crate::progress::Progress;
use crate::stats::median;
use crate::Error;
use schedkit_core::generate::{bench_workloads, gedf_workload, tasks_toml, Workload};
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use schedkit_sim::policies::SIM_POLICIES;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
    /// Median CPU time of one simulation (the simulating thread's).
    pub median_cpu_s: f64,
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

/// What `bench sim` runs.
#[derive(Clone, Debug, Default)]
pub struct SimBenchOptions {
    /// Short horizons (a tenth) and 3 repeats.
    pub quick: bool,
    /// Runs per workload (default 5, or 3 when quick).
    pub repeats: Option<usize>,
    /// Only workloads whose name contains this text.
    pub only: Option<String>,
    /// Also measure peak RSS at two horizons (child processes).
    pub rss: bool,
}

/// What `bench sim` measured.
#[derive(Clone, Debug)]
pub struct SimBench {
    pub repeats: usize,
    pub quick: bool,
    pub measured: Vec<Measured>,
    /// Workloads whose policy the simulator does not have: (name, policy).
    pub skipped: Vec<(String, String)>,
    pub rss: Vec<Rss>,
}

/// Median wall and CPU time of one simulation, in seconds.
#[derive(Clone, Copy, Debug)]
struct Timing {
    wall_s: f64,
    /// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): on a loaded machine the wall
    /// time also counts the time other processes held the core; this does not.
    cpu_s: f64,
}

/// Runs `scenario` `repeats` times; returns the stats of the last run, its deadline misses
/// and the median times.
fn time_scenario(
    scenario: &Scenario,
    repeats: usize,
) -> Result<(schedkit_sim::SimStats, u64, Timing), Error> {
    let thread_cpu = || schedkit_linux::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut times = Vec::with_capacity(repeats);
    let mut cpu = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let c = thread_cpu();
        let t = Instant::now();
        let (report, _, stats) = schedkit_sim::simulate_report(scenario, false)?;
        times.push(t.elapsed().as_secs_f64());
        cpu.push(thread_cpu().saturating_sub(c) as f64 / 1e9);
        last = Some((stats, report.summary.deadline_misses));
    }
    let (stats, misses) = last.expect("at least one run");
    let timing = Timing {
        wall_s: median(&times),
        cpu_s: median(&cpu),
    };
    Ok((stats, misses, timing))
}

fn measure(w: &Workload, repeats: usize) -> Result<Measured, Error> {
    let scenario = w.scenario();
    let (stats, misses, timing) = time_scenario(&scenario, repeats)?;
    let secs = timing.wall_s;
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
        median_cpu_s: timing.cpu_s,
        repeats,
        events_per_s,
        jobs_per_s,
        unit: w.unit.to_string(),
        target_per_s: w.target,
        meets_target: rate >= w.target,
        deadline_misses: misses,
    })
}

/// `bench sim`: every chosen workload measured, then (with `rss`) its peak RSS.
pub fn sim(
    o: &SimBenchOptions,
    machine: &dyn Machine,
    progress: &dyn Progress,
) -> Result<SimBench, Error> {
    let repeats = o.repeats.unwrap_or(if o.quick { 3 } else { 5 });
    let all = bench_workloads(o.quick, None);
    let chosen: Vec<&Workload> = all
        .iter()
        .filter(|w| o.only.as_ref().is_none_or(|s| w.name.contains(s.as_str())))
        .collect();
    let (runnable, skipped): (Vec<&Workload>, Vec<&Workload>) = chosen
        .into_iter()
        .partition(|w| SIM_POLICIES.contains(&w.policy));
    progress.start(runnable.len() as u64);
    progress.message("bench sim");
    let mut measured = Vec::new();
    for w in &runnable {
        progress.message(&w.name);
        measured.push(measure(w, repeats)?);
        progress.step();
    }
    progress.finish();
    let mut rss = Vec::new();
    if o.rss {
        let horizons = if o.quick {
            [Nanos::from_secs(1), Nanos::from_secs(10)]
        } else {
            [Nanos::from_secs(10), Nanos::from_secs(100)]
        };
        progress.start((runnable.len() * 2) as u64);
        progress.message("peak RSS");
        for w in &runnable {
            for h in horizons {
                progress.message(&format!("{} {}", w.name, Nanos(h.0)));
                rss.push(child_rss(machine, &w.name, h)?);
                progress.step();
            }
        }
        progress.finish();
    }
    Ok(SimBench {
        repeats,
        quick: o.quick,
        measured,
        skipped: skipped
            .iter()
            .map(|w| (w.name.clone(), w.policy.to_string()))
            .collect(),
        rss,
    })
}

/// Runs the helper's `bench one NAME --horizon H` and reads its report.
fn child_rss(machine: &dyn Machine, name: &str, horizon: Nanos) -> Result<Rss, Error> {
    let out = std::process::Command::new(machine.helper_exe()?)
        .args([
            "bench",
            "one",
            name,
            "--horizon",
            &format!("{}ns", horizon.0),
        ])
        .output()
        .map_err(|e| Error::io("running a child benchmark", e))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "child benchmark {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| Error::Failed(e.to_string()))?;
    let field = |f: &str| {
        v[f].as_u64()
            .ok_or_else(|| Error::Failed(format!("no {f}")))
    };
    Ok(Rss {
        name: name.to_string(),
        horizon_ns: horizon.0,
        events: field("events")?,
        peak_rss_kib: field("peak_rss_kib")?,
    })
}

/// Peak resident set size of this process (`VmHWM` in /proc/self/status), in KiB.
fn peak_rss_kib() -> Result<u64, Error> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Error::io("reading /proc/self/status", e))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| Error::Failed("no VmHWM in /proc/self/status".into()))
}

/// `bench one`: one run of the `bench sim` workload `name` over `horizon`, with this
/// process's peak RSS (the child of [`sim`]'s `rss`).
pub fn one(name: &str, horizon: Nanos) -> Result<serde_json::Value, Error> {
    let w = bench_workloads(false, Some(horizon))
        .into_iter()
        .find(|w| w.name == name)
        .ok_or_else(|| Error::BadInput(format!("no benchmark workload named {name}")))?;
    let (report, _, stats) = schedkit_sim::simulate_report(&w.scenario(), false)?;
    Ok(serde_json::json!({
        "events": stats.events,
        "jobs": stats.jobs,
        "deadline_misses": report.summary.deadline_misses,
        "peak_rss_kib": peak_rss_kib()?,
    }))
}

/// The file format of `bench export`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// schedkit scenario files, `set-NNN.toml` (what SimSo's script and `bench files` read).
    #[default]
    Toml,
    /// Plain text, `set-NNN.tasks`, for peers written in C or C++ (the SchedCAT driver of
    /// `bench/schedcat/`): a header line `cores C horizon_ns H`, then one line per task,
    /// `wcet period deadline`, all in integer nanoseconds, in the scenario's task order.
    Tasks,
}

/// What `bench export` writes.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    pub tasks: usize,
    pub cores: usize,
    /// Total utilisation.
    pub utilisation: f64,
    /// Number of task sets (seeds `seed`, `seed + 1`, ...).
    pub sets: u64,
    pub seed: u64,
    /// Simulated time per set.
    pub horizon: Nanos,
    pub format: ExportFormat,
}

/// The `tasks` format of [`ExportFormat::Tasks`]. UUniFast sets have one sequential region
/// per task, which is all the format can say.
pub fn tasks_text(scenario: &Scenario) -> String {
    let mut s = format!(
        "cores {} horizon_ns {}\n",
        scenario.cores(),
        scenario.horizon().0
    );
    for t in scenario.tasks() {
        s.push_str(&format!(
            "{} {} {}\n",
            t.work().0,
            t.period().0,
            t.deadline().0
        ));
    }
    s
}

/// `bench export`: UUniFast global-EDF task sets as (file name `set-NNN.toml` or
/// `set-NNN.tasks`, contents).
pub fn export(o: &ExportOptions) -> Result<Vec<(String, String)>, Error> {
    if o.utilisation > o.tasks as f64 || o.utilisation <= 0.0 || o.cores == 0 {
        return Err(Error::BadInput(format!(
            "--utilisation {} must be in (0, tasks = {}] and --cores at least 1",
            o.utilisation, o.tasks
        )));
    }
    (0..o.sets)
        .map(|k| {
            let s = gedf_workload(o.tasks, o.cores, o.utilisation, o.horizon, o.seed + k)?;
            Ok(match o.format {
                ExportFormat::Toml => (format!("set-{k:03}.toml"), tasks_toml(&s)),
                ExportFormat::Tasks => (format!("set-{k:03}.tasks"), tasks_text(&s)),
            })
        })
        .collect()
}

/// One timed scenario file of `bench files`.
#[derive(Clone, Debug)]
pub struct FileTiming {
    pub file: PathBuf,
    pub tasks: usize,
    pub cores: usize,
    pub jobs: u64,
    pub events: u64,
    pub deadline_misses: u64,
    /// Median wall time of one simulation.
    pub median_s: f64,
    /// Median CPU time of one simulation (the simulating thread's).
    pub median_cpu_s: f64,
}

/// `bench files`: the simulation of each scenario file timed, the median of `repeats`.
pub fn files(
    paths: &[PathBuf],
    repeats: usize,
    progress: &dyn Progress,
) -> Result<Vec<FileTiming>, Error> {
    progress.start(paths.len() as u64);
    progress.message("bench files");
    let mut rows = Vec::new();
    for f in paths {
        rows.push(time_file(f, repeats)?);
        progress.step();
    }
    progress.finish();
    Ok(rows)
}

fn time_file(f: &Path, repeats: usize) -> Result<FileTiming, Error> {
    let s = Scenario::load(f)?;
    let (stats, misses, timing) = time_scenario(&s, repeats)?;
    Ok(FileTiming {
        file: f.to_path_buf(),
        tasks: s.tasks().len(),
        cores: s.cores(),
        jobs: stats.jobs,
        events: stats.events,
        deadline_misses: misses,
        median_s: timing.wall_s,
        median_cpu_s: timing.cpu_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(utilisation: f64) -> ExportOptions {
        ExportOptions {
            tasks: 8,
            cores: 2,
            utilisation,
            sets: 3,
            seed: 1,
            horizon: Nanos::from_secs(1),
            format: ExportFormat::Toml,
        }
    }

    #[test]
    fn the_tasks_format_holds_the_same_tasks_as_the_scenario() {
        let o = ExportOptions {
            format: ExportFormat::Tasks,
            ..options(1.5)
        };
        let sets = export(&o).unwrap();
        assert_eq!(sets[0].0, "set-000.tasks");
        let toml = &export(&options(1.5)).unwrap()[0].1;
        let scenario = Scenario::parse("set-000.toml", toml).unwrap();
        let mut lines = sets[0].1.lines();
        assert_eq!(lines.next(), Some("cores 2 horizon_ns 1000000000"));
        for t in scenario.tasks() {
            let want = format!("{} {} {}", t.work().0, t.period().0, t.deadline().0);
            assert_eq!(lines.next(), Some(want.as_str()));
        }
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn export_names_every_set_and_refuses_an_unreachable_utilisation() {
        let sets = export(&options(1.5)).unwrap();
        let names: Vec<&str> = sets.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["set-000.toml", "set-001.toml", "set-002.toml"]);
        assert!(sets.iter().all(|s| s.1.contains("[[task]]")));
        assert!(export(&options(0.0)).unwrap_err().is_bad_input());
        assert!(export(&options(9.0)).unwrap_err().is_bad_input());
    }

    #[test]
    fn one_refuses_an_unknown_workload_as_bad_input() {
        let e = one("no-such-workload", Nanos::from_ms(1)).unwrap_err();
        assert!(e.is_bad_input());
    }

    #[test]
    fn bench_sim_pairs_eevdf_with_cfs_at_each_core_count() {
        // The short (`--quick`) 2-core fair workloads, one run each: a real simulation, and
        // no assertion on its speed (the machine is shared), only on the pairing.
        let measured: Vec<Measured> = bench_workloads(true, None)
            .iter()
            .filter(|w| w.name == "cfs-1000x2" || w.name == "eevdf-1000x2")
            .map(|w| measure(w, 1).unwrap())
            .collect();
        assert_eq!(measured.len(), 2);
        let b = SimBench {
            repeats: 1,
            quick: true,
            measured,
            skipped: Vec::new(),
            rss: Vec::new(),
        };
        let pairs = render::eevdf_vs_cfs(&b);
        assert_eq!(pairs.len(), 1);
        assert_eq!(pairs[0].cores, 2);
        assert!(pairs[0].cfs > 0.0 && pairs[0].eevdf > 0.0);
        assert!(render::sim_text(&b).contains("eevdf / cfs"));
        assert_eq!(
            render::sim_json(&b)["eevdf_vs_cfs"][0]["cores"].as_u64(),
            Some(2)
        );
    }
}
