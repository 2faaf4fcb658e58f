//! Checks the calibrated NOP work: asks `paws::spin` for 10 ms five times and prints the thread
//! CPU time each took (it should be at least 10 ms, in a debug build too).
//!
//! ```text
//! cargo run -p schedkit-runtime --example paws_spin_check
//! ```

fn cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

fn main() {
    println!(
        "rate {:.3} iterations/ns",
        schedkit_runtime::paws::calibrate()
    );
    for _ in 0..5 {
        let t = cpu_ms();
        schedkit_runtime::paws::spin(10_000_000);
        println!("spin(10 ms): {:.2} ms of CPU", cpu_ms() - t);
    }
}
