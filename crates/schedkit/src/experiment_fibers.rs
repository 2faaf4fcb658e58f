//! `schedkit experiment fibers-gauss`: the flags, and printing what
//! `schedkit_experiments::fibers` returns (see there for the experiment).

use crate::experiment_args::{ExperimentFlags, Flag};
use crate::failure::Failure;
use crate::progress::Bar;
use clap::Args;
use schedkit_experiments::fibers::{self, render, FibersOptions};
use schedkit_experiments::progress::{Progress, Silent};

/// Every architecture this binary has.
const DEFAULT_ARCH: &str = if cfg!(feature = "may") {
    "A0,A1,A2,may"
} else {
    "A0,A1,A2"
};

/// `--quick`: size 256, threads 32,128,496, 1 repeat (unless given); `--repeat`: runs per
/// cell, the table shows medians (default 3); `--out DIR` gets fibers-gauss.svg, the chart
/// of time against thread count. Every run is real (there is no `--sim-only`).
#[derive(Args, Debug, Clone)]
pub struct FibersGaussArgs {
    #[command(flatten)]
    pub flags: ExperimentFlags,
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
    /// Scheduler threads for A1, A2 and may (default: the CPUs this process may use; more
    /// than that is refused, and a default narrowed by a taskset or cpuset is warned about).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Seed of the random system.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also print the scheduler's counters per phase (blocks, wake-ups, cross-ST hand-overs,
    /// steals, slot runs, parks; per run, summed over the STs) for A1 and A2.
    #[arg(long)]
    pub counters: bool,
}

impl From<&FibersGaussArgs> for FibersOptions {
    fn from(a: &FibersGaussArgs) -> FibersOptions {
        FibersOptions {
            quick: a.flags.quick,
            arch: a.arch.clone(),
            method: a.method.clone(),
            threads: a.threads.clone(),
            size: a.size,
            repeat: a.flags.repeat,
            workers: a.workers,
            seed: a.seed,
            counters: a.counters,
        }
    }
}

pub fn run(a: FibersGaussArgs) -> Result<(), Failure> {
    a.flags.refuse(
        Flag::SimOnly,
        "fibers-gauss",
        "times real threads only; it has no simulated part",
    )?;
    let bar: Box<dyn Progress> = if a.flags.json {
        Box::new(Silent)
    } else {
        Box::new(Bar::styled(
            "{bar:40} {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]",
        ))
    };
    let r = fibers::run(&FibersOptions::from(&a), bar.as_ref())?;
    if a.flags.json {
        // The text output carries them above its tables; JSON readers may not look.
        for w in &r.warnings {
            eprintln!("warning: {w}");
        }
        let doc = serde_json::to_string_pretty(&render::json(&r)).expect("json");
        println!("{doc}");
    } else {
        print!("{}", render::text(&r));
    }
    if !r.rows.is_empty() {
        let p = a
            .flags
            .write("fibers-gauss.svg", &render::chart(&r.rows, r.size))?;
        eprintln!("chart: {}", p.display());
    }
    Ok(())
}
