//! `schedkit experiment fidelity`: the real side of `schedkit_experiments::fidelity`. Each
//! scenario file runs on this machine under the kernel's own scheduler through the real
//! engine (as `schedkit run` does, queueing behind other runs on the machine lease), and is
//! reduced to a `Measure` from the kernel's per-thread counts: schedstat CPU time and
//! run-queue delay, voluntary and involuntary switches, perf migrations, and the wake-up
//! latencies the `pattern` workload records.

use crate::experiment_args::{ExperimentFlags, Flag};
use crate::failure::Failure;
use crate::progress::Bar;
use clap::Args;
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_experiments::fidelity::{self, FidelityOptions, Measure, RealRunner};
use schedkit_experiments::Error;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::perf::{CounterKind, Reading};
use schedkit_linux::workload;
use std::path::PathBuf;

/// `--repeat`: real runs per scenario (default 3; 1 with `--quick`). The experiment compares
/// real runs with simulated ones, so there is no `--sim-only`.
#[derive(Args)]
pub struct FidelityArgs {
    #[command(flatten)]
    flags: ExperimentFlags,
    /// Scenario files (default: every examples/fidelity/*.toml).
    files: Vec<PathBuf>,
    /// Simulator models to compare, comma-separated.
    #[arg(long, default_value = "eevdf,cfs", value_delimiter = ',')]
    models: Vec<String>,
}

/// The real engine as the experiment's runner.
struct Real;

impl RealRunner for Real {
    fn run(&mut self, sc: &Scenario) -> Result<Measure, Error> {
        let fail = |m: String| Error::Run {
            scenario: sc.file().to_string(),
            message: m,
        };
        let _ = workload::take_wake_latencies();
        let o = engine::run(sc, RunOptions::new(RunPolicy::Default))
            .map_err(|e| fail(e.to_string()))?;
        let end_ns = o.end.0.max(1) as f64;
        let cores = o.cores as f64;
        let mut metrics = Metrics::new(&o.scenario, "run", o.cores);
        for e in &o.events {
            schedkit_core::trace::TraceSink::record(&mut metrics, e);
        }
        let report = metrics.finish(o.end);
        let names: Vec<String> = sc
            .processes()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        let per = |f: &dyn Fn(&engine::ThreadOutcome) -> u64| -> Vec<f64> {
            names
                .iter()
                .map(|n| {
                    o.threads
                        .iter()
                        .filter(|t| &t.process == n)
                        .map(f)
                        .sum::<u64>() as f64
                })
                .collect()
        };
        let cpu = per(&|t| t.cpu_ns);
        let wait = per(&|t| t.runqueue_wait_ns);
        let nthreads: Vec<f64> = sc.processes().iter().map(|p| p.threads() as f64).collect();
        let switches: u64 = o
            .threads
            .iter()
            .map(|t| t.voluntary_switches + t.involuntary_switches)
            .sum();
        let perf_migrations: Option<u64> = o
            .processes
            .iter()
            .map(|p| {
                p.counters.iter().find_map(|(k, r)| match (k, r) {
                    (CounterKind::CpuMigrations, Reading::Value { value, .. }) => Some(*value),
                    _ => None,
                })
            })
            .sum();
        let migrations =
            perf_migrations.unwrap_or_else(|| o.threads.iter().map(|t| t.migrations_seen).sum());
        let mut wakes: Vec<u64> = workload::take_wake_latencies()
            .into_iter()
            .flat_map(|w| w.samples)
            .collect();
        Ok(Measure {
            share_pct: fidelity::shares(&cpu),
            job_pct: 100.0 * cpu.iter().sum::<f64>() / (end_ns * cores),
            wait_ms: wait
                .iter()
                .zip(&nthreads)
                .map(|(w, n)| w / 1e6 / n)
                .collect(),
            wait_all_ms: wait.iter().sum::<f64>() / 1e6 / nthreads.iter().sum::<f64>(),
            response_ms: fidelity::response_ms(sc, &report),
            wake_p50_us: fidelity::quantile(&mut wakes, 0.5).map(|x| x / 1e3),
            wake_p99_us: fidelity::quantile(&mut wakes, 0.99).map(|x| x / 1e3),
            wakeups: wakes.len(),
            switches_per_s: switches as f64 / (end_ns / 1e9),
            migrations_per_s: migrations as f64 / (end_ns / 1e9),
            names,
        })
    }
}

pub fn run(a: FidelityArgs) -> Result<(), Failure> {
    a.flags.refuse(
        Flag::SimOnly,
        "fidelity",
        "compares real runs with simulated ones; `schedkit compare` simulates alone",
    )?;
    let repeats = if a.flags.quick {
        a.flags.repeat_or(1)
    } else {
        a.flags.repeat_or(3)
    };
    let files = if a.files.is_empty() {
        let mut v: Vec<PathBuf> = std::fs::read_dir("examples/fidelity")
            .map_err(|e| {
                anyhow::anyhow!(
                    "examples/fidelity: {e} (run from the repository root or name files)"
                )
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        v.sort();
        v
    } else {
        a.files.clone()
    };
    let mut models = Vec::new();
    for m in &a.models {
        match PolicyName::parse(m) {
            Some(p @ (PolicyName::Eevdf | PolicyName::Cfs)) => models.push(p),
            _ => return Err(Error::bad_option("models", m, "the models are eevdf and cfs").into()),
        }
    }
    let scenarios = files
        .iter()
        .map(|f| Scenario::load(f))
        .collect::<Result<Vec<_>, _>>()?;
    for s in &scenarios {
        if s.policy().name() != PolicyName::Default {
            return Err(Error::bad_option(
                "files",
                s.file(),
                "a fidelity scenario runs under policy = \"default\" (the kernel's scheduler)",
            )
            .into());
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // With autogroup the job's session competes as one entity with the machine's other
    // sessions, so its group's nice decides how much of the machine the job gets: say it.
    let group = std::fs::read_to_string("/proc/self/autogroup").unwrap_or_default();
    eprintln!(
        "fidelity: {} scenarios x {} real runs; kernel {}; load before: {}; autogroup: {}",
        scenarios.len(),
        repeats,
        schedkit_sim::policies::kernel_release().unwrap_or_default(),
        load.trim(),
        if group.is_empty() {
            "none"
        } else {
            group.trim()
        }
    );
    let opts = FidelityOptions {
        scenarios,
        repeats,
        models: models.clone(),
    };
    let result = fidelity::run(&opts, &mut Real, &Bar::experiment())?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("fidelity: load after: {}", load.trim());
    let json = serde_json::to_string_pretty(&result).map_err(|e| anyhow::anyhow!("json: {e}"))?;
    let jp = a.flags.write("fidelity.json", &json)?;
    let sp = a.flags.write(
        "fidelity.svg",
        &fidelity::render_chart(&result.rows, &models),
    )?;
    if a.flags.json {
        println!("{json}");
        return Ok(());
    }
    print!("{}", fidelity::render_table(&result.rows));
    let worse = fidelity::eevdf_not_closer(&result.rows);
    if worse.is_empty() {
        println!("\neevdf is at least as close as cfs on every metric and scenario");
    } else {
        println!(
            "\nwhere eevdf is not as close as cfs (scenario, metric, eevdf error, cfs error):"
        );
        for (s, m, e, c) in worse {
            println!("  {s:<22} {m:<13} {e:.3} vs {c:.3}");
        }
    }
    println!("wrote {} and {}", jp.display(), sp.display());
    Ok(())
}
