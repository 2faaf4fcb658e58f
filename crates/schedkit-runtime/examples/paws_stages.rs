//! Where the PAWS pool's preemption latency goes, on the task sets of `schedkit experiment
//! paws` (same generator, same seeds: set `s` of window `w` is seeded `1 + 1000 w + s`).
//!
//! ```text
//! sudo ./target/release/examples/paws_stages [SETS] [DURATION_MS] [WINDOWS e.g. 0123]
//! ```
//!
//! Every preempting dispatch (release to the first instruction of a job handed to a core by
//! preempting its running entry) is split into the stages of [`PreemptionStages`]: timer
//! (nominal release to the releaser thread awake), request (to the target core's preemption
//! flag set, under the state lock), reach (to the target's running entry stopping at a
//! preemption point, or ending), pick (to the target worker taking the job), switch (to the
//! job's first instruction on its fiber). Per window: p50 / p99 / max of each stage and of the
//! total, how the targets stopped, which fibers the jobs started on, and the five slowest
//! dispatches stage by stage. `PAWS_SCALED` set: the windows scaled by m; `PAWS_SPIN_US`: the
//! releaser's spin before a release (`RtConfig::release_spin`); `PAWS_NO_CPU_CLOCK`: without
//! the target's CPU time in the reach stage (`RtConfig::stage_cpu_clock`, which adds about
//! 3 us to the pick stage). Needs root for SCHED_FIFO.

use std::time::Duration;

use schedkit_core::generate::Seed001;
use schedkit_runtime::paws::harness::{run_taskset, HarnessOpts};
use schedkit_runtime::paws::{percentile, FiberHow, Mode, PreemptionStages, StopHow};

const WINDOWS: [(f64, f64); 4] = [(0.28, 0.30), (0.58, 0.60), (0.78, 0.80), (0.83, 0.85)];

fn us(v: Option<u64>) -> String {
    v.map_or("-".into(), |x| format!("{:.1}", x as f64 / 1e3))
}

fn summary(label: &str, all: &[PreemptionStages]) {
    println!(
        "{label}: {} preempting dispatches ({} from the pending slot)",
        all.len(),
        all.iter().filter(|s| s.from_pending).count()
    );
    println!(
        "  {:<8} {:>9} {:>9} {:>9}",
        "stage", "p50 us", "p99 us", "max us"
    );
    let row = |name: &str, v: Vec<u64>| {
        println!(
            "  {:<8} {:>9} {:>9} {:>9}",
            name,
            us(percentile(&v, 50.0)),
            us(percentile(&v, 99.0)),
            us(v.iter().copied().max())
        );
    };
    for (i, name) in PreemptionStages::STAGE_NAMES.iter().enumerate() {
        row(name, all.iter().map(|s| s.stages()[i]).collect());
    }
    row("total", all.iter().map(|s| s.total()).collect());
    let count = |f: &dyn Fn(&PreemptionStages) -> bool| all.iter().filter(|s| f(s)).count();
    println!(
        "  target stopped at a checkpoint {} / its entry ended {} / waited {}; fiber: in place {} \
         / spare {} / pooled stack {} / new stack {}; requester on the target's CPU {}",
        count(&|s| s.stop == StopHow::Checkpoint),
        count(&|s| s.stop == StopHow::Finished),
        count(&|s| s.stop == StopHow::Waited),
        count(&|s| s.fiber == FiberHow::InPlace),
        count(&|s| s.fiber == FiberHow::Spare),
        count(&|s| s.fiber == FiberHow::PooledStack),
        count(&|s| s.fiber == FiberHow::NewStack),
        count(&|s| s.requester_cpu == Some(s.target)),
    );
    for how in [
        FiberHow::InPlace,
        FiberHow::Spare,
        FiberHow::PooledStack,
        FiberHow::NewStack,
    ] {
        let v: Vec<u64> = all
            .iter()
            .filter(|s| s.fiber == how)
            .map(|s| s.stages()[4])
            .collect();
        if !v.is_empty() {
            println!(
                "  switch on {how:?}: p50 {} us, max {} us over {}",
                us(percentile(&v, 50.0)),
                us(v.iter().copied().max()),
                v.len()
            );
        }
    }
    let lost: Vec<u64> = all
        .iter()
        .filter_map(|s| s.reach_cpu.map(|c| s.stages()[2].saturating_sub(c)))
        .collect();
    println!(
        "  reach not run by the target (wall - its CPU time): p50 {} us, p99 {} us, max {} us",
        us(percentile(&lost, 50.0)),
        us(percentile(&lost, 99.0)),
        us(lost.iter().copied().max())
    );
    let mut worst: Vec<&PreemptionStages> = all.iter().collect();
    worst.sort_by_key(|s| std::cmp::Reverse(s.total()));
    for s in worst.iter().take(5) {
        let st = s.stages();
        println!(
            "  slow: total {:>7.1} us = timer {:.1} + request {:.1} + reach {:.1} + pick {:.1} + \
             switch {:.1} ({:?}, {:?}, target {}, requester cpu {:?}, pending {}, target's CPU \
             time in reach {:?} us)",
            s.total() as f64 / 1e3,
            st[0] as f64 / 1e3,
            st[1] as f64 / 1e3,
            st[2] as f64 / 1e3,
            st[3] as f64 / 1e3,
            st[4] as f64 / 1e3,
            s.stop,
            s.fiber,
            s.target,
            s.requester_cpu,
            s.from_pending,
            s.reach_cpu.map(|c| c / 1000)
        );
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let sets: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let ms: u64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(1500);
    let wins: Vec<usize> = a
        .get(3)
        .map(|s| {
            s.chars()
                .filter_map(|c| c.to_digit(10))
                .map(|d| d as usize)
                .filter(|&d| d < 4)
                .collect()
        })
        .unwrap_or_else(|| vec![0, 1, 2, 3]);
    let m = std::thread::available_parallelism().map_or(1, |n| n.get());
    let k = if std::env::var_os("PAWS_SCALED").is_some() {
        m as f64
    } else {
        1.0
    };
    // `PAWS_SPIN_US`: the releaser's spin before each release (`RtConfig::release_spin`).
    let spin = std::env::var("PAWS_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_micros);
    // `PAWS_NO_CPU_CLOCK`: do not read the target's CPU clock (it adds about 3 us to the
    // pick stage).
    let cpu_clock = std::env::var_os("PAWS_NO_CPU_CLOCK").is_none();
    let mut everything = Vec::new();
    for w in wins {
        let (lo, hi) = (WINDOWS[w].0 * k, WINDOWS[w].1 * k);
        let mut all = Vec::new();
        let mut misses = 0;
        for s in 0..sets {
            let seed = 1 + 1000 * w as u64 + s as u64;
            let tasks = Seed001::new(m, (lo / m as f64, hi / m as f64), seed).generate();
            let r = run_taskset(
                &tasks,
                Mode::Paws,
                Duration::from_millis(ms),
                &HarnessOpts {
                    seed,
                    release_spin: spin.unwrap_or(HarnessOpts::default().release_spin),
                    stage_cpu_clock: cpu_clock,
                    ..HarnessOpts::default()
                },
            )
            .expect("pool run");
            misses += r.misses;
            all.extend(r.report.preemption_stages);
        }
        summary(
            &format!("window {lo:.2}-{hi:.2}, {sets} sets, {misses} missed jobs"),
            &all,
        );
        everything.extend(all);
    }
    summary("all windows", &everything);
}
