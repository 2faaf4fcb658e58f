//! Gang scheduling in `schedkit run` (seed 002): the gang matrix controller's actions on real
//! threads, `Migrate` with `sched_setaffinity` and `Stop`/`Resume` with the
//! [`Freezer`](crate::freezer::Freezer).

use super::host::{Apply, Host};
use crate::affinity::{self, CpuSet};
use crate::freezer::{Freezer, Member};
use crate::journal::Journal;
use crate::{Result, Roots};
use schedkit_core::control::{Action, ActionKind, ThreadView};
use schedkit_core::controllers::gang::Gang;
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use serde::Serialize;
use std::time::Instant;

/// One job thread as the run engine knows it.
#[derive(Clone, Copy, Debug)]
pub struct RunThread {
    pub process: usize,
    /// Its number within the process (see `ThreadView::index`).
    pub index: usize,
    pub pid: i32,
    pub tid: i32,
    /// A built-in workload thread (inside schedkit) rather than a command's.
    pub builtin: bool,
    pub alive: bool,
}

/// What gang scheduling did in one real run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GangRunReport {
    pub backend_processes: String,
    pub backend_threads: Option<String>,
    /// Slot switches applied (each: stop the old slot + resume the new one).
    pub switches: u64,
    /// Microseconds per switch (stop all + resume all): median, 90th percentile, max.
    pub switch_us_median: f64,
    pub switch_us_p90: f64,
    pub switch_us_max: f64,
}

/// Applies the gang controller's actions to real threads: `Migrate` with
/// `sched_setaffinity`, `Stop`/`Resume` with the [`Freezer`].
pub struct GangRun {
    /// The gang matrix controller, hosted by the one host ([`Host`]).
    host: Host,
    freezer: Freezer,
    /// Matrix column -> CPU: the CPUs schedkit may use (so `taskset -c 0,1 schedkit run`
    /// gangs on two CPUs of a larger machine).
    cpus: Vec<usize>,
    /// Warnings from setting up (the engine passes them on; nothing here prints).
    pub start_warnings: Vec<String>,
    /// Actions the controller pushed that this engine does not apply (a broken `emits`).
    pub refused: Vec<String>,
    switch_ns: Vec<u64>,
    /// The engine thread's class before the run (it runs SCHED_FIFO while it gangs).
    old_class: Option<crate::sched::Policy>,
}

impl GangRun {
    pub fn new(roots: &Roots, quantum: Nanos) -> Result<GangRun> {
        let cpus: Vec<usize> = affinity::get_thread(0)
            .map(|s| s.iter().collect())
            .unwrap_or_default();
        let cpus = if cpus.is_empty() { vec![0] } else { cpus };
        // The engine thread switches the slots: like SCore-D's daemon it must not queue
        // behind the job threads it stops, or every switch waits for a CFS slice. SCHED_FIFO
        // 10 where allowed (the job threads are set back to SCHED_OTHER by their setup).
        let old_class = crate::sched::get_thread(0).ok();
        let mut start_warnings = Vec::new();
        if crate::sched::set_thread(0, crate::sched::Policy::Fifo { priority: 10 }).is_err() {
            start_warnings.push("gang: the engine thread stays SCHED_OTHER (no CAP_SYS_NICE); slot switches may be late under load".to_string());
        }
        let host = Host::new(
            Box::new(Gang::new(quantum, cpus.len())),
            GANG_APPLIES,
            "the gang engine",
        )
        .map_err(|missing| {
            crate::Error::Input(format!(
                "gang: the controller may ask for {missing:?}, which the gang engine cannot apply"
            ))
        })?;
        Ok(GangRun {
            host,
            freezer: Freezer::detect(roots),
            cpus,
            start_warnings,
            refused: Vec::new(),
            switch_ns: Vec::new(),
            old_class,
        })
    }

    /// How long until the controller wants to act again.
    pub fn period(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.host.period().0)
    }

    /// One controller tick at `now` over the live job threads.
    pub fn tick(
        &mut self,
        now: Nanos,
        scenario: &Scenario,
        threads: &[RunThread],
        job_dirs: &[Option<&std::path::Path>],
        journal: &mut Journal,
    ) -> Result<()> {
        let live: Vec<&RunThread> = threads.iter().filter(|t| t.alive).collect();
        for t in &live {
            if !t.builtin {
                if let Some(Some(dir)) = job_dirs.get(t.process) {
                    self.freezer.use_job_cgroup(t.process, dir);
                }
            }
            let m = if t.builtin {
                Member::Thread(t.tid)
            } else {
                Member::Process(t.pid)
            };
            match self.freezer.add(journal, t.process, m) {
                Ok(()) => {}
                // The thread or process ended since the sample.
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
        }
        let views = live.iter().map(|t| ThreadView {
            id: t.tid as u64,
            process: t.process,
            index: t.index,
            group: None,
            core: None,
            weight: 1024,
            base_weight: 1024,
            runnable: true,
            cpu: Nanos::ZERO,
        });
        self.host.set_threads(views);
        let mut t0: Option<Instant> = None;
        let mut apply = GangApply {
            freezer: &mut self.freezer,
            cpus: &self.cpus,
            live: &live,
            journal,
            refused: &mut self.refused,
            t0: &mut t0,
        };
        let r = self
            .host
            .tick(now, self.cpus.len(), &[], scenario, &mut apply);
        self.refused.append(&mut self.host.refused);
        r?;
        if let Some(t0) = t0 {
            self.switch_ns.push(t0.elapsed().as_nanos() as u64);
        }
        Ok(())
    }

    /// Thaws everything (wind-down).
    pub fn thaw_all(&mut self) {
        self.freezer.thaw_all();
    }

    /// Removes the cgroups and summarises the switches.
    pub fn finish(mut self) -> GangRunReport {
        if let Some(c) = self.old_class {
            let _ = crate::sched::set_thread(0, c);
        }
        self.freezer.thaw_all();
        self.freezer.cleanup();
        let v = std::mem::take(&mut self.switch_ns);
        // The nearest-rank percentile every report uses (0 when nothing switched).
        let q = |f: f64| -> f64 {
            schedkit_core::stats::percentile(&v, f * 100.0).map_or(0.0, |ns| ns as f64 / 1e3)
        };
        GangRunReport {
            backend_processes: self.freezer.process_backend().name().into(),
            backend_threads: self.freezer.thread_backend().map(|b| b.name().into()),
            switches: v.len() as u64,
            switch_us_median: q(0.5),
            switch_us_p90: q(0.9),
            switch_us_max: q(1.0),
        }
    }
}

/// The actions the gang engine applies: pinning (affinity) and the freezer.
const GANG_APPLIES: &[ActionKind] = &[ActionKind::Migrate, ActionKind::Stop, ActionKind::Resume];

/// The gang engine's side of the host ([`Host`]): pins through the journal, stops and
/// resumes through the freezer, and times the switch.
struct GangApply<'a> {
    freezer: &'a mut Freezer,
    cpus: &'a [usize],
    live: &'a [&'a RunThread],
    journal: &'a mut Journal,
    refused: &'a mut Vec<String>,
    /// When the tick's first stop or resume began.
    t0: &'a mut Option<Instant>,
}

impl Apply for GangApply<'_> {
    fn apply(&mut self, action: &Action) -> Result<()> {
        match *action {
            Action::Migrate { thread, core } => {
                let cpu = self.cpus[core % self.cpus.len()];
                // Journaled like every other change, so `restore` after a kill puts the
                // thread's own affinity back.
                let Some(t) = self.live.iter().find(|t| t.tid as u64 == thread) else {
                    return Ok(());
                };
                match self
                    .journal
                    .set_affinity(t.pid, t.tid, &CpuSet::single(cpu))
                {
                    Ok(()) => {}
                    // The thread ended since the sample.
                    Err(e) if e.errno() == Some(libc::ESRCH) => {}
                    Err(crate::Error::Input(_)) => {}
                    Err(e) => self.refused.push(format!(
                        "gang: thread {} not pinned to CPU {cpu}: {e}",
                        t.tid
                    )),
                }
            }
            Action::Stop { process } => {
                self.t0.get_or_insert_with(Instant::now);
                self.freezer.freeze(self.journal, process)?;
            }
            Action::Resume { process } => {
                self.t0.get_or_insert_with(Instant::now);
                self.freezer.thaw(process)?;
            }
            // Never handed over: not in GANG_APPLIES, so the host refuses them aloud.
            Action::SetWeight { .. }
            | Action::SetGroupWeight { .. }
            | Action::SetEntityWeight { .. } => {}
        }
        Ok(())
    }
}
