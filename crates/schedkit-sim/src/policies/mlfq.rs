//! MLFQ: multilevel feedback queue (seed 004, 2.5.1: "RR with a quantum of 4 ms, RR with
//! 8 ms, ...; a process that uses too much CPU time is moved to a lower-priority queue; a
//! process that waits too long is moved up"; the rules as stated by Arpaci-Dusseau,
//! "Operating Systems: Three Easy Pieces", ch. 8).
//!
//! Rules:
//! 1. `policy.levels` queues; level 0 is the top. The time allotment of level k is
//!    `quantum * 2^k` (`policy.quantum` at the top, doubling per level).
//! 2. A new thread enters the top level.
//! 3. The ready thread on the highest level runs; within a level, round robin (FIFO).
//! 4. A thread that has used its whole allotment at a level moves one level down (the
//!    bottom level keeps it). CPU time is accounted across preemptions and sleeps, so a
//!    thread cannot stay on top by giving up the core just before its slice ends.
//! 5. A waiting thread on a higher level preempts a running thread on a lower level.
//! 6. Every `policy.boost` (0 = never) every thread moves back to the top level with a fresh
//!    allotment, so long-running threads cannot starve.
//!
//! The boost runs on the engine's periodic `balance` hook (the only timer a dispatcher has);
//! threads that are running or blocked at a boost are moved lazily, through a boost epoch,
//! the next time the dispatcher looks at them.
//!
//! Cost: O(log n) per enqueue, pick and preemption check (ordered set of
//! `(level, order, slot)`), O(n log n) per boost.
//!
//! Invariants: a queued thread is in the set once, under its current level; a running thread
//! is never preempted by a thread of the same or a lower level; `used < allotment(level)`
//! whenever a thread is dispatched.
//!
//! Tie-breaking: within a level, by queue order. A thread whose slice expired, that woke or
//! arrived goes to the tail (arrivals of one instant in file order); a preempted thread keeps
//! its earlier place, i.e. it resumes before threads that were queued after it. Among running
//! threads of the same (lowest) level, the one on the highest-numbered core is preempted first.

use crate::keyed::take_first_allowed;
use crate::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;
use std::collections::BTreeSet;

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    level: u32,
    /// CPU time used at this level since it got there.
    used: u64,
    /// Queue order (FIFO ticket of the last non-preemption enqueue).
    order: u64,
    /// Boost epoch the level belongs to.
    epoch: u64,
    queued: bool,
}

/// The MLFQ dispatcher.
pub struct Mlfq {
    levels: u32,
    quantum: Nanos,
    boost: Nanos,
    queue: BTreeSet<(u32, u64, Slot)>,
    entries: Vec<Entry>,
    ticket: u64,
    epoch: u64,
    any_affinity: bool,
}

impl Mlfq {
    pub fn new(levels: u32, quantum: Nanos, boost: Nanos) -> Mlfq {
        Mlfq {
            levels: levels.max(1),
            quantum,
            boost,
            queue: BTreeSet::new(),
            entries: Vec::new(),
            ticket: 0,
            epoch: 0,
            any_affinity: false,
        }
    }

    /// The time allotment of `level`: `quantum * 2^level`, saturating.
    pub fn allotment(&self, level: u32) -> u64 {
        let factor = 1u64.checked_shl(level).unwrap_or(u64::MAX);
        self.quantum.0.saturating_mul(factor)
    }

    /// The current entry of `slot`, with a pending boost applied.
    fn entry(&mut self, slot: Slot) -> &mut Entry {
        let i = slot as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, Entry::default());
        }
        let epoch = self.epoch;
        let e = &mut self.entries[i];
        if e.epoch != epoch {
            e.epoch = epoch;
            e.level = 0;
            e.used = 0;
        }
        e
    }

    /// The level of `slot` now (for tests and charts).
    pub fn level(&mut self, slot: Slot) -> u32 {
        self.entry(slot).level
    }

    /// Rule 4: demote a thread that used its whole allotment.
    fn settle(&mut self, slot: Slot) {
        let bottom = self.levels - 1;
        let e = *self.entry(slot);
        if e.used >= self.allotment(e.level) {
            let e = self.entry(slot);
            e.level = (e.level + 1).min(bottom);
            e.used = 0;
        }
    }
}

impl Dispatcher for Mlfq {
    fn name(&self) -> &'static str {
        "mlfq"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        if ctx.thread(slot).affinity.is_some() {
            self.any_affinity = true;
        }
        if why == Enqueue::New {
            let epoch = self.epoch;
            *self.entry(slot) = Entry {
                epoch,
                ..Entry::default()
            };
        }
        self.settle(slot);
        if why != Enqueue::Preempted {
            self.ticket += 1;
            let ticket = self.ticket;
            self.entry(slot).order = ticket;
        }
        let e = self.entry(slot);
        debug_assert!(!e.queued, "mlfq: slot {slot} queued twice");
        e.queued = true;
        let key = (e.level, e.order, slot);
        self.queue.insert(key);
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        let key = take_first_allowed(&mut self.queue, ctx, core, self.any_affinity, |k| k.2)?;
        self.entry(key.2).queued = false;
        Some(key.2)
    }

    fn time_slice(&mut self, _ctx: &Ctx, _core: usize, slot: Slot) -> Option<Nanos> {
        self.settle(slot);
        let e = *self.entry(slot);
        Some(Nanos(self.allotment(e.level) - e.used))
    }

    fn charge(&mut self, _ctx: &Ctx, slot: Slot, _core: usize, ran: Nanos) {
        let e = self.entry(slot);
        e.used = e.used.saturating_add(ran.0);
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        if self.queue.is_empty() {
            return;
        }
        let mut idle: Vec<usize> = Vec::new();
        let mut busy: Vec<(u32, usize)> = Vec::new();
        for (core, r) in ctx.running.iter().enumerate() {
            match r {
                None => idle.push(core),
                Some(s) => busy.push((self.level(*s), core)),
            }
        }
        if busy.iter().all(|&(level, _)| level == 0) {
            return;
        }
        busy.sort_unstable();
        // The best waiting threads, one per core at most: each takes an idle core it may use,
        // else the core of the lowest-level running thread strictly below it.
        let waiting: Vec<(u32, u64, Slot)> = self.queue.iter().take(ctx.cores).copied().collect();
        for (level, _, slot) in waiting {
            let t = ctx.thread(slot);
            if let Some(i) = idle.iter().position(|&c| t.allowed_on(c)) {
                idle.swap_remove(i);
                continue;
            }
            match busy
                .iter()
                .rposition(|&(l, c)| l > level && t.allowed_on(c))
            {
                Some(i) => out.push(busy.remove(i).1),
                None if !self.any_affinity => break,
                None => {}
            }
            if busy.is_empty() {
                break;
            }
        }
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        let e = self.entry(slot);
        if e.queued {
            e.queued = false;
            let key = (e.level, e.order, slot);
            self.queue.remove(&key);
        }
    }

    fn balance_interval(&self) -> Option<Nanos> {
        (self.boost > Nanos::ZERO).then_some(self.boost)
    }

    /// Rule 6: the priority boost.
    fn balance(&mut self, _ctx: &Ctx) {
        self.epoch += 1;
        // Queued threads move now, keeping their queue order; others on their next visit.
        let queued: Vec<(u32, u64, Slot)> = std::mem::take(&mut self.queue).into_iter().collect();
        for (_, order, slot) in queued {
            let e = self.entry(slot);
            debug_assert_eq!(e.order, order);
            self.queue.insert((0, order, slot));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate_report;
    use schedkit_core::scenario::Scenario;
    use schedkit_core::trace::{Event, Owner, Reason};
    use schedkit_core::Nanos;

    fn run(text: &str) -> (schedkit_core::Report, Vec<Event>) {
        let s = Scenario::parse("mlfq.toml", text).unwrap();
        let (r, log, stats) = simulate_report(&s, true).unwrap();
        assert_eq!(stats.invariants.invalid_picks, 0);
        (r, log.unwrap().events)
    }

    fn ms(v: u64) -> Nanos {
        Nanos::from_ms(v)
    }

    #[test]
    fn demotes_doubles_and_a_newcomer_preempts_a_lower_level() {
        // A runs 0-4 ms at level 0 (4 ms), is demoted and continues at level 1 (8 ms). B
        // arrives at 10 ms on level 0 and preempts it at once; after B finishes (12 ms) A
        // spends the 2 ms left of its level-1 allotment and drops to level 2 at 14 ms.
        let (r, ev) = run(
            "[policy]\nname = \"mlfq\"\nquantum = \"4ms\"\nlevels = 3\nboost = \"0ms\"\n\
             [[process]]\nname = \"A\"\nburst = \"40ms\"\n\
             [[process]]\nname = \"B\"\narrival = \"10ms\"\nburst = \"2ms\"\n",
        );
        let a = |e: &Event| {
            matches!(
                e,
                Event::Arrive {
                    owner: Owner::Process { process: 0, .. },
                    ..
                }
            )
        };
        assert!(ev.iter().any(a));
        assert!(ev.contains(&Event::Deschedule {
            t: ms(10),
            core: 0,
            slot: 0,
            reason: Reason::Preempted
        }));
        assert!(ev.contains(&Event::Dispatch {
            t: ms(10),
            core: 0,
            slot: 1
        }));
        assert!(ev.contains(&Event::Dispatch {
            t: ms(12),
            core: 0,
            slot: 0
        }));
        // A was alone at 4 ms and 14 ms: it continued without a switch, so it was
        // dispatched exactly twice.
        let a_dispatches = ev
            .iter()
            .filter(|e| matches!(e, Event::Dispatch { slot: 0, .. }))
            .count();
        assert_eq!(a_dispatches, 2);
        assert_eq!(r.threads[1].waiting_ns, 0, "B never waits");
        assert_eq!(r.threads[0].finish_ns, Some(ms(42).0));
    }

    #[test]
    fn one_level_is_round_robin() {
        // Table 2.4 (RR, q = 4 ms): 12, 4, 17, 20 ms; MLFQ with one level must agree.
        let (r, _) = run(
            "[policy]\nname = \"mlfq\"\nquantum = \"4ms\"\nlevels = 1\n\
             [[process]]\nname = \"P1\"\nburst = \"8ms\"\n[[process]]\nname = \"P2\"\nburst = \"4ms\"\n\
             [[process]]\nname = \"P3\"\nburst = \"9ms\"\n[[process]]\nname = \"P4\"\nburst = \"5ms\"\n",
        );
        let waits: Vec<u64> = r.threads.iter().map(|t| t.waiting_ns).collect();
        assert_eq!(waits, [12, 4, 17, 20].map(|w| ms(w).0));
    }

    /// A long job A and a stream of 1 ms jobs, one arriving every millisecond from 4 ms on,
    /// that keep the top level busy. Returns A's CPU time over the first 104 ms.
    fn long_job_cpu(boost: &str) -> u64 {
        let mut text = format!(
            "[policy]\nname = \"mlfq\"\nquantum = \"4ms\"\nlevels = 3\nboost = \"{boost}\"\n\
             [run]\nhorizon = \"104ms\"\n[[process]]\nname = \"A\"\n"
        );
        for k in 0..100 {
            text += &format!(
                "[[process]]\nname = \"s{k}\"\narrival = \"{}ms\"\nburst = \"1ms\"\n",
                4 + k
            );
        }
        run(&text).0.processes[0].cpu_ns
    }

    #[test]
    fn boost_prevents_starvation() {
        // Without a boost A only gets its first 4 ms: the short jobs own level 0.
        assert_eq!(long_job_cpu("0ms"), ms(4).0);
        // Boosted every 10 ms to the top, A runs one level-0 allotment (4 ms) after a boost,
        // in FIFO order behind the short jobs queued before its last expiry. Each of its runs
        // adds four jobs to that backlog, so it runs at 10, 20, 33, 50, 71 and 96 ms:
        // 4 + 6 x 4 = 28 ms by 104 ms.
        assert_eq!(long_job_cpu("10ms"), ms(28).0);
    }
}
