//! Synchronisation primitives for user threads, written once over [`Gate`] so that the same
//! program runs under A0, A1 or A2: the runtime handle passed to `new` picks the architecture.
//!
//! Each primitive blocks the *user thread*: a fiber switches to its ST (which runs other
//! fibers), an A0 thread sleeps in the kernel.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering::*};

use crossbeam_queue::ArrayQueue;

use crate::gate::Gate;
use crate::rt::Handle;

/// Auto- or manual-reset, as Win32 events in the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `set` releases one waiter (or the next `wait`), then the event is unset again.
    AutoReset,
    /// `set` releases every waiter and stays set until `reset`.
    ManualReset,
}

/// An event.
pub struct Event {
    gate: Gate,
}

impl Event {
    pub fn new(rt: &Handle, kind: EventKind, initially_set: bool) -> Event {
        Event {
            gate: Gate::new(rt, initially_set as u32, 1, kind == EventKind::ManualReset),
        }
    }
    /// Waits until the event is set (an auto-reset event is unset again by this wait).
    pub fn wait(&self) {
        self.gate.acquire();
    }
    /// Like `wait` without blocking; true if it passed.
    pub fn try_wait(&self) -> bool {
        self.gate.try_acquire()
    }
    pub fn set(&self) {
        self.gate.release(1);
    }
    pub fn reset(&self) {
        self.gate.reset();
    }
    pub fn is_set(&self) -> bool {
        self.gate.permits() > 0
    }
}

/// A counting semaphore.
pub struct Semaphore {
    gate: Gate,
}

impl Semaphore {
    pub fn new(rt: &Handle, permits: u32) -> Semaphore {
        Semaphore {
            gate: Gate::new(rt, permits, u32::MAX >> 1, false),
        }
    }
    pub fn acquire(&self) {
        self.gate.acquire();
    }
    pub fn try_acquire(&self) -> bool {
        self.gate.try_acquire()
    }
    pub fn release(&self, n: u32) {
        self.gate.release(n);
    }
    pub fn available(&self) -> u32 {
        self.gate.permits()
    }
}

/// A mutex: a binary semaphore guarding `T`.
pub struct Mutex<T> {
    gate: Gate,
    data: UnsafeCell<T>,
}

// SAFETY: the gate admits one holder at a time.
unsafe impl<T: Send> Send for Mutex<T> {}
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    pub fn new(rt: &Handle, value: T) -> Mutex<T> {
        Mutex {
            gate: Gate::new(rt, 1, 1, false),
            data: UnsafeCell::new(value),
        }
    }
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.gate.acquire();
        MutexGuard { m: self }
    }
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.gate.try_acquire().then_some(MutexGuard { m: self })
    }
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

pub struct MutexGuard<'a, T> {
    m: &'a Mutex<T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the only permit.
        unsafe { &*self.m.data.get() }
    }
}
impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above.
        unsafe { &mut *self.m.data.get() }
    }
}
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.m.gate.release(1);
    }
}

/// A reusable barrier for `n` user threads.
///
/// Two gates alternate by generation (sense reversal): a user thread that passes generation g
/// and arrives at g+1 at once waits on the other gate, so it cannot take a permit meant for a
/// straggler of generation g that has counted itself but not yet waited.
pub struct Barrier {
    n: usize,
    /// Low bit: generation parity; the rest: arrivals in this generation, times 2.
    state: AtomicUsize,
    gates: [Gate; 2],
}

impl Barrier {
    pub fn new(rt: &Handle, n: usize) -> Barrier {
        assert!(n >= 1);
        Barrier {
            n,
            state: AtomicUsize::new(0),
            gates: [
                Gate::new(rt, 0, u32::MAX >> 1, false),
                Gate::new(rt, 0, u32::MAX >> 1, false),
            ],
        }
    }
    /// Waits until `n` user threads have called `wait`; returns true for exactly one of them
    /// (the last to arrive) per generation.
    pub fn wait(&self) -> bool {
        let mut s = self.state.load(Acquire);
        loop {
            let gen = s & 1;
            let arrived = (s >> 1) + 1;
            let next = if arrived == self.n {
                // Last: start the next generation with no arrivals.
                gen ^ 1
            } else {
                (arrived << 1) | gen
            };
            match self.state.compare_exchange_weak(s, next, AcqRel, Acquire) {
                Ok(_) => {
                    if arrived == self.n {
                        if self.n > 1 {
                            self.gates[gen].release((self.n - 1) as u32);
                        }
                        return true;
                    }
                    self.gates[gen].acquire();
                    return false;
                }
                Err(x) => s = x,
            }
        }
    }
}

/// A bounded multi-producer multi-consumer channel.
pub struct Channel<T> {
    queue: ArrayQueue<T>,
    slots: Gate,
    items: Gate,
}

impl<T> Channel<T> {
    pub fn new(rt: &Handle, capacity: usize) -> Channel<T> {
        assert!(capacity >= 1);
        Channel {
            queue: ArrayQueue::new(capacity),
            slots: Gate::new(rt, capacity as u32, capacity as u32, false),
            items: Gate::new(rt, 0, capacity as u32, false),
        }
    }
    /// Sends `v`, blocking while the channel is full.
    pub fn send(&self, v: T) {
        self.slots.acquire();
        // A slot permit guarantees room: permits never exceed free slots.
        if self.queue.push(v).is_err() {
            unreachable!("channel slot accounting");
        }
        self.items.release(1);
    }
    /// Receives a value, blocking while the channel is empty.
    pub fn recv(&self) -> T {
        self.items.acquire();
        let v = self.queue.pop().expect("channel item accounting");
        self.slots.release(1);
        v
    }
    pub fn try_recv(&self) -> Option<T> {
        if !self.items.try_acquire() {
            return None;
        }
        let v = self.queue.pop().expect("channel item accounting");
        self.slots.release(1);
        Some(v)
    }
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }
}
