//! CPU sets and per-thread CPU affinity.
//!
//! [`CpuSet`] is a growable bit set of CPU numbers with the two text forms the kernel uses:
//! lists (`0-3,8`, as in `cpuN/topology/*_list` and `/sys/devices/system/cpu/online`) and hex
//! masks in 32-bit comma-separated words (`ff,00000001`, as in `/proc/irq/N/smp_affinity`).
//! [`set_thread`] and [`get_thread`] call `sched_setaffinity`/`sched_getaffinity` on a TID
//! (0 = the calling thread); the raw syscalls are used so that machines with more than 1024
//! CPUs (beyond glibc's fixed `cpu_set_t`) work.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A set of CPU numbers.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    pub fn new() -> CpuSet {
        CpuSet::default()
    }
    /// The set holding exactly `cpu`.
    pub fn single(cpu: usize) -> CpuSet {
        let mut s = CpuSet::new();
        s.insert(cpu);
        s
    }
    pub fn insert(&mut self, cpu: usize) {
        let w = cpu / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (cpu % 64);
    }
    pub fn remove(&mut self, cpu: usize) {
        if let Some(w) = self.words.get_mut(cpu / 64) {
            *w &= !(1 << (cpu % 64));
        }
    }
    pub fn contains(&self, cpu: usize) -> bool {
        self.words
            .get(cpu / 64)
            .is_some_and(|w| w & (1 << (cpu % 64)) != 0)
    }
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            (0..64)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| i * 64 + b)
        })
    }
    pub fn first(&self) -> Option<usize> {
        self.iter().next()
    }
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().min(other.words.len());
        let mut s = CpuSet {
            words: (0..n).map(|i| self.words[i] & other.words[i]).collect(),
        };
        s.trim();
        s
    }
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let get = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
        CpuSet {
            words: (0..n)
                .map(|i| get(&self.words, i) | get(&other.words, i))
                .collect(),
        }
    }
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut s = CpuSet {
            words: (0..self.words.len())
                .map(|i| self.words[i] & !other.words.get(i).copied().unwrap_or(0))
                .collect(),
        };
        s.trim();
        s
    }
    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Parses a CPU list such as `0-3,8,10-11` (empty text is the empty set).
    pub fn parse_list(text: &str) -> std::result::Result<CpuSet, String> {
        let mut s = CpuSet::new();
        for part in text
            .trim()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let num = |x: &str| {
                x.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("bad CPU number \"{x}\" in CPU list \"{text}\""))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b || b - a > 1 << 20 {
                        return Err(format!("bad CPU range \"{part}\" in \"{text}\""));
                    }
                    (a..=b).for_each(|c| s.insert(c));
                }
                None => s.insert(num(part)?),
            }
        }
        Ok(s)
    }

    /// The list form: `0-3,8`.
    pub fn to_list(&self) -> String {
        let cpus: Vec<usize> = self.iter().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            out.push(if i == j {
                cpus[i].to_string()
            } else {
                format!("{}-{}", cpus[i], cpus[j])
            });
            i = j + 1;
        }
        out.join(",")
    }

    /// Parses a hex mask as in `/proc/irq/N/smp_affinity`: 32-bit words, most significant
    /// first, separated by commas (`ff,00000001`).
    pub fn parse_mask(text: &str) -> std::result::Result<CpuSet, String> {
        let mut s = CpuSet::new();
        let words: Vec<&str> = text.trim().split(',').collect();
        for (k, w) in words.iter().rev().enumerate() {
            let v = u32::from_str_radix(w.trim(), 16)
                .map_err(|_| format!("bad CPU mask \"{text}\""))?;
            for b in 0..32 {
                if v & (1 << b) != 0 {
                    s.insert(k * 32 + b);
                }
            }
        }
        Ok(s)
    }

    /// The mask form, 32-bit words most significant first, `nwords` words at least (the
    /// kernel prints as many words as `nr_cpu_ids` needs).
    pub fn to_mask(&self, nwords: usize) -> String {
        let max = self.iter().last().map_or(0, |c| c / 32 + 1);
        let n = max.max(nwords).max(1);
        let mut parts = Vec::new();
        for k in (0..n).rev() {
            let mut v: u32 = 0;
            for b in 0..32 {
                if self.contains(k * 32 + b) {
                    v |= 1 << b;
                }
            }
            parts.push(if k == n - 1 {
                format!("{v:x}")
            } else {
                format!("{v:08x}")
            });
        }
        parts.join(",")
    }

    fn to_bytes(&self, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for cpu in self.iter() {
            if cpu / 8 < len {
                b[cpu / 8] |= 1 << (cpu % 8);
            }
        }
        b
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list())
    }
}
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}
impl From<CpuSet> for String {
    fn from(s: CpuSet) -> String {
        s.to_list()
    }
}
impl TryFrom<String> for CpuSet {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<CpuSet, String> {
        CpuSet::parse_list(&s)
    }
}
impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(it: I) -> CpuSet {
        let mut s = CpuSet::new();
        it.into_iter().for_each(|c| s.insert(c));
        s
    }
}

/// Bytes of the kernel's CPU mask: grown until `sched_getaffinity` accepts it.
fn kernel_mask_bytes() -> usize {
    use std::sync::OnceLock;
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        let mut len = 128;
        loop {
            let mut buf = vec![0u8; len];
            // SAFETY: buf is len bytes long.
            let r = unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0, len, buf.as_mut_ptr()) };
            if r >= 0
                || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                || len >= 1 << 20
            {
                return len;
            }
            len *= 2;
        }
    })
}

/// Sets the affinity of thread `tid` (0: the calling thread).
pub fn set_thread(tid: i32, cpus: &CpuSet) -> Result<()> {
    if cpus.is_empty() {
        return Err(Error::Input("empty CPU set".into()));
    }
    let len = kernel_mask_bytes();
    let buf = cpus.to_bytes(len);
    // SAFETY: buf is len bytes long and outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_sched_setaffinity, tid, len, buf.as_ptr()) };
    if r < 0 {
        return Err(Error::last_os(format!(
            "sched_setaffinity(tid {tid}, CPUs {cpus})"
        )));
    }
    Ok(())
}

/// The affinity of thread `tid` (0: the calling thread).
pub fn get_thread(tid: i32) -> Result<CpuSet> {
    let len = kernel_mask_bytes();
    let mut buf = vec![0u8; len];
    // SAFETY: buf is len bytes long.
    let r = unsafe { libc::syscall(libc::SYS_sched_getaffinity, tid, len, buf.as_mut_ptr()) };
    if r < 0 {
        return Err(Error::last_os(format!("sched_getaffinity(tid {tid})")));
    }
    let mut s = CpuSet::new();
    for (i, b) in buf.iter().enumerate().take(r as usize) {
        for bit in 0..8 {
            if b & (1 << bit) != 0 {
                s.insert(i * 8 + bit);
            }
        }
    }
    Ok(s)
}

/// Pins the calling thread to `cpu`.
pub fn pin_current(cpu: usize) -> Result<()> {
    set_thread(0, &CpuSet::single(cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert!(CpuSet::parse_list("").unwrap().is_empty());
        assert!(CpuSet::parse_list("3-1").is_err());
        assert!(CpuSet::parse_list("x").is_err());
    }

    #[test]
    fn mask_round_trip() {
        let s = CpuSet::parse_mask("ff,00000001").unwrap();
        assert_eq!(s.to_list(), "0,32-39");
        assert_eq!(s.to_mask(1), "ff,00000001");
        assert_eq!(CpuSet::parse_mask("3").unwrap().to_list(), "0-1");
        assert_eq!(CpuSet::single(3).to_mask(1), "8");
        assert_eq!(CpuSet::single(0).to_mask(2), "0,00000001");
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-3").unwrap();
        let b = CpuSet::parse_list("2-5").unwrap();
        assert_eq!(a.intersection(&b).to_list(), "2-3");
        assert_eq!(a.union(&b).to_list(), "0-5");
        assert_eq!(a.difference(&b).to_list(), "0-1");
        assert_eq!(a.len(), 4);
    }
}
