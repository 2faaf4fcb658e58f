//! Plain fork-join overhead of the PAWS pool against Rayon, side by side in one run: recursive
//! Fibonacci with `join`, on one worker and on all workers, with cutoff 0 (every call forks)
//! and cutoff 10 (calls below n = 10 run sequentially).
//!
//! ```text
//! cargo bench -p schedkit-runtime --bench paws_join
//! ```
//! docs/experiments.md quotes the ratio paws / rayon of the medians.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use schedkit_runtime::paws::{Mode, RtConfig, RtPool};
use std::hint::black_box;

const N: u64 = 22;

mod common;
use common::{fib_paws, fib_rayon, fib_seq};

fn bench(c: &mut Criterion) {
    let all = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut g = c.benchmark_group("fib_join");
    g.sample_size(30);
    for workers in [1, all] {
        let pool = RtPool::new(RtConfig::quiet(Mode::Paws, workers)).unwrap();
        let rpool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .build()
            .unwrap();
        for cutoff in [0u64, 10] {
            let expect = fib_seq(N);
            assert_eq!(pool.install(|| fib_paws(N, cutoff)), expect);
            assert_eq!(rpool.install(|| fib_rayon(N, cutoff)), expect);
            let id = format!("w{workers}_cut{cutoff}");
            g.bench_function(BenchmarkId::new("paws", &id), |b| {
                b.iter(|| pool.install(|| fib_paws(black_box(N), cutoff)))
            });
            g.bench_function(BenchmarkId::new("rayon", &id), |b| {
                b.iter(|| rpool.install(|| fib_rayon(black_box(N), cutoff)))
            });
        }
        drop(pool);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
