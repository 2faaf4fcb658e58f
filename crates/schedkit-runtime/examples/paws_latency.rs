//! Preemption latency of the PAWS pool: from a job's release to the first instruction of that
//! job when it is dispatched by preempting a running one.
//!
//! Every core is kept busy by a background task with a late deadline (one parallel region of
//! one 40 ms thread per worker every 50 ms); a short task (100 us of work, deadline 1 ms) is
//! released every 2 ms (plus a prime offset, so releases fall at every phase of the
//! background's 10 us preemption checks) and preempts a background thread each time.
//!
//! ```text
//! cargo run --release -p schedkit-runtime --example paws_latency -- [SECONDS] [--no-fifo]
//! ```
//! Prints the count, p50, p99 and maximum latency in microseconds, and the short task's misses.
//! `PAWS_SPIN_US`: the releaser's spin before each release (`RtConfig::release_spin`);
//! `PAWS_STAGES`: the five slowest dispatches stage by stage and the worst short job.

use schedkit_runtime::paws::{self, percentile, Mode, RtConfig, RtPool};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: f64 = args.iter().find_map(|a| a.parse().ok()).unwrap_or(3.0);
    let mut cfg = RtConfig::new(Mode::Paws);
    if args.iter().any(|a| a == "--no-fifo") {
        cfg.fifo_priority = None;
    }
    // `PAWS_SPIN_US`: the releaser's spin before each release (`RtConfig::release_spin`).
    if let Some(us) = std::env::var("PAWS_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.release_spin = Duration::from_micros(us);
    }
    // `PAWS_STAGES`: print the five slowest dispatches stage by stage, with the target
    // thread's CPU time in the reach stage (`RtConfig::stage_cpu_clock`).
    let stages = std::env::var_os("PAWS_STAGES").is_some();
    cfg.stage_cpu_clock = stages;
    let workers = cfg.workers;
    let mut pool = RtPool::new(cfg).expect("pool");
    let start = pool.now() + Duration::from_millis(5);
    pool.periodic_at(
        "background",
        start,
        Duration::from_millis(50),
        Duration::from_millis(50),
        move |job| job.parallel(workers, |_| paws::spin(40_000_000)),
    );
    pool.periodic_at(
        "short",
        start + Duration::from_micros(1_013),
        Duration::from_micros(2_003),
        Duration::from_millis(1),
        |job| job.work(Duration::from_micros(100)),
    );
    let end = start + Duration::from_secs_f64(secs);
    pool.release_until(end);
    std::thread::sleep(end.saturating_sub(pool.now()));
    let r = pool.stop();
    let lat = &r.preemption_latency;
    let us = |v: Option<u64>| v.map_or("-".to_string(), |x| format!("{:.1}", x as f64 / 1e3));
    let short = &r.tasks[1];
    println!(
        "{:<8} {:>12} {:>10} {:>10} {:>10} {:>14}",
        "workers", "preemptions", "p50 us", "p99 us", "max us", "short misses"
    );
    println!(
        "{:<8} {:>12} {:>10} {:>10} {:>10} {:>14}",
        workers,
        lat.len(),
        us(percentile(lat, 50.0)),
        us(percentile(lat, 99.0)),
        us(lat.iter().copied().max()),
        format!("{}/{}", short.misses, short.jobs)
    );
    if stages {
        let mut v: Vec<_> = r.preemption_stages.iter().collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.total()));
        for s in v.iter().take(5) {
            let [timer, request, reach, pick, switch] = s.stages().map(|x| x as f64 / 1e3);
            println!(
                "slow: {:.1} us = timer {timer:.1} + request {request:.1} + reach {reach:.1} + \
                 pick {pick:.1} + switch {switch:.1}; target {}, {:?}, {:?}, target's CPU time \
                 in reach {:?} ns",
                s.total() as f64 / 1e3,
                s.target,
                s.stop,
                s.fiber,
                s.reach_cpu
            );
        }
        let late = r.jobs.iter().filter(|j| j.task == 1 && j.missed()).count();
        if late > 0 {
            let worst = r
                .jobs
                .iter()
                .filter(|j| j.task == 1)
                .max_by_key(|j| j.response())
                .unwrap();
            println!("short task: {late} late; worst: {worst:?}");
        }
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
}
