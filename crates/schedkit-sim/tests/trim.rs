//! The share trim (`schedkit_core::controllers::trim`) is a core controller the simulator
//! runs too: its `SetEntityWeight` actions are applied to the model (never dropped, never
//! refused for their kind), and on the CFS model they bring three processes of 1, 8 and 3
//! threads to their GPS split of the job's CPU.

use schedkit_core::control::Controller;
use schedkit_core::controllers::trim::Trim;
use schedkit_core::report::Metrics;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, TraceLog};
use schedkit_core::Nanos;
use schedkit_sim::policies::cfs::Cfs;
use schedkit_sim::Engine;

const ONE_EIGHT_THREE: &str = r#"
cores = 2
[policy]
name = "cfs"
period = "100ms"
[run]
horizon = "10s"
[[process]]
name = "one"
[[process]]
name = "eight"
threads = 8
[[process]]
name = "three"
threads = 3
"#;

fn trim(sc: &Scenario) -> Option<Box<dyn Controller>> {
    Some(Box::new(Trim::new(sc, Nanos::from_ms(100), false)))
}

#[test]
fn the_simulator_applies_the_share_trim() {
    let sc = Scenario::parse("trim.toml", ONE_EIGHT_THREE).expect("test scenario parses");
    let cfs = || Box::new(Cfs::new(sc.policy(), sc.cores()));

    let mut log = TraceLog::default();
    let stats = Engine::new(&sc, cfs(), trim(&sc), &mut log).run();
    assert!(stats.warnings().is_empty(), "{:?}", stats.warnings());
    let changes = log
        .events
        .iter()
        .filter(|e| matches!(e, Event::WeightChange { .. }))
        .count();
    assert!(changes > 0, "the trim's weights reached no thread");

    let shares = |controller: Option<Box<dyn Controller>>| -> Vec<f64> {
        let mut m = Metrics::new(&sc, "sim", sc.cores());
        Engine::new(&sc, cfs(), controller, &mut m).run();
        let r = m.finish(sc.horizon());
        r.processes.iter().map(|p| p.job_share).collect()
    };
    let plain = shares(None);
    let trimmed = shares(trim(&sc));
    eprintln!("job shares: cfs alone {plain:?}, with the trim {trimmed:?}");
    // CFS alone splits by threads (8 of 12 to `eight`); with the trim each process gets a
    // third (GPS: equal weights, none capped on two cores).
    assert!(plain[1] > 0.5, "{plain:?}");
    for s in &trimmed {
        assert!((s - 1.0 / 3.0).abs() < 0.02, "{trimmed:?}");
    }
}
