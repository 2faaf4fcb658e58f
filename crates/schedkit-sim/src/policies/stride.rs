//! Stride scheduling (Waldspurger & Weihl, "Stride Scheduling: Deterministic
//! Proportional-Share Resource Management", MIT/LCS/TM-528, 1995), the deterministic
//! counterpart of lottery scheduling (seed 004, 2.7.2 V).
//!
//! Each thread has a stride `L / tickets` and a pass. Every quantum (`policy.quantum`) an idle
//! core runs the allowed ready thread with the smallest pass; running advances the pass by
//! `stride * ran / quantum` (fractional quanta are charged pro rata, as in the paper's
//! `client_modify`). Over any interval each thread's CPU time is within about one quantum of
//! its ticket share, so shares converge much faster than lottery's (within 0.5 percentage
//! point on Table 2.5 over a few seconds, which the tests check).
//!
//! Global pass (the paper's `global_pass`): advances by `L * ran / (quantum * global_tickets)`
//! for every nanosecond any core runs a thread, where `global_tickets` is the sum of tickets
//! of runnable threads. A new thread starts at the global pass, so it neither inherits the
//! credit of the time before it arrived nor waits behind it. A woken thread resumes at
//! `max(its pass, global pass)`: sleeping earns no credit.
//!
//! `L = 2^48` (the paper's `stride1` is 2^20; a larger constant keeps the integer strides of
//! small ticket counts exact to 2^-48). Pass and stride are u128, so nothing overflows for any
//! horizon the scenario format allows.
//!
//! Cost: O(log n) per pick and enqueue via an ordered set of `(pass, seq, slot)`. With
//! affinity, a pick scans from the smallest pass to the first thread allowed on the core.
//!
//! Invariants: a queued thread is in the set exactly once with its current pass; the pass of
//! a thread never decreases; `global_tickets` counts each runnable thread once (a thread
//! stopped while running stays counted until it wakes, the one case the dispatcher is not
//! told about).
//!
//! Tie-breaking: equal passes go to the thread that arrived first, then file order (`seq`).
//! Stride never preempts before a quantum ends; it is work-conserving.

use crate::keyed::take_first_allowed;
use crate::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;
use std::collections::BTreeSet;

/// The stride constant `L`.
pub const STRIDE1: u128 = 1 << 48;

#[derive(Clone, Copy, Debug, Default)]
struct Client {
    pass: u128,
    stride: u128,
    tickets: u128,
    /// Counted in `global_tickets`.
    member: bool,
    /// In the ready set.
    queued: bool,
}

/// The stride dispatcher.
pub struct Stride {
    queue: BTreeSet<(u128, u64, Slot)>,
    clients: Vec<Client>,
    global_pass: u128,
    global_tickets: u128,
    any_affinity: bool,
}

impl Stride {
    pub fn new() -> Stride {
        Stride {
            queue: BTreeSet::new(),
            clients: Vec::new(),
            global_pass: 0,
            global_tickets: 0,
            any_affinity: false,
        }
    }

    fn client(&mut self, slot: Slot) -> &mut Client {
        let i = slot as usize;
        if self.clients.len() <= i {
            self.clients.resize(i + 1, Client::default());
        }
        &mut self.clients[i]
    }

    fn leave(&mut self, slot: Slot) {
        let c = self.client(slot);
        if c.member {
            c.member = false;
            let t = c.tickets;
            self.global_tickets -= t;
        }
    }

    /// The pass of `slot` (for tests and charts).
    pub fn pass(&self, slot: Slot) -> u128 {
        self.clients.get(slot as usize).map_or(0, |c| c.pass)
    }
}

impl Default for Stride {
    fn default() -> Self {
        Stride::new()
    }
}

impl Dispatcher for Stride {
    fn name(&self) -> &'static str {
        "stride"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        let t = ctx.thread(slot);
        let seq = t.seq;
        if t.affinity.is_some() {
            self.any_affinity = true;
        }
        let global_pass = self.global_pass;
        let tickets = t.tickets.max(1) as u128;
        if why == Enqueue::New {
            // A reused slot: the previous thread's tickets must not stay counted.
            self.leave(slot);
        }
        let c = self.client(slot);
        let mut joined = false;
        match why {
            Enqueue::New => {
                *c = Client {
                    pass: global_pass,
                    stride: STRIDE1 / tickets,
                    tickets,
                    member: true,
                    queued: false,
                };
                joined = true;
            }
            Enqueue::Woken => {
                c.pass = c.pass.max(global_pass);
                if !c.member {
                    c.member = true;
                    joined = true;
                }
            }
            Enqueue::Expired | Enqueue::Preempted => {}
        }
        debug_assert!(!c.queued, "stride: slot {slot} queued twice");
        c.queued = true;
        let pass = c.pass;
        if joined {
            self.global_tickets += tickets;
        }
        self.queue.insert((pass, seq, slot));
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        let key = take_first_allowed(&mut self.queue, ctx, core, self.any_affinity, |k| k.2)?;
        self.client(key.2).queued = false;
        Some(key.2)
    }

    fn time_slice(&mut self, ctx: &Ctx, _core: usize, _slot: Slot) -> Option<Nanos> {
        Some(ctx.spec.quantum())
    }

    fn charge(&mut self, ctx: &Ctx, slot: Slot, _core: usize, ran: Nanos) {
        let q = ctx.spec.quantum().0.max(1) as u128;
        let ran = ran.0 as u128;
        if self.global_tickets > 0 {
            self.global_pass += STRIDE1 * ran / (q * self.global_tickets);
        }
        let c = self.client(slot);
        c.pass += c.stride * ran / q;
        // The engine charges a thread for the last time just before it finishes; the
        // dispatcher has no other finish hook.
        if ctx.thread(slot).remaining == Some(Nanos::ZERO) {
            self.leave(slot);
        }
    }

    fn remove(&mut self, ctx: &Ctx, slot: Slot) {
        let seq = ctx.thread(slot).seq;
        let c = self.client(slot);
        if c.queued {
            c.queued = false;
            let pass = c.pass;
            self.queue.remove(&(pass, seq, slot));
        }
        self.leave(slot);
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate_report;
    use schedkit_core::scenario::Scenario;

    fn cpu_ms(text: &str) -> Vec<f64> {
        let s = Scenario::parse("stride.toml", text).unwrap();
        let (r, _, stats) = simulate_report(&s, false).unwrap();
        assert_eq!(stats.invariants.invalid_picks, 0);
        r.processes.iter().map(|p| p.cpu_ns as f64 / 1e6).collect()
    }

    #[test]
    fn tickets_3_2_1_get_exact_shares_every_six_quanta() {
        for horizon in [6, 60, 600] {
            let got = cpu_ms(&format!(
                "[policy]\nname = \"stride\"\nquantum = \"1ms\"\n[run]\nhorizon = \"{horizon}ms\"\n\
                 [[process]]\nname = \"A\"\ntickets = 3\n[[process]]\nname = \"B\"\ntickets = 2\n\
                 [[process]]\nname = \"C\"\ntickets = 1\n"
            ));
            let k = horizon as f64 / 6.0;
            assert_eq!(got, vec![3.0 * k, 2.0 * k, k], "horizon {horizon} ms");
        }
    }

    #[test]
    fn a_newcomer_starts_at_the_global_pass() {
        // A runs alone for 100 ms; B (same tickets) arrives then. Starting at the global pass,
        // B gets half of the next 100 ms, not all of it (no credit for before it existed).
        let got = cpu_ms(
            "[policy]\nname = \"stride\"\nquantum = \"1ms\"\n[run]\nhorizon = \"200ms\"\n\
             [[process]]\nname = \"A\"\n[[process]]\nname = \"B\"\narrival = \"100ms\"\n",
        );
        assert!((got[1] - 50.0).abs() <= 1.0, "B got {} ms of 100", got[1]);
        assert!((got[0] - 150.0).abs() <= 1.0, "A got {} ms", got[0]);
    }
}
