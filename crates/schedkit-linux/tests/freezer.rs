//! The gang freezer on this machine: every backend it detects stops and resumes for real, and
//! a SIGKILLed owner never leaves a job frozen once `restore` ran. Needs root (cgroup writes,
//! signals to other users' processes); skips with a reason otherwise.

use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::freezer::{mounts, Backend, Freezer, Member};
use schedkit_linux::journal::{self, Journal};
use schedkit_linux::Roots;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{root, serial};

fn state_dir(tag: &str) -> PathBuf {
    common::state_dir("freezer", tag)
}

/// A busy process that counts into a file every few ms (progress is visible from outside).
fn counter_process(file: &Path) -> Child {
    let script = format!(
        "i=0; while :; do i=$((i+1)); if [ $((i % 200)) -eq 0 ]; then echo $i > {f}; fi; done",
        f = file.display()
    );
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn sh")
}

fn read_count(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn progresses(file: &Path, within: Duration) -> bool {
    let a = read_count(file);
    let t0 = Instant::now();
    while t0.elapsed() < within {
        std::thread::sleep(Duration::from_millis(20));
        if read_count(file) > a {
            return true;
        }
    }
    false
}

/// Kills whatever is left in this test's job cgroup of `backend`.
fn kill_members(backend: &Backend) {
    let mount = match backend {
        Backend::V2(m) | Backend::V1(m) => m,
        Backend::Signal => return,
    };
    let procs = mount
        .join(format!("schedkit-{}", std::process::id()))
        .join("job-0/cgroup.procs");
    for p in std::fs::read_to_string(procs)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
    {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    std::thread::sleep(Duration::from_millis(50));
}

fn check_process_backend(backend: Backend, tag: &str) {
    let dir = state_dir(tag);
    let roots = Roots::host();
    let mut j = Journal::create(&dir, &roots).unwrap();
    let mut f = Freezer::with_backends(&roots, backend.clone(), None);
    let count = dir.join("count");
    let mut child = counter_process(&count);
    f.add(&mut j, 0, Member::Process(child.id() as i32))
        .unwrap();
    assert!(progresses(&count, Duration::from_secs(5)), "{tag}: runs");
    f.freeze(&mut j, 0).unwrap();
    assert!(f.is_frozen(0));
    std::thread::sleep(Duration::from_millis(100)); // let a freeze in progress complete
    assert!(
        !progresses(&count, Duration::from_millis(300)),
        "{tag}: frozen"
    );
    f.thaw(0).unwrap();
    assert!(progresses(&count, Duration::from_secs(5)), "{tag}: thawed");
    // The journal holds one entry that thaws.
    assert!(!j.entries().is_empty(), "{tag}: freeze journaled");
    child.kill().unwrap();
    child.wait().unwrap();
    kill_members(&backend);
    drop(j);
    f.cleanup();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_detected_process_backend_freezes_and_thaws() {
    let _serial = serial();
    if !root() {
        eprintln!("skipped: the freezer writes cgroups and signals processes: needs root");
        return;
    }
    let (v2, v1) = mounts(&Roots::host());
    let detected = Freezer::detect(&Roots::host());
    eprintln!(
        "cgroup2 at {v2:?}, v1 freezer at {v1:?}; processes use the {}",
        detected.process_backend().name()
    );
    let mut detected = detected;
    detected.cleanup();
    if let Some(m) = v2 {
        if m.join("cgroup.controllers").exists() {
            check_process_backend(Backend::V2(m), "v2");
        }
    }
    if let Some(m) = v1 {
        check_process_backend(Backend::V1(m), "v1");
    }
    check_process_backend(Backend::Signal, "signal");
}

#[test]
fn v1_freezer_stops_single_threads() {
    let _serial = serial();
    if !root() {
        eprintln!("skipped: the freezer writes cgroups: needs root");
        return;
    }
    let roots = Roots::host();
    let Some(v1) = mounts(&roots).1 else {
        eprintln!("skipped: no cgroup v1 freezer on this machine");
        return;
    };
    let dir = state_dir("thread");
    let mut j = Journal::create(&dir, &roots).unwrap();
    let mut f = Freezer::with_backends(&roots, Backend::Signal, Some(Backend::V1(v1)));
    let count = Arc::new(AtomicU64::new(0));
    let tid = Arc::new(AtomicI32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let h = {
        let (count, tid, stop) = (count.clone(), tid.clone(), stop.clone());
        std::thread::spawn(move || {
            tid.store(schedkit_linux::gettid(), Ordering::Release);
            while !stop.load(Ordering::Relaxed) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    while tid.load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    f.add(&mut j, 0, Member::Thread(tid.load(Ordering::Acquire)))
        .unwrap();
    f.freeze(&mut j, 0).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let a = count.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(200));
    // This thread (the test) kept running while the other one was frozen.
    assert_eq!(count.load(Ordering::Relaxed), a, "frozen thread ran");
    f.thaw(0).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(count.load(Ordering::Relaxed) > a, "thawed thread runs");
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    drop(j);
    f.cleanup();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Helper run in a child copy of this test binary: freezes a job and waits to be killed.
#[test]
#[ignore = "helper of sigkilled_owner_is_thawed_by_restore"]
fn helper_freeze_and_wait() {
    let Ok(dir) = std::env::var("SCHEDKIT_FREEZER_HELPER") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let roots = Roots::host();
    let mut j = Journal::create(&dir, &roots).unwrap();
    let mut f = Freezer::detect(&roots);
    let pid: i32 = std::fs::read_to_string(dir.join("job.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    f.add(&mut j, 0, Member::Process(pid)).unwrap();
    f.freeze(&mut j, 0).unwrap();
    std::fs::write(dir.join("frozen"), f.process_backend().name()).unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn sigkilled_owner_is_thawed_by_restore() {
    let _serial = serial();
    if !root() {
        eprintln!("skipped: the freezer writes cgroups: needs root");
        return;
    }
    let dir = state_dir("kill");
    let count = dir.join("count");
    // The job is not a child of the helper, so it outlives it (as a command's grandchild
    // outlives a killed `schedkit run`: PDEATHSIG is not inherited across fork).
    let mut job = counter_process(&count);
    std::fs::write(dir.join("job.pid"), job.id().to_string()).unwrap();
    assert!(progresses(&count, Duration::from_secs(5)));
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_freeze_and_wait",
            "--ignored",
            "--nocapture",
        ])
        .env("SCHEDKIT_FREEZER_HELPER", &dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !dir.join("frozen").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "helper never froze the job"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let backend = std::fs::read_to_string(dir.join("frozen")).unwrap();
    helper.kill().unwrap(); // SIGKILL: no undo runs
    helper.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !progresses(&count, Duration::from_millis(300)),
        "{backend}: the job should still be frozen after the owner died"
    );
    // `schedkit restore` does exactly this.
    let restored = journal::restore(&dir, &Roots::host(), false).unwrap();
    assert_eq!(restored.len(), 1);
    assert!(
        restored[0].undone.iter().all(|u| u.outcome.is_ok()),
        "{:?}",
        restored[0].undone
    );
    assert!(
        progresses(&count, Duration::from_secs(5)),
        "{backend}: restore thawed the job"
    );
    job.kill().unwrap();
    job.wait().unwrap();
    // Empty cgroups of dead runs are swept by the next detection.
    Freezer::detect(&Roots::host()).cleanup();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The counter loop as a job command whose worker is a grandchild of schedkit: commands get
/// PDEATHSIG, so only what they fork can outlive a killed run (frozen, if it was).
fn gang_job(count: &Path) -> String {
    format!(
        "[[process]]\nname = \"{name}\"\nthreads = 2\ncommand = [\"sh\", \"-c\", \"sh -c 'i=0; while :; do i=$((i+1)); if [ $((i % 200)) -eq 0 ]; then echo $i > {f}; fi; done' & wait\"]\n",
        name = count.file_name().unwrap().to_string_lossy(),
        f = count.display()
    )
}

/// Helper run in a child copy of this test binary: a real gang run of two command jobs.
#[test]
#[ignore = "helper of sigkilled_gang_run_is_thawed_by_restore"]
fn helper_gang_run() {
    let Ok(dir) = std::env::var("SCHEDKIT_GANG_HELPER") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let text = format!(
        "cores = 2\n[policy]\nname = \"gang\"\nquantum = \"100ms\"\n[run]\nhorizon = \"60s\"\n{}{}",
        gang_job(&dir.join("a")),
        gang_job(&dir.join("b"))
    );
    let sc = schedkit_core::Scenario::parse("gang-kill.toml", &text).unwrap();
    let mut opts = RunOptions::new(RunPolicy::Gang {
        quantum: sc.policy().quantum(),
    });
    opts.state_dir = dir.clone();
    opts.perf = false;
    let _ = engine::run(&sc, opts);
}

#[test]
fn sigkilled_gang_run_is_thawed_by_restore() {
    let _serial = serial();
    if !root() {
        eprintln!("skipped: gang runs write cgroups: needs root");
        return;
    }
    // Two jobs of two threads need two slots: on a machine (or CPU set) wider than 2 CPUs
    // they would share one slot and nothing would ever be frozen.
    let cpus = schedkit_linux::affinity::get_thread(0)
        .unwrap()
        .iter()
        .count();
    if cpus != 2 {
        eprintln!("skipped: needs exactly 2 usable CPUs (has {cpus}); run under taskset -c 0,1");
        return;
    }
    let dir = state_dir("gangkill");
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_gang_run", "--ignored", "--nocapture"])
        .env("SCHEDKIT_GANG_HELPER", &dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = helper.id();
    let (v2, v1) = mounts(&Roots::host());
    let bases: Vec<PathBuf> = [v2, v1]
        .into_iter()
        .flatten()
        .map(|m| m.join(format!("schedkit-{pid}")))
        .collect();
    let frozen_jobs = || -> usize {
        bases
            .iter()
            .flat_map(|b| std::fs::read_dir(b).into_iter().flatten().flatten())
            .filter(|j| {
                ["cgroup.freeze", "freezer.state"].iter().any(|f| {
                    std::fs::read_to_string(j.path().join(f))
                        .is_ok_and(|v| v.trim() == "1" || v.trim() == "FROZEN")
                })
            })
            .count()
    };
    // Kill it mid-slice, once both jobs run and one of them is frozen.
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no job was ever frozen"
        );
        if read_count(&dir.join("a")) > 0 && read_count(&dir.join("b")) > 0 && frozen_jobs() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(30));
    helper.kill().unwrap(); // SIGKILL: no undo runs
    helper.wait().unwrap();
    assert_eq!(
        frozen_jobs(),
        1,
        "one job stays frozen after the owner died"
    );
    // The job left running progresses and the frozen one does not. A freeze takes a moment
    // to take effect (cgroup.freeze says what was asked), and on a loaded machine the running
    // job may wait for a CPU: look at 300 ms windows until one shows exactly one progressing.
    let t0 = Instant::now();
    let stuck = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no 300 ms window showed one job frozen and the other running"
        );
        let (a0, b0) = (read_count(&dir.join("a")), read_count(&dir.join("b")));
        std::thread::sleep(Duration::from_millis(300));
        let (a1, b1) = (read_count(&dir.join("a")), read_count(&dir.join("b")));
        match (a1 > a0, b1 > b0) {
            (true, false) => break "b",
            (false, true) => break "a",
            _ => continue,
        }
    };
    assert!(!progresses(&dir.join(stuck), Duration::from_millis(300)));
    // `schedkit restore` does exactly this.
    let restored = journal::restore(&dir, &Roots::host(), false).unwrap();
    assert_eq!(restored.len(), 1);
    assert!(
        restored[0].undone.iter().all(|u| u.outcome.is_ok()),
        "{:?}",
        restored[0].undone
    );
    assert_eq!(frozen_jobs(), 0);
    // Restore thawed the frozen job and ended it (the commands ran in the run's job cgroup;
    // before job cgroups, restore only thawed it and left it running): nothing progresses.
    assert!(
        !progresses(&dir.join(stuck), Duration::from_millis(500)),
        "restore ended job {stuck}"
    );
    // The workers outlived the run: end them (they are in the run's job cgroups).
    for b in &bases {
        for j in std::fs::read_dir(b).into_iter().flatten().flatten() {
            if let Ok(procs) = std::fs::read_to_string(j.path().join("cgroup.procs")) {
                for p in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // SAFETY: kill has no memory preconditions.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
            }
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    Freezer::detect(&Roots::host()).cleanup();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_job_exiting_mid_slice_reports_its_status_and_frees_its_slot() {
    let _serial = serial();
    if !root() {
        eprintln!("skipped: gang runs write cgroups: needs root");
        return;
    }
    let cpus = schedkit_linux::affinity::get_thread(0)
        .unwrap()
        .iter()
        .count();
    if cpus != 2 {
        eprintln!("skipped: needs exactly 2 usable CPUs (has {cpus}); run under taskset -c 0,1");
        return;
    }
    let dir = state_dir("exit");
    // Three full-width jobs, three slots; `short` exits with status 3 after ~0.3 s.
    let long = |name: &str| {
        format!(
            "[[process]]\nname = \"{name}\"\nthreads = 2\ncommand = [\"sh\", \"-c\", \"while :; do :; done\"]\n"
        )
    };
    let text = format!(
        "cores = 2\n[policy]\nname = \"gang\"\nquantum = \"50ms\"\n[run]\nhorizon = \"1500ms\"\n\
         [[process]]\nname = \"short\"\nthreads = 2\ncommand = [\"sh\", \"-c\", \"sleep 0.3; exit 3\"]\n{}{}",
        long("x"),
        long("y")
    );
    let sc = schedkit_core::Scenario::parse("gang-exit.toml", &text).unwrap();
    let mut opts = RunOptions::new(RunPolicy::Gang {
        quantum: sc.policy().quantum(),
    });
    opts.state_dir = dir.clone();
    opts.perf = false;
    let o = engine::run(&sc, opts).unwrap();
    let short = o.processes.iter().find(|p| p.name == "short").unwrap();
    // Frozen slots do not run its `sleep`'s clock, so it ends somewhat after 0.3 s.
    assert_eq!(short.exit.as_deref(), Some("exit 3"));
    assert!(
        short.end_ns < 1_400_000_000,
        "short ended at {} ns",
        short.end_ns
    );
    let g = o.gang.expect("gang report");
    assert!(g.switches >= 10, "{g:?}");
    // After `short` left, x and y alternate in the two remaining slots: both got CPU time
    // in nearly equal parts.
    let cpu = |n: &str| -> u64 {
        o.threads
            .iter()
            .filter(|t| t.process == n)
            .map(|t| t.cpu_ns)
            .sum()
    };
    let (x, y) = (cpu("x") as f64, cpu("y") as f64);
    assert!(x > 0.0 && y > 0.0);
    assert!((x / (x + y) - 0.5).abs() < 0.15, "x {x} ns, y {y} ns");
    // Nothing is left frozen or behind.
    assert!(o.undone.iter().all(|u| u.outcome.is_ok()), "{:?}", o.undone);
    let (v2, v1) = mounts(&Roots::host());
    for m in [v2, v1].into_iter().flatten() {
        assert!(!m.join(format!("schedkit-{}", std::process::id())).exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
