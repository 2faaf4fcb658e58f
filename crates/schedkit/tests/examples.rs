//! `examples/README.md` is the map of the examples: every `.toml` under `examples/` is in its
//! tables, every file it says `sim` runs is simulated here (exit 0), and every file it says
//! `run` runs has a policy that `schedkit run` has (the real runs themselves are in
//! `tests/run.rs` and `docs/results/`).

mod common;

use common::{root, schedkit};
use schedkit_core::policies::{info, RealEngine};
use schedkit_core::Scenario;

/// (file, engines) for each file named in the map's tables.
fn map() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join("examples/README.md")).unwrap();
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (files, engines) = (cells[1], cells[3]);
        for f in files.split(',').map(|f| f.trim().trim_matches('`')) {
            out.push((f.to_string(), engines.to_string()));
        }
    }
    out
}

fn tomls(dir: &std::path::Path, base: &str, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let rel = if base.is_empty() {
            name
        } else {
            format!("{base}/{name}")
        };
        if path.is_dir() {
            tomls(&path, &rel, out);
        } else if rel.ends_with(".toml") {
            out.push(rel);
        }
    }
}

#[test]
fn every_example_is_mapped_and_runs_where_the_map_says() {
    let map = map();
    let mut files = Vec::new();
    tomls(&root().join("examples"), "", &mut files);
    for f in &files {
        assert!(
            map.iter().any(|(m, _)| m == f),
            "{f} is not in examples/README.md"
        );
    }
    for (file, engines) in &map {
        let path = format!("examples/{file}");
        assert!(
            files.contains(file),
            "examples/README.md names {file}, which does not exist"
        );
        let s = Scenario::load(&root().join(&path)).unwrap();
        let by_sim = engines.starts_with("both") || engines.starts_with("sim");
        let by_run = engines.starts_with("both") || engines.contains("run");
        let out = schedkit(&["sim", &path, "--json"]);
        let err = String::from_utf8_lossy(&out.stderr);
        if engines.contains("--sweep") {
            assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        } else {
            assert_eq!(out.status.success(), by_sim, "{file} ({engines}): {err}");
        }
        let policy = info(s.policy().name());
        assert_eq!(
            by_sim,
            policy.sim,
            "{file}: {engines} but {}",
            s.policy().name()
        );
        if by_run {
            let want = if s.tasks().is_empty() {
                RealEngine::Processes
            } else {
                RealEngine::Tasks
            };
            assert_eq!(
                policy.run,
                want,
                "{file}: {engines} but {}",
                s.policy().name()
            );
        }
    }
}
