//! Fibers: event ping-pong on one scheduler thread (A2, A1, A0, `may`), across two scheduler
//! threads (A2 against A1, both pinned and both unpinned), a ring of 7936 fibers passing a
//! token (time per hop; each sample is one ring timed on its own, its setup outside the clock),
//! and spawn + join from a fiber. `may` runs one worker and 16 KiB stacks, as the ring's
//! fibers get.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schedkit_runtime::{spawn, Arch, Config, Event, EventKind, Runtime};

use super::common::ab::{compare, Opts, Side};
use super::PINS;

const RING: usize = 7936;

/// At most this long per ping-pong sample.
const BUDGET: Duration = Duration::from_millis(50);

fn runtime(arch: Arch, workers: usize, pin: bool) -> Runtime {
    let mut c = Config::new(arch);
    c.workers = workers;
    c.pin = pin;
    Runtime::new(c).unwrap()
}

/// The ring's runtime: 16 KiB stacks with a 4 KiB guard (a ring fiber needs well under 4 KiB),
/// so 7936 stacks span 155 MiB of address space instead of 620 MiB.
fn ring_runtime(arch: Arch) -> Runtime {
    let mut c = Config::new(arch);
    c.workers = 1;
    c.pin = false;
    c.stack_size = 16 * 1024;
    c.guard_size = 4 * 1024;
    Runtime::new(c).unwrap()
}

/// Round trips between two fibers through two auto-reset events, `iters` of them or as many
/// as fit in [`BUDGET`] (a loaded machine makes a cross-ST round trip cost hundreds of
/// microseconds); with `two_sts` the fibers are bound to scheduler threads 0 and 1, so every
/// hop crosses STs.
fn pingpong(rt: &Runtime, iters: u64, two_sts: bool) -> (Duration, u64) {
    let h = rt.handle();
    let spawn_at = |st: usize, f: Box<dyn FnOnce() -> (Duration, u64) + Send>| {
        if two_sts {
            h.spawn_on(st, f)
        } else {
            h.spawn(f)
        }
    };
    let ping = Arc::new(Event::new(rt.handle(), EventKind::AutoReset, false));
    let pong = Arc::new(Event::new(rt.handle(), EventKind::AutoReset, false));
    let stop = Arc::new(AtomicBool::new(false));
    let (a, b, s) = (ping.clone(), pong.clone(), stop.clone());
    let echo = spawn_at(
        1,
        Box::new(move || {
            loop {
                a.wait();
                // The driver stores `stop` before its last set, which the wait saw.
                if s.load(Relaxed) {
                    break;
                }
                b.set();
            }
            (Duration::ZERO, 0)
        }),
    );
    let driver = spawn_at(
        0,
        Box::new(move || {
            let t0 = Instant::now();
            let mut n = 0;
            while n < iters && (n % 64 != 0 || t0.elapsed() < BUDGET) {
                ping.set();
                pong.wait();
                n += 1;
            }
            let d = t0.elapsed();
            stop.store(true, Relaxed);
            ping.set();
            (d, n)
        }),
    );
    let r = driver.join().unwrap();
    echo.join().unwrap();
    r
}

fn may_pingpong(iters: u64) -> (Duration, u64) {
    use may::sync::Semphore;
    let ping = Arc::new(Semphore::new(0));
    let pong = Arc::new(Semphore::new(0));
    let (a, b) = (ping.clone(), pong.clone());
    // SAFETY (may's spawn): the closures own everything they touch and never block the
    // worker thread outside may's primitives.
    let echo = unsafe {
        may::coroutine::spawn(move || {
            for _ in 0..iters {
                a.wait();
                b.post();
            }
        })
    };
    let driver = unsafe {
        may::coroutine::spawn(move || {
            let t0 = Instant::now();
            for _ in 0..iters {
                ping.post();
                pong.wait();
            }
            t0.elapsed()
        })
    };
    let d = driver.join().unwrap();
    echo.join().unwrap();
    (d, iters)
}

/// One ring: RING fibers, each waiting on its own auto-reset event and setting the next; the
/// token goes round `laps` times. The clock runs from the first set to the last hop (not the
/// spawns, not the exits).
fn ring(rt: &Runtime, laps: usize) -> (Duration, u64) {
    let evs: Arc<Vec<Event>> = Arc::new(
        (0..RING)
            .map(|_| Event::new(rt.handle(), EventKind::AutoReset, false))
            .collect(),
    );
    let hs: Vec<_> = (0..RING)
        .map(|i| {
            let evs = evs.clone();
            rt.spawn(move || {
                for _ in 0..laps {
                    evs[i].wait();
                    evs[(i + 1) % RING].set();
                }
                Instant::now()
            })
        })
        .collect();
    // Let every fiber reach its first wait, then time the token.
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    evs[0].set();
    let last = hs.into_iter().map(|h| h.join().unwrap()).max().unwrap();
    (last - t0, (RING * laps) as u64)
}

fn may_ring(laps: usize) -> (Duration, u64) {
    use may::sync::Semphore;
    let evs: Arc<Vec<Semphore>> = Arc::new((0..RING).map(|_| Semphore::new(0)).collect());
    let hs: Vec<_> = (0..RING)
        .map(|i| {
            let evs = evs.clone();
            // SAFETY: as in `may_pingpong`.
            unsafe {
                may::coroutine::spawn(move || {
                    for _ in 0..laps {
                        evs[i].wait();
                        evs[(i + 1) % RING].post();
                    }
                    Instant::now()
                })
            }
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    evs[0].post();
    let last = hs.into_iter().map(|h| h.join().unwrap()).max().unwrap();
    (last - t0, (RING * laps) as u64)
}

fn spawn_join(rt: &Runtime, iters: u64) -> (Duration, u64) {
    let d = rt
        .spawn(move || {
            let t0 = Instant::now();
            for _ in 0..iters {
                spawn(|| 1u8).join().unwrap();
            }
            t0.elapsed()
        })
        .join()
        .unwrap();
    (d, iters)
}

fn may_spawn_join(iters: u64) -> (Duration, u64) {
    // SAFETY: as in `may_pingpong`.
    let d = unsafe {
        may::coroutine::spawn(move || {
            let t0 = Instant::now();
            for _ in 0..iters {
                may::coroutine::spawn(|| 1u8).join().unwrap();
            }
            t0.elapsed()
        })
    }
    .join()
    .unwrap();
    (d, iters)
}

pub fn bench(o: &Opts) {
    // may counts its stack size in words: 2048 words = 16 KiB.
    may::config().set_workers(1).set_stack_size(2 * 1024);
    let iters: u64 = if o.smoke { 100 } else { 20_000 };

    {
        // Unpinned, as may's worker is.
        let (a2, a1, a0) = (
            runtime(Arch::A2, 1, false),
            runtime(Arch::A1, 1, false),
            runtime(Arch::A0, 1, false),
        );
        // A0's round trip is two futex wake-ups (tens of us): fewer of them per sample.
        let a0_iters = (iters / 100).max(10);
        compare(
            o,
            "fibers",
            "pingpong_one_st",
            "round trip",
            1,
            vec![
                Side::new("A2", || pingpong(&a2, iters, false)),
                Side::new("A1", || pingpong(&a1, iters, false)),
                Side::new("A0", || pingpong(&a0, a0_iters, false)),
                Side::new("may", || may_pingpong(iters)),
            ],
        );
        compare(
            o,
            "fibers",
            "spawn_join",
            "spawn + join",
            1,
            vec![
                Side::new("A2", || spawn_join(&a2, iters)),
                Side::new("A1", || spawn_join(&a1, iters)),
                Side::new("may", || may_spawn_join(iters)),
            ],
        );
    }

    for (pin, pin_name) in PINS {
        let (a2, a1) = (runtime(Arch::A2, 2, pin), runtime(Arch::A1, 2, pin));
        compare(
            o,
            "fibers",
            &format!("pingpong_two_sts_{pin_name}"),
            "round trip",
            2,
            vec![
                Side::new("A2", || pingpong(&a2, iters, true)),
                Side::new("A1", || pingpong(&a1, iters, true)),
            ],
        );
    }

    let laps = if o.smoke { 1 } else { 2 };
    let (a2, a1) = (ring_runtime(Arch::A2), ring_runtime(Arch::A1));
    compare(
        o,
        "fibers",
        "ring7936_unpinned",
        "hop",
        1,
        vec![
            Side::new("A2", || ring(&a2, laps)),
            Side::new("A1", || ring(&a1, laps)),
            Side::new("may", || may_ring(laps)),
        ],
    );
}
