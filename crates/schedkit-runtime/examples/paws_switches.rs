//! Where the PAWS pool's context switches come from, on the task sets of `schedkit experiment
//! paws` (same generator, same seeds: set `s` of window `w` is seeded `1 + 1000 w + s`), with
//! SCHED_DEADLINE's count for the same set beside it.
//!
//! ```text
//! sudo ./target/release/examples/paws_switches [WINDOW 0-3] [SETS] [DURATION_MS] [MODE]
//! ```
//!
//! Per set: jobs and threads; the pool's fiber switch-ins by kind (job start, job resumed after
//! its region, after a preemption, thread start, thread resumed), threads run inline on their
//! job's fiber, jobs and threads started in place on the fiber that finished the previous
//! entry, parks, wake-ups that found nothing, park time-outs; the workers' and the
//! releaser's kernel switches (perf); the pool's total as the experiment counts it; and the
//! kernel switches of the same set under SCHED_DEADLINE (skipped with `PAWS_NO_DL` set);
//! every missed job's record. `PAWS_SCALED` set: the windows scaled by m. Needs root for SCHED_FIFO,
//! SCHED_DEADLINE and perf.

use std::time::Duration;

use schedkit_core::generate::Seed001;
use schedkit_linux::deadline::{self, DeadlineOptions};
use schedkit_runtime::paws::harness::{run_taskset, HarnessOpts};
use schedkit_runtime::paws::Mode;

const WINDOWS: [(f64, f64); 4] = [(0.28, 0.30), (0.58, 0.60), (0.78, 0.80), (0.83, 0.85)];

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let w: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(0).min(3);
    let sets: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let ms: u64 = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(1500);
    let mode = a.get(4).and_then(|s| Mode::parse(s)).unwrap_or(Mode::Paws);
    let m = std::thread::available_parallelism().map_or(1, |n| n.get());
    // `PAWS_SCALED` set: the window scaled by m, as `--windows scaled` (whose window w is
    // seeded from w as well).
    let k = if std::env::var_os("PAWS_SCALED").is_some() {
        m as f64
    } else {
        1.0
    };
    let (lo, hi) = (WINDOWS[w].0 * k, WINDOWS[w].1 * k);
    println!(
        "window {lo:.2}-{hi:.2}, m = {m}, {sets} sets, {ms} ms, mode {}",
        mode.name()
    );
    println!(
        "{:>4} {:>4} {:>5} | {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} | {:>5} {:>5} {:>5} | {:>6} {:>5} | {:>6} {:>6} {:>6}",
        "set", "jobs", "thr", "jst", "jwait", "jpre", "tst", "tres", "inline", "inpl", "parks", "empty",
        "tmo", "kwork", "krel", "pool", "dl", "ratio"
    );
    let mut ratios = Vec::new();
    for s in 0..sets {
        let seed = 1 + 1000 * w as u64 + s as u64;
        let tasks = Seed001::new(m, (lo / m as f64, hi / m as f64), seed).generate();
        let r = run_taskset(
            &tasks,
            mode,
            Duration::from_millis(ms),
            &HarnessOpts {
                seed,
                ..HarnessOpts::default()
            },
        )
        .expect("pool run");
        let p = &r.report.pool;
        let threads: u64 = r.report.jobs.iter().map(|j| j.threads).sum();
        // Every switch of the pool, as the experiment counts it: fiber switch-ins plus the
        // kernel switches of the workers and the releaser.
        let kr = r.report.releaser.context_switches.unwrap_or(0);
        let kw = r.kernel_context_switches.unwrap_or(0) - kr;
        let pool = r.switches + kw + kr;
        for j in r.report.jobs.iter().filter(|j| j.missed()) {
            println!("  missed: {j:?}");
        }
        let dl = if std::env::var_os("PAWS_NO_DL").is_some() {
            0
        } else {
            deadline::run_taskset(
                &tasks,
                &DeadlineOptions {
                    duration: Duration::from_millis(ms),
                    ..DeadlineOptions::default()
                },
                // Only the kernel's switch counts are compared here, not the jobs.
                &mut schedkit_linux::run::tasks::JobTable::default(),
            )
            .map(|d| {
                d.tasks
                    .iter()
                    .filter_map(|t| t.context_switches)
                    .sum::<u64>()
            })
            .unwrap_or(0)
        };
        let ratio = pool as f64 / dl.max(1) as f64;
        ratios.push(ratio);
        println!(
            "{:>4} {:>4} {:>5} | {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} | {:>5} {:>5} {:>5} | {:>6} {:>5} | {:>6} {:>6} {:>6.2}{}",
            s,
            r.jobs,
            threads,
            p.fiber_job_starts,
            p.fiber_job_after_wait,
            p.fiber_job_after_preempt,
            p.fiber_thread_starts,
            p.fiber_thread_resumes,
            p.inline_threads,
            p.started_in_place,
            p.parks,
            p.empty_wakes,
            p.park_timeouts,
            kw,
            kr,
            pool,
            dl,
            ratio,
            if r.misses > 0 {
                format!("  {} misses", r.misses)
            } else {
                String::new()
            }
        );
    }
    ratios.sort_by(|a, b| a.total_cmp(b));
    if !ratios.is_empty() {
        println!(
            "median pool / sched-deadline: {:.2}",
            ratios[ratios.len() / 2]
        );
    }
}
