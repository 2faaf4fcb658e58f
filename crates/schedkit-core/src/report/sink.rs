//! [`Metrics`] as a [`TraceSink`]: each event folded as it arrives.

use super::*;

impl TraceSink for Metrics {
    fn record(&mut self, event: &Event) {
        let t = event.time();
        debug_assert!(t >= self.last_t, "trace time went backwards: {event:?}");
        self.last_t = t;
        self.advance(t.0);
        match *event {
            Event::Arrive { t, slot, owner } => {
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
            Event::Dispatch { t, core, slot } => {
                let s = self.slots[slot as usize]
                    .as_mut()
                    .expect("dispatch of unknown slot");
                debug_assert!(s.running.is_none(), "thread dispatched twice: {event:?}");
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
            Event::Deschedule {
                t, slot, reason, ..
            } => {
                self.close_interval(slot, t);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                if matches!(reason, Reason::Preempted | Reason::Expired) {
                    self.preemptions += 1;
                }
                if !matches!(reason, Reason::Finished | Reason::Horizon) {
                    match owner {
                        Owner::Task { task, .. } => self.tasks[task].switches += 1,
                        _ => {
                            if let Some(ti) = self.thread_index(owner) {
                                self.threads[ti].switches += 1;
                            }
                        }
                    }
                }
            }
            Event::Migrate { slot, to, .. } => {
                self.migrations += 1;
                let s = self.slots[slot as usize].as_mut().expect("unknown slot");
                s.last_core = Some(to);
                let owner = s.owner;
                match owner {
                    Owner::Task { task, .. } => self.tasks[task].migrations += 1,
                    _ => {
                        if let Some(ti) = self.thread_index(owner) {
                            self.threads[ti].migrations += 1;
                        }
                    }
                }
            }
            Event::Block { t, slot } => {
                self.set_runnable(slot, false, t.0);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                self.note_blocked(owner, true, t);
            }
            Event::Wake { t, slot } => {
                self.set_runnable(slot, true, t.0);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                self.note_blocked(owner, false, t);
            }
            Event::Finish { t, slot } => {
                self.close_interval(slot, t);
                self.set_runnable(slot, false, t.0);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                self.note_blocked(owner, false, t);
                if let Some(ti) = self.thread_index(owner) {
                    self.threads[ti].finish = Some(t);
                }
            }
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
