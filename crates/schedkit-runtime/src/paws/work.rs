//! Synthetic work: a loop of NOP instructions until the thread's CPU clock has grown by the work
//! asked (seed 001, section 5: "all the work performed is limited to a bunch of NOP instructions
//! to avoid memory and cache interference"), with a preemption point every 10 us of work, so a
//! job is never more than that away from noticing an earlier-deadline release. A calibration
//! of NOPs per nanosecond sizes the chunks between preemption points.

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

/// `ns` nanoseconds of NOP-loop work, in the calling thread's CPU time, with a preemption
/// point ([`super::checkpoint`]) every 10 us: inside a pool fiber a suspension here keeps the
/// remaining work for when the fiber resumes.
///
/// The calibration only sizes the chunks between preemption points; what counts is the
/// thread's CPU clock, read after each chunk, as the SCHED_DEADLINE runner's work does. An
/// iteration count alone is only as exact as the calibration: on this shared VM a 12 ms region
/// ran 11.6 ms of CPU time once in 15 runs at a load of 190 (the same NOPs run slower or faster
/// than when they were calibrated). The clock is read before the preemption point, so a chunk
/// is counted on the thread that ran it; after a suspension it starts again from the thread
/// the fiber resumed on.
pub fn spin(ns: u64) {
    let chunk = CHUNK_NS as f64 * rate();
    let mut done = 0u64;
    let mut t0 = thread_cpu_ns();
    while done < ns {
        let left = (ns - done) as f64 * rate();
        nops(left.min(chunk).max(1.0) as u64);
        let t1 = thread_cpu_ns();
        // At least 1 ns per chunk, so that a clock that did not move still ends the loop.
        done += t1.saturating_sub(t0).max(1);
        t0 = t1;
        if super::worker::checkpoint() {
            t0 = thread_cpu_ns();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_counts_cpu_time_with_one_calibration_per_process() {
        // What spin does is counted, not timed (a test asserts nothing timed: on a shared VM
        // the CPU clock itself runs at the host's pace, and a calibration taken in a slow
        // moment made 2 ms of work take 1 ms of wall time). The time is printed for a reader.
        let r = rate();
        assert!(r.is_finite() && r > 0.0, "rate {r}");
        assert_eq!(r, rate(), "calibrated once per process");
        let t = Instant::now();
        let c0 = thread_cpu_ns();
        spin(2_000_000);
        spin(0);
        // Work is counted in the thread's CPU time: never less than asked, however fast or slow
        // the NOPs ran against the calibration.
        let cpu = thread_cpu_ns() - c0;
        assert!(cpu >= 2_000_000, "2 ms of work took {cpu} ns of CPU time");
        eprintln!(
            "2 ms of work at {r:.3} iterations/ns took {} us of wall time",
            t.elapsed().as_micros()
        );
    }
}
