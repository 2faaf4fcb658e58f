//! What exclusive mode's machine work costs against the machine's thread count, in-process:
//! a child process of N idle threads (or, with `procs`, N idle single-threaded processes:
//! what a process costs beyond its thread) is started, then (REPEATS times) a journal is created,
//! exclusive mode is planned and applied (RT throttling kept, IRQs, a sweep of every thread),
//! swept once more (as at the end of a run) and undone. Prints the machine's thread count,
//! the threads moved, and the median / min / max of set-up and tear-down (milliseconds).
//! The engine's own part only: `bench/run-cost/setup.sh` times the whole
//! `schedkit run --exclusive -- true` command (process start, lease, job cgroup too).
//!
//! This process is unpinned and keeps the class it is started with (the engine's control
//! thread runs at SCHED_FIFO 10 on the system CPU: `chrt -f 10` gives the wall times of a
//! thread no SCHED_OTHER load delays); it prints wall times and its own CPU time.
//!
//! `cargo run --release -p schedkit-linux --example exclusive_cost -- N [REPEATS] [procs]`
//! (root)

use schedkit_linux::exclusive::{ExclusiveConfig, Isolation};
use schedkit_linux::journal::Journal;
use schedkit_linux::topo::Topology;
use schedkit_linux::Roots;
use std::time::{Duration, Instant};

fn idle_threads(n: usize) -> i32 {
    // SAFETY: the parent is single-threaded here; the child only spawns threads and sleeps.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        for _ in 0..n {
            let _ = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(|| std::thread::sleep(Duration::from_secs(3600)));
        }
        std::thread::sleep(Duration::from_secs(3600));
        std::process::exit(0);
    }
    while std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) < n + 1 {
        std::thread::sleep(Duration::from_millis(20));
    }
    pid
}

fn stats(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!("{:9.1} {:9.1} {:9.1}", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let repeats: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let procs = args.next().as_deref() == Some("procs");
    let roots = Roots::host();
    let topo = Topology::read(&roots).expect("topology");
    let child = (n > 0 && !procs).then(|| idle_threads(n));
    let mut sleepers: Vec<std::process::Child> = (0..if procs { n } else { 0 })
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("3600")
                .spawn()
                .expect("sleep")
        })
        .collect();
    if procs {
        // Until each has exec'd (its comm is no longer ours).
        for c in &sleepers {
            while std::fs::read_to_string(format!("/proc/{}/comm", c.id()))
                .map_or(true, |s| s.trim() != "sleep")
            {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    let total = schedkit_linux::procfs::all_threads(&roots).len();
    let nprocs = schedkit_linux::procfs::pids(&roots).len();
    let state = std::env::temp_dir().join(format!("schedkit-cost-{}", std::process::id()));
    let (mut setup, mut teardown, mut moved, mut entries) = (Vec::new(), Vec::new(), 0, 0);
    let mut cpu = Vec::new();
    for _ in 0..repeats {
        let c0 = schedkit_linux::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
        let t0 = Instant::now();
        let mut j = Journal::create(&state, &roots).expect("journal");
        let cfg = ExclusiveConfig::default();
        let mut iso = Isolation::plan(&topo, &roots, &cfg).expect("plan");
        iso.apply(&mut j, &cfg).expect("apply");
        let t1 = Instant::now();
        iso.final_sweep(&mut j).expect("sweep");
        entries = j.entries().len();
        let undone = j.finish();
        iso.repair_after_undo();
        let t2 = Instant::now();
        cpu.push((schedkit_linux::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - c0) as f64 / 1e6);
        assert!(undone.iter().all(|u| u.outcome.is_ok()), "undo failed");
        moved = iso.report.moved_threads;
        setup.push((t1 - t0).as_secs_f64() * 1e3);
        teardown.push((t2 - t1).as_secs_f64() * 1e3);
    }
    if let Some(pid) = child {
        // SAFETY: our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    for c in &mut sleepers {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(&state);
    let both: Vec<f64> = setup.iter().zip(&teardown).map(|(a, b)| a + b).collect();
    println!(
        "helper {n:5}{}  machine threads {total:5} in {nprocs:5} processes  moved {moved:5}  journal entries {entries:5}  \
         set-up ms (median min max) {}  tear-down {}  both {}  both, CPU ms {}",
        if procs { " processes" } else { " threads" },
        stats(setup),
        stats(teardown),
        stats(both),
        stats(cpu)
    );
}
