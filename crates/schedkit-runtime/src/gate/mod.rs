//! The one blocking mechanism under every primitive: a *gate* holds permits and blocks user
//! threads that find none. Events, mutexes, semaphores, barriers, channels and join handles
//! are written once on top of it (`crate::prim`), and the architecture picks the gate:
//!
//! | arch | gate | blocked user threads wait in |
//! |---|---|---|
//! | A0 | parking_lot `Mutex<u32>` + `Condvar` | the kernel (futex) |
//! | A1 | [`a1::A1Gate`]: permits + registered STs | the blocked queue of their ST |
//! | A2 | [`a2core::A2Core`]: lock-free state word + list | the primitive itself |
//!
//! A gate has a mode: *consuming* (auto-reset event, semaphore, mutex: a waiter takes a
//! permit) or *manual* (manual-reset event: waiters pass while permits > 0 and a set wakes all).

pub(crate) mod a1;
pub mod a2core;

use std::sync::Arc;

use crate::rt::{fiber_of, suspend_fiber, Arch, Fiber, Handle, RtWake, Shared, Suspend};
use a1::A1Gate;
use a2core::A2Core;

/// Most blocked lists of one manual-reset event under A2 (each takes a cache line).
const MAX_LANES: usize = 8;

pub(crate) struct A0Gate {
    permits: parking_lot::Mutex<u32>,
    cv: parking_lot::Condvar,
    cap: u32,
    manual: bool,
}

pub(crate) struct A2Gate {
    core: A2Core<Fiber>,
    shared: Arc<Shared>,
}

pub(crate) enum Gate {
    A0(A0Gate),
    A1(A1Gate),
    A2(A2Gate),
}

/// How a thread that is not a fiber of the gate's runtime waits on an A1/A2 gate: spin, then
/// yield, then sleep in growing steps (such callers are rare: a main thread waiting for a
/// result uses the join handle's own condvar).
fn outside_wait(mut try_acquire: impl FnMut() -> bool) {
    let mut round = 0u32;
    while !try_acquire() {
        round += 1;
        if round < 64 {
            std::hint::spin_loop();
        } else if round < 128 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(
                ((round - 128) as u64).min(1000) + 1,
            ));
        }
    }
}

impl Gate {
    pub(crate) fn new(rt: &Handle, initial: u32, cap: u32, manual: bool) -> Gate {
        Gate::new_in(&rt.shared, initial, cap, manual)
    }

    pub(crate) fn new_in(shared: &Arc<Shared>, initial: u32, cap: u32, manual: bool) -> Gate {
        Gate::with_lanes(
            shared,
            initial,
            cap,
            manual,
            shared.cfg.workers.min(MAX_LANES),
        )
    }

    /// A gate that at most one user thread waits on (a join handle's): one lane, no
    /// allocation beyond the gate itself.
    pub(crate) fn one_waiter(shared: &Arc<Shared>, initial: u32, cap: u32, manual: bool) -> Gate {
        Gate::with_lanes(shared, initial, cap, manual, 1)
    }

    fn with_lanes(
        shared: &Arc<Shared>,
        initial: u32,
        cap: u32,
        manual: bool,
        lanes: usize,
    ) -> Gate {
        match shared.cfg.arch {
            Arch::A0 => Gate::A0(A0Gate {
                permits: parking_lot::Mutex::new(initial),
                cv: parking_lot::Condvar::new(),
                cap,
                manual,
            }),
            Arch::A1 => Gate::A1(A1Gate::new(shared.clone(), initial, cap, manual)),
            Arch::A2 => Gate::A2(A2Gate {
                // A manual-reset event gets a blocked list per ST (up to MAX_LANES; STs
                // beyond share them), so blocks from several STs do not contend on one line.
                core: A2Core::with_lanes(initial, cap, manual, lanes),
                shared: shared.clone(),
            }),
        }
    }

    /// The runtime of an A1/A2 gate (A0 gates belong to no scheduler).
    pub(crate) fn runtime(&self) -> Option<&Arc<Shared>> {
        match self {
            Gate::A0(_) => None,
            Gate::A1(g) => Some(&g.shared),
            Gate::A2(g) => Some(&g.shared),
        }
    }

    pub(crate) fn try_acquire(&self) -> bool {
        match self {
            Gate::A0(g) => {
                let mut p = g.permits.lock();
                if *p == 0 {
                    return false;
                }
                if !g.manual {
                    *p -= 1;
                }
                true
            }
            Gate::A1(g) => g.try_acquire(),
            Gate::A2(g) => g.core.try_acquire(),
        }
    }

    /// Takes a permit (or passes a set manual event), blocking the calling user thread until
    /// there is one.
    pub(crate) fn acquire(&self) {
        match self {
            Gate::A0(g) => {
                let mut p = g.permits.lock();
                while *p == 0 {
                    g.cv.wait(&mut p);
                }
                if !g.manual {
                    *p -= 1;
                }
            }
            Gate::A1(g) => {
                if g.try_acquire() {
                    return;
                }
                let f = fiber_of(&g.shared);
                if !f.is_null() {
                    // The ST's scan takes the permit on our behalf before it wakes us.
                    // SAFETY: `f` is the calling fiber.
                    unsafe { suspend_fiber(f, Suspend::BlockA1(g)) };
                } else {
                    outside_wait(|| g.try_acquire());
                }
            }
            Gate::A2(g) => {
                if g.core.try_acquire() {
                    return;
                }
                let f = fiber_of(&g.shared);
                if !f.is_null() {
                    // The drain takes the permit on our behalf before it wakes us.
                    // SAFETY: `f` is the calling fiber.
                    unsafe { suspend_fiber(f, Suspend::BlockA2(&g.core)) };
                } else {
                    outside_wait(|| g.core.try_acquire());
                }
            }
        }
    }

    /// Adds `n` permits (capped) and wakes whom they allow.
    pub(crate) fn release(&self, n: u32) {
        match self {
            Gate::A0(g) => {
                let mut p = g.permits.lock();
                *p = p.saturating_add(n).min(g.cap);
                if g.manual || n > 1 {
                    g.cv.notify_all();
                } else {
                    g.cv.notify_one();
                }
            }
            Gate::A1(g) => g.release(n),
            Gate::A2(g) => {
                g.core.release(n, &mut RtWake::new(&g.shared));
            }
        }
    }

    pub(crate) fn reset(&self) {
        match self {
            Gate::A0(g) => *g.permits.lock() = 0,
            Gate::A1(g) => g.reset(),
            Gate::A2(g) => g.core.reset(),
        }
    }

    pub(crate) fn permits(&self) -> u32 {
        match self {
            Gate::A0(g) => *g.permits.lock(),
            Gate::A1(g) => g.permits(),
            Gate::A2(g) => g.core.permits(),
        }
    }
}
