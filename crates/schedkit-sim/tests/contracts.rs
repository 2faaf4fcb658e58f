//! The dispatcher and controller contracts (`policy.rs`, `schedkit_core::control`) are
//! enforced: deliberately broken dispatchers and controllers run through the engine, and each
//! mistake is caught, counted and explained in `SimStats::warnings` (returned, not printed),
//! while a correct FIFO on the same scenarios is clean.

use schedkit_core::control::{Action, Controller, Snapshot};
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, Slot, TraceLog};
use schedkit_core::Nanos;
use schedkit_sim::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_sim::{Engine, SimStats};
use std::collections::VecDeque;

const TWO_CORES: &str = r#"
cores = 2
[policy]
name = "fcfs"
[[process]]
name = "a"
burst = "10ms"
[[process]]
name = "b"
burst = "10ms"
[[process]]
name = "c"
burst = "10ms"
cpus = [1]
"#;

/// A FIFO with a switch for each way to break the contract.
#[derive(Default)]
struct Fifo {
    queue: VecDeque<Slot>,
    /// Hand out the queue's head on any core, ignoring affinity.
    ignore_affinity: bool,
    /// Answer every pick with the first thread ever queued, running or not.
    sticky: Option<Slot>,
    stick: bool,
    /// Answer picks with a slot that no thread has.
    ghost: bool,
    /// Keep a stopped thread in the queue.
    forget_remove: bool,
    /// Promise this starvation bound.
    bound: Option<Nanos>,
    /// Threads seen by `exit`, with their core.
    exits: Vec<(Slot, usize)>,
}

impl Dispatcher for Fifo {
    fn name(&self) -> &'static str {
        "broken-fifo"
    }
    fn enqueue(&mut self, _ctx: &Ctx, slot: Slot, _why: Enqueue) {
        self.sticky.get_or_insert(slot);
        self.queue.push_back(slot);
    }
    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        if self.ghost {
            return Some(9_999);
        }
        if self.stick {
            return self.sticky;
        }
        let i = self
            .queue
            .iter()
            .position(|&s| self.ignore_affinity || ctx.thread(s).allowed_on(core))?;
        self.queue.remove(i)
    }
    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        if !self.forget_remove {
            self.queue.retain(|&s| s != slot);
        }
    }
    fn exit(&mut self, _ctx: &Ctx, slot: Slot, core: usize) {
        self.exits.push((slot, core));
    }
    fn starvation_bound(&self) -> Option<Nanos> {
        self.bound
    }
}

/// A controller that sends fixed actions at its first tick.
struct Scripted(Vec<Action>);

impl Controller for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn period(&self) -> Nanos {
        Nanos(1_000_000_000)
    }
    fn tick(&mut self, _snapshot: &Snapshot, out: &mut Vec<Action>) {
        out.append(&mut self.0);
    }
}

fn run(text: &str, d: Fifo, c: Option<Scripted>) -> (SimStats, Vec<Event>) {
    let s = Scenario::parse("contracts.toml", text).unwrap();
    let mut log = TraceLog::default();
    let ctl = c.map(|c| Box::new(c) as Box<dyn Controller>);
    let stats = Engine::new(&s, Box::new(d), ctl, &mut log).run();
    (stats, log.events)
}

fn warned(stats: &SimStats, needle: &str) -> bool {
    stats.warnings().iter().any(|w| w.contains(needle))
}

#[test]
fn a_correct_fifo_keeps_every_contract() {
    let (stats, _) = run(TWO_CORES, Fifo::default(), None);
    assert!(stats.warnings().is_empty(), "{:?}", stats.warnings());
    assert_eq!(stats.invariants.invalid_picks, 0);
    assert_eq!(stats.end, Nanos(20_000_000));
}

#[test]
fn a_pick_against_the_affinity_is_rejected_with_its_reason() {
    let d = Fifo {
        ignore_affinity: true,
        ..Fifo::default()
    };
    // Core 0 picks a, core 1 b; when a finishes, core 0 is handed c (cpus = [1]).
    let (stats, events) = run(TWO_CORES, d, None);
    assert!(stats.invariants.invalid_picks > 0);
    assert!(
        warned(&stats, "not allowed on that core by its affinity"),
        "{:?}",
        stats.warnings()
    );
    // The rejected pick never ran: c only ever ran on core 1.
    let c_slot = 2;
    assert!(events
        .iter()
        .all(|e| !matches!(e, Event::Dispatch { core: 0, slot, .. } if *slot == c_slot)));
}

#[test]
fn picking_a_running_thread_again_is_rejected() {
    let d = Fifo {
        stick: true,
        ..Fifo::default()
    };
    let (stats, _) = run(TWO_CORES, d, None);
    assert!(stats.invariants.invalid_picks > 0);
    assert!(
        warned(&stats, "already picked for another core") || warned(&stats, "not ready"),
        "{:?}",
        stats.warnings()
    );
}

#[test]
fn a_pick_of_a_thread_that_does_not_exist_is_rejected() {
    let d = Fifo {
        ghost: true,
        ..Fifo::default()
    };
    let (stats, events) = run(TWO_CORES, d, None);
    assert!(warned(&stats, "thread 9999 on core 0: no such thread"));
    assert!(!events.iter().any(|e| matches!(e, Event::Dispatch { .. })));
    // Reasons are bounded; the count is not.
    assert!(stats.invariants.invalid_picks >= 2);
    assert!(stats.invariants.reasons.len() as u64 <= schedkit_sim::engine::Invariants::KEPT);
}

#[test]
fn a_wait_beyond_the_declared_starvation_bound_is_counted() {
    // Three 10 ms threads, one core each for a and b; c waits for core 1 for 10 ms.
    let d = Fifo {
        bound: Some(Nanos(5_000_000)),
        ..Fifo::default()
    };
    let (stats, _) = run(TWO_CORES, d, None);
    assert_eq!(stats.invariants.starved, 1);
    assert!(
        warned(
            &stats,
            "was ready from 0s to 10ms without running, longer than the policy's bound 5ms"
        ),
        "{:?}",
        stats.warnings()
    );
    // The same wait within a looser bound is no starvation.
    let d = Fifo {
        bound: Some(Nanos(10_000_000)),
        ..Fifo::default()
    };
    assert_eq!(run(TWO_CORES, d, None).0.invariants.starved, 0);
}

#[test]
fn a_thread_still_waiting_at_the_end_counts_as_starved() {
    let text = TWO_CORES.replace(
        "[[process]]\nname = \"c\"",
        "[run]\nhorizon = \"5ms\"\n[[process]]\nname = \"c\"",
    );
    let d = Fifo {
        bound: Some(Nanos(1_000_000)),
        ..Fifo::default()
    };
    let (stats, _) = run(&text, d, None);
    assert_eq!(stats.invariants.starved, 1, "{:?}", stats.warnings());
}

#[test]
fn the_exit_hook_sees_every_finished_thread_on_its_core() {
    let s = Scenario::parse("contracts.toml", TWO_CORES).unwrap();
    let mut log = TraceLog::default();
    let mut d = Fifo::default();
    let exits = {
        // The engine owns the dispatcher; read the hook's record through a shared cell.
        struct Spy<'a>(Fifo, &'a std::cell::RefCell<Vec<(Slot, usize)>>);
        impl Dispatcher for Spy<'_> {
            fn name(&self) -> &'static str {
                self.0.name()
            }
            fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
                self.0.enqueue(ctx, slot, why)
            }
            fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
                self.0.pick_next(ctx, core)
            }
            fn remove(&mut self, ctx: &Ctx, slot: Slot) {
                self.0.remove(ctx, slot)
            }
            fn exit(&mut self, _ctx: &Ctx, slot: Slot, core: usize) {
                assert!(
                    self.0.queue.iter().all(|&s| s != slot),
                    "exit of a queued thread"
                );
                self.1.borrow_mut().push((slot, core));
            }
        }
        let cell = std::cell::RefCell::new(Vec::new());
        d.exits.clear();
        Engine::new(&s, Box::new(Spy(d, &cell)), None, &mut log).run();
        cell.into_inner()
    };
    let mut finished: Vec<(Slot, usize)> = Vec::new();
    let mut on = std::collections::HashMap::new();
    for e in &log.events {
        match *e {
            Event::Dispatch { slot, core, .. } => {
                on.insert(slot, core);
            }
            Event::Finish { slot, .. } => finished.push((slot, on[&slot])),
            _ => {}
        }
    }
    assert_eq!(exits, finished);
    assert_eq!(exits.len(), 3);
}

#[test]
fn a_dispatcher_that_forgets_remove_hands_out_a_stopped_thread_and_is_caught() {
    // c waits for core 1; the controller stops it at time 0; a dispatcher that keeps it in its
    // queue hands it out when b finishes.
    let d = Fifo {
        forget_remove: true,
        ..Fifo::default()
    };
    let (stats, _) = run(
        TWO_CORES,
        d,
        Some(Scripted(vec![Action::Stop { process: 2 }])),
    );
    assert!(
        warned(&stats, "not ready (state Blocked)"),
        "{:?}",
        stats.warnings()
    );
    // Keeping the contract: nothing to catch.
    let (stats, _) = run(
        TWO_CORES,
        Fifo::default(),
        Some(Scripted(vec![Action::Stop { process: 2 }])),
    );
    assert!(stats.warnings().is_empty(), "{:?}", stats.warnings());
}

#[test]
fn actions_the_model_cannot_apply_are_refused_with_their_reason_and_the_rest_apply() {
    let actions = vec![
        Action::Migrate { thread: 0, core: 7 },
        Action::SetWeight {
            thread: 12_345,
            weight: 2048,
        },
        Action::SetWeight {
            thread: 1,
            weight: 0,
        },
        Action::SetGroupWeight {
            group: 3,
            weight: 100,
        },
        Action::Stop { process: 9 },
        Action::Resume { process: 9 },
        // Valid: applied.
        Action::SetWeight {
            thread: 1,
            weight: 2048,
        },
    ];
    let (stats, events) = run(TWO_CORES, Fifo::default(), Some(Scripted(actions)));
    assert_eq!(
        stats.invariants.refused_actions,
        6,
        "{:?}",
        stats.warnings()
    );
    for needle in [
        "core 7 does not exist (2 cores)",
        "thread 12345 is not a live process thread",
        "a weight of 0",
        "group 3 does not exist",
        "process 9 does not exist",
    ] {
        assert!(warned(&stats, needle), "{needle}: {:?}", stats.warnings());
    }
    assert!(warned(&stats, "scripted: refused Migrate"));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::WeightChange {
            slot: 1,
            weight: 2048,
            ..
        }
    )));
}
