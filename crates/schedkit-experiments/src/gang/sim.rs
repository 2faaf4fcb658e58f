//! Parts (b) and (c): gang scheduling in the simulator, on a 64-node cluster with seed 002's
//! switch-overhead model, and at scale.

use super::{process, scenario};
use crate::progress::Progress;
use rand::{Rng, SeedableRng};
use schedkit_core::controllers::gang::{ClusterOverhead, Gang};
use schedkit_core::gang_overhead::{OverheadModel, Pattern};
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, PolicySpec, Work};
use schedkit_core::Nanos;
use schedkit_sim::policies::gang::GangDispatch;
use schedkit_sim::Engine;
use serde::Serialize;
use std::time::Instant;

/// Nodes of the simulated cluster of part (b).
pub const NODES: usize = 64;
/// CPU time of every thread of part (b)'s two jobs.
pub const BURST: Nanos = Nanos::from_secs(20);

/// Part (b): makespan of two full-width jobs on `nodes` nodes under gang with the overhead
/// model (or free switches).
struct SimPoint {
    makespan: Nanos,
    switches: u64,
    context_fraction: f64,
    switch_ms: f64,
}

/// One (slice, pattern) point of part (b).
#[derive(Clone, Debug, Serialize)]
pub struct SimRow {
    pub slice_ms: u64,
    pub pattern: &'static str,
    pub switch_ms: f64,
    pub switches: u64,
    pub slowdown_pct: f64,
    pub context_fraction: f64,
    pub makespan_ns: u64,
    pub makespan_free_ns: u64,
}

/// Part (b)'s rows, slice by slice, patterns in [`Pattern::ALL`] order.
#[derive(Clone, Debug)]
pub struct SimPart {
    pub rows: Vec<SimRow>,
}

/// Part (c): the scale row.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleRow {
    pub nodes: usize,
    pub cores: usize,
    pub jobs: usize,
    pub threads: usize,
    pub wall_s: f64,
    #[serde(rename = "simulated_s")]
    pub sim_s: f64,
    pub events: u64,
    pub switches: u64,
    #[serde(rename = "max_slots")]
    pub max_rows: usize,
}

fn sim_cluster(
    nodes: usize,
    cpn: usize,
    slice: Nanos,
    pattern: Option<Pattern>,
    burst: Nanos,
) -> SimPoint {
    let cores = nodes * cpn;
    let spec = PolicySpec::new(PolicyName::Gang).with_quantum(slice);
    let procs = ["job-1", "job-2"]
        .iter()
        .map(|n| process(n, cores as u32, Some(burst), Nanos::ZERO, Work::Spin))
        .collect();
    let sc = scenario(cores, spec, Nanos::from_secs(3600), procs)
        .expect("the cluster's gang scenario is valid (cores and slice positive)");
    let mut ctl = Gang::new(slice, cores);
    if let Some(p) = pattern {
        ctl = ctl.with_overhead(ClusterOverhead {
            model: OverheadModel::default(),
            cores_per_node: cpn,
            pattern: p,
        });
    }
    let stats = ctl.stats();
    let mut metrics = Metrics::new(&sc, "sim", cores);
    let st = Engine::new(
        &sc,
        Box::new(GangDispatch::new(cores)),
        Some(Box::new(ctl)),
        &mut metrics,
    )
    .run();
    let s = stats.lock().expect("stats").clone();
    SimPoint {
        makespan: st.end,
        switches: s.switches,
        context_fraction: s.cost.context_fraction(),
        switch_ms: if s.switches > 0 {
            s.cost.total().as_ms_f64() / s.switches as f64
        } else {
            0.0
        },
    }
}

/// Part (b): per slice, the free-switch run and one run per communication pattern.
pub fn cluster_sweep(slices: &[u64], progress: &dyn Progress) -> SimPart {
    let mut rows = Vec::new();
    for &s in slices {
        progress.message(&format!("sim {s} ms"));
        let slice = Nanos::from_ms(s);
        let free = sim_cluster(NODES, 1, slice, None, BURST);
        progress.step();
        for p in Pattern::ALL.iter() {
            let pt = sim_cluster(NODES, 1, slice, Some(*p), BURST);
            progress.step();
            rows.push(SimRow {
                slice_ms: s,
                pattern: p.as_str(),
                switch_ms: pt.switch_ms,
                switches: pt.switches,
                slowdown_pct: 100.0 * (pt.makespan.0 as f64 / free.makespan.0 as f64 - 1.0),
                context_fraction: pt.context_fraction,
                makespan_ns: pt.makespan.0,
                makespan_free_ns: free.makespan.0,
            });
        }
    }
    SimPart { rows }
}

/// Part (c): `jobs` jobs of random widths on `nodes` nodes of `cpn` cores; the simulator's
/// wall time for the whole run.
pub fn scale(nodes: usize, cpn: usize, jobs: usize) -> ScaleRow {
    let cores = nodes * cpn;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    let mut procs = Vec::new();
    let mut threads = 0;
    for j in 0..jobs {
        // Widths in whole nodes, from one node to the whole cluster (log-uniform, as job
        // sizes on real clusters are), bursts 0.5-5 s, arrivals over the first 10 s.
        let exp = rng.gen_range(0.0..(nodes as f64).log2());
        let w = (2f64.powf(exp).round() as usize).clamp(1, nodes) * cpn;
        threads += w;
        procs.push(process(
            &format!("j{j}"),
            w as u32,
            Some(Nanos::from_ms(rng.gen_range(500..5000))),
            Nanos::from_ms(rng.gen_range(0..10_000)),
            Work::Spin,
        ));
    }
    let spec = PolicySpec::new(PolicyName::Gang);
    let sc = scenario(cores, spec.clone(), Nanos::from_secs(36_000), procs)
        .expect("the scale gang scenario is valid (cores positive)");
    let ctl = Gang::new(spec.quantum(), cores).with_overhead(ClusterOverhead {
        model: OverheadModel::default(),
        cores_per_node: cpn,
        pattern: Pattern::Neighbour,
    });
    let stats = ctl.stats();
    let t0 = Instant::now();
    let mut metrics = Metrics::new(&sc, "sim", cores);
    let st = Engine::new(
        &sc,
        Box::new(GangDispatch::new(cores)),
        Some(Box::new(ctl)),
        &mut metrics,
    )
    .run();
    let report = metrics.finish(st.end);
    let wall_s = t0.elapsed().as_secs_f64();
    assert!(report.threads.iter().all(|t| t.finish_ns.is_some()));
    let s = stats.lock().expect("stats").clone();
    ScaleRow {
        nodes,
        cores,
        jobs,
        threads,
        wall_s,
        sim_s: st.end.as_secs_f64(),
        events: st.events,
        switches: s.switches,
        max_rows: s.max_rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_slows_the_cluster_down_and_short_slices_more() {
        let part = cluster_sweep(&[10, 1000], &crate::progress::Silent);
        assert_eq!(part.rows.len(), 2 * Pattern::ALL.len());
        for r in &part.rows {
            assert!(r.slowdown_pct >= 0.0, "{r:?}");
            assert!(r.makespan_ns >= r.makespan_free_ns);
        }
        let short: f64 = part.rows[..Pattern::ALL.len()]
            .iter()
            .map(|r| r.slowdown_pct)
            .sum();
        let long: f64 = part.rows[Pattern::ALL.len()..]
            .iter()
            .map(|r| r.slowdown_pct)
            .sum();
        assert!(short > long, "short {short} long {long}");
    }

    #[test]
    fn every_scaled_job_finishes() {
        let r = scale(16, 4, 20);
        assert_eq!((r.nodes, r.cores, r.jobs), (16, 64, 20));
        assert!(r.switches > 0 && r.events > 0);
    }
}
