//! Where the dedicated engine's scheduling facts go: one call per fact of a job, which
//! [`Events`] turns into the general engine's trace events (for any [`TraceSink`]: the
//! trace, the Gantt chart, a tee) and the report's fold takes directly
//! ([`Metrics::task_job_released`] and its siblings: the same report, without the six or
//! seven `record` calls a job costs through the events).

use schedkit_core::report::Metrics;
use schedkit_core::trace::{Event, Owner, Reason, Slot, TraceSink};
use schedkit_core::Nanos;

/// The facts of a periodic job's life, in the engine's order.
pub(crate) trait JobSink {
    /// Job `job` of `task` released at `t`, its thread in `slot`.
    fn released(&mut self, t: u64, task: usize, job: u64, deadline: u64, slot: Slot);
    /// The thread in `slot` (creation order `seq`, of `task`) dispatched on `core`; `from`:
    /// the other core it last ran on.
    fn dispatched(
        &mut self,
        t: u64,
        core: usize,
        slot: Slot,
        seq: u64,
        task: usize,
        from: Option<usize>,
    );
    /// The thread in `slot` (of `task`, dispatched at `since`) leaves `core`, unfinished.
    fn descheduled(
        &mut self,
        t: u64,
        core: usize,
        slot: Slot,
        task: usize,
        since: u64,
        reason: Reason,
    );
    /// The thread in `slot` of `job`, dispatched at `since`, finished its work on `core`.
    fn finished(&mut self, t: u64, core: usize, slot: Slot, job: Job, since: u64);
    /// The run ended with this job unfinished.
    fn open_at_end(&mut self, job: Job);
}

/// A job as the sinks need it.
#[derive(Clone, Copy)]
pub(crate) struct Job {
    pub task: usize,
    pub job: u64,
    pub release: u64,
    pub deadline: u64,
}

/// The facts as trace events, exactly those the general engine writes.
pub(crate) struct Events<'a, S: TraceSink + ?Sized>(pub &'a mut S);

impl<S: TraceSink + ?Sized> JobSink for Events<'_, S> {
    fn released(&mut self, t: u64, task: usize, job: u64, deadline: u64, slot: Slot) {
        let t = Nanos(t);
        self.0.record(&Event::JobRelease {
            t,
            task,
            job,
            deadline: Nanos(deadline),
        });
        self.0.record(&Event::Arrive {
            t,
            slot,
            owner: Owner::Task { task, job },
        });
    }

    fn dispatched(
        &mut self,
        t: u64,
        core: usize,
        slot: Slot,
        _: u64,
        _: usize,
        from: Option<usize>,
    ) {
        let t = Nanos(t);
        if let Some(from) = from {
            self.0.record(&Event::Migrate {
                t,
                slot,
                from,
                to: core,
            });
        }
        self.0.record(&Event::Dispatch { t, core, slot });
    }

    fn descheduled(&mut self, t: u64, core: usize, slot: Slot, _: usize, _: u64, reason: Reason) {
        self.0.record(&Event::Deschedule {
            t: Nanos(t),
            core,
            slot,
            reason,
        });
    }

    fn finished(&mut self, t: u64, core: usize, slot: Slot, job: Job, _: u64) {
        let t = Nanos(t);
        self.0.record(&Event::Deschedule {
            t,
            core,
            slot,
            reason: Reason::Finished,
        });
        self.0.record(&Event::Finish { t, slot });
        self.0.record(&Event::JobFinish {
            t,
            task: job.task,
            job: job.job,
        });
    }

    // The sink saw the release and no finish: an open job is already open there.
    fn open_at_end(&mut self, _: Job) {}
}

impl JobSink for Metrics {
    #[inline]
    fn released(&mut self, t: u64, task: usize, _: u64, _: u64, _: Slot) {
        self.task_job_released(Nanos(t), task);
    }

    #[inline]
    fn dispatched(
        &mut self,
        t: u64,
        core: usize,
        slot: Slot,
        seq: u64,
        task: usize,
        from: Option<usize>,
    ) {
        self.task_dispatched(Nanos(t), core, task, (slot, seq), from.is_some());
    }

    #[inline]
    fn descheduled(&mut self, t: u64, _: usize, _: Slot, task: usize, since: u64, reason: Reason) {
        self.task_descheduled(Nanos(t), task, Nanos(since), reason);
    }

    #[inline]
    fn finished(&mut self, t: u64, _: usize, _: Slot, job: Job, since: u64) {
        self.task_job_finished(
            Nanos(t),
            job.task,
            Nanos(since),
            Nanos(job.release),
            Nanos(job.deadline),
        );
    }

    fn open_at_end(&mut self, job: Job) {
        self.task_job_open(job.task, job.job, Nanos(job.release), Nanos(job.deadline));
    }
}
