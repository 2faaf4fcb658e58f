//! `schedkit experiment fibers-gauss`: the flags, and printing what
//! `schedkit_experiments::fibers` returns (see there for the experiment).

use crate::failure::Failure;
use crate::progress::Bar;
use clap::Args;
use schedkit_experiments::fibers::{self, render, FibersOptions};
use schedkit_experiments::progress::{Progress, Silent};
use schedkit_experiments::Error;
use std::path::PathBuf;

/// Every architecture this binary has.
const DEFAULT_ARCH: &str = if cfg!(feature = "may") {
    "A0,A1,A2,may"
} else {
    "A0,A1,A2"
};

#[derive(Args, Debug, Clone)]
pub struct FibersGaussArgs {
    /// CI-sized run: size 256, threads 32,128,496, 1 repeat (unless given).
    #[arg(long)]
    pub quick: bool,
    /// Architectures, comma-separated: A0, A1, A2, may (the last when built with the `may`
    /// feature).
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_ARCH)]
    pub arch: Vec<String>,
    /// Methods, comma-separated: 1 (rows per thread), 2 (2-D tiles).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub method: Vec<u8>,
    /// User-thread counts, comma-separated (default: the paper's 32,128,496,992,3968,7936).
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<usize>>,
    /// Matrix size n (default 1024; 256 with --quick). Method 1 needs n >= threads.
    #[arg(long)]
    pub size: Option<usize>,
    /// Runs per cell; the table shows medians (default 3; 1 with --quick).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Scheduler threads for A1, A2 and may (default: the CPUs this process may use).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Seed of the random system.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print {"rows": [...]} as JSON instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Also print the scheduler's counters per phase (blocks, wake-ups, cross-ST hand-overs,
    /// steals, slot runs, parks; per run, summed over the STs) for A1 and A2.
    #[arg(long)]
    pub counters: bool,
    /// Where to write the chart of time against thread count.
    #[arg(long, value_name = "FILE.svg", default_value = "fibers-gauss.svg")]
    pub svg: PathBuf,
}

impl From<&FibersGaussArgs> for FibersOptions {
    fn from(a: &FibersGaussArgs) -> FibersOptions {
        FibersOptions {
            quick: a.quick,
            arch: a.arch.clone(),
            method: a.method.clone(),
            threads: a.threads.clone(),
            size: a.size,
            repeat: a.repeat,
            workers: a.workers,
            seed: a.seed,
            counters: a.counters,
        }
    }
}

pub fn run(a: FibersGaussArgs) -> Result<(), Failure> {
    let bar: Box<dyn Progress> = if a.json {
        Box::new(Silent)
    } else {
        Box::new(Bar::styled(
            "{bar:40} {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]",
        ))
    };
    let r = fibers::run(&FibersOptions::from(&a), bar.as_ref())?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "rows": r.rows })).expect("json")
        );
    } else {
        print!("{}", render::text(&r));
    }
    if !r.rows.is_empty() {
        std::fs::write(&a.svg, render::chart(&r.rows, r.size))
            .map_err(|e| Error::io(format!("writing {}", a.svg.display()), e))?;
        eprintln!("chart: {}", a.svg.display());
    }
    Ok(())
}
