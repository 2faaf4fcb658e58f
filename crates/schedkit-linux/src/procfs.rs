//! Per-thread accounting from `/proc`, and the machine's thread list.
//!
//! For a thread, [`ThreadStat::read`] combines three files of `/proc/PID/task/TID`:
//! - `stat`: state, flags (PF_KTHREAD, PF_NO_SETAFFINITY), utime/stime (clock ticks), start
//!   time (ticks since boot: with the TID it names a thread uniquely, so a journal never
//!   touches a recycled TID), the CPU it last ran on, its RT priority and policy;
//! - `schedstat`: nanoseconds on the CPU, nanoseconds waiting on a run queue, time slices;
//! - `status`: voluntary and involuntary context switches.
//!
//! `schedstat` is the precise clock (ns, from the scheduler itself); utime/stime are tick
//! samples kept for the user/system split.

use crate::{Error, Result, Roots};
use std::path::{Path, PathBuf};

/// PF_KTHREAD in `stat` flags.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// PF_NO_SETAFFINITY: the kernel forbids changing this thread's affinity.
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// A snapshot of one thread.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ThreadStat {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    /// `R`, `S`, `D`, `T`, `Z`, ...
    pub state: char,
    pub flags: u64,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Start time in clock ticks since boot.
    pub starttime: u64,
    /// CPU the thread last ran on.
    pub cpu: usize,
    pub rt_priority: u32,
    pub policy: u32,
    /// Threads of its process (`stat` field 20).
    pub num_threads: u64,
    /// From `schedstat`: time on a CPU and waiting on a run queue (ns), and slices.
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl ThreadStat {
    pub fn is_kthread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
    pub fn affinity_locked(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY != 0
    }
    pub fn is_runnable(&self) -> bool {
        self.state == 'R'
    }

    /// Reads `/proc/PID/task/TID/{stat,schedstat,status}`.
    pub fn read(roots: &Roots, pid: i32, tid: i32) -> Result<ThreadStat> {
        let d = thread_dir(roots, pid, tid);
        let stat = std::fs::read_to_string(d.join("stat"))
            .map_err(|e| Error::io(format!("read {}", d.join("stat").display()), e))?;
        let mut t = parse_stat(&stat)
            .ok_or_else(|| Error::Input(format!("{}: unparsable", d.join("stat").display())))?;
        t.pid = pid;
        if let Some(v) = schedstat(roots, pid, tid) {
            (t.run_ns, t.wait_ns, t.timeslices) = v;
        }
        if let Ok(s) = std::fs::read_to_string(d.join("status")) {
            for l in s.lines() {
                if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:") {
                    t.voluntary_switches = v.trim().parse().unwrap_or(0);
                } else if let Some(v) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                    t.involuntary_switches = v.trim().parse().unwrap_or(0);
                }
            }
        }
        Ok(t)
    }
}

/// `/proc/PID/task/TID/schedstat`: ns on a CPU, ns waiting on a run queue, timeslices
/// (`None` where the thread is gone or the file is short).
pub fn schedstat(roots: &Roots, pid: i32, tid: i32) -> Option<(u64, u64, u64)> {
    let s = std::fs::read_to_string(thread_dir(roots, pid, tid).join("schedstat")).ok()?;
    let mut f = s.split_whitespace().map(|x| x.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next()??))
}

/// Reads `/proc/PID/task/TID/stat` alone (state, flags, start time, CPU): one open and
/// read, for the callers that need nothing else (exclusive mode's sweeps, a journal's
/// start-time checks), at a third of [`ThreadStat::read`]'s cost.
pub fn read_stat(roots: &Roots, pid: i32, tid: i32) -> Option<ThreadStat> {
    let mut buf = [0u8; 1024];
    let n = read_into(&thread_dir(roots, pid, tid).join("stat"), &mut buf)?;
    let mut t = parse_stat(std::str::from_utf8(&buf[..n]).ok()?)?;
    t.pid = pid;
    Some(t)
}

/// One open and one read into `buf` (no allocation): `/proc` files of a thread are generated
/// whole on the first read.
fn read_into(path: &Path, buf: &mut [u8]) -> Option<usize> {
    use std::io::Read;
    let n = std::fs::File::open(path).ok()?.read(buf).ok()?;
    (n > 0).then_some(n)
}

fn thread_dir(roots: &Roots, pid: i32, tid: i32) -> PathBuf {
    roots
        .proc
        .join(pid.to_string())
        .join("task")
        .join(tid.to_string())
}

/// Parses a `stat` line (TID first, comm in parentheses, which may itself hold parentheses).
pub fn parse_stat(text: &str) -> Option<ThreadStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let tid: i32 = text[..open].trim().parse().ok()?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state); field n is rest[n - 3].
    let f = |n: usize| -> Option<u64> { rest.get(n - 3)?.parse().ok() };
    Some(ThreadStat {
        pid: 0,
        tid,
        comm,
        state: rest.first()?.chars().next()?,
        flags: f(9)?,
        utime_ticks: f(14)?,
        stime_ticks: f(15)?,
        starttime: f(22)?,
        cpu: f(39)? as usize,
        num_threads: f(20)?,
        rt_priority: f(40).unwrap_or(0) as u32,
        policy: f(41).unwrap_or(0) as u32,
        ..ThreadStat::default()
    })
}

/// Thread ids of process `pid`.
pub fn tids(roots: &Roots, pid: i32) -> Vec<i32> {
    numeric_entries(&roots.proc.join(pid.to_string()).join("task"))
}

/// Thread ids of process `pid`, each with the inode number of its `/proc/PID/task/TID`
/// entry (unsorted). procfs gives a thread's directory one inode while that stays cached and
/// the thread lives; a TID that comes to name another thread gets a new inode (the old
/// dentry fails revalidation once its task is gone). So an unchanged (TID, inode) pair is the
/// same thread, told without a system call per thread; a changed inode says only "look
/// again" (a cache eviction also changes it).
///
/// Read with `open` and `getdents64` directly: `std::fs::read_dir` adds an `fstat` and an
/// allocation per entry, and exclusive mode lists every process of the machine twice a run.
pub fn tasks(roots: &Roots, pid: i32) -> Vec<(i32, u64)> {
    let mut out = Vec::new();
    let path = roots.proc.join(pid.to_string()).join("task");
    let _ = each_dirent(&path, |name, ino| {
        if let Some(tid) = std::str::from_utf8(name).ok().and_then(|n| n.parse().ok()) {
            out.push((tid, ino));
        }
    });
    out
}

/// The processes thread `tid` of `pid` started (`/proc/PID/task/TID/children`; empty where
/// the kernel lacks CONFIG_PROC_CHILDREN or the thread is gone).
pub fn children(roots: &Roots, pid: i32, tid: i32) -> Vec<i32> {
    let path = roots
        .proc
        .join(pid.to_string())
        .join("task")
        .join(tid.to_string())
        .join("children");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
}

/// Process ids on the machine, each with the inode number of its `/proc/PID` entry
/// (unsorted; the inode tells a recycled pid apart as in [`tasks`]).
pub fn pids_with_ino(roots: &Roots) -> Vec<(i32, u64)> {
    let mut out = Vec::new();
    let _ = each_dirent(&roots.proc, |name, ino| {
        if let Some(pid) = std::str::from_utf8(name).ok().and_then(|n| n.parse().ok()) {
            out.push((pid, ino));
        }
    });
    out
}

/// Calls `f(name, inode)` for every entry of procfs directory `path` but `.` and `..`.
fn each_dirent(path: &Path, mut f: impl FnMut(&[u8], u64)) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is a NUL-terminated path; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is not owned elsewhere.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // u64 words: the kernel's records are 8-byte aligned.
    let mut buf = [0u64; 2048];
    loop {
        // SAFETY: `buf` is writable for its whole length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(());
        }
        // procfs fills the buffer until the next record does not fit or the directory ends
        // (`proc_pid_readdir`, `proc_task_readdir`): a call that left room for several
        // more records read the last one, and the `getdents64` that would return 0 is
        // saved (one system call per process listed).
        let last = (n as usize) + 1024 < std::mem::size_of_val(&buf);
        // SAFETY: the kernel wrote `n` bytes of `linux_dirent64` records into `buf`.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, n as usize) };
        let mut off = 0;
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        while off + 19 <= bytes.len() {
            let ino = u64::from_ne_bytes(bytes[off..off + 8].try_into().expect("8 bytes"));
            let reclen =
                u16::from_ne_bytes(bytes[off + 16..off + 18].try_into().expect("2 bytes")) as usize;
            if reclen == 0 || off + reclen > bytes.len() {
                break;
            }
            let name = &bytes[off + 19..off + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                f(name, ino);
            }
            off += reclen;
        }
        if last {
            return Ok(());
        }
    }
}

/// The start time (clock ticks since boot) of process `pid`, from `/proc/PID/stat` with one
/// open and one read (no allocation): how a journal tells a pid it changed from a recycled
/// one.
pub fn process_starttime(roots: &Roots, pid: i32) -> Option<u64> {
    let mut buf = [0u8; 4096];
    let n = read_into(&roots.proc.join(pid.to_string()).join("stat"), &mut buf)?;
    parse_stat(std::str::from_utf8(&buf[..n]).ok()?).map(|t| t.starttime)
}

/// Reads `/proc/PID/stat` (the process's own line: its leader's state, flags and start
/// time; the CPU times are the whole process's) with one open and one read.
pub fn read_process_stat(roots: &Roots, pid: i32) -> Option<ThreadStat> {
    let mut buf = [0u8; 4096];
    let n = read_into(&roots.proc.join(pid.to_string()).join("stat"), &mut buf)?;
    let mut t = parse_stat(std::str::from_utf8(&buf[..n]).ok()?)?;
    t.pid = pid;
    Some(t)
}

/// Process ids on the machine.
pub fn pids(roots: &Roots) -> Vec<i32> {
    numeric_entries(&roots.proc)
}

fn numeric_entries(dir: &Path) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Every (pid, tid) on the machine.
pub fn all_threads(roots: &Roots) -> Vec<(i32, i32)> {
    pids(roots)
        .into_iter()
        .flat_map(|p| tids(roots, p).into_iter().map(move |t| (p, t)))
        .collect()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Reads a sysctl under `/proc/sys` (`kernel/sched_rt_runtime_us`).
pub fn sysctl(roots: &Roots, name: &str) -> Result<String> {
    let p = roots.proc.join("sys").join(name);
    crate::read_trim(&p).map_err(|e| Error::io(format!("read {}", p.display()), e))
}

/// Writes a sysctl under `/proc/sys`.
pub fn set_sysctl(roots: &Roots, name: &str, value: &str) -> Result<()> {
    let p = roots.proc.join("sys").join(name);
    std::fs::write(&p, value).map_err(|e| Error::io(format!("write {value} to {}", p.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parentheses_in_comm() {
        let line = "1234 (a (b) c) R 1 1234 1234 0 -1 4194560 100 0 0 0 250 30 0 0 20 0 1 0 5555 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let t = parse_stat(line).unwrap();
        assert_eq!(t.tid, 1234);
        assert_eq!(t.comm, "a (b) c");
        assert_eq!(t.state, 'R');
        assert_eq!(t.utime_ticks, 250);
        assert_eq!(t.stime_ticks, 30);
        assert_eq!(t.starttime, 5555);
        assert_eq!(t.cpu, 1);
        assert!(!t.is_kthread());
    }
}
