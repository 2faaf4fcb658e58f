//! The end of a run: the job wound down (gangs thawed, threads demoted, commands and their
//! job cgroups ended), every change undone, and the kernel's truth gathered into the
//! [`RunOutcome`].

use super::sampler::{descendants, rank, Body, MAX_SAMPLE_NS};
use super::{add_readings, Live, ProcessOutcome, RunOutcome, ThreadOutcome};
use crate::perf::{CounterKind, Reading};
use crate::procfs::{self, ThreadStat};
use crate::sched::{self, Policy};
use crate::spawn;
use crate::Result;
use schedkit_core::trace::{Event, Reason};
use schedkit_core::Nanos;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Each process's threads' perf counters, summed.
type ProcCounters = BTreeMap<usize, Vec<(CounterKind, Reading)>>;

impl Live<'_> {
    /// Stops the job: exact final switch counts, gangs thawed, the machine's other work
    /// measured, built-in threads stopped, the job's threads demoted and its commands (and
    /// whatever they left in the job cgroups) ended, open run intervals closed. The run's end.
    pub(super) fn wind_down(&mut self) -> u64 {
        let roots = &self.roots;
        // Exact final switch counts (fast samples do not read status).
        for tr in self.tracks.iter_mut().filter(|t| !t.finished) {
            if let Ok(st) = ThreadStat::read(roots, tr.pid, tr.tid) {
                tr.prev_sw.0 = tr.prev_sw.0.max(st.voluntary_switches);
                tr.prev_sw.1 = tr.prev_sw.1.max(st.involuntary_switches);
            }
            tr.files = None;
        }
        // A frozen job cannot stop or take SIGTERM: thaw every gang first.
        if let Some(g) = self.gang.as_mut() {
            g.thaw_all();
            self.warnings.append(&mut g.refused);
        }
        // Wind down: stop built-in threads and commands still running.
        let end = (self.origin.elapsed().as_nanos() as u64).max(self.t_prev);
        self.horizon_watch = None;
        // The kernel's per-process CPU counts at the window's end, before the tear-down runs
        // anything more.
        if let Some(f) = self.fair.as_mut() {
            f.read_final_cpu();
        }
        // The machine's other work on the job's CPUs: their busy time, less the job's, less
        // schedkit's own (its process clock less the built-in workload threads it hosts),
        // read now, before the tear-down.
        let frame = &mut self.frame;
        frame.machine = self
            .machine_at_start
            .take()
            .and_then(|a| crate::honest::CpuTimes::read(roots, &frame.job).map(|b| a.since(&b)));
        frame.other_tasks = self.other_tasks_at_start.take().map(|a| {
            a.since(&crate::other_tasks::TaskScan::read(
                roots,
                &frame.job,
                std::process::id() as i32,
            ))
        });
        let builtin_cpu: u64 = self
            .tracks
            .iter()
            .filter(|t| t.shared.is_some())
            .map(|t| t.prev_run)
            .sum();
        frame.schedkit_cpu_ns = crate::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
            .saturating_sub(self.own_cpu_at_start)
            .saturating_sub(builtin_cpu);
        self.stop_threads.store(true, Ordering::Relaxed);
        self.end_job();
        for tr in &mut self.tracks {
            if !tr.finished {
                if let Some(core) = tr.open_core.take() {
                    self.events.push(Event::Deschedule {
                        t: Nanos(end),
                        core,
                        slot: tr.slot,
                        reason: Reason::Horizon,
                    });
                }
            }
        }
        end
    }

    /// Demotes the job's remaining threads and ends its commands and their job cgroups
    /// (a job kept running with --keep-running keeps its class and goes on).
    fn end_job(&mut self) {
        let roots = &self.roots;
        // Demote the job's remaining threads first: a FIFO thread spinning on a CPU would
        // keep its own process (or a waiting parent on that CPU) from running to handle the
        // signal. (A job kept running with --keep-running keeps its class: it was asked to go
        // on.)
        let keep = self.opts.guard.keep_running;
        for tr in self
            .tracks
            .iter()
            .filter(|t| !(t.finished || keep && t.shared.is_none()))
        {
            let _ = sched::set_thread(tr.tid, Policy::Other { nice: 0 });
        }
        for pr in self.procs.iter_mut().flatten() {
            if let (true, Body::Command { exit, .. }) = (keep && pr.end_ns.is_none(), &mut pr.body)
            {
                *exit = Some("left running (--keep-running)".into());
                continue;
            }
            if pr.end_ns.is_none() {
                if let Body::Command { pid, exit } = &mut pr.body {
                    // Threads started since the last sample are not tracked yet: demote them
                    // too.
                    for p in descendants(roots, *pid) {
                        for tid in procfs::tids(roots, p) {
                            let _ = sched::set_thread(tid, Policy::Other { nice: 0 });
                        }
                    }
                    *exit = Some(spawn::terminate(*pid, Duration::from_millis(200)));
                }
            }
        }
        // What outlived the commands' main processes (daemons, double forks) ends now too.
        if let Some(j) = self.jobs.as_ref() {
            let left = j.terminate(Duration::from_millis(200));
            if left > 0 {
                self.warnings.push(format!(
                    "ended {left} process(es) of the job that ignored SIGTERM or outlived its \
                     command (children that left its process group)"
                ));
            }
        }
    }

    /// Kernel truth per thread, and each process's threads' counters summed.
    fn thread_outcomes(&mut self) -> (Vec<ThreadOutcome>, ProcCounters) {
        let mut thread_out = Vec::new();
        let mut proc_counters = ProcCounters::new();
        for tr in &mut self.tracks {
            let stall = tr
                .shared
                .as_ref()
                .map(|s| s.longest_stall.load(Ordering::Relaxed))
                .unwrap_or(tr.longest_stall);
            let sp = &self.scenario.processes()[tr.process];
            thread_out.push(ThreadOutcome {
                name: format!("{}.{}", sp.name(), tr.index),
                process: sp.name().to_string(),
                process_index: tr.process,
                thread_index: tr.index,
                tid: tr.tid,
                last_cpu: tr.last.cpu,
                cpu_ns: tr.prev_run,
                runqueue_wait_ns: tr.last.wait_ns,
                voluntary_switches: tr.prev_sw.0,
                involuntary_switches: tr.prev_sw.1,
                migrations_seen: tr.migrations,
                longest_stall_ns: stall,
            });
            if let Some(c) = tr.counters.as_mut() {
                let acc = proc_counters.entry(tr.process).or_default();
                add_readings(acc, c.read());
            }
        }
        (thread_out, proc_counters)
    }

    /// Kernel truth per process (a process that never started says so).
    fn process_outcomes(
        &mut self,
        thread_out: &[ThreadOutcome],
        mut proc_counters: ProcCounters,
        end: u64,
    ) -> Vec<ProcessOutcome> {
        let mut processes = Vec::new();
        for (p, pr) in self.procs.iter_mut().enumerate() {
            let sp = &self.scenario.processes()[p];
            let mine: Vec<&ThreadOutcome> = thread_out
                .iter()
                .filter(|t| t.process == sp.name())
                .collect();
            let Some(pr) = pr.as_mut() else {
                processes.push(ProcessOutcome {
                    name: sp.name().to_string(),
                    pid: None,
                    exit: Some("never started".into()),
                    start_ns: 0,
                    end_ns: 0,
                    threads: 0,
                    counters: Vec::new(),
                    longest_stall_ns: 0,
                    involuntary_switches: 0,
                    voluntary_switches: 0,
                    work_done: None,
                });
                continue;
            };
            let mut counters = proc_counters.remove(&p).unwrap_or_default();
            if let Some(c) = pr.counters.as_mut() {
                add_readings(&mut counters, c.read());
            }
            let (pid, exit, work_done) = match &pr.body {
                Body::Builtin(r) => (None, None, Some(r.iterations())),
                Body::Command { pid, exit } => (Some(*pid), exit.clone(), None),
            };
            processes.push(ProcessOutcome {
                name: sp.name().to_string(),
                pid,
                exit,
                start_ns: pr.start_ns,
                end_ns: pr.end_ns.unwrap_or(end),
                threads: mine.len(),
                counters,
                longest_stall_ns: mine.iter().map(|t| t.longest_stall_ns).max().unwrap_or(0),
                involuntary_switches: mine.iter().map(|t| t.involuntary_switches).sum(),
                voluntary_switches: mine.iter().map(|t| t.voluntary_switches).sum(),
                work_done,
            });
        }
        processes
    }

    /// The outcome: kernel truth gathered, built-in threads joined, every change undone (also
    /// when the run failed: `result` is returned only after that), the lease released.
    pub(super) fn finish(mut self, result: Result<()>, end: u64) -> Result<RunOutcome> {
        let (thread_out, proc_counters) = self.thread_outcomes();
        let processes = self.process_outcomes(&thread_out, proc_counters, end);
        let Live {
            scenario,
            mut warnings,
            frame,
            mut journal,
            jobs,
            lease,
            engine_class,
            mut isolation,
            gang,
            fair,
            interrupted,
            period,
            procs,
            tracks,
            mut events,
            thread_warnings,
            ..
        } = self;
        for pr in procs.into_iter().flatten() {
            if let Body::Builtin(r) = pr.body {
                r.join();
            }
        }
        warnings.append(&mut thread_warnings.lock().unwrap_or_else(|p| p.into_inner()));
        let mut sampler = period.report;
        sampler.wall_ns = end;
        if sampler.max_period_ns > MAX_SAMPLE_NS {
            warnings.push(format!(
                "the sampler lengthened its period up to {} to stay within its budget of {:.1} % of \
                 one core ({} threads): lag and the commands' longest stall have that resolution, \
                 coarser than 10 ms (`--sample-budget off` samples every `--sample` whatever it costs)",
                Nanos(sampler.max_period_ns),
                sampler.budget.unwrap_or(0.0) * 100.0,
                tracks.len()
            ));
        }
        let fair = fair.map(|f| {
            let mut r = f.finish(end);
            r.sampler = Some(sampler.clone());
            r
        });
        // Undo (also on error: the journal's Drop would, but we want the report).
        // A last sweep: threads born since the previous one inherited the system CPUs and are
        // journaled now, so undo gives them the machine back too.
        if let (Some((iso, _)), Some(j)) = (isolation.as_mut(), journal.as_mut()) {
            let _ = iso.final_sweep(j);
        }
        let undone = journal.as_mut().map(|j| j.undo()).unwrap_or_default();
        if let Some((iso, _)) = isolation.as_mut() {
            iso.repair_after_undo();
        }
        drop(journal);
        drop(lease);
        // Gang cgroups go once the journal no longer needs their freeze files.
        let gang = gang.map(|g| g.finish());
        // (As when these were the engine's locals: its class goes back, then the job
        // cgroups go.)
        drop(engine_class);
        drop(jobs);
        result?;

        // The report's scenario counts the threads the job really had (a command starts
        // its own), rebuilt through the builder so it stays valid.
        let mut p = 0;
        let sc = scenario
            .to_builder()
            .map_processes(|sp| {
                let n = tracks.iter().filter(|t| t.process == p).count() as u32;
                p += 1;
                let threads = sp.threads().max(n);
                Ok(sp.with_threads(threads))
            })
            .and_then(|b| b.build())
            .map_err(|e| crate::Error::Input(e.to_string()))?;
        events.sort_by_key(|e| (e.time(), rank(e)));
        Ok(RunOutcome {
            scenario: sc,
            events,
            end: Nanos(end),
            cores: frame.job.len().max(1),
            threads: thread_out,
            processes,
            exclusive: isolation.map(|(i, _)| i.report),
            warnings,
            interrupted,
            undone,
            gang,
            fair,
            sampler,
            frame,
        })
    }
}
