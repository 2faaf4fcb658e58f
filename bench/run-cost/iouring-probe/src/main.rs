//! `iouring-probe N FILE`: starts N spinning threads, opens each one's `/proc/PID/task/TID/FILE`
//! (`schedstat` or `stat`) once, and reads them all six times two ways: one `pread` each (as
//! the sampler does), and one io_uring submission of N reads waited for at once. Prints the
//! CPU per read of the reading thread, of io_uring's io-wq workers (procfs files cannot be
//! read without blocking, so io_uring hands each read to a kernel worker thread of this
//! process), and the wall time per read. The reader runs at SCHED_FIFO 10 so the spinners do
//! not starve it (as the engine thread does); run as root.
use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn thread_cpu() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (schedstat) of this process's io-wq worker threads (`iou-wrk-*`), and how many.
fn workers_cpu(pid: u32) -> (u64, usize) {
    let (mut sum, mut n) = (0, 0);
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("iou-wrk") {
            n += 1;
            sum += std::fs::read_to_string(e.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    (sum, n)
}

fn main() {
    let n: usize = std::env::args().nth(1).expect("N").parse().expect("N");
    let file = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "schedstat".into());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..n {
        let (s, tx) = (stop.clone(), tx.clone());
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                // SAFETY: no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                let mut x = 1u64;
                while !s.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                std::hint::black_box(x);
            })
            .unwrap();
    }
    let pid = std::process::id();
    let tids: Vec<i32> = (0..n).map(|_| rx.recv().unwrap()).collect();
    let files: Vec<File> = tids
        .iter()
        .map(|t| File::open(format!("/proc/{pid}/task/{t}/{file}")).unwrap())
        .collect();
    let mut bufs = vec![[0u8; 1024]; n];
    // SAFETY: a valid sched_param for this thread.
    unsafe {
        let p = libc::sched_param { sched_priority: 10 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
    }
    let mut ring = IoUring::new(n.next_power_of_two() as u32).unwrap();
    for round in 0..6 {
        let (c0, w0) = (thread_cpu(), Instant::now());
        for (f, b) in files.iter().zip(bufs.iter_mut()) {
            let _ = f.read_at(b, 0);
        }
        let (c1, w1) = (thread_cpu(), w0.elapsed());
        let (k0, _) = workers_cpu(pid);
        let (c2, w2) = (thread_cpu(), Instant::now());
        {
            let mut sq = ring.submission();
            for (i, (f, b)) in files.iter().zip(bufs.iter_mut()).enumerate() {
                let e = opcode::Read::new(types::Fd(f.as_raw_fd()), b.as_mut_ptr(), b.len() as u32)
                    .offset(0)
                    .build()
                    .user_data(i as u64);
                // SAFETY: the buffer outlives the request (waited for below).
                unsafe { sq.push(&e).unwrap() };
            }
        }
        ring.submit_and_wait(n).unwrap();
        let ok = ring.completion().filter(|c| c.result() > 0).count();
        let (c3, w3) = (thread_cpu(), w2.elapsed());
        let (k1, workers) = workers_cpu(pid);
        let per = |ns: u64| ns as f64 / 1e3 / n as f64;
        println!(
            "round {round}: pread: reader {:.1} us/read, wall {:.1} us/read | io_uring: reader {:.1} us/read, io-wq workers {:.1} us/read, wall {:.1} us/read ({ok} of {n} read, {workers} worker thread(s))",
            per(c1 - c0),
            per(w1.as_nanos() as u64),
            per(c3 - c2),
            per(k1.saturating_sub(k0)),
            per(w3.as_nanos() as u64),
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
}
