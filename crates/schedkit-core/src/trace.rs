//! The Trace: the ordered log of scheduling facts that both engines write.
//!
//! Engines never compute metrics; they emit [`Event`]s into a [`TraceSink`]. The report's
//! metrics ([`crate::report::Metrics`]) are one sink, which folds events as they come so that
//! memory does not grow with the length of a run; [`TraceLog`] is another, which keeps every
//! event for Gantt charts and Chrome traces. [`Tee`] feeds both. Real-time jobs are paired
//! from their `JobRelease` and `JobFinish` events, and a deadline miss decided, in one place:
//! [`jobs`] ([`JobTable`], [`OpenJobs`], [`misses_deadline`]).
//!
//! Event order contract (checked by `Metrics` in debug builds): times never decrease; a
//! thread is `Arrive`d before it is dispatched; `Dispatch` and `Deschedule` alternate per
//! thread and per core; `Finish` follows the thread's last `Deschedule`.

use crate::time::Nanos;
use serde::Serialize;

pub mod jobs;
pub use jobs::{misses_deadline, JobRow, JobTable, OpenJobs};

/// Engine-assigned thread identifier. Slots may be reused after a thread's `Finish` (the
/// simulator recycles the slots of finished real-time job threads so memory stays bounded).
pub type Slot = u32;

/// What a thread belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Owner {
    /// Thread `thread` of scenario process `process`.
    Process { process: usize, thread: u32 },
    /// A thread of job `job` (0-based release count) of scenario task `task`.
    Task { task: usize, job: u64 },
}

/// Why a thread left its core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Its work is done.
    Finished,
    /// A more important thread took the core.
    Preempted,
    /// Its time slice ran out and another thread got the core.
    Expired,
    /// It blocked or was stopped (gang switch, freezer).
    Blocked,
    /// The run ended at the horizon.
    Horizon,
}

/// One scheduling fact.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A thread exists and is runnable.
    Arrive { t: Nanos, slot: Slot, owner: Owner },
    /// A thread starts running on a core.
    Dispatch { t: Nanos, core: usize, slot: Slot },
    /// A thread stops running on a core.
    Deschedule {
        t: Nanos,
        core: usize,
        slot: Slot,
        reason: Reason,
    },
    /// A thread is dispatched on a different core than the one it last ran on.
    Migrate {
        t: Nanos,
        slot: Slot,
        from: usize,
        to: usize,
    },
    /// A runnable thread stops being runnable without finishing (blocked, frozen, stopped).
    Block { t: Nanos, slot: Slot },
    /// A blocked thread is runnable again.
    Wake { t: Nanos, slot: Slot },
    /// A thread's work is complete.
    Finish { t: Nanos, slot: Slot },
    /// A real-time job is released with absolute deadline `deadline`.
    JobRelease {
        t: Nanos,
        task: usize,
        job: u64,
        deadline: Nanos,
    },
    /// A real-time job completed (all its regions).
    JobFinish { t: Nanos, task: usize, job: u64 },
    /// A controller changed a thread's weight.
    WeightChange { t: Nanos, slot: Slot, weight: u64 },
    /// A controller changed a group's weight.
    GroupWeightChange { t: Nanos, group: usize, weight: u64 },
    /// Free-form annotation (e.g. a gang slot switch), shown in Chrome traces.
    Mark { t: Nanos, label: String },
}

impl Event {
    pub fn time(&self) -> Nanos {
        match self {
            Event::Arrive { t, .. }
            | Event::Dispatch { t, .. }
            | Event::Deschedule { t, .. }
            | Event::Migrate { t, .. }
            | Event::Block { t, .. }
            | Event::Wake { t, .. }
            | Event::Finish { t, .. }
            | Event::JobRelease { t, .. }
            | Event::JobFinish { t, .. }
            | Event::WeightChange { t, .. }
            | Event::GroupWeightChange { t, .. }
            | Event::Mark { t, .. } => *t,
        }
    }
}

/// Receives events in time order.
pub trait TraceSink {
    fn record(&mut self, event: &Event);
    /// Whether the sink wants `Mark` and other optional, allocation-heavy events.
    fn wants_detail(&self) -> bool {
        false
    }
}

/// Keeps every event.
#[derive(Default, Debug, Clone, Serialize)]
pub struct TraceLog {
    pub events: Vec<Event>,
}

impl TraceSink for TraceLog {
    fn record(&mut self, event: &Event) {
        self.events.push(event.clone());
    }
    fn wants_detail(&self) -> bool {
        true
    }
}

/// A run interval of a thread on a core, reconstructed from Dispatch/Deschedule pairs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunInterval {
    pub core: usize,
    pub owner: Owner,
    pub start: Nanos,
    pub end: Nanos,
}

impl TraceLog {
    /// The run intervals of the trace, in order of their start (see [`run_intervals`]).
    pub fn intervals(&self) -> Vec<RunInterval> {
        run_intervals(&self.events, None)
    }
}

/// The run intervals of `events` (`Dispatch` to `Deschedule` of a slot on a core, owned by the
/// slot's latest `Arrive`), in order of their start: the one place run intervals are rebuilt
/// from events (the Gantt chart, the Chrome trace, the experiments' per-bin CPU time and,
/// through [`run_intervals_with_reasons`], the intervals table use it). A thread still
/// running when the events end runs until `open_until` when it is given (a trace cut off at
/// the end of a run) and is left out otherwise.
pub fn run_intervals(events: &[Event], open_until: Option<Nanos>) -> Vec<RunInterval> {
    let mut out = Vec::new();
    each_run_interval(events, open_until, |iv, _| out.push(iv));
    out.sort_by_key(|i| (i.start, i.core));
    out
}

/// [`run_intervals`] of a whole trace (open ones left out), each with the reason its thread
/// left the core.
pub fn run_intervals_with_reasons(events: &[Event]) -> Vec<(RunInterval, Reason)> {
    let mut out = Vec::new();
    each_run_interval(events, None, |iv, reason| {
        out.push((iv, reason.expect("closed by a Deschedule")))
    });
    out.sort_by_key(|(i, _)| (i.start, i.core));
    out
}

/// Calls `push` with every non-empty run interval of `events` whose owner is known, and the
/// reason of the `Deschedule` that closed it (`None` for one closed at `open_until`), in the
/// order they close; the open ones last, in no particular order.
fn each_run_interval(
    events: &[Event],
    open_until: Option<Nanos>,
    mut push: impl FnMut(RunInterval, Option<Reason>),
) {
    use std::collections::HashMap;
    let mut owners: HashMap<Slot, Owner> = HashMap::new();
    let mut open: HashMap<(usize, Slot), Nanos> = HashMap::new();
    let mut close = |core, owner: Option<&Owner>, start, end, reason| {
        if let Some(owner) = owner {
            if end > start {
                let iv = RunInterval {
                    core,
                    owner: *owner,
                    start,
                    end,
                };
                push(iv, reason);
            }
        }
    };
    for e in events {
        match *e {
            Event::Arrive { slot, owner, .. } => {
                owners.insert(slot, owner);
            }
            Event::Dispatch { t, core, slot } => {
                open.insert((core, slot), t);
            }
            Event::Deschedule {
                t,
                core,
                slot,
                reason,
            } => {
                if let Some(start) = open.remove(&(core, slot)) {
                    close(core, owners.get(&slot), start, t, Some(reason));
                }
            }
            _ => {}
        }
    }
    if let Some(end) = open_until {
        for ((core, slot), start) in open {
            close(core, owners.get(&slot), start, end, None);
        }
    }
}

/// Feeds two sinks.
pub struct Tee<'a, A: TraceSink + ?Sized, B: TraceSink + ?Sized>(pub &'a mut A, pub &'a mut B);

impl<A: TraceSink + ?Sized, B: TraceSink + ?Sized> TraceSink for Tee<'_, A, B> {
    fn record(&mut self, event: &Event) {
        self.0.record(event);
        self.1.record(event);
    }
    fn wants_detail(&self) -> bool {
        self.0.wants_detail() || self.1.wants_detail()
    }
}
