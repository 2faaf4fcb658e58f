//! The sampler's reads of one job thread, kept cheap: what a sample costs is what a run costs
//! the machine (issue: 17-24 % of a core with 400 hackbench tasks at 10 ms).
//!
//! Every sample reads the thread's `schedstat` (CPU time, run-queue delay, times scheduled
//! in: three numbers, the cheapest file of a thread) with `pread` on a descriptor kept open
//! across samples: no path lookup, no open, no allocation. The dearer files are read only
//! when they can have changed or when the report needs them:
//! - `stat` (state, the CPU it last ran on) when `schedstat` moved: a thread that was not
//!   scheduled in since the last sample cannot have changed CPU, and its state is the one
//!   last seen (a thread woken but not yet run reads as still asleep until it runs);
//! - `status` (the voluntary / involuntary split of context switches) on a refresh, which
//!   each thread gets about every five seconds, staggered so that one sample never reads
//!   them all (and once more at the end of the run, for exact counts); also `stat` then, so
//!   a thread that turned zombie without running is seen.
//!
//! A failed read (the thread ended and was reaped) falls back to [`ThreadStat::read`], whose
//! error tells the sampler it is gone.

use crate::procfs::{self, ThreadStat};
use crate::Roots;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// A thread's `/proc` files, opened on first use and re-read with `pread` at offset 0 (the
/// kernel regenerates the text on every read of offset 0).
pub(crate) struct ThreadFiles {
    pid: i32,
    dir: std::path::PathBuf,
    schedstat: File,
    stat: Option<File>,
    status: Option<File>,
}

impl ThreadFiles {
    pub(crate) fn open(roots: &Roots, pid: i32, tid: i32) -> Option<ThreadFiles> {
        let dir = roots
            .proc
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string());
        Some(ThreadFiles {
            pid,
            schedstat: File::open(dir.join("schedstat")).ok()?,
            dir,
            stat: None,
            status: None,
        })
    }

    fn file(slot: &mut Option<File>, path: std::path::PathBuf) -> Option<&File> {
        if slot.is_none() {
            *slot = File::open(path).ok();
        }
        slot.as_ref()
    }

    /// Reads the thread against `prev` (its last reading; `prev.tid == 0`: none yet):
    /// schedstat always, stat when schedstat moved or on `refresh`, status on `refresh` and,
    /// for a `young` thread, whenever schedstat moved: a thread that lives less than the
    /// refresh cycle (a burst of short-lived threads) would otherwise keep the switch counts
    /// of its first reading, since its files are gone once it has ended.
    /// `None` when a file could not be read (the thread is gone). What is not read again is
    /// taken over from `prev` (its `comm` moved, not copied: no allocation). The flag says
    /// whether `stat` was read now (else state and CPU are the last ones seen).
    pub(crate) fn read(
        &mut self,
        buf: &mut [u8],
        prev: &mut ThreadStat,
        refresh: bool,
        young: bool,
    ) -> Option<(ThreadStat, bool)> {
        let n = pread(&self.schedstat, buf)?;
        let mut v = std::str::from_utf8(&buf[..n])
            .ok()?
            .split_ascii_whitespace()
            .map(|x| x.parse::<u64>().ok());
        let (run_ns, wait_ns, timeslices) = (v.next()??, v.next()??, v.next()??);
        let first = prev.tid == 0;
        let moved = run_ns != prev.run_ns || timeslices != prev.timeslices;
        let fresh_stat = first || moved || refresh;
        let mut t = if fresh_stat {
            let f = Self::file(&mut self.stat, self.dir.join("stat"))?;
            let n = pread(f, buf)?;
            procfs::parse_stat(std::str::from_utf8(&buf[..n]).ok()?)?
        } else {
            ThreadStat {
                pid: prev.pid,
                tid: prev.tid,
                comm: std::mem::take(&mut prev.comm),
                state: prev.state,
                flags: prev.flags,
                utime_ticks: prev.utime_ticks,
                stime_ticks: prev.stime_ticks,
                starttime: prev.starttime,
                cpu: prev.cpu,
                rt_priority: prev.rt_priority,
                num_threads: prev.num_threads,
                policy: prev.policy,
                ..ThreadStat::default()
            }
        };
        t.pid = self.pid;
        (t.run_ns, t.wait_ns, t.timeslices) = (run_ns, wait_ns, timeslices);
        (t.voluntary_switches, t.involuntary_switches) =
            (prev.voluntary_switches, prev.involuntary_switches);
        if first || refresh || (young && moved) {
            let f = Self::file(&mut self.status, self.dir.join("status"))?;
            let n = pread(f, buf)?;
            let (v, i) = switches(std::str::from_utf8(&buf[..n]).ok()?);
            // Counts never go back.
            t.voluntary_switches = v.max(prev.voluntary_switches);
            t.involuntary_switches = i.max(prev.involuntary_switches);
        }
        Some((t, fresh_stat))
    }
}

fn pread(f: &File, buf: &mut [u8]) -> Option<usize> {
    f.read_at(buf, 0).ok().filter(|&n| n > 0 && n < buf.len())
}

/// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of a `status` text.
fn switches(status: &str) -> (u64, u64) {
    let (mut v, mut i) = (0, 0);
    // They are the last lines of the file.
    for l in status.lines().rev() {
        if let Some(x) = l.strip_prefix("voluntary_ctxt_switches:") {
            v = x.trim().parse().unwrap_or(0);
            break;
        } else if let Some(x) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
            i = x.trim().parse().unwrap_or(0);
        }
    }
    (v, i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn reads_of_the_open_files_match_a_full_read() {
        let roots = Roots::host();
        let (pid, tid) = (std::process::id() as i32, crate::gettid());
        let full = ThreadStat::read(&roots, pid, tid).expect("own thread");
        let mut files = ThreadFiles::open(&roots, pid, tid).expect("open");
        let mut buf = vec![0u8; 4096];
        // The first read reads every file.
        let first = files
            .read(&mut buf, &mut ThreadStat::default(), false, false)
            .expect("pread");
        assert!(first.1);
        assert_eq!((first.0.tid, first.0.state), (tid, 'R'));
        assert!(first.0.run_ns >= full.run_ns);
        assert!(first.0.voluntary_switches >= full.voluntary_switches);
        assert_eq!(first.0.starttime, full.starttime);
        let mut prev = first.0;
        assert_eq!(prev.pid, pid);
        // Burn some CPU so that the run time moves between the reads: stat is read again.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(5) {
            std::hint::black_box(0u64);
        }
        let (run, vol) = (prev.run_ns, prev.voluntary_switches);
        let next = files
            .read(&mut buf, &mut prev, false, false)
            .expect("pread");
        assert!(next.1);
        assert_eq!((next.0.pid, next.0.tid), (pid, tid));
        assert!(next.0.run_ns > run);
        assert_eq!(next.0.voluntary_switches, vol);
    }

    #[test]
    fn a_thread_that_did_not_run_costs_one_read() {
        let roots = Roots::host();
        let pid = std::process::id() as i32;
        // A thread that sleeps between our reads.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(crate::gettid()).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut files = ThreadFiles::open(&roots, pid, tid).expect("open");
        let mut buf = vec![0u8; 4096];
        let mut prev = files
            .read(&mut buf, &mut ThreadStat::default(), false, false)
            .expect("read")
            .0;
        assert_eq!(prev.state, 'S');
        let again = files.read(&mut buf, &mut prev, false, false).expect("read");
        assert!(!again.1, "stat read although the thread did not run");
        assert_eq!((again.0.state, again.0.tid), ('S', tid));
        let mut prev = again.0;
        // A refresh reads stat and status anyway.
        let r = files.read(&mut buf, &mut prev, true, false).expect("read");
        assert!(r.1);
        let mut prev = r.0;
        done_tx.send(()).unwrap();
        h.join().unwrap();
        // Gone: the open descriptors fail.
        std::thread::sleep(Duration::from_millis(20));
        assert!(files.read(&mut buf, &mut prev, true, false).is_none());
    }

    #[test]
    fn switch_counts_come_from_the_status_text() {
        let s = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(switches(s), (12, 3));
        assert_eq!(switches("Name:\tx\n"), (0, 0));
    }
}
