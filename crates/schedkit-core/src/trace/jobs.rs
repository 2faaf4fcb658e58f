//! Real-time jobs in a trace: the one pairing of each `JobRelease` with its `JobFinish`, and
//! the one definition of a deadline miss (docs/metrics.md, "Real-time jobs").
//!
//! Three things read jobs from events, and all three pair them here:
//! - the report's streaming fold ([`crate::report::Metrics`]) keeps, per task, only the jobs
//!   still open ([`OpenJobs`]: memory follows the live jobs, not the run);
//! - [`JobTable`] keeps a row per job, for whoever needs every job (the real engine's job
//!   table after a `[[task]]` run, the Gantt chart's and the Chrome trace's miss marks);
//! - both decide a miss with [`misses_deadline`].
//!
//! Pairing rules, the same everywhere: a job is named by (task, job number); a `JobFinish`
//! closes the open job of that name and a `JobFinish` without a matching open `JobRelease` is
//! ignored (nothing to pair it with: it neither adds a job nor a miss); a job still open
//! when the events end is unfinished, and whether it missed depends on the end of the run.

use super::{Event, TraceSink};
use crate::time::Nanos;
use std::collections::VecDeque;

/// Whether a job with absolute deadline `deadline` misses it (docs/metrics.md, "deadline
/// miss"): finished (`finish` is `Some`) after the deadline, or not finished by the end of
/// the run, `end`, with the deadline before then. A job finishing exactly at its deadline
/// meets it; `end` matters only for an unfinished job, and one whose deadline is at or after
/// `end` is neither met nor missed. The one definition: the report's counts, the job table,
/// the Chrome trace's and the Gantt chart's miss marks and the runtime pool's statistics use
/// it (`schedkit_core::report::misses_deadline` is this function).
pub fn misses_deadline(deadline: Nanos, finish: Option<Nanos>, end: Nanos) -> bool {
    match finish {
        Some(t) => t > deadline,
        None => deadline < end,
    }
}

/// A task's released, unfinished jobs, keyed by job number, each with a value `V` (the
/// report keeps (release, deadline); [`JobTable`] its row index). Jobs are released in order
/// and mostly finish in order, so a deque sorted by job number serves both ends in O(1) and
/// keeps its buffer: a `BTreeMap` here allocated a node whenever a task's first open job was
/// released and freed it when the last finished, once per job in a periodic set (an eighth
/// of a global-EDF run).
#[derive(Clone, Debug)]
pub struct OpenJobs<V>(VecDeque<(u64, V)>);

impl<V> Default for OpenJobs<V> {
    fn default() -> Self {
        OpenJobs(VecDeque::new())
    }
}

impl<V> OpenJobs<V> {
    /// Opens job `job` (or replaces its value, as a map would).
    pub fn insert(&mut self, job: u64, v: V) {
        match self.0.back() {
            Some(&(last, _)) if last >= job => match self.0.binary_search_by_key(&job, |e| e.0) {
                Ok(i) => self.0[i].1 = v,
                Err(i) => self.0.insert(i, (job, v)),
            },
            _ => self.0.push_back((job, v)),
        }
    }

    /// Closes job `job`: its value, or `None` if it is not open.
    pub fn remove(&mut self, job: u64) -> Option<V> {
        if self.0.front().is_some_and(|e| e.0 == job) {
            return self.0.pop_front().map(|e| e.1);
        }
        let i = self.0.binary_search_by_key(&job, |e| e.0).ok()?;
        self.0.remove(i).map(|e| e.1)
    }

    /// The open jobs' values, in job order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|e| &e.1)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One job as its events told it (times from the run's origin): `finish` is `None` for a job
/// released but not finished when the events ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRow {
    pub task: usize,
    pub job: u64,
    pub release: Nanos,
    /// Absolute deadline.
    pub deadline: Nanos,
    pub finish: Option<Nanos>,
}

impl JobRow {
    /// Whether the job missed its deadline in a run that ended at `end` ([`misses_deadline`]).
    pub fn missed(&self, end: Nanos) -> bool {
        misses_deadline(self.deadline, self.finish, end)
    }

    /// Release to finish, for a finished job.
    pub fn response(&self) -> Option<Nanos> {
        self.finish.map(|f| f - self.release)
    }
}

/// Every job of a stream of trace events, in release order: a [`TraceSink`] that pairs each
/// `JobRelease` with its `JobFinish` (the rules are in the module docs). A second release of
/// a job that is still open starts a new row and leaves the first one unfinished.
#[derive(Clone, Debug, Default)]
pub struct JobTable {
    jobs: Vec<JobRow>,
    /// Per task, its open jobs' rows.
    open: Vec<OpenJobs<usize>>,
    /// The time of the last event of any kind.
    last: Nanos,
    /// `JobFinish` events that closed no open job.
    unpaired: u64,
}

impl JobTable {
    /// The jobs of `events`.
    pub fn of(events: &[Event]) -> JobTable {
        let mut t = JobTable::default();
        for e in events {
            t.record(e);
        }
        t
    }

    /// Every job, in release order.
    pub fn jobs(&self) -> &[JobRow] {
        &self.jobs
    }

    pub fn into_jobs(self) -> Vec<JobRow> {
        self.jobs
    }

    /// The time of the last event recorded (of any kind; zero before the first).
    pub fn last(&self) -> Nanos {
        self.last
    }

    /// `JobFinish` events that closed no open job (a finish without its release, or a second
    /// finish of one job): ignored, and counted here for a caller that checks an engine.
    pub fn unpaired_finishes(&self) -> u64 {
        self.unpaired
    }

    /// Per task `0..tasks`: its jobs and its misses in a run that ended at `end`.
    pub fn per_task(&self, tasks: usize, end: Nanos) -> Vec<(u64, u64)> {
        let mut out = vec![(0, 0); tasks];
        for j in &self.jobs {
            if let Some(c) = out.get_mut(j.task) {
                c.0 += 1;
                c.1 += j.missed(end) as u64;
            }
        }
        out
    }

    /// The jobs that missed their deadline in a run that ended at `end`, in release order.
    pub fn misses(&self, end: Nanos) -> impl Iterator<Item = &JobRow> {
        self.jobs.iter().filter(move |j| j.missed(end))
    }
}

impl TraceSink for JobTable {
    fn record(&mut self, e: &Event) {
        self.last = self.last.max(e.time());
        match *e {
            Event::JobRelease {
                t,
                task,
                job,
                deadline,
            } => {
                if self.open.len() <= task {
                    self.open.resize_with(task + 1, OpenJobs::default);
                }
                self.open[task].insert(job, self.jobs.len());
                self.jobs.push(JobRow {
                    task,
                    job,
                    release: t,
                    deadline,
                    finish: None,
                });
            }
            Event::JobFinish { t, task, job } => {
                match self.open.get_mut(task).and_then(|o| o.remove(job)) {
                    Some(i) => self.jobs[i].finish = Some(t),
                    None => self.unpaired += 1,
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(t: u64, task: usize, job: u64, deadline: u64) -> Event {
        Event::JobRelease {
            t: Nanos(t),
            task,
            job,
            deadline: Nanos(deadline),
        }
    }

    fn finish(t: u64, task: usize, job: u64) -> Event {
        Event::JobFinish {
            t: Nanos(t),
            task,
            job,
        }
    }

    #[test]
    fn a_miss_is_a_late_finish_or_an_open_job_past_its_deadline() {
        let (d, end) = (Nanos(100), Nanos(200));
        assert!(
            !misses_deadline(d, Some(Nanos(100)), end),
            "at the deadline meets it"
        );
        assert!(misses_deadline(d, Some(Nanos(101)), end));
        assert!(
            misses_deadline(d, Some(Nanos(101)), Nanos(0)),
            "end does not matter"
        );
        assert!(misses_deadline(d, None, end));
        assert!(
            !misses_deadline(Nanos(200), None, end),
            "due at the end: not yet"
        );
        assert!(!misses_deadline(Nanos(300), None, end));
    }

    #[test]
    fn pairs_releases_with_finishes_in_release_order() {
        // Two tasks, finishes out of release order.
        let t = JobTable::of(&[
            release(0, 0, 0, 10),
            release(0, 1, 0, 20),
            finish(8, 1, 0),
            finish(12, 0, 0),
            release(10, 0, 1, 20),
            finish(15, 0, 1),
        ]);
        let rows: Vec<_> = t
            .jobs()
            .iter()
            .map(|j| (j.task, j.job, j.finish.map(|f| f.0)))
            .collect();
        assert_eq!(
            rows,
            vec![(0, 0, Some(12)), (1, 0, Some(8)), (0, 1, Some(15))]
        );
        assert_eq!(t.last(), Nanos(15));
        assert_eq!(t.jobs()[0].response(), Some(Nanos(12)));
        let missed: Vec<_> = t.misses(Nanos(15)).map(|j| (j.task, j.job)).collect();
        assert_eq!(missed, vec![(0, 0)], "12 > 10; 8 <= 20; 15 <= 20");
        assert_eq!(t.per_task(3, Nanos(15)), vec![(2, 1), (1, 0), (0, 0)]);
        assert_eq!(t.unpaired_finishes(), 0);
    }

    #[test]
    fn jobs_open_at_the_end_miss_only_if_due_before_it() {
        let t = JobTable::of(&[
            release(0, 0, 0, 10),
            release(0, 0, 1, 30),
            release(5, 1, 0, 25),
        ]);
        assert!(t.jobs().iter().all(|j| j.finish.is_none()));
        assert_eq!(t.jobs()[0].response(), None);
        // The horizon: at 25, the job due at 25 is neither met nor missed yet.
        let at = |end| {
            t.misses(Nanos(end))
                .map(|j| (j.task, j.job))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(10), vec![]);
        assert_eq!(at(25), vec![(0, 0)]);
        assert_eq!(at(26), vec![(0, 0), (1, 0)]);
        assert_eq!(at(31), vec![(0, 0), (0, 1), (1, 0)]);
    }

    #[test]
    fn a_finish_without_its_release_is_ignored() {
        let t = JobTable::of(&[
            finish(3, 0, 0),
            release(5, 0, 1, 9),
            finish(6, 0, 7),
            finish(7, 4, 1),
            finish(8, 0, 1),
            finish(9, 0, 1),
        ]);
        assert_eq!(
            t.jobs(),
            &[JobRow {
                task: 0,
                job: 1,
                release: Nanos(5),
                deadline: Nanos(9),
                finish: Some(Nanos(8)),
            }]
        );
        assert_eq!(t.last(), Nanos(9), "every event moves the last time");
        assert_eq!(t.misses(Nanos(9)).count(), 0);
        assert_eq!(t.unpaired_finishes(), 4);
    }

    #[test]
    fn open_jobs_keep_job_order_whatever_the_order_of_release_and_finish() {
        let mut o = OpenJobs::default();
        for j in [0, 1, 3, 2] {
            o.insert(j, j * 10);
        }
        o.insert(1, 11);
        assert_eq!(o.values().copied().collect::<Vec<_>>(), vec![0, 11, 20, 30]);
        assert_eq!(o.remove(2), Some(20));
        assert_eq!(o.remove(0), Some(0));
        assert_eq!(o.remove(0), None);
        assert_eq!(o.len(), 2);
        assert_eq!((o.remove(1), o.remove(3)), (Some(11), Some(30)));
        assert!(o.is_empty());
    }
}
