//! Architecture A1's primitive (seed 003, section "Модифицированная архитектура
//! планировщика", figure 2): the primitive holds only its permits and the set of STs that
//! registered with it; the blocked fibers sit in **one blocked queue per ST**.
//!
//! Blocking (chain UT -> primitive -> ST -> blocked queue): the fiber finds no permit and
//! switches to its ST; the ST registers itself with the primitive (a bit in `registered`),
//! appends the fiber to its blocked queue, and looks at the permits once more (see below).
//!
//! Unblocking (chain UT1 -> primitive -> ST, then ST -> blocked queue -> ready queue): the
//! setter adds permits and notifies every registered ST; each notified ST scans its *whole*
//! blocked queue and moves every fiber whose primitive now lets it go to its ready queue. The
//! scan and the notification of STs that have nothing to wake are the costs the paper lists as
//! A1's weaknesses (points 1 and 2), which A2 removes.
//!
//! No lost wake-up: the ST does `registered |= me` then reads the permits; the setter does
//! `permits += n` then reads `registered`. All four are sequentially consistent, so at least
//! one of them sees the other's write (the store-buffer litmus test): either the ST finds the
//! permit right away or the setter notifies it. Bits are never cleared: an ST that once waited
//! on a primitive keeps being notified (cheap to keep, and what the paper describes).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;

use crate::rt::Shared;

pub(crate) struct A1Gate {
    permits: AtomicU32,
    registered: AtomicU64,
    cap: u32,
    manual: bool,
    pub(crate) shared: Arc<Shared>,
}

impl A1Gate {
    pub(crate) fn new(shared: Arc<Shared>, initial: u32, cap: u32, manual: bool) -> A1Gate {
        A1Gate {
            permits: AtomicU32::new(initial),
            registered: AtomicU64::new(0),
            cap,
            manual,
            shared,
        }
    }

    pub(crate) fn try_acquire(&self) -> bool {
        let mut p = self.permits.load(SeqCst);
        loop {
            if p == 0 {
                return false;
            }
            if self.manual {
                return true;
            }
            match self.permits.compare_exchange_weak(p, p - 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(x) => p = x,
            }
        }
    }

    /// Called by ST `i` before it parks a fiber here.
    pub(crate) fn register(&self, i: usize) {
        let bit = 1u64 << i;
        if self.registered.load(Relaxed) & bit == 0 {
            self.registered.fetch_or(bit, SeqCst);
        } else {
            // Already registered: still order our later permit check after this point.
            std::sync::atomic::fence(SeqCst);
        }
    }

    pub(crate) fn release(&self, n: u32) {
        let mut p = self.permits.load(SeqCst);
        loop {
            let next = p.saturating_add(n).min(self.cap);
            match self.permits.compare_exchange_weak(p, next, SeqCst, SeqCst) {
                Ok(_) => break,
                Err(x) => p = x,
            }
        }
        let mut mask = self.registered.load(SeqCst);
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            self.shared.notify(i);
        }
    }

    pub(crate) fn reset(&self) {
        self.permits.store(0, SeqCst);
    }

    pub(crate) fn permits(&self) -> u32 {
        self.permits.load(SeqCst)
    }
}
