//! The FCFS pool's lock-free queue against its mutex queue (seed 000's), rayon's
//! `ThreadPool::spawn` and the `threadpool` crate, the same number of workers each, SCHED_OTHER.
//! Three cases, because they measure different things and mixing them made the old batch
//! figure swing 2-4x between runs:
//! - `queue`: every worker is held awake (a gate task spinning with `yield_now`), the tasks are
//!   submitted, then the gates open: push + pop + run per task, no wake-up anywhere.
//! - `wake`: every worker parked (2 ms of nothing first), one task submitted: the time from
//!   the submission to the task's first instruction.
//! - `batch`: 10,000 tasks submitted from one thread right after the previous batch, then
//!   waited for (the figure docs/experiments.md used to quote): queue and wake-ups mixed.
//!
//! A `queue` or `batch` sample repeats its 10,000 tasks for at least `ab::SAMPLE` (60 ms):
//! one batch takes under a millisecond, shorter than a time slice of a program beside it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use schedkit_runtime::{Pool, PoolConfig, QueueKind};

use super::common::ab::{self, compare, Opts, Side};
use super::{all_workers, rayon_pool, PINS};

type Task = Box<dyn FnOnce() + Send>;

/// A pool as the cases see it: a way to submit a task.
struct Peer {
    name: &'static str,
    submit: Box<dyn Fn(Task)>,
}

/// Every pool with `workers` workers; with `pin = Some(first)`, worker i of each on the
/// (`first` + i)-th allowed CPU.
fn peers(workers: usize, pin: Option<usize>) -> Vec<Peer> {
    let cpus: Vec<usize> = ab::allowed_cpus()
        .into_iter()
        .cycle()
        .skip(pin.unwrap_or(0))
        .take(workers)
        .collect();
    let ours = |kind| {
        let mut cfg = PoolConfig::new(kind);
        cfg.workers = workers;
        if pin.is_some() {
            cfg.cpus = Some(cpus.clone());
        }
        let p = Pool::new(cfg).unwrap();
        Box::new(move |t: Task| p.execute(t)) as Box<dyn Fn(Task)>
    };
    let rp = rayon_pool(workers, pin);
    let tp = threadpool::ThreadPool::new(workers);
    if let Some(first) = pin {
        // threadpool has no start hook: one task per worker, held at a barrier until every
        // worker has one, pins each worker to its CPU.
        let b = Arc::new(Barrier::new(workers));
        let next = Arc::new(AtomicUsize::new(0));
        for _ in 0..workers {
            let (b, next) = (b.clone(), next.clone());
            tp.execute(move || {
                ab::pin_to_nth(first + next.fetch_add(1, SeqCst));
                b.wait();
            });
        }
        tp.join();
    }
    vec![
        Peer {
            name: "schedkit-lockfree",
            submit: ours(QueueKind::LockFree),
        },
        Peer {
            name: "schedkit-mutex",
            submit: ours(QueueKind::Mutex),
        },
        Peer {
            name: "rayon-spawn",
            submit: Box::new(move |t| rp.spawn(t)),
        },
        Peer {
            name: "threadpool",
            submit: Box::new(move |t| tp.execute(t)),
        },
    ]
}

fn wait_for(counter: &AtomicUsize, n: usize) {
    while counter.load(Acquire) < n {
        std::thread::yield_now();
    }
}

fn tiny(counter: &Arc<AtomicUsize>) -> Task {
    let c = counter.clone();
    Box::new(move || {
        std::hint::black_box(c.fetch_add(1, Release));
    })
}

/// `tasks` tiny tasks with every worker awake in a gate until all are queued.
fn queue(p: &Peer, workers: usize, tasks: usize) -> (Duration, u64) {
    let open = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicUsize::new(0));
    for _ in 0..workers {
        let (open, held) = (open.clone(), held.clone());
        (p.submit)(Box::new(move || {
            held.fetch_add(1, SeqCst);
            while !open.load(Acquire) {
                // Awake, but leaving the CPU to the submitter when they share one.
                std::thread::yield_now();
            }
        }));
    }
    wait_for(&held, workers);
    let done = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    for _ in 0..tasks {
        (p.submit)(tiny(&done));
    }
    open.store(true, Release);
    wait_for(&done, tasks);
    (t.elapsed(), tasks as u64)
}

/// `n` wake-ups of a parked worker: submission to the task's start.
fn wake(p: &Peer, n: usize) -> (Duration, u64) {
    let mut total = Duration::ZERO;
    for _ in 0..n {
        // Longer than any pool's idle spin (schedkit 20 us, rayon's few rounds of yields).
        std::thread::sleep(Duration::from_millis(2));
        let started = Arc::new(AtomicU64::new(0));
        let s = started.clone();
        let epoch = Instant::now();
        (p.submit)(Box::new(move || {
            s.store(epoch.elapsed().as_nanos() as u64 + 1, Release);
        }));
        let ns = loop {
            let v = started.load(Acquire);
            if v != 0 {
                break v - 1;
            }
            std::thread::yield_now();
        };
        total += Duration::from_nanos(ns);
    }
    (total, n as u64)
}

fn batch(p: &Peer, tasks: usize) -> (Duration, u64) {
    let done = Arc::new(AtomicUsize::new(0));
    let t = Instant::now();
    for _ in 0..tasks {
        (p.submit)(tiny(&done));
    }
    wait_for(&done, tasks);
    (t.elapsed(), tasks as u64)
}

/// One side per pool, each running `f` on its pool `reps` times per sample.
fn sides<'a>(ps: &'a [Peer], reps: u64, f: &'a dyn Fn(&Peer) -> (Duration, u64)) -> Vec<Side<'a>> {
    ps.iter()
        .map(|p| {
            Side::new(p.name, move || {
                (0..reps).fold((Duration::ZERO, 0), |(d, n), _| {
                    let (d1, n1) = f(p);
                    (d + d1, n + n1)
                })
            })
        })
        .collect()
}

pub fn bench(o: &Opts) {
    let all = all_workers();
    let tasks = if o.smoke { 100 } else { 10_000 };
    let wakes = if o.smoke { 1 } else { 5 };
    for (pin, pin_name) in PINS {
        // The queue case leaves the submitter a CPU of its own (CPU 0 when pinned, the
        // workers on the others): workers held awake on every CPU would take the submitter's
        // CPU in time slices, and the case would time the kernel's scheduler, not the queue.
        let workers = if all > 1 { all - 1 } else { 1 };
        let ps = peers(workers, pin.then_some(if all > 1 { 1 } else { 0 }));
        let restore = pin.then(pin_submitter);
        let reps = ab::reps_for(o, || {
            queue(&ps[0], workers, tasks);
        });
        compare(
            o,
            "pool",
            &format!("queue{tasks}_w{workers}_{pin_name}"),
            "task",
            workers + 1,
            sides(&ps, reps, &|p| queue(p, workers, tasks)),
        );
        if let Some(cpus) = restore {
            let _ = schedkit_linux::affinity::set_thread(0, &cpus);
        }
        drop(ps);

        let workers = all;
        let ps = peers(workers, pin.then_some(0));
        let case = |what: &str| format!("{what}_w{workers}_{pin_name}");
        compare(
            o,
            "pool",
            &case("wake"),
            "wake-up",
            workers,
            sides(&ps, 1, &|p| wake(p, wakes)),
        );
        let reps = ab::reps_for(o, || {
            batch(&ps[0], tasks);
        });
        compare(
            o,
            "pool",
            &case(&format!("batch{tasks}")),
            "task",
            workers,
            sides(&ps, reps, &|p| batch(p, tasks)),
        );
    }
}

/// Pins the calling (submitting) thread to the first allowed CPU; returns the affinity to
/// put back.
fn pin_submitter() -> schedkit_linux::affinity::CpuSet {
    let before = schedkit_linux::affinity::get_thread(0).unwrap_or_default();
    ab::pin_to_nth(0);
    before
}
