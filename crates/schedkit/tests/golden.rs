//! Golden outputs of `schedkit sim`: every example scenario the simulator accepts, through the
//! report table, `--json`, `--csv`, `--gantt` and `--trace`, must produce exactly the bytes
//! recorded in tests/golden/sim/SHA256SUMS (by `scripts/golden.sh record`; the outputs
//! themselves, about 34 MB, are not kept). Every other example must be rejected by `sim` (a
//! real-engine-only policy); a new simulatable example needs its sums recorded.
//!
//! The runs are deterministic (seeded, simulated time only); the scenario path the report
//! echoes is the relative `examples/...` path given, run from the repository root.

mod common;

use common::{root, schedkit};
use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn sim_outputs_match_the_recorded_sums() {
    // `policy = "default"` is the model of the running kernel; the sums are for Linux 6.18
    // (eevdf), as scripts/golden.sh pins it. The other test here reads no environment, so
    // nothing reads it while it changes.
    std::env::set_var("SCHEDKIT_SIM_KERNEL", "6.18");
    let root = root();
    let sums = std::fs::read_to_string(root.join("tests/golden/sim/SHA256SUMS"))
        .expect("read tests/golden/sim/SHA256SUMS");
    let expected: BTreeMap<&str, &str> = sums
        .lines()
        .map(|l| {
            let (sum, name) = l.split_once("  ").expect("`SUM  NAME` lines");
            (name, sum)
        })
        .collect();
    let out = tempfile::tempdir().expect("temp dir");
    let mut actual = BTreeMap::new();
    let mut scenarios = Vec::new();
    collect_tomls(&root.join("examples"), &mut scenarios);
    scenarios.sort();
    assert!(!scenarios.is_empty(), "no examples found");
    for path in &scenarios {
        let rel = path.strip_prefix(&root).unwrap().to_str().unwrap();
        let name = rel
            .strip_prefix("examples/")
            .unwrap()
            .strip_suffix(".toml")
            .unwrap()
            .replace('/', "__");
        let report = schedkit(&["sim", rel]);
        if !expected.contains_key(format!("{name}.report.txt").as_str()) {
            assert!(
                !report.status.success(),
                "{rel}: the simulator accepts it but it has no recorded sums \
                 (scripts/golden.sh record)"
            );
            continue;
        }
        assert!(report.status.success(), "{rel}: {report:?}");
        actual.insert(format!("{name}.report.txt"), sha256_hex(&report.stdout));
        for (flag, suffix) in [("--json", "json"), ("--csv", "csv")] {
            let o = schedkit(&["sim", rel, flag]);
            assert!(o.status.success(), "{rel} {flag}: {o:?}");
            actual.insert(format!("{name}.{suffix}"), sha256_hex(&o.stdout));
        }
        for (flag, suffix) in [("--gantt", "gantt.svg"), ("--trace", "trace.json")] {
            let file = out.path().join(format!("{name}.{suffix}"));
            let o = schedkit(&["sim", rel, flag, file.to_str().unwrap()]);
            assert!(o.status.success(), "{rel} {flag}: {o:?}");
            let bytes = std::fs::read(&file).expect("output written");
            actual.insert(format!("{name}.{suffix}"), sha256_hex(&bytes));
        }
    }
    let mut differ = Vec::new();
    for (name, sum) in &expected {
        match actual.get(*name) {
            Some(a) if a == sum => {}
            Some(_) => differ.push(format!("differs: {name}")),
            None => differ.push(format!("not produced: {name}")),
        }
    }
    assert!(
        differ.is_empty(),
        "outputs differ from tests/golden/sim/SHA256SUMS (scripts/golden.sh check DIR \
         against a full recording shows the diff):\n{}",
        differ.join("\n")
    );
}

fn collect_tomls(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read examples") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect_tomls(&path, into);
        } else if path.extension().is_some_and(|e| e == "toml") {
            into.push(path);
        }
    }
}

/// SHA-256 (FIPS 180-4) of `data`, as lowercase hex: enough of it for comparing with
/// `sha256sum`, without a dependency.
fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn sha256_matches_the_standard_vectors() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
