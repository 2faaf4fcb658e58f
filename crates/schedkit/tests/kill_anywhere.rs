//! The faults that matter on a shared machine, tried for real: two exclusive runs at once,
//! and `kill -9` of schedkit at any instant (start-up included) of each kind of run, with
//! commands that fork, double-fork and `setsid` away from their process group.
//!
//! After `schedkit restore`, nothing of the job may be alive, no cgroup directory schedkit
//! created may remain, and IRQ masks, RT throttling and a bystander's affinity must be as
//! before. These tests change machine state, so they need root (they say so and skip
//! otherwise) and at least two usable CPUs (exclusive mode keeps one for the system). They
//! take the machine lease themselves (`--wait`), so another schedkit run live on the machine
//! only delays them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;

use common::{is_root, BIN};

/// One test at a time: each compares machine state before and after.
static MACHINE: Mutex<()> = Mutex::new(());

fn usable_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid argument.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return 1;
        }
        libc::CPU_COUNT(&set) as usize
    }
}

fn skip_unless_root_and_two_cpus(what: &str) -> bool {
    // A live exclusive run (another test's, or one a person started) has moved this
    // process to its system CPU: count the CPUs once it has ended.
    common::wait_for_the_machine(what);
    if !is_root() {
        eprintln!(
            "skipped: {what} changes machine state (IRQs, cgroups, other threads): needs root"
        );
        return true;
    }
    let n = usable_cpus();
    if n < 2 {
        eprintln!("skipped: {what} needs two usable CPUs (exclusive mode keeps one for the system); this process may use {n}");
        return true;
    }
    false
}

fn start(args: &[&str], state: &Path) -> Child {
    Command::new(BIN)
        .args(args)
        .env("SCHEDKIT_STATE_DIR", state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn schedkit(args: &[&str], state: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .env("SCHEDKIT_STATE_DIR", state)
        .output()
        .unwrap()
}

/// Live processes whose command line contains `marker` (zombies are dead: left out).
fn alive_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, r)| r.chars().next())
            .unwrap_or('?');
        if state != 'Z' && state != 'X' {
            out.push(pid);
        }
    }
    out
}

/// Every `schedkit-<pid>` directory under every cgroup mount.
fn schedkit_cgroups(pid: u32) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = Vec::new();
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if !right.starts_with("cgroup") {
            continue;
        }
        let Some(mp) = left.split_whitespace().nth(4) else {
            continue;
        };
        let d = Path::new(mp).join(format!("schedkit-{pid}"));
        if d.exists() {
            out.push(d);
        }
    }
    out
}

#[derive(Debug, PartialEq)]
struct MachineState {
    irqs: Vec<(String, String)>,
    rt_runtime: String,
    rr_timeslice: String,
    bystander: String,
}

/// The machine's state read while this test holds the exclusive machine lease, so that no
/// other schedkit run (another test binary's, or one a person started beside the suite) has
/// IRQs or affinities moved at that instant; the lease is released before returning, so the
/// runs under test can take it.
fn machine_state(bystander: i32) -> MachineState {
    // (Also waits for a dead run's un-restored IRQ masks and throttling: another user's
    // killed run holds no lease, but its changes are not the machine's.)
    let _lease = common::still_machine("kill_anywhere: reading machine state");
    let mut irqs = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        if let Ok(m) = std::fs::read_to_string(e.path().join("smp_affinity")) {
            irqs.push((e.file_name().to_string_lossy().to_string(), m));
        }
    }
    irqs.sort();
    let status = std::fs::read_to_string(format!("/proc/{bystander}/status")).unwrap_or_default();
    MachineState {
        irqs,
        rt_runtime: std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap(),
        rr_timeslice: std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms").unwrap(),
        bystander: status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap_or("")
            .to_string(),
    }
}

/// A scenario file of `kind` whose processes are shell commands carrying `marker`: one
/// forks a child, one double-forks and `setsid`s away from its process group.
fn scenario(dir: &Path, kind: &str, marker: &str) -> PathBuf {
    let policy = match kind {
        "rr" => "name = \"rr\"\nquantum = \"5ms\"",
        "process-fair" => "name = \"process-fair\"",
        "tenants" => "name = \"tenants\"\nperiod = \"100ms\"",
        "twrs" => "name = \"twrs\"\nperiod = \"100ms\"",
        "global-fair" => "name = \"global-fair\"\nperiod = \"100ms\"",
        "gang" => "name = \"gang\"\nquantum = \"50ms\"",
        _ => "name = \"default\"",
    };
    let groups = if kind == "tenants" {
        "[[group]]\nname = \"g1\"\nweight = 1\n[[group]]\nname = \"g2\"\nweight = 2\n"
    } else {
        ""
    };
    let group_of = |g: &str| {
        if kind == "tenants" {
            format!("group = \"{g}\"\n")
        } else {
            String::new()
        }
    };
    let text = format!(
        "cores = 2\n[policy]\n{policy}\n[run]\nhorizon = \"10s\"\n{groups}\
         [[process]]\nname = \"forks\"\n{}command = [\"sh\", \"-c\", \"sleep {marker}1 & exec sleep {marker}2\"]\n\
         [[process]]\nname = \"daemon\"\n{}command = [\"sh\", \"-c\", \"(setsid sh -c 'sleep {marker}3 & exec sleep {marker}4' &); exec sleep {marker}5\"]\n",
        group_of("g1"),
        group_of("g2"),
    );
    let p = dir.join(format!("{kind}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// Starts `args`, SIGKILLs schedkit after `after`, runs `restore`, and checks that nothing
/// of the run is left.
fn kill_and_restore(args: &[&str], after: Duration, marker: &str, label: &str) {
    let state = tempfile::tempdir().unwrap();
    // The bystander must be born with the machine's own CPUs: not beside a live exclusive
    // run, whose undo would give it other CPUs than it had "before".
    common::wait_for_the_machine(label);
    let bystander = Command::new("sleep").arg("600").spawn().unwrap();
    let before = machine_state(bystander.id() as i32);
    let mut child = start(args, state.path());
    let pid = child.id();
    std::thread::sleep(after);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    let out = schedkit(&["restore"], state.path());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The job may still be dying (SIGKILL is asynchronous): give it a moment.
    let t0 = Instant::now();
    while !alive_with(marker).is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = alive_with(marker);
    let dirs = schedkit_cgroups(pid);
    let after_state = machine_state(bystander.id() as i32);
    let mut by = bystander;
    let _ = by.kill();
    let _ = by.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{label}: restore failed:\n{text}"
    );
    assert!(
        left.is_empty(),
        "{label}: job processes alive after restore: {left:?}\n{text}"
    );
    assert!(
        dirs.is_empty(),
        "{label}: cgroup directories left: {dirs:?}\n{text}"
    );
    assert_eq!(
        after_state, before,
        "{label}: machine state differs after restore\n{text}"
    );
}

#[test]
fn sigkill_at_any_instant_of_each_kind_of_run_leaves_nothing_after_restore() {
    // The lock first: an exclusive run of another test narrows this process's CPUs.
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    if skip_unless_root_and_two_cpus("killing runs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A marker per test process, so a concurrent test run's sleeps are not counted.
    let marker = format!("86{}.", std::process::id() % 10_000);
    let kinds = [
        "default",
        "rr",
        "process-fair",
        "tenants",
        "twrs",
        "global-fair",
        "gang",
    ];
    let instants = [
        Duration::from_millis(100),
        Duration::from_millis(1000),
        Duration::from_millis(3000),
    ];
    for kind in kinds {
        let file = scenario(dir.path(), kind, &marker);
        let f = file.to_str().unwrap();
        for at in instants {
            let label = format!("{kind} killed at {at:?}");
            eprintln!("{label}");
            kill_and_restore(&["run", "--wait", "--no-perf", f], at, &marker, &label);
        }
    }
    // Exclusive mode with a command that double-forks.
    let cmd =
        format!("sleep {marker}1 & (setsid sh -c 'exec sleep {marker}3' &); exec sleep {marker}2");
    for at in instants {
        let label = format!("exclusive killed at {at:?}");
        eprintln!("{label}");
        kill_and_restore(
            &[
                "run",
                "--exclusive",
                "--wait",
                "--no-perf",
                "--horizon",
                "10s",
                "--",
                "sh",
                "-c",
                &cmd,
            ],
            at,
            &marker,
            &label,
        );
    }
}

#[test]
fn sigkill_during_start_up_never_lets_a_command_escape() {
    // The lock first: an exclusive run of another test narrows this process's CPUs.
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    if skip_unless_root_and_two_cpus("killing runs") {
        return;
    }
    let marker = format!("87{}.", std::process::id() % 10_000);
    let cmd = format!("(setsid sh -c 'exec sleep {marker}1' &); exec sleep {marker}2");
    // Instants spread over start-up: before the journal, between the fork and the gate,
    // and just after the release (a run's start-up takes a few ms to a few tens of ms).
    for i in 0..40u64 {
        let at = Duration::from_micros(500 + i * 1_250);
        kill_and_restore(
            &[
                "run",
                "--no-perf",
                "--horizon",
                "10s",
                "--",
                "sh",
                "-c",
                &cmd,
            ],
            at,
            &marker,
            &format!("default command killed {at:?} into start-up"),
        );
    }
}

/// `Cpus_allowed_list` of `pid` as a set.
fn allowed(pid: i32) -> Option<BTreeSet<usize>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let l = s.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    let mut out = BTreeSet::new();
    for part in l.split(':').nth(1)?.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => {
                out.insert(part.parse().ok()?);
            }
        }
    }
    Some(out)
}

#[test]
fn a_second_exclusive_run_refuses_naming_the_first_and_never_moves_its_job() {
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    if skip_unless_root_and_two_cpus("two exclusive runs") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let marker = format!("88{}.", std::process::id() % 10_000);
    // The first run must take the lease when started, so that the second finds it holding.
    common::wait_for_the_machine("two exclusive runs");
    // The first run: a spinning job (and a sleep to find it by).
    let spin = format!("sleep {marker}1 & while :; do :; done");
    let mut first = start(
        &[
            "run",
            "--exclusive",
            "--wait",
            "--no-perf",
            "--horizon",
            "3s",
            "--",
            "sh",
            "-c",
            &spin,
        ],
        state.path(),
    );
    // Wait until the first job is placed (its sleep exists and is off CPU 0).
    let t0 = Instant::now();
    let job = loop {
        // (schedkit's own command line carries the marker too, on the system CPU.)
        if let Some(p) = alive_with(&marker)
            .into_iter()
            .find(|&p| allowed(p).is_some_and(|a| !a.contains(&0)))
        {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the first run never placed its job"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let second_state = tempfile::tempdir().unwrap();
    let out = schedkit(&["run", "--exclusive", "--", "true"], second_state.path());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(4), "second run: {err}");
    assert!(
        err.contains(&format!("pid {}", first.id())),
        "the refusal names the holder: {err}"
    );
    // The first job never had the system CPU, before or after the refusal.
    for _ in 0..20 {
        if let Some(a) = allowed(job) {
            assert!(
                !a.contains(&0),
                "the first run's job got the system CPU: {a:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    // With --wait, a second run queues and runs once the first has ended.
    let t = Instant::now();
    let out = schedkit(
        &["run", "--exclusive", "--wait", "--no-perf", "--", "true"],
        second_state.path(),
    );
    let waited = t.elapsed();
    let status = first.wait().unwrap();
    assert!(status.success(), "first run failed");
    assert_eq!(
        out.status.code(),
        Some(0),
        "queued run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("the queued run finished {waited:?} after it started (it waited for the first)");
}

#[test]
fn keep_running_leaves_the_command_and_nothing_else() {
    let marker = format!("89{}.", std::process::id() % 10_000);
    let state = tempfile::tempdir().unwrap();
    // (The kept command inherits schedkit's stdout and stderr: not pipes we could wait on.)
    let status = Command::new(BIN)
        .args([
            "run",
            "--keep-running",
            "--no-perf",
            "--horizon",
            "200ms",
            "--",
            "sleep",
        ])
        .arg(format!("{marker}1"))
        .env("SCHEDKIT_STATE_DIR", state.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let left = alive_with(&marker);
    for &p in &left {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    assert_eq!(left.len(), 1, "the kept command runs on after the run");
    // And without it the command ends with the run.
    let out = schedkit(
        &[
            "run",
            "--no-perf",
            "--horizon",
            "200ms",
            "--",
            "sleep",
            &format!("{marker}2"),
        ],
        state.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(alive_with(&format!("{marker}2")).is_empty());
}
