//! The way in for a new user: every subcommand's help has examples, `sim` and `compare` list
//! the policies, `schedkit policies` says which engine runs each, `--version` names the
//! commit, and the shell completions and man pages are generated (and name every
//! subcommand).

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
