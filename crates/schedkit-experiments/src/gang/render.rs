//! The gang experiment's tables, charts and JSON.

use super::real::RealPart;
use super::sim::{ScaleRow, SimPart, BURST, NODES};
use super::GangResult;
use schedkit_core::gang_overhead::Pattern;
use schedkit_render::chart::{Axis, Chart, LineChart, Series};
use schedkit_render::table::table;

/// Part (a)'s table with its heading.
pub fn real_table(p: &RealPart) -> String {
    let mut t = table(&[
        "configuration",
        "a rounds/s",
        "b rounds/s",
        "a % of solo",
        "b % of solo",
        "CPU split a:b %",
        "a per CPU-s % of solo",
        "b per CPU-s % of solo",
        "switch us",
        "switches",
    ]);
    for r in &p.rows {
        t.add_row(vec![
            r.configuration.clone(),
            format!("{:.0}", r.rounds_per_s[0]),
            format!("{:.0}", r.rounds_per_s[1]),
            format!("{:.1}", r.pct_of_solo[0]),
            format!("{:.1}", r.pct_of_solo[1]),
            format!("{:.1}:{:.1}", r.cpu_split_a_pct, 100.0 - r.cpu_split_a_pct),
            format!("{:.1}", r.per_cpu_s_pct_of_solo[0]),
            format!("{:.1}", r.per_cpu_s_pct_of_solo[1]),
            r.switch_us_median
                .map_or_else(|| "-".into(), |s| format!("{s:.1}")),
            if r.quantum_ms.is_some() {
                r.switches.to_string()
            } else {
                "-".into()
            },
        ]);
    }
    format!(
        "(a) this machine: two jobs of 2 threads, {} of work then a spin barrier; {} per run, \
         median of {}; job threads at nice {}; the freezer for built-in threads: {}\n{t}\n",
        p.setup.compute, p.setup.duration, p.setup.repeat, p.setup.nice, p.backend
    )
}

/// Part (a)'s chart (SVG): each job's rate against alone, per quantum, beside default and the
/// ideal.
pub fn real_chart(p: &RealPart) -> String {
    let mut c = LineChart::new(
        "Two 2-thread spin-barrier jobs on 2 cores: rate vs quantum",
        Axis::new("gang quantum", "ms"),
        Axis::new("rate, % of the job alone", "%"),
    );
    let gang: Vec<_> = p.rows.iter().filter(|r| r.quantum_ms.is_some()).collect();
    for (j, job) in ["a", "b"].iter().enumerate() {
        c.series(Series::new(
            &format!("gang: job {job}"),
            gang.iter()
                .map(|r| (r.quantum_ms.unwrap_or(0) as f64, r.pct_of_solo[j]))
                .collect(),
        ));
    }
    let xs: Vec<f64> = p.setup.quanta.iter().map(|&q| q as f64).collect();
    let default = &p.rows[1];
    for (j, job) in ["a", "b"].iter().enumerate() {
        c.series(Series::new(
            &format!("default: job {job}"),
            xs.iter().map(|&x| (x, default.pct_of_solo[j])).collect(),
        ));
    }
    c.series(Series::new(
        "ideal (half a dedicated machine)",
        xs.iter().map(|&x| (x, 50.0)).collect(),
    ));
    c.to_svg(820.0, 460.0)
}

/// Part (b)'s table with its heading.
pub fn sim_table(p: &SimPart) -> String {
    let mut t = table(&[
        "slice ms",
        "pattern",
        "switch ms",
        "switches",
        "slowdown %",
        "net context % of switch",
    ]);
    for r in &p.rows {
        t.add_row(vec![
            r.slice_ms.to_string(),
            r.pattern.into(),
            format!("{:.3}", r.switch_ms),
            r.switches.to_string(),
            format!("{:.2}", r.slowdown_pct),
            format!("{:.1}", 100.0 * r.context_fraction),
        ]);
    }
    format!(
        "(b) simulator: {NODES} nodes x 1 core, two jobs on all nodes ({BURST} of CPU per thread), \
         seed 002's overhead model (defaults in gang_overhead.rs); slowdown = makespan / makespan \
         with free switches - 1\n{t}\n"
    )
}

/// Part (b)'s chart (SVG): slowdown against the slice, one curve per communication pattern.
pub fn sim_chart(p: &SimPart) -> String {
    let mut c = LineChart::new(
        "Gang scheduling on a simulated 64-node cluster: slowdown vs time slice",
        Axis::new("time slice", "ms"),
        Axis::new("slowdown against free switches", "%"),
    );
    for pattern in Pattern::ALL.iter() {
        c.series(Series::new(
            pattern.as_str(),
            p.rows
                .iter()
                .filter(|r| r.pattern == pattern.as_str())
                .map(|r| (r.slice_ms as f64, r.slowdown_pct))
                .collect(),
        ));
    }
    c.to_svg(820.0, 460.0)
}

/// Part (c)'s table with its heading.
pub fn scale_table(r: &ScaleRow) -> String {
    let mut t = table(&[
        "nodes",
        "cores",
        "jobs",
        "threads",
        "simulated s",
        "events",
        "switches",
        "max slots",
        "wall s",
    ]);
    t.add_row(vec![
        r.nodes.to_string(),
        r.cores.to_string(),
        r.jobs.to_string(),
        r.threads.to_string(),
        format!("{:.1}", r.sim_s),
        r.events.to_string(),
        r.switches.to_string(),
        r.max_rows.to_string(),
        format!("{:.2}", r.wall_s),
    ]);
    format!(
        "(c) simulator scale: nodes of 4 cores, 100 jobs, 100 ms slices, neighbour overhead\n{t}"
    )
}

/// `gang.json`: `{"real": [rows], "sim": [rows], "scale": {...}}` (`real` only when run).
pub fn json(r: &GangResult) -> serde_json::Value {
    let mut doc = serde_json::Map::new();
    if let Some(real) = &r.real {
        doc.insert("real".into(), serde_json::json!(real.rows));
    }
    doc.insert("sim".into(), serde_json::json!(r.sim.rows));
    doc.insert("scale".into(), serde_json::json!(r.scale));
    serde_json::Value::Object(doc)
}
