//! `schedkit experiment fidelity`: the flags, and printing and writing what
//! `schedkit_experiments::fidelity` returns (see there for the experiment; its
//! `KernelRunner` is the real side, through the real engine).

use crate::experiment_args::{ExperimentFlags, Flag};
use crate::failure::Failure;
use crate::progress::Bar;
use clap::Args;
use schedkit_experiments::fidelity::{self, FidelityOptions, KernelRunner};
use std::path::{Path, PathBuf};

/// `--repeat`: real runs per scenario (default 3; 1 with `--quick`). The experiment compares
/// real runs with simulated ones, so there is no `--sim-only`.
///
/// Each model's error is its value against the mean of the real repeats (geometric for
/// wake-up latencies), with the interval of that error over the real mean's 95 % confidence
/// interval. A target is met when the whole interval is within it, missed when the whole
/// interval is outside it, untestable when the real interval is too wide for any model value
/// to be shown within it, and undecided otherwise (more repeats would decide).
#[derive(Args)]
#[command(after_help = fidelity::TABLE_LEGEND)]
pub struct FidelityArgs {
    #[command(flatten)]
    flags: ExperimentFlags,
    /// Scenario files (default: every examples/fidelity/*.toml).
    files: Vec<PathBuf>,
    /// Simulator models to compare, comma-separated.
    #[arg(long, default_value = "eevdf,cfs", value_delimiter = ',')]
    models: Vec<String>,
    /// Re-use the real repeats recorded in an earlier run's fidelity.json (no real runs, no
    /// root): simulate again and compare with them.
    #[arg(long, value_name = "FILE")]
    real_from: Option<PathBuf>,
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
    let files = fidelity::scenario_files(&a.files, Path::new("examples/fidelity"))?;
    let models = fidelity::parse_models(&a.models)?;
    let scenarios = fidelity::load_scenarios(&files)?;
    if let Some(path) = &a.real_from {
        a.flags.refuse(
            Flag::Repeat,
            "fidelity",
            "with --real-from replays the recorded repeats",
        )?;
        let mut rec = fidelity::Recorded::load(path, &scenarios)?;
        eprintln!(
            "fidelity: {} scenarios x {} real runs recorded in {}",
            scenarios.len(),
            rec.repeats(),
            path.display()
        );
        let opts = FidelityOptions {
            scenarios,
            repeats: rec.repeats(),
            models: models.clone(),
        };
        let result = fidelity::run(&opts, &mut rec, &Bar::experiment())?;
        return print_result(&a, &result, &models);
    }
    let before = fidelity::MachineState::read();
    eprintln!(
        "fidelity: {} scenarios x {} real runs; kernel {}; load before: {}; autogroup: {}",
        scenarios.len(),
        repeats,
        before.kernel,
        before.load,
        before.autogroup.as_deref().unwrap_or("none")
    );
    for w in before.warnings() {
        eprintln!("warning: {w}");
    }
    let opts = FidelityOptions {
        scenarios,
        repeats,
        models: models.clone(),
    };
    let result = fidelity::run(&opts, &mut KernelRunner, &Bar::experiment())?;
    eprintln!(
        "fidelity: load after: {}",
        fidelity::MachineState::read().load
    );
    print_result(&a, &result, &models)
}

fn print_result(
    a: &FidelityArgs,
    result: &fidelity::FidelityResult,
    models: &[schedkit_core::scenario::PolicyName],
) -> Result<(), Failure> {
    let json = serde_json::to_string_pretty(result).map_err(|e| anyhow::anyhow!("json: {e}"))?;
    let jp = a.flags.write("fidelity.json", &json)?;
    let sp = a.flags.write(
        "fidelity.svg",
        &fidelity::render_chart(&result.rows, models),
    )?;
    if a.flags.json {
        println!("{json}");
        return Ok(());
    }
    print!("{}", fidelity::render_table(&result.rows));
    print!("{}", fidelity::TABLE_LEGEND);
    print!("{}", fidelity::render_wake_path(result.wake_path_ns));
    print!("{}", fidelity::MODEL_SETUP);
    print!("{}", fidelity::render_other_work(&result.real));
    let worse = fidelity::eevdf_not_closer(&result.rows);
    if worse.is_empty() {
        println!("\neevdf is at least as close as cfs on every metric and scenario");
    } else {
        println!(
            "\nwhere eevdf is not as close as cfs to the real mean (scenario, metric, eevdf \
             error, cfs error; decided: farther for every real mean in the 95 % interval):"
        );
        for w in worse {
            println!(
                "  {:<22} {:<13} {:.3} vs {:.3}  {}",
                w.scenario,
                w.metric,
                w.eevdf,
                w.cfs,
                if w.decided {
                    "decided"
                } else {
                    "within the real interval: either may be closer"
                }
            );
        }
    }
    println!("wrote {} and {}", jp.display(), sp.display());
    Ok(())
}
