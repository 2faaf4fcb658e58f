//! Parsing stays linear in the number of entries: a file of 1,000,000 processes (about 40 MB)
//! must parse in seconds, not grow without end. The timing is a benchmark (`#[ignore]`, it
//! prints and asserts nothing about time); the plain test checks that a large file parses
//! whole and that its runnability check and its errors point at the right lines.
//!
//!     cargo test -p schedkit-core --release --test parse_scale -- --ignored --nocapture

use schedkit_core::Scenario;
use std::time::Instant;

/// `n` processes of four lines each, as a user or a generator writes them.
fn processes(n: usize) -> String {
    let mut text = String::from("cores = 8\n[policy]\nname = \"cfs\"\n[run]\nhorizon = \"1s\"\n");
    for i in 0..n {
        text.push_str(&format!(
            "[[process]]\nname = \"p{i}\"\nburst = \"{}ms\"\nnice = {}\n",
            1 + i % 50,
            i % 5
        ));
    }
    text
}

#[test]
fn a_large_file_parses_whole_and_errors_name_its_last_lines() {
    let n = 20_000;
    let mut text = processes(n);
    let s = Scenario::parse("big.toml", &text).unwrap();
    assert_eq!(s.processes().len(), n);
    assert_eq!(s.processes()[n - 1].line(), 6 + 4 * (n - 1));
    assert!(s.runnable(Some(&text)).unwrap().is_empty());
    // An error in the last entry names its line.
    text.push_str("[[process]]\nname = \"late\"\narrival = \"2s\"\n");
    let s = Scenario::parse("big.toml", &text).unwrap();
    let e = s.runnable(Some(&text)).unwrap_err();
    assert_eq!(e.error.line, 6 + 4 * n + 2, "{e}");
}

#[test]
#[ignore = "a benchmark; run with --ignored --nocapture (release)"]
fn a_million_processes_parse_in_seconds() {
    for n in [10_000, 100_000, 1_000_000] {
        let text = processes(n);
        let t = Instant::now();
        let s = Scenario::parse("big.toml", &text).unwrap();
        let parse = t.elapsed();
        let t = Instant::now();
        s.runnable(Some(&text)).unwrap();
        let check = t.elapsed();
        println!(
            "{n:>9} processes, {:>5.1} MB: parse {:>7.3} s ({:.2} us per process), runnable check {:.3} s",
            text.len() as f64 / 1e6,
            parse.as_secs_f64(),
            parse.as_secs_f64() * 1e6 / n as f64,
            check.as_secs_f64()
        );
    }
}
