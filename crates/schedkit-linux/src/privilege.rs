//! What this process may do. Checked before a run changes anything, so that an explicit
//! request that cannot be honoured fails (exit 3) with nothing changed, and an implicit one
//! falls back with a warning.

/// Effective capabilities of the calling process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Privileges {
    pub root: bool,
    /// CAP_SYS_NICE: real-time classes, negative nice, other users' threads' affinity.
    pub sys_nice: bool,
    /// CAP_SYS_ADMIN: sysctls, IRQ affinity.
    pub sys_admin: bool,
}

const CAP_SYS_NICE: u32 = 23;
const CAP_SYS_ADMIN: u32 = 21;

impl Privileges {
    /// Reads `CapEff` of `/proc/self/status`.
    pub fn current() -> Privileges {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let caps = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("CapEff:"))
                    .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            })
            .unwrap_or(0);
        Privileges {
            root,
            sys_nice: caps & (1 << CAP_SYS_NICE) != 0,
            sys_admin: caps & (1 << CAP_SYS_ADMIN) != 0,
        }
    }

    /// What to tell a user who lacks CAP_SYS_NICE.
    pub const HOW_TO_NICE: &'static str =
        "run as root (sudo) or grant the capability: sudo setcap cap_sys_nice+ep $(command -v schedkit)";
    /// What to tell a user who lacks CAP_SYS_ADMIN (IRQ masks, sysctls).
    pub const HOW_TO_ADMIN: &'static str = "run as root (sudo)";
}
