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

#[test]
fn topology_of_this_machine() {
    let t = schedkit_linux::topo::Topology::host().unwrap();
    assert_eq!(t.online, online());
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as usize;
    assert_eq!(t.n_cpus(), n);
    assert_eq!(t.cpus.len(), n);
    assert!(t.cores >= 1 && t.cores <= n);
    assert!(t.packages >= 1);
    assert!(t.caches.iter().any(|c| c.level == 1), "{:?}", t.caches);
    for c in &t.cpus {
        assert!(c.siblings.contains(c.cpu));
    }
}

#[test]
fn proc_accounting_of_a_spinning_thread() {
    use schedkit_linux::procfs::{self, ThreadStat};
    let roots = schedkit_linux::Roots::host();
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let h = std::thread::spawn(move || {
        tx.send(schedkit_linux::gettid()).unwrap();
        // 60 ms of CPU time (not wall time: the machine may be busy).
        let c0 = schedkit_linux::workload::thread_cpu_ns();
        while schedkit_linux::workload::thread_cpu_ns() - c0 < 60_000_000 {
            std::hint::spin_loop();
        }
        done_tx.send(()).unwrap();
        // Then sleep, so the thread shows a voluntary switch.
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    let tid = rx.recv().unwrap();
    done_rx.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let pid = std::process::id() as i32;
    let st = ThreadStat::read(&roots, pid, tid).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    h.join().unwrap();
    assert_eq!(st.tid, tid);
    assert!(
        st.run_ns >= 60_000_000,
        "schedstat run time {} ns",
        st.run_ns
    );
    assert!(st.voluntary_switches >= 1);
    assert!(online().contains(st.cpu));
    assert!(!st.is_kthread());
    assert!(procfs::tids(&roots, pid).len() >= 2);
    // A kernel thread is seen as one (kthreadd is pid 2).
    let k = ThreadStat::read(&roots, 2, 2).unwrap();
    assert!(k.is_kthread(), "{k:?}");
    assert!(procfs::clock_ticks() > 0);
    assert!(procfs::sysctl(&roots, "kernel/sched_rt_period_us").is_ok());
}

#[test]
fn irq_masks_read_and_write_back() {
    let roots = schedkit_linux::Roots::host();
    let irqs = schedkit_linux::irq::list(&roots).unwrap();
    let mut read = 0;
    for n in &irqs {
        if let Ok(i) = schedkit_linux::irq::read(&roots, *n) {
            assert!(!i.affinity.is_empty());
            read += 1;
        }
    }
    assert!(read > 0 || irqs.is_empty());
    if !is_root() {
        eprintln!("skipped the write half: writing /proc/irq/N/smp_affinity needs root");
        return;
    }
    // Writing the current mask back is a no-op the kernel accepts for movable IRQs.
    let mut wrote = 0;
    for n in irqs {
        let i = schedkit_linux::irq::read(&roots, n).unwrap();
        if schedkit_linux::irq::write_mask_text(&roots, n, &i.mask_text).is_ok() {
            wrote += 1;
        }
        assert_eq!(
            schedkit_linux::irq::read(&roots, n).unwrap().mask_text,
            i.mask_text
        );
    }
    assert!(wrote > 0);
}

#[test]
fn perf_software_counters_count_and_hardware_is_reported_honestly() {
    use schedkit_linux::perf::{CounterKind, CounterSet, PerfSource, Reading, Target};
    let mut src = PerfSource;
    let mut set = CounterSet::open(&mut src, Target::Thread(0), &CounterKind::all());
    let c0 = schedkit_linux::workload::thread_cpu_ns();
    let mut x = 0u64;
    while schedkit_linux::workload::thread_cpu_ns() - c0 < 30_000_000 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    std::thread::sleep(std::time::Duration::from_millis(2));
    let r: std::collections::HashMap<_, _> = set.read().into_iter().collect();
    match &r[&CounterKind::TaskClock] {
        Reading::Value { value, .. } => assert!(*value >= 29_000_000, "task-clock {value}"),
        other if !is_root() => eprintln!("perf refused without root: {other}"),
        other => panic!("task-clock: {other}"),
    }
    if is_root() {
        assert!(r[&CounterKind::ContextSwitches].value().unwrap() >= 1);
    }
    // Hardware events are either counted or reported "not supported", never a fake zero.
    for k in CounterKind::HARDWARE {
        match &r[&k] {
            Reading::Value { .. } | Reading::NotSupported => {}
            other => assert!(!is_root(), "{}: {other}", k.name()),
        }
    }
}
