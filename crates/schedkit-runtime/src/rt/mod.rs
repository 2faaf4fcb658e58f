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

mod join;
mod runtime;
mod worker;

pub use join::JoinHandle;
pub(crate) use join::JoinState;
pub use runtime::{Handle, Runtime};
// The parts share the runtime's private items as they did in one file.
use join::*;
use runtime::*;
use worker::*;

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
