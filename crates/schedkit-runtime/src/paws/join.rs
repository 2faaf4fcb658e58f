//! The plain (not real-time) fork-join API of the pool: [`join`] and [`super::RtPool::install`],
//! Rayon's scheme on the same worker threads. No fiber per join: `join(a, b)` pushes a
//! reference to `b` (which lives in the caller's stack frame) onto the worker's Chase-Lev deque,
//! runs `a`, then pops `b` back and runs it inline unless a thief took it; while a stolen `b`
//! runs elsewhere the caller runs other work. Fibers are for the real-time side, where a job
//! must be suspendable; plain work runs to completion on the worker's own stack and is not
//! preempted (a released job waits for the plain task on that core to end; docs/paws.md).
//!
//! Deadline bookkeeping stays on: every pushed half carries the deadline of the context that
//! forked it (`u64::MAX` for plain work), a thief runs it under that deadline, and steals are
//! counted.

use std::cell::{Cell, UnsafeCell};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use parking_lot::{Condvar, Mutex};

use super::Shared;

#[derive(Clone, Copy)]
struct JobRef {
    ptr: *const (),
    exec: unsafe fn(*const ()),
    deadline: u64,
}

// SAFETY: a JobRef points at a StackJob that stays alive until its latch is set (its owner
// waits for that), and the closure inside is Send.
unsafe impl Send for JobRef {}

/// [`StackJob::state`]: not finished, or finished; any larger value `ASLEEP + i`: not
/// finished and its owner, worker i, asleep waiting for it (the thief that finishes it must
/// unpark worker i). The owner's index travels in the state itself: once the thief has
/// published DONE the owner may return and free the job, so the thief must not read the job
/// after its swap, and a separate field would cost every join a store.
const PENDING: usize = 0;
const DONE: usize = 1;
const ASLEEP: usize = 2;

/// A closure in its owner's stack frame, run by whoever takes the JobRef.
struct StackJob<F, R> {
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
    state: AtomicUsize,
}

impl<F: FnOnce() -> R, R> StackJob<F, R> {
    fn new(f: F) -> Self {
        StackJob {
            f: UnsafeCell::new(Some(f)),
            result: UnsafeCell::new(None),
            state: AtomicUsize::new(PENDING),
        }
    }

    unsafe fn execute(p: *const ()) {
        let this = &*(p as *const Self);
        let f = (*this.f.get()).take().unwrap();
        *this.result.get() = Some(std::panic::catch_unwind(AssertUnwindSafe(f)));
        let prev = this.state.swap(DONE, AcqRel);
        if prev >= ASLEEP {
            wake_owner(prev - ASLEEP);
        }
    }

    fn as_ref(&self, deadline: u64) -> JobRef {
        JobRef {
            ptr: self as *const Self as *const (),
            exec: Self::execute,
            deadline,
        }
    }
}

/// The pool-wide part: the injector for `install`, the stealers, the sleepers.
pub(crate) struct Plain {
    injector: Injector<JobRef>,
    stealers: Vec<Stealer<JobRef>>,
    locals: Mutex<Vec<Option<Worker<JobRef>>>>,
    sleeping: AtomicUsize,
    /// Workers in the looking-for-work phase of their idle loop: they will find a push
    /// without being woken.
    spinning: AtomicUsize,
    parked: Box<[AtomicBool]>,
    pub steals: AtomicU64,
    /// Plain work was submitted at least once ([`install`]).
    used: AtomicBool,
}

impl Plain {
    pub(crate) fn new(n: usize) -> Plain {
        let locals: Vec<Worker<JobRef>> = (0..n).map(|_| Worker::new_lifo()).collect();
        Plain {
            injector: Injector::new(),
            stealers: locals.iter().map(|w| w.stealer()).collect(),
            locals: Mutex::new(locals.into_iter().map(Some).collect()),
            sleeping: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            parked: (0..n).map(|_| AtomicBool::new(false)).collect(),
            steals: AtomicU64::new(0),
            used: AtomicBool::new(false),
        }
    }

    /// Whether plain work was ever submitted to this pool.
    pub(crate) fn used(&self) -> bool {
        self.used.load(SeqCst)
    }

    /// A push wakes a parked worker only when nobody is awake looking for work (that one
    /// will find it), as Rayon does: an unpark is a system call on the forking path.
    #[inline]
    fn should_wake(&self) -> bool {
        self.sleeping.load(SeqCst) > 0 && self.spinning.load(SeqCst) == 0
    }

    fn has_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }
}

/// The calling worker's plain-side context.
struct Ctx {
    deque: Worker<JobRef>,
    index: usize,
    shared: *const Shared,
    deadline: Cell<u64>,
    rng: Cell<u64>,
}

thread_local! {
    static CTX: Cell<*const Ctx> = const { Cell::new(std::ptr::null()) };
}

#[inline]
fn ctx() -> *const Ctx {
    CTX.with(|c| c.get())
}

/// Installs the worker's plain context for the life of the returned guard.
pub(crate) struct Enter(#[allow(dead_code)] Box<Ctx>);

impl Drop for Enter {
    fn drop(&mut self) {
        CTX.with(|c| c.set(std::ptr::null()));
    }
}

pub(crate) fn enter(sh: &Shared, index: usize) -> Enter {
    let deque = sh.plain.locals.lock()[index]
        .take()
        .expect("one plain deque per worker");
    let b = Box::new(Ctx {
        deque,
        index,
        shared: sh,
        deadline: Cell::new(u64::MAX),
        rng: Cell::new(0x2545_f491_4f6c_dd1d ^ (index as u64 + 1)),
    });
    CTX.with(|c| c.set(&*b));
    Enter(b)
}

/// Runs `a` and `b`, potentially in parallel on the pool the caller runs on; outside a pool
/// worker both run one after the other on the calling thread. Panics propagate (after both
/// halves are done).
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let c = ctx();
    if c.is_null() {
        return (a(), b());
    }
    // SAFETY: the context lives as long as the worker thread we are on.
    let c = unsafe { &*c };
    let job_b = StackJob::new(b);
    c.deque.push(job_b.as_ref(c.deadline.get()));
    // SAFETY: the Shared outlives its workers.
    let plain = unsafe { &(*c.shared).plain };
    if plain.should_wake() {
        wake_one(unsafe { &*c.shared });
    }
    let ra = std::panic::catch_unwind(AssertUnwindSafe(a));
    // Take b back if nobody stole it (it is on top of the deque: `a`'s own pushes are popped
    // by `a`'s joins); else wait for the thief, running other work meanwhile.
    match c.deque.pop() {
        Some(j) if std::ptr::eq(j.ptr, &job_b as *const _ as *const ()) => {
            let f = unsafe { (*job_b.f.get()).take().unwrap() };
            let rb = std::panic::catch_unwind(AssertUnwindSafe(f));
            return finish(ra, rb);
        }
        Some(j) => {
            // b was stolen; j is a caller's further up this stack: back where it was, for
            // the wait to run only if b is not done yet.
            c.deque.push(j);
            wait_stolen(c, &job_b.state);
        }
        None => wait_stolen(c, &job_b.state),
    }
    let rb = unsafe { (*job_b.result.get()).take().unwrap() };
    finish(ra, rb)
}

fn finish<RA, RB>(ra: std::thread::Result<RA>, rb: std::thread::Result<RB>) -> (RA, RB) {
    match (ra, rb) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(p), _) | (_, Err(p)) => std::panic::resume_unwind(p),
    }
}

/// The owner of a stolen half waits until `state` is DONE, running its own deque's and
/// stolen work meanwhile, then backing off ([`Backoff`]) and at last sleeping until the thief
/// wakes it. Out of line: most joins take their half back and never come here.
#[cold]
#[inline(never)]
fn wait_stolen(c: &Ctx, state: &AtomicUsize) {
    // SAFETY: the Shared outlives its workers.
    let sh = unsafe { &*c.shared };
    let plain = &sh.plain;
    let mut idle = Backoff::default();
    while state.load(Acquire) != DONE {
        if help_once(c, plain) {
            idle = Backoff::default();
        } else if idle.snooze() {
            sleep_on(sh, c.index, state);
            idle = Backoff::default();
        }
    }
}

/// A thief finished the half of worker `owner`, which is asleep waiting for it.
#[cold]
fn wake_owner(owner: usize) {
    let c = ctx();
    if c.is_null() {
        return;
    }
    // SAFETY: a thief is a worker of the owner's pool (only its workers steal), and the
    // Shared outlives them.
    let sh = unsafe { &*(*c).shared };
    if let Some(t) = sh.workers[owner].thread.get() {
        t.unpark();
    }
}

/// How a worker waits for a stolen half (or a scope) when there is nothing to steal: a few
/// busy rounds (the thief is often about to finish), then rounds of `yield_now`, then sleep
/// (Rayon's `wait_until` does the same). The reason: on a CPU shared with other programs, a
/// worker that spins for a whole wait uses up its own share of that CPU doing nothing, so
/// when it has work again the kernel may run the other program first, and a pinned worker
/// cannot move to a freer CPU. Beside two CPU hogs the gain was within the benchmark's noise
/// (docs/results/runtime.md); the change is for the principle, not a measured speed-up.
#[derive(Default)]
struct Backoff {
    rounds: u32,
}

/// Busy rounds, then yields, then [`Backoff::snooze`] says sleep.
const BUSY_ROUNDS: u32 = 16;
const YIELD_ROUNDS: u32 = 32;

impl Backoff {
    /// One idle round; true when the caller should sleep now.
    fn snooze(&mut self) -> bool {
        self.rounds += 1;
        if self.rounds <= BUSY_ROUNDS {
            for _ in 0..(1 << self.rounds.min(6)) {
                std::hint::spin_loop();
            }
            false
        } else if self.rounds <= BUSY_ROUNDS + YIELD_ROUNDS {
            std::thread::yield_now();
            false
        } else {
            true
        }
    }
}

/// The owner of a stolen half sleeps until the thief finishes it (the thief unparks it, see
/// `StackJob::execute`) or until new plain work may be there to take: meanwhile it counts as
/// a parked idle worker, so that a push wakes it as it wakes any idle worker.
fn sleep_on(sh: &Shared, core: usize, state: &AtomicUsize) {
    let plain = &sh.plain;
    plain.parked[core].store(true, SeqCst);
    plain.sleeping.fetch_add(1, SeqCst);
    // Announced before the last look (as in `run_plain`): a thief that finishes now sees
    // ASLEEP + core and unparks us; a push now sees us in `sleeping`.
    let asleep = match state.compare_exchange(PENDING, ASLEEP + core, AcqRel, Acquire) {
        Ok(_) => true,
        Err(s) => s != DONE,
    };
    if asleep && !plain.has_work() {
        super::worker::park(sh);
    }
    plain.sleeping.fetch_sub(1, SeqCst);
    plain.parked[core].store(false, SeqCst);
}

/// One round of helping while a wait lasts (a join's stolen half, a scope's spawns): run a
/// job of our own deque, else steal one. Whether anything ran.
#[inline(always)]
fn help_once(c: &Ctx, plain: &Plain) -> bool {
    if let Some(j) = c.deque.pop() {
        // SAFETY: a job on our deque stays valid until it is run (its owner waits for it).
        unsafe { (j.exec)(j.ptr) };
        true
    } else {
        steal_one(c, plain)
    }
}

/// Steals one plain job (injector first, then a random other worker's deque top) and runs it
/// under its deadline.
fn steal_one(c: &Ctx, plain: &Plain) -> bool {
    match steal(c, plain) {
        Some(j) => {
            run_stolen(c, plain, j);
            true
        }
        None => false,
    }
}

fn run_stolen(c: &Ctx, plain: &Plain, j: JobRef) {
    plain.steals.fetch_add(1, Relaxed);
    let saved = c.deadline.replace(j.deadline);
    // SAFETY: the job's owner waits for it.
    unsafe { (j.exec)(j.ptr) };
    c.deadline.set(saved);
}

fn steal(c: &Ctx, plain: &Plain) -> Option<JobRef> {
    let mut got = None;
    loop {
        match plain.injector.steal_batch_and_pop(&c.deque) {
            Steal::Success(j) => {
                got = Some(j);
                break;
            }
            Steal::Retry => continue,
            Steal::Empty => break,
        }
    }
    if got.is_none() {
        let n = plain.stealers.len();
        if n > 1 {
            let mut x = c.rng.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.rng.set(x);
            let start = (x % n as u64) as usize;
            'outer: for k in 0..n {
                let v = (start + k) % n;
                if v == c.index {
                    continue;
                }
                loop {
                    match plain.stealers[v].steal() {
                        Steal::Success(j) => {
                            got = Some(j);
                            break 'outer;
                        }
                        Steal::Retry => continue,
                        Steal::Empty => break,
                    }
                }
            }
        }
    }
    got
}

fn wake_one(sh: &Shared) {
    // Claim one parked worker (its flag goes false here), so that pushes racing with its
    // wake-up do not unpark it again and again.
    for (i, p) in sh.plain.parked.iter().enumerate() {
        if p.compare_exchange(true, false, SeqCst, Relaxed).is_ok() {
            if let Some(t) = sh.workers[i].thread.get() {
                t.unpark();
            }
            return;
        }
    }
}

/// How long an idle worker keeps looking for work before it parks. Waking a parked worker
/// costs the forking side an unpark and the fork tens of microseconds on a loaded machine, so
/// a worker that just ran out of work stays available for a while (Rayon's workers likewise
/// look through many rounds before they sleep); 200 us bounds the CPU it burns.
const IDLE_SPIN: Duration = Duration::from_micros(200);

/// The first part of [`IDLE_SPIN`], spun without `yield_now` (see `run_plain`): long enough
/// for a caller on another CPU that gets it at once to take the result and push the next
/// `install` (10-20 us here, traced beside two CPU hogs), short enough that a caller woken
/// on this worker's own CPU is not held for long.
const IDLE_PURE_SPIN: Duration = Duration::from_micros(50);

/// The worker's idle step on the plain side: its own deque, then stealing; spins up to
/// [`IDLE_SPIN`] for work before telling the caller to park, announcing itself as a sleeper so
/// that a push unparks it; parks it (through `worker::park`) when nothing came.
pub(crate) fn run_plain(sh: &Shared, core: usize) -> Idle {
    let c = ctx();
    if c.is_null() {
        return Idle::Park;
    }
    // SAFETY: our own context.
    let c = unsafe { &*c };
    let plain = &sh.plain;
    let start = Instant::now();
    let until = start + IDLE_SPIN;
    // Unpinned workers yield at once, as before: the kernel can move them off a busy CPU,
    // and with the pure spin two unpinned workers on a loaded machine ran at one worker's
    // speed in 3 of 6 interleaved runs (fib(22), every call forking: 10-11 ns per join
    // against 6 ns).
    let pure_until = if sh.cfg.pin {
        start + IDLE_PURE_SPIN
    } else {
        start
    };
    // Counted as spinning only while looking: a worker running what it found is not going
    // to pick up the next push.
    plain.spinning.fetch_add(1, SeqCst);
    let found = loop {
        if let Some(j) = c.deque.pop() {
            break Some((j, false));
        }
        if let Some(j) = steal(c, plain) {
            break Some((j, true));
        }
        if sh.workers[core].kick.load(Relaxed) || Instant::now() >= until || sh.stop.load(Relaxed) {
            break None;
        }
        // Spin first, yield after `IDLE_PURE_SPIN`. Under EEVDF (Linux 6.6 on) a
        // `sched_yield` beside a CPU-bound thread gives that thread the CPU for the rest of
        // its slice: the yielder's virtual runtime jumps to its deadline, so it is not
        // eligible again until the other has run, and it gets the CPU back only at a tick
        // (4 ms at HZ=250). Meanwhile this worker still counts as looking (`spinning`), so
        // the next `install` does not unpark it, and being runnable it gets no wake-up
        // preemption either: beside a CPU hog, one pinned worker that yielded at once waited
        // out one tick per `install` (fib(22): 113-139 ns per join against 11 ns quiet,
        // docs/results/runtime.md). The caller on the other CPU pushes within the pure spin.
        // After it, yield: the thread that will push the next work (a caller woken from
        // `install`) may be waiting for this very CPU, and on an idle CPU a yield costs
        // nothing. A SCHED_FIFO worker yields only to threads of its own priority and a kick
        // ends the loop, so real-time behaviour is unchanged.
        if Instant::now() < pure_until {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
    };
    let left = plain.spinning.fetch_sub(1, SeqCst) - 1;
    if found.is_some() && left == 0 && plain.sleeping.load(SeqCst) > 0 {
        // The last awake idle worker found work: there may be more, wake a sleeper to look
        // (Rayon's rule), so a burst of forks ramps up one wake-up at a time per thief
        // instead of one per push.
        wake_one(sh);
    }
    match found {
        Some((j, true)) => {
            run_stolen(c, plain, j);
            return Idle::Ran;
        }
        Some((j, false)) => {
            // SAFETY: the job's owner waits for it.
            unsafe { (j.exec)(j.ptr) };
            return Idle::Ran;
        }
        None => {}
    }
    plain.parked[core].store(true, SeqCst);
    plain.sleeping.fetch_add(1, SeqCst);
    let work = plain.has_work() || sh.workers[core].kick.swap(false, SeqCst);
    if !work {
        super::worker::park(sh);
    }
    plain.sleeping.fetch_sub(1, SeqCst);
    plain.parked[core].store(false, SeqCst);
    if work {
        Idle::Ran
    } else {
        Idle::Woken
    }
}

/// What a worker's idle step did.
pub(crate) enum Idle {
    /// Ran plain work (or found some to look at): look again at once.
    Ran,
    /// Nothing to do: the caller parks.
    Park,
    /// Slept and was woken (or timed out).
    Woken,
}

/// A plain fork-join scope (see [`scope`]): spawned closures may borrow from `'env`.
pub struct Scope<'env> {
    pending: AtomicUsize,
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    _env: std::marker::PhantomData<&'env mut &'env ()>,
}

/// A closure of a [`Scope`], boxed: a scope spawns any number of them.
struct HeapJob<F> {
    f: F,
    /// The `Scope` (lifetime erased: it waits for this job before it goes away).
    scope: *const (),
}

impl<F: FnOnce()> HeapJob<F> {
    unsafe fn execute(p: *const ()) {
        let job = Box::from_raw(p as *mut Self);
        let scope = &*(job.scope as *const Scope<'static>);
        let f = job.f;
        if let Err(e) = std::panic::catch_unwind(AssertUnwindSafe(f)) {
            scope.panic.lock().get_or_insert(e);
        }
        // Last touch of the scope: it may return as soon as this reaches 0.
        scope.pending.fetch_sub(1, Release);
    }
}

impl<'env> Scope<'env> {
    /// Runs `f` on the pool, possibly in parallel with the rest of the scope (at once when the
    /// caller is not a pool worker).
    pub fn spawn<F: FnOnce() + Send + 'env>(&self, f: F) {
        let c = ctx();
        if c.is_null() {
            f();
            return;
        }
        // SAFETY: our own worker context.
        let c = unsafe { &*c };
        self.pending.fetch_add(1, Relaxed);
        let job = Box::new(HeapJob {
            f,
            scope: self as *const Scope<'env> as *const (),
        });
        c.deque.push(JobRef {
            ptr: Box::into_raw(job) as *const (),
            exec: HeapJob::<F>::execute,
            deadline: c.deadline.get(),
        });
        // SAFETY: the Shared outlives its workers.
        let sh = unsafe { &*c.shared };
        if sh.plain.should_wake() {
            wake_one(sh);
        }
    }
}

/// An irregular plain fork-join region: `f` spawns any number of closures with
/// [`Scope::spawn`]; returns when `f` and all of them finished, running pool work meanwhile.
/// The first panic among them is propagated.
pub fn scope<'env, R>(f: impl FnOnce(&Scope<'env>) -> R) -> R {
    let s = Scope {
        pending: AtomicUsize::new(0),
        panic: Mutex::new(None),
        _env: std::marker::PhantomData,
    };
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| f(&s)));
    let c = ctx();
    if !c.is_null() {
        // SAFETY: our own worker context.
        let c = unsafe { &*c };
        let plain = unsafe { &(*c.shared).plain };
        // No sleeping here (no thief knows to wake a scope's owner): busy rounds, then
        // yields, as `join` does before it sleeps.
        let mut idle = Backoff::default();
        while s.pending.load(Acquire) > 0 {
            if help_once(c, plain) {
                idle = Backoff::default();
            } else if idle.snooze() {
                idle.rounds = BUSY_ROUNDS;
            }
        }
    }
    if let Some(p) = s.panic.lock().take() {
        std::panic::resume_unwind(p);
    }
    match r {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// A closure sent to the pool from outside; its caller sleeps on `gate` until it is done.
struct InstallJob<F, R> {
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<std::thread::Result<R>>>,
    gate: Mutex<bool>,
    cv: Condvar,
}

impl<F: FnOnce() -> R, R> InstallJob<F, R> {
    unsafe fn execute(p: *const ()) {
        let this = &*(p as *const Self);
        let f = (*this.f.get()).take().unwrap();
        *this.result.get() = Some(std::panic::catch_unwind(AssertUnwindSafe(f)));
        // The result is stored before the caller can see the flag: it must not wake up only
        // to wait for us (a woken caller may preempt this worker on its CPU).
        let mut g = this.gate.lock();
        *g = true;
        this.cv.notify_one();
        drop(g);
    }
}

/// Runs `f` on a worker of `sh`'s pool (at once if the caller is one) and waits.
pub(crate) fn install<F: FnOnce() -> R + Send, R: Send>(sh: &Shared, f: F) -> R {
    let c = ctx();
    if !c.is_null() && std::ptr::eq(unsafe { (*c).shared }, sh) {
        return f();
    }
    let job = InstallJob {
        f: UnsafeCell::new(Some(f)),
        result: UnsafeCell::new(None),
        gate: Mutex::new(false),
        cv: Condvar::new(),
    };
    // From now on idle workers sleep with a time-out (see `worker::park`).
    sh.plain.used.store(true, SeqCst);
    sh.plain.injector.push(JobRef {
        ptr: &job as *const InstallJob<F, R> as *const (),
        exec: InstallJob::<F, R>::execute,
        deadline: u64::MAX,
    });
    // The push must be visible before we read who sleeps, or a worker that is just going to
    // sleep and we could both miss each other (it checks for work after announcing itself).
    std::sync::atomic::fence(SeqCst);
    if sh.plain.should_wake() {
        wake_one(sh);
    }
    let mut done = job.gate.lock();
    while !*done {
        job.cv.wait(&mut done);
    }
    drop(done);
    // SAFETY: set before the gate was opened.
    match unsafe { (*job.result.get()).take().unwrap() } {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    }
}
