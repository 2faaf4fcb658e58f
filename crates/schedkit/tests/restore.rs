//! `schedkit restore` end to end: exit status and wording when journals are good, unusable,
//! corrupt or planted with unsafe paths, and when the state directory is refused. The fake
//! tree (`SCHEDKIT_ROOT_PREFIX`) lists a temporary directory as a cgroup2 mount; the case on
//! the real machine needs root and says so when it skips.

mod common;

use common::{is_root, BIN};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn restore(state: &Path, prefix: Option<&Path>, extra: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.arg("restore")
        .args(extra)
        .env("SCHEDKIT_STATE_DIR", state);
    match prefix {
        Some(p) => c.env("SCHEDKIT_ROOT_PREFIX", p),
        None => c.env_remove("SCHEDKIT_ROOT_PREFIX"),
    };
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `dir/proc/self/mountinfo` lists `dir/cg` as cgroup2; `dir/proc/sys/kernel/knob` is "-1";
/// `dir/state` is an empty 0700 directory.
fn fake_tree(dir: &Path) -> PathBuf {
    for d in ["proc/self", "proc/sys/kernel", "cg", "state"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::write(
        dir.join("proc/self/mountinfo"),
        format!(
            "41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            dir.join("cg").display()
        ),
    )
    .unwrap();
    fs::write(dir.join("proc/sys/kernel/knob"), "-1").unwrap();
    let state = dir.join("state");
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    state
}

fn plant(state: &Path, name: &str, pid: i32, lines: &[String]) -> PathBuf {
    let mut t = format!("{{\"journal\":1,\"pid\":{pid},\"starttime\":0}}\n");
    for l in lines {
        t += l;
        t.push('\n');
    }
    let p = state.join(name);
    fs::write(&p, t).unwrap();
    p
}

#[test]
fn good_journals_exit_0_and_a_second_restore_finds_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let state = fake_tree(tmp.path());
    let cg = tmp.path().join("cg/schedkit-7");
    fs::create_dir(&cg).unwrap();
    plant(
        &state,
        "journal-7.jsonl",
        7,
        &[
            format!(r#"{{"op":"mkdir","path":"{}"}}"#, cg.display()),
            r#"{"op":"sysctl","name":"kernel/knob","old":"5"}"#.into(),
            // A cgroup file whose directory is gone: nothing to do, not a failure.
            format!(
                r#"{{"op":"file","path":"{}","old":"100"}}"#,
                tmp.path().join("cg/schedkit-gone/cpu.weight").display()
            ),
            r#"{"op":"sysctl","na"#.into(),
        ],
    );
    drop(std::os::unix::net::UnixListener::bind(state.join("7.sock")).unwrap());
    let out = restore(&state, Some(tmp.path()), &[]);
    let so = text(&out.stdout);
    eprintln!("{so}{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{so}");
    assert!(
        so.contains("journal-7.jsonl: run 7 — 2 change(s) undone, 1 already as they were (object gone or unchanged), 0 failed, torn last line skipped (its change was never made)"),
        "{so}"
    );
    assert!(
        so.contains("7.sock: removed (control socket of a run that is gone)"),
        "{so}"
    );
    assert!(!cg.exists());
    assert_eq!(
        fs::read_to_string(tmp.path().join("proc/sys/kernel/knob")).unwrap(),
        "5"
    );
    let out = restore(&state, Some(tmp.path()), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("nothing to restore in"));
}

#[test]
fn mixed_journals_exit_1_naming_each_bad_one_and_undo_the_good_one() {
    let tmp = tempfile::tempdir().unwrap();
    let state = fake_tree(tmp.path());
    let victim = tmp.path().join("victim");
    fs::write(&victim, "untouched").unwrap();
    let cg = tmp.path().join("cg/schedkit-10");
    fs::create_dir(&cg).unwrap();
    plant(
        &state,
        "journal-10.jsonl",
        10,
        &[format!(r#"{{"op":"mkdir","path":"{}"}}"#, cg.display())],
    );
    fs::write(state.join("journal-11.jsonl"), "").unwrap();
    fs::write(
        state.join("journal-12.jsonl"),
        [0xff, 0x00, 0x13, 0x37, b'\n', 0x80],
    )
    .unwrap();
    fs::create_dir(state.join("journal-13.jsonl")).unwrap();
    plant(
        &state,
        "journal-14.jsonl",
        14,
        &[
            r#"{"op":"sysctl","name":"kernel/knob","old":"5"}"#.into(),
            "{\"op\":\"sysctl\" GARBAGE".into(),
            r#"{"op":"sysctl","name":"kernel/knob","old":"5"}"#.into(),
        ],
    );
    plant(
        &state,
        "journal-15.jsonl",
        15,
        &[
            r#"{"op":"sysctl","name":"../../victim","old":"owned"}"#.into(),
            format!(
                r#"{{"op":"file","path":"{}","old":"owned"}}"#,
                victim.display()
            ),
        ],
    );
    let out = restore(&state, Some(tmp.path()), &[]);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    eprintln!("{so}{se}");
    assert_eq!(out.status.code(), Some(1), "{so}{se}");
    let has = |s: &str| assert!(so.contains(s), "missing {s:?} in:\n{so}");
    has("journal-10.jsonl: run 10 — 1 change(s) undone, 0 already as they were (object gone or unchanged), 0 failed");
    has("journal-11.jsonl: unusable: empty file (no header); set aside as ");
    has("journal-11.jsonl.bad");
    has("journal-12.jsonl: unusable: not a schedkit journal (the first line is no journal header); set aside as ");
    has("journal-13.jsonl: unusable: is a directory, not a journal; set aside as ");
    has("journal-14.jsonl: run 14 — 1 change(s) undone, 1 already as they were (object gone or unchanged), 0 failed, 1 corrupt line(s)");
    has("  line 3: corrupt (not an entry); the change it described cannot be undone");
    has("journal-15.jsonl: run 15 — 0 change(s) undone, 0 already as they were (object gone or unchanged), 0 failed, 2 refused");
    has(
        r#"  line 2: refused Sysctl { name: "../../victim", old: "owned" }: sysctl name "../../victim" has a component ".."; not applied"#,
    );
    has("is not under a cgroup mount");
    has("  set aside as ");
    assert!(
        se.contains("restore incomplete: 3 journal(s) could not be used, 1 corrupt line(s), 2 entry(ies) refused (see above)"),
        "{se}"
    );
    assert!(!cg.exists(), "the good journal was undone");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
    // Kept for a human, never retried.
    let out = restore(&state, Some(tmp.path()), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("nothing to restore"));
    assert_eq!(fs::read_dir(&state).unwrap().count(), 5);
}

#[test]
fn an_unsafe_state_dir_exits_2_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let state = fake_tree(tmp.path());
    plant(&state, "journal-9.jsonl", 9, &[]);
    fs::set_permissions(&state, fs::Permissions::from_mode(0o777)).unwrap();
    let out = restore(&state, Some(tmp.path()), &[]);
    let se = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{se}");
    assert!(
        se.contains(&format!(
            "state directory {}: is writable by group and others (mode 0777); refusing to use it",
            state.display()
        )),
        "{se}"
    );
    assert!(state.join("journal-9.jsonl").exists(), "nothing touched");
    if !is_root() {
        eprintln!("skipped the foreign-owner case: chown needs root");
        return;
    }
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
    let out = restore(&state, Some(tmp.path()), &[]);
    let se = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{se}");
    assert!(se.contains("is owned by uid 65534, not by uid 0"), "{se}");
}

#[test]
fn help_documents_the_exit_statuses() {
    let out = Command::new(BIN)
        .args(["restore", "--help"])
        .output()
        .unwrap();
    let so = text(&out.stdout);
    assert!(so.contains("Exit status:"), "{so}");
    for s in ["  0  ", "  1  ", "  2  "] {
        assert!(so.contains(s), "{so}");
    }
}

#[test]
fn on_the_real_machine_mixed_journals() {
    if !is_root() {
        eprintln!("skipped: needs root (creates a cgroup under the real cpu cgroup mount)");
        return;
    }
    let Some(ctl) = schedkit_linux::cgroup::detect(&schedkit_linux::Roots::host()) else {
        eprintln!("skipped: no cgroup cpu controller");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    let victim = tmp.path().join("victim");
    fs::write(&victim, "untouched").unwrap();
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id() as i32;
    c.wait().unwrap();
    let cg = ctl
        .mount()
        .join(format!("schedkit-restore-cli-{}", std::process::id()));
    let cg2 = ctl
        .mount()
        .join(format!("schedkit-restore-cli-{}-b", std::process::id()));
    for d in [&cg, &cg2] {
        let _ = fs::remove_dir(d);
        fs::create_dir(d).unwrap();
    }
    plant(
        &state,
        &format!("journal-{dead}.jsonl"),
        dead,
        &[format!(r#"{{"op":"mkdir","path":"{}"}}"#, cg.display())],
    );
    fs::write(state.join("journal-1000001.jsonl"), "").unwrap();
    fs::write(state.join("journal-1000002.jsonl"), b"\x8f\x01garbage\xff").unwrap();
    fs::create_dir(state.join("journal-1000003.jsonl")).unwrap();
    plant(
        &state,
        "journal-1000004.jsonl",
        1_000_004,
        &[
            format!(r#"{{"op":"mkdir","path":"{}"}}"#, cg2.display()),
            "{\"op\":\"irq\",\"irq\":GARBAGE".into(),
            format!(r#"{{"op":"mkdir","path":"{}"}}"#, cg2.display()),
        ],
    );
    plant(
        &state,
        "journal-1000005.jsonl",
        1_000_005,
        &[
            format!(
                r#"{{"op":"sysctl","name":"../..{}","old":"owned"}}"#,
                victim.display()
            ),
            format!(
                r#"{{"op":"file","path":"{}","old":"owned"}}"#,
                victim.display()
            ),
        ],
    );
    let out = restore(&state, None, &[]);
    let (cg_left, cg2_left) = (cg.exists(), cg2.exists());
    let _ = fs::remove_dir(&cg);
    let _ = fs::remove_dir(&cg2);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    eprintln!(
        "$ schedkit restore   (exit {:?})\n{so}{se}",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!cg_left && !cg2_left, "cgroups undone");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
    assert!(so.contains(&format!(
        "journal-{dead}.jsonl: run {dead} — 1 change(s) undone"
    )));
    assert_eq!(so.matches("set aside as").count(), 5, "{so}");
}
