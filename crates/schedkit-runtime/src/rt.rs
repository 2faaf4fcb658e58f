//! The fiber runtime: user threads ("UT", fibers) run M:N on scheduler threads ("ST", one per
//! core, pinned), seed 003's model built on Linux instead of Windows User Mode Scheduling.
//!
//! # Model
//!
//! ```text
//!   spawn ──▶ ready queue of an ST ──▶ ST resumes the fiber ──▶ fiber runs until it
//!                 ▲        ▲    ▲                                  │  yields / sleeps /
//!                 │        │    └── idle STs steal ◀───────────────┤  blocks / returns
//!                 │        └── timer heap of the ST (sleep) ◀──────┤
//!                 └── a setter (A2) or the ST's scan (A1) ◀── blocked on a primitive
//! ```
//!
//! A fiber never switches to another fiber directly: it switches back to its ST with a
//! [`Suspend`] request, and the ST acts on it *after* the fiber's registers are saved. That is
//! the paper's chain "UT -> primitive -> ST -> blocked queue", and it is what makes blocking
//! safe without locks: nobody can resume a fiber that is still running, because the fiber is
//! published (in a blocked queue, on a ready queue) only by its ST, after the switch.
//!
//! # States of a fiber and who owns it
//!
//! ```text
//!   Ready (in a ready queue; the queue owns the Box) ──pop──▶ Running (the ST owns it)
//!   Running ──Yield──▶ Ready      Running ──Sleep──▶ Sleeping (the ST's timer heap owns it)
//!   Running ──Block──▶ Blocked (A1: the ST's blocked list; A2: the primitive's list)
//!   Blocked ──set/post──▶ Ready (the ST that will run it: its last ST, or a thief)
//!   Running ──return──▶ Done (result in the JoinHandle, stack back to the pool)
//! ```
//! Ownership is a `Box<Fiber>` moved between those places, so "woken twice" or "run on two
//! STs" would need two boxes: the type system rules it out, the loom and stress tests check the
//! lists.
//!
//! # Preemption points for a real-time pool
//!
//! The switch is cooperative. A pool that must suspend a running job (a PAWS worker noticing an
//! earlier deadline) does it at *preemption points*: the job calls [`yield_now`] (or a cheaper
//! `preempt_point()` that checks a per-ST flag first) at loop heads; the pool's dispatcher sets
//! the flag from another thread and the next point switches out. Because the ST, not the fiber,
//! decides where a yielded fiber goes, a real-time pool replaces the FIFO ready queue with its
//! own deadline-ordered one without touching the fiber code. See docs/fibers.md.
//!
//! # Rejected designs
//! - Switching fiber-to-fiber (Boost.Fiber style) skips the ST on the hot path but needs every
//!   primitive to handle "the fiber is still on its stack" races; the ST hop costs one extra
//!   switch (a few ns with corosensei) and removes that class of bug.
//! - One global ready queue: simple, but every spawn and wake from both STs contends on it.
//!   Per-ST lock-free queues with stealing keep wake-ups local.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;

use crate::gate::a1::A1Gate;
use crate::gate::a2core::{A2Core, Linked, Wake};
use crate::gate::Gate;
use crate::stack::{self, FiberStack};

/// Which scheduler architecture a runtime uses (seed 003).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// Every user thread is an OS thread; primitives are parking_lot's mutex and condvar.
    A0,
    /// Fibers; primitives owned by the scheduler; one blocked queue per ST; a set notifies the
    /// registered STs, which scan their blocked queue.
    A1,
    /// Fibers; a blocked queue inside each primitive with a lock-free state machine.
    A2,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::A0, Arch::A1, Arch::A2];
    pub fn name(self) -> &'static str {
        match self {
            Arch::A0 => "A0",
            Arch::A1 => "A1",
            Arch::A2 => "A2",
        }
    }
    /// Parses `A0`, `a1`, ...
    pub fn parse(s: &str) -> Option<Arch> {
        match s.trim().to_ascii_uppercase().as_str() {
            "A0" => Some(Arch::A0),
            "A1" => Some(Arch::A1),
            "A2" => Some(Arch::A2),
            _ => None,
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Runtime knobs. Every field has a default ([`Config::new`]).
#[derive(Clone, Debug)]
pub struct Config {
    /// Scheduler architecture (default A2).
    pub arch: Arch,
    /// Scheduler threads (default: the CPUs this process may use).
    pub workers: usize,
    /// Usable stack bytes per fiber (default 64 KiB; A0 threads get the same).
    pub stack_size: usize,
    /// Guard bytes below each fiber stack (default 16 KiB).
    pub guard_size: usize,
    /// Pin ST i to the i-th allowed CPU (default true).
    pub pin: bool,
    /// Report a deadlock when every live fiber stays blocked this long with nothing ready or
    /// sleeping (default 2 s; `None`: never). Threads outside the runtime can still set
    /// primitives, which is why this is a timeout and not an instant verdict.
    pub deadlock_timeout: Option<Duration>,
    /// How long an idle ST spins looking for work before it parks (default 50 us), so that a
    /// cross-core wake-up does not pay a sleeping CPU's wake-up on the hot path.
    pub spin_before_park: Duration,
}

impl Config {
    pub fn new(arch: Arch) -> Config {
        Config {
            arch,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            stack_size: 64 * 1024,
            guard_size: 16 * 1024,
            pin: true,
            deadlock_timeout: Some(Duration::from_secs(2)),
            spin_before_park: Duration::from_micros(50),
        }
    }
}

/// Why `join` returned no value.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The user thread panicked; the payload is the panic's.
    #[error("the user thread panicked")]
    Panic(Box<dyn std::any::Any + Send + 'static>),
    /// The runtime found every live fiber blocked (see [`Config::deadlock_timeout`]).
    #[error("deadlock: every live fiber is blocked")]
    Deadlock,
}

impl JoinError {
    /// The panic message, when the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match self {
            JoinError::Panic(p) => p
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())),
            JoinError::Deadlock => None,
        }
    }
}

/// What a fiber asks of its ST when it switches out.
pub(crate) enum Suspend {
    Yield,
    Sleep(Instant),
    BlockA1(*const A1Gate),
    BlockA2(*const A2Core<Fiber>),
}

type Co = Coroutine<(), Suspend, (), FiberStack>;

/// A user thread. Owned by exactly one place at a time (see the module docs).
pub(crate) struct Fiber {
    co: Option<Co>,
    yielder: *const Yielder<(), Suspend>,
    link: Cell<*mut Fiber>,
    /// The next chain in an ST's `chains` stack (set on a chain's first fiber only).
    chain: Cell<*mut Fiber>,
    id: u64,
    /// The ST that ran it last, where a wake-up sends it.
    home: usize,
    /// Spawned with [`Handle::spawn_on`]: it runs on `home` only, never stolen or moved.
    bound: bool,
    guard: (usize, usize),
    /// Near where its stack pointer was when it last switched out: the waker prefetches the
    /// stack lines the switch back will read.
    sp_hint: usize,
    size: usize,
}

// SAFETY: a fiber is spawned from a `Send` closure and only ever runs on one ST at a time;
// the raw pointers point into its own stack.
unsafe impl Send for Fiber {}

// SAFETY: `link` is a field of the fiber, used only by the list that owns it.
unsafe impl Linked for Fiber {
    fn link(&self) -> &Cell<*mut Fiber> {
        &self.link
    }
}

impl Drop for Fiber {
    fn drop(&mut self) {
        if let Some(co) = self.co.take() {
            if co.started() && !co.done() {
                // A fiber still suspended when its runtime goes away (a deadlock, or the
                // program dropped the runtime without joining): unwinding its stack from here
                // could run its code on a foreign thread, so its stack is leaked instead.
                std::mem::forget(co);
            }
        }
    }
}

/// How A2 primitives wake fibers of this runtime. It carries the caller's ST context (null
/// when the caller is not an ST of this runtime), looked up once per set or block instead of
/// once per woken fiber: on the one-ST ping-pong every thread-local lookup is a visible part
/// of the round trip.
pub(crate) struct RtWake<'a> {
    sh: &'a Shared,
    st: *const StCtx,
}

impl<'a> RtWake<'a> {
    /// For a set from any thread.
    #[inline]
    pub(crate) fn new(sh: &'a Shared) -> Self {
        RtWake {
            sh,
            st: sh.own_st(),
        }
    }
}

impl Wake<Fiber> for RtWake<'_> {
    #[inline]
    fn wake(&mut self, node: *mut Fiber) {
        self.sh.wake_from(self.st, node);
    }

    /// A lane of a manual-reset event: the fibers that blocked on ST `lane` (or on STs that
    /// share its lane). The ST that owns the lane wakes them itself: here if that is us,
    /// else by handing it the chain.
    fn wake_chain(&mut self, lane: usize, first: *mut Fiber) {
        let (sh, st) = (self.sh, self.st);
        // SAFETY: a non-null `st` is this runtime's ST context, alive while it runs.
        let here = !st.is_null() && unsafe { (*st).index } == lane;
        if here || lane >= sh.workers.len() {
            walk_chain(first, |f| sh.wake_from(st, f));
        } else {
            sh.hand_chain(lane, first);
        }
    }
}

/// Calls `f` on every fiber of the chain `first` (linked through `link`), clearing the links.
fn walk_chain(first: *mut Fiber, mut f: impl FnMut(*mut Fiber)) {
    let mut cur = first;
    while !cur.is_null() {
        // SAFETY: the chain's fibers are the caller's.
        let next = unsafe { (*cur).link.replace(std::ptr::null_mut()) };
        f(cur);
        cur = next;
    }
}

/// Takes this ST's chains of woken fibers (see `Worker::chains`) and makes them ready.
fn take_chains(sh: &Shared, index: usize) -> bool {
    let w = &sh.workers[index];
    if w.chains.load(Relaxed).is_null() {
        return false;
    }
    let mut c = w.chains.swap(std::ptr::null_mut(), Acquire);
    while !c.is_null() {
        // SAFETY: published chains are ours now.
        let next = unsafe { (*c).chain.replace(std::ptr::null_mut()) };
        walk_chain(c, |p| {
            // Behind what is already ready here (as A1's scan), not in the run-next slot: a
            // remote set must not reorder this ST's queue.
            bump(&w.wakes);
            // SAFETY: a woken fiber of the chain, ours now.
            let f = unsafe { Box::from_raw(p) };
            if f.bound || f.home != index {
                sh.push_ready(f, true);
            } else {
                w.queue.push(f);
            }
        });
        c = next;
    }
    // As `push_ready` does for each fiber: a parked ST may steal some of them.
    if sh.sleepers.load(SeqCst) > 0 {
        if let Some(idle) = sh.workers.iter().find(|w| w.sleeping.load(SeqCst)) {
            sh.unpark(idle);
        }
    }
    true
}

/// Per-ST state that other threads touch.
pub(crate) struct Worker {
    queue: SegQueue<Box<Fiber>>,
    /// Fibers bound to this ST ([`Handle::spawn_on`]) made ready by another thread: a Treiber
    /// stack through the fibers' own `link` (free while a fiber is not blocked), which the ST
    /// takes whole. One cache line moves per cross-ST hand-off, against the queue's head,
    /// tail and slot lines; nobody steals bound fibers, so nothing is lost by keeping them
    /// out of the stealable queue.
    inbox: CachePadded<AtomicPtr<Fiber>>,
    /// Chains of fibers woken together by a set of an A2 manual-reset event, from this ST's
    /// lane of the event: a Treiber stack of chains (linked through their first fiber's
    /// `chain`, each chain through `link`). The setter hands over a whole lane with one
    /// exchange and never touches the fibers; this ST, whose caches hold them, walks them.
    chains: CachePadded<AtomicPtr<Fiber>>,
    sleeping: AtomicBool,
    /// A1: a primitive this ST registered with was set.
    notified: AtomicBool,
    thread: OnceLock<Thread>,
    /// Fibers this ST put into a blocked queue / woken by this ST / finished here / sleeping.
    blocks: CachePadded<AtomicU64>,
    wakes: CachePadded<AtomicU64>,
    finished: AtomicU64,
    timers: AtomicU64,
    /// Diagnostic counters only this ST writes ([`Handle::stats`]).
    stats: CachePadded<StCounters>,
}

/// Per-ST diagnostic counters, written with plain stores by their ST only.
#[derive(Default)]
struct StCounters {
    runs: AtomicU64,
    slot_runs: AtomicU64,
    steals: AtomicU64,
    remote_readies: AtomicU64,
    parks: AtomicU64,
    idle_ns: AtomicU64,
    /// When the current idle stretch began (ns since `Shared::epoch`; 0: not idle), so that a
    /// snapshot counts an ST that is idle right now.
    idle_since: AtomicU64,
    a1_scans: AtomicU64,
    a1_scanned: AtomicU64,
}

/// What the runtime's scheduler threads did since it started, summed over the STs (see
/// [`Handle::stats`]). Subtract two snapshots to get the counts of one phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Fiber resumptions.
    pub runs: u64,
    /// Resumptions of the fiber in the run-next slot.
    pub slot_runs: u64,
    /// Fibers taken from another ST's ready queue.
    pub steals: u64,
    /// Fibers that switched out to block on a primitive (including those that found a
    /// permit after the switch).
    pub blocks: u64,
    /// Blocked fibers made ready (by an ST or from outside).
    pub wakes: u64,
    /// Fibers an ST made ready on another ST's queue or inbox (cross-ST hand-overs).
    pub remote_readies: u64,
    /// Times an idle ST parked its thread.
    pub parks: u64,
    /// Nanoseconds the STs spent idle (spinning for work or parked), summed over the STs.
    pub idle_ns: u64,
    /// A1: scans of an ST's blocked queue, and blocked fibers looked at by them.
    pub a1_scans: u64,
    pub a1_scanned: u64,
}

impl Stats {
    /// Applies `op` to every pair of fields.
    pub fn zip(self, o: Stats, op: impl Fn(u64, u64) -> u64) -> Stats {
        Stats {
            runs: op(self.runs, o.runs),
            slot_runs: op(self.slot_runs, o.slot_runs),
            steals: op(self.steals, o.steals),
            blocks: op(self.blocks, o.blocks),
            wakes: op(self.wakes, o.wakes),
            remote_readies: op(self.remote_readies, o.remote_readies),
            parks: op(self.parks, o.parks),
            idle_ns: op(self.idle_ns, o.idle_ns),
            a1_scans: op(self.a1_scans, o.a1_scans),
            a1_scanned: op(self.a1_scanned, o.a1_scanned),
        }
    }
}

impl std::ops::Sub for Stats {
    type Output = Stats;
    fn sub(self, o: Stats) -> Stats {
        self.zip(o, |a, b| a.saturating_sub(b))
    }
}

impl std::ops::Add for Stats {
    type Output = Stats;
    fn add(self, o: Stats) -> Stats {
        self.zip(o, |a, b| a + b)
    }
}

/// The state every handle shares.
pub(crate) struct Shared {
    pub(crate) cfg: Config,
    workers: Box<[Worker]>,
    stop: AtomicBool,
    next_worker: AtomicUsize,
    next_id: AtomicU64,
    spawned: AtomicU64,
    outside_wakes: AtomicU64,
    sleepers: AtomicUsize,
    deadlock: AtomicBool,
    stacks: parking_lot::Mutex<Vec<FiberStack>>,
    /// Time origin of the idle counters.
    epoch: Instant,
}

/// What an ST keeps to itself.
struct Local {
    timers: BinaryHeap<Reverse<(Instant, u64, TimerEntry)>>,
    a1_blocked: Vec<(Box<Fiber>, *const A1Gate)>,
    stacks: Vec<FiberStack>,
    seq: u64,
}

struct TimerEntry(Box<Fiber>);
impl PartialEq for TimerEntry {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for TimerEntry {}
impl PartialOrd for TimerEntry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for TimerEntry {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

/// The context of an ST thread, reachable from the fibers it runs through a thread-local.
struct StCtx {
    shared: Arc<Shared>,
    index: usize,
    local: RefCell<Local>,
    /// The fiber this ST runs next: the last one woken or spawned here while no ST idled.
    /// A ping-pong or a spawn-then-join hands over through this slot without touching the
    /// shared queue; at most [`NEXT_STREAK`] slot runs in a row, then the queue gets a turn.
    next: Cell<Option<Box<Fiber>>>,
}

/// Slot runs in a row before the ready queue is served (two fibers waking each other must
/// not starve the rest).
const NEXT_STREAK: u32 = 32;
/// Fibers run between two looks at the timers and A1 notifications while the queues stay busy.
const SERVICE_EVERY: u32 = 64;

/// Increments a counter only its owning ST writes: a plain load and store, not a locked
/// read-modify-write (the readers, the deadlock check, only need to see it eventually).
#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Relaxed) + 1, Relaxed);
}

thread_local! {
    static ST: Cell<*const StCtx> = const { Cell::new(std::ptr::null()) };
    static FIBER: Cell<*mut Fiber> = const { Cell::new(std::ptr::null_mut()) };
}

// The accessors are never inlined: a fiber can resume on another ST, and a thread-local's
// address computed before a switch must not be reused after it.
#[inline(never)]
fn current_st() -> *const StCtx {
    ST.with(|s| s.get())
}
#[inline(never)]
fn current_fiber() -> *mut Fiber {
    FIBER.with(|f| f.get())
}

/// The calling fiber, if it is a fiber of the runtime `shared` (else null): both
/// thread-locals in one call, for the blocking path.
#[inline(never)]
pub(crate) fn fiber_of(shared: &Shared) -> *mut Fiber {
    let f = FIBER.with(|f| f.get());
    if f.is_null() {
        return f;
    }
    let st = ST.with(|s| s.get());
    // SAFETY: the ST context outlives every fiber it runs.
    if !st.is_null() && std::ptr::eq(unsafe { &*(*st).shared }, shared) {
        f
    } else {
        std::ptr::null_mut()
    }
}

/// Whether the caller is a fiber of the runtime `shared`.
pub(crate) fn in_fiber_of(shared: &Arc<Shared>) -> bool {
    !fiber_of(shared).is_null()
}

/// Whether the caller runs on a fiber (of any runtime).
pub fn in_fiber() -> bool {
    !current_fiber().is_null()
}

/// Switches the calling fiber out with `s`. Panics outside a fiber.
pub(crate) fn suspend(s: Suspend) {
    let f = current_fiber();
    assert!(!f.is_null(), "schedkit-runtime: suspend outside a fiber");
    // SAFETY: the running fiber, just looked up.
    unsafe { suspend_fiber(f, s) }
}

/// Switches the fiber `f` out with `s`.
///
/// # Safety
/// `f` must be the calling fiber (as returned by [`fiber_of`] on this fiber, just now).
pub(crate) unsafe fn suspend_fiber(f: *mut Fiber, s: Suspend) {
    let marker = 0u8;
    // SAFETY: the running fiber owns its Fiber; its yielder lives on its stack while it runs.
    unsafe {
        (*f).sp_hint = std::hint::black_box(&marker) as *const u8 as usize;
        (*(*f).yielder).suspend(s)
    };
}

/// Starts loading the stack lines a fiber's resumption reads (its saved registers lie just
/// below where `suspend` was called), so that the miss overlaps with what the ST does before
/// it switches: a large ring of fibers otherwise pays a cache and TLB miss on every hop.
#[inline]
fn prefetch_stack(f: &Fiber) {
    #[cfg(target_arch = "x86_64")]
    if f.sp_hint != 0 {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for line in 0..10usize {
            let p = (f.sp_hint - 576 + line * 64) as *const i8;
            // SAFETY: a prefetch never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
    }
}

/// The index of the scheduler thread the calling fiber runs on (`None` outside a fiber).
pub fn current_worker() -> Option<usize> {
    let st = current_st();
    // SAFETY: the ST context outlives every fiber it runs.
    (!st.is_null() && in_fiber()).then(|| unsafe { (*st).index })
}

/// Gives the CPU to the next ready user thread (a fiber yields to its ST; an OS thread calls
/// `sched_yield`).
pub fn yield_now() {
    if in_fiber() {
        suspend(Suspend::Yield);
    } else {
        std::thread::yield_now();
    }
}

/// Sleeps the calling user thread for `d` (a fiber sleeps on its ST's timer heap).
pub fn sleep(d: Duration) {
    if in_fiber() {
        suspend(Suspend::Sleep(Instant::now() + d));
    } else {
        std::thread::sleep(d);
    }
}

/// Spawns a fiber on the runtime the caller runs on. Panics when not called from a fiber.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let st = current_st();
    assert!(
        !st.is_null(),
        "schedkit_runtime::spawn called outside a fiber; use Runtime::spawn"
    );
    // SAFETY: the ST context outlives every fiber it runs.
    let shared = unsafe { &(*st).shared };
    spawn_fiber(shared, f, Placement::Auto)
}

/// A runtime: the STs of one architecture (for A0, nothing but the configuration: user
/// threads are OS threads). Dropping it stops the STs; join what you spawned first.
pub struct Runtime {
    handle: Handle,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// A cheap, clonable reference to a runtime, used to spawn and to create primitives.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Runtime {
    /// Starts a runtime with `cfg.workers` STs (none for A0).
    pub fn new(cfg: Config) -> std::io::Result<Runtime> {
        assert!(cfg.workers >= 1, "a runtime needs at least one worker");
        assert!(cfg.workers <= 64, "at most 64 scheduler threads");
        let n = if cfg.arch == Arch::A0 { 0 } else { cfg.workers };
        let workers = (0..n)
            .map(|_| Worker {
                queue: SegQueue::new(),
                inbox: CachePadded::new(AtomicPtr::new(std::ptr::null_mut())),
                chains: CachePadded::new(AtomicPtr::new(std::ptr::null_mut())),
                sleeping: AtomicBool::new(false),
                notified: AtomicBool::new(false),
                thread: OnceLock::new(),
                blocks: CachePadded::new(AtomicU64::new(0)),
                wakes: CachePadded::new(AtomicU64::new(0)),
                finished: AtomicU64::new(0),
                timers: AtomicU64::new(0),
                stats: CachePadded::new(StCounters::default()),
            })
            .collect();
        let shared = Arc::new(Shared {
            cfg,
            workers,
            stop: AtomicBool::new(false),
            next_worker: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            spawned: AtomicU64::new(0),
            outside_wakes: AtomicU64::new(0),
            sleepers: AtomicUsize::new(0),
            deadlock: AtomicBool::new(false),
            stacks: parking_lot::Mutex::new(Vec::new()),
            epoch: Instant::now(),
        });
        if n > 0 {
            stack::install_overflow_handler();
        }
        let cpus: Vec<usize> = schedkit_linux::affinity::get_thread(0)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let sh = shared.clone();
            let cpu = if shared.cfg.pin && !cpus.is_empty() {
                Some(cpus[i % cpus.len()])
            } else {
                None
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("schedkit-st{i}"))
                    .spawn(move || st_main(sh, i, cpu))?,
            );
        }
        for (i, t) in threads.iter().enumerate() {
            let _ = shared.workers[i].thread.set(t.thread().clone());
        }
        Ok(Runtime {
            handle: Handle { shared },
            threads,
        })
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    pub fn arch(&self) -> Arch {
        self.handle.arch()
    }

    /// Spawns a user thread.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.handle.spawn(f)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let sh = &self.handle.shared;
        sh.stop.store(true, SeqCst);
        for w in sh.workers.iter() {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Handle {
    pub fn arch(&self) -> Arch {
        self.shared.cfg.arch
    }

    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// Spawns a user thread: an OS thread under A0, a fiber otherwise.
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.arch() == Arch::A0 {
            let h = std::thread::Builder::new()
                .stack_size(self.shared.cfg.stack_size.max(64 * 1024))
                .spawn(f)
                .expect("schedkit-runtime: cannot create an OS thread");
            return JoinHandle {
                inner: JoinInner::Os(h),
            };
        }
        spawn_fiber(&self.shared, f, Placement::Auto)
    }

    /// Spawns a user thread that starts on the scheduler thread `group mod STs`, where user
    /// threads given the same group start together; like any fiber it may be stolen later.
    /// A program states with it which of its threads share data, so that a grid of tiles is
    /// not laid on the STs by the accident of its spawn order (`fibers-gauss` groups seed
    /// 003's tiles by pairs of column blocks). Under A0 the hint is ignored: the OS places its
    /// threads.
    pub fn spawn_near<F, T>(&self, group: usize, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.arch() == Arch::A0 {
            return self.spawn(f);
        }
        spawn_fiber(&self.shared, f, Placement::Near(group))
    }

    /// Spawns a fiber bound to scheduler thread `worker`: it always runs there, is never
    /// stolen, and its wake-ups go to that ST's queue (for pinning work to a core, and for
    /// measuring cross-ST hand-offs). Panics under A0 or when `worker` does not exist.
    pub fn spawn_on<F, T>(&self, worker: usize, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        assert!(
            self.arch() != Arch::A0,
            "spawn_on needs scheduler threads (A1 or A2)"
        );
        assert!(
            worker < self.shared.workers.len(),
            "spawn_on: no scheduler thread {worker}"
        );
        spawn_fiber(&self.shared, f, Placement::Bound(worker))
    }

    /// Whether the runtime declared a deadlock.
    pub fn deadlocked(&self) -> bool {
        self.shared.deadlock.load(Acquire)
    }

    /// The scheduler threads' counters so far (a snapshot; each ST's counters are exact once
    /// it is idle).
    pub fn stats(&self) -> Stats {
        let mut s = Stats {
            wakes: self.shared.outside_wakes.load(Relaxed),
            ..Stats::default()
        };
        for w in self.shared.workers.iter() {
            let c = &w.stats;
            s.runs += c.runs.load(Relaxed);
            s.slot_runs += c.slot_runs.load(Relaxed);
            s.steals += c.steals.load(Relaxed);
            s.blocks += w.blocks.load(Relaxed);
            s.wakes += w.wakes.load(Relaxed);
            s.remote_readies += c.remote_readies.load(Relaxed);
            s.parks += c.parks.load(Relaxed);
            s.idle_ns += c.idle_ns.load(Relaxed);
            let since = c.idle_since.load(Relaxed);
            if since != 0 {
                s.idle_ns += ns_since(self.shared.epoch, Instant::now()).saturating_sub(since);
            }
            s.a1_scans += c.a1_scans.load(Relaxed);
            s.a1_scanned += c.a1_scanned.load(Relaxed);
        }
        s
    }
}

/// Where a new fiber starts.
#[derive(Clone, Copy)]
enum Placement {
    /// The spawning ST, or round robin for a spawn from outside the runtime.
    Auto,
    /// ST `group mod STs`, stealable.
    Near(usize),
    /// Always this ST, never stolen.
    Bound(usize),
}

fn spawn_fiber<F, T>(shared: &Arc<Shared>, f: F, place: Placement) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let state = Arc::new(JoinState::new(shared));
    let done = state.clone();
    let st = current_st();
    let on_st = !st.is_null() && Arc::ptr_eq(unsafe { &(*st).shared }, shared);
    let stack = if on_st {
        unsafe { (*st).local.borrow_mut().stacks.pop() }
    } else {
        None
    }
    .or_else(|| shared.stacks.lock().pop())
    .unwrap_or_else(|| {
        FiberStack::new(shared.cfg.stack_size, shared.cfg.guard_size)
            .expect("schedkit-runtime: cannot map a fiber stack")
    });
    let guard = stack.guard_range();
    let size = stack.size();
    let co = Co::with_stack(stack, move |y: &Yielder<(), Suspend>, ()| {
        // SAFETY: the ST set FIBER to this fiber before resuming it.
        unsafe { (*current_fiber()).yielder = y };
        let r = std::panic::catch_unwind(AssertUnwindSafe(f));
        done.complete(r);
    });
    let home = match place {
        Placement::Bound(w) => w,
        Placement::Near(group) => group % shared.workers.len(),
        Placement::Auto if on_st => unsafe { (*st).index },
        Placement::Auto => shared.next_worker.fetch_add(1, Relaxed) % shared.workers.len(),
    };
    let fiber = Box::new(Fiber {
        co: Some(co),
        yielder: std::ptr::null(),
        link: Cell::new(std::ptr::null_mut()),
        chain: Cell::new(std::ptr::null_mut()),
        id: shared.next_id.fetch_add(1, Relaxed),
        home,
        bound: matches!(place, Placement::Bound(_)),
        guard,
        sp_hint: 0,
        size,
    });
    shared.spawned.fetch_add(1, Relaxed);
    shared.push_ready(fiber, true);
    JoinHandle {
        inner: JoinInner::Fiber(state),
    }
}

impl Shared {
    /// Puts `f` on the ready queue of the ST that will run it, waking that ST (or, with
    /// `steal_hint`, an idle one that can steal it) if it sleeps.
    fn push_ready(&self, f: Box<Fiber>, steal_hint: bool) {
        self.push_ready_from(self.own_st(), f, steal_hint)
    }

    /// The caller's ST context if the caller is an ST (or a fiber on an ST) of this runtime,
    /// else null.
    #[inline]
    fn own_st(&self) -> *const StCtx {
        let st = current_st();
        // SAFETY: the ST context outlives every fiber it runs.
        if !st.is_null() && std::ptr::eq(unsafe { &*(*st).shared }, self) {
            st
        } else {
            std::ptr::null()
        }
    }

    /// `push_ready` with the caller's ST context already looked up: `st` is [`Shared::own_st`]
    /// (an ST of this runtime, or null).
    fn push_ready_from(&self, st: *const StCtx, f: Box<Fiber>, steal_hint: bool) {
        // Fast path: an ST of this runtime (or a fiber on it) makes ready a fiber that last ran
        // on this ST, while no ST idles (so nobody would steal it anyway): it goes to this ST's
        // slot and runs next, while its cache lines are warm. A fiber whose home is another ST
        // goes back there, so a set that wakes many fibers leaves them spread over the STs
        // instead of piling them on the setter's ST for the others to steal one by one.
        if !f.bound
            && !st.is_null()
            && unsafe { (*st).index } == f.home
            && self.sleepers.load(Relaxed) == 0
        {
            prefetch_stack(&f);
            // SAFETY: only this thread touches its ST's slot.
            let ctx = unsafe { &*st };
            if let Some(old) = ctx.next.replace(Some(f)) {
                self.workers[ctx.index].queue.push(old);
            }
            return;
        }
        let w = &self.workers[f.home];
        if !st.is_null() {
            let i = unsafe { (*st).index };
            if i != f.home {
                bump(&self.workers[i].stats.remote_readies);
            }
        }
        let bound = f.bound;
        if bound {
            let p = Box::into_raw(f);
            let mut head = w.inbox.load(Relaxed);
            loop {
                // SAFETY: `p` is ours until the exchange publishes it.
                unsafe { (*p).link.set(head) };
                // SeqCst: pairs with the ST's "sleeping, then look at the inbox" (Dekker).
                match w.inbox.compare_exchange_weak(head, p, SeqCst, Relaxed) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
            if w.sleeping.load(SeqCst) {
                self.unpark(w);
            }
            return;
        }
        w.queue.push(f);
        if w.sleeping.load(SeqCst) {
            self.unpark(w);
        } else if steal_hint && !bound && self.sleepers.load(SeqCst) > 0 {
            if let Some(idle) = self.workers.iter().find(|w| w.sleeping.load(SeqCst)) {
                self.unpark(idle);
            }
        }
    }

    fn unpark(&self, w: &Worker) {
        if let Some(t) = w.thread.get() {
            t.unpark();
        }
    }

    /// Wakes a blocked fiber (called by setters of A2 primitives and by JoinState); `st` is
    /// the caller's [`Shared::own_st`].
    #[inline]
    fn wake_from(&self, st: *const StCtx, p: *mut Fiber) {
        // SAFETY: the list handed us the unique pointer of a blocked fiber.
        let f = unsafe { Box::from_raw(p) };
        if !st.is_null() {
            bump(&self.workers[unsafe { (*st).index }].wakes);
        } else {
            self.outside_wakes.fetch_add(1, Relaxed);
        }
        self.push_ready_from(st, f, true);
    }

    /// Gives ST `i` a chain of woken fibers (see `Worker::chains`).
    fn hand_chain(&self, i: usize, first: *mut Fiber) {
        let w = &self.workers[i];
        let mut head = w.chains.load(Relaxed);
        loop {
            // SAFETY: the chain is ours until the exchange publishes it.
            unsafe { (*first).chain.set(head) };
            // SeqCst: pairs with the ST's "sleeping, then look at its chains" (Dekker).
            match w.chains.compare_exchange_weak(head, first, SeqCst, Relaxed) {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
        if w.sleeping.load(SeqCst) {
            self.unpark(w);
        }
    }

    /// A1: tells ST `i` that a primitive it registered with was set.
    pub(crate) fn notify(&self, i: usize) {
        let w = &self.workers[i];
        w.notified.store(true, SeqCst);
        if w.sleeping.load(SeqCst) {
            self.unpark(w);
        }
    }

    /// Fibers spawned and not finished.
    fn live(&self) -> u64 {
        let fin: u64 = self.workers.iter().map(|w| w.finished.load(SeqCst)).sum();
        self.spawned.load(SeqCst) - fin
    }

    fn blocked(&self) -> u64 {
        let b: u64 = self.workers.iter().map(|w| w.blocks.load(SeqCst)).sum();
        b - self.total_wakes()
    }

    fn total_wakes(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.wakes.load(SeqCst))
            .sum::<u64>()
            + self.outside_wakes.load(SeqCst)
    }
}

fn st_main(shared: Arc<Shared>, index: usize, cpu: Option<usize>) {
    stack::ensure_altstack();
    if let Some(c) = cpu {
        // Pinning is a performance matter, not a correctness one: an ST that cannot be
        // pinned (a restricted cpuset) still runs.
        let _ = schedkit_linux::affinity::pin_current(c);
    }
    let ctx = StCtx {
        shared,
        index,
        local: RefCell::new(Local {
            timers: BinaryHeap::new(),
            a1_blocked: Vec::new(),
            stacks: Vec::new(),
            seq: 0,
        }),
        next: Cell::new(None),
    };
    ST.with(|s| s.set(&ctx));
    let sh = &*ctx.shared;
    let me = &sh.workers[index];
    let mut suspect: Option<(Instant, u64)> = None;
    let mut streak = 0u32;
    let mut since_service = 0u32;
    loop {
        if sh.stop.load(Relaxed) {
            break;
        }
        take_chains(sh, index);
        let mut f = ctx.next.take();
        if let Some(slot) = f.take_if(|_| streak >= NEXT_STREAK) {
            me.queue.push(slot);
        }
        if f.is_some() {
            streak += 1;
            bump(&me.stats.slot_runs);
        } else {
            streak = 0;
            f = next_fiber(sh, index);
        }
        if let Some(f) = f {
            bump(&me.stats.runs);
            run(&ctx, f);
            since_service += 1;
            // Timers and A1 notifications are served when the ST idles, and also every
            // SERVICE_EVERY fibers so that a busy queue cannot starve a sleeper.
            if since_service >= SERVICE_EVERY {
                since_service = 0;
                service(&ctx);
            }
            continue;
        }
        if service(&ctx) {
            continue;
        }
        // Idle: spin a little, then park.
        let idle_from = Instant::now();
        me.stats
            .idle_since
            .store(ns_since(sh.epoch, idle_from).max(1), Relaxed);
        let spin_until = idle_from + sh.cfg.spin_before_park;
        let mut found = false;
        while Instant::now() < spin_until {
            if has_work(sh, index) {
                found = true;
                break;
            }
            // A short pause between looks: one PAUSE costs up to ~140 cycles on recent Xeons,
            // so a batch of 64 adds microseconds to every cross-ST hand-off.
            for _ in 0..4 {
                std::hint::spin_loop();
            }
        }
        if found {
            end_idle(me, idle_from);
            continue;
        }
        bump(&me.stats.parks);
        me.sleeping.store(true, SeqCst);
        sh.sleepers.fetch_add(1, SeqCst);
        if !has_work(sh, index) && !sh.stop.load(SeqCst) {
            let next_timer = ctx
                .local
                .borrow()
                .timers
                .peek()
                .map(|Reverse((t, _, _))| *t);
            let mut wait = Duration::from_millis(100);
            if let Some(t) = next_timer {
                wait = wait.min(t.saturating_duration_since(Instant::now()));
            }
            std::thread::park_timeout(wait);
        }
        sh.sleepers.fetch_sub(1, SeqCst);
        me.sleeping.store(false, SeqCst);
        end_idle(me, idle_from);
        if index == 0 {
            check_deadlock(sh, &mut suspect);
        }
    }
    ST.with(|s| s.set(std::ptr::null()));
    // Fibers left over (deadlocked or never joined) are dropped with the queues.
    while let Some(f) = take_inbox(me) {
        drop(f);
    }
    let mut c = me.chains.swap(std::ptr::null_mut(), Acquire);
    while !c.is_null() {
        let next = unsafe { (*c).chain.get() };
        walk_chain(c, |f| drop(unsafe { Box::from_raw(f) }));
        c = next;
    }
    let mut local = ctx.local.borrow_mut();
    local.timers.clear();
    local.a1_blocked.clear();
    let mut pool = sh.stacks.lock();
    pool.append(&mut local.stacks);
}

/// Nanoseconds from `epoch` to `t`.
fn ns_since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

/// Adds the idle stretch that began at `from` to the ST's idle time.
fn end_idle(me: &Worker, from: Instant) {
    let c = &me.stats;
    c.idle_since.store(0, Relaxed);
    let d = from.elapsed().as_nanos() as u64;
    c.idle_ns.store(c.idle_ns.load(Relaxed) + d, Relaxed);
}

fn has_work(sh: &Shared, index: usize) -> bool {
    sh.workers.iter().any(|w| !w.queue.is_empty())
        || !sh.workers[index].inbox.load(SeqCst).is_null()
        || !sh.workers[index].chains.load(SeqCst).is_null()
        || sh.workers[index].notified.load(SeqCst)
        || sh.workers[index].timers.load(Relaxed) > 0 && timer_due(index)
}

fn timer_due(_index: usize) -> bool {
    let st = current_st();
    if st.is_null() {
        return false;
    }
    // SAFETY: called on the ST thread, outside any fiber.
    let local = unsafe { (*st).local.borrow() };
    local
        .timers
        .peek()
        .is_some_and(|Reverse((t, _, _))| *t <= Instant::now())
}

/// Own queue first, then own inbox, then steal from the others, starting after ourselves. A
/// stolen fiber bound to its ST goes back to that ST's queue.
fn next_fiber(sh: &Shared, index: usize) -> Option<Box<Fiber>> {
    if let Some(f) = sh.workers[index].queue.pop() {
        return Some(f);
    }
    if let Some(f) = take_inbox(&sh.workers[index]) {
        return Some(f);
    }
    let n = sh.workers.len();
    for k in 1..n {
        let victim = &sh.workers[(index + k) % n];
        if let Some(f) = victim.queue.pop() {
            if f.bound && f.home != index {
                victim.queue.push(f);
                if victim.sleeping.load(SeqCst) {
                    sh.unpark(victim);
                }
                continue;
            }
            bump(&sh.workers[index].stats.steals);
            return Some(f);
        }
    }
    None
}

/// Takes the whole inbox: returns its oldest fiber and queues the others behind it.
fn take_inbox(w: &Worker) -> Option<Box<Fiber>> {
    let mut p = w.inbox.swap(std::ptr::null_mut(), Acquire);
    if p.is_null() {
        return None;
    }
    // Reverse the stack so the oldest comes first.
    let mut fifo: *mut Fiber = std::ptr::null_mut();
    while !p.is_null() {
        // SAFETY: inbox nodes are fibers published by `push_ready`, now ours.
        let next = unsafe { (*p).link.get() };
        unsafe { (*p).link.set(fifo) };
        fifo = p;
        p = next;
    }
    let first = unsafe { Box::from_raw(fifo) };
    let mut rest = first.link.replace(std::ptr::null_mut());
    while !rest.is_null() {
        let f = unsafe { Box::from_raw(rest) };
        rest = f.link.replace(std::ptr::null_mut());
        w.queue.push(f);
    }
    Some(first)
}

/// Expired timers, the inbox and A1 notifications; true if it made a fiber ready.
fn service(ctx: &StCtx) -> bool {
    let sh = &*ctx.shared;
    let me = &sh.workers[ctx.index];
    let mut made = false;
    // A queue that never empties must not keep inbox fibers waiting.
    if let Some(f) = take_inbox(me) {
        me.queue.push(f);
        made = true;
    }
    if me.timers.load(Relaxed) > 0 {
        let now = Instant::now();
        let mut local = ctx.local.borrow_mut();
        while local
            .timers
            .peek()
            .is_some_and(|Reverse((t, _, _))| *t <= now)
        {
            let Reverse((_, _, TimerEntry(f))) = local.timers.pop().unwrap();
            me.timers.store(me.timers.load(Relaxed) - 1, Relaxed);
            me.queue.push(f);
            made = true;
        }
    }
    if me.notified.load(Relaxed) && me.notified.swap(false, SeqCst) {
        // A1: scan the whole blocked queue for fibers whose primitive lets them go.
        let mut local = ctx.local.borrow_mut();
        bump(&me.stats.a1_scans);
        let c = &me.stats.a1_scanned;
        c.store(c.load(Relaxed) + local.a1_blocked.len() as u64, Relaxed);
        let mut i = 0;
        while i < local.a1_blocked.len() {
            // SAFETY: a blocked fiber keeps its primitive borrowed, so it is alive.
            if unsafe { (*local.a1_blocked[i].1).try_acquire() } {
                let (f, _) = local.a1_blocked.swap_remove(i);
                bump(&me.wakes);
                me.queue.push(f);
                made = true;
            } else {
                i += 1;
            }
        }
    }
    made
}

fn run(ctx: &StCtx, mut f: Box<Fiber>) {
    let sh = &*ctx.shared;
    let me = &sh.workers[ctx.index];
    if !f.bound {
        f.home = ctx.index;
    }
    FIBER.with(|c| c.set(&mut *f));
    stack::set_running(f.guard, f.id, f.size);
    let r = f.co.as_mut().unwrap().resume(());
    stack::clear_running();
    FIBER.with(|c| c.set(std::ptr::null_mut()));
    match r {
        CoroutineResult::Yield(Suspend::Yield) => me.queue.push(f),
        CoroutineResult::Yield(Suspend::Sleep(t)) => {
            let mut local = ctx.local.borrow_mut();
            local.seq += 1;
            let seq = local.seq;
            local.timers.push(Reverse((t, seq, TimerEntry(f))));
            bump(&me.timers);
        }
        CoroutineResult::Yield(Suspend::BlockA2(core)) => {
            bump(&me.blocks);
            let p = Box::into_raw(f);
            // SAFETY: the blocking fiber borrows the primitive until it is woken.
            let mut wake = RtWake { sh, st: ctx };
            let queued = unsafe { (*core).join(p, ctx.index, &mut wake) };
            if !queued {
                bump(&me.wakes);
                // It need not wait: it runs next, ahead of whatever the slot held.
                if let Some(old) = ctx.next.replace(Some(unsafe { Box::from_raw(p) })) {
                    me.queue.push(old);
                }
            }
        }
        CoroutineResult::Yield(Suspend::BlockA1(g)) => {
            bump(&me.blocks);
            // SAFETY: as above.
            let gate = unsafe { &*g };
            gate.register(ctx.index);
            if gate.try_acquire() {
                bump(&me.wakes);
                me.queue.push(f);
            } else {
                ctx.local.borrow_mut().a1_blocked.push((f, g));
            }
        }
        CoroutineResult::Return(()) => {
            let co = f.co.take().unwrap();
            let stack = co.into_stack();
            let mut local = ctx.local.borrow_mut();
            if local.stacks.len() < 64 {
                local.stacks.push(stack);
            } else {
                sh.stacks.lock().push(stack);
            }
            bump(&me.finished);
        }
    }
}

/// ST 0, when idle: if every live fiber stays blocked for `deadlock_timeout` with no wake-up
/// and nothing sleeping, declare a deadlock (joins from outside return
/// [`JoinError::Deadlock`]) and say so on stderr.
fn check_deadlock(sh: &Shared, suspect: &mut Option<(Instant, u64)>) {
    let Some(limit) = sh.cfg.deadlock_timeout else {
        return;
    };
    if sh.deadlock.load(Relaxed) {
        return;
    }
    let timers: u64 = sh.workers.iter().map(|w| w.timers.load(SeqCst)).sum();
    let live = sh.live();
    let progress = sh.total_wakes() + sh.spawned.load(SeqCst);
    let stuck = live > 0 && timers == 0 && sh.blocked() == live;
    match (*suspect, stuck) {
        (_, false) => *suspect = None,
        (None, true) => *suspect = Some((Instant::now(), progress)),
        (Some((_, p)), true) if p != progress => *suspect = Some((Instant::now(), progress)),
        (Some((since, _)), true) => {
            if since.elapsed() >= limit {
                // Joins from outside now return `Error::Deadlock` and `deadlocked()` says so;
                // a library does not print.
                sh.deadlock.store(true, SeqCst);
            }
        }
    }
}

/// The result of a user thread.
pub struct JoinHandle<T> {
    inner: JoinInner<T>,
}

enum JoinInner<T> {
    Os(std::thread::JoinHandle<T>),
    Fiber(Arc<JoinState<T>>),
}

pub(crate) struct JoinState<T> {
    result: UnsafeCell<Option<std::thread::Result<T>>>,
    done: AtomicBool,
    gate: Gate,
    outside: AtomicUsize,
    lock: parking_lot::Mutex<()>,
    cv: parking_lot::Condvar,
}

// SAFETY: `result` is written once by the finishing fiber before `done` is set, and read once
// by the single joiner after it saw `done`.
unsafe impl<T: Send> Sync for JoinState<T> {}
unsafe impl<T: Send> Send for JoinState<T> {}

impl<T> JoinState<T> {
    fn new(shared: &Arc<Shared>) -> Self {
        JoinState {
            result: UnsafeCell::new(None),
            done: AtomicBool::new(false),
            gate: Gate::one_waiter(shared, 0, 1, true),
            outside: AtomicUsize::new(0),
            lock: parking_lot::Mutex::new(()),
            cv: parking_lot::Condvar::new(),
        }
    }

    /// The runtime the joined fiber runs on (its gate is always an A1/A2 gate).
    fn shared(&self) -> &Arc<Shared> {
        self.gate
            .runtime()
            .expect("a fiber's join gate belongs to its runtime")
    }

    fn complete(&self, r: std::thread::Result<T>) {
        unsafe { *self.result.get() = Some(r) };
        self.done.store(true, SeqCst);
        self.gate.release(1);
        if self.outside.load(SeqCst) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the user thread and returns its value, its panic, or a deadlock verdict.
    /// From a fiber it blocks the fiber (not the ST); from any other thread it blocks that
    /// thread.
    pub fn join(self) -> Result<T, JoinError> {
        match self.inner {
            JoinInner::Os(h) => h.join().map_err(JoinError::Panic),
            JoinInner::Fiber(st) => {
                if !st.done.load(Acquire) {
                    if in_fiber_of(st.shared()) {
                        st.gate.acquire();
                    } else {
                        st.outside.fetch_add(1, SeqCst);
                        let mut g = st.lock.lock();
                        while !st.done.load(SeqCst) {
                            if st.shared().deadlock.load(SeqCst) {
                                return Err(JoinError::Deadlock);
                            }
                            st.cv.wait_for(&mut g, Duration::from_millis(20));
                        }
                    }
                }
                // SAFETY: done is set, the finishing fiber wrote the result before it.
                match unsafe { (*st.result.get()).take() } {
                    Some(Ok(v)) => Ok(v),
                    Some(Err(p)) => Err(JoinError::Panic(p)),
                    None => unreachable!("a finished user thread leaves its result"),
                }
            }
        }
    }

    /// Whether the user thread has finished.
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            JoinInner::Os(h) => h.is_finished(),
            JoinInner::Fiber(st) => st.done.load(Acquire),
        }
    }
}
