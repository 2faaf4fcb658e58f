//! The busy process: the helper executable re-run with the hidden `--spinner PLAN` flag,
//! spinning `N` threads (or changing the count at given times). The binary calls [`spinner`]
//! when it sees the flag.

use schedkit_core::Nanos;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parses a spinner plan: `N` or `N,M@T[,K@U...]` (thread counts from each time on).
pub fn parse_plan(plan: &str) -> Result<Vec<(Nanos, u32)>, String> {
    let mut out = Vec::new();
    for (i, part) in plan.split(',').enumerate() {
        let (n, t) = match part.split_once('@') {
            Some((n, t)) => (n, Nanos::parse(t)?),
            None if i == 0 => (part, Nanos::ZERO),
            None => return Err(format!("`{part}`: give the time as N@TIME")),
        };
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}`: not a thread count"))?;
        if n == 0 || n > 4096 {
            return Err(format!("{n}: a thread count is between 1 and 4096"));
        }
        if out.last().is_some_and(|(t0, _)| *t0 >= t) {
            return Err(format!("`{part}`: times must increase"));
        }
        out.push((t, n));
    }
    Ok(out)
}

fn spin_chunk(x: &mut u64) {
    for _ in 0..20_000 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
    }
    std::hint::black_box(*x);
}

/// Busy threads following `plan`, until killed (or the parent dies). The main thread spins
/// too, so the process has exactly the planned number of threads and none sleeps (a sleeping
/// thread would count in the per-thread waiting averages).
pub fn spinner(plan: &[(Nanos, u32)]) -> ! {
    use std::sync::atomic::{AtomicBool, Ordering};
    schedkit_linux::spawn::die_with_parent();
    let start = Instant::now();
    let mut extra: Vec<(Arc<AtomicBool>, std::thread::JoinHandle<()>)> = Vec::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for &(t, n) in plan {
        while start.elapsed() < Duration::from_nanos(t.0) {
            spin_chunk(&mut x);
        }
        let want = n as usize - 1;
        while extra.len() > want {
            let (stop, h) = extra.pop().expect("non-empty");
            stop.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        while extra.len() < want {
            let stop = Arc::new(AtomicBool::new(false));
            let s = stop.clone();
            let h = std::thread::spawn(move || {
                let mut y = 0x2545_F491_4F6C_DD1Du64;
                while !s.load(Ordering::Relaxed) {
                    spin_chunk(&mut y);
                }
            });
            extra.push((stop, h));
        }
    }
    loop {
        spin_chunk(&mut x);
    }
}
