//! What the Linux layer's root tests share: serialising tests that touch the same cgroups and
//! CPUs, the root check, and a fresh state (journal) directory per test.
#![allow(dead_code)] // each test crate uses a part of it

use std::path::PathBuf;

/// Tests of one binary that write cgroups named after this process and use its CPUs run one at
/// a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// An empty directory `schedkit-<suite>-<tag>-<pid>` under the temporary directory.
pub fn state_dir(suite: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedkit-{suite}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `sc` (a policy with a control socket: tenants, process-fair) in a thread of this
/// process with `dir` as its state directory, calls `f` with the run's socket once the run
/// is in its loop, then stops the run and returns its outcome.
pub fn with_run_in_thread(
    sc: schedkit_core::Scenario,
    dir: &std::path::Path,
    f: impl FnOnce(&std::path::Path),
) -> schedkit_linux::engine::RunOutcome {
    use schedkit_linux::engine::{self, RunOptions, RunPolicy};
    use std::time::{Duration, Instant};
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (stop2, dir2) = (stop.clone(), dir.to_path_buf());
    let h = std::thread::spawn(move || {
        let mut opts = RunOptions::new(RunPolicy::from_scenario(&sc).unwrap());
        opts.state_dir = dir2;
        opts.perf = false;
        opts.stop = stop2;
        engine::run(&sc, opts).expect("run")
    });
    let sock = schedkit_linux::ctl::socket_path(dir, std::process::id() as i32);
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no control socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    f(&sock);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap()
}
