//! Gang scheduling in the simulator, checked from the trace: every thread of a job runs
//! together, never beside a job of another time slot, and every job completes.

use schedkit_core::controllers::gang::{ClusterOverhead, Gang, Matrix};
use schedkit_core::gang_overhead::{OverheadModel, Pattern};
use schedkit_core::trace::{Event, Owner, TraceLog};
use schedkit_core::{Nanos, Scenario};
use schedkit_sim::policies::gang::GangDispatch;
use schedkit_sim::Engine;
use std::collections::{BTreeMap, BTreeSet};

/// (threads, burst ms, arrival ms) per job.
const JOBS: &[(u32, u64, u64)] = &[(2, 35, 0), (3, 20, 0), (2, 50, 0), (4, 15, 0), (1, 12, 25)];

fn scenario() -> Scenario {
    let mut text = String::from("cores = 4\n[policy]\nname = \"gang\"\nquantum = \"10ms\"\n");
    for (i, (w, b, a)) in JOBS.iter().enumerate() {
        text += &format!(
            "[[process]]\nname = \"j{i}\"\nthreads = {w}\nburst = \"{b}ms\"\narrival = \"{a}ms\"\n"
        );
    }
    Scenario::parse("gang.toml", &text).expect("valid scenario")
}

/// Replays the trace: at the end of every instant, the processes with a thread on a core.
/// Checks that a process runs all its unfinished threads or none, and returns the distinct
/// running sets.
fn running_sets(s: &Scenario, log: &TraceLog) -> Vec<BTreeSet<usize>> {
    let mut proc_of = BTreeMap::new();
    let mut on_core: BTreeMap<usize, u32> = BTreeMap::new();
    let mut finished: BTreeSet<u32> = BTreeSet::new();
    let mut seen = Vec::new();
    let events = &log.events;
    let mut i = 0;
    while i < events.len() {
        let t = events[i].time();
        while i < events.len() && events[i].time() == t {
            match &events[i] {
                Event::Arrive {
                    slot,
                    owner: Owner::Process { process, .. },
                    ..
                } => {
                    proc_of.insert(*slot, *process);
                }
                Event::Dispatch { core, slot, .. } => {
                    assert!(on_core.insert(*core, *slot).is_none(), "core {core} busy");
                }
                Event::Deschedule { core, slot, .. } => {
                    assert_eq!(on_core.remove(core), Some(*slot));
                }
                Event::Finish { slot, .. } => {
                    finished.insert(*slot);
                }
                _ => {}
            }
            i += 1;
        }
        let running: BTreeSet<usize> = on_core.values().map(|s| proc_of[s]).collect();
        for &p in &running {
            // All of p's threads that are not finished are on a core.
            for (slot, &q) in &proc_of {
                if q == p && !finished.contains(slot) {
                    assert!(
                        on_core.values().any(|s| s == slot),
                        "at {t}: process {p} runs without its thread {slot}"
                    );
                }
            }
            let _ = s.processes()[p].threads();
        }
        if !running.is_empty() && seen.last() != Some(&running) {
            seen.push(running);
        }
    }
    seen
}

#[test]
fn gangs_run_together_and_never_with_another_slot() {
    let s = scenario();
    let (report, log, _) = schedkit_sim::simulate_report(&s, true).expect("simulates");
    let log = log.expect("trace");
    // The matrix the controller builds for the four jobs present at 0 (job 4 arrives later
    // and fills the hole at row 1, column 3).
    let mut m = Matrix::new(4);
    for (p, (w, _, a)) in JOBS.iter().enumerate() {
        if *a == 0 {
            m.place(p, *w as usize);
        }
    }
    assert_eq!(
        m.rows(),
        &[
            vec![Some(0), Some(0), Some(2), Some(2)],
            vec![Some(1), Some(1), Some(1), None],
            vec![Some(3); 4],
        ]
    );
    let sets = running_sets(&s, &log);
    // Every running set lies inside one row of the (evolving) matrix: the allowed sets are
    // subsets of {0,2}, {1,4}, {3}, plus the rows formed after jobs finish and rows vanish.
    let rows: [BTreeSet<usize>; 3] = [
        [0, 2].into_iter().collect(),
        [1, 4].into_iter().collect(),
        [3].into_iter().collect(),
    ];
    for set in &sets {
        assert!(
            rows.iter().any(|r| set.is_subset(r)),
            "processes {set:?} ran together across slots"
        );
    }
    // Rotation: row 0, row 1, row 2, row 0 again.
    assert_eq!(
        &sets[..4],
        &[
            rows[0].clone(),
            [1].into(),
            rows[2].clone(),
            rows[0].clone()
        ]
    );
    // Everything finishes with exactly its demand.
    for (p, (w, b, _)) in JOBS.iter().enumerate() {
        let pr = &report.processes[p];
        assert_eq!(pr.cpu_ns, *w as u64 * b * 1_000_000, "process {p}");
    }
    assert!(report.threads.iter().all(|t| t.finish_ns.is_some()));
}

#[test]
fn switch_overhead_idles_the_cluster() {
    // Two full-width jobs on 2 nodes x 2 cores: every switch is a gap of the model's cost.
    let text = "cores = 4\n[policy]\nname = \"gang\"\nquantum = \"10ms\"\n\
        [[process]]\nname = \"a\"\nthreads = 4\nburst = \"30ms\"\n\
        [[process]]\nname = \"b\"\nthreads = 4\nburst = \"30ms\"\n";
    let s = Scenario::parse("o.toml", text).expect("valid");
    let model = OverheadModel::default();
    let cost = model.switch(2, 2, Pattern::AllToAll).total();
    let ctl = Gang::new(s.policy().quantum(), 4).with_overhead(ClusterOverhead {
        model,
        cores_per_node: 2,
        pattern: Pattern::AllToAll,
    });
    let stats = ctl.stats();
    let mut log = TraceLog::default();
    let st = Engine::new(
        &s,
        Box::new(GangDispatch::new(4)),
        Some(Box::new(ctl)),
        &mut log,
    )
    .run();
    // a runs 10, switch, b 10, switch, a 10, ..., 6 slots of 10 ms and 5 switches.
    let switches = stats.lock().unwrap().switches;
    assert_eq!(switches, 5);
    assert_eq!(st.end, Nanos::from_ms(60) + Nanos(cost.0 * 5));
    // No core runs during a switch: the first Dispatch after t = 10 ms is at 10 ms + cost.
    let first_b = log
        .events
        .iter()
        .find(|e| matches!(e, Event::Dispatch { t, .. } if *t > Nanos::ZERO))
        .expect("b dispatched");
    assert_eq!(first_b.time(), Nanos::from_ms(10) + cost);
}

/// `[policy] comm` and `cores_per_node` switch on seed 002's overhead model from the scenario
/// file: every slot switch then leaves the cores idle, so the same jobs finish later.
#[test]
fn scenario_keys_charge_switch_overhead() {
    let base = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gang/cluster.toml"
    ))
    .unwrap();
    // The bundled file has the model on; the reference run has free switches.
    let base: String = base
        .lines()
        .filter(|l| !l.starts_with("comm =") && !l.starts_with("cores_per_node ="))
        .map(|l| format!("{l}\n"))
        .collect();
    let free = Scenario::parse("cluster.toml", &base).unwrap();
    assert!(free.policy().gang_overhead().is_none());
    let costly_text = base.replace(
        "name = \"gang\"\n",
        "name = \"gang\"\ncomm = \"all-to-all\"\ncores_per_node = 4\n",
    );
    let costly = Scenario::parse("cluster.toml", &costly_text).unwrap();
    assert!(costly.policy().gang_overhead().is_some());
    let (r_free, _, _) = schedkit_sim::simulate_report(&free, false).unwrap();
    let (r_costly, _, _) = schedkit_sim::simulate_report(&costly, false).unwrap();
    assert!(
        r_costly.summary.makespan_ns > r_free.summary.makespan_ns,
        "{} vs {}",
        r_costly.summary.makespan_ns,
        r_free.summary.makespan_ns
    );
    // Same work done either way.
    let cpu = |r: &schedkit_core::Report| r.processes.iter().map(|p| p.cpu_ns).sum::<u64>();
    assert_eq!(cpu(&r_costly), cpu(&r_free));
    // Bad values are located errors.
    let bad = base.replace("name = \"gang\"\n", "name = \"gang\"\ncomm = \"smoke\"\n");
    let e = Scenario::parse("cluster.toml", &bad).unwrap_err();
    assert_eq!(e.field, "policy.comm");
    let bad = base.replace(
        "name = \"gang\"\n",
        "name = \"gang\"\ncomm = \"none\"\ncores_per_node = 64\n",
    );
    let e = Scenario::parse("cluster.toml", &bad).unwrap_err();
    assert_eq!(e.field, "policy.cores_per_node");
}
