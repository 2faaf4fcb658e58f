//! Every bounded run has the horizon watch (`guard::HorizonWatch`): exclusive mode too. Its
//! engine runs on the system CPUs beside the machine's other work, where a foreign
//! SCHED_FIFO thread once held it past its horizon. Root, and at least two allowed CPUs
//! (a system CPU and a job CPU); skipped with the reason otherwise.

use schedkit_core::scenario::Scenario;
use schedkit_linux::affinity;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::exclusive::ExclusiveConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const ONE_SHORT_SPINNER: &str = r#"
cores = 1
[policy]
name = "exclusive"
[run]
horizon = "300ms"
[[process]]
name = "spin"
work = "spin"
threads = 1
burst = "50ms"
"#;

/// Whether this process has a thread named like the horizon watch (`comm` keeps 15 bytes).
fn has_watch() -> bool {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    dir.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("comm"))
            .is_ok_and(|c| "schedkit-horizon".starts_with(c.trim()))
    })
}

#[test]
fn an_exclusive_run_has_a_horizon_watch() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: exclusive mode needs root");
        return;
    }
    let allowed = affinity::get_thread(0).map(|s| s.len()).unwrap_or(0);
    if allowed < 2 {
        eprintln!(
            "skipped: {allowed} allowed CPU(s); exclusive mode needs a system CPU and a job CPU"
        );
        return;
    }
    let s = Scenario::parse("t.toml", ONE_SHORT_SPINNER).unwrap();
    // The least the mode can do: the job pinned at SCHED_FIFO, the machine's other threads
    // and IRQs left alone (the watch is about the engine, not about them).
    let cfg = ExclusiveConfig {
        move_irqs: false,
        move_threads: false,
        ..ExclusiveConfig::default()
    };
    let mut opts = RunOptions::new(RunPolicy::Exclusive(cfg));
    opts.perf = false;
    let seen = Arc::new(AtomicBool::new(false));
    let s2 = seen.clone();
    opts.progress = Some(Box::new(move |_| {
        if has_watch() {
            s2.store(true, Ordering::Relaxed);
        }
    }));
    let o = engine::run(&s, opts).expect("exclusive run");
    assert!(o.exclusive.is_some());
    assert!(
        seen.load(Ordering::Relaxed),
        "no horizon watch during an exclusive run"
    );
}
