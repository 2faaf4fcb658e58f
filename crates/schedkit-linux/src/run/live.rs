//! One run from its checks to the end of its loop: the frame it runs in, the guard (lease,
//! journal, job cgroups), the policy's machine-wide changes, the controllers, and the loop of
//! arrivals, discovery, samples and controller ticks.

use super::placement::Placement;
use super::sampler::{sample, SamplePeriod, Turn};
use super::{preflight, signal_flag, FairRun, GangRun, Live, RunOptions, RunPolicy, RunThread};
use crate::affinity::{self, CpuSet};
use crate::exclusive::{ExclusiveConfig, Isolation};
use crate::journal::Journal;
use crate::perf::{CounterKind, PerfSource};
use crate::privilege::Privileges;
use crate::topo::Topology;
use crate::workload;
use crate::{Error, Result, Roots};
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl<'s> Live<'s> {
    /// Everything before the first arrival. On an error, what was already changed is undone
    /// as the pieces built so far drop (the journal's Drop undoes it).
    pub(super) fn start(scenario: &'s Scenario, mut opts: RunOptions) -> Result<Live<'s>> {
        let topo = Topology::read(&opts.roots)?;
        preflight(scenario, &opts.policy, &topo)?;
        let roots = opts.roots.clone();
        let mut warnings = Vec::new();
        let ncpu = topo.online.iter().last().map_or(1, |c| c + 1);
        let mut frame = frame_of(scenario, &opts, &topo)?;

        // The lease, the stale check, the journal and the job cgroups (crate::guard).
        let crate::guard::Guard {
            mut journal,
            jobs,
            restored,
            lease,
        } = crate::guard::prepare(
            scenario,
            &opts.policy,
            &roots,
            &opts.state_dir,
            &opts.guard,
            &mut warnings,
        )?;
        for r in &restored {
            warnings.push(format!(
                "--restore-stale: undid the changes of a dead run ({})",
                r.display()
            ));
        }
        // Before the engine turns real-time and anything of the job exists: the conditioning
        // threads are fair-class occasions on CPUs nothing else of schedkit uses now.
        if opts.settle_newidle {
            crate::newidle::settle(&frame.allowed, crate::newidle::SETTLE_CALLS)?;
        }
        // The engine above the job's normal threads and below its real-time ones.
        let mut engine_class = match crate::guard::engine_priority(&opts.policy, scenario) {
            Some(p) => match crate::guard::EngineClass::raise(p) {
                Ok(c) => Some(c),
                Err(m) => {
                    warnings.push(m);
                    None
                }
            },
            None => None,
        };
        let (isolation, job_cpus) = machine_changes(
            &opts.policy,
            (&topo, &roots),
            frame.allowed.clone(),
            journal.as_mut(),
            &mut engine_class,
            &mut warnings,
        )?;
        let placement = Placement::new(&opts.policy, &job_cpus);
        let (gang, fair) = controllers(scenario, &mut opts, &roots, &mut journal, &mut warnings)?;

        // Order of arrival.
        let mut order: Vec<usize> = (0..scenario.processes().len()).collect();
        order.sort_by_key(|&i| (scenario.processes()[i].arrival(), i));
        frame.job = job_cpus.clone();
        let machine_at_start = crate::honest::CpuTimes::read(&roots, &frame.job);
        let own_cpu_at_start = crate::clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
        let other_tasks_at_start = opts.scan_other_tasks.then(|| {
            crate::other_tasks::TaskScan::read(&roots, &frame.job, std::process::id() as i32)
        });
        let origin = Instant::now();
        // Job threads above the engine cannot hold the run past its horizon (guard docs).
        // Exclusive mode too: its job threads run on their own CPUs, but the engine shares
        // the system CPUs with the machine's other work, and a foreign SCHED_FIFO thread
        // there once held an exclusive run's engine (SCHED_FIFO 10) past its horizon. The
        // watch is started after the engine moved to the system CPUs, so it runs there.
        let horizon_watch = opts
            .bounded
            .then(|| {
                crate::guard::HorizonWatch::start(
                    crate::gettid(),
                    origin + Duration::from_nanos(scenario.horizon().0),
                    vec![opts.stop.clone()],
                    signal_flag(),
                )
            })
            .flatten();
        let source = opts.counters.take().unwrap_or_else(|| Box::new(PerfSource));
        let period = SamplePeriod::new(opts.sample, opts.max_sample, opts.sample_budget);
        Ok(Live {
            scenario,
            roots,
            ncpu,
            warnings,
            frame,
            journal,
            jobs,
            lease,
            engine_class,
            isolation,
            job_cpus,
            placement,
            gang,
            fair,
            pending: order.into_iter().peekable(),
            horizon: scenario.horizon().0,
            machine_at_start,
            own_cpu_at_start,
            other_tasks_at_start,
            origin,
            stop_threads: Arc::new(AtomicBool::new(false)),
            horizon_watch,
            procs: (0..scenario.processes().len()).map(|_| None).collect(),
            tracks: Vec::new(),
            by_tid: Default::default(),
            events: Vec::new(),
            source,
            kinds: CounterKind::all(),
            next_pin: 0,
            t_prev: 0,
            last_sweep: 0,
            interrupted: false,
            period,
            sample_no: 0,
            buf: vec![0u8; 4096],
            thread_warnings: Default::default(),
            kept_rt: Default::default(),
            opts,
        })
    }

    /// The run loop: arrivals, new threads, a sample, controller ticks, then sleep until the
    /// next sample or controller period; until the horizon, every process's end or a stop.
    pub(super) fn run_loop(&mut self) -> Result<()> {
        loop {
            let now = self.origin.elapsed().as_nanos() as u64;
            if signal_flag().load(Ordering::Relaxed) || self.opts.stop.load(Ordering::Relaxed) {
                self.interrupted = true;
            }
            self.arrivals(now)?;
            self.discover_threads()?;
            // Re-sweep other threads now and then (new processes on the machine).
            if let Some((iso, _)) = self.isolation.as_mut() {
                if now - self.last_sweep >= 500_000_000 {
                    self.last_sweep = now;
                    iso.sweep(self.journal.as_mut().expect("journal"))?;
                }
            }
            let t_now = self.sample_step();
            self.tick_controllers(t_now)?;
            if let Some(cb) = self.opts.progress.as_mut() {
                cb((t_now as f64 / self.horizon as f64).min(1.0));
            }
            let all_done = self.pending.peek().is_none()
                && self
                    .procs
                    .iter()
                    .all(|p| p.as_ref().is_none_or(|p| p.end_ns.is_some()));
            if all_done || self.interrupted || t_now >= self.horizon {
                break;
            }
            let next = (t_now + self.period.period).min(self.horizon);
            // A gang slot may end before the next sample.
            let next = self
                .gang
                .as_ref()
                .map_or(next, |g| next.min(t_now + g.period().as_nanos() as u64));
            let next = self.fair.as_ref().map_or(next, |f| next.min(f.next_tick));
            let sleep = next.saturating_sub(self.origin.elapsed().as_nanos() as u64);
            std::thread::sleep(Duration::from_nanos(sleep.max(200_000)));
        }
        Ok(())
    }

    /// One sample of every thread (its own cost measured for the period's budget); the
    /// time of the sample.
    fn sample_step(&mut self) -> u64 {
        let t_now = self.origin.elapsed().as_nanos() as u64;
        // About every five seconds per thread.
        let refresh = Turn {
            sample_no: self.sample_no,
            refresh_every: (5_000_000_000 / self.period.period.max(1)).max(1),
            // The run's last sample reads every thread, so that the trace ends with all of
            // each one's CPU time, skipped or not.
            last: t_now >= self.horizon || self.interrupted,
        };
        self.sample_no += 1;
        let c0 = workload::thread_cpu_ns();
        sample(
            &self.roots,
            (&mut self.tracks, &mut self.procs),
            &mut self.events,
            (self.t_prev, t_now),
            refresh,
            &mut self.buf,
        );
        self.period
            .record(workload::thread_cpu_ns().saturating_sub(c0));
        self.t_prev = t_now;
        t_now
    }

    /// The controllers' turn after a sample: gang scheduling every tick, the fair-share
    /// policies' control requests at every sample and their controller every period.
    fn tick_controllers(&mut self, t_now: u64) -> Result<()> {
        // Gang scheduling: one controller tick; Stop/Resume go through the freezer.
        if let Some(g) = self.gang.as_mut() {
            let threads: Vec<RunThread> = self
                .tracks
                .iter()
                .map(|t| RunThread {
                    process: t.process,
                    index: t.index as usize,
                    pid: t.pid,
                    tid: t.tid,
                    builtin: t.shared.is_some(),
                    alive: !t.finished,
                })
                .collect();
            let job_dirs: Vec<Option<&std::path::Path>> = self
                .procs
                .iter()
                .map(|p| p.as_ref().and_then(|p| p.job_dir.as_deref()))
                .collect();
            g.tick(
                Nanos(t_now),
                self.scenario,
                &threads,
                &job_dirs,
                self.journal.as_mut().expect("journal"),
            )?;
        }
        // Fair-share policies: control requests at every sample, the controller every
        // period.
        if let Some(f) = self.fair.as_mut() {
            let j = self.journal.as_mut().expect("journal");
            f.serve_ctl(t_now, self.scenario, &mut self.events, &mut self.warnings);
            if t_now >= f.next_tick {
                f.tick(
                    t_now,
                    self.scenario,
                    self.ncpu,
                    (&self.tracks, &self.by_tid),
                    j,
                    &mut self.events,
                    &mut self.warnings,
                );
            }
        }
        Ok(())
    }
}

/// The CPUs the run may use and whether they are fewer than the scenario's `cores`
/// (refused unless the user allows a degraded run).
fn frame_of(
    scenario: &Scenario,
    opts: &RunOptions,
    topo: &Topology,
) -> Result<crate::honest::RunFrame> {
    let mut frame = crate::honest::RunFrame {
        allowed: crate::honest::allowed_cpus(&topo.online),
        online: topo.online.clone(),
        horizon: opts.bounded.then_some(scenario.horizon()),
        ..Default::default()
    };
    if let Some(w) = crate::honest::fewer_cpus(scenario.cores(), &frame.online, &frame.allowed) {
        if !opts.allow_degraded {
            return Err(Error::Degraded(format!(
                "{}: cores: {w}; give the run the CPUs (or lower `cores`), or pass \
                 --allow-degraded to run on fewer and say so in the report",
                scenario.file()
            )));
        }
        frame.degraded.push(w);
    }
    Ok(frame)
}

/// What the policy changes on the whole machine before the job starts (journaled): exclusive
/// mode's isolation, or the SCHED_RR time slice. The isolation and the job's CPUs (`allowed`
/// unless exclusive mode reserved some).
fn machine_changes(
    policy: &RunPolicy,
    (topo, roots): (&Topology, &Roots),
    allowed: CpuSet,
    journal: Option<&mut Journal>,
    engine_class: &mut Option<crate::guard::EngineClass>,
    warnings: &mut Vec<String>,
) -> Result<(Option<(Isolation, ExclusiveConfig)>, CpuSet)> {
    let privs = Privileges::current();
    match policy {
        RunPolicy::Exclusive(cfg) => {
            let mut cfg = cfg.clone();
            if !(privs.root || privs.sys_admin) {
                cfg.move_irqs = false;
                if cfg.rt_throttle == crate::exclusive::RtThrottle::Off {
                    return Err(Error::Privilege(format!(
                        "--rt-throttle off writes /proc/sys/kernel/sched_rt_runtime_us: {}",
                        Privileges::HOW_TO_ADMIN
                    )));
                }
                warnings.push(format!(
                    "IRQs stay where they are: moving them needs root ({})",
                    Privileges::HOW_TO_ADMIN
                ));
            }
            let mut iso = Isolation::plan(topo, roots, &cfg)?;
            // The sampler itself lives on the system cores, at SCHED_FIFO 10 for the run:
            // under load the system cores are crowded, and a SCHED_OTHER engine would start
            // the job late (it allocates the job's memory and creates its threads, which
            // inherit its class until they move to their own cores at their own priority).
            affinity::set_thread(0, &iso.system)?;
            *engine_class = crate::guard::EngineClass::raise(10).ok();
            iso.apply(journal.expect("journal"), &cfg)?;
            let job = iso.job.clone();
            Ok((Some((iso, cfg)), job))
        }
        RunPolicy::Rr { quantum_ms, .. } => {
            let j = journal.expect("journal");
            if let Err(e) = j.set_sysctl("kernel/sched_rr_timeslice_ms", &quantum_ms.to_string()) {
                warnings.push(format!("SCHED_RR time slice left at the kernel's: {e}"));
            }
            Ok((None, allowed))
        }
        _ => Ok((None, allowed)),
    }
}

/// The policy's controller loops: gang scheduling's (the freezer detected now, before any
/// job starts) and the fair-share policies' (cgroups, the controller, the control socket).
fn controllers(
    scenario: &Scenario,
    opts: &mut RunOptions,
    roots: &Roots,
    journal: &mut Option<Journal>,
    warnings: &mut Vec<String>,
) -> Result<(Option<GangRun>, Option<FairRun>)> {
    let mut gang = match &opts.policy {
        RunPolicy::Gang { quantum } => Some(GangRun::new(roots, *quantum)?),
        _ => None,
    };
    let mut fair = match &opts.policy {
        RunPolicy::ProcessFair | RunPolicy::Fair { .. } => Some(FairRun::new(
            scenario,
            &opts.policy,
            roots,
            journal.as_mut().expect("journal"),
            &opts.state_dir,
        )?),
        _ => None,
    };
    if let Some(f) = fair.as_mut() {
        warnings.append(&mut f.start_warnings);
        for n in f.notices.drain(..) {
            if let Some(cb) = opts.notice.as_mut() {
                cb(&n);
            }
        }
    }
    if let Some(g) = gang.as_mut() {
        warnings.append(&mut g.start_warnings);
    }
    Ok((gang, fair))
}
