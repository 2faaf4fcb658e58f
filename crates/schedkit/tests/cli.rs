//! End-to-end tests of the `schedkit` binary: the textbook numbers through `--json`, every
//! kind of bad input (exit status 2, one located line and a caret under the value on stderr,
//! never a panic), the Gantt
//! SVG, the Chrome trace and `compare`.

mod common;

use common::{json_of, schedkit, schedkit_in};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn textbook_examples_give_the_books_average_waiting_times() {
    // Seed 004 tables 2.1-2.4 (FCFS: 10.25 ms, not the printed 10.5; see the example file).
    for (file, avg_ns) in [
        ("examples/textbook/fcfs.toml", 10_250_000u64),
        ("examples/textbook/sjf.toml", 7_500_000),
        ("examples/textbook/srtf.toml", 6_500_000),
        ("examples/textbook/rr.toml", 13_250_000),
    ] {
        let v = json_of(&schedkit(&["sim", file, "--json"]));
        assert_eq!(
            v["summary"]["avg_waiting_ns"].as_u64(),
            Some(avg_ns),
            "{file}"
        );
    }
}

#[test]
fn textbook_lottery_shares_follow_the_tickets() {
    let v = json_of(&schedkit(&[
        "sim",
        "examples/textbook/lottery.toml",
        "--json",
    ]));
    // Four unbounded processes over 400 s on one core: each waits 400 s minus its CPU time,
    // so the average wait is (4 x 400 - 400) / 4 = 300 s whatever the draws.
    assert_eq!(
        v["summary"]["avg_waiting_ns"].as_u64(),
        Some(300_000_000_000)
    );
    let tickets = [8.0, 4.0, 9.0, 5.0];
    for (p, t) in v["processes"].as_array().unwrap().iter().zip(tickets) {
        let share = p["share"].as_f64().unwrap();
        assert!(
            (share - t / 26.0).abs() < 0.01,
            "{}: {share} vs {}",
            p["name"],
            t / 26.0
        );
    }
}

/// A scratch directory for scenario files.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Writes `text` as `name` in `dir` and runs `sim` on it; returns (status, stderr).
fn sim_text(dir: &Path, name: &str, text: &str) -> (Option<i32>, String) {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = schedkit(&["sim", path.to_str().unwrap()]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_input_exits_2_with_one_located_line() {
    let dir = scratch();
    // (file name, scenario, line, column, field named in the message)
    let cases: &[(&str, &str, usize, usize, &str)] = &[
        (
            "unknown_key.toml",
            "[[process]]\nname = \"a\"\nbrust = \"8ms\"\n",
            3,
            1,
            "brust",
        ),
        (
            "unknown_policy.toml",
            "[policy]\nname = \"fifo\"\n",
            2,
            8,
            "policy.name",
        ),
        (
            "zero_quantum.toml",
            "[policy]\nname = \"rr\"\nquantum = \"0ms\"\n",
            3,
            11,
            "policy.quantum",
        ),
        (
            "burst_without_unit.toml",
            "[[process]]\nname = \"a\"\nburst = \"8\"\n",
            3,
            9,
            "burst",
        ),
        (
            "duplicate_names.toml",
            "[[process]]\nname = \"a\"\nburst = \"1ms\"\n[[process]]\nname = \"a\"\nburst = \"1ms\"\n",
            5,
            8,
            "process.name",
        ),
        (
            "unknown_group.toml",
            "[[group]]\nname = \"g\"\n[[process]]\nname = \"a\"\ngroup = \"h\"\n",
            5,
            9,
            "process.group",
        ),
        (
            "cpu_beyond_cores.toml",
            "cores = 2\n[[process]]\nname = \"a\"\ncpus = [0, 2]\n",
            4,
            8,
            "process.cpus",
        ),
    ];
    for (name, text, line, col, field) in cases {
        let (status, stderr) = sim_text(dir.path(), name, text);
        assert_eq!(status, Some(2), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        // One located line, then the offending line with a caret under the value.
        let lines: Vec<&str> = stderr.trim_end().lines().collect();
        let located = format!("{name}:{line}:{col}:");
        assert!(
            lines[0].contains(&located),
            "{name}: want {located} in {stderr}"
        );
        assert!(lines.len() <= 5, "{name}: {stderr}");
        let caret = lines.last().unwrap();
        assert!(
            caret.chars().nth(caret.find('|').unwrap() + 1 + *col) == Some('^'),
            "{name}: the caret is not under column {col}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("`{field}`")),
            "{name}: want `{field}` in {stderr}"
        );
    }
}

#[test]
fn missing_file_exits_2_and_names_it() {
    let out = schedkit(&["sim", "examples/no-such-scenario.toml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("examples/no-such-scenario.toml"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
}

/// A small well-formedness check for the SVG we write: tags nest and close, one root.
fn assert_well_formed_svg(svg: &str) {
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = svg;
    let mut roots = 0;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').expect("tag closes") + open;
        let tag = &rest[open + 1..close];
        assert!(!tag.contains('<'), "stray < in {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched </{name}>");
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap();
            if stack.is_empty() {
                roots += 1;
            }
            stack.push(name);
        }
        rest = &rest[close + 1..];
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
    assert_eq!(roots, 1);
    // Text outside tags must not hold a raw '&' that is not an entity.
    for (i, _) in svg.match_indices('&') {
        let ent = &svg[i..svg.len().min(i + 6)];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                .iter()
                .any(|e| ent.starts_with(e)),
            "raw & at {i}"
        );
    }
}

/// Renders with rsvg-convert when it is installed (CI and the dev machine have it).
fn renders(svg_path: &Path) {
    match Command::new("rsvg-convert")
        .arg("-o")
        .arg(svg_path.with_extension("png"))
        .arg(svg_path)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "rsvg-convert failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => eprintln!("rsvg-convert not installed: skipping the PNG rendering check"),
    }
}

#[test]
fn gantt_and_trace_outputs() {
    let dir = scratch();
    let svg = dir.path().join("q.svg");
    let json = dir.path().join("q.json");
    let out = schedkit(&[
        "sim",
        "examples/quickstart.toml",
        "--gantt",
        svg.to_str().unwrap(),
        "--trace",
        json.to_str().unwrap(),
        "--json",
    ]);
    let report = json_of(&out);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_well_formed_svg(&text);
    assert!(
        text.contains("quickstart · policy default ("),
        "the title names the kernel model"
    );
    assert!(text.contains(" · 2 cores"));
    assert!(text.contains(">core 0<") && text.contains(">core 1<"));
    for p in ["editor", "compile", "report", "backup"] {
        assert!(text.contains(&format!(">{p}<")), "legend lacks {p}");
    }
    renders(&svg);

    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let mut busy_us = 0.0;
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        assert!(
            e["pid"].is_u64() && e["tid"].is_u64() && e["name"].is_string(),
            "{e}"
        );
        match ph {
            "X" => {
                assert!(e["ts"].as_f64().unwrap() >= 0.0);
                let dur = e["dur"].as_f64().unwrap();
                assert!(dur > 0.0);
                assert!(
                    e["tid"].as_u64().unwrap() < 2,
                    "a run interval on core 0 or 1"
                );
                busy_us += dur;
            }
            "i" => assert!(e["s"].is_string() && e["ts"].is_number(), "{e}"),
            "M" => assert!(e["args"]["name"].is_string() || e["args"]["sort_index"].is_u64()),
            other => panic!("unexpected phase {other}"),
        }
    }
    // The complete events account for exactly the CPU time of the report.
    let cpu_ns: u64 = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu_ns"].as_u64().unwrap())
        .sum();
    assert!(
        (busy_us * 1000.0 - cpu_ns as f64).abs() < 1.0,
        "{busy_us} us vs {cpu_ns} ns"
    );
}

#[test]
fn compare_runs_each_policy_and_rejects_unknown_ones() {
    let dir = scratch();
    let chart = dir.path().join("c.svg");
    let out = schedkit(&[
        "compare",
        "examples/textbook/rr.toml",
        "--policies",
        "fcfs,sjf,srtf,rr",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let waiting = table
        .lines()
        .find(|l| l.contains("avg waiting ms"))
        .expect("summary row");
    let cells: Vec<&str> = waiting.split_whitespace().collect();
    // FCFS, SJF and RR keep the textbook numbers; SRTF on this file (all arrive at 0) is SJF.
    assert!(
        cells.ends_with(&["10.250", "7.500", "7.500", "13.250", "│"]),
        "{waiting}"
    );
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert_well_formed_svg(&svg);
    renders(&chart);

    let v = json_of(&schedkit(&[
        "compare",
        "examples/quickstart.toml",
        "--policies",
        "cfs,twrs",
        "--json",
    ]));
    let reports = v["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[0]["policy"], "cfs");
    assert_eq!(reports[1]["policy"], "twrs");

    for bad in ["cfs,nope", "cfs,cfs", "exclusive"] {
        let out = schedkit(&["compare", "examples/quickstart.toml", "--policies", bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--policies"), "{stderr}");
        assert!(!stderr.contains("panicked"));
    }
}

/// `experiment fibers-gauss`: the JSON rows the issue names, a small residual in every run,
/// the chart with one panel per method, and bad options refused with status 2.
#[test]
fn fibers_gauss_json_chart_and_bad_options() {
    let dir = scratch();
    let charts = dir.path().join("charts");
    let svg = charts.join("fibers-gauss.svg");
    let out = schedkit_in(
        &[
            "experiment",
            "fibers-gauss",
            "--quick",
            "--arch",
            "A1,A2",
            "--threads",
            "32,128",
            "--json",
            "--out",
            charts.to_str().unwrap(),
        ],
        dir.path(),
    );
    let v = json_of(&out);
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2 * 2 * 2, "methods x threads x archs: {v}");
    for r in rows {
        for key in [
            "method",
            "arch",
            "threads",
            "size",
            "forward_s",
            "backward_s",
            "total_s",
        ] {
            assert!(!r[key].is_null(), "{key} missing in {r}");
        }
        let total = r["total_s"].as_f64().unwrap();
        let sum = r["forward_s"].as_f64().unwrap() + r["backward_s"].as_f64().unwrap();
        assert!((total - sum).abs() < 1e-9, "{r}");
        assert!(r["residual"].as_f64().unwrap() < 1e-8, "{r}");
    }
    let text = std::fs::read_to_string(&svg).expect("chart written");
    assert_well_formed_svg(&text);
    for needle in [
        "method 1 (rows)",
        "method 2 (tiles)",
        "user threads",
        "A1",
        "A2",
    ] {
        assert!(text.contains(needle), "chart lacks {needle}");
    }
    renders(&svg);
    // More scheduler threads than this process may use CPUs is refused, not run on fewer.
    let too_many = (schedkit_linux::affinity::get_thread(0).unwrap().len() + 1).to_string();
    for bad in [
        ["--arch", "A3"],
        ["--threads", "0"],
        ["--method", "3"],
        ["--workers", too_many.as_str()],
    ] {
        let out = schedkit_in(
            &["experiment", "fibers-gauss", "--quick", bad[0], bad[1]],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(bad[0]), "{bad:?}: {stderr}");
    }
    // Nothing but the chart (and its PNG rendering) was written, all of it under --out.
    let mut names: Vec<String> = std::fs::read_dir(&charts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.retain(|n| n != "fibers-gauss.png");
    assert_eq!(names, ["fibers-gauss.svg"]);
    let top: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, ["charts"]);
}
