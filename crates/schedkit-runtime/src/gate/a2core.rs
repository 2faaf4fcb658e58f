//! Architecture A2's primitive: the blocked queue lives inside the primitive, and a lock-free
//! state machine decides who wakes whom (seed 003, section "Усовершенствованная архитектура
//! планировщика", figure 4).
//!
//! # The model
//!
//! A primitive holds *permits* (an event: 0 or 1; a semaphore: a count) and a list of blocked
//! fibers. Two kinds of actor touch it, both scheduler threads (STs) or, for `release`, any
//! thread:
//!
//! - a **joiner**: an ST whose fiber found no permit and switched out; the ST (not the fiber,
//!   which is no longer running) adds the fiber to the primitive's list, exactly as the paper's
//!   chain UT -> primitive -> ST -> blocked queue;
//! - a **setter**: whoever sets the event / posts the semaphore; it moves blocked fibers to the
//!   ready queue of the ST that will run them (chain ST -> primitive -> blocked queue -> ready
//!   queue).
//!
//! The paper's states map onto one 64-bit word `state = permits (low 32) | busy (high 32)`:
//!
//! ```text
//!                       set / post (busy + 1, permits += n)
//!     +---------+ -----------------------------------------------> +-----------------+
//!     |  UNSET  |                                                  |    SETTING      |
//!     | p=0 b=0 | <----------------------------------------------- | p>0 b>=1        |
//!     +---------+     last holder leaves, permits used up          | (drains list)   |
//!        |  ^                                                      +-----------------+
//!  join: |  | re-read (a SeqCst load of the word)                     ^    |        |
//!  push  |  | finds p = 0: the fiber stays blocked                    |    | reset  | last holder
//!  fiber v  |                                                         |    | p:=0   | leaves,
//!     +-------------------+   re-read finds p > 0 (a set crossed      |    v        v list empty
//!     |     JOINING       |   the join): enter, b+1; leaving drains --+  +---------+
//!     | fiber listed,     |                                            |   SET   |
//!     | word not re-read  |                                            | p>0 b=0 |
//!     +-------------------+                                            +---------+
//!       several STs may be JOINING at once       join on SET: take a permit (auto-reset,
//!       (sub-state "several STs joining")        semaphore) or pass (manual-reset)
//! ```
//!
//! `busy` counts the actors inside SETTING (setters, and joiners that found a set crossing
//! their join). JOINING is the window between a joiner's push and its re-read of the word. The
//! paper's sub-states ("another ST tries to set or unset while one is setting or joining") are
//! the cases `busy > 1`, "permits changed while busy" and "a set crossed a join": instead of
//! making the late-comer wait and retry, it records its request in the word (a set adds
//! permits, a reset clears them) and leaves; the **last holder to leave** drains the list if,
//! at that moment, there are permits and blocked fibers. No actor ever waits for another:
//! every loop below retries only when a compare-and-swap lost to a change that some other
//! actor completed.
//!
//! # Why no wake-up is lost
//!
//! Whenever `busy == 0` and no joiner is between its push and its re-read,
//! `!(permits > 0 && list non-empty)`.
//! - A joiner pushes its fiber (a `SeqCst` compare-and-swap on the list head), then re-reads
//!   the word with a `SeqCst` load (`reread`). Every change of the word that adds permits is
//!   a `SeqCst` read-modify-write, and the setter then looks at the list with a `SeqCst` load
//!   (in `leave`). These four operations are the store-buffer pattern under one total order:
//!   if the setter's load misses the node, the node's push comes after that load, so the
//!   joiner's re-read comes after the permits were added and sees them (unless others took
//!   them); the joiner then enters `busy` and leaves, which drains. With acquire/release
//!   orderings instead the two loads could each miss the other side's write (loom finds that
//!   lost wake-up at once). A block costs one locked instruction on x86-64 (the push's
//!   `lock cmpxchg`; a `SeqCst` load is a plain `mov`); it used to be three read-modify-writes
//!   (enter, push, leave), then two (push and a `fetch_add(0)` re-read, which compiled to a
//!   `lock or` fence and a load). loom does not model the total order of `SeqCst` loads
//!   (tokio-rs/loom#180), so under `--cfg loom` the re-read is that `fetch_add(0)`, which
//!   closes the same race through the word's modification order.
//! - Every holder, before it decrements `busy`, loads the word and checks the list; if it sees
//!   `permits > 0` and a non-empty list it drains first. Its decrement is a compare-and-swap
//!   against the word it checked, so a change in between (a set, a reset) makes it look
//!   again; a joiner that pushes after the check re-reads the word after that and drains
//!   itself.
//! - A set that adds permits always enters `busy` (it never just adds permits to a quiet
//!   word), so it too passes the leave check. A set that finds waiters and no permits takes
//!   the list without entering and hands its permits over (`hand_over`): taking cannot break
//!   the invariant, and whatever it must put back (waiters, permits) it adds after entering.
//!   A cheaper "add permits without entering when the list looks empty" was rejected: with no
//!   version counter in the word it is open to ABA (the list can empty and fill again between
//!   the setter's two loads while the word stays bit-identical).
//!
//! `tests/loom_a2.rs` checks this by exhausting interleavings of two setters and two joiners.
//!
//! # Manual-reset events: no `busy`, one list per ST
//!
//! A manual-reset event's drain takes no permits (a set wakes everyone, a join on a set event
//! passes), so its transitional states need no count: JOINING is the push of one node, SETTING
//! the exchange that takes a list, and the only race to close is "a join and a set cross". A
//! joiner pushes its node, issues a `SeqCst` fence and reads the permits; a setter raises the
//! permits, issues a `SeqCst` fence and takes the lists. Of the two fences, the later one sees
//! the other side's write (the store-buffer pattern, as A1's registration): either the
//! setter's take finds the node, or the joiner finds the event set and wakes what is listed
//! itself. A block costs one compare-and-swap instead of enter + push + leave.
//!
//! Its list is split into *lanes*, one per ST (the runtime passes its ST index), each head on a
//! cache line of its own. When hundreds of fibers on several STs block on one event at once
//! (method 1 of `fibers-gauss`: every fiber waits for every later x value in turn), one shared
//! head moved between the cores on every block; with lanes a block touches only its own ST's
//! line. A set hands each lane over whole ([`Wake::wake_chain`]): the runtime gives the chain
//! to the ST that owns the lane, so the setter, which is on the critical path of whoever waits
//! for its next step, touches no blocked fiber (walking them cost one cache miss each on
//! fibers that sit in the other cores' caches). A reset seen between two lanes leaves the
//! remaining lanes blocked: they observed no set.
//!
//! # Memory ordering
//!
//! All changes of `state` are read-modify-writes with `AcqRel`, `SeqCst` where they add
//! permits; the list head is pushed with `SeqCst` (a release, and the joiner's half of the
//! pattern above) and taken with `Acquire` (`swap`), so a fiber's link field written by the
//! pusher is visible to the taker. Data written by a setter before `release` reaches the
//! woken fiber through the state word (fast path) or through the ready queue (slow path).
//!
//! # Fairness
//!
//! The list is a Treiber stack taken whole (`swap(null)`, free of ABA) and reversed, so waiters
//! are served oldest first within one drain; waiters left over when permits run out are pushed
//! back in front of newer arrivals, so order across drains is approximate, not strict FIFO.
//! A manual-reset event wakes every waiter in one drain, so order only decides who runs first:
//! its lanes are handed over newest first, unreversed (the newest waiter's stack is the
//! warmest, and a walk less is a cache miss less per waiter).

use crate::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering::*};
use std::cell::Cell;
use std::ptr;

/// An intrusive list node: a blocked fiber carries the link to the next blocked fiber.
///
/// # Safety
/// `link` must return the same cell for the node's whole life, and the node must not be in two
/// lists at once.
pub unsafe trait Linked {
    fn link(&self) -> &Cell<*mut Self>;
}

/// Where a set sends the blocked nodes it takes.
pub trait Wake<T: Linked> {
    /// `node` is no longer blocked: it is the callee's to run.
    fn wake(&mut self, node: *mut T);
    /// A manual-reset event hands over the whole list of lane `lane` at once: `first`, then
    /// the nodes linked through `link` (the last one's link is null), newest first. The
    /// default wakes them one by one; a scheduler can instead give the chain to the ST that
    /// owns the lane without touching the nodes.
    fn wake_chain(&mut self, lane: usize, first: *mut T) {
        let _ = lane;
        let mut cur = first;
        while !cur.is_null() {
            // SAFETY: the chain's nodes are ours (taken from the list).
            let next = unsafe { (*cur).link().get() };
            unsafe { (*cur).link().set(ptr::null_mut()) };
            self.wake(cur);
            cur = next;
        }
    }
}

impl<T: Linked, F: FnMut(*mut T)> Wake<T> for F {
    fn wake(&mut self, node: *mut T) {
        self(node)
    }
}

/// A list head alone on its cache line.
#[repr(align(64))]
struct Lane<T>(AtomicPtr<T>);

const BUSY: u64 = 1 << 32;
const PERMITS: u64 = BUSY - 1;

#[inline]
fn permits(s: u64) -> u32 {
    (s & PERMITS) as u32
}
#[inline]
fn busy(s: u64) -> u32 {
    (s >> 32) as u32
}

/// The A2 state machine over an intrusive list of `T`.
pub struct A2Core<T: Linked> {
    state: AtomicU64,
    /// The blocked list of a consuming primitive or of a one-lane manual-reset event.
    head: AtomicPtr<T>,
    /// A manual-reset event with several lanes has one list per *lane* instead (the caller
    /// picks the lane of a join, the runtime uses its ST index), each on its own cache line,
    /// so that fibers of different STs blocking on one event at once do not pass one line
    /// between the cores on every block. Allocated only then: a one-waiter gate (a join
    /// handle, created per spawn) must not pay an allocation.
    lanes: Option<Box<[Lane<T>]>>,
    /// Lanes that ever had a waiter (bit i: lane i); a set takes only those.
    used: AtomicU64,
    /// Most permits the primitive holds (1 for events and mutexes).
    cap: u32,
    /// Manual-reset event: a join passes without taking the permit, a drain wakes everyone.
    manual: bool,
}

// SAFETY: the raw pointers in the list are owned by the core while listed, and handed to
// exactly one `wake` call; `T` itself moves between threads.
unsafe impl<T: Linked + Send> Send for A2Core<T> {}
unsafe impl<T: Linked + Send> Sync for A2Core<T> {}

impl<T: Linked> A2Core<T> {
    /// A primitive with `initial` permits (at most `cap`) and one blocked list.
    pub fn new(initial: u32, cap: u32, manual: bool) -> Self {
        Self::with_lanes(initial, cap, manual, 1)
    }

    /// Like [`A2Core::new`], with `lanes` blocked lists for a manual-reset event (consuming
    /// primitives always have one).
    pub fn with_lanes(initial: u32, cap: u32, manual: bool, lanes: usize) -> Self {
        assert!(cap >= 1 && initial <= cap);
        let lanes = if manual { lanes.max(1) } else { 1 };
        A2Core {
            state: AtomicU64::new(initial as u64),
            head: AtomicPtr::new(ptr::null_mut()),
            lanes: (lanes > 1).then(|| {
                (0..lanes.min(64))
                    .map(|_| Lane(AtomicPtr::new(ptr::null_mut())))
                    .collect()
            }),
            used: AtomicU64::new(0),
            cap,
            manual,
        }
    }

    /// The list of a consuming primitive.
    #[inline]
    fn head(&self) -> &AtomicPtr<T> {
        &self.head
    }

    /// The list of lane `i` (a valid lane index) of a manual-reset event.
    #[inline]
    fn lane(&self, i: usize) -> &AtomicPtr<T> {
        match &self.lanes {
            Some(l) => &l[i].0,
            None => &self.head,
        }
    }

    fn lane_count(&self) -> usize {
        self.lanes.as_ref().map_or(1, |l| l.len())
    }

    /// Current permits (a snapshot).
    pub fn permits(&self) -> u32 {
        permits(self.state.load(Acquire))
    }

    /// Takes a permit without blocking (passes a set manual-reset event). The fast path of
    /// every wait: no scheduler involved.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        let mut s = self.state.load(Acquire);
        loop {
            if permits(s) == 0 {
                return false;
            }
            if self.manual {
                return true;
            }
            match self.state.compare_exchange_weak(s, s - 1, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    /// Called by the ST after `node`'s fiber switched out asking to block here (`lane`: which
    /// list of a manual-reset event, taken modulo their number). Returns `false`
    /// when a permit was there after all (the caller still owns `node` and runs it), `true`
    /// when the node went into the list (ownership passed to the core, which hands it to
    /// `wake` exactly once, possibly before this call returns).
    ///
    /// # Safety
    /// `node` must be valid and not in any list.
    pub unsafe fn join<W: Wake<T> + ?Sized>(
        &self,
        node: *mut T,
        lane: usize,
        wake: &mut W,
    ) -> bool {
        if self.manual {
            return self.join_manual(node, lane, wake);
        }
        let mut s = self.state.load(Acquire);
        loop {
            if permits(s) > 0 {
                match self.state.compare_exchange_weak(s, s - 1, AcqRel, Acquire) {
                    Ok(_) => return false,
                    Err(x) => s = x,
                }
            } else {
                break;
            }
        }
        // JOINING: publish the node, then look at the word again with a read-modify-write.
        // Read-modify-writes of the word form one order: a set whose change comes after ours
        // reads ours (and, through it, sees the node: its leave or hand-over finds it), and a
        // set whose change came before leaves permits that we see here. Then we enter and
        // leave like any holder, which drains. Two atomic operations per block instead of
        // enter, push and leave.
        push_chain(self.head(), node, node);
        let mut s = self.reread();
        if permits(s) > 0 {
            loop {
                match self
                    .state
                    .compare_exchange_weak(s, s + BUSY, AcqRel, Acquire)
                {
                    Ok(_) => break,
                    Err(x) => s = x,
                }
            }
            self.leave(wake);
        }
        true
    }

    /// A joiner's look at the word after its push (see "Why no wake-up is lost"). In
    /// production a `SeqCst` load: the push is a `SeqCst` compare-and-swap on the list head,
    /// and every change of the word that adds permits is a `SeqCst` read-modify-write
    /// followed (in the same thread) by a `SeqCst` load of the head, so the four form the
    /// store-buffer pattern under one total order: either the setter's load finds the node or
    /// this load finds the permits. On x86-64 a `SeqCst` load is a plain `mov` and the push's
    /// `lock cmpxchg` is already a full barrier, so a block costs one locked instruction
    /// instead of two (the read-modify-write compiled to a `lock or` fence plus a load).
    /// loom models `SeqCst` loads as acquire loads (tokio-rs/loom#180) and would report a
    /// lost wake-up that the total order rules out, so under `--cfg loom` the re-read stays
    /// the read-modify-write, which orders it with the setters' changes through the word's
    /// modification order instead; both close the same race.
    #[inline]
    fn reread(&self) -> u64 {
        #[cfg(loom)]
        return self.state.fetch_add(0, AcqRel);
        #[cfg(not(loom))]
        return self.state.load(SeqCst);
    }

    /// Adds `n` permits (at most `cap` in all) and wakes as many blocked fibers as they allow
    /// (all of them for a manual-reset event). Any thread may call it.
    pub fn release<W: Wake<T> + ?Sized>(&self, n: u32, wake: &mut W) {
        if self.manual {
            return self.release_manual(n, wake);
        }
        let mut s = self.state.load(Acquire);
        // Hand-over fast path (consuming primitives): no permits and fibers waiting, the usual
        // case of a set that wakes a blocked fiber. Take the list and give the permits straight
        // to the oldest waiters; the word changes only if waiters or permits are left over.
        if !self.manual && n > 0 && permits(s) == 0 && !self.head().load(Acquire).is_null() {
            self.hand_over(n.min(self.cap), wake);
            return;
        }
        loop {
            let p = permits(s).saturating_add(n).min(self.cap) as u64;
            let next = ((s & !PERMITS) + BUSY) | p;
            // SeqCst: adds permits, see `reread`.
            match self.state.compare_exchange_weak(s, next, SeqCst, Acquire) {
                Ok(_) => break,
                Err(x) => s = x,
            }
        }
        self.leave(wake);
    }

    /// Manual-reset join: publish, then look. Pushes the node, then (after a `SeqCst` fence)
    /// reads the permits; a set raises the permits, then (after its fence) takes the list.
    /// Whichever of the two comes second in the fences' total order sees the other (the
    /// store-buffer pattern, as A1's registration): either the setter's take finds the node,
    /// or the joiner finds the permits and wakes what is listed itself. A manual-reset drain
    /// takes no permits, so nothing else needs ordering: no `busy` and no leave, one atomic
    /// read-modify-write per block instead of three on a line every joiner shares.
    unsafe fn join_manual<W: Wake<T> + ?Sized>(
        &self,
        node: *mut T,
        lane: usize,
        wake: &mut W,
    ) -> bool {
        if permits(self.state.load(Acquire)) > 0 {
            return false;
        }
        let lane = lane % self.lane_count();
        // Mark the lane used (once per lane for the event's life: bits are never cleared, so
        // later joins only read the word), so that a set looks only at lanes that ever had a
        // waiter. The mark comes before our fence, so a setter that must find our node (its
        // fence after ours) sees the mark too.
        let bit = 1u64 << lane;
        if self.lanes.is_some() && self.used.load(Relaxed) & bit == 0 {
            self.used.fetch_or(bit, Relaxed);
        }
        push_chain(self.lane(lane), node, node);
        fence(SeqCst);
        if permits(self.state.load(Relaxed)) > 0 {
            self.wake_listed(wake);
        }
        true
    }

    /// Manual-reset set: raise the permits, then wake everyone listed (see `join_manual`).
    fn release_manual<W: Wake<T> + ?Sized>(&self, n: u32, wake: &mut W) {
        let mut s = self.state.load(Acquire);
        loop {
            let p = permits(s).saturating_add(n).min(self.cap) as u64;
            match self
                .state
                .compare_exchange_weak(s, (s & !PERMITS) | p, AcqRel, Acquire)
            {
                Ok(_) => break,
                Err(x) => s = x,
            }
        }
        fence(SeqCst);
        self.wake_listed(wake);
    }

    /// Manual-reset drain: takes each lane's list whole and hands it over as one chain
    /// (newest first: a broadcast wakes every waiter in the same drain, so the order only
    /// decides which runs first, and the newest waiter's stack is the warmest). The setter
    /// touches no blocked node: walking hundreds of nodes that sit in other cores' caches
    /// would put one cache miss per waiter on the setter, which is on the critical path of
    /// whatever waits for its next step. A reset seen between two lanes leaves the remaining
    /// lanes blocked (they observed no set); nothing is put back, so nothing needs a
    /// second look.
    fn wake_listed<W: Wake<T> + ?Sized>(&self, wake: &mut W) {
        // One lane: no marks to look at.
        let mut used = if self.lanes.is_some() {
            self.used.load(Relaxed)
        } else {
            1
        };
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            let lane = self.lane(i);
            if permits(self.state.load(Relaxed)) == 0 {
                return;
            }
            if lane.load(Relaxed).is_null() {
                continue;
            }
            let first = lane.swap(ptr::null_mut(), Acquire);
            if !first.is_null() {
                wake.wake_chain(i, first);
            }
        }
    }

    /// Wakes up to `n` of the oldest waiters with `n` permits that are not in the word.
    ///
    /// Taking the list needs no `busy`: the swap is atomic, and a taken waiter is no longer
    /// "in the list", so the invariant cannot be broken by taking. Only *adding* needs `busy`
    /// (a fiber pushed, or permits published, while nobody holds it could meet unnoticed), so
    /// when waiters or permits are left over we enter, put them back / publish them, and
    /// `leave` drains for any joiner that came meanwhile. A set that wakes one waiter thus
    /// costs one atomic swap, against enter + swap + take + leave.
    fn hand_over<W: Wake<T> + ?Sized>(&self, n: u32, wake: &mut W) {
        let mut left = n;
        let mut cur = self.take_all_fifo();
        while left > 0 && !cur.is_null() {
            // SAFETY: taken nodes are valid and now ours.
            let next = unsafe { (*cur).link().get() };
            unsafe { (*cur).link().set(ptr::null_mut()) };
            wake.wake(cur);
            left -= 1;
            cur = next;
        }
        if left == 0 && cur.is_null() {
            return;
        }
        let mut s = self.state.load(Acquire);
        loop {
            let p = permits(s).saturating_add(left).min(self.cap) as u64;
            let next = ((s & !PERMITS) + BUSY) | p;
            // SeqCst: adds permits, see `reread`.
            match self.state.compare_exchange_weak(s, next, SeqCst, Acquire) {
                Ok(_) => break,
                Err(x) => s = x,
            }
        }
        if !cur.is_null() {
            self.push_back(cur);
        }
        self.leave(wake);
    }

    /// Takes the whole list and returns it oldest first.
    fn take_all_fifo(&self) -> *mut T {
        let mut cur = self.head().swap(ptr::null_mut(), AcqRel);
        // Reverse the stack so the oldest waiter comes first.
        let mut fifo: *mut T = ptr::null_mut();
        while !cur.is_null() {
            // SAFETY: listed nodes are valid and owned by the core.
            let next = unsafe { (*cur).link().get() };
            unsafe { (*cur).link().set(fifo) };
            fifo = cur;
            cur = next;
        }
        fifo
    }

    /// Puts a chain that starts at `first` back on the list.
    fn push_back(&self, first: *mut T) {
        let mut last = first;
        loop {
            // SAFETY: the chain's nodes are ours until the push publishes them.
            let next = unsafe { (*last).link().get() };
            if next.is_null() {
                break;
            }
            last = next;
        }
        push_chain(self.head(), first, last);
    }

    /// Clears the permits (resets a manual-reset event). Fibers already woken stay woken.
    pub fn reset(&self) {
        let mut s = self.state.load(Acquire);
        while permits(s) != 0 {
            match self
                .state
                .compare_exchange_weak(s, s & !PERMITS, AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(x) => s = x,
            }
        }
    }

    /// Leaves the transitional state; whoever leaves drains first if permits and blocked
    /// fibers meet.
    fn leave<W: Wake<T> + ?Sized>(&self, wake: &mut W) {
        let mut s = self.state.load(Acquire);
        loop {
            debug_assert!(busy(s) >= 1);
            // SeqCst: the setter's half of the pattern in `reread`.
            if permits(s) > 0 && !self.head().load(SeqCst).is_null() {
                self.drain(wake);
                s = self.state.load(Acquire);
                continue;
            }
            match self
                .state
                .compare_exchange_weak(s, s - BUSY, AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(x) => s = x,
            }
        }
    }

    /// SETTING: wakes blocked fibers while permits last. The caller holds `busy`.
    fn drain<W: Wake<T> + ?Sized>(&self, wake: &mut W) {
        let mut cur = self.take_all_fifo();
        while !cur.is_null() {
            if !self.take_permit() {
                break;
            }
            let next = unsafe { (*cur).link().get() };
            unsafe { (*cur).link().set(ptr::null_mut()) };
            wake.wake(cur);
            cur = next;
        }
        if !cur.is_null() {
            // Out of permits: put the rest back.
            self.push_back(cur);
        }
    }

    fn take_permit(&self) -> bool {
        let mut s = self.state.load(Acquire);
        loop {
            if permits(s) == 0 {
                return false;
            }
            match self.state.compare_exchange_weak(s, s - 1, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(x) => s = x,
            }
        }
    }

    /// Whether no fiber is blocked here (a snapshot; for tests and debug checks).
    pub fn is_empty(&self) -> bool {
        (0..self.lane_count()).all(|i| self.lane(i).load(Acquire).is_null())
    }
}

/// Pushes the chain `first ..= last` (linked through `link`) on the list `head`.
fn push_chain<T: Linked>(head: &AtomicPtr<T>, first: *mut T, last: *mut T) {
    let mut h = head.load(Relaxed);
    loop {
        // SAFETY: `last` is ours until the CAS publishes it.
        unsafe { (*last).link().set(h) };
        // SeqCst: a joiner's push is its half of the pattern in `A2Core::reread` (on x86-64
        // the same `lock cmpxchg` as a release).
        match head.compare_exchange_weak(h, first, SeqCst, Relaxed) {
            Ok(_) => return,
            Err(x) => h = x,
        }
    }
}
