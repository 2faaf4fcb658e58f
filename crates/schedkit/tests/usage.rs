//! The way in for a new user: every subcommand's help has examples, `sim` and `compare` list
//! the policies, `schedkit policies` says which engine runs each, `--version` names the
//! commit, the shell completions and man pages are generated (and name every subcommand),
//! and the long commands show progress on a terminal and nothing on a pipe.

mod common;

use common::{root, schedkit};
use schedkit_core::policies::POLICIES;
use std::process::Command;

/// The subcommands of `schedkit`, as a user types them.
const SUBCOMMANDS: &[&str] = &[
    "sim",
    "bench",
    "compare",
    "run",
    "topo",
    "restore",
    "ctl",
    "experiment",
    "policies",
    "completions",
    "man",
];

fn stdout_of(args: &[&str]) -> String {
    let out = schedkit(args);
    assert!(
        out.status.success(),
        "schedkit {args:?}: exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn every_subcommand_help_has_examples() {
    for sub in SUBCOMMANDS {
        let help = stdout_of(&[sub, "--help"]);
        assert!(help.contains("Examples"), "{sub} --help: {help}");
        let examples = help.matches(&format!("$ schedkit {sub}")).count();
        assert!((2..=4).contains(&examples), "{sub}: {examples} examples");
    }
    // The restore page keeps its exit statuses beside the examples.
    assert!(stdout_of(&["restore", "--help"]).contains("Exit status:"));
}

#[test]
fn sim_and_compare_help_list_the_simulator_policies_one_line_each() {
    for sub in ["sim", "compare"] {
        let help = stdout_of(&[sub, "--help"]);
        for p in POLICIES {
            let listed = help
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{} ", p.name)));
            assert_eq!(listed, p.sim, "{sub} --help and {}: {help}", p.name);
        }
    }
}

#[test]
fn policies_prints_each_policy_what_it_does_and_its_engines() {
    let out = stdout_of(&["policies"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), POLICIES.len() + 1, "{out}");
    for p in POLICIES {
        let line = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(p.name.as_str()))
            .unwrap_or_else(|| panic!("{} missing: {out}", p.name));
        assert!(
            line.contains(p.engines()) && line.contains(p.about),
            "{line}"
        );
    }
    let sched_deadline = lines
        .iter()
        .find(|l| l.starts_with("sched-deadline"))
        .unwrap();
    assert!(
        sched_deadline.contains("run ([[task]] files)"),
        "{sched_deadline}"
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with("sjf ") && l.contains(" sim ")));
    assert_eq!(
        stdout_of(&["policies", "--sim"]).lines().count(),
        POLICIES.iter().filter(|p| p.sim).count()
    );
}

#[test]
fn experiment_help_says_what_each_measures() {
    let help = stdout_of(&["experiment", "--help"]);
    for name in [
        "fibers-gauss",
        "exclusive",
        "gang",
        "greedy",
        "global-fairness",
        "tenants",
        "paws",
        "fidelity",
    ] {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {help}"));
        let what = line.trim_start()[name.len()..].trim();
        assert!(
            !what.starts_with("Seed") && !what.starts_with("Table"),
            "{name}: {what}"
        );
    }
}

#[test]
fn version_names_the_commit() {
    let v = stdout_of(&["--version"]);
    assert!(v.starts_with("schedkit "), "{v}");
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        // Built from this checkout: its commit (the build script runs again when HEAD moves).
        Some(h) => assert!(v.contains(&format!("(commit {h})")), "{v} vs {h}"),
        None => assert!(v.contains("(commit unknown)"), "{v}"),
    }
}

#[test]
fn completions_for_every_shell_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
        // Nested subcommands and flags too.
        for word in ["fibers-gauss", "set-weight", "max-events"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let out = schedkit(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn man_pages_for_schedkit_and_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    stdout_of(&["man", "--out", out_dir.to_str().unwrap()]);
    let main = std::fs::read_to_string(out_dir.join("schedkit.1")).expect("schedkit.1");
    assert!(main.contains(".TH schedkit 1"), "{main}");
    for sub in SUBCOMMANDS {
        assert!(main.contains(sub), "schedkit.1 lacks {sub}");
        let page = std::fs::read_to_string(out_dir.join(format!("schedkit-{sub}.1")))
            .unwrap_or_else(|e| panic!("schedkit-{sub}.1: {e}"));
        assert!(page.contains(".TH"), "schedkit-{sub}.1");
        assert!(
            page.contains("Examples"),
            "schedkit-{sub}.1 has no examples"
        );
    }
    // Nested subcommands get their own pages.
    assert!(out_dir.join("schedkit-experiment-gang.1").exists());
    assert!(out_dir.join("schedkit-ctl-set-weight.1").exists());
    // The policies are in the sim page, from the same list.
    let sim = std::fs::read_to_string(out_dir.join("schedkit-sim.1")).unwrap();
    assert!(
        sim.contains("eevdf") && sim.contains("max\\-events"),
        "{sim}"
    );
}

/// The long commands of a tour, small enough for a test (each a second or less).
fn long_commands(out: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut cmds = vec![
        v(&["experiment", "gang", "--sim-only", "--quick", "--out", out]),
        v(&[
            "experiment",
            "greedy",
            "--sim-only",
            "--quick",
            "--out",
            out,
        ]),
        v(&[
            "compare",
            "examples/textbook/rr.toml",
            "--policies",
            "fcfs,rr",
        ]),
        v(&[
            "sim",
            "examples/realtime/sweep.toml",
            "--sweep",
            "seeds=1..3",
            "--utilisations",
            "0.6",
            "--policies",
            "gedf",
        ]),
        v(&["bench", "sim", "--quick", "--repeats", "1", "--only", "rr"]),
    ];
    if common::is_root() {
        // Bounded by its horizon (a bar), and by its command alone (a spinner).
        cmds.push(v(&[
            "run",
            "--wait",
            "--horizon",
            "300ms",
            "--",
            "sleep",
            "1",
        ]));
        cmds.push(v(&["run", "--wait", "--", "sleep", "0.3"]));
    } else {
        eprintln!("not root: `schedkit run` left out of the progress checks");
    }
    cmds
}

/// With stderr a pipe (every script, every CI log), the long commands draw no progress: no
/// carriage return, no escape sequence, no bar.
#[test]
fn long_commands_draw_no_progress_when_stderr_is_not_a_terminal() {
    let d = tempfile::tempdir().unwrap();
    for args in long_commands(d.path().to_str().unwrap()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = schedkit(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {err}");
        assert!(
            !err.contains('\r') && !err.contains('\u{1b}') && !err.contains("ETA"),
            "{args:?} drew progress into a pipe: {err:?}"
        );
    }
}

/// Runs schedkit in the repository root with stderr on a new pseudo-terminal (100 columns)
/// and stdout on a pipe; returns whether it succeeded and what the terminal received.
fn with_stderr_on_a_terminal(args: &[&str]) -> (bool, String) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: plain libc calls on descriptors this function owns; `name` holds the path
    // ptsname_r writes, NUL-terminated.
    let (master, slave) = unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let ws = libc::winsize {
            ws_row: 30,
            ws_col: 100,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        assert_eq!(libc::ioctl(m, libc::TIOCSWINSZ, &ws), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        (std::fs::File::from_raw_fd(m), slave)
    };
    // The master reads until every copy of the terminal's other end is closed (EIO).
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let status = Command::new(common::BIN)
        .args(args)
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(slave)
        .status()
        .expect("run schedkit");
    let got = reader.join().unwrap();
    (status.success(), String::from_utf8_lossy(&got).into_owned())
}

/// With stderr a terminal (stdout need not be one), the same commands show their progress.
#[test]
fn long_commands_show_progress_when_stderr_is_a_terminal() {
    let d = tempfile::tempdir().unwrap();
    for args in long_commands(d.path().to_str().unwrap()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, term) = with_stderr_on_a_terminal(&args);
        assert!(ok, "{args:?}: {term}");
        // Every bar and spinner shows elapsed time or what is left.
        assert!(
            term.contains("ETA") || term.contains("elapsed") || term.contains('<'),
            "{args:?} showed no progress on a terminal: {term:?}"
        );
    }
}
