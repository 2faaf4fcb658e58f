//! What a job's code sees: [`Job`] (identity, preemption point, synthetic work) and its
//! parallel regions: [`Job::parallel`], [`Job::scope`] / [`JobScope::spawn`], [`Job::join`].
//!
//! A region's threads go to the local deque of the core running the job (rule B; under Gedf to
//! the global queue), each runs on its own fiber, and the job suspends at the end of the region
//! until all of them finished. The job's fiber stack holds the region, which is why spawned
//! closures may borrow from the job: the job cannot leave the scope before they are done.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use super::queues::{Item, Kind};
use super::worker::{self, Suspend, ThreadStart, Unit};
use super::JobMeta;

/// A released job, as its code sees it.
pub struct Job {
    meta: Arc<JobMeta>,
}

impl Job {
    pub(crate) fn new(meta: Arc<JobMeta>) -> Job {
        Job { meta }
    }

    /// Index of the task (registration order); `usize::MAX` for a one-shot job.
    pub fn task(&self) -> usize {
        self.meta.task
    }

    /// Job number within its task, from 0.
    pub fn index(&self) -> u64 {
        self.meta.index
    }

    /// Release time on the pool's clock.
    pub fn release(&self) -> Duration {
        Duration::from_nanos(self.meta.release)
    }

    /// Absolute deadline on the pool's clock.
    pub fn deadline(&self) -> Duration {
        Duration::from_nanos(self.meta.deadline)
    }

    /// A preemption point (see [`super::checkpoint`]).
    pub fn checkpoint(&self) {
        worker::checkpoint();
    }

    /// NOP-loop work of `d` CPU time, with a preemption point every 10 us.
    pub fn work(&self, d: Duration) {
        super::spin(d.as_nanos() as u64)
    }

    /// A parallel region of `n` threads running `f(0..n)`; returns when all finished.
    pub fn parallel<F: Fn(usize) + Sync>(&self, n: usize, f: F) {
        self.scope(|s| {
            let f = &f;
            // Nothing else happens before the region's end: this core takes one thread at once.
            s.spawn_keeping((0..n).map(|i| move || f(i)), 1);
        })
    }

    /// `a` on this job's fiber and `b` as a parallel thread (stealable by another core);
    /// returns both results when both finished.
    pub fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA,
        B: FnOnce() -> RB + Send,
        RB: Send,
    {
        let mut rb = None;
        let ra = self.scope(|s| {
            let slot = &mut rb;
            s.spawn(move || *slot = Some(b()));
            a()
        });
        (ra, rb.expect("schedkit paws: the joined thread panicked"))
    }

    /// An irregular parallel region: `body` spawns threads (any number, decided at run time,
    /// of any length) with [`JobScope::spawn`]; returns when `body` and every thread finished.
    pub fn scope<'env, R>(&self, body: impl FnOnce(&JobScope<'env>) -> R) -> R {
        let s = JobScope {
            region: Region::new(),
            job: self.meta.clone(),
            spawned: Cell::new(0),
            _env: PhantomData,
        };
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| body(&s)));
        // Our own core's next pick is most often a thread of this region: run those here
        // (`run_inline`); wait only for what is left (stolen threads still running, or an
        // earlier-deadline entry that comes first). The worker resumes us only once every
        // thread of the region finished.
        if s.spawned.get() > 0 && !worker::run_inline(&s.region) {
            worker::suspend(Suspend::Wait(&s.region));
        }
        match r {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

/// The threads of one parallel region (see [`Job::scope`]).
pub struct JobScope<'env> {
    region: Region,
    job: Arc<JobMeta>,
    spawned: Cell<usize>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'env> JobScope<'env> {
    /// A thread of this region, pushed to the bottom of this core's deque for the job's
    /// deadline (rule B); another core may steal it from the top (rule E).
    pub fn spawn<F: FnOnce() + Send + 'env>(&self, f: F) {
        self.spawn_all(std::iter::once(f))
    }

    /// Several threads at once (one dispatcher lock for all).
    pub fn spawn_all<F: FnOnce() + Send + 'env>(&self, fs: impl IntoIterator<Item = F>) {
        self.spawn_keeping(fs, 0)
    }

    /// [`JobScope::spawn_all`] for a region whose own core takes `keep` of the threads at once
    /// (no idle core is woken for those; `Sched::spawn_keeping`).
    fn spawn_keeping<F: FnOnce() + Send + 'env>(
        &self,
        fs: impl IntoIterator<Item = F>,
        keep: usize,
    ) {
        let Some((sh, core)) = worker::here() else {
            // Not on a pool fiber: nothing can run them in parallel.
            for f in fs {
                f()
            }
            return;
        };
        let fs: Vec<Box<dyn FnOnce() + Send + 'static>> = fs
            .into_iter()
            .map(|f| {
                let b: Box<dyn FnOnce() + Send + 'env> = Box::new(f);
                // SAFETY: `Job::scope` does not return before every thread of the region
                // finished (the job waits on the region), so 'env outlives the closure's run.
                unsafe {
                    std::mem::transmute::<
                        Box<dyn FnOnce() + Send + 'env>,
                        Box<dyn FnOnce() + Send + 'static>,
                    >(b)
                }
            })
            .collect();
        if fs.is_empty() {
            return;
        }
        let n = fs.len();
        let c = &self.job.counters;
        c.add(&c.threads, n as u64);
        self.spawned.set(self.spawned.get() + n);
        let mut st = sh.state.lock();
        let d = self.job.deadline;
        let items: Vec<Item<Unit>> = fs
            .into_iter()
            .map(|f| {
                st.sched.item(
                    d,
                    Kind::Thread,
                    Unit::Thread(ThreadStart {
                        f,
                        region: &self.region,
                        job: self.job.clone(),
                    }),
                )
            })
            .collect();
        // SAFETY: under the state lock.
        unsafe { self.region.add(n) };
        for note in st.sched.spawn_keeping(core, items, keep) {
            sh.apply(&mut st, note);
        }
    }
}

/// Completion count of a region and the entry waiting for it. Only touched with the pool's
/// state lock held, which is what makes the `UnsafeCell` sound.
pub(crate) struct Region {
    inner: UnsafeCell<(usize, Option<Item<Unit>>)>,
}

impl Region {
    fn new() -> Region {
        Region {
            inner: UnsafeCell::new((0, None)),
        }
    }

    /// # Safety
    /// The caller holds the state lock.
    unsafe fn add(&self, n: usize) {
        (*self.inner.get()).0 += n;
    }

    /// Threads not finished yet (state lock held).
    pub(crate) fn remaining(&self) -> usize {
        // SAFETY: called under the state lock.
        unsafe { (*self.inner.get()).0 }
    }

    /// One thread finished (state lock held by the worker): the waiter, if this was the last.
    pub(crate) fn thread_done(&self) -> Option<Item<Unit>> {
        // SAFETY: called by a worker under the state lock.
        let r = unsafe { &mut *self.inner.get() };
        r.0 -= 1;
        if r.0 == 0 {
            r.1.take()
        } else {
            None
        }
    }

    /// The region's job asks to wait (state lock held): it comes back at once if every thread
    /// already finished, else it is kept here for the last thread to make ready.
    pub(crate) fn wait(&self, it: Item<Unit>) -> Option<Item<Unit>> {
        // SAFETY: as above.
        let r = unsafe { &mut *self.inner.get() };
        if r.0 == 0 {
            Some(it)
        } else {
            r.1 = Some(it);
            None
        }
    }
}

#[allow(dead_code)]
fn _assert_sync() {
    fn s<T: Send + Sync>() {}
    s::<Job>();
    let _ = Relaxed;
}
