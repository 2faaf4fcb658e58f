//! What a real run measured against what: the report of a process run, and the warnings
//! that say where the run was not what the scenario asked.
//!
//! A real run shares the machine. The shared [`Report`] is folded by the same `Metrics` as the
//! simulator's; what the kernel measured exactly enters that fold as inputs, never as edits of
//! the finished report (run-queue delay from schedstat becomes each thread's waiting). Around
//! it, this module states the frame of the numbers:
//!
//! - the CPUs the job could use (`sched_getaffinity` of schedkit, which a `taskset` or a
//!   cpuset narrows, and which exclusive mode narrows further by design), and a warning when
//!   they are fewer than the scenario's `cores`;
//! - the machine's other work on those CPUs during the run (busy time from `/proc/stat` minus
//!   the job's own CPU time minus schedkit's), and the hypervisor's steal time;
//! - a horizon that ran over (the run ended later than it was asked to).

use crate::affinity::CpuSet;
use crate::engine::RunOutcome;
use crate::Roots;
use schedkit_core::report::{Metrics, Report};
use schedkit_core::trace::{TraceLog, TraceSink};
use schedkit_core::Nanos;
use serde::Serialize;

/// CPU time of a set of CPUs, from `/proc/stat` (USER_HZ ticks turned into ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy_ns: u64,
    /// Time the hypervisor ran something else while these vCPUs wanted to run.
    pub steal_ns: u64,
}

impl CpuTimes {
    /// The sums over `cpus` now; `None` when `/proc/stat` cannot be read.
    pub fn read(roots: &Roots, cpus: &CpuSet) -> Option<CpuTimes> {
        let text = std::fs::read_to_string(roots.proc.join("stat")).ok()?;
        Some(Self::parse(&text, cpus))
    }

    /// Sums the `cpuN` lines of `/proc/stat` text for the CPUs in `cpus`.
    pub fn parse(text: &str, cpus: &CpuSet) -> CpuTimes {
        // USER_HZ is 100 on every architecture Linux exports /proc/stat for.
        const NS_PER_TICK: u64 = 10_000_000;
        let mut out = CpuTimes::default();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let Some(cpu) = f
                .next()
                .and_then(|n| n.strip_prefix("cpu"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            if !cpus.contains(cpu) {
                continue;
            }
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal guest guest_nice
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            out.busy_ns += (at(0) + at(1) + at(2) + at(5) + at(6)) * NS_PER_TICK;
            out.steal_ns += at(7) * NS_PER_TICK;
        }
        out
    }

    /// What was spent between `self` (earlier) and `later`.
    pub fn since(&self, later: &CpuTimes) -> CpuTimes {
        CpuTimes {
            busy_ns: later.busy_ns.saturating_sub(self.busy_ns),
            steal_ns: later.steal_ns.saturating_sub(self.steal_ns),
        }
    }
}

/// The frame of a real run: what it could use and what else ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunFrame {
    /// Online CPUs of the machine.
    pub online: CpuSet,
    /// The CPUs schedkit (and so the job) was allowed when the run started.
    pub allowed: CpuSet,
    /// The CPUs the job's threads used: `allowed`, or exclusive mode's job CPUs.
    pub job: CpuSet,
    /// The horizon the run was asked to stop at, when it was bounded by one.
    pub horizon: Option<Nanos>,
    /// Busy and steal time of the job's CPUs over the run (`None`: unreadable).
    pub machine: Option<CpuTimes>,
    /// schedkit's own CPU time over the run (engine and sampler threads).
    pub schedkit_cpu_ns: u64,
    /// The machine's other tasks on the job's CPUs over the run, where asked for
    /// (`RunOptions::scan_other_tasks`).
    pub other_tasks: Option<crate::other_tasks::OtherTasks>,
    /// What the run could not do as asked and went on with (`--allow-degraded`).
    pub degraded: Vec<String>,
}

/// The CPUs this process may run on, among the online ones (`sched_getaffinity`).
pub fn allowed_cpus(online: &CpuSet) -> CpuSet {
    crate::affinity::get_thread(0)
        .map(|a| a.intersection(online))
        .ok()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| online.clone())
}

/// Where the job could use fewer CPUs than the scenario's `cores`: the sentence, or `None`.
pub fn fewer_cpus(scenario_cores: usize, online: &CpuSet, allowed: &CpuSet) -> Option<String> {
    if allowed.len() >= scenario_cores {
        return None;
    }
    let why = if allowed.len() < online.len() {
        format!(
            "schedkit's CPU affinity (a taskset, or a cpuset of its cgroup) allows {} of the {} online",
            allowed.to_list(),
            online.to_list()
        )
    } else {
        format!("this machine has {} online", online.len())
    };
    Some(format!(
        "the scenario asks for {scenario_cores} cores; the job had {} (CPUs {}): {why}",
        allowed.len(),
        allowed.to_list()
    ))
}

/// The shared report of a process run: the events folded by `Metrics`, with the kernel's
/// run-queue delay as each thread's waiting, the job's CPUs, and the run's warnings (see the
/// module docs). `keep_trace` also returns every event for the Gantt chart and trace export.
pub fn report(o: &RunOutcome, keep_trace: bool) -> (Report, Option<TraceLog>) {
    let mut m = Metrics::new(&o.scenario, "run", o.cores);
    let mut log = TraceLog::default();
    for e in &o.events {
        m.record(e);
        if keep_trace {
            log.record(e);
        }
    }
    for (p, po) in o.processes.iter().enumerate() {
        if let Some(w) = po.work_done {
            m.set_work_done(p, w);
        }
    }
    for t in &o.threads {
        m.measured_waiting(t.process_index, t.thread_index as usize, t.runqueue_wait_ns);
    }
    // One source per process's CPU time: the kernel's per-cgroup count where the run has it
    // (every task, ended ones too), else the samples. A fair-share run's rows each say which;
    // other runs have no per-process count, and their rows keep the simulator's keys.
    if let Some(f) = &o.fair {
        m.traced_cpu_source(SAMPLED);
        let source = format!(
            "kernel: {}",
            f.cpu_accounting
                .as_deref()
                .unwrap_or("per-cgroup accounting")
        );
        for (p, cpu) in f.process_cpu_ns.iter().enumerate() {
            if let Some(ns) = cpu {
                m.measured_process_cpu(p, *ns, &source);
            }
        }
    }
    // The frame is an input of the fold like the measured counts: the outside-load warning
    // needs the job's CPU time, which the fold counts, so the rule goes in and the fold
    // applies it when it builds the report (once; nothing edits the report afterwards).
    let (frame, end) = (o.frame.clone(), o.end);
    m.frame_with(
        Some(o.frame.job.to_list()),
        Box::new(move |s| warnings(&frame, end, s.job_cpu_ns)),
    );
    (m.finish(o.end), keep_trace.then_some(log))
}

/// The source of a CPU time the engine's samples give (`ShareReport::cpu_source`).
pub const SAMPLED: &str =
    "sampled: /proc schedstat of each thread found, every sample period (misses tasks found late and tasks that ended between two samples)";

/// Outside load above this fraction of the job's CPUs is worth a warning.
const OUTSIDE_LOAD_WARN: f64 = 0.10;
/// A run that ends this much past its horizon (fraction, and at least 20 ms) overran it.
const OVERRUN_WARN: f64 = 0.02;

/// The sentences that say where the run was not what the scenario asked: the run framed by
/// `f` ended at `end` (the window is `[0, end]`), and the job's processes used
/// `job_cpu_ns` of CPU time in it (the report's `summary.job_cpu_ns`).
pub fn warnings(f: &RunFrame, end: Nanos, job_cpu_ns: u64) -> Vec<String> {
    let mut out: Vec<String> = f
        .degraded
        .iter()
        .map(|d| format!("degraded (--allow-degraded): {d}"))
        .collect();
    let window = end.0.max(1);
    if let Some(m) = f.machine {
        let capacity = (f.job.len().max(1) as u64 * window) as f64;
        let outside = m.busy_ns.saturating_sub(job_cpu_ns + f.schedkit_cpu_ns);
        if outside as f64 > OUTSIDE_LOAD_WARN * capacity {
            out.push(format!(
                "outside load: other work used {:.0} ms of CPU on the job's CPUs {} during the run \
                 ({:.0} % of their time); the machine shares are lower for it, the job shares \
                 (`job %`) compare the job's processes with each other",
                outside as f64 / 1e6,
                f.job.to_list(),
                100.0 * outside as f64 / capacity
            ));
        }
        if m.steal_ns as f64 > OUTSIDE_LOAD_WARN * capacity {
            out.push(format!(
                "the hypervisor took {:.0} ms of the job's CPUs (steal time, {:.0} %)",
                m.steal_ns as f64 / 1e6,
                100.0 * m.steal_ns as f64 / capacity
            ));
        }
    }
    if let Some(h) = f.horizon {
        let slack = ((h.0 as f64 * OVERRUN_WARN) as u64).max(20_000_000);
        if end.0 > h.0 + slack {
            out.push(format!(
                "the horizon ran over: asked {h}, the run took {end} (+{:.1} %)",
                100.0 * (end.0 - h.0) as f64 / h.0.max(1) as f64
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_sums_the_chosen_cpus_only() {
        let text = "cpu  10 0 10 100 0 0 0 0 0 0\n\
                    cpu0 1 2 3 40 5 6 7 8 0 0\n\
                    cpu1 100 0 0 40 0 0 0 50 0 0\n\
                    intr 1 2 3\n";
        let one = CpuTimes::parse(text, &CpuSet::single(0));
        // user+nice+system+irq+softirq = 1+2+3+6+7 ticks; steal 8 ticks; 10 ms per tick.
        assert_eq!(one.busy_ns, 19 * 10_000_000);
        assert_eq!(one.steal_ns, 8 * 10_000_000);
        let both = CpuTimes::parse(text, &CpuSet::parse_list("0-1").unwrap());
        assert_eq!(both.busy_ns, 119 * 10_000_000);
        assert_eq!(one.since(&both).busy_ns, 100 * 10_000_000);
    }

    #[test]
    fn fewer_cpus_names_the_cpus_and_the_cause() {
        let online = CpuSet::parse_list("0-3").unwrap();
        assert_eq!(fewer_cpus(4, &online, &online), None);
        let w = fewer_cpus(4, &online, &CpuSet::parse_list("2-3").unwrap()).unwrap();
        assert!(
            w.contains("asks for 4 cores; the job had 2 (CPUs 2-3)"),
            "{w}"
        );
        assert!(w.contains("affinity"), "{w}");
        let w = fewer_cpus(8, &online, &online).unwrap();
        assert!(w.contains("this machine has 4 online"), "{w}");
    }
}
