//! The runtime against its peers, every comparison interleaved round by round in one process
//! (`common/ab.rs`): PAWS fork-join against Rayon (time per join), the FCFS pool against rayon's
//! `spawn` and the `threadpool` crate (queue cost with the workers awake, wake-up cost of a
//! parked worker, and a 10,000-task batch), fiber ping-pong and spawn + join under A2, A1, A0
//! and `may`, ping-pong across two scheduler threads (A2 against A1), and a ring of 7936 fibers.
//! Where a side pins its workers, its peer pins the same way: each case runs with both sides
//! pinned (worker i on the i-th allowed CPU) and with neither pinned.
//!
//! ```text
//! cargo bench -p schedkit-runtime --bench peers [-- FILTER] [--samples N] [--json PATH] [--label TEXT]
//! ```
//! `scripts/bench-runtime.sh` runs it on a quiet machine and beside two CPU hogs and writes
//! docs/results/runtime.md. Without `--bench` (`cargo test --benches`) every case runs one
//! small round.

use std::hint::black_box;
use std::time::Instant;

use schedkit_runtime::paws::{Mode, RtConfig, RtPool};

mod common;
use common::ab::{self, compare, Opts, Side};
use common::{fib_paws, fib_rayon, fib_seq};

#[path = "peers/fibers.rs"]
mod fibers;
#[path = "peers/pool.rs"]
mod pool;

/// Joins that `fib(n)` with `cutoff` makes (one per call above the cutoff and above 1).
fn joins(n: u64, cutoff: u64) -> u64 {
    if n < 2 || n <= cutoff {
        0
    } else {
        1 + joins(n - 1, cutoff) + joins(n - 2, cutoff)
    }
}

/// Both pins of every case: `true` pins worker i of each side to the i-th allowed CPU.
pub const PINS: [(bool, &str); 2] = [(true, "pinned"), (false, "unpinned")];

/// The machine's CPUs this process may use, at least 1.
pub fn all_workers() -> usize {
    ab::allowed_cpus().len().max(1)
}

/// Rayon's pool; with `pin`, worker i on the (`first` + i)-th allowed CPU.
fn rayon_pool(workers: usize, pin: Option<usize>) -> rayon::ThreadPool {
    let mut b = rayon::ThreadPoolBuilder::new().num_threads(workers);
    if let Some(first) = pin {
        b = b.start_handler(move |i| ab::pin_to_nth(first + i));
    }
    b.build().unwrap()
}

/// fib(N) with `join`, PAWS against Rayon, one and all workers, cutoff 0 (every call forks)
/// and 10 (the leaves below n = 10 run sequentially): the time per join.
fn fork_join(o: &Opts) {
    let n: u64 = if o.smoke { 12 } else { 22 };
    let mut counts = vec![1];
    if all_workers() > 1 {
        counts.push(all_workers());
    }
    for (pin, pin_name) in PINS {
        for &workers in &counts {
            let mut cfg = RtConfig::quiet(Mode::Paws, workers);
            cfg.pin = pin;
            let pool = RtPool::new(cfg).unwrap();
            let rp = rayon_pool(workers, pin.then_some(0));
            for cutoff in [0u64, 10] {
                let expect = fib_seq(n);
                assert_eq!(pool.install(|| fib_paws(n, cutoff)), expect);
                assert_eq!(rp.install(|| fib_rayon(n, cutoff)), expect);
                let reps = ab::reps_for(o, || {
                    black_box(pool.install(|| fib_paws(black_box(n), cutoff)));
                });
                let ops = joins(n, cutoff) * reps;
                let case = format!("fib{n}_cut{cutoff}_w{workers}_{pin_name}");
                compare(
                    o,
                    "fork_join",
                    &case,
                    "join",
                    workers,
                    vec![
                        Side::new("paws", || {
                            let t = Instant::now();
                            for _ in 0..reps {
                                black_box(pool.install(|| fib_paws(black_box(n), cutoff)));
                            }
                            (t.elapsed(), ops)
                        }),
                        Side::new("rayon", || {
                            let t = Instant::now();
                            for _ in 0..reps {
                                black_box(rp.install(|| fib_rayon(black_box(n), cutoff)));
                            }
                            (t.elapsed(), ops)
                        }),
                    ],
                );
            }
        }
    }
}

fn main() {
    let o = Opts::from_args();
    // Read the process's CPUs before any case pins a thread.
    let _ = ab::allowed_cpus();
    println!(
        "schedkit-runtime peers: {} round(s) per case{}; load average {}",
        o.samples,
        if o.smoke { " (smoke: small sizes)" } else { "" },
        ab::loadavg()
    );
    fork_join(&o);
    pool::bench(&o);
    fibers::bench(&o);
}
