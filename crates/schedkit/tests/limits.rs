//! What `schedkit sim` refuses or warns about before simulating: scenarios without work or
//! whose work starts after the horizon (exit 2, the line with a caret), durations far beyond
//! the horizon (a warning), unknown keys (a suggestion), the event budget (the scenarios that
//! never finished now exit 2 at once, naming the keys), and the command-line overrides
//! (checked as the file's keys are).

mod common;

use common::{json_of, schedkit};
use std::path::Path;
use std::process::Output;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `sim` on `text` with `args`; asserts exit 2 and returns stderr.
fn refused(text: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "s.toml", text);
    let mut all = vec!["sim", file.as_str()];
    all.extend_from_slice(args);
    let out = schedkit(&all);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn the_scenarios_that_never_finished_are_refused_naming_their_keys() {
    let par: Vec<&str> = vec!["\"1us\""; 10_000];
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a 1 ns RR quantum",
            "[policy]\nname = \"rr\"\nquantum = \"1ns\"\n[[process]]\nname = \"a\"\n".into(),
            "policy.quantum",
        ),
        (
            "a 1 ns period",
            "[policy]\nname = \"edf\"\n[[task]]\nname = \"t\"\nperiod = \"1ns\"\nwcet = \"1ns\"\n"
                .into(),
            "task.period",
        ),
        (
            "10,000 parallel regions at a 1 us period",
            format!(
                "cores = 4\n[policy]\nname = \"gedf\"\n[[task]]\nname = \"t\"\nperiod = \"1us\"\nregions = [{{ par = [{}] }}]\n",
                par.join(", ")
            ),
            "task.period",
        ),
        (
            "gang, 1,000,000 threads on 1,048,576 cores",
            "cores = 1048576\n[policy]\nname = \"gang\"\n[[process]]\nname = \"big\"\nthreads = 1000000\n"
                .into(),
            "cores",
        ),
        (
            "CFS granularities of 1 ns",
            "[policy]\nname = \"cfs\"\nsched_latency = \"1ns\"\nmin_granularity = \"1ns\"\n[[process]]\nname = \"a\"\n[[process]]\nname = \"b\"\n"
                .into(),
            "policy.min_granularity",
        ),
        (
            "a 9e9 s horizon",
            "[policy]\nname = \"cfs\"\n[run]\nhorizon = \"9000000000s\"\n[[process]]\nname = \"a\"\n"
                .into(),
            "run.horizon",
        ),
    ];
    for (what, text, key) in cases {
        let err = refused(&text, &[]);
        assert!(err.contains("--max-events"), "{what}: {err}");
        assert!(err.contains(key), "{what}: want {key} in {err}");
        assert!(err.contains("simulation steps"), "{what}: {err}");
    }
}

#[test]
fn max_events_moves_the_budget() {
    let err = refused(
        &std::fs::read_to_string(common::root().join("examples/textbook/rr.toml")).unwrap(),
        &["--max-events", "10"],
    );
    assert!(err.contains("beyond the budget of 10"), "{err}");
    let out = schedkit(&["sim", "examples/textbook/rr.toml", "--max-events", "100000"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_scenario_without_work_is_an_error() {
    for text in ["", "cores = 2\n[policy]\nname = \"cfs\"\n"] {
        let err = refused(text, &[]);
        assert!(
            err.contains("s.toml:1:1: `process`: nothing to run"),
            "{err}"
        );
    }
    // The sweep's base file says what it is for.
    let out = schedkit(&["sim", "examples/realtime/sweep.toml"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--sweep seeds=A..B"), "{err}");
    // ... and still runs with --sweep.
    let out = schedkit(&[
        "sim",
        "examples/realtime/sweep.toml",
        "--sweep",
        "seeds=1..2",
        "--utilisations",
        "0.5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn work_that_starts_after_the_horizon_is_an_error_with_a_caret() {
    let err = refused(
        "[run]\nhorizon = \"40ms\"\n[[process]]\nname = \"late\"\narrival = \"50ms\"\n",
        &[],
    );
    assert!(err.contains("s.toml:5:11: `process.arrival`"), "{err}");
    assert!(err.contains("arrival = \"50ms\""), "{err}");
    assert!(err.contains("^^^^^^"), "{err}");
    // A command-line horizon meets the same check.
    let err = refused(
        "[[process]]\nname = \"late\"\narrival = \"50ms\"\n",
        &["--horizon", "40ms"],
    );
    assert!(err.contains("`process.arrival`"), "{err}");
}

#[test]
fn a_duration_far_beyond_the_horizon_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "minutes.toml",
        "[run]\nhorizon = \"40ms\"\n[[process]]\nname = \"a\"\nburst = \"8m\"\n",
    );
    let out = schedkit(&["sim", &file, "--json"]);
    let err = stderr(&out);
    json_of(&out);
    assert!(err.contains("warning"), "{err}");
    assert!(err.contains("minutes.toml:5:9: `process.burst`"), "{err}");
    assert!(err.contains("`m` is minutes"), "{err}");
    assert!(err.contains("^^^^"), "{err}");
}

#[test]
fn an_unknown_key_gets_did_you_mean_and_a_caret() {
    let err = refused("[[process]]\nname = \"a\"\nbrust = \"8ms\"\n", &[]);
    assert!(err.contains("did you mean `burst`?"), "{err}");
    assert!(err.contains("brust = \"8ms\""), "{err}");
    assert!(err.contains("^^^^^"), "{err}");
    let err = refused("[policy]\nname = \"eevfd\"\n", &[]);
    assert!(err.contains("did you mean \"eevdf\"?"), "{err}");
}

#[test]
fn policy_cores_horizon_and_seed_override_the_file() {
    let v = json_of(&schedkit(&[
        "sim",
        "examples/textbook/rr.toml",
        "--policy",
        "srtf",
        "--json",
    ]));
    assert_eq!(v["policy"], "srtf", "{v}");
    let v = json_of(&schedkit(&[
        "sim",
        "examples/quickstart.toml",
        "--cores",
        "4",
        "--horizon",
        "100ms",
        "--seed",
        "7",
        "--json",
    ]));
    assert_eq!(v["cores"], 4, "{v}");
    // Checked as the file's keys: the same fields and messages.
    let text = "cores = 2\n[[process]]\nname = \"a\"\ncpus = [1]\n";
    let err = refused(text, &["--cores", "1"]);
    assert!(
        err.contains("s.toml: cores: process \"a\" (line 2)"),
        "{err}"
    );
    let err = refused(text, &["--cores", "0"]);
    assert!(err.contains("between 1 and 1048576"), "{err}");
    let err = refused(text, &["--policy", "fifo"]);
    assert!(err.contains("policy.name: unknown policy"), "{err}");
    let err = refused(text, &["--horizon", "0ms"]);
    assert!(
        err.contains("run.horizon: must be greater than zero"),
        "{err}"
    );
    let err = refused(text, &["--horizon", "8"]);
    assert!(err.contains("--horizon"), "{err}");
}

/// Whether `pid` has a handler for SIGINT (bit 1 of `SigCgt` in /proc/PID/status).
fn catches_sigint(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let mask = s
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))?
                .trim()
                .to_string();
            u64::from_str_radix(&mask, 16).ok()
        })
        .is_some_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
}

#[test]
fn ctrl_c_stops_a_long_simulation_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    // About 10^11 slice ends: hours, so it is still running when interrupted.
    let file = write(
        dir.path(),
        "long.toml",
        "[policy]\nname = \"rr\"\nquantum = \"1us\"\n[run]\nhorizon = \"100000s\"\n[[process]]\nname = \"a\"\n[[process]]\nname = \"b\"\n",
    );
    let gantt = dir.path().join("long.svg");
    let mut child = std::process::Command::new(common::BIN)
        .args(["sim", &file, "--max-events", "1000000000000"])
        .arg("--gantt")
        .arg(&gantt)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the simulation has its handler (not before: the default action kills).
    while !catches_sigint(child.id()) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before it was interrupted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted at") && err.contains("nothing written"),
        "{err}"
    );
    assert!(out.stdout.is_empty() && !gantt.exists());
}

#[test]
fn compare_checks_the_file_and_the_budget_of_each_policy() {
    let dir = tempfile::tempdir().unwrap();
    // A 1 ns quantum costs nothing under fcfs and sjf, and would never finish under rr.
    let file = write(
        dir.path(),
        "q.toml",
        "[policy]\nname = \"fcfs\"\nquantum = \"1ns\"\n[[process]]\nname = \"a\"\nburst = \"1s\"\n",
    );
    let out = schedkit(&["compare", &file, "--policies", "fcfs,sjf"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = schedkit(&["compare", &file, "--policies", "fcfs,rr"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("q.toml:3:11: `policy.quantum`") && err.contains("--max-events"),
        "{err}"
    );
    let empty = write(dir.path(), "empty.toml", "");
    let out = schedkit(&["compare", &empty, "--policies", "fcfs"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
