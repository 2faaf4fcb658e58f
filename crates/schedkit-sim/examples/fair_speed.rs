//! Events per CPU-second of the `cfs` and `eevdf` models on `schedkit bench sim`'s workloads
//! (1000 always-runnable nice-0 threads on 2, 8 and 64 cores, 10 s simulated, metrics on,
//! tracing off), the two models interleaved in one process so that a shared machine's load
//! falls on both alike. CPU time is the thread's own (`/proc/thread-self/schedstat`), not wall
//! time, for the same reason; each measurement lasts at least 200 ms of it. Issue 19 asks for eevdf at no less than 70 % of cfs.
//!
//! Run: `cargo run --release -p schedkit-sim --example fair_speed -- [ROUNDS] [CORES]`
//! (default 5 rounds, all of 2, 8 and 64 cores); prints one line per round and workload, then
//! the median of the rounds per workload.

use schedkit_core::generate::bench_workloads;
use schedkit_core::scenario::PolicyName;
use schedkit_sim::simulate_report;

/// CPU time of this thread so far, ns (0 where the kernel does not say).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let all = bench_workloads(false, None);
    let pick = |p: PolicyName, cores: usize| {
        all.iter()
            .find(|w| w.policy == p && w.cores == cores && w.name.contains("1000x"))
            .expect("bench workload")
    };
    let only: Option<usize> = std::env::args().nth(2).and_then(|a| a.parse().ok());
    for cores in [2, 8, 64]
        .into_iter()
        .filter(|&c| only.is_none_or(|o| o == c))
    {
        let (c, e) = (pick(PolicyName::Cfs, cores), pick(PolicyName::Eevdf, cores));
        let (cs, es) = (c.scenario(), e.scenario());
        let mut ratios = Vec::new();
        let (mut cr, mut er) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // The kernel updates a running thread's schedstat CPU time only at ticks (4 ms
            // here), so each rate runs the simulation again until 200 ms of CPU time have
            // passed: the granularity then costs at most 2 %.
            let rate = |s| {
                let t0 = cpu_ns();
                let mut events = 0;
                loop {
                    let (_, _, stats) = simulate_report(s, false).expect("workload runs");
                    events += stats.events;
                    let dt = cpu_ns() - t0;
                    if dt >= 200_000_000 {
                        return (events as f64 / dt as f64 * 1e3, stats.events);
                    }
                }
            };
            // FAIR_SPEED_ONLY=eevdf skips the cfs runs (profiling one model).
            let (rc, nc) = if std::env::var("FAIR_SPEED_ONLY").as_deref() == Ok("eevdf") {
                (f64::NAN, 0)
            } else {
                rate(&cs)
            };
            let (re, ne) = rate(&es);
            println!(
                "round {round} {cores} cores: cfs {rc:.3} M events/CPU-s ({nc} events), \
                 eevdf {re:.3} ({ne} events): {:.0} %",
                100.0 * re / rc
            );
            ratios.push(re / rc);
            cr.push(rc);
            er.push(re);
        }
        println!(
            "median {cores} cores: cfs {:.3}, eevdf {:.3} M events/CPU-s; eevdf/cfs per round median {:.0} %",
            median(cr),
            median(er),
            100.0 * median(ratios)
        );
    }
}
