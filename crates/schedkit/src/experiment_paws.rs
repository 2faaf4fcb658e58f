//! `schedkit experiment paws`: the flags, and printing and writing what
//! `schedkit_experiments::paws` returns (see there for the experiment: seed 001's
//! experiment, Fonseca et al., section 5, on this machine and in the simulator).

use crate::experiment_args::{ExperimentFlags, Flag};
use crate::failure::Failure;
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::{Args, ValueEnum};
use schedkit_experiments::paws::{self, render, PawsFlags, PawsOptions, Plan};
use schedkit_experiments::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WindowSet {
    /// The paper's windows as total utilisation.
    Paper,
    /// The same scaled by the number of cores.
    Scaled,
    Both,
}

/// `--quick`: at most 2 sets per window, 300 ms real runs, 2 s simulated; `--sim-only`: the
/// simulator only (no root needed). Every set runs once per policy (`--sets` for more), so
/// there is no `--repeat`.
#[derive(Args)]
pub struct PawsExpArgs {
    #[command(flatten)]
    pub flags: ExperimentFlags,
    /// Cores `m` of the generated sets (default: this machine's CPUs; real runs use them all).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Task sets per window.
    #[arg(long, default_value_t = 20)]
    pub sets: usize,
    /// Release window of each real run.
    #[arg(long, default_value = "1500ms")]
    pub duration: String,
    /// Simulated window of each simulated run.
    #[arg(long, default_value = "10s")]
    pub sim_horizon: String,
    /// Base seed of the generator (and of the victim choice).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Windows to run.
    #[arg(long, value_enum, default_value = "both")]
    pub windows: WindowSet,
    /// Policies run on real cores.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "paws,gedf,ws,sched-deadline"
    )]
    pub real: Vec<String>,
    /// Policies run in the simulator.
    #[arg(long, value_delimiter = ',', default_value = "paws,gedf,pedf")]
    pub sim: Vec<String>,
    /// Run a stall witness beside every real run (SCHED_DEADLINE, 1 ms steps; see
    /// schedkit_linux::stall) and say which misses the machine's stalls explain. Its wake-ups
    /// preempt the threads under test and count in their kernel context switches.
    #[arg(long)]
    pub stall_witness: bool,
}

impl From<WindowSet> for paws::WindowSet {
    fn from(w: WindowSet) -> paws::WindowSet {
        match w {
            WindowSet::Paper => paws::WindowSet::Paper,
            WindowSet::Scaled => paws::WindowSet::Scaled,
            WindowSet::Both => paws::WindowSet::Both,
        }
    }
}

impl PawsExpArgs {
    fn options(&self) -> Result<PawsOptions, Error> {
        PawsFlags {
            quick: self.flags.quick,
            sim_only: self.flags.sim_only,
            cores: self.cores,
            sets: self.sets,
            duration: &self.duration,
            sim_horizon: &self.sim_horizon,
            seed: self.seed,
            windows: self.windows.into(),
            real: &self.real,
            sim: &self.sim,
            stall_witness: self.stall_witness,
        }
        .options()
    }
}

pub fn run(a: PawsExpArgs) -> Result<(), Failure> {
    a.flags.refuse(
        Flag::Repeat,
        "paws",
        "runs every generated set once per policy; ask for more sets with --sets",
    )?;
    let plan = Plan::new(&a.options()?)?;
    a.flags.out_dir()?;
    let result = paws::run(plan, &ThisMachine, &Bar::experiment())?;
    for w in &result.warnings {
        eprintln!("schedkit: warning: {w}");
    }
    let mut files = Vec::new();
    for (file, svg) in render::charts(&result) {
        files.push(a.flags.write(file, &svg)?);
    }
    let doc = serde_json::to_string_pretty(&render::json(&result)).expect("json");
    let jpath = a.flags.write("paws.json", &doc)?;
    if a.flags.json {
        println!("{doc}");
    } else {
        print!("{}", render::text(&result));
        for f in &files {
            println!("chart: {}", f.display());
        }
        println!("json: {}", jpath.display());
    }
    Ok(())
}
