//! Synthetic work: a calibrated loop of NOP instructions (seed 001, section 5: "all the work
//! performed is limited to a bunch of NOP instructions to avoid memory and cache interference"),
//! with a preemption point every 20 us of work, so a job is never more than that away from
//! noticing an earlier-deadline release.

use std::sync::OnceLock;
use std::time::Instant;

/// Preemption-check granularity of [`spin`] in nanoseconds of work.
const CHUNK_NS: u64 = 20_000;

#[inline(never)]
fn nops(n: u64) {
    for _ in 0..n {
        // SAFETY: a NOP touches nothing.
        unsafe { std::arch::asm!("nop", options(nomem, nostack, preserves_flags)) };
    }
}

/// Measures NOP-loop iterations per nanosecond: the fastest of several 2 ms runs, so that work
/// is never shorter than asked when the machine is quiet (a disturbed run only lengthens it).
pub fn calibrate() -> f64 {
    let n = 1_000_000u64;
    nops(n / 10);
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        nops(n);
        best = best.min(t.elapsed().as_nanos() as f64);
    }
    n as f64 / best.max(1.0)
}

/// Iterations per nanosecond, calibrated once per process.
pub(crate) fn rate() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(calibrate)
}

/// `ns` nanoseconds of NOP-loop work (calibrated once per process) with a preemption point
/// ([`super::checkpoint`]) every 20 us: inside a pool fiber a suspension here keeps the
/// remaining work for when the fiber resumes.
pub fn spin(ns: u64) {
    let r = rate();
    let mut left = (ns as f64 * r) as u64;
    let chunk = ((CHUNK_NS as f64 * r) as u64).max(1);
    while left > 0 {
        let k = left.min(chunk);
        nops(k);
        left -= k;
        super::checkpoint();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_takes_at_least_roughly_what_it_was_asked() {
        let t = Instant::now();
        spin(2_000_000);
        let e = t.elapsed().as_nanos() as u64;
        // Calibrated on the fastest run: never much shorter; a noisy machine makes it longer.
        assert!(e >= 1_800_000, "2 ms of work took {e} ns");
    }
}
