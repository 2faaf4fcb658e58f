//! Recovery that never gives up and never trusts: `journal::restore_dir` against journals that
//! are empty, random bytes, directories, corrupt in the middle, torn at the end, or planted
//! with entries naming paths outside the allowed roots, beside good ones; the state
//! directory's owner and mode; journals killed at random instants while being written.
//!
//! Most cases use a fake tree (`Roots::at`) whose `proc/self/mountinfo` lists a temporary
//! directory as a cgroup2 mount, so they run anywhere; the cases on the real machine (a real
//! cgroup directory, a sysctl name climbing out of the real `/proc/sys`, a state dir chowned
//! to another uid) need root and say so when they skip.

mod common;

use common::root;
use schedkit_linux::journal::{self, CgroupMounts, Entry, Journal};
use schedkit_linux::Roots;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A fake tree under `dir`: `proc/self/mountinfo` lists `dir/cg` (cgroup2) and `dir/cg1`
/// (cgroup v1, cpu), `proc/sys/kernel/knob` holds "5".
fn fake_tree(dir: &Path) -> Roots {
    for d in ["proc/self", "proc/sys/kernel", "cg", "cg1", "state"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::set_permissions(dir.join("state"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(
        dir.join("proc/self/mountinfo"),
        format!(
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 / {} rw,relatime - cgroup cgroup rw,cpu\n\
             41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            dir.join("cg1").display(),
            dir.join("cg").display()
        ),
    )
    .unwrap();
    fs::write(dir.join("proc/sys/kernel/knob"), "5").unwrap();
    Roots::at(dir)
}

/// Writes `<state>/<name>`: a header for `pid` and `lines` as they are.
fn plant(state: &Path, name: &str, pid: i32, lines: &[String]) -> PathBuf {
    let mut text = format!("{{\"journal\":1,\"pid\":{pid},\"starttime\":0}}\n");
    for l in lines {
        text += l;
        text.push('\n');
    }
    let p = state.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn line(e: &Entry) -> String {
    serde_json::to_string(e).unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A pid that no longer runs (a child that exited and was reaped).
fn dead_pid() -> i32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    pid
}

#[test]
fn mixed_journals_on_a_fake_tree_good_undone_bad_reported_and_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let roots = fake_tree(dir);
    let state = dir.join("state");
    // Victims the planted journal aims at.
    let victim_dir = dir.join("outside");
    fs::create_dir_all(&victim_dir).unwrap();
    let victim = victim_dir.join("victim");
    fs::write(&victim, "untouched").unwrap();
    // `proc/sys/../../outside/victim` is `dir/outside/victim`.
    fs::create_dir_all(dir.join("proc/sys")).unwrap();

    // The good journal: a cgroup directory created, a cgroup file changed, a sysctl changed;
    // a torn last line (a write cut short, its change never made).
    let cgdir = dir.join("cg/schedkit-999");
    fs::create_dir_all(&cgdir).unwrap();
    fs::write(dir.join("cg1/cpu.shares"), "2048").unwrap();
    fs::write(dir.join("proc/sys/kernel/knob"), "-1").unwrap();
    fs::create_dir_all(dir.join("proc/irq")).unwrap();
    fs::write(dir.join("proc/irq/default_smp_affinity"), "1").unwrap();
    let good = plant(
        &state,
        "journal-100.jsonl",
        100,
        &[
            line(&Entry::Mkdir {
                path: cgdir.clone(),
            }),
            line(&Entry::File {
                path: dir.join("cg1/cpu.shares"),
                old: "1024".into(),
            }),
            line(&Entry::Sysctl {
                name: "kernel/knob".into(),
                old: "5".into(),
            }),
            // The one file outside the cgroup mounts (exclusive mode's default IRQ mask).
            line(&Entry::File {
                path: dir.join("proc/irq/default_smp_affinity"),
                old: "3".into(),
            }),
            // Gone objects: nothing to do, not failures.
            line(&Entry::File {
                path: dir.join("cg/schedkit-gone/cpu.weight"),
                old: "100".into(),
            }),
            line(&Entry::Mkdir {
                path: dir.join("cg/schedkit-gone"),
            }),
            line(&Entry::Cgroup {
                path: dir.join("cg/schedkit-gone2"),
                tasks_file: "cgroup.procs".into(),
                back: dir.join("cg"),
            }),
            "{\"op\":\"sysctl\",\"na".into(),
        ],
    );
    // Bad ones.
    let empty = state.join("journal-101.jsonl");
    fs::write(&empty, "").unwrap();
    let random = state.join("journal-102.jsonl");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    fs::write(&random, bytes).unwrap();
    let a_dir = state.join("journal-103.jsonl");
    fs::create_dir(&a_dir).unwrap();
    fs::write(dir.join("cg1/cpu.rt_runtime_us"), "0").unwrap();
    let corrupt = plant(
        &state,
        "journal-104.jsonl",
        104,
        &[
            line(&Entry::File {
                path: dir.join("cg1/cpu.rt_runtime_us"),
                old: "950000".into(),
            }),
            "{\"op\":\"file\",\"path\":GARBAGE".into(),
            line(&Entry::Sysctl {
                name: "kernel/knob".into(),
                old: "5".into(),
            }),
        ],
    );
    let planted = plant(
        &state,
        "journal-105.jsonl",
        105,
        &[
            line(&Entry::Sysctl {
                name: "../../outside/victim".into(),
                old: "owned".into(),
            }),
            line(&Entry::Sysctl {
                name: "/etc/passwd".into(),
                old: "owned".into(),
            }),
            line(&Entry::File {
                path: victim.clone(),
                old: "owned".into(),
            }),
            line(&Entry::File {
                path: dir.join("cg/../outside/victim"),
                old: "owned".into(),
            }),
            line(&Entry::Mkdir {
                path: victim_dir.clone(),
            }),
            line(&Entry::Cgroup {
                path: dir.join("cg/x"),
                tasks_file: "../../outside/victim".into(),
                back: dir.join("cg"),
            }),
            line(&Entry::Stopped {
                pid: -1,
                starttime: 0,
            }),
            line(&Entry::File {
                path: dir.join("proc/irq/default_smp_affinity"),
                old: "not a mask".into(),
            }),
            line(&Entry::File {
                path: dir.join("proc/irq/0/smp_affinity"),
                old: "1".into(),
            }),
        ],
    );

    let report = journal::restore_dir(&state, &roots, false).unwrap();
    for l in format!("{report:#?}").lines().take(400) {
        eprintln!("{l}");
    }
    assert_eq!(report.journals.len(), 6);
    assert!(!report.ok());
    let by = |p: &Path| report.journals.iter().find(|r| r.path == p).unwrap();

    // The good journal is undone and removed; gone objects are "nothing to do".
    let g = by(&good);
    assert!(g.ok(), "{g:?}");
    assert!(g.torn_tail);
    assert!(g.corrupt_lines.is_empty());
    assert_eq!(g.undone.len(), 7);
    assert_eq!(
        g.undone.iter().filter(|u| u.outcome == Ok(true)).count(),
        4,
        "{:?}",
        g.undone
    );
    assert!(!cgdir.exists());
    assert_eq!(
        fs::read_to_string(dir.join("cg1/cpu.shares")).unwrap(),
        "1024"
    );
    assert_eq!(
        fs::read_to_string(dir.join("proc/sys/kernel/knob")).unwrap(),
        "5"
    );
    assert_eq!(
        fs::read_to_string(dir.join("proc/irq/default_smp_affinity")).unwrap(),
        "3"
    );
    assert!(!good.exists());
    assert!(
        !dir.join("cg/schedkit-gone/cpu.weight").exists(),
        "a File undo never creates"
    );

    // Each bad one is reported by name and set aside as <name>.bad.
    for (p, why) in [
        (&empty, "empty"),
        (&random, "not a schedkit journal"),
        (&a_dir, "directory"),
    ] {
        let r = by(p);
        let u = r.unusable.as_deref().unwrap_or_default();
        assert!(u.contains(why), "{}: {u}", p.display());
        assert_eq!(
            r.set_aside.as_deref(),
            Some(
                state
                    .join(format!("{}.bad", p.file_name().unwrap().to_string_lossy()))
                    .as_path()
            )
        );
    }
    // The corrupt middle line is reported by number; the lines around it are undone.
    let c = by(&corrupt);
    assert_eq!(c.corrupt_lines, vec![3]);
    assert!(!c.torn_tail);
    assert_eq!(c.undone.len(), 2);
    assert_eq!(
        fs::read_to_string(dir.join("cg1/cpu.rt_runtime_us")).unwrap(),
        "950000"
    );
    assert!(c.set_aside.is_some());
    // Every planted entry is refused, with a reason, and nothing is applied.
    let p = by(&planted);
    assert!(p.undone.is_empty(), "{:?}", p.undone);
    assert_eq!(p.rejected.len(), 9, "{:?}", p.rejected);
    assert_eq!(
        p.rejected.iter().map(|r| r.line).collect::<Vec<_>>(),
        (2..=10).collect::<Vec<_>>()
    );
    assert!(
        p.rejected[0].reason.contains("\"..\""),
        "{:?}",
        p.rejected[0]
    );
    assert!(p.rejected[1].reason.contains("absolute"));
    assert!(p.rejected[2].reason.contains("not under a cgroup mount"));
    assert!(p.rejected[3].reason.contains("`..`"));
    assert!(p.rejected[6].reason.contains("not a positive id"));
    assert!(p.rejected[7].reason.contains("default IRQ mask"));
    assert!(p.rejected[8].reason.contains("not under a cgroup mount"));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
    assert!(victim_dir.exists());
    assert!(p.set_aside.is_some());

    assert_eq!(
        names(&state),
        vec![
            "journal-101.jsonl.bad",
            "journal-102.jsonl.bad",
            "journal-103.jsonl.bad",
            "journal-104.jsonl.bad",
            "journal-105.jsonl.bad",
        ]
    );
    // Set aside, not retried: a second restore has nothing to do.
    let again = journal::restore_dir(&state, &roots, false).unwrap();
    assert!(again.journals.is_empty() && again.ok());
}

#[test]
fn live_journals_are_left_alone_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let roots = fake_tree(dir);
    let state = dir.join("state");
    // Process 4242 runs in the fake tree, started at tick 777.
    fs::create_dir_all(dir.join("proc/4242")).unwrap();
    let stat = "4242 (schedkit) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 1 0 777 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    fs::write(dir.join("proc/4242/stat"), stat).unwrap();
    fs::write(dir.join("proc/sys/kernel/knob"), "-1").unwrap();
    let entry = line(&Entry::Sysctl {
        name: "kernel/knob".into(),
        old: "5".into(),
    });
    let p = state.join("journal-4242.jsonl");
    fs::write(
        &p,
        format!("{{\"journal\":1,\"pid\":4242,\"starttime\":777}}\n{entry}\n"),
    )
    .unwrap();
    // Same pid, another start time: a recycled pid, so the owner is gone.
    let q = state.join("journal-4242.1.jsonl");
    fs::write(
        &q,
        format!("{{\"journal\":1,\"pid\":4242,\"starttime\":5}}\n{entry}\n"),
    )
    .unwrap();
    let r = journal::restore_dir(&state, &roots, false).unwrap();
    assert!(r.ok());
    let (live, gone) = (&r.journals[1], &r.journals[0]);
    assert_eq!(
        (live.path.as_path(), gone.path.as_path()),
        (p.as_path(), q.as_path())
    );
    assert!(live.left_alone && live.owner_alive);
    assert!(live.undone.is_empty());
    assert!(p.exists());
    assert!(!gone.owner_alive);
    assert_eq!(gone.undone.len(), 1);
    assert!(!q.exists());
    fs::write(dir.join("proc/sys/kernel/knob"), "-1").unwrap();
    let r = journal::restore_dir(&state, &roots, true).unwrap();
    assert!(r.journals[0].owner_alive && !r.journals[0].left_alone);
    assert_eq!(r.journals[0].undone[0].outcome, Ok(true));
    assert!(!p.exists());
    assert_eq!(
        fs::read_to_string(dir.join("proc/sys/kernel/knob")).unwrap(),
        "5"
    );
}

#[test]
fn journals_are_created_whole_0600_in_a_0700_dir_and_failures_stay_for_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let roots = fake_tree(dir);
    let state = dir.join("fresh/state");
    let mut j = Journal::create(&state, &roots).unwrap();
    assert_eq!(fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
    assert_eq!(fs::metadata(j.path()).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        names(&state),
        vec![format!("journal-{}.jsonl", std::process::id())],
        "no temporary file left"
    );
    j.set_sysctl("kernel/knob", "7").unwrap();
    // A change whose undo fails (the "file" is a directory): the journal keeps only it.
    let stuck = dir.join("cg/stuck");
    fs::create_dir_all(&stuck).unwrap();
    j.record(Entry::File {
        path: stuck.clone(),
        old: "1".into(),
    })
    .unwrap();
    let path = j.path().to_path_buf();
    let undone = j.finish();
    assert_eq!(undone.len(), 2);
    assert!(undone[0].outcome.is_err());
    assert_eq!(undone[1].outcome, Ok(true));
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("stuck"));
    // A second journal of the same pid never replaces the one left.
    let j2 = Journal::create(&state, &roots).unwrap();
    assert_ne!(j2.path(), path.as_path());
    assert!(path.exists());
    drop(j2);
    // An existing 0755 state dir of ours is narrowed to 0700.
    fs::set_permissions(&state, fs::Permissions::from_mode(0o755)).unwrap();
    journal::check_state_dir(&state).unwrap();
    assert_eq!(fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
}

#[test]
fn a_writable_or_foreign_state_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let roots = fake_tree(dir);
    let state = dir.join("state");
    plant(&state, "journal-1.jsonl", 1, &[]);
    for mode in [0o777, 0o770, 0o702] {
        fs::set_permissions(&state, fs::Permissions::from_mode(mode)).unwrap();
        let e = journal::restore_dir(&state, &roots, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&state.display().to_string()) && e.contains("writable by"),
            "{e}"
        );
        let e = Journal::create(&state, &roots).err().unwrap().to_string();
        assert!(e.contains("writable by"), "{e}");
    }
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    if !root() {
        eprintln!("skipped the foreign-owner case: chown to uid 65534 needs root");
        return;
    }
    std::os::unix::fs::chown(&state, Some(65534), Some(65534)).unwrap();
    let e = journal::restore_dir(&state, &roots, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("owned by uid 65534"), "{e}");
    let e = Journal::create(&state, &roots).err().unwrap().to_string();
    assert!(e.contains("owned by uid 65534"), "{e}");
    assert!(
        plant(&state, "journal-1.jsonl", 1, &[]).exists(),
        "nothing touched"
    );
    // A journal planted by another user inside our own dir is set aside, not applied.
    std::os::unix::fs::chown(&state, Some(0), Some(0)).unwrap();
    std::os::unix::fs::chown(state.join("journal-1.jsonl"), Some(65534), None).unwrap();
    let r = journal::restore_dir(&state, &roots, false).unwrap();
    assert!(r.journals[0]
        .unusable
        .as_deref()
        .unwrap()
        .contains("owned by uid 65534"));
}

#[test]
fn stale_sockets_and_temporary_files_of_dead_runs_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let roots = Roots::host();
    let state = dir.join("state");
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    let dead = dead_pid();
    let sock = state.join(format!("{dead}.sock"));
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    // A live run's socket stays.
    let live = state.join(format!("{}.sock", std::process::id()));
    let _l = std::os::unix::net::UnixListener::bind(&live).unwrap();
    let temp = state.join(format!(".journal-{dead}.tmp"));
    fs::write(&temp, "").unwrap();
    let r = journal::restore_dir(&state, &roots, false).unwrap();
    assert!(r.ok());
    assert_eq!(r.sockets_removed, vec![sock.clone()]);
    assert_eq!(r.temps_removed, vec![temp.clone()]);
    assert!(!sock.exists() && !temp.exists() && live.exists());
}

#[test]
fn path_checks() {
    let m = CgroupMounts(vec![
        PathBuf::from("/sys/fs/cgroup/cpu"),
        PathBuf::from("/sys/fs/cgroup/unified"),
    ]);
    assert!(m
        .check(Path::new("/sys/fs/cgroup/cpu/schedkit-1/cpu.shares"), false)
        .is_ok());
    assert!(m.check(Path::new("/sys/fs/cgroup/cpu"), false).is_err());
    assert!(m.check(Path::new("/sys/fs/cgroup/cpu"), true).is_ok());
    assert!(m
        .check(Path::new("/sys/fs/cgroup/cpuacct/x"), false)
        .is_err());
    assert!(m
        .check(Path::new("/sys/fs/cgroup/cpu/../../../etc"), false)
        .is_err());
    assert!(m.check(Path::new("/sys/fs/cgroup/cpu/./x"), false).is_err());
    assert!(m.check(Path::new("sys/fs/cgroup/cpu/x"), false).is_err());
    assert!(m.check(Path::new("/tmp/x"), false).is_err());
    assert!(journal::check_sysctl_name("kernel/sched_rt_runtime_us").is_ok());
    for bad in [
        "",
        "/kernel/x",
        "../x",
        "kernel/../../x",
        "kernel//x",
        "kernel/./x",
        "kernel/",
    ] {
        assert!(journal::check_sysctl_name(bad).is_err(), "{bad:?}");
    }
    // This machine's mounts are read from mountinfo (escapes decoded).
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("proc/self")).unwrap();
    fs::write(
        tmp.path().join("proc/self/mountinfo"),
        "1 0 0:1 / /a\\040b rw - cgroup2 cgroup2 rw\n2 0 0:2 / /c rw - tmpfs tmpfs rw\n",
    )
    .unwrap();
    assert_eq!(
        CgroupMounts::read(&Roots::at(tmp.path())).0,
        vec![PathBuf::from("/a b")]
    );
    assert!(journal::check_cgroup_path(&Roots::at(tmp.path()), Path::new("/a b/x")).is_ok());
    assert!(journal::check_cgroup_path(&Roots::at(tmp.path()), Path::new("/c/x")).is_err());
}

/// The child of [`journals_killed_at_random_instants_always_restore`]: with
/// `SCHEDKIT_JOURNAL_WRITER=<dir>` it writes a journal there (fake tree under `<dir>/tree`)
/// and records entries until killed; otherwise it does nothing.
#[test]
fn journal_writer_child() {
    let Some(dir) = std::env::var_os("SCHEDKIT_JOURNAL_WRITER") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let roots = Roots::at(&dir.join("tree"));
    let mut j = Journal::create(&dir.join("state"), &roots).unwrap();
    for i in 0u64.. {
        j.record(Entry::Sysctl {
            name: "kernel/knob".into(),
            old: format!("{}", i % 1000),
        })
        .unwrap();
        j.record(Entry::File {
            path: dir.join("tree/cg").join(format!("f{}", i % 7)),
            old: "x".repeat((i % 300) as usize),
        })
        .unwrap();
    }
}

#[test]
fn journals_killed_at_random_instants_always_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let roots = fake_tree(&dir.join("tree"));
    let state = dir.join("state");
    let exe = std::env::current_exe().unwrap();
    let mut seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let (mut none, mut header_only, mut with_entries, mut torn, mut total_entries, mut temps) =
        (0, 0, 0, 0, 0, 0);
    for _ in 0..50 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // 0..30 ms: before the journal exists, while it is created, while entries are written.
        let delay = Duration::from_micros(seed % 30_000);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "journal_writer_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SCHEDKIT_JOURNAL_WRITER", dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap(); // reaped: its pid reads as gone
        let r = journal::restore_dir(&state, &roots, false).unwrap();
        assert!(r.ok(), "{r:#?}");
        assert!(r.journals.len() <= 1, "{r:#?}");
        temps += r.temps_removed.len();
        match r.journals.first() {
            None => none += 1,
            Some(j) => {
                assert!(j.unusable.is_none() && j.corrupt_lines.is_empty(), "{j:?}");
                assert!(j.rejected.is_empty(), "{j:?}");
                if j.undone.is_empty() {
                    header_only += 1;
                } else {
                    with_entries += 1;
                }
                torn += usize::from(j.torn_tail);
                total_entries += j.undone.len();
            }
        }
        if state.exists() {
            assert!(names(&state).is_empty(), "{:?}", names(&state));
        }
    }
    eprintln!(
        "50 kills: {none} left no journal ({temps} of them a temporary file, removed), \
         {header_only} a header only, {with_entries} entries ({total_entries} undone in all), \
         {torn} a torn last line; every one restored"
    );
}

#[test]
fn on_the_real_machine_a_good_journal_is_undone_and_planted_paths_are_refused() {
    if !root() {
        eprintln!("skipped: needs root (creates a cgroup under a real cgroup mount)");
        return;
    }
    let roots = Roots::host();
    let Some(ctl) = schedkit_linux::cgroup::detect(&roots) else {
        eprintln!("skipped: no cgroup cpu controller mounted");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    fs::create_dir(&state).unwrap();
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    let victim = tmp.path().join("victim");
    fs::write(&victim, "untouched").unwrap();
    let cg = ctl
        .mount()
        .join(format!("schedkit-restore-test-{}", std::process::id()));
    let _ = fs::remove_dir(&cg);
    fs::create_dir(&cg).unwrap();
    let dead = dead_pid();
    let good = plant(
        &state,
        &format!("journal-{dead}.jsonl"),
        dead,
        &[line(&Entry::Mkdir { path: cg.clone() })],
    );
    // `/proc/sys/../../tmp/...` is the victim: refused before anything is written.
    let planted = plant(
        &state,
        &format!("journal-{dead}.1.jsonl"),
        dead,
        &[
            line(&Entry::Sysctl {
                name: format!("../..{}", victim.display()),
                old: "owned".into(),
            }),
            line(&Entry::File {
                path: victim.clone(),
                old: "owned".into(),
            }),
        ],
    );
    fs::write(state.join(format!("journal-{}.jsonl", dead + 1)), "").unwrap();
    let r = journal::restore_dir(&state, &roots, false).unwrap();
    eprintln!("{r:#?}");
    let _ = fs::remove_dir(&cg);
    let by = |p: &Path| r.journals.iter().find(|j| j.path == p).unwrap();
    assert!(by(&good).ok(), "{:?}", by(&good));
    assert_eq!(by(&good).undone[0].outcome, Ok(true));
    assert!(!cg.exists(), "the good journal's cgroup is removed");
    assert_eq!(by(&planted).rejected.len(), 2);
    assert!(by(&planted).undone.is_empty());
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
    assert_eq!(
        r.journals.iter().filter(|j| j.unusable.is_some()).count(),
        1
    );
    assert!(!r.ok());
}

/// A batch is journaled whole (one write) before its changes are made, and undone
/// like single entries.
#[test]
fn a_batch_of_entries_is_journaled_whole_and_undone() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let mut j = Journal::create(&state, &Roots::host()).unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| d.path().join(format!("made-{i}"))).collect();
    j.record_all(
        dirs.iter()
            .map(|p| Entry::Mkdir { path: p.clone() })
            .collect(),
    )
    .unwrap();
    // Durable before any change: the header and all three entries are in the file.
    let text = fs::read_to_string(j.path()).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    for p in &dirs {
        assert!(text.contains(p.to_str().unwrap()), "{text}");
        fs::create_dir(p).unwrap();
    }
    // An empty batch writes nothing.
    j.record_all(Vec::new()).unwrap();
    assert_eq!(j.entries().len(), 3);
    let undone = j.finish();
    assert!(undone.iter().all(|u| u.outcome == Ok(true)), "{undone:?}");
    assert!(dirs.iter().all(|p| !p.exists()));
}

/// Capability probes (`schedkit-probe-<pid>`) and run bases (`schedkit-<pid>`) are made
/// outside the journal for an instant; a kill in that instant leaves an empty cgroup that
/// `restore` removes once the pid is dead. A live pid's directory, and any cgroup that still
/// holds a process, stay.
#[test]
fn restore_removes_empty_cgroups_of_dead_runs_and_nothing_else() {
    if !root() {
        eprintln!("skipped: needs root (creates cgroups under a real cgroup mount)");
        return;
    }
    let roots = Roots::host();
    let Some(mount) = CgroupMounts::read(&roots).0.into_iter().find(|m| {
        fs::create_dir(m.join(".schedkit-w")).is_ok()
            && fs::remove_dir(m.join(".schedkit-w")).is_ok()
    }) else {
        eprintln!("skipped: no writable cgroup mount");
        return;
    };
    let dead = dead_pid();
    let probe = mount.join(format!("schedkit-probe-{dead}"));
    let base = mount.join(format!("schedkit-{dead}"));
    let live = mount.join(format!("schedkit-probe-{}", std::process::id()));
    for d in [&probe, &base, &live] {
        let _ = fs::create_dir(d);
    }
    fs::create_dir(base.join("job-0")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let r = journal::restore_dir(&tmp.path().join("none"), &roots, false).unwrap();
    let gone = [!probe.exists(), !base.exists(), !live.exists()];
    let _ = fs::remove_dir(&live);
    assert_eq!(gone, [true, true, false], "{r:?}");
    assert!(r.cgroups_removed.contains(&probe), "{r:?}");
    assert!(r.cgroups_removed.contains(&base.join("job-0")), "{r:?}");
}

/// Exclusive mode's per-process entry: undo gives the journaled mask back to each TID that is
/// still a thread of that process, and passes over a TID that ended or that names a thread of
/// another process (tgkill 0 tells them apart), without failing.
#[test]
fn a_per_process_affinity_entry_is_undone_for_its_live_threads_only() {
    let allowed = schedkit_linux::affinity::get_thread(0).unwrap();
    let Some(first) = allowed.first().filter(|_| allowed.len() >= 2) else {
        eprintln!("skipped: needs two allowed CPUs (has {allowed})");
        return;
    };
    let me = std::process::id() as i32;
    let roots = Roots::host();
    let starttime = schedkit_linux::procfs::read_stat(&roots, me, me)
        .unwrap()
        .starttime;
    // Three threads that wait, and one that ended.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let stop_rx = std::sync::Arc::new(std::sync::Mutex::new(stop_rx));
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let (tx, stop_rx) = (tx.clone(), stop_rx.clone());
            std::thread::spawn(move || {
                tx.send(schedkit_linux::gettid()).unwrap();
                let _ = stop_rx.lock().unwrap().recv();
            })
        })
        .collect();
    let tids: Vec<i32> = (0..3).map(|_| rx.recv().unwrap()).collect();
    let ended = std::thread::spawn(schedkit_linux::gettid).join().unwrap();
    // A thread of another process: its TID is no thread of ours.
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    let stranger = other.id() as i32;
    let before_stranger = schedkit_linux::affinity::get_thread(stranger).unwrap();
    let pinned = schedkit_linux::affinity::CpuSet::single(first);
    let state = tempfile::tempdir().unwrap();
    let mut j = Journal::create(&state.path().join("state"), &roots).unwrap();
    let mut all = tids.clone();
    all.extend([ended, stranger]);
    j.record_all(vec![Entry::Affinities {
        pid: me,
        starttime,
        old: allowed.clone(),
        tids: all,
        pin: None,
        since: None,
    }])
    .unwrap();
    for &t in &tids {
        schedkit_linux::affinity::set_thread(t, &pinned).unwrap();
    }
    schedkit_linux::affinity::set_thread(stranger, &pinned).unwrap();
    let undone = j.finish();
    let after: Vec<_> = tids
        .iter()
        .map(|&t| schedkit_linux::affinity::get_thread(t).unwrap())
        .collect();
    let stranger_after = schedkit_linux::affinity::get_thread(stranger).unwrap();
    let _ = schedkit_linux::affinity::set_thread(stranger, &before_stranger);
    let _ = other.kill();
    let _ = other.wait();
    drop(stop_tx);
    for h in waiting {
        h.join().unwrap();
    }
    assert_eq!(undone.len(), 1);
    assert_eq!(undone[0].outcome, Ok(true), "{undone:?}");
    assert!(after.iter().all(|a| *a == allowed), "{after:?}");
    assert_eq!(
        stranger_after, pinned,
        "another process's thread is not touched"
    );
}

/// A journal written in an earlier boot of the machine names nothing live: `restore` removes
/// it without applying anything.
#[test]
fn a_journal_of_another_boot_is_removed_unapplied() {
    let tmp = tempfile::tempdir().unwrap();
    let roots = fake_tree(tmp.path());
    fs::create_dir_all(tmp.path().join("proc/sys/kernel/random")).unwrap();
    fs::write(
        tmp.path().join("proc/sys/kernel/random/boot_id"),
        "22222222-0000-0000-0000-000000000000\n",
    )
    .unwrap();
    let state = tmp.path().join("state");
    let made = tmp.path().join("cg/made");
    fs::create_dir(&made).unwrap();
    let dead = dead_pid();
    let p = state.join(format!("journal-{dead}.jsonl"));
    fs::write(
        &p,
        format!(
            "{{\"journal\":1,\"pid\":{dead},\"starttime\":0,\"boot\":\"11111111-0000-0000-0000-000000000000\"}}\n{}\n",
            line(&Entry::Mkdir { path: made.clone() })
        ),
    )
    .unwrap();
    let r = journal::restore_dir(&state, &roots, false).unwrap();
    assert_eq!(r.journals.len(), 1);
    assert!(r.journals[0].other_boot, "{:?}", r.journals[0]);
    assert!(r.journals[0].undone.is_empty());
    assert!(r.ok());
    assert!(made.exists(), "nothing applied");
    assert!(!p.exists(), "removed");
    // A journal of this boot is undone as before.
    let q = state.join(format!("journal-{}.jsonl", dead + 1));
    fs::write(
        &q,
        format!(
            "{{\"journal\":1,\"pid\":{},\"starttime\":0,\"boot\":\"22222222-0000-0000-0000-000000000000\"}}\n{}\n",
            dead + 1,
            line(&Entry::Mkdir { path: made.clone() })
        ),
    )
    .unwrap();
    let r = journal::restore_dir(&state, &roots, false).unwrap();
    assert!(!r.journals[0].other_boot);
    assert!(!made.exists(), "this boot's journal is undone");
}
