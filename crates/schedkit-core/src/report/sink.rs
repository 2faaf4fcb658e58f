//! [`Metrics`] as a [`TraceSink`]: each event folded as it arrives, one step per event kind.

use super::*;

impl TraceSink for Metrics {
    fn record(&mut self, event: &Event) {
        let t = event.time();
        debug_assert!(t >= self.last_t, "trace time went backwards: {event:?}");
        self.last_t = t;
        self.advance(t.0);
        match *event {
            Event::Arrive { t, slot, owner } => self.arrive(t, slot, owner),
            Event::Dispatch { t, core, slot } => self.dispatch(t, core, slot),
            Event::Deschedule {
                t, slot, reason, ..
            } => self.deschedule(t, slot, reason),
            Event::Migrate { slot, to, .. } => self.migrate(slot, to),
            Event::Block { t, slot } => {
                self.set_runnable(slot, false, t.0);
                self.note_blocked(self.owner_of(slot), true, t);
            }
            Event::Wake { t, slot } => {
                self.set_runnable(slot, true, t.0);
                self.note_blocked(self.owner_of(slot), false, t);
            }
            Event::Finish { t, slot } => self.finish_thread(t, slot),
            Event::JobRelease {
                t,
                task,
                job,
                deadline,
            } => {
                let ts = &mut self.tasks[task];
                ts.jobs += 1;
                ts.first_release.get_or_insert(t);
                ts.open.insert(job, (t, deadline));
            }
            Event::JobFinish { t, task, job } => {
                let ts = &mut self.tasks[task];
                if let Some((release, deadline)) = ts.open.remove(job) {
                    ts.max_response = ts.max_response.max((t - release).0);
                    if misses_deadline(deadline, Some(t), t) {
                        ts.misses += 1;
                    }
                }
            }
            // The user's weight is the GPS reference: a tenant weight change moves it.
            Event::GroupWeightChange { t, group, weight } => {
                self.group_weights[group] = weight as f64;
                self.gps_dirty = Some(t.0);
            }
            // Controllers' per-thread weights are means to the reference, not the reference.
            Event::WeightChange { .. } | Event::Mark { .. } => {}
        }
    }
}

impl Metrics {
    /// The owner of a live slot.
    fn owner_of(&self, slot: Slot) -> Owner {
        self.slots[slot as usize].expect("unknown slot").owner
    }

    /// A thread arrives in `slot` (a new generation of it) and is runnable.
    fn arrive(&mut self, t: Nanos, slot: Slot, owner: Owner) {
        let i = slot as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, None);
        }
        self.generation += 1;
        self.slots[i] = Some(SlotState {
            owner,
            generation: self.generation,
            running: None,
            last_core: None,
            runnable: false,
        });
        if let Some(ti) = self.thread_index(owner) {
            self.threads[ti].arrival = Some(t);
        }
        self.set_runnable(slot, true, t.0);
    }

    /// A thread starts running on `core`: a dispatch, a context switch when the core ran
    /// another thread before, and the start of the thread's first run.
    fn dispatch(&mut self, t: Nanos, core: usize, slot: Slot) {
        let s = self.slots[slot as usize]
            .as_mut()
            .expect("dispatch of unknown slot");
        debug_assert!(
            s.running.is_none(),
            "thread dispatched twice: slot {slot} at {t}"
        );
        s.running = Some((core, t));
        let key = (slot, s.generation);
        let owner = s.owner;
        self.dispatches += 1;
        // Core numbers are the engine's: a real run's job CPUs may be `1-3` while
        // `cores` (the capacity) is 3.
        if core >= self.core_last.len() {
            self.core_last.resize(core + 1, None);
        }
        if let Some(prev) = self.core_last[core] {
            if prev != key {
                self.switches += 1;
            }
        }
        self.core_last[core] = Some(key);
        let e = self.entity_of(owner);
        self.touch(e, t.0);
        self.entities[e].running += 1;
        self.entities[e].since_sum += t.0;
        if let Some(ti) = self.thread_index(owner) {
            let ts = &mut self.threads[ti];
            if ts.start.is_none() {
                ts.start = Some(t);
            }
        }
    }

    /// A thread stops running: a preemption when taken off, a switch of its own unless it
    /// finished or the run ended.
    fn deschedule(&mut self, t: Nanos, slot: Slot, reason: Reason) {
        self.close_interval(slot, t);
        let owner = self.owner_of(slot);
        if matches!(reason, Reason::Preempted | Reason::Expired) {
            self.preemptions += 1;
        }
        if !matches!(reason, Reason::Finished | Reason::Horizon) {
            self.count(owner, false);
        }
    }

    /// A thread moves to core `to`.
    fn migrate(&mut self, slot: Slot, to: usize) {
        self.migrations += 1;
        let s = self.slots[slot as usize].as_mut().expect("unknown slot");
        s.last_core = Some(to);
        let owner = s.owner;
        self.count(owner, true);
    }

    /// One more migration (`migration`) or switch of `owner`: on its task, or on its thread.
    fn count(&mut self, owner: Owner, migration: bool) {
        let (migrations, switches) = match owner {
            Owner::Task { task, .. } => {
                let ts = &mut self.tasks[task];
                (&mut ts.migrations, &mut ts.switches)
            }
            _ => {
                let Some(ti) = self.thread_index(owner) else {
                    return;
                };
                let ts = &mut self.threads[ti];
                (&mut ts.migrations, &mut ts.switches)
            }
        };
        *if migration { migrations } else { switches } += 1;
    }

    /// A thread finishes: its last interval closed, no longer runnable or blocked.
    fn finish_thread(&mut self, t: Nanos, slot: Slot) {
        self.close_interval(slot, t);
        self.set_runnable(slot, false, t.0);
        let owner = self.owner_of(slot);
        self.note_blocked(owner, false, t);
        if let Some(ti) = self.thread_index(owner) {
            self.threads[ti].finish = Some(t);
        }
    }
}
