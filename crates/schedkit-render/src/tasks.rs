//! What only a real `[[task]]` run knows ([`schedkit_runtime::tasks::RealRun`]), after the
//! shared report: job and miss counts, response percentiles, whose context switches and
//! migrations the report counts (the kernel's, the pool's own), the stall witness's verdict,
//! and the run's warnings grouped.

use crate::table::ms;
use schedkit_core::scenario::PolicyName;
use schedkit_runtime::paws::stats::percentile;
use schedkit_runtime::tasks::RealRun;

/// What only a real task-set run knows, after the shared table.
pub fn text(policy: PolicyName, run: &RealRun) -> String {
    let opt = |v: Option<u64>| v.map_or("n/a (perf refused)".to_string(), |v| v.to_string());
    let resp: Vec<u64> = run.jobs.iter().map(|j| j.response()).collect();
    let q = |p| percentile(&resp, p).map_or("-".into(), ms);
    let mut out = format!(
        "\n{policy} on {} cores: {} jobs, {} missed; response p50 {} ms, p99 {} ms, max {} ms\n",
        run.cores,
        run.jobs.len(),
        run.misses(),
        q(50.0),
        q(99.0),
        q(100.0)
    );
    out += &format!(
        "kernel (perf, threads that ran the work): {} context switches, {} migrations\n",
        opt(run.kernel_switches),
        opt(run.kernel_migrations)
    );
    if let (Some(sw), Some(mig)) = (run.user_switches, run.user_migrations) {
        out += &format!(
            "pool (user level): {sw} switches, {mig} migrations, {} steals, {} preemptions; \
             preemption latency p50 {} us, p99 {} us\n",
            run.steals.unwrap_or(0),
            run.preemptions.unwrap_or(0),
            percentile(&run.preemption_latency, 50.0)
                .map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e3)),
            percentile(&run.preemption_latency, 99.0)
                .map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e3)),
        );
    }
    if let Some(stalls) = &run.stalls {
        let seen = match stalls.iter().map(|s| s.late_ns).max() {
            Some(longest) => format!(
                "{} machine stalls over 2 ms (longest {} ms)",
                stalls.len(),
                ms(longest)
            ),
            None => "no machine stall over 2 ms".to_string(),
        };
        out += &format!(
            "stall witness: {seen}; {} of {} misses not explained by them\n",
            run.unexplained_misses(),
            run.misses()
        );
    }
    if run.task_cpu.iter().any(Option::is_none) {
        out +=
            "cpu ms per task: not measured (the pool accounts CPU time per worker, not per task)\n";
    }
    out += &grouped_warnings(&run.warnings);
    out
}

/// The run's warnings, one line each, except that refused perf counters (one per thread and
/// counter) become a single line.
pub fn grouped_warnings(warnings: &[String]) -> String {
    let (perf, other): (Vec<&String>, Vec<&String>) = warnings
        .iter()
        .partition(|w| w.contains("perf_event_open") && w.contains("refused"));
    let mut out = String::new();
    if !perf.is_empty() {
        out += &format!(
            "warning: {} perf counter(s) of the pool's threads refused: run as root or lower \
             /proc/sys/kernel/perf_event_paranoid\n",
            perf.len()
        );
    }
    for w in other {
        out += &format!("warning: {w}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_runtime::tasks::Job;

    #[test]
    fn refused_perf_counters_are_one_line_and_other_warnings_one_each() {
        let w = vec![
            "perf_event_open(cpu-migrations) of tid 1 refused".to_string(),
            "perf_event_open(context-switches) of tid 1 refused".to_string(),
            "the horizon ran over".to_string(),
        ];
        let text = grouped_warnings(&w);
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.starts_with("warning: 2 perf counter(s)"), "{text}");
        assert!(text.ends_with("warning: the horizon ran over\n"), "{text}");
    }

    #[test]
    fn the_pool_line_and_unmeasured_cpu_time_are_said() {
        let run = RealRun {
            cores: 2,
            jobs: vec![Job {
                task: 0,
                job: 0,
                release: 0,
                deadline: 10_000_000,
                finish: 12_000_000,
            }],
            task_cpu: vec![None],
            user_switches: Some(3),
            user_migrations: Some(1),
            steals: Some(2),
            ..RealRun::default()
        };
        let text = text(PolicyName::Paws, &run);
        assert!(text.contains("paws on 2 cores: 1 jobs, 1 missed"), "{text}");
        assert!(text.contains("n/a (perf refused)"), "{text}");
        assert!(
            text.contains("pool (user level): 3 switches, 1 migrations, 2 steals"),
            "{text}"
        );
        assert!(text.contains("cpu ms per task: not measured"), "{text}");
    }
}
