//! What the binary's end-to-end tests share: the binary, the repository root, running it,
//! reading its JSON output, and whether the tests run as root.
#![allow(dead_code)] // each test crate uses a part of it

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_schedkit");

/// The repository root (examples live there).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `schedkit ARGS` in the repository root.
pub fn schedkit(args: &[&str]) -> Output {
    schedkit_in(args, &root())
}

/// Runs `schedkit ARGS` in `dir`.
pub fn schedkit_in(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run schedkit")
}

/// The JSON on stdout of a run that must have succeeded.
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Whether the tests run as root (real runs need it; the tests say why they skip otherwise).
pub fn is_root() -> bool {
    schedkit_linux::privilege::Privileges::current().root
}

/// `setpriv`, for dropping to an unprivileged user, when the tests run as root and have it;
/// `None` (after saying why the caller skips) otherwise.
pub fn setpriv_as_root() -> Option<&'static str> {
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if !is_root() || setpriv.is_none() {
        eprintln!("skipped: dropping to an unprivileged user needs root and setpriv");
        return None;
    }
    setpriv
}
