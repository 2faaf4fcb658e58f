//! schedkit-runtime: user-mode cooperative threads (fibers) with scheduler-aware
//! synchronisation in the three architectures of seed 003 (A0, A1, A2), and seed 000's pinned
//! FCFS worker pool.
//!
//! - [`Runtime`] / [`Handle`]: scheduler threads (one per core, pinned) running fibers M:N;
//!   [`spawn`], [`yield_now`], [`sleep`], [`JoinHandle::join`] (value, panic, or deadlock);
//!   stacks with guard pages and a reported overflow ([`stack`]).
//! - [`prim`]: [`Event`] (auto/manual reset), [`Mutex`], [`Semaphore`], [`Barrier`],
//!   [`Channel`], all over one gate whose implementation the runtime's [`Arch`] selects.
//! - [`pool`]: [`Pool`], the FCFS worker pool with a mutex queue or a lock-free queue.
//! - [`tasks`]: `[[task]]` scenarios on real cores, under SCHED_DEADLINE or on the PAWS /
//!   global-EDF / work-stealing pool of [`paws`], folded into the report `sim` gives.
//!
//! Design notes: `docs/fibers.md` and `docs/pool.md`.

#[cfg(not(loom))]
pub(crate) mod gate;
#[cfg(not(loom))]
pub mod paws;
#[cfg(not(loom))]
pub mod pool;
#[cfg(not(loom))]
pub mod prim;
#[cfg(not(loom))]
pub mod rt;
#[cfg(not(loom))]
pub mod stack;
pub(crate) mod sync;
#[cfg(not(loom))]
pub mod tasks;

/// Under `--cfg loom` only the A2 state machine is built, for its loom models.
#[cfg(loom)]
#[path = "gate/a2core.rs"]
pub mod a2core;

#[cfg(not(loom))]
pub use gate::a2core;
#[cfg(not(loom))]
pub use pool::{Pool, PoolConfig, QueueKind, TaskHandle};
#[cfg(not(loom))]
pub use prim::{Barrier, Channel, Event, EventKind, Mutex, MutexGuard, Semaphore};
#[cfg(not(loom))]
pub use rt::{
    current_worker, in_fiber, sleep, spawn, yield_now, Arch, Config, Handle, JoinError, JoinHandle,
    Runtime, Stats,
};
