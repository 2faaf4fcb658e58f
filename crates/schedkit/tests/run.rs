//! `schedkit run` end to end: the report schema equals `sim`'s, bad input changes nothing and
//! exits 2, and a run killed with SIGKILL is undone by `schedkit restore`.
//!
//! These tests change machine state (IRQ masks, other threads' affinities, RT throttling) and
//! compare it before and after, so they take one lock and run one at a time.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static MACHINE: Mutex<()> = Mutex::new(());

mod common;

use common::{is_root, BIN};

/// Runs `schedkit ARGS` with its journal in `state` (so a test's restore sees only its own).
fn schedkit(args: &[&str], state: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .env("SCHEDKIT_STATE_DIR", state)
        .output()
        .unwrap()
}

/// Everything exclusive mode may change.
#[derive(Debug, PartialEq)]
struct MachineState {
    irqs: Vec<(String, String)>,
    rt_runtime: String,
    affinities: Vec<(i32, String)>,
}

fn machine_state(pids: &[i32]) -> MachineState {
    let mut irqs = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        let p = e.path().join("smp_affinity");
        if let Ok(m) = std::fs::read_to_string(&p) {
            irqs.push((e.file_name().to_string_lossy().to_string(), m));
        }
    }
    irqs.sort();
    let rt_runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    let affinities = pids
        .iter()
        .map(|&p| {
            let s = std::fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
            let l = s
                .lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .unwrap_or("")
                .to_string();
            (p, l)
        })
        .collect();
    MachineState {
        irqs,
        rt_runtime,
        affinities,
    }
}

fn keys(v: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{prefix}.{k}");
                out.insert(p.clone());
                keys(x, &p, out);
            }
        }
        serde_json::Value::Array(a) => {
            if let Some(x) = a.first() {
                keys(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

const SCENARIO: &str = r#"
cores = 2
[policy]
name = "POLICY"
[run]
horizon = "3s"
[[group]]
name = "g"
[[process]]
name = "spin"
work = "spin"
threads = 2
burst = "40ms"
group = "g"
[[process]]
name = "walk"
work = "stride"
array = "1MB"
stride = "4160B"
arrival = "20ms"
burst = "40ms"
"#;

#[test]
fn run_and_sim_reports_have_the_same_keys() {
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    // The real run measures CPU time on two cores: no exclusive run may narrow them.
    let Some(_lease) = common::shared_machine_with(2, "a two-core real run") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sim_f = dir.path().join("sim.toml");
    let run_f = dir.path().join("run.toml");
    std::fs::write(&sim_f, SCENARIO.replace("POLICY", "fcfs")).unwrap();
    std::fs::write(&run_f, SCENARIO.replace("POLICY", "default")).unwrap();
    let sim = schedkit(&["sim", sim_f.to_str().unwrap(), "--json"], dir.path());
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let run = schedkit(&["run", run_f.to_str().unwrap(), "--json"], dir.path());
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let sim: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    let run: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let (mut a, mut b) = (BTreeSet::new(), BTreeSet::new());
    keys(&sim, "", &mut a);
    keys(&run, "", &mut b);
    assert_eq!(a, b);
    assert!(a.contains(".summary.max_abs_lag_ns") && a.contains(".threads[].turnaround_ns"));
    // The real run really ran: every thread finished with its 40 ms of CPU (the trace may be
    // short by up to one 10 ms sample period).
    assert_eq!(run["engine"], "run");
    let threads = run["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3);
    for t in threads {
        let cpu = t["cpu_ns"].as_u64().unwrap();
        assert!((30_000_000..=60_000_000).contains(&cpu), "{t}");
        assert!(t["finish_ns"].as_u64().is_some(), "{t}");
    }
    assert!(run["processes"][1]["work_done"].as_u64().unwrap() > 0);
}

#[test]
fn bad_input_exits_2_and_changes_nothing() {
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    // The machine's state is compared before and after: not while another run changes it.
    // (Not held: the refused runs here are `--exclusive --wait`.)
    common::wait_for_the_machine("bad input changes nothing");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let before = machine_state(&[1]);
    let cpus_f = dir.path().join("cpus.toml");
    std::fs::write(
        &cpus_f,
        "cores = 4096\n[policy]\nname = \"exclusive\"\n[[process]]\nname = \"a\"\ncpus = [4000]\nburst = \"10ms\"\n",
    )
    .unwrap();
    let nocmd_f = dir.path().join("nocmd.toml");
    std::fs::write(
        &nocmd_f,
        "[policy]\nname = \"default\"\n[[process]]\nname = \"a\"\ncommand = [\"/nonexistent/schedkit-no-such-prog\"]\n",
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "run",
                "--exclusive",
                "--wait",
                "--",
                "schedkit-no-such-command-xyz",
            ],
            "not found",
        ),
        (vec!["run", nocmd_f.to_str().unwrap()], "not found"),
        (
            vec!["run", cpus_f.to_str().unwrap()],
            "CPU 4000 does not exist",
        ),
        (
            vec![
                "run",
                "--exclusive",
                "--wait",
                "--system-cores",
                "77",
                "--",
                "true",
            ],
            "does not exist",
        ),
        (
            vec![
                "run",
                "--exclusive",
                "--wait",
                "--priority",
                "100",
                "--",
                "true",
            ],
            "100",
        ),
        (
            vec![
                "run",
                "--exclusive",
                "--wait",
                "--priority",
                "0",
                "--",
                "true",
            ],
            "0",
        ),
        (
            vec!["run", "/nonexistent/scenario.toml"],
            "cannot read scenario",
        ),
        (
            vec!["run", "--sample-budget", "0", "--", "true"],
            "--sample-budget",
        ),
        (
            vec!["run", "--sample-budget", "lots", "--", "true"],
            "--sample-budget",
        ),
        (vec!["run", "--sample", "2s", "--", "true"], "--sample"),
    ];
    for (args, needle) in cases {
        let out = schedkit(&args, &state);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        // One clear line (clap adds usage lines for its own errors; ours are one line).
        if !args.contains(&"--priority") {
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        }
    }
    assert_eq!(machine_state(&[1]), before);
    assert!(!state.exists() || std::fs::read_dir(&state).unwrap().next().is_none());
}

#[test]
fn sigkilled_exclusive_run_is_undone_by_restore() {
    if !is_root() {
        eprintln!("skipped: exclusive mode moves IRQs and other threads, which needs root");
        return;
    }
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    // "Before" must be the machine's own state, not another exclusive run's.
    common::wait_for_the_machine("a killed exclusive run");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // A bystander process whose affinity exclusive mode will narrow.
    let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
    let by = bystander.id() as i32;
    let before = machine_state(&[1, by]);
    let mut run = Command::new(BIN)
        .args([
            "run",
            "--exclusive",
            "--wait",
            "--rt-throttle",
            "off",
            "--horizon",
            "20s",
            "--",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .env("SCHEDKIT_STATE_DIR", &state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the changes are in force.
    let t0 = Instant::now();
    loop {
        let now = machine_state(&[1, by]);
        if now.rt_runtime.trim() == "-1" && now.affinities != before.affinities {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "exclusive mode never took effect: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let during = machine_state(&[1, by]);
    run.kill().unwrap(); // SIGKILL
    run.wait().unwrap();
    assert_ne!(during, before, "the run changed nothing to restore");
    // The job died with schedkit (PDEATHSIG); the journal is still there.
    let journals: Vec<_> = std::fs::read_dir(&state).unwrap().flatten().collect();
    assert_eq!(journals.len(), 1);
    let out = schedkit(&["restore"], &state);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = machine_state(&[1, by]);
    bystander.kill().ok();
    bystander.wait().ok();
    assert_eq!(after, before, "restore left differences");
    assert!(std::fs::read_dir(&state).unwrap().next().is_none());
    // A second restore finds nothing.
    let out = schedkit(&["restore"], &state);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"));
}

#[test]
fn without_privileges_explicit_features_exit_3_and_implicit_ones_fall_back() {
    // Drop to `nobody` with no capabilities (needs root to drop, and setpriv).
    let Some(setpriv) = common::setpriv_as_root() else {
        return;
    };
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // `nobody` must be able to read the scenario and write its state dir.
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::process::Command::new("chmod")
        .args(["-R", "a+rwx", dir.path().to_str().unwrap()])
        .status()
        .unwrap();
    let scen = dir.path().join("s.toml");
    std::fs::write(&scen, SCENARIO.replace("POLICY", "default")).unwrap();
    let fcfs = dir.path().join("f.toml");
    std::fs::write(&fcfs, SCENARIO.replace("POLICY", "fcfs")).unwrap();
    std::process::Command::new("chmod")
        .args(["a+r", scen.to_str().unwrap(), fcfs.to_str().unwrap()])
        .status()
        .unwrap();
    let unpriv = |args: &[&str]| {
        Command::new(setpriv)
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                BIN,
            ])
            .args(args)
            .env("SCHEDKIT_STATE_DIR", &state)
            .output()
            .unwrap()
    };
    if !unpriv(&["--version"]).status.success() {
        eprintln!(
            "skipped: user nobody cannot execute {} (a parent directory is private)",
            BIN
        );
        return;
    }
    common::wait_for_the_machine("unprivileged runs change nothing");
    let before = machine_state(&[1]);
    for args in [
        vec!["run", "--exclusive", "--wait", "--", "true"],
        vec!["run", fcfs.to_str().unwrap()],
    ] {
        let out = unpriv(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains("CAP_SYS_NICE") && err.contains("setcap"),
            "{err}"
        );
    }
    // The default policy needs nothing: it runs (perf counters the kernel refuses are
    // reported as such, not fatal).
    let out = unpriv(&["run", scen.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(machine_state(&[1]), before);
}

#[test]
fn topo_json_describes_this_machine() {
    let out = Command::new(BIN).args(["topo", "--json"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_eq!(v["online"], online.trim());
    assert!(!v["cpus"].as_array().unwrap().is_empty());
    let table = Command::new(BIN).arg("topo").output().unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("SMT siblings"));
}

#[test]
fn horizon_ends_the_whole_job_even_fifo_spinners_in_background() {
    if !is_root() {
        eprintln!("skipped: exclusive mode needs root");
        return;
    }
    let _g = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    common::wait_for_the_machine("fifo spinners end with the horizon");
    let dir = tempfile::tempdir().unwrap();
    let before = machine_state(&[1]);
    let marker = format!("schedkit-bg-spin-{}", std::process::id());
    let script =
        format!("sleep 0.1; (while :; do :; done) & (while :; do :; done) & wait # {marker}");
    let t0 = Instant::now();
    let out = schedkit(
        &[
            "run",
            "--exclusive",
            "--wait",
            "--rt-throttle",
            "off",
            "--horizon",
            "700ms",
            "--",
            "sh",
            "-c",
            &script,
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Two FIFO-99 spinners share the one job CPU with their waiting parent: ending them must
    // not hang (they are demoted, then the process group is killed).
    assert!(t0.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(100));
    let left = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
    assert_eq!(machine_state(&[1]), before);
}

/// This thread's `Cpus_allowed_list`.
fn own_cpus() -> String {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .unwrap_or("")
        .to_string()
}

/// Starts threads from one spawner thread every 2 ms until `stop`; each lives until `stop`
/// and then reports its own `Cpus_allowed_list` (what a test harness or a server does beside
/// an exclusive run).
fn spawn_threads_until(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let mut children = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let stop = stop.clone();
            children.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                own_cpus()
            }));
            std::thread::sleep(Duration::from_millis(2));
        }
        children.into_iter().map(|c| c.join().unwrap()).collect()
    })
}

/// Whether this thread may use two CPUs or more (exclusive mode needs one for the system
/// and one for the job); says why it skips otherwise.
fn two_cpus_or_skip(cpus: &str) -> bool {
    let list = cpus.trim_start_matches("Cpus_allowed_list:").trim();
    if list.chars().all(|c| c.is_ascii_digit()) {
        eprintln!("skipped: this test may use one CPU ({list}); exclusive mode needs two");
        return false;
    }
    true
}

/// A bystander of an exclusive run: a process (this test) that starts threads all the time,
/// with the machine lock held and a state directory of its own. `None` (the reason printed)
/// where the test cannot run: not root, or fewer than two CPUs.
struct Bystander {
    _machine: std::sync::MutexGuard<'static, ()>,
    before: String,
    _dir: tempfile::TempDir,
    state: std::path::PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    spawner: std::thread::JoinHandle<Vec<String>>,
}

impl Bystander {
    fn start() -> Option<Bystander> {
        if !is_root() {
            eprintln!("skipped: exclusive mode moves other threads, which needs root");
            return None;
        }
        let machine = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
        // This thread's CPUs as the machine gives them, not as a live exclusive run left
        // them (it moves every thread, this test's too, to its system CPUs).
        common::wait_for_the_machine("threads born beside an exclusive run");
        let before = own_cpus();
        if !two_cpus_or_skip(&before) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spawner = spawn_threads_until(stop.clone());
        Some(Bystander {
            _machine: machine,
            before,
            _dir: dir,
            state,
            stop,
            spawner,
        })
    }

    /// Stops the spawner a moment after the run (threads born just after it must inherit
    /// the machine again too) and checks that no thread kept a pin.
    fn finish(self) {
        std::thread::sleep(Duration::from_millis(50));
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let masks = self.spawner.join().unwrap();
        let pinned: Vec<_> = masks.iter().filter(|m| **m != self.before).collect();
        assert!(
            pinned.is_empty(),
            "{} of {} threads kept a pin after the run (want {:?}): {:?}",
            pinned.len(),
            masks.len(),
            self.before,
            pinned.iter().take(3).collect::<Vec<_>>()
        );
        assert_eq!(own_cpus(), self.before);
    }
}

#[test]
fn threads_born_during_a_killed_exclusive_run_get_the_machine_back_from_restore() {
    // As below, but schedkit is killed with SIGKILL while threads are being born: no last
    // sweep ever names those born after its previous sweep, and `restore` must still give
    // them back what their process had.
    let Some(b) = Bystander::start() else {
        return;
    };
    let mut run = Command::new(BIN)
        .args([
            "run",
            "--exclusive",
            "--wait",
            "--horizon",
            "20s",
            "--",
            "sleep",
            "20",
        ])
        .env("SCHEDKIT_STATE_DIR", &b.state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until this process's threads are moved, then let more be born pinned.
    let t0 = Instant::now();
    while own_cpus() == b.before {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "exclusive mode never moved this test's threads"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    run.kill().unwrap(); // SIGKILL: no last sweep, no undo
    run.wait().unwrap();
    let out = schedkit(&["restore"], &b.state);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.finish();
}

#[test]
fn threads_born_during_an_exclusive_run_get_the_machine_back() {
    // A process that starts threads all the time (a test harness, a server) is a bystander
    // of an exclusive run: its threads born while the run holds the job CPUs inherit the
    // system CPUs, including those born between the run's last sweep and its undo. After
    // the run every one of them must have what its process had.
    let Some(b) = Bystander::start() else {
        return;
    };
    let out = schedkit(
        &["run", "--exclusive", "--wait", "--", "sleep", "0.5"],
        &b.state,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.finish();
}
