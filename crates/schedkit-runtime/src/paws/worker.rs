//! The workers: each one executes what [`super::queues::Sched`] picks for its core, on fibers,
//! and reports back what happened (finished, preempted, waiting for a region). And the releaser
//! thread that releases periodic jobs.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::*;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use corosensei::{Coroutine, CoroutineResult, Yielder};
use schedkit_linux::affinity;
use schedkit_linux::perf::{CounterKind, CounterSet, PerfSource, Reading, Target};
use schedkit_linux::sched::{self, Policy};

use super::job::{Job, Region};
use super::queues::{Item, Kind, Origin};
use super::stats::{PoolCountersAtomic, WorkerKernel};
use super::{Body, JobMeta, Shared, State};
use crate::stack::{self, FiberStack};

/// Why a fiber switched back to its worker.
pub(crate) enum Suspend {
    /// Stopped at a preemption point.
    Preempt,
    /// A job (or thread) waits for the threads of its region.
    Wait(*const Region),
}

type Co = Coroutine<(), Suspend, (), FiberStack>;

/// A thread of a parallel region, not started yet. The closure's lifetime is erased: the job
/// that spawned it waits in its scope until every thread finished, so what it borrows lives.
pub(crate) struct ThreadStart {
    pub f: Box<dyn FnOnce() + Send>,
    pub region: *const Region,
    pub job: Arc<JobMeta>,
}

/// A started job or thread.
pub(crate) struct Fib {
    co: Option<Co>,
    yielder: Cell<*const Yielder<(), Suspend>>,
    job: Arc<JobMeta>,
    /// For a thread: its region.
    region: *const Region,
    last_core: usize,
    /// Why it last switched out (what its next switch-in is counted as).
    last: Cell<Last>,
    /// Its own entry header (seq, kind, spawned_on), set when it first runs.
    own: (u64, Kind, usize),
    /// While it runs a thread of its region inline (`run_inline`): that thread's seq and
    /// spawning core, so that a preemption there puts it back as that thread (rule ii).
    inline: Cell<Option<(u64, usize)>>,
    guard: (usize, usize),
    size: usize,
}

/// Why a fiber last switched back to its worker.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Preempted,
    Waited,
}

/// What a queue entry carries.
pub(crate) enum Unit {
    Job(Arc<JobMeta>),
    Thread(ThreadStart),
    Fiber(Box<Fib>),
}

// SAFETY: a unit is created from `Send` closures and runs on one worker at a time; the raw
// pointers point into the stack of a job that outlives the unit (see `ThreadStart`).
unsafe impl Send for Unit {}

struct Current {
    shared: *const Shared,
    core: usize,
    fib: *const Fib,
}

thread_local! {
    static CUR: Cell<*const Current> = const { Cell::new(std::ptr::null()) };
}

/// The worker context and fiber of the calling code (null outside a pool fiber). Not inlined:
/// a fiber may resume on another worker, and a cached thread-local address would be stale.
#[inline(never)]
fn current() -> *const Current {
    CUR.with(|c| c.get())
}

/// `(shared, core)` of the worker running the calling fiber.
pub(crate) fn here() -> Option<(&'static Shared, usize)> {
    let c = current();
    if c.is_null() {
        return None;
    }
    // SAFETY: set by the worker for the duration of the resume; the Shared outlives workers.
    unsafe { Some((&*(*c).shared, (*c).core)) }
}

pub(crate) fn checkpoint() {
    let c = current();
    if c.is_null() {
        return;
    }
    // SAFETY: as in `here`.
    let (sh, core) = unsafe { (&*(*c).shared, (*c).core) };
    if sh.workers[core].preempt.load(Acquire) {
        suspend(Suspend::Preempt);
    }
}

/// Switches the running fiber back to its worker with `s`.
pub(crate) fn suspend(s: Suspend) {
    let c = current();
    assert!(!c.is_null(), "schedkit paws: suspend outside a pool fiber");
    // SAFETY: the fiber is running, so its Fib and yielder are alive.
    unsafe {
        let y = (*(*c).fib).yielder.get();
        (*y).suspend(s);
    }
}

/// Called by a job (or thread) that opened a parallel region and has nothing else to do
/// before it waits for it: while the next entry its core would pick by rule C is a thread of
/// this region not started yet, that thread runs right here, on the caller's fiber, instead of
/// the caller switching out and the worker switching into a fresh fiber for it (two fiber
/// switches saved per such thread, and the job's switch back in when the last one is done).
/// The dispatcher sees exactly what `pick` would have done: the thread becomes the core's
/// running entry with origin `Local` (`Sched::take_inline`). It stays preemptible at its
/// checkpoints: a preemption suspends this fiber with the thread on top, and the worker files
/// the fiber as that thread (`Fib::inline`), so rule (ii) puts it back at the bottom of its
/// deque, and a thief that steals it (rule E) runs the thread's rest and then the caller's
/// (a preempted stolen entry goes to the global queue, rule F). Returns true when every thread
/// of the region has finished (the caller goes on without suspending), false when the caller
/// must wait for the region.
pub(crate) fn run_inline(region: &Region) -> bool {
    let rp: *const Region = region;
    loop {
        let c = current();
        if c.is_null() {
            return false;
        }
        // SAFETY: set by the worker for the duration of the resume; re-read after every
        // point where this fiber may have been suspended and resumed on another worker.
        let (sh, core, fib) = unsafe { (&*(*c).shared, (*c).core, &*(*c).fib) };
        let mut st = sh.state.lock();
        if region.remaining() == 0 {
            return true;
        }
        let Some(mine) = st.sched.running(core) else {
            return false;
        };
        let Some(it) = st.sched.take_inline(
            core,
            |it| matches!(&it.payload, Unit::Thread(t) if std::ptr::eq(t.region, rp)),
        ) else {
            return false;
        };
        fib.inline.set(Some((it.seq, it.spawned_on)));
        drop(st);
        PoolCountersAtomic::bump(&sh.counters.inline_threads);
        let Unit::Thread(ThreadStart { f, job, .. }) = it.payload else {
            unreachable!("take_inline accepts only threads not started yet")
        };
        if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
            job.counters.panicked.store(true, Relaxed);
        }
        drop(job);
        let c = current();
        // SAFETY: as above (the thread may have been preempted and resumed elsewhere).
        let (sh, now) = unsafe { (&*(*c).shared, (*c).core) };
        let mut st = sh.state.lock();
        fib.inline.set(None);
        let origin = if now == core || mine.kind == Kind::Job {
            mine.origin
        } else {
            Origin::Stolen
        };
        st.sched
            .resume_running(now, super::queues::Running { origin, ..mine });
        // Nobody waits on the region yet: this cannot hand back a waiter.
        let w = region.thread_done();
        debug_assert!(w.is_none());
    }
}

fn new_stack(sh: &Shared) -> FiberStack {
    sh.stacks.lock().pop().unwrap_or_else(|| {
        FiberStack::new(sh.cfg.stack_size, 16 * 1024)
            .expect("schedkit paws: cannot map a fiber stack")
    })
}

fn job_fiber(sh: &Shared, meta: Arc<JobMeta>) -> Box<Fib> {
    let stack = new_stack(sh);
    let (guard, size) = (stack.guard_range(), stack.size());
    let m = meta.clone();
    let shp = sh as *const Shared as usize;
    let co = Co::with_stack(stack, move |y: &Yielder<(), Suspend>, ()| {
        set_yielder(y);
        // SAFETY: the pool's Shared outlives every fiber (the pool waits for all jobs).
        let sh = unsafe { &*(shp as *const Shared) };
        let now = sh.now();
        m.counters.start.store(now, Relaxed);
        m.counters.started.store(true, Relaxed);
        if m.counters.preempting.load(Relaxed) {
            sh.latencies.lock().push(now.saturating_sub(m.release));
        }
        let job = Job::new(m.clone());
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| match &m.body {
            Body::Task(t) => (t.body)(&job),
            Body::Once(f) => {
                if let Some(f) = f.lock().take() {
                    f(&job)
                }
            }
        }));
        if r.is_err() {
            m.counters.panicked.store(true, Relaxed);
        }
    });
    Box::new(Fib {
        co: Some(co),
        yielder: Cell::new(std::ptr::null()),
        job: meta,
        region: std::ptr::null(),
        last_core: usize::MAX,
        last: Cell::new(Last::Preempted),
        own: (0, Kind::Job, usize::MAX),
        inline: Cell::new(None),
        guard,
        size,
    })
}

fn thread_fiber(sh: &Shared, t: ThreadStart) -> Box<Fib> {
    let stack = new_stack(sh);
    let (guard, size) = (stack.guard_range(), stack.size());
    let ThreadStart { f, region, job } = t;
    let j = job.clone();
    let co = Co::with_stack(stack, move |y: &Yielder<(), Suspend>, ()| {
        set_yielder(y);
        if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
            j.counters.panicked.store(true, Relaxed);
        }
    });
    Box::new(Fib {
        co: Some(co),
        yielder: Cell::new(std::ptr::null()),
        job,
        region,
        last_core: usize::MAX,
        last: Cell::new(Last::Preempted),
        own: (0, Kind::Job, usize::MAX),
        inline: Cell::new(None),
        guard,
        size,
    })
}

fn set_yielder(y: &Yielder<(), Suspend>) {
    // SAFETY: the worker set CUR to this fiber before resuming it.
    unsafe { (*(*current()).fib).yielder.set(y) };
}

/// What happened to the entry a worker ran.
enum Outcome {
    Done(Box<Fib>),
    Preempted(Box<Fib>),
    Wait(Box<Fib>, *const Region),
}

fn run(sh: &Shared, core: usize, it: &mut Option<Item<Unit>>, origin: Origin) -> Outcome {
    let item = it.as_mut().unwrap();
    let unit = std::mem::replace(&mut item.payload, Unit::Job(dummy()));
    let fresh = !matches!(unit, Unit::Fiber(_));
    let mut fib = match unit {
        Unit::Job(m) => job_fiber(sh, m),
        Unit::Thread(t) => thread_fiber(sh, t),
        Unit::Fiber(f) => f,
    };
    let c = &fib.job.counters;
    c.add(&c.switches, 1);
    let pc = &sh.counters;
    PoolCountersAtomic::bump(match (fresh, item.kind, fib.last.get()) {
        (true, Kind::Job, _) => &pc.fiber_job_starts,
        (true, Kind::Thread, _) => &pc.fiber_thread_starts,
        (false, Kind::Job, Last::Waited) => &pc.fiber_job_after_wait,
        (false, Kind::Job, Last::Preempted) => &pc.fiber_job_after_preempt,
        (false, Kind::Thread, _) => &pc.fiber_thread_resumes,
    });
    if fresh && item.kind == Kind::Thread {
        if origin == Origin::Stolen {
            c.add(&c.steals, 1);
        }
        if item.spawned_on != core {
            c.add(&c.migrations, 1);
        }
    } else if !fresh && fib.last_core != core {
        c.add(&c.migrations, 1);
    }
    fib.last_core = core;
    if fresh {
        fib.own = (item.seq, item.kind, item.spawned_on);
    }
    let cur = Current {
        shared: sh,
        core,
        fib: &*fib,
    };
    CUR.with(|x| x.set(&cur));
    stack::set_running(fib.guard, item.seq, fib.size);
    let r = fib.co.as_mut().unwrap().resume(());
    stack::clear_running();
    CUR.with(|x| x.set(std::ptr::null()));
    // What the fiber is now: itself, or the thread it was running inline when it stopped.
    (item.seq, item.kind, item.spawned_on) = match fib.inline.get() {
        Some((seq, spawned_on)) => (seq, Kind::Thread, spawned_on),
        None => fib.own,
    };
    match r {
        CoroutineResult::Return(()) => Outcome::Done(fib),
        CoroutineResult::Yield(Suspend::Preempt) => {
            fib.last.set(Last::Preempted);
            Outcome::Preempted(fib)
        }
        CoroutineResult::Yield(Suspend::Wait(r)) => {
            fib.last.set(Last::Waited);
            Outcome::Wait(fib, r)
        }
    }
}

/// A placeholder payload while the real one runs (never scheduled).
fn dummy() -> Arc<JobMeta> {
    static D: std::sync::OnceLock<Arc<JobMeta>> = std::sync::OnceLock::new();
    D.get_or_init(|| {
        Arc::new(JobMeta {
            task: usize::MAX,
            index: 0,
            release: 0,
            deadline: 0,
            counters: Default::default(),
            body: Body::Once(parking_lot::Mutex::new(None)),
        })
    })
    .clone()
}

/// Handles an outcome under the state lock; returns the entry to resume at once (a job whose
/// region had already completed when it asked to wait).
fn settle(
    sh: &Shared,
    st: &mut State,
    core: usize,
    mut item: Item<Unit>,
    out: Outcome,
) -> Option<Item<Unit>> {
    match out {
        Outcome::Done(mut fib) => {
            st.sched.stopped(core);
            let stack = fib.co.take().unwrap().into_stack();
            sh.stacks.lock().push(stack);
            if item.kind == Kind::Job {
                finish_job(sh, &fib.job);
                sh.job_done(st, fib.job.task);
            } else {
                // SAFETY: the region lives until its job resumes, which needs this count.
                let region = unsafe { &*fib.region };
                if let Some(waiter) = region.thread_done() {
                    sh.ready(st, waiter);
                }
            }
            None
        }
        Outcome::Preempted(fib) => {
            let c = &fib.job.counters;
            c.add(&c.preemptions, 1);
            item.payload = Unit::Fiber(fib);
            st.sched.preempted(core, item);
            None
        }
        Outcome::Wait(fib, region) => {
            item.payload = Unit::Fiber(fib);
            // SAFETY: the region is in the frame of the waiting fiber, which is suspended.
            let region = unsafe { &*region };
            match region.wait(item) {
                Some(again) => Some(again),
                None => {
                    st.sched.stopped(core);
                    None
                }
            }
        }
    }
}

fn finish_job(sh: &Shared, m: &JobMeta) {
    let now = sh.now();
    let c = &m.counters;
    sh.records.lock().push(super::JobRecord {
        task: m.task,
        index: m.index,
        release: m.release,
        deadline: m.deadline,
        start: c.start.load(Relaxed),
        finish: now,
        threads: c.threads.load(Relaxed),
        steals: c.steals.load(Relaxed),
        migrations: c.migrations.load(Relaxed),
        preemptions: c.preemptions.load(Relaxed),
        switches: c.switches.load(Relaxed),
        panicked: c.panicked.load(Relaxed),
    });
}

/// Pins the calling thread and raises it to SCHED_FIFO as configured; refusals become
/// warnings.
fn setup(sh: &Shared, what: &str, cpu: Option<usize>, prio: Option<u32>) {
    let mut w = Vec::new();
    if let Some(c) = cpu {
        if let Err(e) = affinity::pin_current(c) {
            w.push(format!("{what}: cannot pin to CPU {c}: {e}"));
        }
    }
    if let Some(p) = prio {
        if let Err(e) = sched::set_thread(0, Policy::Fifo { priority: p }) {
            w.push(format!(
                "{what}: SCHED_FIFO {p} not permitted ({e}); running SCHED_OTHER \
                 (run as root or grant CAP_SYS_NICE)"
            ));
        }
    }
    sh.warnings.lock().extend(w);
}

pub(crate) fn main(sh: Arc<Shared>, core: usize, cpu: Option<usize>, ready: Sender<()>) {
    stack::ensure_altstack();
    setup(&sh, &format!("worker {core}"), cpu, sh.cfg.fifo_priority);
    let mut counters = open_counters(&sh);
    let _plain = super::join::enter(&sh, core);
    let _ = sh.workers[core].thread.set(std::thread::current());
    let _ = ready.send(());
    drop(ready);
    let mut st = sh.state.lock();
    // Set after a park: a wake-up that finds nothing to run is counted.
    let mut woke = false;
    loop {
        // Whatever woke us is being looked at now.
        sh.workers[core].kick.store(false, Relaxed);
        let Some((item, origin)) = st.sched.pick(core) else {
            if sh.stop.load(SeqCst) && st.in_flight == 0 {
                break;
            }
            drop(st);
            if woke {
                PoolCountersAtomic::bump(&sh.counters.empty_wakes);
            }
            woke = match super::join::run_plain(&sh, core) {
                super::join::Idle::Ran => false,
                super::join::Idle::Park => {
                    park(&sh);
                    true
                }
                super::join::Idle::Woken => true,
            };
            st = sh.state.lock();
            continue;
        };
        woke = false;
        sh.workers[core].preempt.store(false, Release);
        drop(st);
        let mut slot = Some(item);
        loop {
            let out = run(&sh, core, &mut slot, origin);
            let item = slot.take().unwrap();
            let mut g = sh.state.lock();
            match settle(&sh, &mut g, core, item, out) {
                Some(again) => {
                    drop(g);
                    slot = Some(again);
                }
                None => {
                    st = g;
                    break;
                }
            }
        }
    }
    drop(st);
    let k = read_kernel(&sh, &format!("worker {core}"), cpu, counters.as_mut());
    sh.kernel.lock().push(k);
}

/// How long an idle worker sleeps at most when plain (non-real-time) work may be pushed: a
/// push that races with the worker going to sleep can miss it (see `join::run_plain`).
/// Real-time work never needs it (its wake-ups are issued under the state lock to cores the
/// dispatcher marked idle, and a thread's unpark token is never lost), so a pool that has
/// never run plain work sleeps until woken: a time-out is a kernel context switch.
const PLAIN_PARK_TIMEOUT: Duration = Duration::from_millis(20);

/// The worker sleeps until woken (or the plain-work time-out); counted.
pub(crate) fn park(sh: &Shared) {
    PoolCountersAtomic::bump(&sh.counters.parks);
    if sh.plain.used() {
        let t = std::time::Instant::now();
        std::thread::park_timeout(PLAIN_PARK_TIMEOUT);
        if t.elapsed() >= PLAIN_PARK_TIMEOUT {
            PoolCountersAtomic::bump(&sh.counters.park_timeouts);
        }
    } else {
        std::thread::park();
    }
}

fn open_counters(sh: &Shared) -> Option<CounterSet> {
    sh.cfg.perf.then(|| {
        CounterSet::open(
            &mut PerfSource,
            Target::Thread(schedkit_linux::gettid()),
            &[CounterKind::ContextSwitches, CounterKind::CpuMigrations],
        )
    })
}

fn read_kernel(
    sh: &Shared,
    what: &str,
    cpu: Option<usize>,
    counters: Option<&mut CounterSet>,
) -> WorkerKernel {
    let mut k = WorkerKernel {
        cpu,
        ..Default::default()
    };
    if let Some(rs) = counters.map(|c| c.read()) {
        for (kind, r) in rs {
            let v = match r {
                Reading::Value { value, .. } => Some(value),
                other => {
                    sh.warnings
                        .lock()
                        .push(format!("{what}: perf {}: {other:?}", kind.name()));
                    None
                }
            };
            match kind {
                CounterKind::ContextSwitches => k.context_switches = v,
                CounterKind::CpuMigrations => k.migrations = v,
                _ => {}
            }
        }
    }
    k
}

/// Releases periodic jobs at their release times until the pool stops releasing.
pub(crate) fn releaser(sh: Arc<Shared>, ready: Sender<()>) {
    setup(
        &sh,
        "releaser",
        None,
        sh.cfg.fifo_priority.map(|p| (p + 1).min(99)),
    );
    let mut counters = open_counters(&sh);
    let _ = sh.releaser.set(std::thread::current());
    let _ = ready.send(());
    drop(ready);
    loop {
        let mut st = sh.state.lock();
        if !st.releasing {
            drop(st);
            *sh.releaser_kernel.lock() = read_kernel(&sh, "releaser", None, counters.as_mut());
            return;
        }
        let now = sh.now();
        let mut next = u64::MAX;
        let mut due = Vec::new();
        let cutoff = st.cutoff;
        for (ti, t) in st.tasks.iter_mut().enumerate() {
            while t.next <= now && t.next < cutoff {
                due.push((
                    ti,
                    t.index,
                    t.next,
                    t.next + t.spec.deadline,
                    t.spec.clone(),
                ));
                t.index += 1;
                t.next += t.spec.period;
            }
            next = next.min(t.next);
        }
        for (ti, index, release, deadline, spec) in due {
            let meta = Arc::new(JobMeta {
                task: ti,
                index,
                release,
                deadline,
                counters: Default::default(),
                body: Body::Task(spec),
            });
            let it = st.sched.item(deadline, Kind::Job, Unit::Job(meta));
            st.in_flight += 1;
            let t = &mut st.tasks[ti];
            if t.busy {
                t.backlog.push_back(it);
            } else {
                t.busy = true;
                sh.ready(&mut st, it);
            }
        }
        drop(st);
        let wait = next.saturating_sub(sh.now());
        std::thread::park_timeout(Duration::from_nanos(wait.min(100_000_000)));
    }
}
