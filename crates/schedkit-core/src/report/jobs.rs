//! The fold fed per job fact instead of per event, for an engine that runs plain periodic
//! tasks (schedkit-sim's dedicated global-EDF engine, docs/results/speed.md).
//!
//! A job of such a task is six or seven events (release, arrive, dispatch, deschedule,
//! finish, job-finish, perhaps a migration); folded one by one through
//! [`TraceSink::record`](crate::trace::TraceSink::record) they were a third of a 20-task
//! global-EDF run. The engine knows the job's task, release, deadline and dispatch time, so
//! these calls take them as arguments: no slot table, no open-job queue, no match on an event
//! kind. Each call changes exactly the figures the events it stands for change in
//! `record`, with the same arithmetic in the same order, so the report is the same to the
//! bit. The calls are for task threads only and must not be mixed with `record` in one run
//! (the two keep the running intervals in different places).

use super::*;

impl Metrics {
    /// `JobRelease` and `Arrive` of a job of `task` at `t` (its one thread runnable). The
    /// job's release and deadline come back with its finish ([`Metrics::task_job_finished`])
    /// or, if it never finishes, at the end ([`Metrics::task_job_open`]).
    #[inline]
    pub fn task_job_released(&mut self, t: Nanos, task: usize) {
        self.at(t);
        let ts = &mut self.tasks[task];
        ts.jobs += 1;
        ts.first_release.get_or_insert(t);
    }

    /// `Dispatch` of a thread of `task` on `core` at `t`, with the `Migrate` before it when
    /// `migrated`. `thread` names the thread uniquely over the run (the context-switch
    /// count compares a core's consecutive threads).
    #[inline]
    pub fn task_dispatched(
        &mut self,
        t: Nanos,
        core: usize,
        task: usize,
        thread: (Slot, u64),
        migrated: bool,
    ) {
        self.at(t);
        if migrated {
            self.migrations += 1;
            self.tasks[task].migrations += 1;
        }
        self.dispatches += 1;
        if core >= self.core_last.len() {
            self.core_last.resize(core + 1, None);
        }
        if let Some(prev) = self.core_last[core] {
            if prev != thread {
                self.switches += 1;
            }
        }
        self.core_last[core] = Some(thread);
        let e = self.process_names.len() + task;
        self.touch_task(e, task, t.0);
        self.entities[e].running += 1;
        self.entities[e].since_sum += t.0;
    }

    /// `Deschedule` at `t` of a thread of `task` dispatched at `since`, for `reason`.
    #[inline]
    pub fn task_descheduled(&mut self, t: Nanos, task: usize, since: Nanos, reason: Reason) {
        self.at(t);
        self.close_task_interval(task, since, t);
        if matches!(reason, Reason::Preempted | Reason::Expired) {
            self.preemptions += 1;
        }
        if !matches!(reason, Reason::Finished | Reason::Horizon) {
            self.tasks[task].switches += 1;
        }
    }

    /// `Deschedule` (finished), `Finish` and `JobFinish` at `t` of the one thread of a job
    /// of `task` released at `release` with absolute deadline `deadline`, dispatched last
    /// at `since`.
    #[inline]
    pub fn task_job_finished(
        &mut self,
        t: Nanos,
        task: usize,
        since: Nanos,
        release: Nanos,
        deadline: Nanos,
    ) {
        self.at(t);
        self.close_task_interval(task, since, t);
        let ts = &mut self.tasks[task];
        ts.max_response = ts.max_response.max((t - release).0);
        // `misses_deadline` for a finished job.
        if t > deadline {
            ts.misses += 1;
        }
    }

    /// A job of `task` still unfinished when the run ended (released at `release`, due at
    /// `deadline`): the report counts it a miss if its deadline passed. Called once per open
    /// job at the end, in any order, before [`Metrics::finish`].
    pub fn task_job_open(&mut self, task: usize, job: u64, release: Nanos, deadline: Nanos) {
        self.tasks[task].open.insert(job, (release, deadline));
    }

    /// What `record` does first with every event. `advance` does nothing without groups
    /// and without a pending GPS change, which task threads never make: a scenario of
    /// tasks alone skips the call.
    #[inline]
    fn at(&mut self, t: Nanos) {
        debug_assert!(t >= self.last_t, "trace time went backwards: {t:?}");
        self.last_t = t;
        if !self.group_weights.is_empty() || self.gps_dirty.is_some() {
            self.advance(t.0);
        }
    }

    /// `close_interval` for a task's thread whose interval began at `since`: `charge_entity`
    /// with the task's own lag.
    #[inline]
    fn close_task_interval(&mut self, task: usize, since: Nanos, t: Nanos) {
        let e = self.process_names.len() + task;
        let ran = (t - since).0;
        self.touch_task(e, task, t.0);
        let ent = &mut self.entities[e];
        ent.cpu += ran;
        ent.running -= 1;
        ent.since_sum -= since.0;
        self.busy_ns += ran;
    }

    /// `touch` for entity `e`, the entity of `task`: `lag_at`'s task branch, the same
    /// operations in the same order. The task calls above are inlined into the engine's
    /// crate, and `touch` (not inlined across crates) would be a call.
    #[inline]
    fn touch_task(&mut self, e: usize, task: usize, t: u64) {
        let ent = &mut self.entities[e];
        let (cpu, ran, since) = (ent.cpu, ent.running * t, ent.since_sum);
        // `lag_at`'s `ideal - actual_at`. Below 2^63 (times in nanoseconds, always in
        // practice) each number goes through the signed conversion, which gives the same
        // `f64` and is one instruction on x86-64 where the unsigned one is several; one test
        // covers all four.
        let lag = if (t | cpu | ran | since) >> 63 == 0 {
            let ideal = self.task_utilisation[task] * t as i64 as f64;
            ideal - (cpu as i64 as f64 + ran as i64 as f64 - since as i64 as f64)
        } else {
            let ideal = self.task_utilisation[task] * t as f64;
            ideal - (cpu as f64 + ran as f64 - since as f64)
        }
        .abs();
        ent.max_abs_lag = ent.max_abs_lag.max(lag);
    }
}
