//! One scheduling decision after a batch of simultaneous events: preemptions, picks,
//! deschedules, dispatches; and the start of a run (the slice end it queues).

use super::{Engine, Invariants, Kind};
use crate::policy::{Dispatcher, Enqueue, ThreadState};
use schedkit_core::trace::{Event, Reason, Slot, TraceSink};
use schedkit_core::Nanos;

impl<'a, D: Dispatcher + ?Sized + 'a, S: TraceSink + ?Sized + 'a> Engine<'a, D, S> {
    /// One scheduling decision after a batch of simultaneous events.
    pub(super) fn decide(&mut self) {
        self.stats.batches += 1;
        // Keys that depend on work done (SRTF's remaining time, CFS's vruntime) must be
        // current before the policy compares them; other policies are charged lazily (at
        // slice end, preemption, stop), which keeps a decision from costing O(cores).
        if self.policy.charge_before_preempt() {
            for core in 0..self.cores_n {
                self.charge(core);
            }
        }
        // Preemptions requested by the policy.
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        {
            pcall!(self, preempt(&mut out));
        }
        for &core in &out {
            // A core that does not exist is ignored like an idle one.
            if let Some(slot) = self.cores.get(core).and_then(|c| c.running) {
                self.charge(core);
                self.vacate(core, slot, Reason::Preempted);
                pcall!(self, enqueue(slot, Enqueue::Preempted));
            }
        }
        self.scratch = out;
        // Phase 1: every idle core picks (the dispatcher's queues change here only). Cores
        // that just gave up a thread pick first, so a thread whose slice ended with nothing
        // else waiting continues where it is instead of being pulled by an idle neighbour
        // (the kernel keeps running the current task in that case too).
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        let mut vacated = std::mem::take(&mut self.vacated_cores);
        vacated.sort_unstable();
        // The idle cores in pick order: vacated ones first, then the others, each in core
        // order (`self.running` is the compact copy of the cores' `running`). Once the
        // dispatcher has nothing queued every further core would get `None`, so the rest are
        // not asked: on a 64-core machine with a quarter of its cores idle, asking each of
        // them after every job's end was a tenth of a global-EDF run.
        for &core in &vacated {
            if self.policy.nothing_queued() {
                break;
            }
            self.pick_on(core, &mut picks);
        }
        for core in 0..self.cores_n {
            if self.running[core].is_none() && self.cores[core].vacated.is_none() {
                if self.policy.nothing_queued() {
                    break;
                }
                self.pick_on(core, &mut picks);
            }
        }
        // Phase 2: threads that left a core and were not picked again there are descheduled
        // before anything is dispatched, so a thread never appears on two cores at once.
        for &core in &vacated {
            if let Some((prev, reason)) = self.cores[core].vacated {
                if self.cores[core].running != Some(prev) {
                    self.cores[core].vacated = None;
                    self.emit(Event::Deschedule {
                        t: self.now,
                        core,
                        slot: prev,
                        reason,
                    });
                }
            }
        }
        // Phase 3: dispatch, or continue a thread picked again on its own core.
        for &(core, s) in &picks {
            if self.cores[core].vacated.take().is_some() {
                self.begin_run(core, s, false);
            } else {
                self.dispatch(core, s);
            }
        }
        vacated.clear();
        self.vacated_cores = vacated;
        self.picks = picks;
    }

    /// Phase 1 of `decide` on the idle `core`: asks the dispatcher, checks its pick (an
    /// invalid one is counted and re-queued, the core stays idle) and records it in `picks`.
    pub(super) fn pick_on(&mut self, core: usize, picks: &mut Vec<(usize, Slot)>) {
        debug_assert!(self.cores[core].running.is_none());
        let picked = { pcall!(self, pick_next(core)) };
        let Some(s) = picked else { return };
        if s as usize >= self.threads.len() {
            let inv = &mut self.stats.invariants;
            Invariants::note(&mut inv.invalid_picks, &mut inv.reasons, || {
                format!(
                    "{}: invalid pick at {}: thread {s} on core {core}: no such thread",
                    self.policy.name(),
                    self.now
                )
            });
            return;
        }
        let t = &self.threads[s as usize];
        let taken = picks.iter().any(|&(_, p)| p == s);
        if t.state != ThreadState::Ready || !t.allowed_on(core) || taken {
            let why = if taken {
                "already picked for another core this instant"
            } else if t.state != ThreadState::Ready {
                "not ready"
            } else {
                "not allowed on that core by its affinity"
            };
            let inv = &mut self.stats.invariants;
            Invariants::note(&mut inv.invalid_picks, &mut inv.reasons, || {
                format!(
                    "{}: invalid pick at {}: thread {s} on core {core}: {why} (state {:?})",
                    self.policy.name(),
                    self.now,
                    t.state
                )
            });
            let t = &self.threads[s as usize];
            if t.state == ThreadState::Ready && !taken {
                pcall!(self, enqueue(s, Enqueue::Preempted));
            }
            return;
        }
        self.check_wait(s);
        self.threads[s as usize].state = ThreadState::Running(core);
        self.cores[core].running = Some(s);
        self.running[core] = Some(s);
        picks.push((core, s));
    }

    pub(super) fn dispatch(&mut self, core: usize, slot: Slot) {
        let now = self.now;
        let from = self.threads[slot as usize].last_core.replace(core);
        if let Some(from) = from {
            if from != core {
                self.emit(Event::Migrate {
                    t: now,
                    slot,
                    from,
                    to: core,
                });
            }
        }
        let cost = self.scenario.policy().context_switch();
        let switch = cost > Nanos::ZERO && self.cores[core].last.is_some_and(|l| l != slot);
        self.cores[core].last = Some(slot);
        if switch {
            let c = &mut self.cores[core];
            c.generation += 1;
            c.switching = true;
            let g = c.generation;
            self.push(
                now + cost,
                Kind::SwitchDone {
                    core: core as u32,
                    generation: g,
                },
            );
        } else {
            self.begin_run(core, slot, true);
        }
    }

    /// Starts (`dispatched`) or continues the run of `slot` on `core` now and schedules the
    /// end of its slice.
    pub(super) fn begin_run(&mut self, core: usize, slot: Slot, dispatched: bool) {
        let now = self.now;
        let c = &mut self.cores[core];
        c.charged_at = now;
        c.generation += 1;
        let generation = c.generation;
        if dispatched {
            self.emit(Event::Dispatch { t: now, core, slot });
        }
        let slice = { pcall!(self, time_slice(core, slot)) };
        let mut end = self.horizon;
        if let Some(r) = self.threads[slot as usize].remaining {
            end = end.min(now + r);
        }
        if let Some(s) = slice {
            end = end.min(now + s.max(Nanos(1)));
        }
        // A run phase that ran out while the thread was off its core (charged at a
        // preemption in the very instant) ends at once: it blocks in the next batch.
        let phase_over = match self.threads[slot as usize].phase {
            Some((_, left)) => {
                end = end.min(now + left);
                left == Nanos::ZERO
            }
            None => false,
        };
        // At the horizon itself the slice would end at `now` again and again (an endless
        // batch loop for sliced policies with unbounded work); `stop_all_at_end` stops it.
        if end > now || phase_over {
            self.push(
                end,
                Kind::SliceEnd {
                    core: core as u32,
                    generation,
                },
            );
        }
    }
}
