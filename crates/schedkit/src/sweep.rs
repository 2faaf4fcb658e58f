//! `schedkit sim FILE --sweep ...`: the flags, and printing what
//! `schedkit_experiments::sweep` returns (see there for what a sweep is).

use crate::failure::Failure;
use crate::progress::Bar;
use clap::Args;
use schedkit_core::scenario::Scenario;
use schedkit_experiments::sweep::{render, SweepOptions};

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
    /// Run only part I of N of the seeds (a contiguous range), for a job array; prints the
    /// JSON that `schedkit sweep merge` sums back into the whole sweep exactly.
    #[arg(long, value_name = "I/N", requires_all = ["sweep", "json"])]
    pub shard: Option<String>,
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

/// `schedkit sim FILE --sweep ...`: prints the table, or JSON with `json`; with `parquet`,
/// also writes the rows as DIR/sweep.parquet.
pub fn run(
    file: &std::path::Path,
    args: &SweepArgs,
    json: bool,
    parquet: Option<&std::path::Path>,
) -> Result<(), Failure> {
    let base = Scenario::load(file)?;
    let options = SweepOptions::from(args);
    let shard = args
        .shard
        .as_deref()
        .map(schedkit_io::shard::Shard::parse)
        .transpose()?;
    let bar = Bar::styled("sweep [{bar:30}] {pos}/{len} task sets {elapsed}<{eta}");
    let doc = schedkit_io::shard::run(&base, &options, shard, &bar)?;
    if let Some(dir) = parquet {
        crate::io_cmds::write_parquet(dir, &[schedkit_io::tables::sweep_table(&doc.rows)])?;
    }
    if json {
        crate::io_cmds::print_sweep(&doc, true)
    } else {
        print!("{}", render(&base, &options, &doc.rows));
        Ok(())
    }
}
