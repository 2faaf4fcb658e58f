//! Fiber basics under every architecture: spawn/join with values and panics, yield, sleep,
//! nested spawns, stealing, and the deadlock verdict.

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schedkit_runtime::{
    sleep, spawn, yield_now, Arch, Config, Event, EventKind, JoinError, Runtime,
};

fn rt(arch: Arch) -> Runtime {
    let mut c = Config::new(arch);
    c.workers = 2;
    c.deadlock_timeout = Some(Duration::from_millis(300));
    Runtime::new(c).unwrap()
}

#[test]
fn join_returns_value_and_panic() {
    for arch in Arch::ALL {
        let rt = rt(arch);
        let h = rt.spawn(|| 6 * 7);
        assert_eq!(h.join().unwrap(), 42, "{arch}");
        let p = rt.spawn(|| -> u32 { panic!("boom {}", 7) });
        let e = p.join().unwrap_err();
        assert_eq!(e.panic_message(), Some("boom 7"), "{arch}");
    }
}

#[test]
fn nested_spawn_yield_and_join_inside_fibers() {
    for arch in [Arch::A1, Arch::A2] {
        let rt = rt(arch);
        let total = rt
            .spawn(|| {
                let hs: Vec<_> = (0..200u64)
                    .map(|i| {
                        spawn(move || {
                            for _ in 0..10 {
                                yield_now();
                            }
                            i
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
            })
            .join()
            .unwrap();
        assert_eq!(total, (0..200).sum::<u64>(), "{arch}");
    }
}

#[test]
fn sleep_waits_at_least_the_duration_and_frees_the_st() {
    let rt = rt(Arch::A2);
    let done = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let hs: Vec<_> = (0..100)
        .map(|_| {
            let d = done.clone();
            rt.spawn(move || {
                sleep(Duration::from_millis(50));
                d.fetch_add(1, SeqCst);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let el = t0.elapsed();
    assert_eq!(done.load(SeqCst), 100);
    assert!(el >= Duration::from_millis(50), "{el:?}");
    // 100 sleepers on 2 STs: they sleep together, not one after another.
    assert!(el < Duration::from_millis(2000), "{el:?}");
}

#[test]
fn both_sts_run_fibers() {
    // Spawn from outside round-robins homes, and idle STs steal: both STs must run some.
    let rt = rt(Arch::A2);
    // 128 fibers of 2 ms: one ST alone would need 256 ms, time enough for the other to wake
    // even on a loaded machine.
    let hs: Vec<_> = (0..128)
        .map(|_| {
            rt.spawn(|| {
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(2) {}
                std::thread::current().name().map(|s| s.to_string())
            })
        })
        .collect();
    let mut names: Vec<String> = hs.into_iter().filter_map(|h| h.join().unwrap()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names, vec!["schedkit-st0", "schedkit-st1"]);
}

#[test]
fn deadlock_is_reported_not_a_hang() {
    for arch in [Arch::A1, Arch::A2] {
        let rt = rt(arch);
        let a = Arc::new(Event::new(rt.handle(), EventKind::ManualReset, false));
        let b = Arc::new(Event::new(rt.handle(), EventKind::ManualReset, false));
        let (a1, b1) = (a.clone(), b.clone());
        let h1 = rt.spawn(move || {
            a1.wait();
            b1.set();
        });
        let (a2, b2) = (a.clone(), b.clone());
        let h2 = rt.spawn(move || {
            b2.wait();
            a2.set();
        });
        let t0 = Instant::now();
        assert!(matches!(h1.join(), Err(JoinError::Deadlock)), "{arch}");
        assert!(matches!(h2.join(), Err(JoinError::Deadlock)), "{arch}");
        assert!(rt.handle().deadlocked());
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn a_main_thread_can_set_what_fibers_wait_for() {
    for arch in Arch::ALL {
        let rt = rt(arch);
        let ev = Arc::new(Event::new(rt.handle(), EventKind::ManualReset, false));
        let hs: Vec<_> = (0..50)
            .map(|i| {
                let e = ev.clone();
                rt.spawn(move || {
                    e.wait();
                    i
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        ev.set();
        let s: i32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(s, (0..50).sum::<i32>(), "{arch}");
    }
}

/// A sleeping fiber wakes on time even when the ready queue never empties: the ST looks at
/// its timers every few dozen fibers, not only when it idles.
#[test]
fn sleeper_wakes_while_other_fibers_keep_yielding() {
    for arch in [Arch::A1, Arch::A2] {
        let mut c = Config::new(arch);
        c.workers = 1;
        let rt = Runtime::new(c).unwrap();
        let woke = Arc::new(AtomicUsize::new(0));
        let w = woke.clone();
        let sleeper = rt.spawn(move || {
            sleep(Duration::from_millis(5));
            w.store(1, SeqCst);
        });
        let spinners: Vec<_> = (0..3)
            .map(|_| {
                let w = woke.clone();
                rt.spawn(move || {
                    let t0 = Instant::now();
                    while w.load(SeqCst) == 0 && t0.elapsed() < Duration::from_secs(5) {
                        yield_now();
                    }
                    t0.elapsed()
                })
            })
            .collect();
        sleeper.join().unwrap();
        for s in spinners {
            let waited = s.join().unwrap();
            assert!(
                waited < Duration::from_secs(2),
                "{arch}: the sleeper woke only after {waited:?}"
            );
        }
    }
}

/// Two fibers that wake each other hand over through the ST's "run next" slot; a third
/// ready fiber still gets its turn while they go on.
#[test]
fn a_ping_pong_pair_does_not_starve_the_ready_queue() {
    let mut c = Config::new(Arch::A2);
    c.workers = 1;
    let rt = Runtime::new(c).unwrap();
    let h = rt.handle();
    let ping = Arc::new(Event::new(h, EventKind::AutoReset, false));
    let pong = Arc::new(Event::new(h, EventKind::AutoReset, false));
    let done = Arc::new(AtomicUsize::new(0));
    let turns = Arc::new(AtomicUsize::new(0));
    let (d, t) = (done.clone(), turns.clone());
    let bystander = rt.spawn(move || {
        while d.load(SeqCst) == 0 {
            t.fetch_add(1, SeqCst);
            yield_now();
        }
    });
    let (a, b) = (ping.clone(), pong.clone());
    let echo = rt.spawn(move || {
        for _ in 0..20_000 {
            a.wait();
            b.set();
        }
    });
    let t2 = turns.clone();
    let driver = rt.spawn(move || {
        for _ in 0..20_000 {
            ping.set();
            pong.wait();
        }
        t2.load(SeqCst)
    });
    let seen = driver.join().unwrap();
    echo.join().unwrap();
    done.store(1, SeqCst);
    bystander.join().unwrap();
    // 40,000 hand-overs with one queue turn per 32 slot runs: hundreds of turns.
    assert!(seen >= 100, "the bystander ran only {seen} times");
}

/// A fiber spawned with `spawn_on` runs on its scheduler thread only, across yields, blocks
/// and wake-ups from the other scheduler thread.
#[test]
fn spawn_on_keeps_a_fiber_on_its_scheduler_thread() {
    for arch in [Arch::A1, Arch::A2] {
        let rt = rt(arch);
        let h = rt.handle();
        let ev = Arc::new(Event::new(h, EventKind::AutoReset, false));
        let back = Arc::new(Event::new(h, EventKind::AutoReset, false));
        let (e, b) = (ev.clone(), back.clone());
        let bound = h.spawn_on(1, move || {
            let mut seen = Vec::new();
            for _ in 0..200 {
                seen.push(schedkit_runtime::current_worker());
                yield_now();
                e.wait();
                seen.push(schedkit_runtime::current_worker());
                b.set();
            }
            seen
        });
        let setter = h.spawn_on(0, move || {
            for _ in 0..200 {
                ev.set();
                back.wait();
            }
            schedkit_runtime::current_worker()
        });
        assert_eq!(setter.join().unwrap(), Some(0), "{arch}");
        let seen = bound.join().unwrap();
        assert!(
            seen.iter().all(|w| *w == Some(1)),
            "{arch}: ran on {seen:?}"
        );
    }
}

/// `spawn_near` starts a fiber on ST `group mod STs`, whatever the spawn order: groups 0, 0,
/// 1, 1, ... which round robin would place 0, 1, 0, 1, ... (A0 ignores the hint).
#[test]
fn spawn_near_starts_fibers_on_their_groups_scheduler_thread() {
    use std::sync::atomic::AtomicBool;
    const FIBERS: usize = 40;
    for arch in [Arch::A1, Arch::A2] {
        let rt = rt(arch);
        let h = rt.handle();
        // Both STs busy while the fibers are placed, so that neither can steal one first.
        let go = Arc::new(AtomicBool::new(false));
        let holding = Arc::new(AtomicUsize::new(0));
        let holders: Vec<_> = (0..2)
            .map(|st| {
                let (go, holding) = (go.clone(), holding.clone());
                h.spawn_on(st, move || {
                    holding.fetch_add(1, SeqCst);
                    while !go.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        while holding.load(SeqCst) < 2 {
            std::thread::yield_now();
        }
        let started = Arc::new(AtomicUsize::new(0));
        let near: Vec<_> = (0..FIBERS)
            .map(|i| {
                let started = started.clone();
                let group = i / 2;
                let fiber = h.spawn_near(group, move || {
                    let first = schedkit_runtime::current_worker();
                    started.fetch_add(1, SeqCst);
                    // Yielding until every fiber has started keeps each ST's own queue
                    // non-empty, so no ST steals a fiber that has not run yet.
                    while started.load(SeqCst) < FIBERS {
                        yield_now();
                    }
                    first
                });
                (group, fiber)
            })
            .collect();
        go.store(true, SeqCst);
        for hd in holders {
            hd.join().unwrap();
        }
        for (group, fiber) in near {
            assert_eq!(
                fiber.join().unwrap(),
                Some(group % 2),
                "{arch}: group {group}"
            );
        }
    }
    // A0: the hint is accepted and ignored.
    let rt = rt(Arch::A0);
    assert_eq!(rt.handle().spawn_near(3, || 5).join().unwrap(), 5);
}

/// `Handle::stats().idle_ns` counts the time the STs have nothing to run, including an idle
/// stretch still going on at the snapshot, and not the time a fiber computes.
#[test]
fn idle_time_counts_idle_stretches_not_work() {
    for arch in [Arch::A1, Arch::A2] {
        let mut c = Config::new(arch);
        c.workers = 1;
        let rt = Runtime::new(c).unwrap();
        let h = rt.handle().clone();
        let t0 = rt.handle().stats().idle_ns;
        std::thread::sleep(Duration::from_millis(30));
        // The ST has been idle (spinning, then parked) the whole time, and is still idle now.
        let idle = h.stats().idle_ns - t0;
        assert!(idle >= 25_000_000, "{arch}: {idle} ns idle in 30 ms");
        // A fiber that computes for 40 ms: the ST is busy, its idle time barely moves.
        let before = h.stats().idle_ns;
        rt.spawn(|| {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(40) {
                std::hint::spin_loop();
            }
        })
        .join()
        .unwrap();
        let during = h.stats().idle_ns - before;
        assert!(
            during < 20_000_000,
            "{arch}: {during} ns idle while a fiber ran 40 ms"
        );
    }
}
