//! `schedkit experiment tenants` (seed 004, 5.5): tenant groups at weights 1:1..1:5 and 1:2:3,
//! and a mid-run weight change. Scenarios: `examples/fair/tenants-*.toml`.

use super::measure::{By, CtlChange, Track, TOL};
use super::scenario::{self, Overrides};
use super::*;
use crate::stats::median;
use schedkit_render::chart::{Axis, Chart, LineChart, Series};
use schedkit_render::table::table;

/// What it measured.
#[derive(Clone, Debug)]
pub struct TenantsResult {
    pub setup: Setup,
    /// When `schedkit ctl set-weight` is sent.
    pub change_at: Nanos,
    pub rows: Vec<Row>,
}

/// The weight configurations: all six, or 1:3 and 1:2:3 with `quick`.
pub fn configs(quick: bool) -> Vec<Vec<u64>> {
    if quick {
        vec![vec![1, 3], vec![1, 2, 3]]
    } else {
        scenario::TENANTS.iter().map(|(w, _)| w.to_vec()).collect()
    }
}

/// Runs each weight configuration (simulated under `tenants`, real under `default` and
/// `tenants`), then the weight change (real).
pub fn run(
    o: &FairOptions,
    machine: &dyn Machine,
    prog: &dyn Progress,
) -> Result<TenantsResult, Error> {
    let configs = configs(o.quick);
    let s = setup(
        o,
        scenario::tenants_file(&configs[0])?
            .parse()?
            .policy()
            .period(),
    )?;
    let exe = machine.helper_exe()?;
    let sim = [PolicyName::Tenants];
    let real = [PolicyName::Default, PolicyName::Tenants];
    let per_real = if s.real { real.len() * s.repeat } else { 0 };
    prog.start((configs.len() * (sim.len() + per_real) + if s.real { s.repeat } else { 0 }) as u64);
    let base = Overrides {
        policy: PolicyName::Default,
        period: Some(s.period),
        cores: None,
        horizon: s.horizon,
        nice: s.nice,
        plans: &[],
        exe: &exe,
    };
    let build_for = |weights: &[u64]| -> Result<_, Error> {
        let file = scenario::tenants_file(weights)?;
        let base = &base;
        Ok(move |p, cores| scenario::load(&file, &base.with(p, cores)))
    };
    let mut rows = Vec::new();
    for w in &configs {
        let name = w
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(":");
        let b = build_for(w)?;
        rows.extend(run_rows(
            &s,
            Config {
                name: &name,
                sim: &sim,
                real: &real,
                build: &b,
                by: By::Group,
                track: None,
                ctl: None,
                perf: false,
            },
            machine,
            prog,
        )?);
    }
    // The weight change: 1:1, then vm2 set to 3 by a real `schedkit ctl` at mid-run.
    let change_at = Nanos(s.horizon.0 / 2);
    let b = build_for(&[1, 1])?;
    let change = CtlChange {
        at: change_at,
        group: "vm2".into(),
        weight: 3,
    };
    let track = Track {
        entity: 1,
        change: change_at,
        target: 0.75,
    };
    rows.extend(run_rows(
        &s,
        Config {
            name: "change",
            sim: &[],
            real: &[PolicyName::Tenants],
            build: &b,
            by: By::Group,
            track: Some(track),
            ctl: Some(change),
            perf: false,
        },
        machine,
        prog,
    )?);
    prog.finish();
    Ok(TenantsResult {
        setup: s,
        change_at,
        rows,
    })
}

/// `tenants.json`.
pub fn json(r: &TenantsResult) -> serde_json::Value {
    json_doc(
        "tenants",
        &r.setup,
        &r.rows,
        serde_json::json!({
            "tolerance_pp": TOL * 100.0, "change_at_s": r.change_at.0 as f64 / 1e9,
        }),
    )
}

/// The tables and the targets, as printed: the shares per weight configuration, the weight
/// change's recovery, then the targets met or not.
pub fn text(r: &TenantsResult) -> String {
    let (s, rows) = (&r.setup, &r.rows);
    let mut out = shares_text(s, rows);
    let (change, met) = change_text(s, rows, r.change_at);
    out.push_str(&change);
    out.push_str(&targets_text(rows, met));
    out
}

/// The weights of a configuration (`"1:3"`: 1 and 3) and their sum.
fn weights(config: &str) -> (Vec<u64>, u64) {
    let ws: Vec<u64> = config.split(':').filter_map(|x| x.parse().ok()).collect();
    let sum = ws.iter().sum();
    (ws, sum)
}

/// Per cell of `r`, how far (points) the group farthest from its weight's fraction is.
fn largest_dev(r: &Row) -> Vec<f64> {
    let (ws, sum) = weights(&r.config);
    r.col(|x| {
        x.norm_share
            .iter()
            .zip(&ws)
            .map(|(s, w)| (s - *w as f64 / sum as f64).abs() * 100.0)
            .fold(0.0, f64::max)
    })
}

/// The heading and the table of shares per weight configuration.
fn shares_text(s: &Setup, rows: &[Row]) -> String {
    let mut out = String::new();
    outln!(
        out,
        "Tenants (seed 004, 5.5, Figs. 5.7-5.8): groups of one process with 6 busy threads, {} s, {} real CPU(s) / 2 simulated \
         cores, period {} ms; real: mean ± 95 % CI over {} repeat(s); share = % of the job's CPU time\n",
        s.horizon.0 as f64 / 1e9,
        s.cores_real,
        s.period.0 / 1_000_000,
        s.repeat
    );
    out.push_str(&nice_note(s));
    let mut t = table(&[
        "weights",
        "engine policy",
        "vm1 %",
        "vm2 %",
        "vm3 %",
        "weight fractions %",
        "largest |dev| pp",
        "job % of machine",
    ]);
    for r in rows
        .iter()
        .filter(|r| r.config != "change" && !r.cells.is_empty())
    {
        let n = r.cells[0].share.len();
        let mut row = vec![r.config.clone(), r.label()];
        for k in 0..3 {
            row.push(if k < n {
                fmt_ci(&r.col(|x| x.norm_share[k] * 100.0), 2)
            } else {
                "-".into()
            });
        }
        let (ws, sum) = weights(&r.config);
        row.push(
            ws.iter()
                .map(|w| format!("{:.1}", *w as f64 / sum as f64 * 100.0))
                .collect::<Vec<_>>()
                .join(" / "),
        );
        row.push(fmt_ci(&largest_dev(r), 2));
        row.push(fmt_ci(&r.col(|x| x.job_share * 100.0), 1));
        t.add_row(row);
    }
    outln!(out, "{t}");
    outp!(out, "{}", unavailable_lines(rows));
    out
}

/// Whether the weight change was met (the median recovery within two periods), the median
/// recovery and the median time to first within the band, in seconds.
type Met = (bool, f64, f64);

/// The weight change's table (or why there is none), and the last change row's [`Met`].
fn change_text(s: &Setup, rows: &[Row], change_at: Nanos) -> (String, Option<Met>) {
    let mut out = String::new();
    outln!(
        out,
        "\nWeight change: vm1:vm2 = 1:1, then `schedkit ctl set-weight vm2 3` (a separate process) at {:.1} s; \
         times from the client's start until vm2's share over 200 ms windows (each starting at its instant) is first within {:.0} points \
         of 75 %, and until it is and stays there for 1 s",
        change_at.0 as f64 / 1e9,
        TOL * 100.0
    );
    let mut t = table(&[
        "engine policy",
        "applied after s",
        "first within 2 pp s",
        "within 2 pp for good s",
        "two periods s",
    ]);
    let mut met = None;
    for r in rows
        .iter()
        .filter(|r| r.config == "change" && !r.cells.is_empty())
    {
        let rec: Vec<Option<f64>> = r.cells.iter().map(|x| x.recovery_s.flatten()).collect();
        let rec_s = recovery_text(rec.clone());
        let applied: Vec<f64> = r.cells.iter().filter_map(|x| x.applied_after_s).collect();
        t.add_row(vec![
            r.label(),
            if applied.is_empty() {
                "not recorded".into()
            } else {
                fmt_ci(&applied, 3)
            },
            recovery_text(
                r.cells
                    .iter()
                    .map(|x| x.first_in_band_s.flatten())
                    .collect(),
            ),
            rec_s,
            format!("{:.3}", 2.0 * s.period.0 as f64 / 1e9),
        ]);
        let med = median(
            &rec.iter()
                .map(|x| x.unwrap_or(f64::INFINITY))
                .collect::<Vec<_>>(),
        );
        let first = median(
            &r.cells
                .iter()
                .map(|x| x.first_in_band_s.flatten().unwrap_or(f64::INFINITY))
                .collect::<Vec<_>>(),
        );
        met = Some((med <= 2.0 * s.period.0 as f64 / 1e9, med, first));
    }
    if met.is_none() {
        outln!(
            out,
            "no rows: {}",
            if s.real {
                "the weight change did not run (tenants not available in the real engine)"
            } else {
                "the weight change runs on real cores only (a `schedkit ctl` client sends it); --sim-only skipped it"
            }
        );
    } else {
        outln!(out, "{t}");
    }
    (out, met)
}

/// The targets: shares within 2 points of the weights' fractions, the change recovered
/// within two periods.
fn targets_text(rows: &[Row], met: Option<Met>) -> String {
    let mut out = String::new();
    outln!(out, "\nTargets (medians of the real runs):");
    match rows
        .iter()
        .filter(|r| {
            r.engine == "real"
                && r.policy == "tenants"
                && r.config != "change"
                && !r.cells.is_empty()
        })
        .map(|r| median(&largest_dev(r)))
        .reduce(f64::max)
    {
        Some(d) => outln!(
            out,
            "  tenants: every group within 2 pp of its weight's fraction: {} (largest {d:.2} pp)",
            ok_word(d <= 2.0)
        ),
        None => outln!(
            out,
            "  tenants: not measured (not available in the real engine, or --sim-only)"
        ),
    }
    match met {
        Some((m, v, first)) => outln!(
            out,
            "  tenants: new share within two periods of the change (and kept 1 s): {} ({v:.3} s; first within 2 pp after {first:.3} s)",
            ok_word(m)
        ),
        None => outln!(
            out,
            "  tenants: weight change not measured (tenants or `schedkit ctl` not available, or --sim-only)"
        ),
    }
    out
}

/// `tenants-shares.svg` and `tenants-change.svg`.
pub fn charts(r: &TenantsResult) -> Vec<(&'static str, String)> {
    let rows = &r.rows;
    // Figs. 5.7-5.8: each group's share beside its weight's fraction (the black tick), one
    // bar group per (configuration, group), one bar per engine and policy.
    let done: Vec<&Row> = rows
        .iter()
        .filter(|r| r.config != "change" && !r.cells.is_empty())
        .collect();
    let mut configs: Vec<String> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for r in &done {
        if !configs.contains(&r.config) {
            configs.push(r.config.clone());
        }
        if !labels.contains(&r.label()) {
            labels.push(r.label());
        }
    }
    let mut cats = Vec::new();
    let mut ideal = Vec::new();
    for c in &configs {
        let ws: Vec<u64> = c.split(':').filter_map(|x| x.parse().ok()).collect();
        let sum: u64 = ws.iter().sum();
        for (k, w) in ws.iter().enumerate() {
            cats.push(format!("{c} vm{}", k + 1));
            ideal.push(*w as f64 / sum as f64 * 100.0);
        }
    }
    let mut bc = rows_chart(
        "Tenants: each group's CPU share beside its weight's fraction",
        "weights and group",
        Axis::new("group's share of the job's CPU time", "%"),
        cats,
        &done,
        &r.setup,
    );
    for l in &labels {
        let mut stats = Vec::new();
        for c in &configs {
            let row = done.iter().find(|r| &r.config == c && &r.label() == l);
            let n = c.split(':').count();
            for k in 0..n {
                stats
                    .push(row.map_or((0.0, 0.0), |r| mean_ci(&r.col(|x| x.norm_share[k] * 100.0))));
            }
        }
        bc.series(bars(l, &stats));
    }
    bc.reference("weight fraction", ideal);
    let shares = bc.to_svg(1300.0, 560.0);
    let mut lc = LineChart::new(
        "Tenants: vm2's weight goes from 1 to 3 mid-run (schedkit ctl); vm2's share in 200 ms windows",
        Axis::new("time since start", "s"),
        Axis::new("vm2's share of the job's CPU time", "%"),
    );
    lc.legend_title = Some("engine, policy, run".into());
    for r in rows
        .iter()
        .filter(|r| r.config == "change" && !r.cells.is_empty())
    {
        for (i, x) in r.cells.iter().enumerate() {
            lc.series(Series::new(
                &format!("{} run {}", r.label(), i + 1),
                x.timeline.clone(),
            ));
        }
    }
    lc.no_data = Some(if r.setup.real {
        "the weight change did not run (tenants not available in the real engine)".into()
    } else {
        "the weight change runs on real cores only (a `schedkit ctl` client sends it); --sim-only skipped it".into()
    });
    vec![
        ("tenants-shares.svg", shares),
        ("tenants-change.svg", lc.to_svg(1000.0, 480.0)),
    ]
}
