//! The FCFS pool: results and panics through handles, FIFO start order with one worker, every
//! task counted under both queues, and seed 000's exclusive configuration.

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};

use schedkit_runtime::{Pool, PoolConfig, QueueKind};

const KINDS: [QueueKind; 2] = [QueueKind::Mutex, QueueKind::LockFree];

#[test]
fn handles_yield_values_and_panics() {
    for kind in KINDS {
        let pool = Pool::new(PoolConfig::new(kind)).unwrap();
        let h = pool.spawn(|| 2 + 2);
        let p = pool.spawn(|| -> u8 { panic!("task failed") });
        assert_eq!(h.join().unwrap(), 4);
        let e = p.join().unwrap_err();
        assert_eq!(e.downcast_ref::<&str>(), Some(&"task failed"));
        // The worker survived the panic.
        assert_eq!(pool.spawn(|| 5).join().unwrap(), 5);
    }
}

#[test]
fn one_worker_runs_tasks_first_come_first_served() {
    for kind in KINDS {
        let mut cfg = PoolConfig::new(kind);
        cfg.workers = 1;
        let pool = Pool::new(cfg).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..500)
            .map(|i| {
                let o = order.clone();
                pool.spawn(move || o.lock().unwrap().push(i))
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(
            *order.lock().unwrap(),
            (0..500).collect::<Vec<_>>(),
            "{kind:?}"
        );
    }
}

#[test]
fn every_task_runs_exactly_once_from_many_submitters() {
    for kind in KINDS {
        let pool = Arc::new(Pool::new(PoolConfig::new(kind)).unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let subs: Vec<_> = (0..4)
            .map(|_| {
                let (p, c) = (pool.clone(), count.clone());
                std::thread::spawn(move || {
                    for _ in 0..25_000 {
                        let c = c.clone();
                        p.execute(move || {
                            c.fetch_add(1, Relaxed);
                        });
                    }
                })
            })
            .collect();
        for s in subs {
            s.join().unwrap();
        }
        // Dropping the pool runs everything still queued.
        drop(Arc::try_unwrap(pool).ok().expect("sole owner"));
        assert_eq!(count.load(SeqCst), 100_000, "{kind:?}");
    }
}

#[test]
fn exclusive_pool_pins_workers_off_the_system_cpu() {
    let allowed: Vec<usize> = schedkit_linux::affinity::get_thread(0)
        .unwrap()
        .iter()
        .collect();
    let pool = Pool::exclusive().unwrap();
    let expect = if allowed.len() > 1 {
        allowed.len() - 1
    } else {
        1
    };
    assert_eq!(pool.workers(), expect);
    // Each worker reports the CPU set it runs on: one CPU, never the system CPU when there
    // is a choice.
    let hs: Vec<_> = (0..pool.workers() * 4)
        .map(|_| {
            pool.spawn(|| {
                schedkit_linux::affinity::get_thread(0)
                    .unwrap()
                    .iter()
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in hs {
        let set = h.join().unwrap();
        assert_eq!(set.len(), 1, "pinned to one CPU: {set:?}");
        if allowed.len() > 1 {
            assert_ne!(set[0], allowed[0], "the system CPU stays free");
        }
    }
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        assert!(pool.warnings().is_empty(), "{:?}", pool.warnings());
        let pol = pool
            .spawn(|| schedkit_linux::sched::get_thread(0).unwrap())
            .join()
            .unwrap();
        assert_eq!(pol, schedkit_linux::sched::Policy::Fifo { priority: 99 });
    } else {
        eprintln!("not root: SCHED_FIFO is not checked, only that the pool warns");
        assert!(!pool.warnings().is_empty());
    }
}
