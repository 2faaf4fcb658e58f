//! Tasks per second through the FCFS pool's two queues (seed 000's mutex queue and the
//! lock-free one), side by side with two peers from crates.io in the same run: rayon's
//! `ThreadPool::spawn` and the `threadpool` crate. Every pool has the same number of
//! workers (the machine's CPUs, unpinned, SCHED_OTHER, so the comparison is about queues),
//! and every batch is N tiny tasks submitted from one thread, then waited for.
//!
//! `cargo bench -p schedkit-runtime --bench pool`; docs/experiments.md quotes the ratios.

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use schedkit_runtime::{Pool, PoolConfig, QueueKind};

const TASKS: usize = 10_000;

fn wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Acquire) < n {
        std::thread::yield_now();
    }
}

fn task(counter: &AtomicUsize) {
    black_box(counter.fetch_add(1, Release));
}

fn bench(c: &mut Criterion) {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut g = c.benchmark_group("pool_tasks");
    g.throughput(Throughput::Elements(TASKS as u64));
    g.sample_size(30);

    for (name, kind) in [
        ("schedkit-mutex", QueueKind::Mutex),
        ("schedkit-lockfree", QueueKind::LockFree),
    ] {
        let mut cfg = PoolConfig::new(kind);
        cfg.workers = workers;
        let pool = Pool::new(cfg).unwrap();
        g.bench_function(BenchmarkId::new(name, TASKS), |b| {
            b.iter(|| {
                let n = Arc::new(AtomicUsize::new(0));
                for _ in 0..TASKS {
                    let n = n.clone();
                    pool.execute(move || task(&n));
                }
                wait_for(&n, TASKS);
            })
        });
    }

    let rayon_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .unwrap();
    g.bench_function(BenchmarkId::new("rayon-spawn", TASKS), |b| {
        b.iter(|| {
            let n = Arc::new(AtomicUsize::new(0));
            for _ in 0..TASKS {
                let n = n.clone();
                rayon_pool.spawn(move || task(&n));
            }
            wait_for(&n, TASKS);
        })
    });

    let tp = threadpool::ThreadPool::new(workers);
    g.bench_function(BenchmarkId::new("threadpool", TASKS), |b| {
        b.iter(|| {
            let n = Arc::new(AtomicUsize::new(0));
            for _ in 0..TASKS {
                let n = n.clone();
                tp.execute(move || task(&n));
            }
            wait_for(&n, TASKS);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
