//! Fiber micro-benchmarks (issue 4, item 4), all in one run so the ratios hold: event
//! ping-pong round trip between two user threads on one scheduler thread and on two, a ring of 7936 user
//! threads passing a token (time per hop), and spawn + join, under A0 (OS threads with
//! parking_lot), A1, A2 and the `may` crate's coroutines.
//!
//! `cargo bench -p schedkit-runtime --bench fibers`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use schedkit_runtime::{spawn, Arch, Config, Event, EventKind, Runtime};

const RING: usize = 7936;

fn runtime(arch: Arch, workers: usize) -> Runtime {
    let mut c = Config::new(arch);
    c.workers = workers;
    Runtime::new(c).unwrap()
}

/// The ring's runtime: 16 KiB stacks with a 4 KiB guard (a ring fiber needs well under 4 KiB),
/// so 7936 stacks span 155 MiB of address space instead of 620 MiB and their page-table
/// entries share cache lines. `may` runs every benchmark with 16 KiB stacks too.
fn ring_runtime(arch: Arch) -> Runtime {
    let mut c = Config::new(arch);
    c.workers = 1;
    c.stack_size = 16 * 1024;
    c.guard_size = 4 * 1024;
    Runtime::new(c).unwrap()
}

/// `iters` round trips between two user threads through two auto-reset events; with
/// `two_sts` the two fibers are bound to scheduler threads 0 and 1, so every hop crosses STs.
fn pingpong(rt: &Runtime, iters: u64, two_sts: bool) -> Duration {
    let h = rt.handle();
    let spawn_at = |st: usize, f: Box<dyn FnOnce() -> Duration + Send>| {
        if two_sts {
            h.spawn_on(st, f)
        } else {
            h.spawn(f)
        }
    };
    let ping = Arc::new(Event::new(rt.handle(), EventKind::AutoReset, false));
    let pong = Arc::new(Event::new(rt.handle(), EventKind::AutoReset, false));
    let (a, b) = (ping.clone(), pong.clone());
    let echo = spawn_at(
        1,
        Box::new(move || {
            for _ in 0..iters {
                a.wait();
                b.set();
            }
            Duration::ZERO
        }),
    );
    let driver = spawn_at(
        0,
        Box::new(move || {
            let t0 = Instant::now();
            for _ in 0..iters {
                ping.set();
                pong.wait();
            }
            t0.elapsed()
        }),
    );
    let d = driver.join().unwrap();
    echo.join().unwrap();
    d
}

fn may_pingpong(iters: u64) -> Duration {
    use may::sync::Semphore;
    let ping = Arc::new(Semphore::new(0));
    let pong = Arc::new(Semphore::new(0));
    let (a, b) = (ping.clone(), pong.clone());
    let echo = unsafe {
        may::coroutine::spawn(move || {
            for _ in 0..iters {
                a.wait();
                b.post();
            }
        })
    };
    let driver = unsafe {
        may::coroutine::spawn(move || {
            let t0 = Instant::now();
            for _ in 0..iters {
                ping.post();
                pong.wait();
            }
            t0.elapsed()
        })
    };
    let d = driver.join().unwrap();
    echo.join().unwrap();
    d
}

/// A ring of RING user threads, each waiting on its own auto-reset event and setting the
/// next; the token goes round `laps` times. Returns the time per hop.
fn ring(rt: &Runtime, laps: usize) -> Duration {
    let evs: Arc<Vec<Event>> = Arc::new(
        (0..RING)
            .map(|_| Event::new(rt.handle(), EventKind::AutoReset, false))
            .collect(),
    );
    let hs: Vec<_> = (0..RING)
        .map(|i| {
            let evs = evs.clone();
            rt.spawn(move || {
                for _ in 0..laps {
                    evs[i].wait();
                    evs[(i + 1) % RING].set();
                }
                Instant::now()
            })
        })
        .collect();
    // Let every user thread reach its first wait, then time the token.
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    evs[0].set();
    // The clock stops at the last hop, not when the last fiber has been joined: per hop,
    // not per hop plus a share of 7936 thread exits (the same for `may` below).
    let last = hs.into_iter().map(|h| h.join().unwrap()).max().unwrap();
    (last - t0) / (RING * laps) as u32
}

fn may_ring(laps: usize) -> Duration {
    use may::sync::Semphore;
    let evs: Arc<Vec<Semphore>> = Arc::new((0..RING).map(|_| Semphore::new(0)).collect());
    let hs: Vec<_> = (0..RING)
        .map(|i| {
            let evs = evs.clone();
            unsafe {
                may::coroutine::spawn(move || {
                    for _ in 0..laps {
                        evs[i].wait();
                        evs[(i + 1) % RING].post();
                    }
                    Instant::now()
                })
            }
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    evs[0].post();
    let last = hs.into_iter().map(|h| h.join().unwrap()).max().unwrap();
    (last - t0) / (RING * laps) as u32
}

fn bench(c: &mut Criterion) {
    // may counts its stack size in words: 2048 words = 16 KiB, as the ring's fibers get.
    may::config().set_workers(1).set_stack_size(2 * 1024);
    let mut g = c.benchmark_group("event_pingpong_one_st");
    g.sample_size(10);
    for arch in [Arch::A0, Arch::A1, Arch::A2] {
        let rt = runtime(arch, 1);
        g.bench_function(BenchmarkId::from_parameter(arch), |b| {
            b.iter_custom(|iters| pingpong(&rt, iters, false))
        });
    }
    g.bench_function(BenchmarkId::from_parameter("may"), |b| {
        b.iter_custom(may_pingpong)
    });
    g.finish();

    // The same round trip with the two fibers on two scheduler threads (A0: two OS threads,
    // as above, for reference).
    let mut g = c.benchmark_group("event_pingpong_two_sts");
    g.sample_size(10);
    for arch in [Arch::A1, Arch::A2] {
        let rt = runtime(arch, 2);
        g.bench_function(BenchmarkId::from_parameter(arch), |b| {
            b.iter_custom(|iters| pingpong(&rt, iters, true))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("ring_7936_per_hop");
    g.sample_size(10);
    for arch in [Arch::A1, Arch::A2] {
        let rt = ring_runtime(arch);
        g.bench_function(BenchmarkId::from_parameter(arch), |b| {
            b.iter_custom(|iters| ring(&rt, 4) * iters as u32)
        });
    }
    g.bench_function(BenchmarkId::from_parameter("may"), |b| {
        b.iter_custom(|iters| may_ring(4) * iters as u32)
    });
    g.finish();

    let mut g = c.benchmark_group("spawn_join");
    g.sample_size(10);
    for arch in [Arch::A1, Arch::A2] {
        let rt = runtime(arch, 1);
        g.bench_function(BenchmarkId::from_parameter(arch), |b| {
            b.iter_custom(|iters| {
                rt.spawn(move || {
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        spawn(|| 1u8).join().unwrap();
                    }
                    t0.elapsed()
                })
                .join()
                .unwrap()
            })
        });
    }
    g.bench_function(BenchmarkId::from_parameter("may"), |b| {
        b.iter_custom(|iters| {
            unsafe {
                may::coroutine::spawn(move || {
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        may::coroutine::spawn(|| 1u8).join().unwrap();
                    }
                    t0.elapsed()
                })
            }
            .join()
            .unwrap()
        })
    });
    g.bench_function(BenchmarkId::from_parameter("std-thread"), |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                std::thread::spawn(|| 1u8).join().unwrap();
            }
            t0.elapsed()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
