//! The pinned FCFS worker pool of seed 000 ("Application task queue arrangement", figure 2):
//! one worker thread per core except the system core, each pinned to its core and raised to
//! SCHED_FIFO, taking closures from one application queue first come, first served, and
//! running each to completion (no time slicing, no preemption by the pool).
//!
//! Two queues sit behind the one [`Pool`] type so they can be compared on the same workload:
//! - [`QueueKind::Mutex`]: the paper's queue, a `VecDeque` under a mutex, with a condvar for
//!   idle workers;
//! - [`QueueKind::LockFree`]: a crossbeam `SegQueue` (lock-free MPMC); idle workers spin
//!   briefly, then park, and a submitter unparks one parked worker.
//!
//! Both are strictly FIFO in the order tasks were queued; with several workers, tasks *start*
//! in queue order and may finish in any order.
//!
//! Idle protocol of the lock-free queue (no lost wake-up): a worker announces itself in
//! `sleeping` (SeqCst), checks the queue again, then parks; a submitter pushes, then reads
//! `sleeping` (SeqCst) and unparks one. Either the worker sees the task or the submitter sees
//! the worker (store-buffer litmus with SeqCst on both sides).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use parking_lot::{Condvar, Mutex};
use schedkit_linux::affinity;
use schedkit_linux::sched::{self, Policy};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Which application queue the pool uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// Seed 000's mutex-protected queue.
    Mutex,
    /// A lock-free queue (crossbeam `SegQueue`).
    LockFree,
}

/// Pool knobs.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// CPUs to run one worker each on; `None`: `workers` unpinned workers.
    pub cpus: Option<Vec<usize>>,
    /// Worker count when `cpus` is `None` (default: available parallelism).
    pub workers: usize,
    /// SCHED_FIFO priority for the workers (1..=99); `None`: leave SCHED_OTHER.
    pub fifo_priority: Option<u32>,
    pub queue: QueueKind,
    /// How long an idle lock-free worker polls the queue before parking (default 20 us).
    /// Polling pays where the submitter has a CPU of its own ([`PoolConfig::exclusive`]);
    /// with a worker pinned on every CPU, polling workers take the submitter's CPU: a batch
    /// of 10,000 tiny tasks took 2.2-3.2x as long as with 0 here (docs/results/runtime.md).
    pub spin: Duration,
}

impl PoolConfig {
    /// Unpinned SCHED_OTHER workers, one per available CPU.
    pub fn new(queue: QueueKind) -> PoolConfig {
        PoolConfig {
            cpus: None,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            fifo_priority: None,
            queue,
            spin: Duration::from_micros(20),
        }
    }

    /// Seed 000's configuration: one worker per allowed CPU except the system CPU (the lowest
    /// allowed one; if it is the only one, the pool uses it anyway), pinned, SCHED_FIFO 99.
    pub fn exclusive(queue: QueueKind) -> PoolConfig {
        let allowed: Vec<usize> = affinity::get_thread(0)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let cpus = if allowed.len() > 1 {
            allowed[1..].to_vec()
        } else if allowed.is_empty() {
            vec![0]
        } else {
            allowed
        };
        PoolConfig {
            workers: cpus.len(),
            cpus: Some(cpus),
            fifo_priority: Some(99),
            ..PoolConfig::new(queue)
        }
    }
}

// One per pool: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
enum Queue {
    Mutex {
        q: Mutex<VecDeque<Job>>,
        cv: Condvar,
    },
    LockFree {
        q: SegQueue<Job>,
        sleeping: AtomicUsize,
        threads: Mutex<Vec<(Thread, Arc<AtomicBool>)>>,
    },
}

struct Inner {
    queue: Queue,
    stop: AtomicBool,
    spin: Duration,
}

/// The FCFS worker pool. Dropping it runs every queued task, then stops the workers.
pub struct Pool {
    inner: Arc<Inner>,
    threads: Vec<std::thread::JoinHandle<()>>,
    warnings: Vec<String>,
    kind: QueueKind,
}

/// The result of a task.
pub struct TaskHandle<T> {
    slot: Arc<(Mutex<Option<std::thread::Result<T>>>, Condvar)>,
}

impl<T> TaskHandle<T> {
    /// Waits for the task; `Err` carries its panic.
    pub fn join(self) -> std::thread::Result<T> {
        let (m, cv) = &*self.slot;
        let mut g = m.lock();
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            cv.wait(&mut g);
        }
    }
}

impl Pool {
    /// `PoolConfig::exclusive(QueueKind::LockFree)`.
    pub fn exclusive() -> std::io::Result<Pool> {
        Pool::new(PoolConfig::exclusive(QueueKind::LockFree))
    }

    /// Starts the workers. Pinning or SCHED_FIFO that the system refuses is not an error: the
    /// worker runs without it and [`Pool::warnings`] (also printed on stderr) says why.
    pub fn new(cfg: PoolConfig) -> std::io::Result<Pool> {
        let n = cfg.cpus.as_ref().map_or(cfg.workers, |c| c.len()).max(1);
        let queue = match cfg.queue {
            QueueKind::Mutex => Queue::Mutex {
                q: Mutex::new(VecDeque::new()),
                cv: Condvar::new(),
            },
            QueueKind::LockFree => Queue::LockFree {
                q: SegQueue::new(),
                sleeping: AtomicUsize::new(0),
                threads: Mutex::new(Vec::new()),
            },
        };
        let inner = Arc::new(Inner {
            queue,
            stop: AtomicBool::new(false),
            spin: cfg.spin,
        });
        let (tx, rx) = std::sync::mpsc::channel::<Option<String>>();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let inner2 = inner.clone();
            let cpu = cfg.cpus.as_ref().map(|c| c[i]);
            let prio = cfg.fifo_priority;
            let tx = tx.clone();
            let parked = Arc::new(AtomicBool::new(false));
            if let Queue::LockFree { threads, .. } = &inner.queue {
                // Registered below, once the thread exists.
                let _ = threads;
            }
            let parked2 = parked.clone();
            let h = std::thread::Builder::new()
                .name(format!("schedkit-pool{i}"))
                .spawn(move || {
                    let mut warn = Vec::new();
                    if let Some(c) = cpu {
                        if let Err(e) = affinity::pin_current(c) {
                            warn.push(format!("cannot pin to CPU {c}: {e}"));
                        }
                    }
                    if let Some(p) = prio {
                        if let Err(e) = sched::set_thread(0, Policy::Fifo { priority: p }) {
                            warn.push(format!(
                                "SCHED_FIFO {p} not permitted ({e}); running SCHED_OTHER \
                                 (run as root or grant CAP_SYS_NICE)"
                            ));
                        }
                    }
                    let _ = tx.send(if warn.is_empty() {
                        None
                    } else {
                        Some(format!("pool worker {i}: {}", warn.join("; ")))
                    });
                    worker(&inner2, &parked2);
                })?;
            if let Queue::LockFree { threads, .. } = &inner.queue {
                threads.lock().push((h.thread().clone(), parked));
            }
            threads.push(h);
        }
        drop(tx);
        let mut warnings = Vec::new();
        for _ in 0..n {
            // Kept for the caller (`Pool::warnings`): a library does not print.
            if let Ok(Some(w)) = rx.recv() {
                warnings.push(w);
            }
        }
        Ok(Pool {
            inner,
            threads,
            warnings,
            kind: cfg.queue,
        })
    }

    /// What the pool could not set up (pinning, SCHED_FIFO).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn workers(&self) -> usize {
        self.threads.len()
    }

    pub fn queue_kind(&self) -> QueueKind {
        self.kind
    }

    /// Queues `f` without a handle (the cheapest submission).
    pub fn execute<F: FnOnce() + Send + 'static>(&self, f: F) {
        self.push(Box::new(f));
    }

    /// Queues `f`; the handle yields its value or its panic.
    pub fn spawn<F, T>(&self, f: F) -> TaskHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let slot = Arc::new((Mutex::new(None), Condvar::new()));
        let s2 = slot.clone();
        self.push(Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            *s2.0.lock() = Some(r);
            s2.1.notify_all();
        }));
        TaskHandle { slot }
    }

    fn push(&self, job: Job) {
        match &self.inner.queue {
            Queue::Mutex { q, cv } => {
                q.lock().push_back(job);
                cv.notify_one();
            }
            Queue::LockFree {
                q,
                sleeping,
                threads,
            } => {
                q.push(job);
                if sleeping.load(SeqCst) > 0 {
                    // Claim the parked worker (its flag goes false here), so that the pushes
                    // that follow before it runs do not take the lock and unpark it again:
                    // on a loaded machine a woken worker may wait milliseconds for a CPU, and
                    // a batch submitted meanwhile would pay that on every push.
                    for (t, parked) in threads.lock().iter() {
                        if parked
                            .compare_exchange(true, false, SeqCst, Relaxed)
                            .is_ok()
                        {
                            t.unpark();
                            break;
                        }
                    }
                }
            }
        }
    }
}

fn worker(inner: &Inner, parked: &AtomicBool) {
    match &inner.queue {
        Queue::Mutex { q, cv } => loop {
            let job = {
                let mut g = q.lock();
                loop {
                    if let Some(j) = g.pop_front() {
                        break Some(j);
                    }
                    if inner.stop.load(SeqCst) {
                        break None;
                    }
                    cv.wait(&mut g);
                }
            };
            match job {
                Some(j) => run_job(j),
                None => return,
            }
        },
        Queue::LockFree { q, sleeping, .. } => loop {
            if let Some(j) = q.pop() {
                run_job(j);
                continue;
            }
            let until = Instant::now() + inner.spin;
            let mut got = None;
            let mut rounds = 0u32;
            while Instant::now() < until {
                if let Some(j) = q.pop() {
                    got = Some(j);
                    break;
                }
                // A few busy rounds, then yields: a worker that spins on a CPU it shares
                // with the submitter (or any other program) keeps the submitter from
                // pushing, and uses up its own share of the CPU for nothing.
                rounds += 1;
                if rounds <= SPIN_BUSY_ROUNDS {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            if let Some(j) = got {
                run_job(j);
                continue;
            }
            parked.store(true, SeqCst);
            sleeping.fetch_add(1, SeqCst);
            if q.is_empty() {
                if inner.stop.load(SeqCst) {
                    sleeping.fetch_sub(1, SeqCst);
                    parked.store(false, SeqCst);
                    return;
                }
                std::thread::park_timeout(Duration::from_millis(50));
            }
            sleeping.fetch_sub(1, SeqCst);
            parked.store(false, SeqCst);
        },
    }
}

/// Busy polls of an idle lock-free worker before it polls with `yield_now` (for the rest of
/// `PoolConfig::spin`).
const SPIN_BUSY_ROUNDS: u32 = 64;

/// Runs a task; a panic in a task without a handle is reported and does not kill the worker.
fn run_job(j: Job) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(j)) {
        drop(p);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.inner.stop.store(true, SeqCst);
        match &self.inner.queue {
            Queue::Mutex { q, cv } => {
                let _g = q.lock();
                cv.notify_all();
            }
            Queue::LockFree { threads, .. } => {
                for (t, _) in threads.lock().iter() {
                    t.unpark();
                }
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
