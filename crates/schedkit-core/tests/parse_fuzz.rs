//! Mutation fuzzing of the scenario parser: random edits of valid scenario text (the bundled
//! examples and a sample that uses every section) must never panic the parser, and every
//! error must point at a real line (>= 1, within the text) and name a field.

use proptest::prelude::*;
use schedkit_core::scenario::Scenario;
use std::path::{Path, PathBuf};

/// A valid scenario touching every section and most keys.
const SAMPLE: &str = r#"# every section
cores = 2

[policy]
name = "mlfq"
quantum = "4ms"
seed = 7
levels = 3
boost = "1s"
context_switch = "10us"

[run]
horizon = "2s"

[[group]]
name = "a"
weight = 1024

[[process]]
name = "web"
arrival = "1ms"
burst = "30ms"
threads = 4
nice = -5
priority = 2
tickets = 10
group = "a"
cpus = [0, 1]

[[process]]
name = "batch"
weight = 335
work = "stride"
array = "5MB"
stride = "64B"

[[task]]
name = "t1"
period = "100ms"
deadline = "90ms"
regions = [{ seq = "2ms" }, { par = ["3ms", "1ms", "4ms"] }, { seq = "1ms" }]

[[task]]
name = "t2"
period = "50ms"
wcet = "5ms"
cpus = [1]
"#;

/// The bundled example scenarios (every `.toml` under `examples/`).
fn corpus() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "toml") {
                if let Ok(text) = std::fs::read_to_string(&p) {
                    out.push(text);
                }
            }
        }
    }
    let mut out = vec![SAMPLE.to_string()];
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"),
        &mut out,
    );
    out
}

/// Fragments that are likely to confuse a TOML or scenario parser.
const FRAGMENTS: &[&str] = &[
    "=",
    "\"",
    "'",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    "\n",
    "#",
    "-",
    "-1",
    "0",
    "1e9",
    "99999999999999999999",
    "ms",
    "us",
    "s",
    "ns",
    "MB",
    "4ms",
    "\"4ms\"",
    "\"-4ms\"",
    "\"0ms\"",
    "\"4\"",
    "\"4 parsecs\"",
    "name",
    "quantum",
    "burst",
    "cpus = [7]",
    "group = \"nope\"",
    "[[process]]\nname = \"a\"\n",
    "[[group]]\nname = \"a\"\n",
    "[policy]\n",
    "[run]\n",
    "[[task]]\nname = \"t1\"\n",
    "regions = []",
    "regions = [{}]",
    "par = []",
    "threads = 0",
    "nice = 99",
    "levels = 0",
    "é",
    "ü\u{301}",
    "日本",
    "\u{1F600}",
    "\t",
    "\r\n",
    "\\",
    "\\u",
    "true",
    "inf",
    "nan",
    "1979-05-27",
    "\u{0}",
];

#[derive(Clone, Debug)]
enum Mutation {
    /// Delete `len` characters at `at` (positions scale to the text length).
    Delete { at: f64, len: usize },
    /// Insert a fragment.
    Insert { at: f64, fragment: usize },
    /// Replace one character with a fragment.
    Replace { at: f64, fragment: usize },
    /// Duplicate a line.
    DuplicateLine { line: f64 },
    /// Swap two lines.
    SwapLines { a: f64, b: f64 },
    /// Truncate the text.
    Truncate { at: f64 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = 0.0..1.0f64;
    let frag = 0..FRAGMENTS.len();
    prop_oneof![
        (at.clone(), 1usize..12).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (at.clone(), frag.clone()).prop_map(|(at, fragment)| Mutation::Insert { at, fragment }),
        (at.clone(), frag).prop_map(|(at, fragment)| Mutation::Replace { at, fragment }),
        at.clone().prop_map(|line| Mutation::DuplicateLine { line }),
        (at.clone(), at.clone()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        at.prop_map(|at| Mutation::Truncate { at }),
    ]
}

/// Character index `f` of the way through `text`, as a byte offset on a char boundary.
fn char_pos(text: &str, f: f64) -> usize {
    let n = text.chars().count();
    let k = ((n as f64) * f) as usize;
    text.char_indices().nth(k).map_or(text.len(), |(i, _)| i)
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut s = text.to_string();
    match *m {
        Mutation::Delete { at, len } => {
            let start = char_pos(&s, at);
            let end = s[start..]
                .char_indices()
                .nth(len)
                .map_or(s.len(), |(i, _)| start + i);
            s.replace_range(start..end, "");
        }
        Mutation::Insert { at, fragment } => {
            let p = char_pos(&s, at);
            s.insert_str(p, FRAGMENTS[fragment]);
        }
        Mutation::Replace { at, fragment } => {
            let p = char_pos(&s, at);
            let end = s[p..].chars().next().map_or(p, |c| p + c.len_utf8());
            s.replace_range(p..end, FRAGMENTS[fragment]);
        }
        Mutation::DuplicateLine { line } => {
            let mut lines: Vec<&str> = s.lines().collect();
            if !lines.is_empty() {
                let k = ((lines.len() as f64) * line) as usize % lines.len();
                lines.insert(k, lines[k]);
            }
            s = lines.join("\n");
        }
        Mutation::SwapLines { a, b } => {
            let mut lines: Vec<&str> = s.lines().collect();
            if !lines.is_empty() {
                let n = lines.len();
                lines.swap(((n as f64) * a) as usize % n, ((n as f64) * b) as usize % n);
            }
            s = lines.join("\n");
        }
        Mutation::Truncate { at } => {
            let p = char_pos(&s, at);
            s.truncate(p);
        }
    }
    s
}

proptest! {
    // 2000 cases take a fraction of a second; `PROPTEST_CASES=200000` searches deeper.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_scenarios_never_panic_and_errors_are_located(
        pick in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let corpus = corpus();
        let original = &corpus[pick.index(corpus.len())];
        let mut text = original.clone();
        for m in &mutations {
            text = apply(&text, m);
        }
        // A panic inside `parse` fails the case (proptest catches it and shrinks).
        if let Err(e) = Scenario::parse("fuzz.toml", &text) {
            let lines = text.split('\n').count().max(1);
            prop_assert!(e.line >= 1, "error without a line: {e}\n---\n{text}");
            prop_assert!(e.line <= lines, "line {} beyond the text ({lines} lines): {e}\n---\n{text}", e.line);
            prop_assert!(e.column >= 1, "error without a column: {e}\n---\n{text}");
            prop_assert!(!e.field.trim().is_empty(), "error without a field: {e}\n---\n{text}");
            prop_assert!(!e.message.trim().is_empty(), "error without a message: {e}\n---\n{text}");
            prop_assert_eq!(&e.file, "fuzz.toml");
        }
    }
}

#[test]
fn the_corpus_parses_before_mutation() {
    let corpus = corpus();
    assert!(
        corpus.len() >= 5,
        "expected the sample and the bundled examples"
    );
    for text in corpus {
        if let Err(e) = Scenario::parse("corpus.toml", &text) {
            panic!("unmutated scenario does not parse: {e}\n---\n{text}");
        }
    }
}
