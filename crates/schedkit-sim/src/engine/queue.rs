//! The event queue's entries: what an event does, and its `(time, class, sequence)` order.

use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

/// What an event does. Indices are `u32` so that a queued event stays small (see
/// [`Queued`]); the engine converts at the edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Release {
        task: u32,
    },
    Arrive {
        process: u32,
    },
    /// A thread's sleep phase (`pattern`) is over.
    Wake {
        slot: Slot,
    },
    /// A woken thread's wake-up path is over ([`crate::Dispatcher::wake_latency`]): it joins
    /// a run queue.
    WakePath {
        slot: Slot,
    },
    Control,
    /// A core finished its context-switch overhead and starts running its thread.
    SwitchDone {
        core: u32,
        generation: u64,
    },
    SliceEnd {
        core: u32,
        generation: u64,
    },
    Balance,
}

impl Kind {
    pub(super) fn class(&self) -> u8 {
        match self {
            Kind::Release { .. }
            | Kind::Arrive { .. }
            | Kind::Wake { .. }
            | Kind::WakePath { .. } => 0,
            Kind::Control => 1,
            Kind::SwitchDone { .. } | Kind::SliceEnd { .. } => 2,
            Kind::Balance => 3,
        }
    }
}

/// Bits of [`Queued::order`] below the class.
pub(super) const SEQ_BITS: u32 = 62;

/// An event in the heap, ordered by `(time, class, sequence)` with the class and the
/// sequence number packed into one word (`class << 62 | seq`), reversed so that
/// `BinaryHeap`, a max-heap, pops the earliest. 32 bytes instead of the 48 of a
/// `(Nanos, u8, u64, Kind)` tuple, and a two-word comparison: sifting the heap was a fifth
/// of a global-EDF run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queued {
    pub(super) time: Nanos,
    pub(super) order: u64,
    pub(super) kind: Kind,
}

impl Queued {
    pub(super) fn class(&self) -> u8 {
        (self.order >> SEQ_BITS) as u8
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.order) == (other.time, other.order)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.time, other.order).cmp(&(self.time, self.order))
    }
}
