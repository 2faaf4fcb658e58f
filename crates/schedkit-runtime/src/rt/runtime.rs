//! The runtime and its handle: starting and stopping the scheduler threads, spawning.

use super::*;

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
pub(super) enum Placement {
    /// The spawning ST, or round robin for a spawn from outside the runtime.
    Auto,
    /// ST `group mod STs`, stealable.
    Near(usize),
    /// Always this ST, never stolen.
    Bound(usize),
}

pub(super) fn spawn_fiber<F, T>(shared: &Arc<Shared>, f: F, place: Placement) -> JoinHandle<T>
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
    pub(super) fn push_ready(&self, f: Box<Fiber>, steal_hint: bool) {
        self.push_ready_from(self.own_st(), f, steal_hint)
    }

    /// The caller's ST context if the caller is an ST (or a fiber on an ST) of this runtime,
    /// else null.
    #[inline]
    pub(super) fn own_st(&self) -> *const StCtx {
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

    pub(super) fn unpark(&self, w: &Worker) {
        if let Some(t) = w.thread.get() {
            t.unpark();
        }
    }

    /// Wakes a blocked fiber (called by setters of A2 primitives and by JoinState); `st` is
    /// the caller's [`Shared::own_st`].
    #[inline]
    pub(super) fn wake_from(&self, st: *const StCtx, p: *mut Fiber) {
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
    pub(super) fn hand_chain(&self, i: usize, first: *mut Fiber) {
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
    pub(super) fn live(&self) -> u64 {
        let fin: u64 = self.workers.iter().map(|w| w.finished.load(SeqCst)).sum();
        self.spawned.load(SeqCst) - fin
    }

    pub(super) fn blocked(&self) -> u64 {
        let b: u64 = self.workers.iter().map(|w| w.blocks.load(SeqCst)).sum();
        b - self.total_wakes()
    }

    pub(super) fn total_wakes(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.wakes.load(SeqCst))
            .sum::<u64>()
            + self.outside_wakes.load(SeqCst)
    }
}
