//! The workers: each one executes what [`super::queues::Sched`] picks for its core, on fibers,
//! and reports back what happened (finished, preempted, waiting for a region). And the releaser
//! thread that releases periodic jobs.

use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::*;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use corosensei::{Coroutine, CoroutineResult, Yielder};
use priority_inheriting_lock::PriorityInheritingLock;
use schedkit_linux::affinity;
use schedkit_linux::perf::{CounterKind, CounterSet, PerfSource, Reading, Target};
use schedkit_linux::sched::{self, Policy};

use super::job::{Job, Region};
use super::queues::{Item, Kind, Origin};
use super::stats::{FiberHow, PoolCountersAtomic, PreemptionStages, StopHow, WorkerKernel};
use super::{Body, JobMeta, Shared};
use crate::stack::{self, FiberStack};

mod carriers;
mod releaser;
use carriers::{carrier, reserve_carrier, RESERVE, WARM_CAP};
pub(crate) use releaser::releaser;
use releaser::{open_counters, read_kernel};

/// Why a fiber switched back to its worker.
pub(crate) enum Suspend {
    /// Stopped at a preemption point.
    Preempt,
    /// A job (or thread) waits for the threads of its region.
    Wait(*const Region),
    /// A fiber that finished its entry picked (under the lock, as `Sched::pick`) a suspended
    /// fiber: the worker resumes that one; this one is free to carry new work.
    SwitchTo(Item<Unit>),
    /// A fiber that finished its entry found nothing to run and the worker's own stack must
    /// take the idle step (plain work, or the pool stops).
    Idle,
}

type Co = Coroutine<(), Suspend, (), FiberStack>;

/// A thread of a parallel region, not started yet. The closure's lifetime is erased: the job
/// that spawned it waits in its scope until every thread finished, so what it borrows lives.
pub(crate) struct ThreadStart {
    pub f: Box<dyn FnOnce() + Send>,
    pub region: *const Region,
    pub job: Arc<JobMeta>,
}

/// The queue header of the entry a fiber runs.
#[derive(Clone, Copy)]
struct Hdr {
    seq: u64,
    deadline: u64,
    kind: Kind,
    spawned_on: usize,
}

/// The job or thread a fiber is running.
struct Entry {
    job: Arc<JobMeta>,
    /// For a thread: its region.
    region: *const Region,
    hdr: Hdr,
}

/// A fiber of the pool. It carries entries one after another: started with one, it runs it,
/// and when it is done picks the next for its core itself, running a job or thread not
/// started yet right here (no switch: the same stack goes on, as a kernel thread calls its
/// next function) and handing a suspended fiber to the worker to switch to. A fiber is thus
/// switched to only when something suspended must go on, or when the worker needs a fiber to
/// carry new work after the one it had suspended (a preemption, a wait).
pub(crate) struct Fib {
    co: Option<Co>,
    yielder: Cell<*const Yielder<(), Suspend>>,
    /// What it runs now (`None` between entries).
    entry: RefCell<Option<Entry>>,
    /// Set by the worker before resuming a free fiber: the entry to start.
    assign: RefCell<Option<(Item<Unit>, Origin)>>,
    last_core: Cell<usize>,
    /// Why it last switched out (what its next switch-in is counted as).
    last: Cell<Last>,
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

/// Whether the fiber was suspended here (and so resumed later, perhaps on another worker
/// thread: the thread's CPU clock then also counted other work meanwhile).
pub(crate) fn checkpoint() -> bool {
    let c = current();
    if c.is_null() {
        return false;
    }
    // SAFETY: as in `here`.
    let (sh, core) = unsafe { (&*(*c).shared, (*c).core) };
    if sh.workers[core].preempt.load(Acquire) {
        note_stop(sh, core, StopHow::Checkpoint);
        suspend(Suspend::Preempt);
        return true;
    }
    false
}

/// The running entry of `core` stops here (the reach stage of a preemption ends). The thread's
/// CPU clock (a system call) is read only when a preemption is pending and
/// `RtConfig::stage_cpu_clock` asks for it.
fn note_stop(sh: &Shared, core: usize, how: StopHow) {
    let w = &sh.workers[core];
    w.stopped_at.store(sh.now(), Relaxed);
    w.stop_how.store(how as u8, Relaxed);
    let cpu = if sh.cfg.stage_cpu_clock && w.preempt.load(Relaxed) {
        schedkit_linux::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
    } else {
        0
    };
    w.stopped_cpu.store(cpu, Relaxed);
}

/// `core` picked `it` (`pending`: the seq its pending slot held before the pick): for a
/// preempting job, the pick stage ends, and the stop before it is the reach stage's end.
fn note_pick(sh: &Shared, core: usize, it: &Item<Unit>, pending: Option<u64>) {
    let Unit::Job(m) = &it.payload else {
        return;
    };
    let k = &m.counters;
    if !k.preempting.load(Relaxed) {
        return;
    }
    let w = &sh.workers[core];
    k.picked.store(sh.now(), Relaxed);
    k.stopped.store(w.stopped_at.load(Relaxed), Relaxed);
    k.stop_how.store(w.stop_how.load(Relaxed), Relaxed);
    k.target_cpu_stopped
        .store(w.stopped_cpu.load(Relaxed), Relaxed);
    k.from_pending.store(pending == Some(it.seq), Relaxed);
}

/// How a preempting job got its fiber (the switch stage's cost depends on it).
fn note_fiber(it: &Item<Unit>, how: FiberHow) {
    if let Unit::Job(m) = &it.payload {
        m.counters.fiber_how.store(how as u8, Relaxed);
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

/// Fiber stacks kept from pools that stopped, for the next pools of the process. A freshly
/// mapped stack costs its first touches: page faults, and in a virtual machine whose guest
/// memory the host backs lazily, host faults too; measured here, a preempting job that started
/// on a new stack took 40-90 us from its pick to its first instruction, one on a used stack a
/// few us (`examples/paws_stages.rs`, `docs/paws.md`). Kept resident (never returned to the
/// kernel) up to [`WARM_CAP`] stacks.
/// Priority-inheriting like the pools' state lock: it is shared by every pool of the process,
/// and a pool of SCHED_OTHER workers preempted while holding it must not hold a real-time
/// pool's worker that needs a stack.
static WARM: PriorityInheritingLock<Vec<FiberStack>> = PriorityInheritingLock::new(Vec::new());
fn set_yielder(y: &Yielder<(), Suspend>) {
    // SAFETY: the worker set CUR to this fiber before resuming it.
    unsafe { (*(*current()).fib).yielder.set(y) };
}

/// The running fiber.
fn me() -> &'static Fib {
    // SAFETY: only called on a pool fiber, whose Fib outlives its run.
    unsafe { &*(*current()).fib }
}

/// The core of the worker running the calling fiber (re-read after any suspension).
fn my_core() -> usize {
    // SAFETY: only called on a pool fiber.
    unsafe { (*current()).core }
}

/// Runs a job or thread not started yet on the calling fiber, to its end (it may be
/// suspended and resumed, on other workers too, on the way).
fn run_entry(sh: &Shared, (item, origin): (Item<Unit>, Origin)) {
    let core = my_core();
    let fib = me();
    let Item {
        seq,
        deadline,
        kind,
        spawned_on,
        payload,
    } = item;
    let hdr = Hdr {
        seq,
        deadline,
        kind,
        spawned_on,
    };
    fib.last_core.set(core);
    match payload {
        Unit::Job(m) => {
            *fib.entry.borrow_mut() = Some(Entry {
                job: m.clone(),
                region: std::ptr::null(),
                hdr,
            });
            let now = sh.now();
            m.counters.start.store(now, Relaxed);
            m.counters.started.store(true, Relaxed);
            let k = &m.counters;
            if k.preempting.load(Relaxed) {
                sh.latencies.lock().push(now.saturating_sub(m.release));
                let cpu = k.requester_cpu.load(Relaxed);
                sh.stages.lock().push(PreemptionStages {
                    release: m.release,
                    woke: k.woke.load(Relaxed),
                    requested: k.requested.load(Relaxed),
                    stopped: k.stopped.load(Relaxed),
                    picked: k.picked.load(Relaxed),
                    start: now,
                    target: k.target.load(Relaxed) as usize,
                    requester_cpu: (cpu > 0).then(|| cpu as usize - 1),
                    stop: StopHow::from_u8(k.stop_how.load(Relaxed)),
                    fiber: FiberHow::from_u8(k.fiber_how.load(Relaxed)),
                    from_pending: k.from_pending.load(Relaxed),
                    reach_cpu: match (
                        k.target_cpu_requested.load(Relaxed),
                        k.target_cpu_stopped.load(Relaxed),
                    ) {
                        (a, b) if a > 0 && b >= a => Some(b - a),
                        _ => None,
                    },
                });
            }
            let job = Job::new(m.clone());
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| match &m.body {
                Body::Task(t) => (t.body)(&job),
                Body::Once(f) => {
                    let f = f.lock().take();
                    if let Some(f) = f {
                        f(&job)
                    }
                }
            }));
            if r.is_err() {
                m.counters.panicked.store(true, Relaxed);
            }
        }
        Unit::Thread(ThreadStart { f, region, job }) => {
            let c = &job.counters;
            if origin == Origin::Stolen {
                c.add(&c.steals, 1);
            }
            if spawned_on != core {
                c.add(&c.migrations, 1);
            }
            *fib.entry.borrow_mut() = Some(Entry {
                job: job.clone(),
                region,
                hdr,
            });
            if std::panic::catch_unwind(AssertUnwindSafe(f)).is_err() {
                c.panicked.store(true, Relaxed);
            }
        }
        Unit::Fiber(_) => unreachable!("a suspended fiber is resumed by its worker"),
    }
}

/// The calling fiber's entry finished: settles it under the state lock, then picks the next
/// entry for its core. Returns one not started yet, to run on this fiber; otherwise hands the
/// worker a suspended fiber to switch to, or the idle step, and returns `None` once resumed
/// (with a new assignment, or none to end).
fn after_entry(sh: &Shared) -> Option<(Item<Unit>, Origin)> {
    let core = my_core();
    let fib = me();
    let e = fib.entry.borrow_mut().take().expect("a running entry");
    note_stop(sh, core, StopHow::Finished);
    let mut st = sh.state.lock();
    st.sched.stopped(core);
    if e.hdr.kind == Kind::Job {
        finish_job(sh, &e.job);
        sh.job_done(&mut st, e.job.task);
    } else {
        // SAFETY: the region lives until its job resumes, which needs this count.
        let region = unsafe { &*e.region };
        if let Some(waiter) = region.thread_done() {
            sh.ready(&mut st, waiter);
        }
    }
    drop(e);
    let mut woke = false;
    loop {
        sh.workers[core].kick.store(false, Relaxed);
        let pending = st.sched.pending(core);
        match st.sched.pick(core) {
            Some((it, o)) => {
                sh.workers[core].preempt.store(false, Release);
                note_pick(sh, core, &it, pending);
                if !matches!(it.payload, Unit::Fiber(_)) {
                    note_fiber(&it, FiberHow::InPlace);
                    PoolCountersAtomic::bump(&sh.counters.started_in_place);
                    return Some((it, o));
                }
                drop(st);
                suspend(Suspend::SwitchTo(it));
                return None;
            }
            None => {
                if (sh.stop.load(SeqCst) && st.in_flight == 0) || sh.plain.used() {
                    drop(st);
                    suspend(Suspend::Idle);
                    return None;
                }
                drop(st);
                if woke {
                    PoolCountersAtomic::bump(&sh.counters.empty_wakes);
                }
                // Sleeping here blocks the worker thread with this fiber on it: whatever
                // comes next and has not started yet runs on it without a switch.
                park(sh);
                woke = true;
                st = sh.state.lock();
            }
        }
    }
}

/// The queue entry a suspended fiber stands for: its entry, or the thread it was running
/// inline when it stopped.
fn filed(fib: Box<Fib>) -> Item<Unit> {
    let h = fib.entry.borrow().as_ref().expect("a suspended entry").hdr;
    let (seq, kind, spawned_on) = match fib.inline.get() {
        Some((seq, spawned_on)) => (seq, Kind::Thread, spawned_on),
        None => (h.seq, h.kind, h.spawned_on),
    };
    Item {
        seq,
        deadline: h.deadline,
        kind,
        spawned_on,
        payload: Unit::Fiber(fib),
    }
}

/// Switches to `fib` (a suspended entry, or a free fiber with an assignment), counting the
/// switch.
fn resume(sh: &Shared, core: usize, fib: &mut Fib) -> CoroutineResult<Suspend, ()> {
    let pc = &sh.counters;
    let assigned = fib
        .assign
        .borrow()
        .as_ref()
        .map(|(it, _)| match &it.payload {
            Unit::Job(m) => (Kind::Job, m.clone()),
            Unit::Thread(t) => (Kind::Thread, t.job.clone()),
            Unit::Fiber(_) => unreachable!("assignments are entries not started yet"),
        });
    let job = match assigned {
        Some((kind, job)) => {
            PoolCountersAtomic::bump(if kind == Kind::Job {
                &pc.fiber_job_starts
            } else {
                &pc.fiber_thread_starts
            });
            Some(job)
        }
        None => {
            let e = fib.entry.borrow();
            e.as_ref().map(|e| {
                let thread = e.hdr.kind == Kind::Thread || fib.inline.get().is_some();
                PoolCountersAtomic::bump(match (thread, fib.last.get()) {
                    (true, _) => &pc.fiber_thread_resumes,
                    (false, Last::Waited) => &pc.fiber_job_after_wait,
                    (false, Last::Preempted) => &pc.fiber_job_after_preempt,
                });
                if fib.last_core.get() != core {
                    let c = &e.job.counters;
                    c.add(&c.migrations, 1);
                }
                e.job.clone()
            })
        }
    };
    if let Some(j) = &job {
        let c = &j.counters;
        c.add(&c.switches, 1);
    }
    drop(job);
    fib.last_core.set(core);
    let cur = Current {
        shared: sh,
        core,
        fib: &*fib,
    };
    CUR.with(|x| x.set(&cur));
    stack::set_running(fib.guard, 0, fib.size);
    let r = fib.co.as_mut().unwrap().resume(());
    stack::clear_running();
    CUR.with(|x| x.set(std::ptr::null()));
    match &r {
        CoroutineResult::Yield(Suspend::Preempt) => fib.last.set(Last::Preempted),
        CoroutineResult::Yield(Suspend::Wait(_)) => fib.last.set(Last::Waited),
        _ => {}
    }
    r
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
    // Fibers free to carry new work (see `Fib`), a few made now (`RESERVE`).
    let mut spare: Spare = (0..RESERVE).map(|_| reserve_carrier(&sh)).collect();
    register(&sh, core);
    let _ = ready.send(());
    drop(ready);
    run(&sh, core, &mut spare);
    for mut f in spare {
        // SAFETY: a free fiber holds nothing owned across its suspension (see `carrier`).
        let mut co = f.co.take().unwrap();
        unsafe { co.force_reset() };
        let mut warm = WARM.lock();
        if warm.len() < WARM_CAP {
            warm.push(co.into_stack());
        }
    }
    let k = read_kernel(&sh, &format!("worker {core}"), cpu, counters.as_mut());
    sh.kernel.lock().push(k);
}

/// The pool's state, locked.
type Locked<'a> = priority_inheriting_lock::PriorityInheritingLockGuard<'a, super::State>;

/// Makes this thread known to the pool: its handle (to unpark it) and its CPU-time clock.
fn register(sh: &Shared, core: usize) {
    let _ = sh.workers[core].thread.set(std::thread::current());
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the calling thread's id and a valid out-pointer.
    if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
        let _ = sh.workers[core].cpu_clock.set(clock);
    }
}

/// Spare fibers stay boxed, as `Unit::Fiber` carries them: one moves between this list and a
/// queue entry as a pointer, never by value.
type Spare = Vec<Box<Fib>>;

/// The worker's loop, until the pool stops with nothing in flight: pick the next entry under
/// the state lock, run it on a fiber, and when there is nothing to pick run plain work or
/// park.
fn run(sh: &Shared, core: usize, spare: &mut Spare) {
    let mut st = sh.state.lock();
    // Set after a park: a wake-up that finds nothing to run is counted.
    let mut woke = false;
    // The last entry was put back or left threads behind: after the next pick, wake an idle
    // core for what is left (`Sched::wake_for_queued`).
    let mut left = false;
    loop {
        // Whatever woke us is being looked at now.
        sh.workers[core].kick.store(false, Relaxed);
        let pending = st.sched.pending(core);
        let Some((item, origin)) = st.sched.pick(core) else {
            if sh.stop.load(SeqCst) && st.in_flight == 0 {
                break;
            }
            drop(st);
            woke = idle(sh, core, woke);
            st = sh.state.lock();
            continue;
        };
        woke = false;
        sh.workers[core].preempt.store(false, Release);
        note_pick(sh, core, &item, pending);
        if left {
            left = false;
            let n = st.sched.wake_for_queued();
            sh.apply(&mut st, n);
        }
        drop(st);
        let fib = fiber_for(sh, item, origin, spare);
        st = run_fiber(sh, core, fib, spare, &mut left);
    }
}

/// Nothing to pick: run plain work, or park until woken. Returns whether the next pick
/// follows a wake-up (`woke`: this one did, and found nothing; counted).
fn idle(sh: &Shared, core: usize, woke: bool) -> bool {
    if woke {
        PoolCountersAtomic::bump(&sh.counters.empty_wakes);
    }
    match super::join::run_plain(sh, core) {
        super::join::Idle::Ran => false,
        super::join::Idle::Park => {
            park(sh);
            true
        }
        super::join::Idle::Woken => true,
    }
}

/// The fiber that runs `item`: its own when it is a suspended fiber, else a spare carrier (or
/// a new one) with the item assigned.
fn fiber_for(sh: &Shared, item: Item<Unit>, origin: Origin, spare: &mut Spare) -> Box<Fib> {
    if let Unit::Fiber(_) = item.payload {
        let Unit::Fiber(f) = item.payload else {
            unreachable!()
        };
        return f;
    }
    let f = match spare.pop() {
        Some(f) => {
            note_fiber(&item, FiberHow::Spare);
            f
        }
        None => {
            let (f, how) = carrier(sh);
            note_fiber(&item, how);
            f
        }
    };
    *f.assign.borrow_mut() = Some((item, origin));
    f
}

/// Runs `fib`, and the fibers it switches to, until this core is free for the next pick:
/// the fiber went idle, was preempted (filed back; `left` set) or waits on a region that
/// is not done (`left` set). Returns with the state lock held.
fn run_fiber<'s>(
    sh: &'s Shared,
    core: usize,
    mut fib: Box<Fib>,
    spare: &mut Spare,
    left: &mut bool,
) -> Locked<'s> {
    loop {
        match resume(sh, core, &mut fib) {
            CoroutineResult::Return(()) => {
                unreachable!("a fiber with an assignment does not end")
            }
            CoroutineResult::Yield(Suspend::SwitchTo(it)) => {
                spare.push(fib);
                let Unit::Fiber(f) = it.payload else {
                    unreachable!("SwitchTo carries a suspended fiber")
                };
                fib = f;
            }
            CoroutineResult::Yield(Suspend::Idle) => {
                spare.push(fib);
                return sh.state.lock();
            }
            CoroutineResult::Yield(Suspend::Preempt) => {
                let item = filed(fib);
                let mut g = sh.state.lock();
                if let Unit::Fiber(f) = &item.payload {
                    if let Some(e) = f.entry.borrow().as_ref() {
                        let c = &e.job.counters;
                        c.add(&c.preemptions, 1);
                    }
                }
                g.sched.preempted(core, item);
                *left = true;
                return g;
            }
            CoroutineResult::Yield(Suspend::Wait(region)) => {
                note_stop(sh, core, StopHow::Waited);
                let item = filed(fib);
                let mut g = sh.state.lock();
                // SAFETY: the region is in the frame of the waiting fiber, which is
                // suspended.
                match unsafe { &*region }.wait(item) {
                    Some(again) => {
                        drop(g);
                        let Unit::Fiber(f) = again.payload else {
                            unreachable!()
                        };
                        fib = f;
                    }
                    None => {
                        g.sched.stopped(core);
                        *left = true;
                        return g;
                    }
                }
            }
        }
    }
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
