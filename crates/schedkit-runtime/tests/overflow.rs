//! A fiber that overflows its stack is reported as a stack overflow (message on stderr, abort),
//! not a random crash. The overflow runs in a child process: this test binary re-executes
//! itself with an environment variable that selects the child role.

use std::process::Command;

use schedkit_runtime::{Arch, Config, Runtime};

#[inline(never)]
fn recurse(n: u64, sink: &mut [u8; 512]) -> u64 {
    let mut buf = [0u8; 512];
    buf[(n % 512) as usize] = n as u8;
    sink[0] ^= buf[(n * 7 % 512) as usize];
    if n == 0 {
        return sink[0] as u64;
    }
    recurse(n - 1, &mut buf) + buf[3] as u64
}

#[test]
fn stack_overflow_child() {
    if std::env::var_os("SCHEDKIT_OVERFLOW_CHILD").is_none() {
        return; // only meaningful as the child of `stack_overflow_is_reported`
    }
    let mut c = Config::new(Arch::A2);
    c.workers = 1;
    c.stack_size = 32 * 1024;
    let rt = Runtime::new(c).unwrap();
    let h = rt.spawn(|| recurse(1_000_000, &mut [0u8; 512]));
    let _ = h.join();
    unreachable!("the fiber should have overflowed");
}

#[test]
fn stack_overflow_is_reported() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "stack_overflow_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SCHEDKIT_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc_sigabrt()),
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains("has overflowed its stack (32768 bytes"),
        "stderr: {stderr}"
    );
    assert!(stderr.contains("fiber stack overflow"), "stderr: {stderr}");
}

fn libc_sigabrt() -> i32 {
    6
}
