//! Criterion benchmarks of the simulator, on the same workloads as `schedkit bench sim`
//! (built by `schedkit_core::generate::bench_workloads`, with `--quick` horizons so one
//! iteration stays short): throughput in simulated events per second (RR, CFS) or real-time
//! jobs per second (global EDF), single-threaded, metrics on, tracing off.
//!
//! Run: `cargo bench -p schedkit-sim --bench sim` (add a filter, e.g. `-- gedf`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use schedkit_core::generate::bench_workloads;
use schedkit_sim::policies::SIM_POLICIES;
use schedkit_sim::simulate_report;
use std::time::Duration;

fn sim(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for w in bench_workloads(true, None) {
        if !SIM_POLICIES.contains(&w.policy) {
            eprintln!(
                "skipping {}: policy {} not in the simulator",
                w.name, w.policy
            );
            continue;
        }
        let scenario = w.scenario();
        // One run to learn how many events / jobs an iteration simulates.
        let (_, _, stats) = simulate_report(&scenario, false).expect("workload runs");
        let n = if w.unit == "jobs" {
            stats.jobs
        } else {
            stats.events
        };
        group.throughput(Throughput::Elements(n));
        group.bench_function(format!("{} ({}/s)", w.name, w.unit), |b| {
            b.iter(|| simulate_report(&scenario, false).expect("workload runs"))
        });
    }
    group.finish();
}

criterion_group!(benches, sim);
criterion_main!(benches);
