//! Built-in synthetic workloads, run as real threads that really compute.
//!
//! | work | one iteration | stops |
//! |---|---|---|
//! | `spin` | 1024 steps of an xorshift generator | at `burst` CPU time, an iteration limit, or the stop flag |
//! | `stride` | one read-modify-write of the next element of an `array`-byte buffer, `stride` bytes on (seed 000's cyclic walk with increasing element values) | same |
//! | `barrier` | `compute` of busy work, then a sense-reversing spin barrier across the process' threads | when any thread of the process is done (so none waits forever) |
//! | `pingpong` | one pass of a token between thread pairs (2k, 2k+1) through shared memory, busy waiting | same as barrier, per pair |
//!
//! Every thread measures its own CPU time (`CLOCK_THREAD_CPUTIME_ID`) to honour `burst`, and
//! its own progress: the largest wall-clock gap between two consecutive chunks of work (a
//! chunk is tens of microseconds) is its *longest stall*, the time it was kept off the CPU
//! at a stretch (preempted, throttled, or interrupted). The sampler reads these through
//! [`ThreadShared`].
//!
//! A `spin` process with a `pattern` alternates: compute until the thread's CPU clock has
//! advanced by the run phase, then sleep with `clock_nanosleep(CLOCK_MONOTONIC,
//! TIMER_ABSTIME)` until the phase's end (timer slack set to 1 ns, so the kernel does not
//! defer the wake-up by its default 50 us). How late each wake-up ran (the time from the
//! timer's expiry to the thread running again: timer interrupt plus run-queue wait) is its
//! *wake-up latency*; the samples of every patterned thread are kept in a registry that the
//! process running the workload drains with [`take_wake_latencies`] (the fidelity
//! experiment does, after `engine::run`). Sleeping gaps do not count as stalls.

use schedkit_core::scenario::{Phase, Work};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Wake-up latencies of one patterned thread, ns, in order.
#[derive(Clone, Debug, Default)]
pub struct WakeLatencies {
    pub process: String,
    pub thread: u32,
    pub samples: Vec<u64>,
}

static WAKE_REGISTRY: Mutex<Vec<WakeLatencies>> = Mutex::new(Vec::new());

/// Takes the wake-up latencies recorded by every patterned thread that finished since the
/// last call (module docs).
pub fn take_wake_latencies() -> Vec<WakeLatencies> {
    std::mem::take(&mut *WAKE_REGISTRY.lock().unwrap_or_else(|e| e.into_inner()))
}

/// What one worker thread publishes to the sampler.
#[derive(Default, Debug)]
pub struct ThreadShared {
    /// Kernel TID once the thread runs (0 before).
    pub tid: AtomicI32,
    pub iterations: AtomicU64,
    /// Nanoseconds since the run's origin when the thread finished (0: still running).
    pub finished_at: AtomicU64,
    /// Thread CPU time at finish (ns).
    pub cpu_at_finish: AtomicU64,
    /// Largest gap between two consecutive chunks (ns).
    pub longest_stall: AtomicU64,
}

/// Parameters of one process's built-in workload.
#[derive(Clone, Debug)]
pub struct WorkSpec {
    pub work: Work,
    pub threads: u32,
    /// CPU time per thread (ns).
    pub burst: Option<u64>,
    /// Iterations per thread (used by experiments that fix the amount of work).
    pub iterations: Option<u64>,
    /// Run and sleep phases (`spin` only; the scenario checks that).
    pub pattern: Option<Vec<Phase>>,
}

/// Thread CPU time of the calling thread (ns).
pub fn thread_cpu_ns() -> u64 {
    crate::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// State shared by the threads of one process.
struct Group {
    stop: Arc<AtomicBool>,
    /// Set when one thread is done, for workloads whose threads wait on each other.
    done: AtomicBool,
    barrier_count: AtomicUsize,
    barrier_sense: AtomicBool,
    tokens: Vec<AtomicU64>,
    array: Vec<AtomicU64>,
}

/// A running process of built-in threads.
pub struct Running {
    pub shared: Vec<Arc<ThreadShared>>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Whether every thread has finished.
    pub fn all_finished(&self) -> bool {
        self.shared
            .iter()
            .all(|s| s.finished_at.load(Ordering::Acquire) != 0)
    }
    pub fn iterations(&self) -> u64 {
        self.shared
            .iter()
            .map(|s| s.iterations.load(Ordering::Relaxed))
            .sum()
    }
    pub fn join(self) {
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// Starts the threads of `spec`. `origin` is the run's time zero; `setup(k)` runs first in
/// thread k (pinning, scheduling class) and may fail, which ends that thread at once.
pub fn start(
    name: &str,
    spec: &WorkSpec,
    origin: Instant,
    stop: Arc<AtomicBool>,
    setup: Arc<dyn Fn(u32) + Send + Sync>,
) -> std::io::Result<Running> {
    let n = spec.threads as usize;
    let array_words = match spec.work {
        Work::Stride { array, .. } => (array as usize / 8).max(1),
        _ => 0,
    };
    let group = Arc::new(Group {
        stop,
        done: AtomicBool::new(false),
        barrier_count: AtomicUsize::new(0),
        barrier_sense: AtomicBool::new(false),
        tokens: (0..n.div_ceil(2)).map(|_| AtomicU64::new(0)).collect(),
        // Seed 000's threads walk one shared array. A relaxed load then store (not an atomic
        // add) compiles to a plain read-modify-write, so the walk costs what a C loop costs;
        // an update lost between two threads does not matter to a benchmark.
        array: (0..array_words).map(|_| AtomicU64::new(0)).collect(),
    });
    let mut shared = Vec::new();
    let mut handles = Vec::new();
    for k in 0..spec.threads {
        let s = Arc::new(ThreadShared::default());
        shared.push(s.clone());
        let g = group.clone();
        let spec = spec.clone();
        let setup = setup.clone();
        let pname = name.to_string();
        let h = std::thread::Builder::new()
            .name(format!("{}.{k}", truncate(name)))
            .spawn(move || {
                s.tid.store(crate::gettid(), Ordering::Release);
                setup(k);
                let mut wakes = Vec::new();
                run_thread(k as usize, &spec, &g, &s, origin, &mut wakes);
                if spec.pattern.is_some() {
                    let rec = WakeLatencies {
                        process: pname,
                        thread: k,
                        samples: wakes,
                    };
                    WAKE_REGISTRY
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(rec);
                }
                s.cpu_at_finish.store(thread_cpu_ns(), Ordering::Relaxed);
                let at = (origin.elapsed().as_nanos() as u64).max(1);
                s.finished_at.store(at, Ordering::Release);
            })?;
        handles.push(h);
    }
    Ok(Running { shared, handles })
}

/// Thread names are limited to 15 bytes by the kernel.
fn truncate(name: &str) -> String {
    name.chars().take(10).collect()
}

/// Where a patterned thread is in its pattern.
struct Phases<'a> {
    pattern: &'a [Phase],
    i: usize,
    /// Thread CPU clock at which the current run phase ends.
    run_until: u64,
}

impl<'a> Phases<'a> {
    fn new(pattern: &'a [Phase], stop: &AtomicBool, wakes: &mut Vec<u64>) -> Phases<'a> {
        // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects this thread only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let mut p = Phases {
            pattern,
            i: 0,
            run_until: 0,
        };
        p.enter(stop, wakes);
        p
    }

    /// Sleeps through the sleep phases from `i` on, then starts the next run phase.
    fn enter(&mut self, stop: &AtomicBool, wakes: &mut Vec<u64>) {
        loop {
            match self.pattern[self.i] {
                Phase::Sleep(d) => {
                    if !stop.load(Ordering::Relaxed) {
                        wakes.push(sleep_until(crate::clock_ns(libc::CLOCK_MONOTONIC) + d.0));
                    }
                    self.i = (self.i + 1) % self.pattern.len();
                }
                Phase::Run(d) => {
                    self.run_until = thread_cpu_ns() + d.0;
                    return;
                }
            }
        }
    }

    /// After a chunk: whether the run phase is over (then it sleeps and moves on).
    fn after_chunk(&mut self, stop: &AtomicBool, wakes: &mut Vec<u64>) -> bool {
        if thread_cpu_ns() < self.run_until {
            return false;
        }
        self.i = (self.i + 1) % self.pattern.len();
        self.enter(stop, wakes);
        true
    }
}

/// Sleeps until CLOCK_MONOTONIC reaches `target` ns; returns how late it resumed, ns.
fn sleep_until(target: u64) -> u64 {
    let ts = libc::timespec {
        tv_sec: (target / 1_000_000_000) as libc::time_t,
        tv_nsec: (target % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
    crate::clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(target)
}

/// Runs chunks of work until a stop condition; records progress, stalls and, for patterned
/// threads, wake-up latencies into `wakes`.
fn run_thread(
    k: usize,
    spec: &WorkSpec,
    g: &Group,
    s: &ThreadShared,
    origin: Instant,
    wakes: &mut Vec<u64>,
) {
    let mut phases = spec
        .pattern
        .as_deref()
        .map(|p| Phases::new(p, &g.stop, wakes));
    let burst = spec.burst;
    let limit = spec.iterations.unwrap_or(u64::MAX);
    let cpu0 = thread_cpu_ns();
    let mut last = origin.elapsed().as_nanos() as u64;
    let mut longest = 0u64;
    let mut iters = 0u64;
    let mut rng: u64 = 0x9E37_79B9_7F4A_7C15 ^ (k as u64 + 1);
    let mut pos: usize = k * 4099;
    let mut sense = false;
    let mut chunks = 0u64;
    loop {
        // One chunk.
        let n = match &spec.work {
            Work::Spin => {
                for _ in 0..1024 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                }
                std::hint::black_box(rng);
                1
            }
            Work::Stride { stride, .. } => {
                let words = g.array.len();
                let step = ((*stride as usize) / 8).max(1);
                let todo = 256.min(limit - iters);
                for _ in 0..todo {
                    let w = &g.array[pos];
                    w.store(w.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
                    pos += step;
                    if pos >= words {
                        pos -= words;
                    }
                }
                todo
            }
            Work::Barrier { compute } => {
                let until = thread_cpu_ns() + compute.0;
                while thread_cpu_ns() < until {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                }
                std::hint::black_box(rng);
                // Sense-reversing barrier.
                sense = !sense;
                if g.barrier_count.fetch_add(1, Ordering::AcqRel) + 1 == spec.threads as usize {
                    g.barrier_count.store(0, Ordering::Relaxed);
                    g.barrier_sense.store(sense, Ordering::Release);
                } else {
                    while g.barrier_sense.load(Ordering::Acquire) != sense {
                        if g.done.load(Ordering::Relaxed) || g.stop.load(Ordering::Relaxed) {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                }
                1
            }
            Work::PingPong => {
                let pair = k / 2;
                let me = (k % 2) as u64;
                let partner_exists = k ^ 1 < spec.threads as usize;
                if partner_exists {
                    let t = &g.tokens[pair];
                    while t.load(Ordering::Acquire) % 2 != me {
                        if g.done.load(Ordering::Relaxed) || g.stop.load(Ordering::Relaxed) {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    t.fetch_add(1, Ordering::AcqRel);
                }
                1
            }
        };
        iters += n;
        chunks += 1;
        // Progress clock: a gap between chunks longer than a chunk is a stall.
        let now = origin.elapsed().as_nanos() as u64;
        longest = longest.max(now - last);
        last = now;
        if let Some(p) = &mut phases {
            if p.after_chunk(&g.stop, wakes) {
                // Asleep on purpose: not a stall.
                last = origin.elapsed().as_nanos() as u64;
            }
        }
        if chunks.is_multiple_of(16) {
            s.iterations.store(iters, Ordering::Relaxed);
            s.longest_stall.store(longest, Ordering::Relaxed);
        }
        let cpu_done = burst.is_some_and(|b| thread_cpu_ns() - cpu0 >= b);
        if cpu_done
            || iters >= limit
            || g.stop.load(Ordering::Relaxed)
            || g.done.load(Ordering::Relaxed)
        {
            break;
        }
    }
    if matches!(spec.work, Work::Barrier { .. } | Work::PingPong) {
        g.done.store(true, Ordering::Release);
    }
    s.iterations.store(iters, Ordering::Relaxed);
    s.longest_stall.store(longest, Ordering::Relaxed);
}
