//! Linux calls against the running machine. Tests that need root print why they skip.

use schedkit_linux::affinity::{self, CpuSet};
use schedkit_linux::sched::{self, Policy};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn online() -> CpuSet {
    CpuSet::parse_list(&std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap()).unwrap()
}

#[test]
fn affinity_round_trip_on_a_thread() {
    let cpus = online();
    let last = cpus.iter().last().unwrap();
    let h = std::thread::spawn(move || {
        let tid = schedkit_linux::gettid();
        affinity::set_thread(tid, &CpuSet::single(last)).unwrap();
        let got = affinity::get_thread(tid).unwrap();
        // The kernel really runs us there.
        // SAFETY: sched_getcpu has no preconditions.
        let on = unsafe { libc::sched_getcpu() };
        (got, on)
    });
    let (got, on) = h.join().unwrap();
    assert_eq!(got, CpuSet::single(last));
    assert_eq!(on as usize, last);
    // A CPU that does not exist is refused.
    let err = affinity::set_thread(0, &CpuSet::single(4095)).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EINVAL), "{err}");
}

#[test]
fn sched_classes_on_a_thread() {
    if !is_root() {
        eprintln!("skipped: setting SCHED_FIFO/RR/DEADLINE needs root or CAP_SYS_NICE");
        return;
    }
    let h = std::thread::spawn(|| {
        let tid = schedkit_linux::gettid();
        let mut seen = Vec::new();
        for p in [
            Policy::Fifo { priority: 10 },
            Policy::Rr { priority: 20 },
            Policy::Other { nice: 5 },
            Policy::Batch { nice: 3 },
            Policy::Idle,
        ] {
            sched::set_thread(tid, p).unwrap();
            seen.push((p, sched::get_thread(tid).unwrap()));
        }
        sched::set_thread(tid, Policy::Other { nice: 0 }).unwrap();
        sched::set_nice(tid, 7).unwrap();
        seen.push((Policy::Other { nice: 7 }, sched::get_thread(tid).unwrap()));
        // SCHED_DEADLINE: the thread's affinity must span its root domain (it does: default).
        let dl = Policy::Deadline {
            runtime: 1_000_000,
            deadline: 10_000_000,
            period: 10_000_000,
        };
        let r = sched::set_thread(tid, dl);
        let got = sched::get_thread(tid).unwrap();
        (seen, r.map(|_| got))
    });
    let (seen, dl) = h.join().unwrap();
    for (want, got) in seen {
        assert_eq!(want, got);
    }
    match dl {
        Ok(got) => assert!(matches!(
            got,
            Policy::Deadline {
                runtime: 1_000_000,
                ..
            }
        )),
        Err(e) => panic!("SCHED_DEADLINE refused: {e}"),
    }
    assert_eq!(sched::rt_priority_range(), (1, 99));
}
