//! The fibers experiment's tables (times, speed-ups, scheduler counters) and chart.

use super::{CounterRow, FibersResult, Row};
use comfy_table::Table;
use schedkit_render::chart::{side_by_side, Axis, Chart, LineChart, Series};
use schedkit_render::table::table;

/// The tables with their headings, and one `skipped:` line per cell that did not fit.
pub fn text(r: &FibersResult) -> String {
    let mut out = format!(
        "Blocked Gaussian elimination, n = {}, {} scheduler threads, median of {} run(s)\n\n",
        r.size, r.workers, r.repeat
    );
    for w in &r.warnings {
        out += &format!("WARNING: {w}\n\n");
    }
    out += &format!("{}\n\n", times_table(&r.rows));
    if let Some(t) = speedup_table(&r.rows) {
        out += "Speed-up in % ((t_old / t_new - 1) x 100), per phase, as in seed 003 figures 3 and 5:\n\n";
        out += &format!("{t}\n\n");
    }
    if !r.counters.is_empty() {
        out += "Scheduler counters per run (mean over the repeats, summed over the STs):\n\n";
        out += &format!("{}\n\n", counters_table(&r.counters));
    }
    for s in &r.skipped {
        out += &format!("skipped: {s}\n");
    }
    out
}

/// `--json`: the rows, the scheduler threads and the warnings.
pub fn json(r: &FibersResult) -> serde_json::Value {
    serde_json::json!({
        "rows": r.rows,
        "workers": r.workers,
        "warnings": r.warnings,
    })
}

pub fn times_table(rows: &[Row]) -> Table {
    let mut t = table(&[
        "method",
        "threads",
        "arch",
        "forward s",
        "backward s",
        "total s",
        "residual",
    ]);
    for r in rows {
        t.add_row(vec![
            r.method.to_string(),
            r.threads.to_string(),
            r.arch.clone(),
            format!("{:.4}", r.forward_s),
            format!("{:.4}", r.backward_s),
            format!("{:.4}", r.total_s),
            format!("{:.1e}", r.residual),
        ]);
    }
    t
}

pub fn counters_table(rows: &[CounterRow]) -> Table {
    let mut t = table(&[
        "method",
        "threads",
        "arch",
        "phase",
        "runs",
        "slot runs",
        "blocks",
        "wakes",
        "cross-ST",
        "steals",
        "parks",
        "idle ms",
        "A1 scans",
        "A1 scanned",
    ]);
    for CounterRow {
        method: m,
        threads: th,
        arch,
        phase,
        stats: s,
    } in rows
    {
        t.add_row(vec![
            m.to_string(),
            th.to_string(),
            arch.clone(),
            phase.to_string(),
            s.runs.to_string(),
            s.slot_runs.to_string(),
            s.blocks.to_string(),
            s.wakes.to_string(),
            s.remote_readies.to_string(),
            s.steals.to_string(),
            s.parks.to_string(),
            format!("{:.2}", s.idle_ns as f64 / 1e6),
            s.a1_scans.to_string(),
            s.a1_scanned.to_string(),
        ]);
    }
    t
}

pub fn speedup_table(rows: &[Row]) -> Option<Table> {
    let pairs = [("A1", "A0"), ("A2", "A1"), ("A2", "A0"), ("A2", "may")];
    let find = |m: u8, t: usize, a: &str| {
        rows.iter()
            .find(|r| r.method == m && r.threads == t && r.arch == a)
    };
    let pct = |old: f64, new: f64| format!("{:+.1}", (old / new - 1.0) * 100.0);
    let mut keys: Vec<(u8, usize)> = rows.iter().map(|r| (r.method, r.threads)).collect();
    keys.sort();
    keys.dedup();
    let mut t = table(&[
        "method",
        "threads",
        "new vs old",
        "forward %",
        "backward %",
        "total %",
    ]);
    let mut any = false;
    for (m, th) in keys {
        for (new, old) in pairs {
            if let (Some(n), Some(o)) = (find(m, th, new), find(m, th, old)) {
                any = true;
                t.add_row(vec![
                    m.to_string(),
                    th.to_string(),
                    format!("{new} vs {old}"),
                    pct(o.forward_s, n.forward_s),
                    pct(o.backward_s, n.backward_s),
                    pct(o.total_s, n.total_s),
                ]);
            }
        }
    }
    any.then_some(t)
}

/// One panel per method, log-log (times span three decades), an architecture per line with
/// the same colour in both panels.
pub fn chart(rows: &[Row], size: usize) -> String {
    let mut archs: Vec<&str> = rows.iter().map(|r| r.arch.as_str()).collect();
    archs.sort_by_key(|a| ["A0", "A1", "A2", "may"].iter().position(|k| k == a));
    archs.dedup();
    let mut methods: Vec<u8> = rows.iter().map(|r| r.method).collect();
    methods.sort();
    methods.dedup();
    let panels: Vec<LineChart> = methods
        .iter()
        .map(|&m| {
            let name = if m == 1 { "rows" } else { "tiles" };
            let mut ch = LineChart::new(
                &format!("method {m} ({name})"),
                Axis::new("user threads", "").log(),
                Axis::new("forward + backward time, median", "s").log(),
            );
            ch.legend_title = Some("architecture".into());
            for arch in &archs {
                let pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r.method == m && r.arch == *arch)
                    .map(|r| (r.threads as f64, r.total_s))
                    .collect();
                ch.series(Series::new(arch, pts));
            }
            ch
        })
        .collect();
    let refs: Vec<&dyn Chart> = panels.iter().map(|c| c as &dyn Chart).collect();
    side_by_side(
        &format!("Blocked Gaussian elimination (n = {size}): solve time against user threads"),
        &refs,
        560.0,
        480.0,
    )
}
