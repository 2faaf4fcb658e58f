//! One scenario under several simulator policies, keeping each run's trace: what `schedkit
//! compare --parquet` needs for its intervals table (`schedkit_experiments::compare::run_all`,
//! which the table, the JSON and the Python module's `compare` use, keeps reports only).
//!
//! Each run is the scenario with only `policy.name` replaced ([`Scenario::with_policy`]);
//! every other `[policy]` parameter is kept. Runs go in parallel (rayon); results come back in
//! the order the policies were given.

use crate::Error;
use rayon::prelude::*;
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::TraceLog;
use schedkit_core::Nanos;
use schedkit_experiments::progress::Progress;

/// Checks a `--policies` list with `schedkit_experiments::compare::parse_policies` (known
/// simulator policies, no duplicates, at least one); the error names the option, so the
/// Python module raises an `OptionError` whose `option` is `policies`.
pub fn parse_policies<S: AsRef<str>>(list: &[S]) -> Result<Vec<PolicyName>, Error> {
    let list: Vec<String> = list.iter().map(|s| s.as_ref().to_string()).collect();
    schedkit_experiments::compare::parse_policies(&list).map_err(|e| {
        let text = e.to_string();
        let why = text.strip_prefix("--policies: ").unwrap_or(&text);
        Error::bad_option("policies", "", why)
    })
}

/// One policy's run: its report, and its trace and end time.
pub struct Run {
    pub report: Report,
    pub trace: Option<(TraceLog, Nanos)>,
}

/// Runs `scenario` once per policy, in parallel, keeping the traces; one progress step per
/// run.
pub fn run_traced(
    scenario: &Scenario,
    policies: &[PolicyName],
    progress: &dyn Progress,
) -> Result<Vec<Run>, Error> {
    progress.start(policies.len() as u64);
    let runs: Vec<Result<Run, Error>> = policies
        .par_iter()
        .map(|p| {
            let s = scenario.with_policy(p.as_str())?;
            let (report, trace, stats) = schedkit_sim::simulate_report(&s, true)?;
            progress.step();
            Ok(Run {
                report,
                trace: trace.map(|t| (t, stats.end)),
            })
        })
        .collect();
    progress.finish();
    runs.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_experiments::progress::Silent;

    #[test]
    fn policy_lists_are_checked_and_runs_keep_order() {
        assert_eq!(
            parse_policies(&["rr", "fcfs"]).unwrap(),
            [PolicyName::Rr, PolicyName::Fcfs]
        );
        let e = parse_policies(&["rr", "nope"]).unwrap_err();
        assert!(matches!(&e, Error::BadOption { flag, .. } if flag == "policies"));
        let e = e.to_string();
        assert!(e.starts_with("--policies: unknown policy \"nope\""), "{e}");
        assert!(parse_policies(&["rr", "rr"])
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let e = parse_policies(&["exclusive"]).unwrap_err().to_string();
        assert!(e.contains("not available"), "{e}");
        assert!(parse_policies::<&str>(&[]).is_err());

        let s =
            Scenario::parse("t.toml", include_str!("../../../examples/textbook/rr.toml")).unwrap();
        let runs = run_traced(
            &s,
            &[PolicyName::Fcfs, PolicyName::Sjf, PolicyName::Rr],
            &Silent,
        )
        .unwrap();
        let avg: Vec<u64> = runs
            .iter()
            .map(|r| r.report.summary.avg_waiting_ns)
            .collect();
        // Seed 004 tables 2.1, 2.2, 2.4.
        assert_eq!(avg, [10_250_000, 7_500_000, 13_250_000]);
        assert!(runs.iter().all(|r| r.trace.is_some()));
    }
}
