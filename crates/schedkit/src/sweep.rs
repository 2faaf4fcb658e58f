//! `schedkit sim FILE --sweep ...`: the flags, and printing what
//! `schedkit_experiments::sweep` returns (see there for what a sweep is).

use crate::failure::Failure;
use crate::progress::Bar;
use clap::Args;
use schedkit_core::scenario::Scenario;
use schedkit_experiments::sweep::{render, sweep_with_progress, SweepOptions};

/// The sweep options of `schedkit sim`.
#[derive(Args, Clone, Default)]
pub struct SweepArgs {
    /// Sweep generated task sets instead of simulating FILE's own work: `seeds=A..B`
    /// (inclusive), one task set per seed and utilisation. FILE gives cores, horizon, policy.
    #[arg(long, value_name = "seeds=A..B")]
    pub sweep: Option<String>,
    /// Normalised utilisations for --sweep (fractions of the machine): `FROM..TO:STEP`
    /// (inclusive) or a list `0.3,0.6,0.9`. Default `0.1..1.0:0.1`.
    #[arg(long, value_name = "FROM..TO:STEP", requires = "sweep")]
    pub utilisations: Option<String>,
    /// Policies to compare in --sweep, e.g. `gedf,pedf` (default: FILE's policy).
    #[arg(long, value_delimiter = ',', requires = "sweep")]
    pub policies: Vec<String>,
    /// Task-set generator for --sweep: `seed001` (seed 001's generator, window
    /// [u - 0.02, u] x cores) or `uunifast:N` (N tasks, U = u x cores).
    #[arg(long, default_value = "seed001", requires = "sweep")]
    pub generator: String,
}

impl From<&SweepArgs> for SweepOptions {
    fn from(a: &SweepArgs) -> SweepOptions {
        SweepOptions {
            sweep: a.sweep.clone(),
            utilisations: a.utilisations.clone(),
            policies: a.policies.clone(),
            generator: a.generator.clone(),
        }
    }
}

/// `schedkit sim FILE --sweep ...`: prints the table, or JSON with `json`.
pub fn run(file: &std::path::Path, args: &SweepArgs, json: bool) -> Result<(), Failure> {
    let base = Scenario::load(file)?;
    let options = SweepOptions::from(args);
    let bar = Bar::styled("sweep [{bar:30}] {pos}/{len} task sets {elapsed}<{eta}");
    let rows = sweep_with_progress(&base, &options, &bar)?;
    if json {
        let doc = serde_json::json!({
            "file": base.file,
            "cores": base.cores,
            "horizon_ns": base.horizon.0,
            "generator": args.generator,
            "sweep": args.sweep,
            "rows": rows,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
    } else {
        print!("{}", render(&base, &options, &rows));
    }
    Ok(())
}
