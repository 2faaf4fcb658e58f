//! The fair-share policies of `schedkit run` on this machine: process-fair shares, cgroups and
//! nice values put back after a normal exit, SIGTERM, and SIGKILL + `schedkit restore`,
//! nice overrides, and the tenants control socket (owner only, weights 1..10000).
//!
//! Needs root (cgroup writes, setuid in the peer-credential test); every test says why it
//! skips otherwise. Each run is 1-3 s.

use schedkit_core::Scenario;
use schedkit_linux::cgroup::{self, CpuController};
use schedkit_linux::ctl::{self, CtlServer, Reply, Request};
use schedkit_linux::engine::{self, RunOptions, RunOutcome, RunPolicy};
use schedkit_linux::journal;
use schedkit_linux::Roots;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{root, serial};

fn state_dir(tag: &str) -> PathBuf {
    common::state_dir("fair", tag)
}

fn scenario(text: &str) -> Scenario {
    Scenario::parse("fair-test.toml", text).expect("scenario")
}

fn run(sc: &Scenario, dir: &Path) -> RunOutcome {
    let mut opts = RunOptions::new(RunPolicy::from_scenario(sc).unwrap());
    opts.state_dir = dir.into();
    opts.perf = false;
    engine::run(sc, opts).expect("run")
}

fn cpu_controller() -> Option<CpuController> {
    cgroup::detect(&Roots::host())
}

/// `schedkit-<pid>` under the cpu controller's mount.
fn parent_cgroup(pid: u32) -> Option<PathBuf> {
    cpu_controller().map(|c| c.mount().join(format!("schedkit-{pid}")))
}

fn nice_of(pid: i32) -> i32 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Field 19 (nice), counted after the command's closing parenthesis.
    let rest = &s[s.rfind(')').map_or(0, |i| i + 2)..];
    rest.split_whitespace()
        .nth(16)
        .and_then(|v| v.parse().ok())
        .unwrap_or(i32::MIN)
}

/// Runs and is not a zombie.
fn alive(pid: i32) -> bool {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rfind(')')
        .and_then(|i| s[i + 2..].chars().next())
        .is_some_and(|st| st != 'Z' && st != 'X')
}

/// Every process below `pid` (through the ppid field of /proc/*/stat).
fn descendants(pid: i32) -> Vec<i32> {
    let ppid = |p: i32| -> Option<i32> {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let rest = &s[s.rfind(')')? + 2..];
        rest.split_whitespace().nth(1)?.parse().ok()
    };
    let all: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let mut out = vec![pid];
    let mut grew = true;
    while grew {
        grew = false;
        for &p in &all {
            if !out.contains(&p) && ppid(p).is_some_and(|pp| out.contains(&pp)) {
                out.push(p);
                grew = true;
            }
        }
    }
    out.remove(0);
    out
}

#[test]
fn process_fair_gives_1_8_20_threads_equal_shares_and_cleans_up() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: process-fair creates cgroups: needs root");
        return;
    }
    let Some(parent) = parent_cgroup(std::process::id()) else {
        eprintln!("skipped: no cgroup hierarchy with the cpu controller");
        return;
    };
    let dir = state_dir("pf");
    let sc = scenario(
        "cores = 2\n[policy]\nname = \"process-fair\"\n[run]\nhorizon = \"2s\"\n\
         [[process]]\nname = \"A\"\nthreads = 1\n\
         [[process]]\nname = \"B\"\nthreads = 8\n\
         [[process]]\nname = \"C\"\nthreads = 20\n",
    );
    let o = run(&sc, &dir);
    let cpu = |p: &str| -> f64 {
        o.threads
            .iter()
            .filter(|t| t.process == p)
            .map(|t| t.cpu_ns as f64)
            .sum()
    };
    let total = cpu("A") + cpu("B") + cpu("C");
    let shares: Vec<f64> = ["A", "B", "C"]
        .iter()
        .map(|p| 100.0 * cpu(p) / total)
        .collect();
    eprintln!(
        "process-fair shares of the job's CPU time: A {:.1} %, B {:.1} %, C {:.1} %",
        shares[0], shares[1], shares[2]
    );
    // Under `default` C would take 20/29 = 69 % and A 3 %: each within 6 points of a third
    // (the machine is shared; the 2-point target is for the 10 s experiment).
    for s in &shares {
        assert!((s - 100.0 / 3.0).abs() < 6.0, "shares {shares:?}");
    }
    let f = o.fair.as_ref().expect("fair report");
    assert_eq!(f.cgroup_weights.len(), 3);
    assert!(!parent.exists(), "cgroups removed after a normal exit");
    assert!(o.undone.iter().all(|u| u.outcome.is_ok()), "{:?}", o.undone);
    assert_eq!(
        journal::restore(&dir, &Roots::host(), false).unwrap().len(),
        0
    );
}

/// process-fair with a command that keeps forking short-lived busy tasks beside a one-thread
/// hog: the report's per-process CPU time, shares and lag are of the kernel's per-cgroup
/// count the run recorded (not of the samples, which miss ended tasks), each row says so, and
/// the job shares add up to the job's CPU time. Compares two numbers the run itself recorded:
/// nothing here depends on timing.
#[test]
fn process_fair_report_takes_each_process_cpu_from_the_kernel() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: process-fair creates cgroups: needs root");
        return;
    }
    if parent_cgroup(std::process::id()).is_none() {
        eprintln!("skipped: no cgroup hierarchy with the cpu controller");
        return;
    }
    let dir = state_dir("kernel-cpu");
    let sc = scenario(
        "cores = 2\n[policy]\nname = \"process-fair\"\n[run]\nhorizon = \"2s\"\n\
         [[process]]\nname = \"forks\"\ncommand = [\"sh\", \"-c\", \"while :; do for i in 1 2 3 4 5 6 7 8; do (j=0; while [ $j -lt 2000 ]; do j=$((j+1)); done) & done; wait; done\"]\n\
         [[process]]\nname = \"hog\"\ncommand = [\"sh\", \"-c\", \"while :; do :; done\"]\n",
    );
    let o = run(&sc, &dir);
    let f = o.fair.as_ref().expect("fair report");
    if f.process_cpu_ns.is_empty() {
        eprintln!(
            "skipped: this machine has no per-cgroup CPU accounting (warnings: {:?})",
            o.warnings
        );
        return;
    }
    let source = f.cpu_accounting.clone().expect("named with the counts");
    let (r, _) = schedkit_linux::honest::report(&o, false);
    let mut sum = 0;
    for (p, row) in r.processes.iter().enumerate() {
        let kernel = f.process_cpu_ns[p].expect("each count read at the end of the window");
        eprintln!(
            "{}: kernel {} ms, sampled {:?} ms, job share {:.1} % (GPS {:.1} %)",
            row.name,
            kernel / 1_000_000,
            row.sampled_cpu_ns.map(|s| s / 1_000_000),
            100.0 * row.job_share,
            100.0 * row.ideal_job_share
        );
        assert_eq!(
            row.cpu_ns, kernel,
            "{}: one source for its CPU time",
            row.name
        );
        assert_eq!(
            row.cpu_source.as_deref(),
            Some(format!("kernel: {source}").as_str())
        );
        assert!(
            row.sampled_cpu_ns.is_some(),
            "the samples' figure kept beside it"
        );
        let ideal = row.lag_ns + kernel as i64;
        assert!(ideal >= 0, "lag is GPS less the kernel's count: {row:?}");
        sum += kernel;
    }
    assert_eq!(r.summary.job_cpu_ns, sum);
    let shares: f64 = r.processes.iter().map(|p| p.job_share).sum();
    assert!((shares - 1.0).abs() < 1e-9, "job shares add up to {shares}");
    // The trim ran as a hosted controller on the same counts.
    assert!(f.trim_writes > 0, "{f:?}");
    for ((key, cpu), kernel) in f.entity_cpu_ns.iter().zip(&f.process_cpu_ns) {
        assert_eq!(Some(*cpu), *kernel, "entity {key} is its process");
    }
    assert!(o.undone.iter().all(|u| u.outcome.is_ok()), "{:?}", o.undone);
    assert_eq!(
        journal::restore(&dir, &Roots::host(), false).unwrap().len(),
        0
    );
}

/// One PFS command job: `sh` (waiting) with two busy `yes`: the two runnable threads get
/// weight 1024 / 2 = 512, nice 3. The second `yes` sets its own nice to 12 after 0.6 s.
fn pfs_scenario(horizon: &str) -> Scenario {
    readjust_scenario("pfs", horizon)
}

fn readjust_scenario(policy: &str, horizon: &str) -> Scenario {
    scenario(&format!(
        "cores = 2\n[policy]\nname = \"{policy}\"\nperiod = \"50ms\"\n[run]\nhorizon = \"{horizon}\"\n\
         [[process]]\nname = \"J\"\ncommand = [\"sh\", \"-c\", \"yes > /dev/null & yes > /dev/null & sleep 0.6; renice -n 12 -p $! > /dev/null; wait\"]\n"
    ))
}

#[test]
fn pfs_sets_nice_and_overrides_a_threads_own_change() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: pfs journals and restores other processes' nice values: needs root");
        return;
    }
    let dir = state_dir("pfs");
    let o = run(&pfs_scenario("1.5s"), &dir);
    let f = o.fair.as_ref().expect("fair report");
    eprintln!(
        "pfs: {} nice changes, {} overrides: {:?}",
        f.nice_changes, f.overrides, f.first_overrides
    );
    assert!(f.nice_changes >= 2, "both yes threads got nice 3");
    assert!(f.overrides >= 1, "the renice to 12 was found and set back");
    assert!(
        f.first_overrides[0].contains("set nice 12"),
        "{:?}",
        f.first_overrides
    );
}

#[test]
fn twrs_overrides_a_threads_own_nice_change() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: twrs journals and restores other processes' nice values: needs root");
        return;
    }
    let dir = state_dir("twrs");
    let o = run(&readjust_scenario("twrs", "1.5s"), &dir);
    let f = o.fair.as_ref().expect("fair report");
    eprintln!(
        "twrs: {} nice changes, {} overrides: {:?}",
        f.nice_changes, f.overrides, f.first_overrides
    );
    // Whatever weight twrs gave it (two threads on two cores: usually its own), the renice
    // to 12 is not what it set: found and set back.
    assert!(f.overrides >= 1);
    assert!(
        f.first_overrides[0].contains("set nice 12"),
        "{:?}",
        f.first_overrides
    );
}

/// Helper run in a child copy of this test binary (see `killed_runs_leave_nothing_behind`).
#[test]
#[ignore = "helper of killed_runs_leave_nothing_behind"]
fn helper_fair_run() {
    let Ok(spec) = std::env::var("SCHEDKIT_FAIR_HELPER") else {
        return;
    };
    let (policy, dir) = spec.split_once(':').unwrap();
    let sc = match policy {
        "pfs" => pfs_scenario("30s"),
        _ => scenario(
            "cores = 2\n[policy]\nname = \"process-fair\"\n[run]\nhorizon = \"30s\"\n\
             [[process]]\nname = \"J\"\ncommand = [\"sh\", \"-c\", \"yes > /dev/null & yes > /dev/null & wait\"]\n\
             [[process]]\nname = \"K\"\nthreads = 2\n",
        ),
    };
    engine::install_signal_handlers();
    let _ = run(&sc, Path::new(dir));
}

/// Starts the helper with `policy`, waits until its job runs as the policy wants, sends
/// `signal`, then (after SIGKILL) runs what `schedkit restore` runs. Returns the `yes`
/// processes that outlived it (to be checked, then killed).
fn kill_helper(policy: &str, signal: i32) -> Vec<i32> {
    let dir = state_dir(&format!("{policy}-{signal}"));
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_fair_run", "--ignored", "--nocapture"])
        .env(
            "SCHEDKIT_FAIR_HELPER",
            format!("{policy}:{}", dir.display()),
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = helper.id();
    let parent = parent_cgroup(pid).unwrap();
    // Ready: process-fair's cgroups hold the yes processes; pfs gave them nice 3.
    let t0 = Instant::now();
    let yes = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "{policy} never took effect"
        );
        let yes: Vec<i32> = descendants(pid as i32)
            .into_iter()
            .filter(|&p| {
                std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "yes")
            })
            .collect();
        let ready = yes.len() == 2
            && match policy {
                "pfs" => yes.iter().all(|&y| nice_of(y) == 3),
                _ => parent.exists(),
            };
        if ready {
            break yes;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, signal) };
    helper.wait().unwrap();
    if signal == libc::SIGKILL {
        // Its journal is left; the `yes` processes (grandchildren, no PDEATHSIG) survive in
        // the state the run gave them.
        if policy == "pfs" {
            assert!(
                yes.iter().any(|&y| nice_of(y) == 3),
                "nice still changed after SIGKILL"
            );
        } else {
            assert!(parent.exists(), "cgroups still there after SIGKILL");
        }
        let r = journal::restore(&dir, &Roots::host(), false).unwrap();
        assert_eq!(r.len(), 1, "one journal left by the killed run");
        assert!(
            r[0].undone.iter().all(|u| u.outcome.is_ok()),
            "{:?}",
            r[0].undone
        );
    }
    assert!(!parent.exists(), "{policy}: cgroups removed ({signal})");
    assert!(
        journal::restore(&dir, &Roots::host(), false)
            .unwrap()
            .is_empty(),
        "no journal left"
    );
    yes
}

#[test]
fn killed_runs_leave_nothing_behind() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: the runs create cgroups and renice other processes: needs root");
        return;
    }
    if cpu_controller().is_none() {
        eprintln!("skipped: no cgroup hierarchy with the cpu controller");
        return;
    }
    for policy in ["process-fair", "pfs"] {
        // SIGTERM: the run undoes everything itself and ends its job.
        let left = kill_helper(policy, libc::SIGTERM);
        let t0 = Instant::now();
        while left.iter().any(|&y| alive(y)) && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !left.iter().any(|&y| alive(y)),
            "{policy}: SIGTERM ends the job"
        );
        // SIGKILL + restore: the job ends with it (its processes ran in the run's job
        // cgroup, which restore kills; before job cgroups, restore only moved them out and
        // reset their nice values), and the cgroups are gone (checked in kill_helper).
        let left = kill_helper(policy, libc::SIGKILL);
        let t0 = Instant::now();
        while left.iter().any(|&y| alive(y)) && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !left.iter().any(|&y| alive(y)),
            "{policy}: restore after SIGKILL ends the job"
        );
    }
}

/// A tenants run in a thread of this process; `f` talks to it over its socket. Without the
/// share trim, so that the weight files change only when a request changes them.
fn with_tenants_run(dir: &Path, f: impl FnOnce(&Path)) -> RunOutcome {
    let sc = scenario(
        "cores = 2\n[policy]\nname = \"tenants\"\nperiod = \"100ms\"\ntrim = false\n[run]\nhorizon = \"20s\"\n\
         [[group]]\nname = \"vm1\"\nweight = 1\n[[group]]\nname = \"vm2\"\nweight = 3\n\
         [[process]]\nname = \"P1\"\nthreads = 2\ngroup = \"vm1\"\n\
         [[process]]\nname = \"P2\"\nthreads = 2\ngroup = \"vm2\"\n",
    );
    common::with_run_in_thread(sc, dir, f)
}

fn kernel_values(sock: &Path) -> Vec<Option<u64>> {
    let r = ctl::request(sock, &Request::Status).unwrap();
    r.status
        .unwrap()
        .groups
        .iter()
        .map(|g| g.kernel_value)
        .collect()
}

#[test]
fn ctl_refuses_bad_weights_and_unknown_groups_and_changes_nothing() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: tenants creates cgroups: needs root");
        return;
    }
    if cpu_controller().is_none() {
        eprintln!("skipped: no cgroup hierarchy with the cpu controller");
        return;
    }
    let dir = state_dir("ctl");
    let o = with_tenants_run(&dir, |sock| {
        let mode = std::fs::metadata(sock).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        let before = kernel_values(sock);
        for (group, weight) in [("vm1", 0), ("vm1", 10_001), ("nope", 5)] {
            let r = ctl::request(
                sock,
                &Request::SetWeight {
                    group: group.into(),
                    weight,
                },
            )
            .unwrap();
            assert!(!r.ok, "{group} {weight} refused");
            eprintln!("refused: {}", r.error.unwrap());
        }
        assert_eq!(kernel_values(sock), before, "nothing changed");
        let r = ctl::request(
            sock,
            &Request::SetWeight {
                group: "vm1".into(),
                weight: 5,
            },
        )
        .unwrap();
        assert!(r.ok, "{r:?}");
        let after = kernel_values(sock);
        assert_ne!(after[0], before[0], "vm1's weight file changed");
        assert_eq!(after[1], before[1]);
    });
    let f = o.fair.unwrap();
    assert_eq!(f.weight_changes.len(), 1, "one change in the timeline");
    assert_eq!(f.weight_changes[0].weight, 5);
    assert!(o.events.iter().any(|e| matches!(
        e,
        schedkit_core::trace::Event::GroupWeightChange { weight: 5, .. }
    )));
    assert!(!f.ctl_socket.unwrap().exists(), "socket removed at the end");
}

/// Connects to `path` as uid 65534 in a forked child and sends a request; the child's exit
/// status: 0 the run answered "permission denied", 1 it answered something else, 2 connect
/// failed, 3 setuid failed. Only async-signal-safe calls after fork (this test binary has
/// other threads).
fn connect_as_nobody(path: &Path) -> i32 {
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr
        .sun_path
        .iter_mut()
        .zip(path.as_os_str().as_encoded_bytes())
    {
        *d = *s as libc::c_char;
    }
    let req = b"{\"op\":\"set-weight\",\"group\":\"vm1\",\"weight\":7}\n";
    let needle = b"permission denied";
    // SAFETY: the child only makes raw system calls on stack data prepared before fork.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                libc::_exit(3);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                libc::_exit(2);
            }
            libc::write(fd, req.as_ptr() as *const libc::c_void, req.len());
            let mut buf = [0u8; 512];
            let mut got = 0usize;
            loop {
                let n = libc::read(
                    fd,
                    buf[got..].as_mut_ptr() as *mut libc::c_void,
                    buf.len() - got,
                );
                if n <= 0 {
                    break;
                }
                got += n as usize;
                if got == buf.len() {
                    break;
                }
            }
            let hit = buf[..got].windows(needle.len()).any(|w| w == needle);
            libc::_exit(if hit { 0 } else { 1 });
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        libc::WEXITSTATUS(status)
    }
}

#[test]
fn ctl_from_another_uid_is_refused() {
    let _s = serial();
    if !root() {
        eprintln!("skipped: switching to uid 65534 needs root");
        return;
    }
    // 1. The run's real socket: mode 0600 in a 0700 directory keeps uid 65534 out.
    if cpu_controller().is_some() {
        let dir = state_dir("uid");
        let o = with_tenants_run(&dir, |sock| {
            assert_eq!(
                connect_as_nobody(sock),
                2,
                "connect refused by the file modes"
            );
        });
        assert!(o.fair.unwrap().weight_changes.is_empty(), "nothing changed");
    } else {
        eprintln!("part 1 skipped: no cgroup hierarchy with the cpu controller");
    }
    // 2. The credential check itself, with the file modes opened wide: still refused.
    let dir = state_dir("peercred");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut srv = CtlServer::bind_at(&dir.join("open.sock"), 0o666).unwrap();
    let path = srv.path().to_path_buf();
    let child = std::thread::spawn(move || connect_as_nobody(&path));
    let mut served = Vec::new();
    let t0 = Instant::now();
    while !child.is_finished() && t0.elapsed() < Duration::from_secs(10) {
        srv.poll(|r| {
            served.push(r);
            Reply::done("should not happen")
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        child.join().unwrap(),
        0,
        "uid 65534 was told permission denied"
    );
    assert!(served.is_empty(), "the request never reached the handler");
    assert_eq!(srv.counts().refused, 1);
}
