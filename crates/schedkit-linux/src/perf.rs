//! `perf_event_open(2)` counters per thread or inherited per process (seed 000, Table 2's
//! indicators), behind the [`CounterSource`] seam.
//!
//! Software events (task-clock, context-switches, cpu-migrations, page-faults) exist on every
//! kernel. Hardware events (cycles, instructions, cache references and misses, branches, dTLB
//! loads/stores and their misses) need a PMU: virtual machines often have none, and then
//! `perf_event_open` answers ENOENT/EOPNOTSUPP/ENODEV; such a counter is reported as
//! [`Reading::NotSupported`], never as zero. Multiplexed counters are scaled by
//! enabled/running time and flagged.
//!
//! [`FakeSource`] implements the seam for tests: it serves fixed values and "not supported",
//! so the code that turns counters into the report is tested on machines with no PMU.

use crate::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;

/// The counters of seed 000's Table 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum CounterKind {
    TaskClock,
    ContextSwitches,
    CpuMigrations,
    PageFaults,
    Cycles,
    Instructions,
    CacheReferences,
    CacheMisses,
    Branches,
    DtlbLoads,
    DtlbLoadMisses,
    DtlbStores,
    DtlbStoreMisses,
}

impl CounterKind {
    pub const SOFTWARE: [CounterKind; 4] = [
        CounterKind::TaskClock,
        CounterKind::ContextSwitches,
        CounterKind::CpuMigrations,
        CounterKind::PageFaults,
    ];
    pub const HARDWARE: [CounterKind; 9] = [
        CounterKind::Cycles,
        CounterKind::Instructions,
        CounterKind::CacheReferences,
        CounterKind::CacheMisses,
        CounterKind::Branches,
        CounterKind::DtlbLoads,
        CounterKind::DtlbLoadMisses,
        CounterKind::DtlbStores,
        CounterKind::DtlbStoreMisses,
    ];
    pub fn all() -> Vec<CounterKind> {
        Self::SOFTWARE
            .iter()
            .chain(Self::HARDWARE.iter())
            .copied()
            .collect()
    }
    /// perf's name for the event.
    pub fn name(self) -> &'static str {
        match self {
            CounterKind::TaskClock => "task-clock",
            CounterKind::ContextSwitches => "context-switches",
            CounterKind::CpuMigrations => "cpu-migrations",
            CounterKind::PageFaults => "page-faults",
            CounterKind::Cycles => "cycles",
            CounterKind::Instructions => "instructions",
            CounterKind::CacheReferences => "cache-references",
            CounterKind::CacheMisses => "cache-misses",
            CounterKind::Branches => "branches",
            CounterKind::DtlbLoads => "dTLB-loads",
            CounterKind::DtlbLoadMisses => "dTLB-load-misses",
            CounterKind::DtlbStores => "dTLB-stores",
            CounterKind::DtlbStoreMisses => "dTLB-store-misses",
        }
    }
    pub fn is_software(self) -> bool {
        Self::SOFTWARE.contains(&self)
    }
    /// (`perf_event_attr.type`, `config`).
    fn type_config(self) -> (u32, u64) {
        const HW: u32 = 0;
        const SW: u32 = 1;
        const HW_CACHE: u32 = 3;
        // config for HW_CACHE = cache id | op << 8 | result << 16; DTLB = 3.
        let dtlb = |op: u64, miss: u64| (HW_CACHE, 3 | (op << 8) | (miss << 16));
        match self {
            CounterKind::TaskClock => (SW, 1),
            CounterKind::PageFaults => (SW, 2),
            CounterKind::ContextSwitches => (SW, 3),
            CounterKind::CpuMigrations => (SW, 4),
            CounterKind::Cycles => (HW, 0),
            CounterKind::Instructions => (HW, 1),
            CounterKind::CacheReferences => (HW, 2),
            CounterKind::CacheMisses => (HW, 3),
            CounterKind::Branches => (HW, 4),
            CounterKind::DtlbLoads => dtlb(0, 0),
            CounterKind::DtlbLoadMisses => dtlb(0, 1),
            CounterKind::DtlbStores => dtlb(1, 0),
            CounterKind::DtlbStoreMisses => dtlb(1, 1),
        }
    }
}

/// What a counter is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// One thread.
    Thread(i32),
    /// A thread and every thread and process it creates after the counter opens (`inherit`).
    Inherit(i32),
}

/// One counter's value, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Reading {
    Value {
        value: u64,
        /// True when the kernel multiplexed the counter and the value is scaled.
        scaled: bool,
    },
    NotSupported,
    Failed {
        message: String,
    },
}

impl Reading {
    pub fn value(&self) -> Option<u64> {
        match self {
            Reading::Value { value, .. } => Some(*value),
            _ => None,
        }
    }
}

impl std::fmt::Display for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reading::Value { value, scaled } => {
                write!(f, "{value}{}", if *scaled { " (scaled)" } else { "" })
            }
            Reading::NotSupported => f.write_str("not supported"),
            Reading::Failed { message } => write!(f, "failed: {message}"),
        }
    }
}

/// An open counter.
pub trait Counter: Send {
    fn read(&mut self) -> Reading;
}

/// Opens counters. The real one is [`PerfSource`]; tests use [`FakeSource`].
pub trait CounterSource {
    /// `Ok(None)`: the machine does not have this event.
    fn open(&mut self, target: Target, kind: CounterKind) -> Result<Option<Box<dyn Counter>>>;
}

/// `perf_event_attr` up to PERF_ATTR_SIZE_VER5 (112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}

const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
const FLAG_INHERIT: u64 = 1 << 1;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// The kernel's counters.
#[derive(Default)]
pub struct PerfSource;

struct PerfCounter {
    fd: std::os::fd::OwnedFd,
}

impl Counter for PerfCounter {
    fn read(&mut self) -> Reading {
        use std::os::fd::AsRawFd;
        let mut buf = [0u64; 3];
        // SAFETY: buf is 24 bytes, the size of our read_format.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 24) };
        if n != 24 {
            return Reading::Failed {
                message: std::io::Error::last_os_error().to_string(),
            };
        }
        let (value, enabled, running) = (buf[0], buf[1], buf[2]);
        if running == 0 {
            return Reading::Value {
                value: 0,
                scaled: enabled != 0,
            };
        }
        if running < enabled {
            Reading::Value {
                value: (value as f64 * enabled as f64 / running as f64).round() as u64,
                scaled: true,
            }
        } else {
            Reading::Value {
                value,
                scaled: false,
            }
        }
    }
}

impl CounterSource for PerfSource {
    fn open(&mut self, target: Target, kind: CounterKind) -> Result<Option<Box<dyn Counter>>> {
        use std::os::fd::FromRawFd;
        let (kind_type, config) = kind.type_config();
        let (tid, inherit) = match target {
            Target::Thread(t) => (t, false),
            Target::Inherit(t) => (t, true),
        };
        let attr = PerfEventAttr {
            kind: kind_type,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            read_format: FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
            flags: FLAG_EXCLUDE_HV | if inherit { FLAG_INHERIT } else { 0 },
            ..PerfEventAttr::default()
        };
        // SAFETY: attr is a valid perf_event_attr of the size it declares.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                tid,
                -1i32,
                -1i32,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            let errno = e.raw_os_error().unwrap_or(0);
            // No PMU, or this event is not on this PMU.
            if !kind.is_software()
                && [libc::ENOENT, libc::EOPNOTSUPP, libc::ENODEV, libc::EINVAL].contains(&errno)
            {
                return Ok(None);
            }
            if errno == libc::EACCES || errno == libc::EPERM {
                return Err(Error::Privilege(format!(
                    "perf_event_open({}) refused: run as root or lower /proc/sys/kernel/perf_event_paranoid",
                    kind.name()
                )));
            }
            return Err(Error::io(
                format!("perf_event_open({}, tid {tid})", kind.name()),
                e,
            ));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
        Ok(Some(Box::new(PerfCounter { fd })))
    }
}

/// An open counter, or the reading that says why there is none.
type Slot = std::result::Result<Box<dyn Counter>, Reading>;

/// A set of counters on one target.
pub struct CounterSet {
    counters: Vec<(CounterKind, Slot)>,
}

impl CounterSet {
    /// Opens `kinds` on `target`; events the machine lacks read as "not supported", others
    /// that fail to open as "failed" with the reason.
    pub fn open(
        source: &mut dyn CounterSource,
        target: Target,
        kinds: &[CounterKind],
    ) -> CounterSet {
        let counters = kinds
            .iter()
            .map(|&k| {
                let c = match source.open(target, k) {
                    Ok(Some(c)) => Ok(c),
                    Ok(None) => Err(Reading::NotSupported),
                    Err(e) => Err(Reading::Failed {
                        message: e.to_string(),
                    }),
                };
                (k, c)
            })
            .collect();
        CounterSet { counters }
    }

    /// Reads every counter.
    pub fn read(&mut self) -> Vec<(CounterKind, Reading)> {
        self.counters
            .iter_mut()
            .map(|(k, c)| {
                (
                    *k,
                    match c {
                        Ok(c) => c.read(),
                        Err(r) => r.clone(),
                    },
                )
            })
            .collect()
    }
}

/// A counter source with fixed answers, for tests of code that consumes counters.
#[derive(Default)]
pub struct FakeSource {
    /// Values served per event; events missing here are "not supported".
    pub values: HashMap<CounterKind, u64>,
    /// Events whose open fails with this message.
    pub failing: HashMap<CounterKind, String>,
    /// Every (target, kind) opened, in order.
    pub opened: Vec<(Target, CounterKind)>,
}

struct FakeCounter(u64);
impl Counter for FakeCounter {
    fn read(&mut self) -> Reading {
        Reading::Value {
            value: self.0,
            scaled: false,
        }
    }
}

impl CounterSource for FakeSource {
    fn open(&mut self, target: Target, kind: CounterKind) -> Result<Option<Box<dyn Counter>>> {
        self.opened.push((target, kind));
        if let Some(m) = self.failing.get(&kind) {
            return Err(Error::Input(m.clone()));
        }
        Ok(self
            .values
            .get(&kind)
            .map(|&v| Box::new(FakeCounter(v)) as Box<dyn Counter>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_size_and_configs() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
        assert_eq!(
            CounterKind::DtlbStoreMisses.type_config(),
            (3, 3 | (1 << 8) | (1 << 16))
        );
        assert_eq!(CounterKind::CpuMigrations.type_config(), (1, 4));
    }

    #[test]
    fn fake_source_reports_hardware_as_not_supported() {
        let mut f = FakeSource::default();
        f.values.insert(CounterKind::ContextSwitches, 5);
        f.values.insert(CounterKind::Cycles, 1000);
        f.failing.insert(CounterKind::PageFaults, "boom".into());
        let mut set = CounterSet::open(&mut f, Target::Inherit(7), &CounterKind::all());
        let r: HashMap<_, _> = set.read().into_iter().collect();
        assert_eq!(r[&CounterKind::ContextSwitches].value(), Some(5));
        assert_eq!(r[&CounterKind::Cycles].value(), Some(1000));
        assert_eq!(r[&CounterKind::DtlbLoads], Reading::NotSupported);
        assert_eq!(r[&CounterKind::DtlbLoads].to_string(), "not supported");
        assert!(matches!(
            r[&CounterKind::PageFaults],
            Reading::Failed { .. }
        ));
        assert_eq!(f.opened.len(), 13);
        assert!(f.opened.iter().all(|(t, _)| *t == Target::Inherit(7)));
    }
}
