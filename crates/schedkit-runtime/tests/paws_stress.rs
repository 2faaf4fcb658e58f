//! Stress: 100,000 jobs with random regions (random deadlines, so jobs preempt each other) on a
//! real pool; every thread must run exactly once and every region must start only after the
//! previous region of its job finished.

use schedkit_runtime::paws::{self, Mode, RtConfig, RtPool};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::Duration;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One job's plan: region sizes (1 = sequential), and a counter per thread.
struct Plan {
    regions: Vec<usize>,
    ran: Vec<AtomicU32>,
    /// Violations seen by the job itself (a region's thread ran before the previous region
    /// completed, or a count was not 1 at the region's end).
    bad: AtomicU32,
}

fn run(mode: Mode, jobs: usize, seed: u64) {
    let pool = RtPool::new(RtConfig::quiet(mode, 2)).unwrap();
    let mut rng = Rng(seed);
    let mut plans = Vec::with_capacity(jobs);
    let done = Arc::new(AtomicU64::new(0));
    for n in 0..jobs {
        // Keep the global queue short so that cores run out of jobs and steal threads, and
        // new releases land on busy cores and preempt.
        if n.is_multiple_of(8) {
            while done.load(SeqCst) + 8 < n as u64 {
                std::thread::yield_now();
            }
        }
        let nreg = 1 + (rng.next() % 4) as usize;
        let regions: Vec<usize> = (0..nreg)
            .map(|_| {
                if rng.next().is_multiple_of(3) {
                    1
                } else {
                    2 + (rng.next() % 5) as usize
                }
            })
            .collect();
        let total: usize = regions.iter().sum();
        let plan = Arc::new(Plan {
            regions,
            ran: (0..total).map(|_| AtomicU32::new(0)).collect(),
            bad: AtomicU32::new(0),
        });
        plans.push(plan.clone());
        let deadline = Duration::from_micros(100 + rng.next() % 10_000);
        let work = rng.next() % 3_000; // up to 3 us per thread
        let d = done.clone();
        pool.submit(deadline, move |job| {
            let mut base = 0;
            for &n in &plan.regions {
                // Everything before this region ran exactly once, nothing after it yet.
                for (k, c) in plan.ran.iter().enumerate() {
                    let want = u32::from(k < base);
                    if c.load(SeqCst) != want {
                        plan.bad.fetch_add(1, SeqCst);
                    }
                }
                let p = &plan;
                let step = |i: usize| {
                    paws::spin(work);
                    paws::checkpoint();
                    p.ran[base + i].fetch_add(1, SeqCst);
                };
                if n == 1 {
                    step(0);
                } else {
                    job.parallel(n, step);
                }
                base += n;
            }
            d.fetch_add(1, SeqCst);
        });
    }
    let r = pool.stop();
    assert_eq!(done.load(SeqCst), jobs as u64, "{mode:?}");
    assert_eq!(r.jobs.len(), jobs, "{mode:?}");
    for (j, p) in plans.iter().enumerate() {
        assert_eq!(
            p.bad.load(SeqCst),
            0,
            "{mode:?}: job {j} saw regions out of order"
        );
        for (k, c) in p.ran.iter().enumerate() {
            assert_eq!(
                c.load(SeqCst),
                1,
                "{mode:?}: job {j} thread {k} ran {c:?} times"
            );
        }
    }
    assert!(r.jobs.iter().all(|j| !j.panicked));
    let threads: u64 = r.jobs.iter().map(|j| j.threads).sum();
    let expect: usize = plans
        .iter()
        .flat_map(|p| p.regions.iter())
        .filter(|&&n| n > 1)
        .sum();
    assert_eq!(threads, expect as u64, "{mode:?}");
    let pre: u64 = r.jobs.iter().map(|j| j.preemptions).sum();
    let steals: u64 = r.jobs.iter().map(|j| j.steals).sum();
    eprintln!("{mode:?}: {jobs} jobs, {threads} threads, {pre} preemptions, {steals} steals");
    if mode != Mode::Ws {
        // Random deadlines submitted while others run: the preemption path is exercised.
        assert!(pre > 0, "{mode:?}: no preemption happened");
    }
    if mode != Mode::Gedf {
        assert!(steals > 0, "{mode:?}: no steal happened");
    }
}

#[test]
fn paws_100k_jobs_every_thread_once_regions_in_order() {
    run(Mode::Paws, 100_000, 0x5eed);
}

#[test]
fn gedf_and_ws_10k_jobs_every_thread_once_regions_in_order() {
    run(Mode::Gedf, 10_000, 0xbeef);
    run(Mode::Ws, 10_000, 0xcafe);
}
