//! The paws experiment's tables (Table 1, Figs. 2 and 3 as numbers, response times, steals,
//! preemption latency), its charts (Figs. 2 and 3, real and simulated side by side) and its
//! JSON, from a [`PawsResult`].

use super::{Cell, Engine, PawsResult};
use schedkit_core::scenario::{PolicyName, Region};
use schedkit_render::chart::{side_by_side, Axis, BarChart, BarSeries};
use schedkit_render::table::table;
use schedkit_runtime::paws::stats::percentile;
use schedkit_runtime::paws::PreemptionStages;
use serde_json::json;
use std::fmt::Write;

fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    }
}

/// p50 and p99 of each preemption stage (name, p50 ns, p99 ns); empty without preemptions.
pub fn stage_percentiles(stages: &[[u64; 5]]) -> Vec<(&'static str, Option<u64>, Option<u64>)> {
    if stages.is_empty() {
        return Vec::new();
    }
    PreemptionStages::STAGE_NAMES
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let v: Vec<u64> = stages.iter().map(|s| s[k]).collect();
            (*name, percentile(&v, 50.0), percentile(&v, 99.0))
        })
        .collect()
}

impl Cell {
    /// Table 1's entry: sets with a miss out of the sets run.
    fn table1(&self) -> String {
        if self.sets == 0 {
            return format!("- ({} rejected)", self.rejected);
        }
        let mut s = format!("{}/{}", self.sets_missing, self.sets);
        if self.witnessed && self.sets_missing > 0 {
            s += &format!(" ({} not stalls)", self.sets_unexplained);
        }
        if self.rejected > 0 {
            s += &format!(" ({} rej.)", self.rejected);
        }
        s
    }

    fn json(&self) -> serde_json::Value {
        let q = |p| percentile(&self.responses, p);
        json!({
            "sets": self.sets, "rejected": self.rejected, "sets_with_misses": self.sets_missing,
            "jobs": self.jobs, "misses": self.misses,
            "avg_migrations": mean(&self.migrations), "avg_context_switches": mean(&self.switches),
            "avg_kernel_migrations": mean(&self.kernel_migrations),
            "avg_kernel_context_switches": mean(&self.kernel_switches),
            "avg_steals": if self.steals.is_empty() { None } else { Some(mean(&self.steals)) },
            "response_p50_ns": q(50.0), "response_p90_ns": q(90.0), "response_p99_ns": q(99.0),
            "response_max_ns": q(100.0),
            "preemption_latency_p50_ns": percentile(&self.latency, 50.0),
            "preemption_latency_p99_ns": percentile(&self.latency, 99.0),
            "sets_with_unexplained_misses": self.witnessed.then_some(self.sets_unexplained),
            "stalls": self.witnessed.then_some(self.stalls.len()),
            "longest_stall_ns": self.stalls.iter().max(),
            "preemption_stages_ns": stage_percentiles(&self.stages)
                .into_iter()
                .map(|(name, p50, p99)| (name.to_string(), json!({ "p50": p50, "p99": p99 })))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// `engine policy` of every column.
fn names(r: &PawsResult) -> Vec<String> {
    let e = &r.plan.engines;
    e.iter()
        .map(|(e, p)| format!("{} {p}", e.as_str()))
        .collect()
}

/// Whether engine `e` is the real-time pool (its counts split into kernel and user level).
fn is_pool(r: &PawsResult, e: usize) -> bool {
    let (engine, policy) = r.plan.engines[e];
    engine == Engine::Real && policy != PolicyName::SchedDeadline
}

/// One row per window, one column per engine and policy (and the G-EDF bound with `extra`).
fn grid(
    r: &PawsResult,
    extra: Option<&str>,
    f: &dyn Fn(usize, &Cell) -> String,
) -> comfy_table::Table {
    let names = names(r);
    let mut h: Vec<&str> = vec!["window (total U)"];
    h.extend(names.iter().map(String::as_str));
    h.extend(extra);
    let mut t = table(&h);
    for (w, win) in r.plan.windows.iter().enumerate() {
        let mut row = vec![win.label.clone()];
        row.extend((0..names.len()).map(|e| f(e, &r.cells[w][e])));
        if extra.is_some() {
            row.push(format!("{}/{}", r.bound[w], r.plan.sets));
        }
        t.add_row(row);
    }
    t
}

/// The tables and notes printed after a run (without the list of files written).
pub fn text(r: &PawsResult) -> String {
    let p = &r.plan;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "seed 001 experiment: m = {}, {} task sets per window (seed {}), real runs of {} \
         (jobs released for that long, then run to completion), simulated runs of {}\n",
        p.cores, p.sets, p.seed, p.duration, p.horizon
    );
    let t1 = grid(r, Some("G-EDF bound holds"), &|_, c| c.table1());
    let _ = writeln!(
        out,
        "Table 1: task sets with at least one deadline miss\n{t1}\n"
    );
    if p.stall_witness {
        let all: Vec<u64> = r
            .cells
            .iter()
            .flatten()
            .flat_map(|c| c.stalls.clone())
            .collect();
        let _ = writeln!(
            out,
            "Stall witness: {} machine stalls over 2 ms seen during the real runs (longest \
             {:.1} ms); \"not stalls\": sets with a miss that the stalls during the job do \
             not explain\n",
            all.len(),
            all.iter().max().copied().unwrap_or(0) as f64 / 1e6
        );
    }
    let split = |e: usize, total: &[u64], kernel: &[u64]| {
        if is_pool(r, e) {
            format!("{:.0} ({:.0} k)", mean(total), mean(kernel))
        } else {
            format!("{:.0}", mean(total))
        }
    };
    let t2 = grid(r, None, &|e, c| {
        split(e, &c.migrations, &c.kernel_migrations)
    });
    let t3 = grid(r, None, &|e, c| split(e, &c.switches, &c.kernel_switches));
    let _ = writeln!(
        out,
        "Fig. 2: average migrations per task set (real pool: kernel + user level, kernel \
         alone in parentheses)\n{t2}\n"
    );
    let _ = writeln!(
        out,
        "Fig. 3: average context switches per task set (same convention)\n{t3}\n"
    );
    let ms = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{:.1}", v as f64 / 1e6));
    let t4 = grid(r, None, &|_, c| {
        let q = |p| ms(percentile(&c.responses, p));
        format!("{} / {} / {}", q(50.0), q(99.0), q(100.0))
    });
    let t5 = grid(r, None, &|_, c| {
        if c.steals.is_empty() {
            "-".into()
        } else {
            format!("{:.0}", mean(&c.steals))
        }
    });
    let _ = writeln!(
        out,
        "Response time over all jobs, p50 / p99 / max (ms)\n{t4}\n"
    );
    let _ = writeln!(out, "Average steals per task set\n{t5}\n");
    out += &preemption_text(r);
    out
}

/// Each pool policy's preemption latency, overall and by stage.
fn preemption_text(r: &PawsResult) -> String {
    let names = names(r);
    let mut out = String::new();
    for c in (0..names.len()).filter(|&e| is_pool(r, e)) {
        let lat: Vec<u64> = r.cells.iter().flat_map(|w| w[c].latency.clone()).collect();
        let (Some(p50), Some(p99)) = (percentile(&lat, 50.0), percentile(&lat, 99.0)) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{}: preemption latency (release to first instruction of a preempting job) \
             p50 {:.1} us, p99 {:.1} us over {} preemptions",
            names[c],
            p50 as f64 / 1e3,
            p99 as f64 / 1e3,
            lat.len()
        );
        let stages: Vec<[u64; 5]> = r.cells.iter().flat_map(|w| w[c].stages.clone()).collect();
        let by_stage: Vec<String> = stage_percentiles(&stages)
            .into_iter()
            .map(|(name, p50, p99)| {
                let us = |x: Option<u64>| x.map_or(0.0, |x| x as f64 / 1e3);
                format!("{name} {:.1} / {:.1}", us(p50), us(p99))
            })
            .collect();
        if !by_stage.is_empty() {
            let _ = writeln!(out, "  by stage, p50 / p99 us: {}", by_stage.join(", "));
        }
    }
    out
}

/// A bar chart of `f` per window for the policies of `engine`.
fn chart(
    r: &PawsResult,
    engine: Engine,
    title: &str,
    y: &str,
    f: &dyn Fn(&Cell) -> f64,
) -> BarChart {
    let cats: Vec<String> = r.plan.windows.iter().map(|w| w.label.clone()).collect();
    let nw = cats.len();
    let mut c = BarChart::new(
        title,
        "utilisation window",
        Axis::new(y, "per task set"),
        cats,
    );
    c.legend_title = Some("policy".into());
    c.no_data = Some("no policy ran in this engine".into());
    for (e, &(en, p)) in r.plan.engines.iter().enumerate() {
        if en == engine {
            c.series(BarSeries::new(
                p.as_str(),
                (0..nw).map(|w| f(&r.cells[w][e])).collect(),
            ));
        }
    }
    c
}

/// Figs. 2 and 3, real and simulated side by side: (file name, SVG) for
/// `paws-migrations.svg` and `paws-switches.svg`.
pub fn charts(r: &PawsResult) -> Vec<(&'static str, String)> {
    let p = &r.plan;
    let m = p.cores;
    let mut files = Vec::new();
    for (file, what, f) in [
        (
            "paws-migrations.svg",
            "migrations",
            (&|c: &Cell| mean(&c.migrations)) as &dyn Fn(&Cell) -> f64,
        ),
        ("paws-switches.svg", "context switches", &|c: &Cell| {
            mean(&c.switches)
        }),
    ] {
        let rc = chart(
            r,
            Engine::Real,
            &format!(
                "Real ({m} CPUs, {} per run; pool: kernel + user level)",
                p.duration
            ),
            &format!("avg {what}"),
            f,
        );
        let sc = chart(
            r,
            Engine::Sim,
            &format!("Simulated ({m} cores, {} per run)", p.horizon),
            &format!("avg {what}"),
            f,
        );
        let title = format!(
            "Seed 001 experiment: average {what} per task set ({} sets per window)",
            p.sets
        );
        let svg = match (r.has_real(), r.has_sim()) {
            (true, true) => side_by_side(&title, &[&rc, &sc], 760.0, 460.0),
            (true, false) => side_by_side(&title, &[&rc], 900.0, 460.0),
            _ => side_by_side(&title, &[&sc], 900.0, 460.0),
        };
        files.push((file, svg));
    }
    files
}

/// Everything, per window and policy and per set (`paws.json`).
pub fn json(r: &PawsResult) -> serde_json::Value {
    let p = &r.plan;
    let names = names(r);
    let per_set: Vec<serde_json::Value> = r
        .set_runs
        .iter()
        .map(|s| {
            let mut row = serde_json::Map::new();
            for (name, outcome) in names.iter().zip(&s.runs) {
                let o = &outcome.run;
                row.insert(
                    name.clone(),
                    json!({
                        "jobs": o.jobs, "misses": o.misses,
                        "migrations": outcome.migrations(), "context_switches": outcome.switches(),
                        "user_migrations": o.user_migrations, "user_context_switches": o.user_switches,
                        "steals": o.steals, "rejected": outcome.rejected,
                        "unexplained_misses": o.unexplained_misses, "stall_late_ns": o.stall_lateness,
                        "response_max_ns": o.responses.iter().max(),
                    }),
                );
            }
            let tasks = &s.tasks;
            let u: f64 = tasks.iter().map(|t| t.utilisation()).sum();
            json!({
                "window": p.windows[s.window].label, "seed": s.seed, "tasks": tasks.len(),
                "utilisation": u,
                "u_max": tasks.iter().map(|t| t.utilisation()).fold(0.0, f64::max),
                "threads_per_region": tasks.iter().map(|t| t.regions().iter().map(|r| match r {
                    Region::Par(v) => v.len(), _ => 0 }).max().unwrap_or(0)).collect::<Vec<_>>(),
                "gedf_bound_holds": s.gedf_bound_holds, "runs": row,
            })
        })
        .collect();
    json!({
        "cores": p.cores, "sets_per_window": p.sets, "seed": p.seed,
        "real_duration_ns": p.duration.0, "sim_horizon_ns": p.horizon.0,
        "windows": p.windows.iter().enumerate().map(|(w, win)| json!({
            "label": win.label, "u_min": win.lo, "u_max": win.hi, "scaled_by_m": win.scaled,
            "gedf_bound_holds_sets": r.bound[w],
            "policies": p.engines.iter().enumerate().map(|(e, (en, pol))| {
                let mut v = r.cells[w][e].json();
                v["engine"] = json!(en.as_str());
                v["policy"] = json!(pol.as_str());
                v
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "sets": per_set,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_percentiles_name_every_stage_and_take_each_column() {
        assert!(stage_percentiles(&[]).is_empty());
        // Stage k of preemption i is (k + 1) * (i + 1) us.
        let stages: Vec<[u64; 5]> = (1..=100u64)
            .map(|i| std::array::from_fn(|k| (k as u64 + 1) * i * 1000))
            .collect();
        let got = stage_percentiles(&stages);
        let names: Vec<&str> = got.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names, ["timer", "request", "reach", "pick", "switch"]);
        for (k, (_, p50, p99)) in got.into_iter().enumerate() {
            let col: Vec<u64> = stages.iter().map(|s| s[k]).collect();
            assert_eq!(p50, percentile(&col, 50.0));
            assert_eq!(p99, percentile(&col, 99.0));
            assert!(p50.unwrap() < p99.unwrap());
        }
    }
}
