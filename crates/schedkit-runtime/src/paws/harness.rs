//! Runs a set of `[[task]]`s (SPEC section 1) on a real [`RtPool`] for a while and returns what
//! happened: the entry point of `schedkit experiment paws` and of `[[task]]` scenarios under
//! `schedkit run`.
//!
//! Each task's job executes its regions in order: `Region::Seq(c)` is `c` of CPU time of
//! NOP-loop work on the job's fiber, `Region::Par(v)` is a parallel region of `v.len()` threads,
//! thread i doing `v[i]` of NOP-loop work; the work checks for preemption every 10 us. All tasks
//! are released synchronously at the start (plus their `offset`); releases stop after
//! `duration`, and every job already released runs to its end before the report is made.
//! A task's `cpus` is not used: PAWS, G-EDF and WS are global schedulers.

use std::sync::Arc;
use std::time::Duration;

use schedkit_core::scenario::{Region, Task};
use schedkit_linux::stall::{self, Stall, StallWitness};

use super::stats::percentile;
use super::{Mode, RtConfig, RtPool, RtReport};

/// Knobs of a harness run.
#[derive(Clone, Debug)]
pub struct HarnessOpts {
    /// Workers (default: the CPUs this process may use).
    pub workers: Option<usize>,
    /// SCHED_FIFO priority of the workers; `None`: SCHED_OTHER (tests, shared machines).
    pub fifo_priority: Option<u32>,
    pub pin: bool,
    /// Kernel context switches and migrations of the workers (perf software counters).
    pub perf: bool,
    /// Victim-choice seed (rule E).
    pub seed: u64,
    /// Delay between pool start and the first release, so every worker is up.
    pub start_delay: Duration,
    /// See [`RtConfig::release_spin`].
    pub release_spin: Duration,
    /// See [`RtConfig::stage_cpu_clock`] (default false).
    pub stage_cpu_clock: bool,
    /// Run a [`StallWitness`] beside the pool (default false): machine stalls (a virtual
    /// machine held by its host) are reported, and misses are split into those a stall
    /// explains and the others. One witness per CPU (`StallWitness::start_per_cpu`) wakes
    /// every millisecond above the workers and preempts them: off where kernel context
    /// switches are measured.
    pub stall_witness: bool,
}

impl Default for HarnessOpts {
    fn default() -> Self {
        HarnessOpts {
            workers: None,
            fifo_priority: Some(50),
            pin: true,
            perf: true,
            seed: 1,
            start_delay: Duration::from_millis(5),
            release_spin: super::RELEASE_SPIN,
            stage_cpu_clock: false,
            stall_witness: false,
        }
    }
}

/// Totals of one run (per-job and per-task details in `report`).
#[derive(Clone, Debug)]
pub struct HarnessReport {
    pub mode: Mode,
    pub workers: usize,
    pub duration: Duration,
    pub jobs: u64,
    pub misses: u64,
    /// Tasks with at least one missed deadline.
    pub tasks_missing: u64,
    pub steals: u64,
    /// User-level migrations (threads run away from their spawning core, resumptions on
    /// another core).
    pub migrations: u64,
    pub preemptions: u64,
    /// User-level context switches (fiber switch-ins).
    pub switches: u64,
    /// Kernel context switches / CPU migrations of the worker threads (`None`: perf refused).
    pub kernel_context_switches: Option<u64>,
    pub kernel_migrations: Option<u64>,
    /// Response time percentiles over all jobs, ns.
    pub response_p50: u64,
    pub response_p99: u64,
    pub response_max: u64,
    /// Preemption latency percentiles (release to first instruction of a preempting job), ns.
    pub preemption_latency_p50: Option<u64>,
    pub preemption_latency_p99: Option<u64>,
    /// Machine stalls seen by the witness (`HarnessOpts::stall_witness`), on the pool's clock.
    pub stalls: Vec<Stall>,
    pub report: RtReport,
}

impl HarnessReport {
    /// Missed jobs that the machine's stalls do not explain (see [`stall::explains_miss`]):
    /// the misses the scheduler must answer for. Without the witness, every miss.
    pub fn unexplained_misses(&self) -> Vec<&super::JobRecord> {
        self.report
            .jobs
            .iter()
            .filter(|j| j.missed())
            .filter(|j| !stall::explains_miss(&self.stalls, j.release, j.deadline, j.finish))
            .collect()
    }
}

/// Runs `tasks` under `mode` for `duration` (releases), then waits for the released jobs.
pub fn run_taskset(
    tasks: &[Task],
    mode: Mode,
    duration: Duration,
    opts: &HarnessOpts,
) -> std::io::Result<HarnessReport> {
    let mut cfg = RtConfig::new(mode);
    if let Some(w) = opts.workers {
        cfg.workers = w;
    }
    cfg.fifo_priority = opts.fifo_priority;
    cfg.pin = opts.pin;
    cfg.perf = opts.perf;
    cfg.seed = opts.seed;
    cfg.release_spin = opts.release_spin;
    cfg.stage_cpu_clock = opts.stage_cpu_clock;
    let mut pool = RtPool::new(cfg)?;
    // One witness per CPU the pool may use, above the workers: a host that holds one vCPU
    // alone stalls the worker pinned there, and only a witness pinned there sees it.
    let witnesses = if opts.stall_witness {
        let cpus: Vec<usize> = schedkit_linux::affinity::get_thread(0)
            .map(|c| c.iter().collect())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        StallWitness::start_per_cpu(&cpus)?
    } else {
        Vec::new()
    };
    let start = pool.now() + opts.start_delay;
    for t in tasks {
        let regions: Arc<Vec<Region>> = Arc::new(t.regions().to_vec());
        pool.periodic_at(
            t.name(),
            start + Duration::from_nanos(t.offset().0),
            Duration::from_nanos(t.period().0),
            Duration::from_nanos(t.deadline().0),
            move |job| {
                for r in regions.iter() {
                    match r {
                        Region::Seq(c) => super::spin(c.0),
                        Region::Par(v) => job.parallel(v.len(), |i| super::spin(v[i].0)),
                    }
                }
            },
        );
    }
    let workers = pool.workers();
    let until = start + duration;
    pool.release_until(until);
    loop {
        let now = pool.now();
        if now >= until {
            break;
        }
        std::thread::sleep(until - now);
    }
    // The pool's clock in CLOCK_MONOTONIC ns, where the witness's stalls are.
    let origin = schedkit_linux::clock_ns(libc::CLOCK_MONOTONIC) - pool.now().as_nanos() as u64;
    let mut report = pool.stop();
    let (stalls, warnings) = StallWitness::stop_all(witnesses);
    report.warnings.extend(warnings);
    let stalls = stalls.iter().map(|s| s.shifted(origin)).collect();
    Ok(summarise(mode, workers, duration, report, stalls))
}

fn summarise(
    mode: Mode,
    workers: usize,
    duration: Duration,
    report: RtReport,
    stalls: Vec<Stall>,
) -> HarnessReport {
    let resp: Vec<u64> = report.jobs.iter().map(|j| j.response()).collect();
    let sum = |f: fn(&super::JobRecord) -> u64| report.jobs.iter().map(f).sum::<u64>();
    HarnessReport {
        mode,
        workers,
        duration,
        jobs: report.jobs.len() as u64,
        misses: report.misses(),
        tasks_missing: report.tasks.iter().filter(|t| t.misses > 0).count() as u64,
        steals: sum(|j| j.steals),
        migrations: sum(|j| j.migrations),
        preemptions: sum(|j| j.preemptions),
        switches: sum(|j| j.switches),
        kernel_context_switches: report.kernel_context_switches(),
        kernel_migrations: report.kernel_migrations(),
        response_p50: percentile(&resp, 50.0).unwrap_or(0),
        response_p99: percentile(&resp, 99.0).unwrap_or(0),
        response_max: resp.iter().copied().max().unwrap_or(0),
        preemption_latency_p50: percentile(&report.preemption_latency, 50.0),
        preemption_latency_p99: percentile(&report.preemption_latency, 99.0),
        stalls,
        report,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paws::JobRecord;

    fn job(release: u64, deadline: u64, finish: u64) -> JobRecord {
        JobRecord {
            task: 0,
            index: 0,
            release,
            deadline,
            start: release,
            finish,
            threads: 0,
            steals: 0,
            migrations: 0,
            preemptions: 0,
            switches: 0,
            panicked: false,
        }
    }

    #[test]
    fn a_miss_is_explained_only_by_stalls_at_least_as_long_as_its_lateness() {
        let ms = 1_000_000;
        let report = RtReport {
            jobs: vec![
                // Met: never listed.
                job(0, 10 * ms, 5 * ms),
                // 4 ms late, a 6 ms stall inside it: explained.
                job(20 * ms, 30 * ms, 34 * ms),
                // 4 ms late, only a 3 ms stall inside it: the pool's.
                job(40 * ms, 50 * ms, 54 * ms),
                // 4 ms late, a 4 ms stall ended before its release: the pool's.
                job(60 * ms, 70 * ms, 74 * ms),
                // 4 ms late, two stalls of 2 ms: explained together.
                job(80 * ms, 90 * ms, 94 * ms),
            ],
            ..RtReport::default()
        };
        let stall = |from: u64, len: u64| Stall {
            from_ns: from * ms,
            to_ns: (from + len) * ms,
            late_ns: (len - 1) * ms,
        };
        let stalls = vec![
            stall(22, 6),
            stall(41, 3),
            stall(55, 4),
            stall(81, 2),
            stall(86, 2),
        ];
        let r = summarise(Mode::Paws, 2, Duration::from_millis(100), report, stalls);
        assert_eq!(r.misses, 4);
        let left: Vec<u64> = r.unexplained_misses().iter().map(|j| j.release).collect();
        assert_eq!(left, vec![40 * ms, 60 * ms]);
    }
}
