//! One scenario under several simulator policies (`schedkit compare`, `schedkit.compare`).
//!
//! Each run is the scenario with only `policy.name` replaced ([`Scenario::with_policy`]);
//! every other `[policy]` parameter is kept, so the comparison is of policies, not of
//! settings. Runs are independent and go in parallel (rayon); results come back in the order
//! the policies were given.

use crate::Error;
use rayon::prelude::*;
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::TraceLog;
use schedkit_core::Nanos;
use schedkit_sim::policies::SIM_POLICIES;

fn known() -> String {
    SIM_POLICIES
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn bad(message: String) -> Error {
    Error::BadOption {
        flag: "policies".into(),
        value: String::new(),
        why: message,
    }
}

/// Checks a `--policies` list: known simulator policies, no duplicates, at least one. The
/// error's text names the policy and lists the simulator's.
pub fn parse_policies<S: AsRef<str>>(list: &[S]) -> Result<Vec<PolicyName>, Error> {
    let mut out = Vec::new();
    for raw in list {
        let name = raw.as_ref().trim();
        let p = PolicyName::parse(name).ok_or_else(|| {
            bad(format!(
                "unknown policy \"{name}\" (simulator policies: {})",
                known()
            ))
        })?;
        if !SIM_POLICIES.contains(&p) {
            return Err(bad(format!(
                "policy \"{name}\" is not available in the simulator (simulator policies: {})",
                known()
            )));
        }
        if out.contains(&p) {
            return Err(bad(format!("\"{name}\" is listed twice")));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err(bad("name at least one policy".into()));
    }
    Ok(out)
}

/// One policy's run: its report, and its trace and end time when asked for.
pub struct Run {
    pub report: Report,
    pub trace: Option<(TraceLog, Nanos)>,
}

/// Runs `scenario` once per policy, in parallel; `done` is called after each run (from the
/// worker threads), for a progress bar.
pub fn run_all(
    scenario: &Scenario,
    policies: &[PolicyName],
    keep_trace: bool,
    done: &(dyn Fn() + Sync),
) -> Result<Vec<Run>, Error> {
    policies
        .par_iter()
        .map(|p| {
            let s = scenario.with_policy(p.as_str())?;
            let (report, trace, stats) = schedkit_sim::simulate_report(&s, keep_trace)?;
            done();
            Ok(Run {
                report,
                trace: trace.map(|t| (t, stats.end)),
            })
        })
        .collect::<Vec<Result<Run, Error>>>()
        .into_iter()
        .collect()
}

/// The `--json` document of a comparison: `{"scenario", "reports": [...]}`.
pub fn json(scenario: &Scenario, reports: &[Report]) -> serde_json::Value {
    serde_json::json!({ "scenario": scenario.file, "reports": reports })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_lists_are_checked_and_runs_keep_order() {
        assert_eq!(
            parse_policies(&["rr", "fcfs"]).unwrap(),
            [PolicyName::Rr, PolicyName::Fcfs]
        );
        let e = parse_policies(&["rr", "nope"]).unwrap_err().to_string();
        assert!(e.contains("unknown policy \"nope\""), "{e}");
        assert!(parse_policies(&["rr", "rr"])
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let e = parse_policies(&["exclusive"]).unwrap_err().to_string();
        assert!(e.contains("not available"), "{e}");
        assert!(parse_policies::<&str>(&[]).is_err());

        let s =
            Scenario::parse("t.toml", include_str!("../../../examples/textbook/rr.toml")).unwrap();
        let runs = run_all(
            &s,
            &[PolicyName::Fcfs, PolicyName::Sjf, PolicyName::Rr],
            true,
            &|| {},
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
