//! Starting an external command held at a gate, so that its placement, scheduling class and
//! counters are in force before its first instruction.
//!
//! `std::process::Command::spawn` waits until the child has exec'ed, so a child that waits on
//! the parent before exec would deadlock it; this module forks and execs by hand:
//!
//! ```text
//! parent: pipe(gate), pipe(report, CLOEXEC) ── fork ──▶ child: close gate writer,
//!         cgroup, affinity, class, counters on pid     PR_SET_PDEATHSIG(SIGKILL),
//!                                                      getppid() still the parent?
//!         write one byte, close gate writer ──────────▶ read(gate) returns 1, execvp
//!                                                      (0 = parent died: _exit(126))
//!         read(report): 0 bytes = exec'ed,              exec failed: write errno, _exit(127)
//!                       4 bytes = errno of the failure
//! ```
//!
//! PDEATHSIG ends the job if schedkit dies (even by SIGKILL), so a killed run leaves no
//! job running at FIFO 99 on isolated cores; `schedkit restore` handles the rest.

use crate::{Error, Result};
use std::ffi::CString;

/// A forked child waiting at the gate.
pub struct Gated {
    pub pid: i32,
    /// The child was born in the cgroup [`fork_gated`] was given (`clone3` with
    /// `CLONE_INTO_CGROUP`); otherwise the caller moves it.
    pub in_cgroup: bool,
    gate_w: i32,
    report_r: i32,
}

/// Resolves `prog` as execvp would, to fail early (exit 2) on a command that does not exist.
pub fn resolve(prog: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        let p = std::path::PathBuf::from(prog);
        return exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| exec(p))
}

/// Forks `argv` and holds it before exec. With `die_with_parent`, the child gets SIGKILL
/// when the forking thread exits (PR_SET_PDEATHSIG); without it (`--keep-running`), it
/// outlives the run.
pub fn fork_gated(
    argv: &[String],
    die_with_parent: bool,
    into_cgroup: Option<i32>,
) -> Result<Gated> {
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_str()))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::Input("command arguments must not contain NUL bytes".into()))?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut gate = [0i32; 2];
    let mut report = [0i32; 2];
    // SAFETY: arrays of two fds.
    unsafe {
        if libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) < 0
            || libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) < 0
        {
            return Err(Error::last_os("pipe2"));
        }
    }
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // Born in its cgroup where the kernel can (cgroup v2, Linux 5.7+): moving a running
    // process into a cgroup waits for an RCU grace period under the cgroup write lock (about
    // 20 ms on this kind of machine, most of a short run's set-up); a child created inside
    // needs neither.
    let mut in_cgroup = false;
    let mut pid = -1;
    if let Some(fd) = into_cgroup {
        pid = clone_into_cgroup(fd);
        in_cgroup = pid >= 0;
    }
    if pid < 0 {
        // SAFETY: after fork the child only calls async-signal-safe functions (close, prctl,
        // getppid, read, execvp, write, _exit) on memory prepared before the fork.
        pid = unsafe { libc::fork() };
    }
    if pid < 0 {
        return Err(Error::last_os("fork"));
    }
    if pid == 0 {
        unsafe {
            libc::close(gate[1]);
            libc::close(report[0]);
            // Its own process group, so the whole job (children included) can be ended.
            libc::setpgid(0, 0);
            if die_with_parent {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                // The parent may have died before prctl took effect: then no signal comes.
                if libc::getppid() != parent {
                    libc::_exit(126);
                }
            }
            // The gate opens with one byte; end of file means the parent died before
            // releasing us (its placement, cgroup and class were never made): never exec.
            let mut b = 0u8;
            let n = loop {
                let n = libc::read(gate[0], (&mut b as *mut u8).cast(), 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if n != 1 {
                libc::_exit(126);
            }
            libc::execvp(ptrs[0], ptrs.as_ptr());
            let e: i32 = *libc::__errno_location();
            libc::write(report[1], (&e as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    // SAFETY: closing our copies of the child's ends.
    unsafe {
        libc::close(gate[0]);
        libc::close(report[1]);
    }
    Ok(Gated {
        pid,
        in_cgroup,
        gate_w: gate[1],
        report_r: report[0],
    })
}

/// `clone3(CLONE_INTO_CGROUP)` as a fork into the cgroup directory `fd`: the child's pid in
/// the parent, 0 in the child, negative where the kernel cannot (then nothing was created).
fn clone_into_cgroup(fd: i32) -> i32 {
    /// `struct clone_args` of Linux 5.7 (version 2, 88 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: fd as u64,
        ..CloneArgs::default()
    };
    // SAFETY: with no stack and no CLONE_VM this is fork(2) with a target cgroup; the child
    // runs only async-signal-safe code (see fork_gated).
    unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        ) as i32
    }
}

impl Gated {
    /// Lets the child exec; returns the errno if exec failed (the child has then exited).
    pub fn release(self) -> std::result::Result<(), i32> {
        let mut e = 0i32;
        // SAFETY: fds we own; e is 4 bytes.
        let n = unsafe {
            let go = 1u8;
            libc::write(self.gate_w, (&go as *const u8).cast(), 1);
            libc::close(self.gate_w);
            let n = libc::read(self.report_r, (&mut e as *mut i32).cast(), 4);
            libc::close(self.report_r);
            n
        };
        std::mem::forget(self);
        if n == 4 {
            Err(e)
        } else {
            Ok(())
        }
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        // Never released: kill the child before it execs.
        // SAFETY: plain syscalls on our fds and child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::close(self.gate_w);
            libc::close(self.report_r);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// Non-blocking wait: `Some(status text)` once the child exited.
pub fn try_wait(pid: i32) -> Option<String> {
    let mut st = 0;
    // SAFETY: st is writable.
    let r = unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) };
    if r == pid {
        Some(if libc::WIFEXITED(st) {
            format!("exit {}", libc::WEXITSTATUS(st))
        } else if libc::WIFSIGNALED(st) {
            format!("signal {}", libc::WTERMSIG(st))
        } else {
            "ended".into()
        })
    } else if r < 0 {
        Some("gone".into())
    } else {
        None
    }
}

/// Ends a job: SIGTERM to its process group, SIGKILL to it after `grace`, and reaps the
/// child. Never blocks for long: the caller still has a journal to undo. The job's threads
/// should be demoted from real-time classes first (see the engine), or a FIFO thread spinning
/// on the CPU where the child waits would keep it from ever running to exit.
pub fn terminate(pid: i32, grace: std::time::Duration) -> String {
    // SAFETY: signals to our own child's process group (pid == pgid, set at fork).
    unsafe { libc::kill(-pid, libc::SIGTERM) };
    let t0 = std::time::Instant::now();
    while t0.elapsed() < grace {
        if let Some(s) = try_wait(pid) {
            // Leftovers of the group (background children) go too.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let t1 = std::time::Instant::now();
    while t1.elapsed() < std::time::Duration::from_secs(2) {
        if try_wait(pid).is_some() {
            return "killed at the horizon".into();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    "killed at the horizon (not reaped yet)".into()
}

/// Makes the calling process receive SIGKILL when its parent (thread) exits, so helpers such
/// as an experiment's CPU hogs never outlive the run that started them.
pub fn die_with_parent() {
    // SAFETY: prctl with plain arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
}
