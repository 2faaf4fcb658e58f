//! Plain fork-join cost against Rayon, interleaved: paws and rayon runs alternate so both see
//! the same machine noise; prints the median time of each and their ratio.
//!
//! ```text
//! cargo run --release -p schedkit-runtime --example paws_fib_ab -- [N] [ROUNDS]
//! ```
//! With `PAWS_GAP_US=g` the program sleeps g us before each run, so both pools start cold
//! (workers asleep) instead of right after the other pool's run.

use schedkit_runtime::paws::{Mode, RtConfig, RtPool};
use std::hint::black_box;
use std::time::Instant;

#[path = "../benches/common/mod.rs"]
mod common;
use common::{fib_paws, fib_rayon};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(25);
    let rounds = args.get(1).copied().unwrap_or(31) as usize;
    let all = std::thread::available_parallelism()
        .map(|x| x.get())
        .unwrap_or(1);
    println!(
        "{:<8} {:>7} {:>12} {:>12} {:>12}",
        "workers", "cutoff", "paws ms", "rayon ms", "paws/rayon"
    );
    for workers in [1, all] {
        // Unpinned, like Rayon's threads, so both compete for the same CPUs the same way.
        let mut cfg = RtConfig::quiet(Mode::Paws, workers);
        cfg.pin = std::env::var_os("PAWS_PIN").is_some();
        let pool = RtPool::new(cfg).unwrap();
        let rp = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .build()
            .unwrap();
        for cutoff in [0u64, 10] {
            let (mut p, mut r) = (Vec::new(), Vec::new());
            let gap = std::env::var("PAWS_GAP_US")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(std::time::Duration::from_micros);
            for _ in 0..rounds {
                if let Some(g) = gap {
                    std::thread::sleep(g);
                }
                let t = Instant::now();
                black_box(pool.install(|| fib_paws(black_box(n), cutoff)));
                p.push(t.elapsed().as_secs_f64() * 1e3);
                let t = Instant::now();
                black_box(rp.install(|| fib_rayon(black_box(n), cutoff)));
                r.push(t.elapsed().as_secs_f64() * 1e3);
                if let Some(g) = gap {
                    std::thread::sleep(g);
                }
            }
            let (pm, rm) = (median(&mut p), median(&mut r));
            println!(
                "{:<8} {:>7} {:>12.3} {:>12.3} {:>12.2}",
                workers,
                cutoff,
                pm,
                rm,
                pm / rm
            );
        }
    }
}
