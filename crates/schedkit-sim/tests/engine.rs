//! Engine conventions that no single policy owns.

use schedkit_core::scenario::Scenario;
use schedkit_sim::simulate_report;

/// A thread whose slice ends with nothing else waiting keeps its core: an idle neighbour
/// must not pull it over (a pointless migration the kernel does not make either).
#[test]
fn expired_thread_alone_stays_on_its_core() {
    for policy in ["rr", "cfs", "lottery", "stride", "mlfq"] {
        let s = Scenario::parse(
            "t.toml",
            &format!(
                "cores = 2\n[run]\nhorizon = \"40ms\"\n[policy]\nname = \"{policy}\"\nquantum = \"1ms\"\n\
                 [[process]]\nname = \"short\"\nburst = \"500us\"\n[[process]]\nname = \"long\"\n"
            ),
        )
        .unwrap();
        let (report, _, _) = simulate_report(&s, false).unwrap();
        let long = report.threads.iter().find(|t| t.name == "long").unwrap();
        assert_eq!(long.migrations, 0, "{policy}: {long:?}");
        assert_eq!(long.cpu_ns, 40_000_000, "{policy}: {long:?}");
    }
}
