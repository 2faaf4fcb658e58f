//! One-command mode (`schedkit run --policy fifo --priority 10 --cpus 1 -- CMD`) and work
//! already running (`schedkit run --pid PID ...`): every flag reaches the command and what
//! it starts, or is refused with exit 2 (bad combination) or 3 (missing right or kernel
//! support); an attached process gets its settings back at schedkit's exit and after a
//! `kill -9` of schedkit plus `schedkit restore`, and is never ended by either.
//!
//! The kernel's view is read with libc (`sched_getscheduler`, `sched_getparam`,
//! `sched_getaffinity`), not through schedkit's own wrappers.

mod common;

use common::{is_root, BIN};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The root tests change real threads' classes and CPUs (exclusive mode moves every thread
/// of the machine): one at a time, or one would sweep another's spinner.
static MACHINE: Mutex<()> = Mutex::new(());

fn machine() -> std::sync::MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The CPUs this test may use.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; the call writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// (policy, priority, CPUs) of `pid` as the kernel has them.
fn kernel_view(pid: i32) -> (i32, i32, Vec<usize>) {
    // SAFETY: plain queries into valid, writable structures.
    unsafe {
        let policy = libc::sched_getscheduler(pid);
        let mut p: libc::sched_param = std::mem::zeroed();
        libc::sched_getparam(pid, &mut p);
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        let cpus = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        // SCHED_RESET_ON_FORK may be or'ed into the policy.
        (policy & !0x4000_0000, p.sched_priority, cpus)
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

fn schedkit(args: &[&str], state: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .env("SCHEDKIT_STATE_DIR", state)
        .output()
        .expect("run schedkit")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A process spinning on a CPU, ended (and reaped) when dropped.
struct Spinner(Child);

impl Spinner {
    fn start() -> Spinner {
        Spinner(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("start a spinner"),
        )
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `schedkit ARGS` (an attach) and waits until it says its changes are in force
/// (its notice line on stderr), so the test looks at the kernel only then. Returns the
/// child, still running, with the rest of stderr drained by a thread.
fn attach(args: &[&str], state: &Path) -> Child {
    let mut child = Command::new(BIN)
        .args(args)
        .env("SCHEDKIT_STATE_DIR", state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start schedkit");
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("[schedkit] {line}");
            if line.contains("thread(s) of") {
                let _ = tx.send(());
            }
        }
    });
    // Exclusive mode may queue behind another run's lease (--wait), and moves every
    // thread of the machine first: generous, since this is a gate, not a measurement.
    rx.recv_timeout(Duration::from_secs(180))
        .expect("schedkit said its changes are in force");
    child
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t0.elapsed() < within, "schedkit did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The CPU to pin to: 1 when allowed (the example), else the highest allowed one.
fn pin_cpu() -> Option<usize> {
    let a = allowed_cpus();
    if a.contains(&1) {
        Some(1)
    } else {
        a.last().copied()
    }
}

#[test]
fn fifo_priority_and_cpus_reach_the_command_and_its_children() {
    let _m = machine();
    if !is_root() {
        eprintln!("skipped: SCHED_FIFO needs root (CAP_SYS_NICE)");
        return;
    }
    let Some(cpu) = pin_cpu() else {
        eprintln!("skipped: sched_getaffinity failed");
        return;
    };
    if Path::new("/usr/bin/chrt").exists() && Path::new("/usr/bin/taskset").exists() {
        let state = tempfile::tempdir().unwrap();
        let cpu_s = cpu.to_string();
        let o = schedkit(
            &[
                "run",
                "--policy",
                "fifo",
                "--priority",
                "10",
                "--cpus",
                &cpu_s,
                "--",
                "sh",
                "-c",
                "chrt -p $$; taskset -p $$; sh -c 'chrt -p $$; taskset -p $$'",
            ],
            state.path(),
        );
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        let out = String::from_utf8_lossy(&o.stdout);
        let mask = format!("{:x}", 1u64 << cpu);
        // The command and the child it started.
        assert_eq!(
            out.matches("scheduling policy: SCHED_FIFO").count(),
            2,
            "{t}"
        );
        assert_eq!(out.matches("scheduling priority: 10").count(), 2, "{t}");
        assert_eq!(
            out.matches(&format!("affinity mask: {mask}\n")).count(),
            2,
            "{t}"
        );
    } else {
        eprintln!("skipped: chrt and taskset (util-linux) are not installed");
    }
}

#[test]
fn nice_batch_and_idle_reach_the_command() {
    // Raising nice and these classes need no privilege.
    let state = tempfile::tempdir().unwrap();
    let o = schedkit(
        &[
            "run",
            "--policy",
            "batch",
            "--nice",
            "7",
            "--",
            "sh",
            "-c",
            "cat /proc/$$/stat",
        ],
        state.path(),
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let out = String::from_utf8_lossy(&o.stdout);
    let stat = out.lines().find(|l| l.contains(") ")).expect("a stat line");
    let f: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // After the comm: state is field 3; nice is 19, policy 41.
    assert_eq!(f[19 - 3], "7", "nice: {stat}");
    assert_eq!(f[41 - 3], "3", "SCHED_BATCH is policy 3: {stat}");
}

#[test]
fn bad_combinations_exit_2_and_change_nothing() {
    let state = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--priority", "10"], "--policy fifo"),
        (
            &["--policy", "batch", "--priority", "3"],
            "no real-time priority",
        ),
        (&["--policy", "fifo"], "needs --priority"),
        (&["--policy", "fifo", "--priority", "100"], "100"),
        (
            &["--policy", "rr", "--priority", "5", "--nice", "2"],
            "no nice value",
        ),
        (&["--runtime", "1ms"], "--policy deadline"),
        (
            &[
                "--policy",
                "deadline",
                "--runtime",
                "5ms",
                "--period",
                "1ms",
            ],
            "runtime",
        ),
        (&["--policy", "deadline", "--runtime", "1ms"], "--period"),
        (&["--cpus", "4000"], "not among the CPUs"),
        (&["--cpus", "x"], "--cpus"),
        (
            &["--policy", "fifo", "--priority", "5", "--weight", "100"],
            "does not act on real-time",
        ),
        (&["--exclusive", "--cpus", "0"], "--system-cores"),
        (
            &["--exclusive", "--policy", "rr", "--priority", "3"],
            "SCHED_FIFO",
        ),
        (&["--for", "1s"], "--pid"),
    ];
    for (flags, says) in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "true"]);
        let o = schedkit(&args, state.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(says), "{args:?} should say {says:?}: {t}");
    }
    // Flags of one command with a scenario file.
    let o = schedkit(
        &[
            "run",
            "--policy",
            "batch",
            &common::root()
                .join("examples/quickstart.toml")
                .to_string_lossy(),
        ],
        state.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // --pid of nothing.
    let o = schedkit(&["run", "--pid", "999999999", "--nice", "3"], state.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Nothing was left behind.
    assert_eq!(std::fs::read_dir(state.path()).map_or(0, |d| d.count()), 0);
}

#[test]
fn a_unit_without_systemd_exits_3() {
    if Path::new("/run/systemd/system").is_dir() {
        eprintln!("skipped: systemd runs on this machine");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let o = schedkit(
        &["run", "--unit", "ssh.service", "--nice", "3"],
        state.path(),
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("systemd is not running"), "{t}");
}

#[test]
fn without_privilege_real_time_exits_3() {
    let Some(setpriv) = common::setpriv_as_root() else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        state.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let o = Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            BIN,
            "run",
            "--policy",
            "fifo",
            "--priority",
            "10",
            "--",
            "true",
        ])
        .env("SCHEDKIT_STATE_DIR", state.path().join("nobody"))
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("CAP_SYS_NICE"), "{t}");
}

#[test]
fn pid_of_a_running_spinner_gets_fifo_and_cpus_and_them_back() {
    let _m = machine();
    if !is_root() {
        eprintln!("skipped: changing another process to SCHED_FIFO needs root");
        return;
    }
    let Some(cpu) = pin_cpu() else {
        eprintln!("skipped: sched_getaffinity failed");
        return;
    };
    let spin = Spinner::start();
    let pid = spin.pid();
    let pid_s = pid.to_string();
    let cpu_s = cpu.to_string();
    let before = kernel_view(pid);
    assert_eq!(before.0, libc::SCHED_OTHER);
    let state = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--pid",
        &pid_s,
        "--policy",
        "fifo",
        "--priority",
        "10",
        "--cpus",
        &cpu_s,
    ];

    // 1. Until schedkit exits (SIGTERM).
    let mut sk = attach(&args, state.path());
    assert_eq!(kernel_view(pid), (libc::SCHED_FIFO, 10, vec![cpu]));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(sk.id() as i32, libc::SIGTERM) };
    let st = wait_exit(&mut sk, Duration::from_secs(30));
    assert!(st.success(), "schedkit exit {st:?}");
    assert_eq!(kernel_view(pid), before, "settings given back at exit");
    assert!(alive(pid), "the attached process keeps running");

    // 2. kill -9 of schedkit, then `schedkit restore`.
    let mut sk = attach(&args, state.path());
    assert_eq!(kernel_view(pid), (libc::SCHED_FIFO, 10, vec![cpu]));
    sk.kill().unwrap();
    sk.wait().unwrap();
    assert!(
        alive(pid),
        "a killed schedkit does not take the work with it"
    );
    assert_eq!(
        kernel_view(pid),
        (libc::SCHED_FIFO, 10, vec![cpu]),
        "nothing undid the changes yet"
    );
    let o = schedkit(&["restore"], state.path());
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kernel_view(pid), before, "restore gave the settings back");
    std::thread::sleep(Duration::from_millis(100));
    assert!(alive(pid), "restore leaves the attached process running");
}

#[test]
fn pid_of_a_running_spinner_in_exclusive_mode_and_back() {
    let _m = machine();
    if !is_root() {
        eprintln!("skipped: exclusive mode needs root");
        return;
    }
    if allowed_cpus().len() < 2 {
        eprintln!("skipped: exclusive mode needs two allowed CPUs");
        return;
    }
    let spin = Spinner::start();
    let pid = spin.pid();
    let pid_s = pid.to_string();
    let before = kernel_view(pid);
    let state = tempfile::tempdir().unwrap();
    // Another schedkit run may hold the machine: queue behind it.
    let args = ["run", "--pid", &pid_s, "--exclusive", "--wait", "120s"];

    let mut sk = attach(&args, state.path());
    let (policy, prio, cpus) = kernel_view(pid);
    assert_eq!((policy, prio), (libc::SCHED_FIFO, 99));
    assert_eq!(cpus.len(), 1, "pinned to one job CPU: {cpus:?}");
    assert_ne!(cpus, vec![0], "never on the system CPU");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(sk.id() as i32, libc::SIGINT) };
    let st = wait_exit(&mut sk, Duration::from_secs(60));
    assert!(st.success(), "schedkit exit {st:?}");
    assert_eq!(kernel_view(pid), before, "out of exclusive mode at exit");
    assert!(alive(pid));

    // kill -9 in exclusive mode, then restore.
    let mut sk = attach(&args, state.path());
    assert_eq!(kernel_view(pid).0, libc::SCHED_FIFO);
    sk.kill().unwrap();
    sk.wait().unwrap();
    let o = schedkit(&["restore"], state.path());
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        kernel_view(pid),
        before,
        "restore took it out of exclusive mode"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(alive(pid));
}
