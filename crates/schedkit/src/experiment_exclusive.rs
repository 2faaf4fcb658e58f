//! `schedkit experiment exclusive`: seed 000's Table 2 on this machine.
//!
//! The job is the paper's strided walk (a cyclic walk over a 5 MB array with a step far
//! larger than a cache line, incrementing each element it visits), a fixed amount of work
//! split over 1..N threads. Each cell runs it under the default configuration (D: the kernel
//! decides) and under exclusive mode (C: system core, job threads pinned at SCHED_FIFO 99,
//! other threads and IRQs moved away), with
//! - no load,
//! - load 1: one small-memory CPU hog per CPU (arithmetic on 64 KiB),
//! - load 2: one large-memory hog per CPU (arithmetic over `--mem-size` bytes each),
//!
//! `--repeat` times (default 10), and reports each indicator as the mean with a 95 %
//! confidence interval (Student's t). Indicators: wall time, perf's context-switches and
//! cpu-migrations and page-faults, the kernel's involuntary switches (per second of the job),
//! the longest stall measured by the job's threads, and the hardware counters where the
//! machine has them ("not supported" otherwise).
//!
//! Hogs are this binary run with the hidden `--hog BYTES` flag; they die with the experiment
//! (PDEATHSIG) and are killed after each load block.

use crate::failure::Failure;
use clap::{Args, ValueEnum};
use schedkit_core::scenario::{PolicyName, PolicySpec, Process, Scenario, Work};
use schedkit_core::Nanos;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::exclusive::{ExclusiveConfig, RtThrottle};
use schedkit_linux::perf::CounterKind;
use schedkit_linux::topo::Topology;
use schedkit_render::chart::{Axis, BarChart, BarSeries, Chart};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Load {
    /// No background load.
    None,
    /// Load 1: one small-memory CPU hog per CPU.
    Cpu,
    /// Load 2: one large-memory hog per CPU.
    Mem,
}

impl Load {
    fn title(self) -> &'static str {
        match self {
            Load::None => "No load",
            Load::Cpu => "Load 1",
            Load::Mem => "Load 2",
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
    pub loads: Vec<Load>,
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

// Re-exported while other experiments still import it from here.
use schedkit_experiments::stats::{mean_ci, median};

/// A hog: arithmetic over `bytes` of memory, forever (until killed or its parent dies).
fn hog(bytes: u64) -> ! {
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

fn start_hogs(n: usize, bytes: u64) -> Result<Hogs, Failure> {
    let exe =
        crate::self_exe().map_err(|e| anyhow::anyhow!("locating the schedkit binary: {e}"))?;
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(
            std::process::Command::new(&exe)
                .args(["experiment", "exclusive", "--hog", &bytes.to_string()])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn()
                .map_err(|e| anyhow::anyhow!("starting a hog: {e}"))?,
        );
    }
    // Let them allocate and touch their memory before the job starts.
    std::thread::sleep(std::time::Duration::from_millis(if bytes > 1 << 20 {
        1500
    } else {
        200
    }));
    Ok(Hogs(v))
}

/// Reads one indicator of a run (`None`: not measured on this machine).
type Indicator = Box<dyn Fn(&Sample) -> Option<f64>>;

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

fn scenario(threads: u32, array: u64, stride: u64, exclusive: bool) -> Scenario {
    Scenario {
        file: "experiment exclusive".into(),
        cores: 1,
        policy: PolicySpec::new(if exclusive {
            PolicyName::Exclusive
        } else {
            PolicyName::Default
        }),
        horizon: Nanos::from_secs(3600),
        processes: vec![Process::new(
            "walk",
            threads,
            Work::Stride { array, stride },
        )],
        groups: Vec::new(),
        tasks: Vec::new(),
    }
}

fn one_run(
    a: &ExclusiveExpArgs,
    load: Load,
    exclusive: bool,
    threads: u32,
    array: u64,
    stride: u64,
    work: u64,
) -> Result<Sample, Failure> {
    let policy = if exclusive {
        RunPolicy::Exclusive(ExclusiveConfig {
            rt_throttle: match a.rt_throttle {
                Throttle::Keep => RtThrottle::Keep,
                Throttle::Off => RtThrottle::Off,
            },
            ..ExclusiveConfig::default()
        })
    } else {
        RunPolicy::Default
    };
    let mut opts = RunOptions::new(policy);
    opts.iterations = Some(work / threads as u64);
    // Checked when the arguments were read.
    let sample = schedkit_core::time::Nanos::parse(&a.sample).map_or(10_000_000, |d| d.0);
    opts.sample = std::time::Duration::from_nanos(sample);
    let sc = scenario(threads, array, stride, exclusive);
    let o = engine::run(&sc, opts)?;
    if o.interrupted {
        return Err(Failure {
            status: 130,
            message: "interrupted; every change was undone".into(),
        });
    }
    let p = &o.processes[0];
    let wall = p.end_ns.saturating_sub(p.start_ns) as f64 / 1e9;
    Ok(Sample {
        load: load.title().into(),
        config: if exclusive { 'C' } else { 'D' },
        threads,
        wall_s: wall,
        cpu_s: o.threads.iter().map(|t| t.cpu_ns).sum::<u64>() as f64 / 1e9,
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

fn fmt_ci(m: f64, ci: f64) -> String {
    let f = |x: f64| {
        if x == 0.0 {
            "0".to_string()
        } else if x.abs() >= 1e5 {
            format!("{x:.3e}")
        } else if x.abs() >= 100.0 {
            format!("{x:.0}")
        } else if x.abs() >= 1.0 {
            format!("{x:.2}")
        } else {
            format!("{x:.3}")
        }
    };
    format!("{} ± {}", f(m), f(ci))
}

pub fn run(a: ExclusiveExpArgs) -> Result<(), Failure> {
    if let Some(b) = a.hog {
        hog(b);
    }
    let bad = |m: String| Failure {
        status: crate::failure::EXIT_BAD_INPUT,
        message: m,
    };
    let array = schedkit_core::time::Bytes::parse(&a.array)
        .map_err(|m| bad(format!("--array: {m}")))?
        .0;
    let stride = schedkit_core::time::Bytes::parse(&a.stride)
        .map_err(|m| bad(format!("--stride: {m}")))?
        .0;
    match schedkit_core::time::Nanos::parse(&a.sample) {
        Ok(d) if d.0 > 0 => {}
        Ok(_) => return Err(bad("--sample must be positive".into())),
        Err(m) => return Err(bad(format!("--sample: {m}"))),
    }
    if array < 8 || stride == 0 {
        return Err(bad(
            "--array must be at least 8 bytes and --stride positive".into(),
        ));
    }
    let topo = Topology::host()?;
    let ncpu = topo.n_cpus();
    let repeat = if a.quick { 3 } else { a.repeat.max(1) };
    let work = if a.quick { a.work / 10 } else { a.work }.max(1);
    let threads: Vec<u32> = match &a.threads {
        Some(t) if t.iter().any(|&x| x == 0 || x > 1024) => {
            return Err(bad(
                "--threads: each count must be between 1 and 1024".into()
            ))
        }
        Some(t) => t.clone(),
        None if a.quick => vec![1],
        None => (1..=ncpu as u32).collect(),
    };
    let mem_total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(1 << 20)
        * 1024;
    let mem_size = match &a.mem_size {
        Some(m) => {
            schedkit_core::time::Bytes::parse(m)
                .map_err(|e| bad(format!("--mem-size: {e}")))?
                .0
        }
        None => (mem_total / (4 * ncpu as u64)).min(1 << 30),
    };
    // Check privileges and the machine once, before any hog starts.
    engine::preflight(
        &scenario(1, array, stride, true),
        &RunPolicy::Exclusive(ExclusiveConfig::default()),
        &topo,
    )?;
    engine::install_signal_handlers();

    let total = a.loads.len() * threads.len() * 2 * repeat;
    let bar = if std::io::stdout().is_terminal() {
        let b = indicatif::ProgressBar::new(total as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {pos}/{len} runs · {msg} · ETA {eta}",
            )
            .expect("template"),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut samples: Vec<Sample> = Vec::new();
    // Repeat-major: every repeat runs every load, and D and C back to back within it, so a
    // drift of the machine's speed over the experiment (a shared host: several per cent
    // within minutes here) hits every cell alike instead of one load block. Hogs start
    // afresh for each load of each repeat.
    for _ in 0..repeat {
        for &load in &a.loads {
            let _hogs = match load {
                Load::None => None,
                Load::Cpu => Some(start_hogs(ncpu, 64 << 10)?),
                Load::Mem => Some(start_hogs(ncpu, mem_size)?),
            };
            for &t in &threads {
                for exclusive in [false, true] {
                    bar.set_message(format!(
                        "{} {}{}T",
                        load.title(),
                        if exclusive { 'C' } else { 'D' },
                        t
                    ));
                    samples.push(one_run(&a, load, exclusive, t, array, stride, work)?);
                    bar.inc(1);
                    if engine::signal_flag().load(std::sync::atomic::Ordering::Relaxed) {
                        return Err(Failure {
                            status: 130,
                            message: "interrupted; every change was undone".into(),
                        });
                    }
                }
            }
        }
    }
    bar.finish_and_clear();

    println!(
        "Strided walk: {} steps of {} B over a {} B array, {} repeat(s) per cell, mean ± 95 % CI; \
         C = exclusive (system CPU {}, SCHED_FIFO 99, RT throttling {}); hogs per CPU: load 1 64 KiB, load 2 {} MiB\n",
        work,
        stride,
        array,
        repeat,
        topo.system_cpus(None)?.to_list(),
        match a.rt_throttle {
            Throttle::Keep => "kept",
            Throttle::Off => "off",
        },
        mem_size >> 20
    );
    let mut rows: Vec<(String, Indicator)> = vec![
        ("time s".into(), Box::new(|s: &Sample| Some(s.wall_s))),
        ("cpu s".into(), Box::new(|s: &Sample| Some(s.cpu_s))),
        (
            "forced switches /s".into(),
            Box::new(|s: &Sample| Some(s.forced_per_s)),
        ),
        (
            "longest stall ms".into(),
            Box::new(|s: &Sample| Some(s.longest_stall_ms)),
        ),
    ];
    for k in CounterKind::all() {
        if k == CounterKind::TaskClock {
            continue;
        }
        let name = k.name().to_string();
        let n2 = name.clone();
        rows.push((
            name,
            Box::new(move |s: &Sample| {
                s.counters
                    .iter()
                    .find(|(n, _)| *n == n2)
                    .and_then(|(_, v)| *v)
                    .map(|v| v as f64)
            }),
        ));
    }
    let mut json_cells = Vec::new();
    let mut time_d = Vec::new();
    let mut time_c = Vec::new();
    let mut cats = Vec::new();
    for &load in &a.loads {
        let mut header = vec![load.title().to_string()];
        for &t in &threads {
            header.push(format!("D{t}T"));
            header.push(format!("C{t}T"));
        }
        let mut table = comfy_table::Table::new();
        table.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
        table.set_header(header);
        for i in 1..=threads.len() * 2 {
            if let Some(c) = table.column_mut(i) {
                c.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        for (name, f) in &rows {
            let mut row = vec![name.clone()];
            for &t in &threads {
                for cfg in ['D', 'C'] {
                    let xs: Vec<Option<f64>> = samples
                        .iter()
                        .filter(|s| s.load == load.title() && s.threads == t && s.config == cfg)
                        .map(f)
                        .collect();
                    if xs.iter().any(|x| x.is_none()) {
                        row.push("not supported".into());
                        continue;
                    }
                    let xs: Vec<f64> = xs.into_iter().flatten().collect();
                    let (m, ci) = mean_ci(&xs);
                    row.push(fmt_ci(m, ci));
                    json_cells.push(serde_json::json!({
                        "load": load.title(), "config": cfg.to_string(), "threads": t,
                        "indicator": name, "mean": m, "ci95": ci, "median": median(&xs),
                        "n": xs.len(),
                    }));
                    if name == "time s" {
                        if cfg == 'D' {
                            time_d.push((m, ci));
                            cats.push(format!("{} {t}T", load.title()));
                        } else {
                            time_c.push((m, ci));
                        }
                    }
                }
            }
            table.add_row(row);
        }
        println!("{table}\n");
    }
    // Slowdown under load, the paper's headline.
    for &t in &threads {
        let of = |load: &str, cfg: char, f: fn(&Sample) -> Option<f64>| -> Vec<f64> {
            samples
                .iter()
                .filter(|s| s.load == load && s.threads == t && s.config == cfg)
                .filter_map(f)
                .collect()
        };
        let times = |load: &str, cfg: char| of(load, cfg, |s| Some(s.wall_s));
        for load in a.loads.iter().filter(|l| **l != Load::None) {
            if a.loads.contains(&Load::None) {
                // Means, and medians (robust to the odd disturbed repeat on a shared machine).
                let slowdown = |cfg: char, f: &dyn Fn(&[f64]) -> f64| {
                    100.0 * (f(&times(load.title(), cfg)) / f(&times("No load", cfg)) - 1.0)
                };
                let mean = |x: &[f64]| mean_ci(x).0;
                println!(
                    "{t} thread(s), {}: time vs no load: D {:+.1} %, C {:+.1} % (means); \
                     D {:+.1} %, C {:+.1} % (medians)",
                    load.title(),
                    slowdown('D', &mean),
                    slowdown('C', &mean),
                    slowdown('D', &median),
                    slowdown('C', &median),
                );
                // The job's own CPU time: if it grows as much as the wall time, the job
                // computed slower on its CPU rather than waited for it.
                let cpu = |l: &str| median(&of(l, 'C', |s| Some(s.cpu_s)));
                let (busy, idle) = (cpu(load.title()), cpu("No load"));
                if busy.is_finite() && idle.is_finite() {
                    println!(
                        "{t} thread(s), {}: C's CPU time vs no load: {:+.1} % (medians)",
                        load.title(),
                        100.0 * (busy / idle - 1.0)
                    );
                }
            }
        }
    }
    std::fs::create_dir_all(&a.out).map_err(|e| anyhow::anyhow!("{}: {e}", a.out.display()))?;
    let json = serde_json::json!({ "samples": samples, "cells": json_cells, "work": work, "array": array, "stride": stride, "repeat": repeat });
    let jp = a.out.join("exclusive.json");
    std::fs::write(
        &jp,
        serde_json::to_string_pretty(&json).map_err(anyhow::Error::from)?,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", jp.display()))?;
    let title = format!(
        "Strided walk over {}: default (D) vs exclusive (C), mean with 95 % CI",
        a.array
    );
    let mut c = BarChart::new(
        &title,
        "background load and job threads",
        Axis::new("wall time", "s"),
        cats,
    );
    let err = |v: &[(f64, f64)]| v.iter().map(|(m, ci)| (m - ci, m + ci)).collect::<Vec<_>>();
    c.series(
        BarSeries::new("D: default", time_d.iter().map(|x| x.0).collect())
            .with_errors(err(&time_d)),
    );
    c.series(
        BarSeries::new("C: exclusive", time_c.iter().map(|x| x.0).collect())
            .with_errors(err(&time_c)),
    );
    let sp = a.out.join("exclusive.svg");
    std::fs::write(&sp, c.to_svg(900.0, 480.0))
        .map_err(|e| anyhow::anyhow!("{}: {e}", sp.display()))?;
    println!("\nwrote {} and {}", jp.display(), sp.display());
    Ok(())
}
