//! Joining a fiber: the handle and the shared state its result passes through.

use super::*;

/// The result of a user thread.
pub struct JoinHandle<T> {
    pub(super) inner: JoinInner<T>,
}

pub(super) enum JoinInner<T> {
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
    pub(super) fn new(shared: &Arc<Shared>) -> Self {
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

    pub(super) fn complete(&self, r: std::thread::Result<T>) {
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
