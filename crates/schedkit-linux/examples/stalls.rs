//! Is this machine fit for real-time measurements? Runs one stall witness pinned to each CPU
//! this process may use (SCHED_FIFO 99 when permitted, 1 ms steps) for a while and prints every
//! stall of more than 3 ms, with the CPUs that saw it: a stall seen on every CPU at once is
//! the whole machine held (a virtual machine's host), not a thread of this one.
//!
//! `cargo run --release -p schedkit-linux --example stalls -- [SECONDS]` (default 60).

use std::time::Duration;

use schedkit_linux::affinity;
use schedkit_linux::sched::Policy;
use schedkit_linux::stall::{Stall, StallWitness};

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let cpus: Vec<usize> = affinity::get_thread(0)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let witnesses: Vec<(usize, StallWitness)> = cpus
        .iter()
        .map(|&cpu| {
            // A witness inherits the CPU set of the thread that starts it.
            let w = std::thread::spawn(move || {
                affinity::pin_current(cpu).expect("pin");
                // Pinned, so SCHED_FIFO 99: the kernel refuses SCHED_DEADLINE to a thread
                // pinned to fewer CPUs than its root domain.
                StallWitness::start(
                    Duration::from_millis(1),
                    Duration::from_millis(3),
                    vec![Policy::Fifo { priority: 99 }],
                )
                .expect("witness")
            })
            .join()
            .expect("starter");
            if let Some(warn) = &w.warning {
                eprintln!("cpu {cpu}: {warn}");
            }
            (cpu, w)
        })
        .collect();
    eprintln!("watching CPUs {cpus:?} for {secs} s (1 ms steps, stalls over 3 ms)");
    std::thread::sleep(Duration::from_secs(secs));
    let mut all: Vec<(usize, Stall)> = witnesses
        .into_iter()
        .flat_map(|(cpu, w)| w.stop().into_iter().map(move |s| (cpu, s)))
        .collect();
    all.sort_by_key(|(_, s)| s.to_ns);
    // Stalls whose wake-ups lie within 2 ms of each other are one event seen by several CPUs.
    let t0 = all.first().map(|(_, s)| s.from_ns).unwrap_or(0);
    let mut events: Vec<(u64, Vec<(usize, u64)>)> = Vec::new();
    for (cpu, s) in all {
        match events.last_mut() {
            Some((to, seen)) if s.to_ns <= *to + 2_000_000 => seen.push((cpu, s.late_ns)),
            _ => events.push((s.to_ns, vec![(cpu, s.late_ns)])),
        }
    }
    println!(
        "{:>10}  {:>9}  {:>9}  late by CPU (ms)",
        "at (s)", "CPUs", "max (ms)"
    );
    let mut whole = 0;
    for (to, seen) in &events {
        let max = seen.iter().map(|&(_, l)| l).max().unwrap_or(0);
        let mut cpus_seen: Vec<usize> = seen.iter().map(|&(c, _)| c).collect();
        cpus_seen.sort_unstable();
        cpus_seen.dedup();
        if cpus_seen.len() == cpus.len() {
            whole += 1;
        }
        let per: Vec<String> = seen
            .iter()
            .map(|&(c, l)| format!("{c}: {:.1}", l as f64 / 1e6))
            .collect();
        println!(
            "{:>10.3}  {:>9}  {:>9.1}  {}",
            (to - t0) as f64 / 1e9,
            format!("{}/{}", cpus_seen.len(), cpus.len()),
            max as f64 / 1e6,
            per.join(", ")
        );
    }
    println!(
        "{} stalls in {secs} s, {whole} of them on every CPU at once",
        events.len()
    );
}
