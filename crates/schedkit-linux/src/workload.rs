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

use schedkit_core::scenario::Work;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

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
        let h = std::thread::Builder::new()
            .name(format!("{}.{k}", truncate(name)))
            .spawn(move || {
                s.tid.store(crate::gettid(), Ordering::Release);
                setup(k);
                run_thread(k as usize, &spec, &g, &s, origin);
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

/// Runs chunks of work until a stop condition; records progress and stalls.
fn run_thread(k: usize, spec: &WorkSpec, g: &Group, s: &ThreadShared, origin: Instant) {
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
