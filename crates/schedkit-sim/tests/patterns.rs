//! Threads that sleep and wake (`pattern`): every simulator policy that runs processes takes
//! them through the engine's block/wake path and gives them exactly the CPU their run phases
//! ask for when nothing else competes.

use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::Event;
use schedkit_sim::policies::SIM_POLICIES;
use schedkit_sim::simulate_report;

#[test]
fn a_lone_sleeper_gets_its_run_phases_under_every_policy() {
    let mut ran = 0;
    for &p in SIM_POLICIES {
        if p == PolicyName::Gang {
            continue; // refuses patterns (its controller stops and resumes processes)
        }
        // 100 ms: phases start at 0, 10, ..., 90 ms; each runs 2 ms of CPU.
        let text = format!(
            "cores = 2\n[policy]\nname = \"{p}\"\n[run]\nhorizon = \"100ms\"\n\
             [[process]]\nname = \"s\"\npattern = [{{ run = \"2ms\" }}, {{ sleep = \"8ms\" }}]\n"
        );
        let sc = Scenario::parse("t.toml", &text).expect("scenario");
        let Ok((r, Some(log), _)) = simulate_report(&sc, true) else {
            continue; // a real-time policy without tasks may refuse
        };
        assert_eq!(r.threads[0].cpu_ns, 20_000_000, "{p}");
        let blocks = log
            .events
            .iter()
            .filter(|e| matches!(e, Event::Block { .. }))
            .count();
        let wakes = log
            .events
            .iter()
            .filter(|e| matches!(e, Event::Wake { .. }))
            .count();
        // Ten run phases end (the last at 92 ms); ten sleeps end, the last at the horizon,
        // unless the policy models a wake-up path (eevdf: each phase then starts 8.7 us
        // later than the last, so the tenth sleep's timer falls after the horizon).
        let last_block = log
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Block { t, .. } => Some(t.0),
                _ => None,
            })
            .max()
            .expect("blocks");
        let timer_in = last_block + 8_000_000 <= 100_000_000;
        assert_eq!(blocks, 10, "{p}");
        assert_eq!(wakes, if timer_in { 10 } else { 9 }, "{p}");
        ran += 1;
    }
    assert!(ran >= 10, "only {ran} policies ran");
}

#[test]
fn a_pattern_may_start_asleep_and_burst_still_bounds_the_work() {
    let text = "cores = 1\n[policy]\nname = \"eevdf\"\n[[process]]\nname = \"s\"\n\
                burst = \"3ms\"\npattern = [{ sleep = \"5ms\" }, { run = \"1ms\" }]\n";
    let sc = Scenario::parse("t.toml", text).expect("scenario");
    let (r, _, _) = simulate_report(&sc, false).expect("sim");
    // Sleeps 0-5, runs 5-6, sleeps 6-11, runs 11-12, sleeps 12-17, runs 17-18: done; each
    // run starts eevdf's wake-up path (8.7 us) after its timer, so 3 x 8.7 us later.
    assert_eq!(r.threads[0].cpu_ns, 3_000_000);
    assert_eq!(r.summary.makespan_ns, 18_000_000 + 3 * 8_700);
}
