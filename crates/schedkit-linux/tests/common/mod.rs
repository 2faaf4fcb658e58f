//! What the Linux layer's root tests share: serialising tests that touch the same cgroups and
//! CPUs, the root check, and a fresh state (journal) directory per test.
#![allow(dead_code)] // each test crate uses a part of it

use std::path::PathBuf;

/// Tests of one binary that write cgroups named after this process and use its CPUs run one at
/// a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// An empty directory `schedkit-<suite>-<tag>-<pid>` under the temporary directory.
pub fn state_dir(suite: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedkit-{suite}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
