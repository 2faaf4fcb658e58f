//! The live path of a SCHED_DEADLINE task set's job events: each master pushes its
//! `JobRelease` (at the release) and `JobFinish` (at the finish) into its own bounded
//! single-producer queue ([`JobQueue`]), and the control thread, which is not under
//! SCHED_DEADLINE, drains every queue into the caller's trace sink while the set runs
//! ([`Drain::step`]) and once more after the join ([`Drain::finish`]).
//!
//! **No lock, no allocation on the masters.** A queue is a crossbeam `ArrayQueue` (a
//! lock-free ring, allocated once when the task is spawned, before its master starts): a
//! push is a few atomic operations, whatever the control thread is doing.
//!
//! **It cannot fill.** A master pushes exactly two events per job released in the window,
//! and the queue holds that many ([`JobQueue::capacity`]): however long the control thread
//! goes without draining (it runs SCHED_OTHER beside deadline threads that may take up to
//! the admitted bandwidth, so no drain interval is guaranteed), nothing is refused. That is
//! about the memory the masters' per-run buffers took before the events were streamed (a
//! slot is a 40-byte event and the queue's 8-byte stamp: a 1 ms task over a 60 s horizon,
//! 120 000 slots, 5.8 MB). A refused push is still counted ([`JobQueue::refused`]), and a
//! run with any is an error, never a report short of jobs.
//!
//! **Time order across masters.** A trace sink takes events in time order (`Metrics` asserts
//! it), at one instant releases first ([`crate::run::tasks::in_trace_order`]). Each queue is
//! in its master's order, which is not time order when a job overruns its period (job j's
//! finish comes after job j + 1's release time). So a drain holds the events it pulled and
//! hands the sink only those earlier than the *bound*: the earliest time any master may
//! still push. A master whose last pulled event is job j's release may still finish job j
//! (at j's release or later); one whose last is job j's finish next releases job j + 1 at its
//! release time, known in advance (offset + (j + 1) x period), or never, past the window.
//! Everything a master pushes later is at its bound or after, and bounds only grow: what the
//! sink gets is in time order across drains, each drain's share sorted into trace order.
//! A job's events therefore reach the sink at most about one period of the slowest task
//! (and one drain interval) after they happen.

use crossbeam_queue::ArrayQueue;
use schedkit_core::scenario::Task;
use schedkit_core::trace::{Event, TraceSink};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The release time of job `j` of `task` (ns from the run's origin): the master's schedule,
/// which the drain's bound also reads.
pub(super) fn release_of(task: &Task, j: u64) -> u64 {
    task.offset().0 + j * task.period().0
}

/// The number of jobs of `task` released in `[0, window)`.
pub(super) fn jobs_in(task: &Task, window: u64) -> u64 {
    window
        .saturating_sub(task.offset().0)
        .div_ceil(task.period().0.max(1))
}

/// One master's queue of job events (the master pushes, the control thread pops).
pub(super) struct JobQueue {
    queue: ArrayQueue<Event>,
    /// Events refused by a full queue (none with [`JobQueue::capacity`]; counted, not lost
    /// silently, should the sizing ever be wrong).
    refused: AtomicU64,
}

impl JobQueue {
    /// Two events (release, finish) per job the master releases in `window`.
    pub(super) fn capacity(task: &Task, window: u64) -> usize {
        (2 * jobs_in(task, window)).max(1) as usize
    }

    pub(super) fn new(task: &Task, window: u64) -> JobQueue {
        JobQueue {
            queue: ArrayQueue::new(JobQueue::capacity(task, window)),
            refused: AtomicU64::new(0),
        }
    }

    /// On the master: lock-free and allocation-free.
    pub(super) fn push(&self, e: Event) {
        if self.queue.push(e).is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// One master as the drain sees it: its queue, its schedule, and how far it has got.
pub(super) struct Source {
    queue: Arc<JobQueue>,
    task: Task,
    window: u64,
    /// The next job whose release has not been pulled.
    next_job: u64,
    /// The release time of the job whose release was pulled and whose finish was not.
    open: Option<u64>,
}

impl Source {
    pub(super) fn new(queue: Arc<JobQueue>, task: Task, window: u64) -> Source {
        Source {
            queue,
            task,
            window,
            next_job: 0,
            open: None,
        }
    }

    /// The earliest time of any event this master may still push (`u64::MAX`: none).
    fn bound(&self) -> u64 {
        if let Some(release) = self.open {
            return release;
        }
        let next = release_of(&self.task, self.next_job);
        if next < self.window {
            next
        } else {
            u64::MAX
        }
    }
}

/// The control thread's side of the live path (see the module header).
pub(super) struct Drain {
    sources: Vec<Source>,
    /// Pulled, not yet handed to the sink (at or after the bound of the last drain).
    held: Vec<Event>,
    /// The latest finish handed to the sink (ns from the origin).
    pub(super) last_finish: u64,
}

impl Drain {
    pub(super) fn new(sources: Vec<Source>) -> Drain {
        Drain {
            sources,
            held: Vec::new(),
            last_finish: 0,
        }
    }

    /// Hands `sink`, in trace order, every event no master can still precede.
    pub(super) fn step(&mut self, sink: &mut dyn TraceSink) {
        self.pull();
        let bound = self.sources.iter().map(Source::bound).min();
        self.emit(bound.unwrap_or(u64::MAX), sink);
    }

    /// After the join: every event left, in trace order.
    pub(super) fn finish(&mut self, sink: &mut dyn TraceSink) {
        self.pull();
        self.emit(u64::MAX, sink);
    }

    /// Events the masters' queues refused (see [`JobQueue`]).
    pub(super) fn refused(&self) -> u64 {
        self.sources.iter().map(|s| s.queue.refused()).sum()
    }

    fn pull(&mut self) {
        for s in &mut self.sources {
            while let Some(e) = s.queue.queue.pop() {
                match &e {
                    Event::JobRelease { t, job, .. } => {
                        s.open = Some(t.0);
                        s.next_job = *job + 1;
                    }
                    Event::JobFinish { .. } => s.open = None,
                    _ => {}
                }
                self.held.push(e);
            }
        }
    }

    /// Hands `sink` the held events earlier than `bound` (all of them at `u64::MAX`).
    fn emit(&mut self, bound: u64, sink: &mut dyn TraceSink) {
        crate::run::tasks::in_trace_order(&mut self.held);
        let n = if bound == u64::MAX {
            self.held.len()
        } else {
            self.held.partition_point(|e| e.time().0 < bound)
        };
        for e in self.held.drain(..n) {
            if let Event::JobFinish { t, .. } = e {
                self.last_finish = self.last_finish.max(t.0);
            }
            sink.record(&e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_core::scenario::Region;
    use schedkit_core::trace::TraceLog;
    use schedkit_core::Nanos;

    fn task(period_ms: u64) -> Task {
        Task::new(
            "t",
            Nanos::from_ms(period_ms),
            vec![Region::Seq(Nanos::from_ms(1))],
        )
    }

    fn release(task: usize, job: u64, t_ms: u64, d_ms: u64) -> Event {
        Event::JobRelease {
            t: Nanos::from_ms(t_ms),
            task,
            job,
            deadline: Nanos::from_ms(t_ms + d_ms),
        }
    }

    fn finish(task: usize, job: u64, t_ms: u64) -> Event {
        Event::JobFinish {
            t: Nanos::from_ms(t_ms),
            task,
            job,
        }
    }

    #[test]
    fn a_queue_holds_every_event_its_master_pushes_in_the_window() {
        let ms = Nanos::from_ms(1).0;
        for (period, window, jobs) in [(10, 100, 10), (10, 101, 11), (30, 100, 4), (7, 1, 1)] {
            let t = task(period);
            assert_eq!(jobs_in(&t, window * ms), jobs, "{period} {window}");
            assert_eq!(JobQueue::capacity(&t, window * ms), 2 * jobs as usize);
            // The master's loop: releases while in the window.
            let released = (0..)
                .take_while(|&j| release_of(&t, j) < window * ms)
                .count();
            assert_eq!(released as u64, jobs);
        }
        // A task whose offset is past the window releases nothing; its queue still exists.
        let q = JobQueue::new(&task(10), 0);
        q.push(finish(0, 0, 1));
        q.push(finish(0, 0, 2));
        assert_eq!(q.refused(), 1);
    }

    #[test]
    fn the_drain_merges_masters_in_time_order_and_holds_what_a_master_may_precede() {
        let window = Nanos::from_ms(100).0;
        let (a, b) = (task(10), task(30));
        let qa = Arc::new(JobQueue::new(&a, window));
        let qb = Arc::new(JobQueue::new(&b, window));
        let mut d = Drain::new(vec![
            Source::new(qa.clone(), a, window),
            Source::new(qb.clone(), b, window),
        ]);
        let mut sink = TraceLog::default();
        // Task 0's job 0 overruns its period: its finish (12) comes after job 1's release (10).
        for e in [
            release(0, 0, 0, 10),
            finish(0, 0, 12),
            release(0, 1, 10, 10),
            finish(0, 1, 15),
        ] {
            qa.push(e);
        }
        // Task 1 has not released job 0 yet (due at 0): it may still push at 0, so nothing.
        d.step(&mut sink);
        assert!(sink.events.is_empty());
        qb.push(release(1, 0, 0, 30));
        // Task 1's job 0 is open since 0: still nothing can go.
        d.step(&mut sink);
        assert!(sink.events.is_empty());
        qb.push(finish(1, 0, 5));
        // Bounds: task 0's next release 20, task 1's 30: everything before 20 goes, merged.
        d.step(&mut sink);
        assert_eq!(
            sink.events,
            vec![
                release(0, 0, 0, 10),
                release(1, 0, 0, 30),
                finish(1, 0, 5),
                release(0, 1, 10, 10),
                finish(0, 0, 12),
                finish(0, 1, 15),
            ]
        );
        qa.push(release(0, 2, 20, 10));
        qa.push(finish(0, 2, 20));
        qb.push(release(1, 1, 30, 30));
        // Task 0's finish at 20 waits for task 0's bound (30) to pass 20, then follows.
        d.step(&mut sink);
        assert_eq!(sink.events.len(), 8);
        d.finish(&mut sink);
        let times: Vec<_> = sink.events.iter().map(|e| e.time()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert_eq!(sink.events.len(), 9);
        assert_eq!(d.last_finish, Nanos::from_ms(20).0);
        assert_eq!(d.refused(), 0);
    }
}
