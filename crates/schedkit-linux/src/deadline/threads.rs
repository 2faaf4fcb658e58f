//! The threads of a SCHED_DEADLINE task set ([`super::run_taskset`]): per task its workers
//! and its master, how each enters SCHED_DEADLINE and waits at the start latch, and the
//! fork/join between them. The master pushes each job's release (when it wakes for it) and
//! finish as trace events into its own queue ([`super::stream`]), live.

use super::stream::{release_of, JobQueue, Source};
use super::{budget, spin_cpu, thread_work, DeadlineOptions};
use crate::sched::{self, Policy};
use crate::workload::thread_cpu_ns;
use crate::{Error, Result};
use schedkit_core::scenario::{Region, Task};
use schedkit_core::trace::Event;
use schedkit_core::Nanos;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

pub(super) fn monotonic_ns() -> u64 {
    crate::clock_ns(libc::CLOCK_MONOTONIC)
}

fn sleep_until(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is valid; a signal interruption just wakes us early, and we loop.
    while monotonic_ns() < ns {
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
}

/// The fork/join state of one task, shared by its master and workers.
struct Fork {
    state: Mutex<ForkState>,
    go: Condvar,
    done: Condvar,
}

struct ForkState {
    /// Bumped at every fork.
    generation: u64,
    /// Thread times of the current parallel region.
    times: Vec<u64>,
    remaining: usize,
    stop: bool,
}

/// Start latch: `None` while threads set up, then whether to run.
pub(super) struct Latch {
    pub(super) go: Mutex<Option<bool>>,
    pub(super) cv: Condvar,
}

impl Latch {
    fn wait(&self) -> bool {
        let mut g = self.go.lock().expect("latch");
        while g.is_none() {
            g = self.cv.wait(g).expect("latch");
        }
        g.expect("set")
    }
    pub(super) fn open(&self, run: bool) {
        *self.go.lock().expect("latch") = Some(run);
        self.cv.notify_all();
    }
}

/// What a task thread hands back when it ends: its task and its CPU time over the run (a
/// master's jobs went to its queue as it ran them).
pub(super) struct ThreadOut {
    pub(super) task: usize,
    pub(super) cpu_ns: u64,
}

/// What every thread of a run shares: the start latch, the origin (set just before the
/// latch opens), the release window, the scheduling flags, and where each thread reports
/// its setup (its label and the result of entering SCHED_DEADLINE).
pub(super) struct Shared {
    pub(super) latch: Arc<Latch>,
    pub(super) origin: Arc<AtomicU64>,
    pub(super) window: u64,
    pub(super) flags: u64,
    pub(super) setup: std::sync::mpsc::Sender<(String, Result<i32>)>,
}

/// The threads of a run and their TIDs (for the perf counters), per task; and each
/// master's event queue as the drain reads it.
#[derive(Default)]
pub(super) struct Threads {
    pub(super) handles: Vec<std::thread::JoinHandle<ThreadOut>>,
    pub(super) tids: Vec<(usize, Arc<AtomicI32>)>,
    pub(super) sources: Vec<Source>,
}

/// Starts task `ti`'s workers (one per thread of its widest parallel region) and its
/// master, each entering SCHED_DEADLINE with its own budget and then waiting at the latch.
pub(super) fn spawn_task(
    ti: usize,
    task: &Task,
    opts: &DeadlineOptions,
    shared: &Shared,
    threads: &mut Threads,
) -> Result<()> {
    let (master_work, workers) = thread_work(task);
    let fork = Arc::new(Fork {
        state: Mutex::new(ForkState {
            generation: 0,
            // Room for the widest region: a fork refills it without allocating.
            times: Vec::with_capacity(workers.len()),
            remaining: 0,
            stop: false,
        }),
        go: Condvar::new(),
        done: Condvar::new(),
    });
    for (k, &work) in workers.iter().enumerate() {
        let enter = Enter::new(
            format!("task \"{}\" worker {k}", task.name()),
            budget(work, task, opts),
            shared,
            ti,
            threads,
        );
        let fork = fork.clone();
        let h = std::thread::Builder::new()
            .name(format!("dl-{}-{k}", task.name()))
            .spawn(move || {
                let run = enter.enter();
                let cpu0 = thread_cpu_ns();
                if run {
                    worker_body(&fork, k);
                }
                ThreadOut {
                    task: ti,
                    cpu_ns: thread_cpu_ns() - cpu0,
                }
            })
            .map_err(|e| Error::io("spawn a sched-deadline worker", e))?;
        threads.handles.push(h);
    }
    let enter = Enter::new(
        format!("task \"{}\" master", task.name()),
        budget(master_work, task, opts),
        shared,
        ti,
        threads,
    );
    let (origin, window, task) = (shared.origin.clone(), shared.window, task.clone());
    // Allocated here, before the master exists: it never allocates (see `super::stream`).
    let queue = Arc::new(JobQueue::new(&task, window));
    threads
        .sources
        .push(Source::new(queue.clone(), task.clone(), window));
    let h = std::thread::Builder::new()
        .name(format!("dl-{}", task.name()))
        .spawn(move || {
            let run = enter.enter();
            let cpu0 = thread_cpu_ns();
            if run {
                master_body(
                    ti,
                    &task,
                    &fork,
                    origin.load(Ordering::SeqCst),
                    window,
                    &queue,
                );
            }
            let mut st = fork.state.lock().expect("fork");
            st.stop = true;
            fork.go.notify_all();
            drop(st);
            ThreadOut {
                task: ti,
                cpu_ns: thread_cpu_ns() - cpu0,
            }
        })
        .map_err(|e| Error::io("spawn a sched-deadline master", e))?;
    threads.handles.push(h);
    Ok(())
}

/// How a task thread starts: it records its TID, enters SCHED_DEADLINE with its budget,
/// reports that, and waits for the latch.
struct Enter {
    label: String,
    policy: Policy,
    flags: u64,
    tid: Arc<AtomicI32>,
    latch: Arc<Latch>,
    setup: std::sync::mpsc::Sender<(String, Result<i32>)>,
}

impl Enter {
    fn new(label: String, policy: Policy, shared: &Shared, ti: usize, t: &mut Threads) -> Enter {
        let tid = Arc::new(AtomicI32::new(0));
        t.tids.push((ti, tid.clone()));
        Enter {
            label,
            policy,
            flags: shared.flags,
            tid,
            latch: shared.latch.clone(),
            setup: shared.setup.clone(),
        }
    }

    /// On the new thread: whether to run (the latch says stop when any setup failed).
    fn enter(self) -> bool {
        self.tid.store(crate::gettid(), Ordering::SeqCst);
        let entered = sched::set_thread_with_flags(0, self.policy, self.flags).map(|_| 0);
        let _ = self.setup.send((self.label, entered));
        drop(self.setup);
        self.latch.wait()
    }
}

/// A worker: at each fork, its share of the parallel region (thread `k`'s time), then the
/// join; until the master says stop.
fn worker_body(fork: &Fork, k: usize) {
    let mut seen = 0;
    loop {
        let mut st = fork.state.lock().expect("fork");
        while st.generation == seen && !st.stop {
            st = fork.go.wait(st).expect("fork");
        }
        if st.stop {
            return;
        }
        seen = st.generation;
        let Some(&t) = st.times.get(k) else {
            continue;
        };
        drop(st);
        spin_cpu(t);
        let mut st = fork.state.lock().expect("fork");
        st.remaining -= 1;
        if st.remaining == 0 {
            fork.done.notify_one();
        }
    }
}

/// A master: for each release in the window (times from `origin`, the run's clock), wait
/// for it, push the job's release, run the regions (forking the parallel ones to the workers
/// and joining them), and push the job's finish. The release goes in when the master wakes
/// for it, not with the finish: a run cut short still shows the jobs it had released.
fn master_body(ti: usize, task: &Task, fork: &Fork, origin: u64, window: u64, queue: &JobQueue) {
    for j in 0.. {
        let release = release_of(task, j);
        if release >= window {
            break;
        }
        sleep_until(origin + release);
        queue.push(Event::JobRelease {
            t: Nanos(release),
            task: ti,
            job: j,
            deadline: Nanos(release + task.deadline().0),
        });
        for r in task.regions() {
            match r {
                Region::Seq(c) => spin_cpu(c.0),
                Region::Par(v) => {
                    let mut st = fork.state.lock().expect("fork");
                    st.times.clear();
                    st.times.extend(v.iter().map(|c| c.0));
                    st.remaining = v.len();
                    st.generation += 1;
                    fork.go.notify_all();
                    while st.remaining > 0 {
                        st = fork.done.wait(st).expect("fork");
                    }
                }
            }
        }
        queue.push(Event::JobFinish {
            t: Nanos(monotonic_ns() - origin),
            task: ti,
            job: j,
        });
    }
}
