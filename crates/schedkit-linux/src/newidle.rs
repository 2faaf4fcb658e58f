//! Newidle conditioning: puts the kernel's newidle balance into a known state before a
//! measured run.
//!
//! **Why.** Since Linux 6.19 (and 6.18.5, 6.12.65 in the stable series) a CPU that runs out
//! of work tries a newidle balance only with a chance that follows how often such balances
//! pulled a task recently (NI_RANDOM, "sched/fair: Proportional newidle balance": each CPU's
//! `sd->newidle_ratio`, successes per 1024 tries over roughly the last 512 to 1024
//! occasions). That state is carried over from whatever the machine ran before, and it
//! decides whether a CPU that empties pulls a waiting thread at once or only at its next
//! idle balance, milliseconds later. An experiment that compares a run with a model must
//! start both from the same state.
//!
//! **How.** For each CPU in turn: two spinners pinned to another CPU keep the root domain
//! overloaded (the kernel counts an occasion only then), and a thread pinned to the CPU
//! sleeps `calls` times for 100 us, so the CPU goes idle that often with nothing it may
//! pull (the spinners are pinned). Every occasion then counts as a failure and each 512 of
//! them halve the CPU's success count, so 6144 (twelve halvings) bring any success count up to
//! 4096 (four recent successes at ratio 0, each counting 1024) to a ratio of 2 or less: a
//! newidle balance then runs at about 1 idle entry in 256 or fewer. The `eevdf` model is given
//! `newidle_ratio = 0` to match (`schedkit experiment fidelity`). On a kernel without the
//! feature the same sleeps are harmless. Takes about 0.75 s per CPU. It holds no lease (a
//! `policy = "default"` run takes none: it changes nothing machine-wide): other work running
//! beside it meets two spinners for that time, and other work that the CPU pulls on its idle
//! entries counts as successes and leaves the ratio a little above 0; the fidelity report
//! measures and states the other work of each run.
//!
//! Nothing on the machine is changed that outlives the call: the threads are schedkit's
//! own, SCHED_OTHER, and joined before it returns.

use crate::affinity::{self, CpuSet};
use crate::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Newidle occasions per CPU: twelve halvings of the success count.
pub const SETTLE_CALLS: u32 = 6144;
const SLEEP: Duration = Duration::from_micros(100);

/// What [`settle`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Settled {
    /// The CPUs conditioned (none when fewer than two may be used: no balancing then).
    pub cpus: Vec<usize>,
    pub elapsed: Duration,
}

/// Conditions every CPU of `cpus` (at least two, or nothing is done) with `calls` failing
/// newidle occasions each (module docs).
pub fn settle(cpus: &CpuSet, calls: u32) -> Result<Settled> {
    let list: Vec<usize> = cpus.iter().collect();
    let start = Instant::now();
    if list.len() < 2 {
        return Ok(Settled {
            cpus: Vec::new(),
            elapsed: start.elapsed(),
        });
    }
    for (i, &cpu) in list.iter().enumerate() {
        let busy = list[(i + 1) % list.len()];
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || -> Result<()> {
                    fair_thread()?;
                    affinity::pin_current(busy)?;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    Ok(())
                })
            })
            .collect();
        let sleeper = std::thread::spawn(move || -> Result<()> {
            fair_thread()?;
            affinity::pin_current(cpu)?;
            // Exact 100 us sleeps: the default 50 us timer slack would merge them.
            // SAFETY: prctl with integer arguments only changes this thread's slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
            for _ in 0..calls {
                std::thread::sleep(SLEEP);
            }
            Ok(())
        });
        let slept = sleeper.join().expect("the newidle sleeper does not panic");
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().expect("a newidle spinner does not panic")?;
        }
        slept?;
    }
    Ok(Settled {
        cpus: list,
        elapsed: start.elapsed(),
    })
}

/// Makes the calling thread SCHED_OTHER at nice 0 whatever it inherited (the engine may run
/// real-time): the occasions must be the fair class's.
fn fair_thread() -> Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread (0) with a valid parameter block.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) } != 0 {
        return Err(crate::Error::last_os("sched_setscheduler(SCHED_OTHER)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_than_two_cpus_need_no_conditioning() {
        let s = settle(&CpuSet::single(0), 10).unwrap();
        assert!(s.cpus.is_empty());
    }

    #[test]
    fn every_usable_cpu_is_conditioned_in_turn() {
        // Real threads and sleeps; a few occasions per CPU keep it short.
        let Ok(cpus) = affinity::get_thread(0) else {
            eprintln!("skipped: this thread's CPUs cannot be read");
            return;
        };
        if cpus.len() < 2 {
            eprintln!("skipped: one CPU usable, no balancing to condition");
            return;
        }
        let s = settle(&cpus, 20).unwrap();
        assert_eq!(s.cpus, cpus.iter().collect::<Vec<_>>());
        // 20 sleeps of 100 us per CPU at the least.
        assert!(s.elapsed >= SLEEP * 20 * cpus.len() as u32);
    }
}
