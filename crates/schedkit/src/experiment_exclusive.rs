//! `schedkit experiment exclusive`: the flags, and printing and writing what
//! `schedkit_experiments::exclusive` returns (see there for the experiment).

use crate::experiment_args::{ExperimentFlags, Flag};
use crate::failure::Failure;
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::{Args, ValueEnum};
use schedkit_core::time::{Bytes, Nanos};
use schedkit_experiments::exclusive::{self, render, ExclusiveOptions, Load};
use schedkit_experiments::Error;
use schedkit_linux::exclusive::RtThrottle;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LoadArg {
    /// No background load.
    None,
    /// Load 1: one small-memory CPU hog per CPU.
    Cpu,
    /// Load 2: one large-memory hog per CPU.
    Mem,
}

impl From<LoadArg> for Load {
    fn from(l: LoadArg) -> Load {
        match l {
            LoadArg::None => Load::None,
            LoadArg::Cpu => Load::Cpu,
            LoadArg::Mem => Load::Mem,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Throttle {
    Keep,
    Off,
}

/// `--repeat` defaults to 10 (the mean and its 95 % confidence interval are over them);
/// `--quick` is 3 repeats, a tenth of the work, threads 1 only. Every run is real (there is
/// no `--sim-only`).
#[derive(Args)]
pub struct ExclusiveExpArgs {
    #[command(flatten)]
    pub flags: ExperimentFlags,
    /// Thread counts (default 1..=online CPUs).
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<u32>>,
    /// Loads to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,cpu,mem"
    )]
    pub loads: Vec<LoadArg>,
    /// Total strided-walk steps per run, split over the threads.
    #[arg(long, default_value_t = 300_000_000)]
    pub work: u64,
    /// Array size of the walk.
    #[arg(long, default_value = "5MB")]
    pub array: String,
    /// Step of the walk (bytes).
    #[arg(long, default_value = "4160B")]
    pub stride: String,
    /// Memory per hog under load 2 (default: 1/(4 x CPUs) of the machine's memory, at most 1 GiB).
    #[arg(long)]
    pub mem_size: Option<String>,
    /// RT throttling in exclusive mode.
    #[arg(long, value_enum, default_value = "keep")]
    pub rt_throttle: Throttle,
    /// The engine's sampling period (how often it reads the job threads' /proc files).
    #[arg(long, default_value = "10ms")]
    pub sample: String,
    /// Run as a hog with this many bytes (internal).
    #[arg(long, hide = true)]
    pub hog: Option<u64>,
}

impl ExclusiveExpArgs {
    fn options(&self) -> Result<ExclusiveOptions, Error> {
        let bytes = |flag: &str, v: &str| {
            Bytes::parse(v)
                .map(|b| b.0)
                .map_err(|m| Error::bad_option(flag, v, m))
        };
        let sample =
            Nanos::parse(&self.sample).map_err(|m| Error::bad_option("sample", &self.sample, m))?;
        Ok(ExclusiveOptions {
            repeat: self.flags.repeat_or(10),
            quick: self.flags.quick,
            threads: self.threads.clone(),
            loads: self.loads.iter().map(|&l| l.into()).collect(),
            work: self.work,
            array: bytes("array", &self.array)?,
            stride: bytes("stride", &self.stride)?,
            mem_size: self
                .mem_size
                .as_deref()
                .map(|m| bytes("mem-size", m))
                .transpose()?,
            rt_throttle: match self.rt_throttle {
                Throttle::Keep => RtThrottle::Keep,
                Throttle::Off => RtThrottle::Off,
            },
            sample: std::time::Duration::from_nanos(sample.0),
        })
    }
}

pub fn run(a: ExclusiveExpArgs) -> Result<(), Failure> {
    if let Some(b) = a.hog {
        exclusive::hog(b);
    }
    a.flags.refuse(
        Flag::SimOnly,
        "exclusive",
        "measures this machine's cores only; it has no simulated part",
    )?;
    let options = a.options()?;
    a.flags.out_dir()?;
    let bar = Bar::styled("{bar:40} {pos}/{len} runs · {msg} · ETA {eta}");
    let result = exclusive::run(&options, &ThisMachine, &bar)?;
    let cells = render::cells(&result);
    let doc = render::json(&result, &cells);
    let json = serde_json::to_string_pretty(&doc).expect("json");
    let jp = a.flags.write("exclusive.json", &json)?;
    let sp = a
        .flags
        .write("exclusive.svg", &render::chart(&cells, &a.array))?;
    if a.flags.json {
        println!("{json}");
        return Ok(());
    }
    print!("{}", render::text(&result, &cells));
    println!("\nwrote {} and {}", jp.display(), sp.display());
    Ok(())
}
