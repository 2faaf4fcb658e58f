//! The one door through which the lock-free code takes its atomics: `std` normally, `loom`
//! under `--cfg loom`, so that the loom models in `tests/loom_a2.rs` explore every interleaving
//! of the very code that runs in production (the tokio `loom` shim pattern).

#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
}

#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
}

/// A spin-loop hint that lets loom switch threads (a bare `spin_loop` would make a loom model
/// spin forever on one thread).
#[inline]
#[allow(dead_code)]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
