//! The cost of one gang switch on a cluster, after seed 002 (Hori, Tezuka, Ishikawa,
//! "Overhead analysis of preemptive gang scheduling", SCore-D on 64 PentiumPro nodes and
//! Myrinet).
//!
//! The abstract names three parts of a switch, and this model has one term for each:
//!
//! 1. **fixed**: the scheduler's own work on every switch: signalling every node's processes
//!    (stop and resume) and a global synchronisation so that no node resumes the next gang
//!    before every node stopped the previous one. The synchronisation goes through a tree, so
//!    it grows with `log2(nodes)`: `fixed = base + per_level * ceil(log2(nodes))`.
//! 2. **flush**: messages still in flight when the gang stops are drained before the network
//!    context is saved ("communication messages are first flushed"). The amount depends on
//!    the communication pattern ([`Pattern`]): how many peers a node has messages in flight
//!    to, each up to `message` bytes, and the flush takes one network latency plus those bytes
//!    at the link bandwidth. The abstract: "message flushing time ... depends on the
//!    communication patterns".
//! 3. **network context**: the network interface's send and receive buffers of the outgoing
//!    gang are copied to host memory and those of the incoming gang copied back ("the
//!    messages and pending messages in the receive and send buffers are saved and restored").
//!    `context = 2 * nic_buffers / dma_bandwidth`, whatever the pattern (the whole buffer area
//!    is saved, as PM does).
//!
//! The default parameters are not measurements: the abstract gives no component values. They
//! are chosen in the range of the paper's hardware (Myrinet: ~10 us latency, ~160 MB/s links;
//! LANai SRAM buffers copied over 32-bit/33 MHz PCI at ~133 MB/s) so that the model reproduces
//! the abstract's two proportions: network context is more than two thirds of the switch, and
//! a 100 ms time slice costs under 9 %. `schedkit experiment gang` prints the breakdown, and
//! every parameter can be changed through [`OverheadModel`]'s fields.

use crate::time::Nanos;

/// How a parallel job communicates: what is in flight when it is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Embarrassingly parallel (NAS EP): nothing in flight.
    None,
    /// Nearest-neighbour exchange on a ring or grid (NAS LU, MG): two peers.
    Neighbour,
    /// All-to-all (NAS FT, IS): every other node of the job, up to the NIC's window.
    AllToAll,
}

impl Pattern {
    pub const ALL: [Pattern; 3] = [Pattern::None, Pattern::Neighbour, Pattern::AllToAll];

    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::None => "none",
            Pattern::Neighbour => "neighbour",
            Pattern::AllToAll => "all-to-all",
        }
    }

    /// Peers a node has messages in flight to, for a job on `nodes` nodes, capped by the
    /// `window` of outstanding messages a NIC allows.
    pub fn peers(self, nodes: usize, window: usize) -> usize {
        let others = nodes.saturating_sub(1);
        match self {
            Pattern::None => 0,
            Pattern::Neighbour => others.min(2),
            Pattern::AllToAll => others.min(window),
        }
    }
}

/// Parameters of the switch-overhead model (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct OverheadModel {
    /// Fixed part: signalling and the local work of a switch.
    pub base: Nanos,
    /// Fixed part: one level of the global synchronisation tree.
    pub per_level: Nanos,
    /// Flush: one network latency.
    pub latency: Nanos,
    /// Flush: link bandwidth in bytes per second.
    pub link_bw: u64,
    /// Flush: bytes in flight to one peer at most.
    pub message: u64,
    /// Flush: outstanding messages a NIC allows (caps all-to-all).
    pub window: usize,
    /// Network context: NIC send + receive buffer bytes saved (and as many restored).
    pub nic_buffers: u64,
    /// Network context: host <-> NIC copy bandwidth in bytes per second.
    pub dma_bw: u64,
}

impl Default for OverheadModel {
    fn default() -> Self {
        OverheadModel {
            base: Nanos::from_us(400),
            per_level: Nanos::from_us(25),
            latency: Nanos::from_us(10),
            link_bw: 160_000_000,
            message: 8 * 1024,
            window: 16,
            nic_buffers: 256 * 1024,
            dma_bw: 133_000_000,
        }
    }
}

/// One switch, by part.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCost {
    pub fixed: Nanos,
    pub flush: Nanos,
    pub context: Nanos,
}

impl SwitchCost {
    pub fn total(&self) -> Nanos {
        self.fixed + self.flush + self.context
    }
    /// Fraction of the switch spent saving and restoring the network context.
    pub fn context_fraction(&self) -> f64 {
        let t = self.total().0;
        if t == 0 {
            0.0
        } else {
            self.context.0 as f64 / t as f64
        }
    }
}

/// `bytes` at `bw` bytes per second, in nanoseconds (rounded up).
fn transfer(bytes: u64, bw: u64) -> Nanos {
    if bytes == 0 || bw == 0 {
        return Nanos::ZERO;
    }
    Nanos(((bytes as u128 * 1_000_000_000).div_ceil(bw as u128)) as u64)
}

/// `ceil(log2(n))`, 0 for n <= 1.
fn levels(n: usize) -> u64 {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as u64
    }
}

impl OverheadModel {
    /// The cost of switching a cluster of `nodes` nodes from one gang to the next, where the
    /// outgoing gang communicates with `pattern` across `job_nodes` nodes. All nodes switch in
    /// parallel, so the cost is one node's cost plus the synchronisation tree.
    pub fn switch(&self, nodes: usize, job_nodes: usize, pattern: Pattern) -> SwitchCost {
        let fixed = self.base + Nanos(self.per_level.0 * levels(nodes));
        let peers = pattern.peers(job_nodes, self.window) as u64;
        let flush = if peers == 0 {
            Nanos::ZERO
        } else {
            self.latency + transfer(peers * self.message, self.link_bw)
        };
        let context = transfer(2 * self.nic_buffers, self.dma_bw);
        SwitchCost {
            fixed,
            flush,
            context,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_exact() {
        let m = OverheadModel::default();
        // 64 nodes: 6 tree levels.
        let c = m.switch(64, 64, Pattern::Neighbour);
        assert_eq!(c.fixed, Nanos::from_us(400 + 6 * 25));
        // 2 peers x 8 KiB at 160 MB/s = 102.4 us (rounded up) + 10 us latency.
        assert_eq!(c.flush, Nanos(10_000 + 102_400));
        // 512 KiB at 133 MB/s.
        assert_eq!(c.context, Nanos(3_942_016));
        assert_eq!(m.switch(64, 64, Pattern::None).flush, Nanos::ZERO);
        // All-to-all is capped by the window of 16.
        assert_eq!(
            m.switch(64, 64, Pattern::AllToAll).flush,
            Nanos(10_000 + 819_200)
        );
        assert_eq!(m.switch(1, 1, Pattern::AllToAll).flush, Nanos::ZERO);
        assert_eq!(levels(1), 0);
        assert_eq!(levels(2), 1);
        assert_eq!(levels(1024), 10);
        assert_eq!(levels(1025), 11);
    }

    #[test]
    fn default_matches_the_abstracts_proportions() {
        let m = OverheadModel::default();
        for p in Pattern::ALL {
            let c = m.switch(64, 64, p);
            // "more than two third of gang scheduling time"
            assert!(c.context_fraction() > 2.0 / 3.0, "{p:?}: {c:?}");
            // One switch per 100 ms slice costs under 9 %.
            assert!(
                c.total().0 * 100 < 9 * Nanos::from_ms(100).0,
                "{p:?}: {c:?}"
            );
        }
    }
}
