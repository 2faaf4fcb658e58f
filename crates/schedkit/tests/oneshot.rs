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
use schedkit_linux::lease::Hold;
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

/// A process spinning on a CPU in a process group of its own: the group (whatever it
/// started too) is ended and the process reaped when dropped, also when an assertion fails,
/// so a failed test never leaves a real-time spinner behind.
struct Spinner(Child);

impl Spinner {
    fn start() -> Spinner {
        Spinner::of(Command::new("sh").args(["-c", "while :; do :; done"]))
    }
    fn of(cmd: &mut Command) -> Spinner {
        use std::os::unix::process::CommandExt;
        Spinner(cmd.process_group(0).spawn().expect("start a spinner"))
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        // SAFETY: a signal to the test's own process group.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
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
    // Held: a live exclusive run would move the command off the CPUs this test gives it.
    let _lease = common::machine_lease(Hold::Shared, "fifo and CPUs reach a command");
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
    // Held: a live exclusive run would move the command off the CPUs this test gives it.
    let _lease = common::machine_lease(Hold::Shared, "fifo and CPUs reach a running process");
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
    assert!(
        text(&o).contains(&format!("process {pid} (sh) was attached")),
        "restore names the attached process it left running: {}",
        text(&o)
    );
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
    // The spinner's "before" must be the machine's, not another exclusive run's; and this
    // process's CPUs are counted once no exclusive run has moved them.
    common::wait_for_the_machine("a running spinner in exclusive mode");
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

#[test]
fn deadline_reaches_the_command() {
    if !is_root() {
        eprintln!("skipped: SCHED_DEADLINE needs root (CAP_SYS_NICE)");
        return;
    }
    if !Path::new("/usr/bin/chrt").exists() {
        eprintln!("skipped: chrt (util-linux) is not installed");
        return;
    }
    // Held: a live exclusive run would move the command off the CPUs this test gives it.
    let _lease = common::machine_lease(Hold::Shared, "SCHED_DEADLINE reaches a command");
    let state = tempfile::tempdir().unwrap();
    let o = schedkit(
        &[
            "run",
            "--policy",
            "deadline",
            "--runtime",
            "1ms",
            "--period",
            "10ms",
            "--",
            "sh",
            "-c",
            "chrt -p $$",
        ],
        state.path(),
    );
    let t = text(&o);
    if o.status.code() == Some(3) && t.contains("admission control") {
        eprintln!("skipped: other deadline tasks hold this machine's bandwidth: {t}");
        return;
    }
    assert!(o.status.success(), "{t}");
    assert!(t.contains("SCHED_DEADLINE"), "{t}");
    assert!(t.contains("1000000/10000000/10000000"), "{t}");
    assert!(
        t.contains("SCHED_RESET_ON_FORK"),
        "the note and the flag: {t}"
    );
}

#[test]
fn exclusive_keeps_a_commands_own_real_time_priority() {
    let _m = machine();
    if is_root() {
        common::wait_for_the_machine("exclusive mode keeps a command's priority");
    }
    if !is_root() || allowed_cpus().len() < 2 || !Path::new("/usr/bin/chrt").exists() {
        eprintln!("skipped: needs root, two allowed CPUs and chrt");
        return;
    }
    let state = tempfile::tempdir().unwrap();
    // The command raises itself to FIFO 80 (as cyclictest -p 80 does) and reports.
    let o = schedkit(
        &[
            "run",
            "--exclusive",
            "--wait",
            "120s",
            "--",
            "chrt",
            "-f",
            "80",
            "sh",
            "-c",
            "sleep 0.3; chrt -p $$",
        ],
        state.path(),
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("scheduling priority: 80"),
        "exclusive mode kept the command's own priority: {t}"
    );
}

#[test]
fn cgroup_weight_and_nice_for_a_while_and_back() {
    let _m = machine();
    if !is_root() {
        eprintln!("skipped: writing a cgroup's weight needs root");
        return;
    }
    // Held: the attach takes the shared lease itself and is refused (exit 4) beside a live
    // exclusive run; this queues instead.
    let _lease = common::machine_lease(Hold::Shared, "a cgroup's weight for a while");
    let Some(ctl) = schedkit_linux::cgroup::detect(&schedkit_linux::Roots::host()) else {
        eprintln!("skipped: no cpu controller mounted");
        return;
    };
    let (file, tasks, v2) = match ctl {
        schedkit_linux::cgroup::CpuController::V2(_) => ("cpu.weight", "cgroup.procs", true),
        schedkit_linux::cgroup::CpuController::V1(_) => ("cpu.shares", "tasks", false),
    };
    let dir = ctl
        .mount()
        .join(format!("schedkit-test-oneshot-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    // Removed when the test ends, a failed assertion included (declared before the spinner,
    // so the spinner is gone first and the group is empty).
    let _group = RemoveGroup(dir.clone());
    let spin = Spinner::start();
    std::fs::write(dir.join(tasks), spin.pid().to_string()).unwrap();
    let before = std::fs::read_to_string(dir.join(file)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let d = dir.to_string_lossy().to_string();
    let mut sk = attach(
        &["run", "--cgroup", &d, "--weight", "50", "--nice", "4"],
        state.path(),
    );
    let during = std::fs::read_to_string(dir.join(file)).unwrap();
    assert_eq!(during.trim(), if v2 { "50" } else { "512" });
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", spin.pid())).unwrap();
    let f: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    assert_eq!(f[19 - 3], "4", "nice of the group's process");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(sk.id() as i32, libc::SIGTERM) };
    assert!(wait_exit(&mut sk, Duration::from_secs(30)).success());
    assert_eq!(std::fs::read_to_string(dir.join(file)).unwrap(), before);
    assert!(alive(spin.pid()));
    drop(spin);
}

/// A test's own cgroup, removed on drop once its last task is gone (a reaped task leaves the
/// group a moment later, hence the retries).
struct RemoveGroup(std::path::PathBuf);

impl Drop for RemoveGroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The children of `pid` (through `/proc/PID/task/*/children`).
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let f = t.path().join("children");
        if let Ok(s) = std::fs::read_to_string(f) {
            out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
        }
    }
    out
}

#[test]
fn pid_children_started_later_get_the_change_and_their_elders_settings_back() {
    let _m = machine();
    if !is_root() {
        eprintln!("skipped: changing another process to SCHED_FIFO needs root");
        return;
    }
    // Held: a live exclusive run would move the command off the CPUs this test gives it.
    let _lease = common::machine_lease(Hold::Shared, "a running process's later children");
    let Some(cpu) = pin_cpu() else {
        eprintln!("skipped: sched_getaffinity failed");
        return;
    };
    // A parent that starts a spinning child when told to (a line on its stdin).
    let mut parent = Spinner::of(
        Command::new("sh")
            .args(["-c", "read x; sh -c 'while :; do :; done' & wait"])
            .stdin(Stdio::piped()),
    );
    let pid = parent.pid();
    let before = kernel_view(pid);
    let state = tempfile::tempdir().unwrap();
    let (pid_s, cpu_s) = (pid.to_string(), cpu.to_string());
    let mut sk = attach(
        &[
            "run",
            "--pid",
            &pid_s,
            "--policy",
            "fifo",
            "--priority",
            "10",
            "--cpus",
            &cpu_s,
        ],
        state.path(),
    );
    {
        use std::io::Write;
        let mut stdin = parent.0.stdin.take().unwrap();
        writeln!(stdin, "go").unwrap();
    }
    let t0 = Instant::now();
    let child = loop {
        if let Some(&c) = children(pid).first() {
            break c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no child started");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        kernel_view(child),
        (libc::SCHED_FIFO, 10, vec![cpu]),
        "born with the change"
    );
    // Long enough for several polls to journal it (a gate, not a measurement).
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(sk.id() as i32, libc::SIGTERM) };
    assert!(wait_exit(&mut sk, Duration::from_secs(30)).success());
    assert_eq!(kernel_view(pid), before);
    assert_eq!(
        kernel_view(child),
        before,
        "the child got what its parent had before schedkit, not the inherited change"
    );
    assert!(alive(child) && alive(pid));
    // The parent's group (the child too) ends when `parent` drops.
}
