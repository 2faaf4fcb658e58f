//! Per-thread scheduling class and priority through `sched_setattr(2)`.
//!
//! One call covers every class the kernel offers to user space: SCHED_OTHER (with its nice
//! value, which `sched_setattr` sets per thread, unlike `setpriority` on a process),
//! SCHED_BATCH, SCHED_IDLE, SCHED_FIFO and SCHED_RR (static priority 1..99) and SCHED_DEADLINE
//! (runtime <= deadline <= period, in nanoseconds). The raw syscall is used because glibc does
//! not wrap it.
//!
//! Privileges: raising a thread to a real-time class, lowering nice below the RLIMIT_NICE
//! allowance, or changing another user's thread needs CAP_SYS_NICE; SCHED_DEADLINE needs it
//! always and refuses threads whose affinity is narrower than their root domain (EPERM).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// A scheduling class with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum Policy {
    /// SCHED_OTHER (CFS/EEVDF) with a nice value in -20..=19.
    Other { nice: i32 },
    /// SCHED_BATCH with a nice value.
    Batch { nice: i32 },
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO with static priority 1..=99.
    Fifo { priority: u32 },
    /// SCHED_RR with static priority 1..=99.
    Rr { priority: u32 },
    /// SCHED_DEADLINE; all in nanoseconds.
    Deadline {
        runtime: u64,
        deadline: u64,
        period: u64,
    },
}

impl Policy {
    /// Checks the parameters the kernel would reject, with a message that says why.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Policy::Other { nice } | Policy::Batch { nice } if !(-20..=19).contains(&nice) => Err(
                Error::Input(format!("nice {nice} is out of range (-20..19)")),
            ),
            Policy::Fifo { priority } | Policy::Rr { priority }
                if !(1..=99).contains(&priority) =>
            {
                Err(Error::Input(format!(
                    "real-time priority {priority} is out of range (1..99)"
                )))
            }
            Policy::Deadline {
                runtime,
                deadline,
                period,
            } if runtime < 1024 || runtime > deadline || deadline > period => {
                Err(Error::Input(format!(
                    "SCHED_DEADLINE needs 1024 ns <= runtime ({runtime}) <= deadline ({deadline}) <= period ({period})"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether setting this class needs CAP_SYS_NICE.
    pub fn needs_cap_sys_nice(&self) -> bool {
        match *self {
            Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. } => true,
            Policy::Other { nice } | Policy::Batch { nice } => nice < 0,
            Policy::Idle => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Policy::Other { .. } => "SCHED_OTHER",
            Policy::Batch { .. } => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Fifo { .. } => "SCHED_FIFO",
            Policy::Rr { .. } => "SCHED_RR",
            Policy::Deadline { .. } => "SCHED_DEADLINE",
        }
    }

    /// `SCHED_FIFO 80`, `SCHED_OTHER nice 5`, `SCHED_DEADLINE 1000000/10000000 ns`.
    pub fn name_with_priority(&self) -> String {
        match *self {
            Policy::Other { nice } | Policy::Batch { nice } => {
                format!("{} nice {nice}", self.name())
            }
            Policy::Idle => self.name().into(),
            Policy::Fifo { priority } | Policy::Rr { priority } => {
                format!("{} {priority}", self.name())
            }
            Policy::Deadline {
                runtime, period, ..
            } => format!("{} {runtime}/{period} ns", self.name()),
        }
    }
}

const SCHED_DEADLINE: u32 = 6;

/// `struct sched_attr`, SCHED_ATTR_SIZE_VER0 (48 bytes).
#[repr(C)]
#[derive(Default, Debug)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// `sched_attr.sched_flags` bit: a SCHED_DEADLINE thread may reclaim bandwidth other
/// deadline threads leave unused (GRUB, Linux 4.13+), so a small overrun of its runtime does
/// not throttle it while the CPU has deadline bandwidth to spare.
pub const SCHED_FLAG_RECLAIM: u64 = 0x02;

/// Sets the scheduling class of thread `tid` (0: the calling thread).
pub fn set_thread(tid: i32, policy: Policy) -> Result<()> {
    set_thread_with_flags(tid, policy, 0)
}

/// [`set_thread`] with `sched_attr.sched_flags` (e.g. [`SCHED_FLAG_RECLAIM`]).
pub fn set_thread_with_flags(tid: i32, policy: Policy, flags: u64) -> Result<()> {
    policy.validate()?;
    let mut a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_flags: flags,
        ..SchedAttr::default()
    };
    match policy {
        Policy::Other { nice } => {
            a.sched_policy = libc::SCHED_OTHER as u32;
            a.sched_nice = nice;
        }
        Policy::Batch { nice } => {
            a.sched_policy = libc::SCHED_BATCH as u32;
            a.sched_nice = nice;
        }
        Policy::Idle => a.sched_policy = libc::SCHED_IDLE as u32,
        Policy::Fifo { priority } => {
            a.sched_policy = libc::SCHED_FIFO as u32;
            a.sched_priority = priority;
        }
        Policy::Rr { priority } => {
            a.sched_policy = libc::SCHED_RR as u32;
            a.sched_priority = priority;
        }
        Policy::Deadline {
            runtime,
            deadline,
            period,
        } => {
            a.sched_policy = SCHED_DEADLINE;
            a.sched_runtime = runtime;
            a.sched_deadline = deadline;
            a.sched_period = period;
        }
    }
    // SAFETY: `a` is a valid sched_attr of the size it declares.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EPERM) {
            return Err(Error::Privilege(format!(
                "setting {} on thread {tid} was refused (EPERM): run as root or grant CAP_SYS_NICE (setcap cap_sys_nice+ep $(which schedkit)){}",
                policy.name(),
                if matches!(policy, Policy::Deadline { .. }) {
                    "; SCHED_DEADLINE also needs an affinity that spans the root domain"
                } else {
                    ""
                }
            )));
        }
        return Err(Error::io(
            format!("sched_setattr(tid {tid}, {})", policy.name()),
            e,
        ));
    }
    Ok(())
}

/// The scheduling class of thread `tid` (0: the calling thread).
pub fn get_thread(tid: i32) -> Result<Policy> {
    let mut a = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: `a` is writable for `size` bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut a as *mut SchedAttr,
            size,
            0u32,
        )
    };
    if r < 0 {
        return Err(Error::last_os(format!("sched_getattr(tid {tid})")));
    }
    Ok(match a.sched_policy {
        p if p == libc::SCHED_FIFO as u32 => Policy::Fifo {
            priority: a.sched_priority,
        },
        p if p == libc::SCHED_RR as u32 => Policy::Rr {
            priority: a.sched_priority,
        },
        p if p == libc::SCHED_BATCH as u32 => Policy::Batch { nice: a.sched_nice },
        p if p == libc::SCHED_IDLE as u32 => Policy::Idle,
        SCHED_DEADLINE => Policy::Deadline {
            runtime: a.sched_runtime,
            deadline: a.sched_deadline,
            period: a.sched_period,
        },
        _ => Policy::Other { nice: a.sched_nice },
    })
}

/// Sets the nice value of thread `tid` keeping its class when it is SCHED_OTHER or BATCH
/// (real-time threads ignore nice; they are left alone and an error says so).
pub fn set_nice(tid: i32, nice: i32) -> Result<()> {
    match get_thread(tid)? {
        Policy::Batch { .. } => set_thread(tid, Policy::Batch { nice }),
        Policy::Other { .. } | Policy::Idle => set_thread(tid, Policy::Other { nice }),
        p => Err(Error::Input(format!(
            "thread {tid} runs {}: nice does not apply",
            p.name()
        ))),
    }
}

/// The priority range the kernel accepts for FIFO/RR (normally 1..=99).
pub fn rt_priority_range() -> (u32, u32) {
    // SAFETY: plain queries.
    let (lo, hi) = unsafe {
        (
            libc::sched_get_priority_min(libc::SCHED_FIFO),
            libc::sched_get_priority_max(libc::SCHED_FIFO),
        )
    };
    (lo.max(1) as u32, hi.max(1) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(Policy::Fifo { priority: 0 }.validate().is_err());
        assert!(Policy::Fifo { priority: 100 }.validate().is_err());
        assert!(Policy::Rr { priority: 99 }.validate().is_ok());
        assert!(Policy::Other { nice: 20 }.validate().is_err());
        assert!(Policy::Deadline {
            runtime: 2_000_000,
            deadline: 1_000_000,
            period: 10_000_000
        }
        .validate()
        .is_err());
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48);
    }
}
