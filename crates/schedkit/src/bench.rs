//! `schedkit bench`: the flags, and printing and writing what `schedkit_experiments::bench`
//! measures (see there: simulator throughput, peak RSS, exported task sets, timed files).

use crate::failure::{Failure, EXIT_BAD_INPUT};
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::{Args, Subcommand};
use schedkit_core::Nanos;
use schedkit_experiments::bench::{self, render, ExportOptions, SimBenchOptions};
use schedkit_experiments::Error;
use std::path::PathBuf;

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

/// The bar of `bench sim` and `bench files`: what runs, then the steps.
fn progress() -> Bar {
    Bar::styled("{msg:>14} [{bar:30}] {pos}/{len} {elapsed}<{eta}")
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
    let options = SimBenchOptions {
        quick: a.quick,
        repeats: a.repeats,
        only: a.only,
        rss: a.rss,
    };
    let result = bench::sim(&options, &ThisMachine, &progress())?;
    if a.json {
        let doc = render::sim_json(&result);
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        print!("{}", render::sim_text(&result));
    }
    Ok(())
}

fn parse_duration(s: &str, field: &str) -> Result<Nanos, Failure> {
    Nanos::parse(s).map_err(|e| Failure {
        status: EXIT_BAD_INPUT,
        message: format!("--{field} {s}: {e}"),
    })
}

fn one(a: OneArgs) -> Result<(), Failure> {
    let horizon = parse_duration(&a.horizon, "horizon")?;
    println!("{}", bench::one(&a.name, horizon)?);
    Ok(())
}

fn export(a: ExportArgs) -> Result<(), Failure> {
    let options = ExportOptions {
        tasks: a.tasks,
        cores: a.cores,
        utilisation: a.utilisation,
        sets: a.sets,
        seed: a.seed,
        horizon: parse_duration(&a.horizon, "horizon")?,
    };
    let sets = bench::export(&options)?;
    std::fs::create_dir_all(&a.dir)
        .map_err(|e| Error::io(format!("creating {}", a.dir.display()), e))?;
    for (name, toml) in sets {
        let path = a.dir.join(name);
        std::fs::write(&path, toml)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    eprintln!("wrote {} task sets to {}", a.sets, a.dir.display());
    Ok(())
}

fn files(a: FilesArgs) -> Result<(), Failure> {
    let rows = bench::files(&a.files, a.repeats, &progress())?;
    if a.json {
        let doc = render::files_json(&rows, a.repeats);
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        print!("{}", render::files_text(&rows, a.repeats));
    }
    Ok(())
}
