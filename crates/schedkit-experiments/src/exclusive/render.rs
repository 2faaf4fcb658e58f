//! The exclusive experiment's aggregation (mean with 95 % CI per cell), tables, headline
//! slowdowns, chart and JSON.

use super::{ExclusiveResult, Load, Sample};
use crate::stats::{mean_ci, median};
use schedkit_linux::exclusive::RtThrottle;
use schedkit_linux::perf::CounterKind;
use schedkit_render::chart::{Axis, BarChart, BarSeries, Chart};
use serde::Serialize;

/// Reads one indicator of a run (`None`: not measured on this machine).
type Indicator = Box<dyn Fn(&Sample) -> Option<f64>>;

/// The indicators in table order: wall time, CPU time, forced switches, the longest stall,
/// then every perf counter but task-clock.
fn indicators() -> Vec<(String, Indicator)> {
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
    rows
}

/// One indicator of one (load, configuration, threads) cell over its repeats.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub load: String,
    pub config: String,
    pub threads: u32,
    pub indicator: String,
    pub mean: f64,
    pub ci95: f64,
    pub median: f64,
    pub n: usize,
}

/// Every cell in table order; `None` where an indicator is not supported on this machine.
pub fn cells(r: &ExclusiveResult) -> Vec<Option<Cell>> {
    let mut out = Vec::new();
    for &load in &r.loads {
        for (name, f) in &indicators() {
            for &t in &r.threads {
                for cfg in ['D', 'C'] {
                    let xs: Vec<Option<f64>> = r
                        .samples
                        .iter()
                        .filter(|s| s.load == load.title() && s.threads == t && s.config == cfg)
                        .map(f)
                        .collect();
                    if xs.iter().any(|x| x.is_none()) {
                        out.push(None);
                        continue;
                    }
                    let xs: Vec<f64> = xs.into_iter().flatten().collect();
                    let (mean, ci95) = mean_ci(&xs);
                    out.push(Some(Cell {
                        load: load.title().into(),
                        config: cfg.to_string(),
                        threads: t,
                        indicator: name.clone(),
                        mean,
                        ci95,
                        median: median(&xs),
                        n: xs.len(),
                    }));
                }
            }
        }
    }
    out
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

/// The heading, one table per load (indicators in rows, D and C per thread count in
/// columns), then the slowdowns under load.
pub fn text(r: &ExclusiveResult, cells: &[Option<Cell>]) -> String {
    let mut out = format!(
        "Strided walk: {} steps of {} B over a {} B array, {} repeat(s) per cell, mean ± 95 % CI; \
         C = exclusive (system CPU {}, SCHED_FIFO 99, RT throttling {}); hogs per CPU: load 1 64 KiB, load 2 {} MiB\n\n",
        r.work,
        r.stride,
        r.array,
        r.repeat,
        r.system_cpus,
        match r.rt_throttle {
            RtThrottle::Keep => "kept",
            RtThrottle::Off => "off",
        },
        r.mem_size >> 20
    );
    let names = indicators();
    let per_load = names.len() * r.threads.len() * 2;
    for (l, &load) in r.loads.iter().enumerate() {
        let mut header = vec![load.title().to_string()];
        for &t in &r.threads {
            header.push(format!("D{t}T"));
            header.push(format!("C{t}T"));
        }
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut table = schedkit_render::table::table(&header);
        let block = &cells[l * per_load..(l + 1) * per_load];
        for (i, (name, _)) in names.iter().enumerate() {
            let mut row = vec![name.clone()];
            for c in &block[i * r.threads.len() * 2..(i + 1) * r.threads.len() * 2] {
                row.push(
                    c.as_ref()
                        .map_or_else(|| "not supported".into(), |c| fmt_ci(c.mean, c.ci95)),
                );
            }
            table.add_row(row);
        }
        out += &format!("{table}\n\n");
    }
    out += &slowdowns(r);
    out
}

/// Slowdown under load, the paper's headline: wall time against no load (means and
/// medians), and C's own CPU time against no load.
fn slowdowns(r: &ExclusiveResult) -> String {
    let mut out = String::new();
    if !r.loads.contains(&Load::None) {
        return out;
    }
    for &t in &r.threads {
        let of = |load: &str, cfg: char, f: fn(&Sample) -> Option<f64>| -> Vec<f64> {
            r.samples
                .iter()
                .filter(|s| s.load == load && s.threads == t && s.config == cfg)
                .filter_map(f)
                .collect()
        };
        let times = |load: &str, cfg: char| of(load, cfg, |s| Some(s.wall_s));
        for load in r.loads.iter().filter(|l| **l != Load::None) {
            // Means, and medians (robust to the odd disturbed repeat on a shared machine).
            let slowdown = |cfg: char, f: &dyn Fn(&[f64]) -> f64| {
                100.0 * (f(&times(load.title(), cfg)) / f(&times("No load", cfg)) - 1.0)
            };
            let mean = |x: &[f64]| mean_ci(x).0;
            out += &format!(
                "{t} thread(s), {}: time vs no load: D {:+.1} %, C {:+.1} % (means); \
                 D {:+.1} %, C {:+.1} % (medians)\n",
                load.title(),
                slowdown('D', &mean),
                slowdown('C', &mean),
                slowdown('D', &median),
                slowdown('C', &median),
            );
            // The job's own CPU time: if it grows as much as the wall time, the job computed
            // slower on its CPU rather than waited for it.
            let cpu = |l: &str| median(&of(l, 'C', |s| Some(s.cpu_s)));
            let (busy, idle) = (cpu(load.title()), cpu("No load"));
            if busy.is_finite() && idle.is_finite() {
                out += &format!(
                    "{t} thread(s), {}: C's CPU time vs no load: {:+.1} % (medians)\n",
                    load.title(),
                    100.0 * (busy / idle - 1.0)
                );
            }
        }
    }
    out
}

/// `exclusive.json`: every sample, every supported cell, the parameters.
pub fn json(r: &ExclusiveResult, cells: &[Option<Cell>]) -> serde_json::Value {
    let cells: Vec<&Cell> = cells.iter().flatten().collect();
    serde_json::json!({ "samples": r.samples, "cells": cells, "work": r.work,
        "array": r.array, "stride": r.stride, "repeat": r.repeat })
}

/// `exclusive.svg`: wall time, D beside C, per load and thread count, with 95 % CI whiskers;
/// `array` as the user wrote it, for the title.
pub fn chart(cells: &[Option<Cell>], array: &str) -> String {
    let times: Vec<&Cell> = cells
        .iter()
        .flatten()
        .filter(|c| c.indicator == "time s")
        .collect();
    let side = |cfg: &str| -> Vec<(f64, f64)> {
        times
            .iter()
            .filter(|c| c.config == cfg)
            .map(|c| (c.mean, c.ci95))
            .collect()
    };
    let (time_d, time_c) = (side("D"), side("C"));
    let cats = times
        .iter()
        .filter(|c| c.config == "D")
        .map(|c| format!("{} {}T", c.load, c.threads))
        .collect();
    let title =
        format!("Strided walk over {array}: default (D) vs exclusive (C), mean with 95 % CI");
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
    c.to_svg(900.0, 480.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(load: Load, config: char, wall_s: f64) -> Sample {
        Sample {
            load: load.title().into(),
            config,
            threads: 1,
            wall_s,
            cpu_s: wall_s,
            counters: vec![("cycles".into(), None)],
            involuntary_switches: 0,
            forced_per_s: 0.0,
            longest_stall_ms: 0.0,
        }
    }

    #[test]
    fn cells_tables_and_slowdowns_from_samples() {
        let r = ExclusiveResult {
            samples: vec![
                sample(Load::None, 'D', 1.0),
                sample(Load::None, 'C', 1.0),
                sample(Load::Cpu, 'D', 2.0),
                sample(Load::Cpu, 'C', 1.1),
            ],
            loads: vec![Load::None, Load::Cpu],
            threads: vec![1],
            repeat: 1,
            work: 10,
            array: 64,
            stride: 8,
            mem_size: 1 << 20,
            rt_throttle: RtThrottle::Keep,
            system_cpus: "0".into(),
        };
        let cells = cells(&r);
        let time: Vec<f64> = cells
            .iter()
            .flatten()
            .filter(|c| c.indicator == "time s")
            .map(|c| c.mean)
            .collect();
        assert_eq!(time, vec![1.0, 1.0, 2.0, 1.1]);
        let text = text(&r, &cells);
        assert!(text.contains("not supported"), "{text}");
        assert!(
            text.contains("time vs no load: D +100.0 %, C +10.0 % (means)"),
            "{text}"
        );
        assert!(chart(&cells, "64B").contains("C: exclusive"));
    }
}
