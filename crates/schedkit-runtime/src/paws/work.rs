//! Synthetic work: a calibrated loop of NOP instructions (seed 001, section 5: "all the work
//! performed is limited to a bunch of NOP instructions to avoid memory and cache interference"),
//! with a preemption point every 10 us of work, so a job is never more than that away from
//! noticing an earlier-deadline release.

use std::sync::OnceLock;
use std::time::Instant;

/// Preemption-check granularity of [`spin`] in nanoseconds of work.
const CHUNK_NS: u64 = 10_000;

#[inline(never)]
fn nops(n: u64) {
    for _ in 0..n {
        // SAFETY: a NOP touches nothing.
        unsafe { std::arch::asm!("nop", options(nomem, nostack, preserves_flags)) };
    }
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Measures NOP-loop iterations per nanosecond of CPU time: the fastest of 15 short runs, each
/// timed with the thread's CPU clock, so that time the thread spent preempted (a loaded
/// machine, a slow debug build whose runs are long) does not count as work. Work is then
/// never shorter than asked; a disturbed run can only lengthen it.
pub fn calibrate() -> f64 {
    let n = 200_000u64;
    nops(n / 10);
    let mut best = f64::MAX;
    for _ in 0..15 {
        let (t, w) = (thread_cpu_ns(), Instant::now());
        nops(n);
        let cpu = thread_cpu_ns().saturating_sub(t) as f64;
        // The CPU clock's resolution is the kernel's; fall back to wall time if it reads 0.
        let ns = if cpu > 0.0 {
            cpu
        } else {
            w.elapsed().as_nanos() as f64
        };
        best = best.min(ns);
    }
    n as f64 / best.max(1.0)
}

/// Iterations per nanosecond, calibrated once per process.
pub(crate) fn rate() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(calibrate)
}

/// `ns` nanoseconds of NOP-loop work (calibrated once per process) with a preemption point
/// ([`super::checkpoint`]) every 10 us: inside a pool fiber a suspension here keeps the
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
    fn spin_uses_one_positive_calibration_per_process() {
        // What spin does is counted, not timed (a test asserts nothing timed: on a shared VM
        // the CPU clock itself runs at the host's pace, and a calibration taken in a slow
        // moment made 2 ms of work take 1 ms of wall time). The time is printed for a reader.
        let r = rate();
        assert!(r.is_finite() && r > 0.0, "rate {r}");
        assert_eq!(r, rate(), "calibrated once per process");
        let t = Instant::now();
        spin(2_000_000);
        spin(0);
        eprintln!(
            "2 ms of work at {r:.3} iterations/ns took {} us of wall time",
            t.elapsed().as_micros()
        );
    }
}
