//! `schedkit experiment exclusive`: seed 000's Table 2 on this machine.
//!
//! The job is the paper's strided walk (a cyclic walk over a 5 MB array with a step far
//! larger than a cache line, incrementing each element it visits), a fixed amount of work
//! split over 1..N threads. Each cell runs it under the default configuration (D: the kernel
//! decides) and under exclusive mode (C: system core, job threads pinned at SCHED_FIFO 99,
//! other threads and IRQs moved away), with
//! - no load,
//! - load 1: one small-memory CPU hog per CPU (arithmetic on 64 KiB),
//! - load 2: one large-memory hog per CPU (arithmetic over `mem_size` bytes each),
//!
//! `repeat` times (default 10), and reports each indicator as the mean with a 95 %
//! confidence interval (Student's t). Indicators: wall time, perf's context-switches and
//! cpu-migrations and page-faults, the kernel's involuntary switches (per second of the job),
//! the longest stall measured by the job's threads, and the hardware counters where the
//! machine has them ("not supported" otherwise).
//!
//! Hogs are the helper executable run with the hidden `--hog BYTES` flag (its body is
//! [`hog`]); they die with the experiment (PDEATHSIG) and are killed after each load block.
//!
//! [`run`] returns the samples; [`render`] aggregates them into cells, tables, the chart and
//! JSON.

pub mod render;

use crate::machine::Machine;
use crate::progress::Progress;
use crate::Error;
use schedkit_core::scenario::{PolicyName, PolicySpec, Process, Scenario, Work};
use schedkit_core::Nanos;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::exclusive::{ExclusiveConfig, RtThrottle};
use schedkit_linux::topo::Topology;
use std::time::Duration;

/// Background load of a block of runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// No background load.
    None,
    /// Load 1: one small-memory CPU hog per CPU.
    Cpu,
    /// Load 2: one large-memory hog per CPU.
    Mem,
}

impl Load {
    pub fn title(self) -> &'static str {
        match self {
            Load::None => "No load",
            Load::Cpu => "Load 1",
            Load::Mem => "Load 2",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ExclusiveOptions {
    /// Repeats per cell (the mean and its 95 % confidence interval are over these).
    pub repeat: usize,
    /// A short run for CI: 3 repeats, a tenth of the work, threads 1 only.
    pub quick: bool,
    /// Thread counts (default 1..=online CPUs).
    pub threads: Option<Vec<u32>>,
    pub loads: Vec<Load>,
    /// Total strided-walk steps per run, split over the threads.
    pub work: u64,
    /// Array size of the walk, bytes.
    pub array: u64,
    /// Step of the walk, bytes.
    pub stride: u64,
    /// Memory per hog under load 2 (default: 1/(4 x CPUs) of the machine's memory, at most
    /// 1 GiB).
    pub mem_size: Option<u64>,
    /// RT throttling in exclusive mode.
    pub rt_throttle: RtThrottle,
    /// The engine's sampling period.
    pub sample: Duration,
}

/// Every run's sample, and the parameters they ran with (after `quick` and the defaults).
#[derive(Clone, Debug)]
pub struct ExclusiveResult {
    pub samples: Vec<Sample>,
    pub loads: Vec<Load>,
    pub threads: Vec<u32>,
    pub repeat: usize,
    pub work: u64,
    pub array: u64,
    pub stride: u64,
    pub mem_size: u64,
    pub rt_throttle: RtThrottle,
    /// The system CPUs of exclusive mode, as a list (`0` or `0-1`).
    pub system_cpus: String,
}

/// A hog: arithmetic over `bytes` of memory, forever (until killed or its parent dies).
pub fn hog(bytes: u64) -> ! {
    schedkit_linux::spawn::die_with_parent();
    let words = (bytes as usize / 8).max(1);
    let mut v = vec![1u64; words];
    let mut i = 0usize;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    loop {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = v[i].wrapping_mul(3).wrapping_add(x);
        // One cache line (8 words) on per step: the large hog touches all its memory.
        i += 8;
        if i >= words {
            i = (i + 1) % 8;
        }
    }
}

struct Hogs(Vec<std::process::Child>);
impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start_hogs(machine: &dyn Machine, n: usize, bytes: u64) -> Result<Hogs, Error> {
    let exe = machine.helper_exe()?;
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(
            std::process::Command::new(&exe)
                .args(["experiment", "exclusive", "--hog", &bytes.to_string()])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn()
                .map_err(|e| Error::io("starting a hog", e))?,
        );
    }
    // Let them allocate and touch their memory before the job starts.
    std::thread::sleep(Duration::from_millis(if bytes > 1 << 20 {
        1500
    } else {
        200
    }));
    Ok(Hogs(v))
}

/// One run's measurements.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    pub load: String,
    pub config: char,
    pub threads: u32,
    pub wall_s: f64,
    /// The job threads' CPU time from start to finish (schedstat), seconds.
    pub cpu_s: f64,
    pub counters: Vec<(String, Option<u64>)>,
    pub involuntary_switches: u64,
    pub forced_per_s: f64,
    pub longest_stall_ms: f64,
}

fn scenario(threads: u32, array: u64, stride: u64, exclusive: bool) -> Result<Scenario, Error> {
    let policy = if exclusive {
        PolicyName::Exclusive
    } else {
        PolicyName::Default
    };
    Ok(Scenario::builder("experiment exclusive")
        .with_policy(PolicySpec::new(policy))
        .with_horizon(Nanos::from_secs(3600))
        .process(Process::new(
            "walk",
            threads,
            Work::Stride { array, stride },
        ))
        .build()?)
}

fn one_run(
    machine: &dyn Machine,
    o: &ExclusiveOptions,
    load: Load,
    exclusive: bool,
    threads: u32,
    work: u64,
) -> Result<Sample, Error> {
    let policy = if exclusive {
        RunPolicy::Exclusive(ExclusiveConfig {
            rt_throttle: o.rt_throttle,
            ..ExclusiveConfig::default()
        })
    } else {
        RunPolicy::Default
    };
    let mut opts = RunOptions::new(policy);
    opts.iterations = Some(work / threads as u64);
    opts.sample = o.sample;
    let sc = scenario(threads, o.array, o.stride, exclusive)?;
    let out = machine.run(&sc, opts)?;
    let p = &out.processes[0];
    let wall = p.end_ns.saturating_sub(p.start_ns) as f64 / 1e9;
    Ok(Sample {
        load: load.title().into(),
        config: if exclusive { 'C' } else { 'D' },
        threads,
        wall_s: wall,
        cpu_s: out.threads.iter().map(|t| t.cpu_ns).sum::<u64>() as f64 / 1e9,
        counters: p
            .counters
            .iter()
            .map(|(k, r)| (k.name().to_string(), r.value()))
            .collect(),
        involuntary_switches: p.involuntary_switches,
        forced_per_s: p.involuntary_switches as f64 / wall.max(1e-9),
        longest_stall_ms: p.longest_stall_ns as f64 / 1e6,
    })
}

fn mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(1 << 20)
        * 1024
}

/// Runs every cell `repeat` times; one progress step per run.
pub fn run(
    o: &ExclusiveOptions,
    machine: &dyn Machine,
    progress: &dyn Progress,
) -> Result<ExclusiveResult, Error> {
    if o.sample.is_zero() {
        return Err(Error::BadInput("--sample must be positive".into()));
    }
    if o.array < 8 || o.stride == 0 {
        return Err(Error::BadInput(
            "--array must be at least 8 bytes and --stride positive".into(),
        ));
    }
    let topo = Topology::host()?;
    let ncpu = topo.n_cpus();
    let repeat = if o.quick { 3 } else { o.repeat.max(1) };
    let work = if o.quick { o.work / 10 } else { o.work }.max(1);
    let threads: Vec<u32> = match &o.threads {
        Some(t) if t.iter().any(|&x| x == 0 || x > 1024) => {
            return Err(Error::BadInput(
                "--threads: each count must be between 1 and 1024".into(),
            ))
        }
        Some(t) => t.clone(),
        None if o.quick => vec![1],
        None => (1..=ncpu as u32).collect(),
    };
    let mem_size = o
        .mem_size
        .unwrap_or_else(|| (mem_total() / (4 * ncpu as u64)).min(1 << 30));
    // Check privileges and the machine once, before any hog starts.
    engine::preflight(
        &scenario(1, o.array, o.stride, true)?,
        &RunPolicy::Exclusive(ExclusiveConfig::default()),
        &topo,
    )?;
    progress.start((o.loads.len() * threads.len() * 2 * repeat) as u64);
    let mut samples: Vec<Sample> = Vec::new();
    // Repeat-major: every repeat runs every load, and D and C back to back within it, so a
    // drift of the machine's speed over the experiment (a shared host: several per cent
    // within minutes here) hits every cell alike instead of one load block. Hogs start
    // afresh for each load of each repeat.
    for _ in 0..repeat {
        for &load in &o.loads {
            let _hogs = match load {
                Load::None => None,
                Load::Cpu => Some(start_hogs(machine, ncpu, 64 << 10)?),
                Load::Mem => Some(start_hogs(machine, ncpu, mem_size)?),
            };
            for &t in &threads {
                for exclusive in [false, true] {
                    progress.message(&format!(
                        "{} {}{}T",
                        load.title(),
                        if exclusive { 'C' } else { 'D' },
                        t
                    ));
                    samples.push(one_run(machine, o, load, exclusive, t, work)?);
                    progress.step();
                    if engine::signal_flag().load(std::sync::atomic::Ordering::Relaxed) {
                        return Err(Error::Interrupted);
                    }
                }
            }
        }
    }
    progress.finish();
    Ok(ExclusiveResult {
        samples,
        loads: o.loads.clone(),
        threads,
        repeat,
        work,
        array: o.array,
        stride: o.stride,
        mem_size,
        rt_throttle: o.rt_throttle,
        system_cpus: topo.system_cpus(None)?.to_list(),
    })
}
