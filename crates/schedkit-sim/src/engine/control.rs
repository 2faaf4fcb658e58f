//! Controllers (their ticks and the actions the model applies or refuses) and the
//! contract checks on waits (issue 16 part 5).

use super::{Engine, Invariants, Kind};
use crate::contract::refusal;
use crate::policy::{Dispatcher, Enqueue, ThreadState};
use schedkit_core::control::{Action, Entity, Snapshot, ThreadView, ENTITY_WEIGHT_SCALE};
use schedkit_core::trace::{Event, Owner, Reason, Slot, TraceSink};
use schedkit_core::Nanos;

impl<'a, D: Dispatcher + ?Sized + 'a, S: TraceSink + ?Sized + 'a> Engine<'a, D, S> {
    /// Runs the controller and applies its actions.
    pub(super) fn control(&mut self) {
        let Some(mut ctl) = self.controller.take() else {
            return;
        };
        // Running threads may be charged lazily; the snapshot shows CPU time up to now.
        for core in 0..self.cores_n {
            self.charge(core);
        }
        let mut views: Vec<ThreadView> = self
            .threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state != ThreadState::Done && t.process.is_some())
            .map(|(i, t)| ThreadView {
                id: i as u64,
                process: t.process.expect("filtered"),
                index: match t.owner {
                    Owner::Process { thread, .. } => thread as usize,
                    Owner::Task { .. } => 0,
                },
                group: t.group,
                core: match t.state {
                    ThreadState::Running(c) => Some(c),
                    _ => t.last_core.or_else(|| t.affinity.as_ref().map(|a| a[0])),
                },
                weight: t.weight,
                base_weight: self.scenario.processes()[t.process.expect("filtered")].weight(),
                runnable: matches!(t.state, ThreadState::Ready | ThreadState::Running(_)),
                cpu: t.cpu,
            })
            .collect();
        // Slots are reused, so slot order is not creation order: the snapshot goes in the
        // engine-independent order the controller contract promises.
        views.sort_unstable_by_key(ThreadView::key);
        // Each process's CPU time whole: process threads keep their slots once done (only
        // job threads' slots are reused), so every thread that ever ran is still counted.
        let mut process_cpu = vec![Nanos::ZERO; self.scenario.processes().len()];
        for t in &self.threads {
            if let Some(p) = t.process {
                process_cpu[p] += t.cpu;
            }
        }
        let mut actions = Vec::new();
        {
            let snap = Snapshot {
                now: self.now,
                cores: self.cores_n,
                threads: &views,
                group_weights: &self.group_weights,
                process_cpu: &process_cpu,
                // The simulator's count never changes source.
                process_cpu_epoch: 0,
                scenario: self.scenario,
            };
            ctl.tick(&snap, &mut actions);
        }
        let period = ctl.period();
        self.controller = Some(ctl);
        for a in actions {
            self.act(a);
        }
        self.push(self.now + period, Kind::Control);
    }

    /// Applies one controller action to the model, or refuses it with a reason.
    pub(crate) fn act(&mut self, action: Action) {
        if let Some(why) = refusal(
            &action,
            self.scenario,
            &self.threads,
            self.group_weights.len(),
        ) {
            let inv = &mut self.stats.invariants;
            let ctl = self.controller.as_ref().map_or("controller", |c| c.name());
            Invariants::note(&mut inv.refused_actions, &mut inv.reasons, || {
                format!("{ctl}: refused {action:?} at {}: {why}", self.now)
            });
            return;
        }
        let now = self.now;
        match action {
            Action::SetWeight { thread, weight } => self.set_thread_weight(thread as Slot, weight),
            Action::SetEntityWeight { entity, weight } => self.set_entity_weight(entity, weight),
            Action::Migrate { thread, core } => {
                let slot = thread as Slot;
                self.threads[slot as usize].affinity = Some(vec![core]);
                if let ThreadState::Running(c) = self.threads[slot as usize].state {
                    if c != core {
                        self.charge(c);
                        self.vacate(c, slot, Reason::Preempted);
                        pcall!(self, place(slot, core));
                        pcall!(self, enqueue(slot, Enqueue::Preempted));
                    }
                } else {
                    pcall!(self, place(slot, core));
                }
            }
            Action::SetGroupWeight { group, weight } => {
                self.group_weights[group] = weight;
                self.emit(Event::GroupWeightChange {
                    t: now,
                    group,
                    weight,
                });
            }
            Action::Stop { process } => {
                for slot in 0..self.threads.len() as Slot {
                    let t = &self.threads[slot as usize];
                    if t.process != Some(process) {
                        continue;
                    }
                    match t.state {
                        ThreadState::Running(c) => {
                            self.charge(c);
                            // A stop at the very instant the thread's work runs out (controller
                            // ticks come before slice ends in a batch) finishes it: stopped
                            // with nothing left, it would never get a slice end again.
                            if self.threads[slot as usize].remaining == Some(Nanos::ZERO)
                                && !self.cores[c].switching
                            {
                                self.finish(c, slot);
                                continue;
                            }
                            let cc = &mut self.cores[c];
                            cc.running = None;
                            cc.generation += 1;
                            // Not dispatched yet if still switching: no Deschedule then.
                            let dispatched = !std::mem::take(&mut cc.switching);
                            self.running[c] = None;
                            if dispatched {
                                self.emit(Event::Deschedule {
                                    t: now,
                                    core: c,
                                    slot,
                                    reason: Reason::Blocked,
                                });
                            }
                        }
                        ThreadState::Ready => {
                            pcall!(self, remove(slot));
                        }
                        _ => continue,
                    }
                    self.threads[slot as usize].state = ThreadState::Blocked;
                    self.emit(Event::Block { t: now, slot });
                }
            }
            Action::Resume { process } => {
                for slot in 0..self.threads.len() as Slot {
                    let t = &self.threads[slot as usize];
                    if t.process == Some(process) && t.state == ThreadState::Blocked {
                        self.threads[slot as usize].state = ThreadState::Ready;
                        self.became_ready(slot);
                        self.emit(Event::Wake { t: now, slot });
                        pcall!(self, enqueue(slot, Enqueue::Woken));
                    }
                }
            }
        }
    }

    /// One thread's weight, traced and handed to the dispatcher when it changes.
    fn set_thread_weight(&mut self, slot: Slot, weight: u64) {
        let old = std::mem::replace(&mut self.threads[slot as usize].weight, weight);
        if old != weight {
            self.emit(Event::WeightChange {
                t: self.now,
                slot,
                weight,
            });
            pcall!(self, reweight(slot, old));
        }
    }

    /// `SetEntityWeight` on the flat run-queue model (see [`Action::SetEntityWeight`]): the
    /// entity's weight in thread units (10.24 per cgroup v2 unit) split among its member
    /// processes with live threads by their scenario weights, and a process's part equally
    /// among its live threads, as the tenants controller splits a group. Threads that
    /// arrive later run at their scenario weight until the controller's next tick.
    fn set_entity_weight(&mut self, entity: Entity, weight: u64) {
        let total = weight as f64 / ENTITY_WEIGHT_SCALE as f64 * 10.24;
        let sc = self.scenario;
        let member = |p: usize| match entity {
            Entity::Process(q) => p == q,
            Entity::Group(g) => sc.processes()[p].group() == Some(g),
        };
        let mut live = vec![0u64; self.scenario.processes().len()];
        for t in &self.threads {
            if let (Some(p), false) = (t.process, t.state == ThreadState::Done) {
                live[p] += u64::from(member(p));
            }
        }
        let weight_sum: u64 = (0..live.len())
            .filter(|&p| live[p] > 0)
            .map(|p| self.scenario.processes()[p].weight())
            .sum();
        if weight_sum == 0 {
            return; // no live thread: nothing carries the weight now
        }
        for slot in 0..self.threads.len() {
            let t = &self.threads[slot];
            let Some(p) = t.process.filter(|&p| live[p] > 0) else {
                continue;
            };
            if t.state == ThreadState::Done {
                continue;
            }
            let part = self.scenario.processes()[p].weight() as f64 / weight_sum as f64;
            let w = (total * part / live[p] as f64).round().max(1.0) as u64;
            self.set_thread_weight(slot as Slot, w);
        }
    }

    // ---- Contract checks (issue 16 part 5) -------------------------------------------------

    /// `slot` became ready now (only tracked when the dispatcher declares a bound).
    pub(super) fn became_ready(&mut self, slot: Slot) {
        if self.starvation_bound.is_none() {
            return;
        }
        let i = slot as usize;
        if self.ready_since.len() <= i {
            self.ready_since.resize(i + 1, Nanos::ZERO);
        }
        self.ready_since[i] = self.now;
    }

    /// The ready thread `slot` stops waiting now (dispatched, or the run ended): a wait
    /// longer than the declared bound is counted.
    pub(super) fn check_wait(&mut self, slot: Slot) {
        let Some(bound) = self.starvation_bound else {
            return;
        };
        let since = self
            .ready_since
            .get(slot as usize)
            .copied()
            .unwrap_or(self.now);
        let waited = self.now.saturating_sub(since);
        if waited > bound {
            let inv = &mut self.stats.invariants;
            Invariants::note(&mut inv.starved, &mut inv.reasons, || {
                format!(
                    "{}: thread {slot} ({:?}) was ready from {since} to {} without running, \
                     longer than the policy's bound {bound}",
                    self.policy.name(),
                    self.threads[slot as usize].owner,
                    self.now
                )
            });
        }
    }
}
