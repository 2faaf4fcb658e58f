//! Threads with a run/sleep `pattern`: entering phases, blocking, waking.

use super::{Engine, Kind};
use crate::policy::{Dispatcher, Enqueue, ThreadState};
use schedkit_core::scenario::Phase;
use schedkit_core::trace::{Event, Reason, Slot, TraceSink};
use schedkit_core::Nanos;

impl<'a, D: Dispatcher + ?Sized + 'a, S: TraceSink + ?Sized + 'a> Engine<'a, D, S> {
    /// The first phase of a patterned thread: it arrives, and blocks at once if the pattern
    /// starts with a sleep.
    pub(super) fn start_pattern(&mut self, slot: Slot) {
        let owner = self.threads[slot as usize].owner;
        self.emit(Event::Arrive {
            t: self.now,
            slot,
            owner,
        });
        self.enter_phase(slot, 0, None);
    }

    /// Moves `slot` to phase `i` of its pattern (wrapping), skipping over sleeps: a run phase
    /// makes it runnable (`woken`: it was blocked, else it just arrived); a sleep blocks it
    /// and schedules its wake-up.
    pub(super) fn enter_phase(&mut self, slot: Slot, i: usize, woken: Option<()>) {
        let process = self.threads[slot as usize]
            .process
            .expect("patterned thread");
        let pattern = self.scenario.processes()[process]
            .pattern()
            .expect("patterned thread");
        let mut i = i % pattern.len();
        let mut sleep = Nanos::ZERO;
        while let Phase::Sleep(d) = pattern[i] {
            sleep += d;
            i = (i + 1) % pattern.len();
        }
        let Phase::Run(run) = pattern[i] else {
            unreachable!("a pattern has a run phase (scenario check)")
        };
        self.threads[slot as usize].phase = Some((i, run));
        if sleep > Nanos::ZERO {
            if self.threads[slot as usize].state != ThreadState::Blocked {
                self.threads[slot as usize].state = ThreadState::Blocked;
                self.emit(Event::Block { t: self.now, slot });
            }
            let at = self.now + sleep;
            if at <= self.horizon {
                self.push(at, Kind::Wake { slot });
            }
        } else if woken.is_some() {
            self.make_ready(slot);
        } else {
            pcall!(self, enqueue(slot, Enqueue::New));
        }
    }

    /// A patterned thread's run phase ran out on `core`: it leaves the core and sleeps.
    pub(super) fn block(&mut self, core: usize, slot: Slot) {
        self.leave_core(core, slot, Reason::Blocked);
        self.threads[slot as usize].state = ThreadState::Blocked;
        self.emit(Event::Block { t: self.now, slot });
        let (i, _) = self.threads[slot as usize].phase.expect("patterned thread");
        self.enter_phase(slot, i + 1, Some(()));
    }

    /// A patterned thread's sleep is over: it is woken at once, or after the dispatcher's
    /// wake-up path (`wake_latency`), still blocked until then.
    pub(super) fn wake(&mut self, slot: Slot) {
        if self.threads[slot as usize].state != ThreadState::Blocked {
            return;
        }
        let path = self.policy.wake_latency();
        if path == Nanos::ZERO {
            self.make_ready(slot);
            return;
        }
        self.emit(Event::Wake { t: self.now, slot });
        let at = self.now + path;
        if at <= self.horizon {
            self.push(at, Kind::WakePath { slot });
        }
    }

    /// The wake-up path of `slot` is over: it joins a run queue.
    pub(super) fn wake_path_done(&mut self, slot: Slot) {
        if self.threads[slot as usize].state == ThreadState::Blocked {
            self.threads[slot as usize].state = ThreadState::Ready;
            pcall!(self, enqueue(slot, Enqueue::Woken));
        }
    }

    pub(super) fn make_ready(&mut self, slot: Slot) {
        self.threads[slot as usize].state = ThreadState::Ready;
        self.emit(Event::Wake { t: self.now, slot });
        pcall!(self, enqueue(slot, Enqueue::Woken));
    }
}
