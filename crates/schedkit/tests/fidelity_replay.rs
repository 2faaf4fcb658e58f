//! `schedkit experiment fidelity --real-from FILE`: the real repeats of an earlier run
//! (`tests/data/fidelity-recorded.json`: two repeats each of two scenarios, cut from the quiet
//! run in docs/results/fidelity-quiet/after/) are compared with a fresh simulation, with no
//! real run; a file that does not match is refused with exit 2, naming the file and field.

mod common;

use common::{json_of, root, schedkit_in};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    root().join("crates/schedkit/tests/data/fidelity-recorded.json")
}

fn scenario(name: &str) -> String {
    root()
        .join("examples/fidelity")
        .join(format!("{name}.toml"))
        .display()
        .to_string()
}

#[test]
fn recorded_repeats_are_compared_with_a_new_simulation() {
    let d = tempfile::tempdir().unwrap();
    let fix = fixture().display().to_string();
    let out = d.path().display().to_string();
    let (a, b) = (scenario("nice-one-cpu"), scenario("wakeup-one-cpu"));
    let v = json_of(&schedkit_in(
        &[
            "experiment",
            "fidelity",
            "--real-from",
            &fix,
            &a,
            &b,
            "--out",
            &out,
            "--json",
        ],
        d.path(),
    ));
    // The real side is the file's, unchanged: two repeats per scenario.
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    assert_eq!(v["real"], recorded["real"]);
    // Both models simulated on both scenarios; the waiting row's real value is the mean of
    // the two recorded repeats (2005.387895 and 2002.571819 ms on nice-one-cpu).
    let rows = v["rows"].as_array().unwrap();
    for sc in ["nice-one-cpu", "wakeup-one-cpu"] {
        for model in ["eevdf", "cfs"] {
            assert!(
                rows.iter()
                    .any(|r| r["scenario"] == sc && r["model"] == model && r["metric"] == "share"),
                "{sc} {model}"
            );
        }
    }
    let wait = rows
        .iter()
        .find(|r| r["scenario"] == "nice-one-cpu" && r["metric"] == "waiting")
        .unwrap();
    let mean = (2005.387895 + 2002.571819) / 2.0;
    assert!(
        (wait["real"].as_f64().unwrap() - mean).abs() < 1e-6,
        "{wait}"
    );
    // The sleeper scenario has wake-up rows (recorded p99 against the model's).
    assert!(rows
        .iter()
        .any(|r| r["scenario"] == "wakeup-one-cpu" && r["metric"] == "wake p99"));
    // The same files as a real run writes.
    assert!(d.path().join("fidelity.json").is_file());
    assert!(d.path().join("fidelity.svg").is_file());
}

#[test]
fn a_file_that_does_not_match_is_refused_with_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(fixture()).unwrap();
    let corrupt = d.path().join("corrupt.json");
    std::fs::write(&corrupt, &good[..good.len() / 2]).unwrap();
    let renamed = d.path().join("renamed.json");
    std::fs::write(&renamed, good.replacen("\"n5\"", "\"n6\"", 1)).unwrap();
    let fix = fixture().display().to_string();
    let (c, r) = (corrupt.display().to_string(), renamed.display().to_string());
    let one = scenario("nice-one-cpu");
    let other = scenario("greedy-1-8");
    for (args, needles) in [
        // Cut in half: not JSON; the place is named.
        (vec![c.as_str(), one.as_str()], vec!["corrupt.json", "line"]),
        // A scenario the file has no runs of.
        (
            vec![fix.as_str(), other.as_str()],
            vec!["fidelity-recorded.json", "field `real`", "greedy-1-8"],
        ),
        // A process renamed: the recorded runs are not of this scenario file.
        (
            vec![r.as_str(), one.as_str()],
            vec!["renamed.json", "field `real[0][1][0].names`", "n6"],
        ),
        // A missing file.
        (vec!["/nonexistent/f.json", one.as_str()], vec!["f.json"]),
    ] {
        let mut a = vec!["experiment", "fidelity", "--real-from"];
        a.extend(&args);
        let o = schedkit_in(&a, d.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {n} not in {err}");
        }
    }
    // --repeat has no meaning with recorded repeats.
    let o = schedkit_in(
        &[
            "experiment",
            "fidelity",
            "--real-from",
            &fix,
            &one,
            "--repeat",
            "2",
        ],
        d.path(),
    );
    assert_eq!(o.status.code(), Some(2));
    // Nothing was written by the refused runs.
    assert!(!d.path().join("fidelity.json").exists());
}
