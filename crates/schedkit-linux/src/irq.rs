//! IRQ affinity (`/proc/irq/N/smp_affinity`), seed 000 "Interrupt binding".
//!
//! The kernel refuses to move some interrupts: managed IRQs (multi-queue devices spread by the
//! kernel itself) answer EIO or EPERM, per-CPU interrupts EINVAL. [`move_all`] moves every IRQ
//! it may and returns the refusals with their errno, so callers report them instead of
//! pretending.

use crate::affinity::CpuSet;
use crate::{read_trim, Error, Result, Roots};
use std::io::Write;
use std::path::PathBuf;

/// One IRQ and its current masks.
#[derive(Clone, Debug, PartialEq)]
pub struct Irq {
    pub irq: u32,
    /// The raw text of `smp_affinity` (what restore writes back).
    pub mask_text: String,
    pub affinity: CpuSet,
    /// `effective_affinity_list` when the kernel exposes it.
    pub effective: Option<CpuSet>,
}

fn irq_dir(roots: &Roots, irq: u32) -> PathBuf {
    roots.proc.join("irq").join(irq.to_string())
}

/// Every IRQ number under `/proc/irq`, sorted.
pub fn list(roots: &Roots) -> Result<Vec<u32>> {
    let d = roots.proc.join("irq");
    let rd = std::fs::read_dir(&d).map_err(|e| Error::io(format!("read {}", d.display()), e))?;
    let mut v: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Reads one IRQ's masks.
pub fn read(roots: &Roots, irq: u32) -> Result<Irq> {
    let d = irq_dir(roots, irq);
    let p = d.join("smp_affinity");
    let mask_text = read_trim(&p).map_err(|e| Error::io(format!("read {}", p.display()), e))?;
    let affinity = CpuSet::parse_mask(&mask_text)
        .map_err(|m| Error::Input(format!("{}: {m}", p.display())))?;
    let effective = read_trim(&d.join("effective_affinity_list"))
        .ok()
        .and_then(|t| CpuSet::parse_list(&t).ok());
    Ok(Irq {
        irq,
        mask_text,
        affinity,
        effective,
    })
}

/// Reads one IRQ's `smp_affinity` alone (its text and its set): what exclusive mode and
/// undo need, at half of [`read`]'s file reads.
pub fn read_mask(roots: &Roots, irq: u32) -> Result<(String, CpuSet)> {
    let p = irq_dir(roots, irq).join("smp_affinity");
    let text = read_trim(&p).map_err(|e| Error::io(format!("read {}", p.display()), e))?;
    let set =
        CpuSet::parse_mask(&text).map_err(|m| Error::Input(format!("{}: {m}", p.display())))?;
    Ok((text, set))
}

/// Writes a mask text to `smp_affinity` (the kernel parses it; errors carry its errno).
pub fn write_mask_text(roots: &Roots, irq: u32, text: &str) -> Result<()> {
    let p = irq_dir(roots, irq).join("smp_affinity");
    // O_TRUNC as `echo MASK > smp_affinity` does: procfs ignores it, a fake tree needs it.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .map_err(|e| Error::io(format!("open {}", p.display()), e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.flush())
        .map_err(|e| Error::io(format!("write {text} to {}", p.display()), e))
}

/// Sets one IRQ's affinity.
pub fn set(roots: &Roots, irq: u32, cpus: &CpuSet) -> Result<()> {
    write_mask_text(roots, irq, &cpus.to_mask(1))
}

/// An IRQ the kernel would not move.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub irq: u32,
    pub errno: Option<i32>,
    pub message: String,
}
