//! The worked examples of seed 004, chapter 2 (tables 2.1-2.5), run from the bundled
//! scenario files in `examples/textbook/`: exact waiting times for FCFS, SJF, SRTF and RR, and
//! ticket shares for lottery and stride scheduling.

use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::TraceLog;
use schedkit_core::Nanos;
use schedkit_sim::simulate_report;
use std::path::PathBuf;

fn example(name: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/textbook")
        .join(name);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> Report {
    let (report, _, stats) = simulate_report(s, false).unwrap();
    assert_eq!(stats.invariants.invalid_picks, 0);
    report
}

/// Checks the per-process waits (ms, in file order P1..P4) and their average (in ns, exact).
fn assert_waits(file: &str, waits_ms: [u64; 4], avg_ns: u64) {
    let r = run(&example(file));
    let got: Vec<(String, u64)> = r
        .threads
        .iter()
        .map(|t| (t.name.clone(), t.waiting_ns))
        .collect();
    let want: Vec<(String, u64)> = waits_ms
        .iter()
        .enumerate()
        .map(|(i, w)| (format!("P{}", i + 1), Nanos::from_ms(*w).0))
        .collect();
    assert_eq!(got, want, "{file}: per-process waiting times");
    assert_eq!(
        r.summary.avg_waiting_ns, avg_ns,
        "{file}: average waiting time"
    );
}

#[test]
fn fcfs_table_2_1() {
    // The thesis prints 10.5 ms, but its own waits 0 + 8 + 12 + 21 = 41 give 10.25 ms.
    assert_waits("fcfs.toml", [0, 8, 12, 21], 10_250_000);
}

#[test]
fn sjf_table_2_2() {
    assert_waits("sjf.toml", [9, 0, 17, 4], 7_500_000);
}

#[test]
fn srtf_table_2_3() {
    assert_waits("srtf.toml", [9, 0, 15, 2], 6_500_000);
}

#[test]
fn rr_table_2_4() {
    assert_waits("rr.toml", [12, 4, 17, 20], 13_250_000);
}

const TICKETS: [f64; 4] = [8.0, 4.0, 9.0, 5.0];

/// Largest |share - tickets/26| over P1..P4, in percentage points.
fn max_share_error_pp(r: &Report) -> f64 {
    let total: f64 = TICKETS.iter().sum();
    r.processes
        .iter()
        .zip(TICKETS)
        .map(|(p, t)| (p.share - t / total).abs() * 100.0)
        .fold(0.0, f64::max)
}

#[test]
fn lottery_table_2_5_shares_within_one_point() {
    let s = example("lottery.toml");
    assert_eq!(s.policy().name(), PolicyName::Lottery);
    assert_eq!(s.horizon(), Nanos::from_secs(400));
    // The bundled seed and a few others: the bound is not a property of one lucky seed.
    for seed in [s.policy().seed(), 2, 3, 4] {
        let s = s.with_seed(seed);
        let r = run(&s);
        let err = max_share_error_pp(&r);
        assert!(
            err < 1.0,
            "seed {seed}: shares {:?} are {err:.3} pp from 8:4:9:5",
            r.processes.iter().map(|p| p.share).collect::<Vec<_>>()
        );
        let sum: f64 = r.processes.iter().map(|p| p.share).sum();
        assert!((sum - 1.0).abs() < 1e-9, "the core is never idle: {sum}");
    }
}

fn report_json_and_trace(s: &Scenario) -> (String, TraceLog) {
    let (report, log, _) = simulate_report(s, true).unwrap();
    (serde_json::to_string(&report).unwrap(), log.unwrap())
}

#[test]
fn lottery_is_reproducible_per_seed() {
    let mut s = example("lottery.toml");
    s = s.with_horizon(Nanos::from_secs(2)).unwrap();
    let (json_a, trace_a) = report_json_and_trace(&s);
    let (json_b, trace_b) = report_json_and_trace(&s);
    assert_eq!(json_a, json_b, "same seed, same report bytes");
    assert_eq!(trace_a.events, trace_b.events, "same seed, same schedule");
    s = s.with_seed(s.policy().seed() + 1);
    let (json_c, trace_c) = report_json_and_trace(&s);
    assert_ne!(
        trace_a.intervals(),
        trace_c.intervals(),
        "another seed, another schedule"
    );
    assert_ne!(json_a, json_c);
}

#[test]
fn stride_table_2_5_shares_within_half_a_point() {
    let mut s = example("lottery.toml");
    s = s
        .with_policy_spec(s.policy().clone().with_name(PolicyName::Stride))
        .unwrap();
    let r = run(&s);
    let err = max_share_error_pp(&r);
    assert!(err < 0.5, "stride shares are {err:.4} pp from 8:4:9:5");
    // Stride is deterministic and converges within about one quantum per process: already
    // over one second (250 quanta) it is within the same half point.
    s = s.with_horizon(Nanos::from_secs(1)).unwrap();
    let err = max_share_error_pp(&run(&s));
    assert!(
        err < 0.5,
        "over 1 s stride shares are {err:.4} pp from 8:4:9:5"
    );
}
