//! `schedkit experiment exclusive`: the flags, and printing and writing what
//! `schedkit_experiments::exclusive` returns (see there for the experiment).

use crate::failure::Failure;
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::{Args, ValueEnum};
use schedkit_core::time::{Bytes, Nanos};
use schedkit_experiments::exclusive::{self, render, ExclusiveOptions, Load};
use schedkit_experiments::Error;
use schedkit_linux::exclusive::RtThrottle;
use std::path::PathBuf;

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

#[derive(Args)]
pub struct ExclusiveExpArgs {
    /// Repeats per cell (the mean and its 95 % confidence interval are over these).
    #[arg(long, default_value_t = 10)]
    pub repeat: usize,
    /// A short run for CI: 3 repeats, a tenth of the work, threads 1 only.
    #[arg(long)]
    pub quick: bool,
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
    /// Directory for exclusive.json and exclusive.svg.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
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
            repeat: self.repeat,
            quick: self.quick,
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
    let options = a.options()?;
    let bar = Bar::styled("{bar:40} {pos}/{len} runs · {msg} · ETA {eta}");
    let result = exclusive::run(&options, &ThisMachine, &bar)?;
    let cells = render::cells(&result);
    print!("{}", render::text(&result, &cells));
    std::fs::create_dir_all(&a.out).map_err(|e| Error::io(a.out.display(), e))?;
    let jp = a.out.join("exclusive.json");
    let json = serde_json::to_string_pretty(&render::json(&result, &cells)).expect("json");
    std::fs::write(&jp, json).map_err(|e| Error::io(jp.display(), e))?;
    let sp = a.out.join("exclusive.svg");
    std::fs::write(&sp, render::chart(&cells, &a.array)).map_err(|e| Error::io(sp.display(), e))?;
    println!("\nwrote {} and {}", jp.display(), sp.display());
    Ok(())
}
