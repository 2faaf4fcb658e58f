//! schedkit-linux: the Linux layer under `schedkit run`, `schedkit topo` and the runtime pools.
//!
//! Every module here talks to the kernel through one narrow door, so that callers (and tests)
//! can reason about what changes on the machine:
//!
//! - [`affinity`]: CPU sets and per-thread affinity (`sched_setaffinity` by TID);
//! - [`sched`]: per-thread scheduling class and priority (`sched_setattr`: SCHED_OTHER with
//!   nice, SCHED_FIFO, SCHED_RR, SCHED_DEADLINE);
//! - [`topo`]: the machine's topology read from sysfs;
//! - [`irq`]: IRQ affinity masks under `/proc/irq`;
//! - [`procfs`]: per-thread accounting from `/proc` (utime/stime, schedstat, last CPU,
//!   voluntary and involuntary switches) and the machine's thread list;
//! - [`perf`]: `perf_event_open` counters behind a [`perf::CounterSource`] seam;
//! - [`journal`]: every change to shared machine state is written (and fsynced) to a journal
//!   before it is made, undone on exit, and undone by `schedkit restore` after a crash;
//! - [`privilege`]: what this process may do (root, CAP_SYS_NICE, CAP_SYS_ADMIN);
//! - [`run`]: the real engine (built-in workloads, commands, sampling into the trace), also
//!   reachable by its older name `engine`;
//! - [`freezer`]: stop and resume a job at once (cgroup v2/v1 freezer, signals), gang scheduling's hook;
//! - [`exclusive`]: seed 000's exclusive mode (system cores, moved threads and IRQs, pinning);
//! - [`oneshot`]: one-command mode's flags (class, priority, nice, CPUs, cpu weight), checked
//!   and applied to a command before it execs;
//! - [`attach`]: the same, and exclusive mode, for work already running (`--pid`, `--cgroup`,
//!   `--unit`), journaled as attached, never ended;
//! - [`stall`]: a witness of machine stalls (a virtual machine held by its host), so that
//!   real-time tests and reports can tell them from a scheduler's own lateness.
//!
//! Paths to sysfs and procfs go through [`Roots`], so tests can point the readers at a fake
//! tree (the `SCX_SYSFS_PREFIX` idea of the scx tools).

pub mod affinity;
pub mod attach;
pub mod cgroup;
pub mod ctl;
pub mod deadline;
pub mod exclusive;
pub mod freezer;
pub mod guard;
pub mod honest;
pub mod irq;
pub mod jobcg;
pub mod journal;
pub mod lease;
pub mod newidle;
pub mod oneshot;
pub mod other_tasks;
pub mod perf;
pub mod privilege;
pub mod procfs;
pub mod run;
pub mod sched;
pub mod spawn;
pub mod stall;
mod threadfiles;
pub mod topo;
pub mod workload;

/// The real engine's older path (`schedkit_linux::engine::run`), kept for its callers.
pub use run as engine;

use std::path::{Path, PathBuf};

/// Errors of the Linux layer. `Input` is the user's mistake (exit 2 at the CLI), `Privilege`
/// a missing right and `Degraded` a run that could not do what was asked (exit 3), `Busy` another run holding the machine (exit 4), `Stale` a dead
/// run's changes not yet undone (exit 5), `Os` everything else.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Privilege(String),
    /// Another live run holds what this one needs (the machine lease).
    #[error("{0}")]
    Busy(String),
    /// A dead run's changes were never undone; `schedkit restore` first.
    #[error("{0}")]
    Stale(String),
    /// The run cannot do what the scenario asks on this machine (fewer CPUs than its
    /// `cores`, no real-time priority, no cgroup controller): exit 3 at the CLI unless the
    /// user allows a degraded run.
    #[error("{0}")]
    Degraded(String),
    #[error("{what}: {source}")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// An OS error for `what`, from `errno`.
    pub fn last_os(what: impl Into<String>) -> Error {
        Error::Os {
            what: what.into(),
            source: std::io::Error::last_os_error(),
        }
    }
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Os {
            what: what.into(),
            source,
        }
    }
    /// The raw errno of an OS error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Os { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// Where sysfs and procfs live. [`Roots::host`] is `/sys` and `/proc`; tests build a fake tree
/// and use [`Roots::at`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    pub sys: PathBuf,
    pub proc: PathBuf,
}

impl Roots {
    /// The running machine's `/sys` and `/proc`, unless `SCHEDKIT_ROOT_PREFIX` names a prefix
    /// (then `$PREFIX/sys` and `$PREFIX/proc`).
    pub fn host() -> Roots {
        match std::env::var_os("SCHEDKIT_ROOT_PREFIX") {
            Some(p) if !p.is_empty() => Roots::at(Path::new(&p)),
            _ => Roots {
                sys: PathBuf::from("/sys"),
                proc: PathBuf::from("/proc"),
            },
        }
    }
    /// `prefix/sys` and `prefix/proc`.
    pub fn at(prefix: &Path) -> Roots {
        Roots {
            sys: prefix.join("sys"),
            proc: prefix.join("proc"),
        }
    }
}

/// Reads a small text file, trimmed.
pub fn read_trim(path: &Path) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_string())
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// The time of clock `clock` (`libc::CLOCK_MONOTONIC`, `CLOCK_THREAD_CPUTIME_ID`,
/// `CLOCK_PROCESS_CPUTIME_ID`, ...), ns; 0 if the kernel refuses it.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
