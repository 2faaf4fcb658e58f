//! A witness of machine stalls: intervals in which nothing on the machine ran, not even the
//! highest-priority real-time thread.
//!
//! A virtual machine's vCPUs can all be held by the host for milliseconds at a time (on the
//! machine schedkit is developed on, a pinned SCHED_FIFO 30 thread sleeping 2 ms at a time on
//! each CPU is woken 5-23 ms late about 14 times in two minutes, on both CPUs at the same
//! instants, with nothing else running; the host also holds single vCPUs). No guest scheduler
//! can meet a deadline through such a stall, so a real-time measurement must be able to tell
//! one from its own lateness.
//!
//! A witness is a thread that sleeps in short steps and records every step from which it woke
//! more than a threshold late: one unpinned witness under SCHED_DEADLINE
//! ([`StallWitness::start_default`], ahead of deadline threads) or one SCHED_FIFO 99 witness
//! pinned to each CPU ([`StallWitness::start_per_cpu`], which also sees a single CPU held). A stall of length L that starts while the witness sleeps
//! makes it wake at least L - step late, so with a step of 1 ms every stall longer than
//! threshold + 1 ms is caught. The witness costs one wake-up per step (about 1,000 per second
//! at 1 ms, a few microseconds each), and as the highest-priority thread it preempts whatever
//! runs where it wakes: use it in tests and in runs whose kernel context-switch counts are not
//! the point.
//!
//! Invariant: every recorded [`Stall`] is an interval `[from, to]` of `CLOCK_MONOTONIC` in
//! which the witness asked to run (its sleep had expired) for at least `late` and did not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sched::{self, Policy};

fn class_name(p: &Policy) -> String {
    match p {
        Policy::Deadline { .. } => "SCHED_DEADLINE".into(),
        Policy::Fifo { priority } => format!("SCHED_FIFO {priority}"),
        Policy::Rr { priority } => format!("SCHED_RR {priority}"),
        other => format!("{other:?}"),
    }
}

fn monotonic() -> u64 {
    crate::clock_ns(libc::CLOCK_MONOTONIC)
}

/// One step the witness overslept; times in ns of `CLOCK_MONOTONIC` (the clock of
/// `std::time::Instant` on Linux), or of another origin after [`Stall::shifted`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// When the witness went to sleep (the stall began somewhere in `[from, to - late]`).
    pub from_ns: u64,
    /// When it ran again.
    pub to_ns: u64,
    /// How much later than asked it ran.
    pub late_ns: u64,
}

impl Stall {
    /// The same stall on a clock that starts at `origin_ns` (of `CLOCK_MONOTONIC`).
    pub fn shifted(&self, origin_ns: u64) -> Stall {
        Stall {
            from_ns: self.from_ns.saturating_sub(origin_ns),
            to_ns: self.to_ns.saturating_sub(origin_ns),
            late_ns: self.late_ns,
        }
    }
}

/// How long the machine can have been stalled during `[from_ns, to_ns]`: the length of the
/// union of the whole intervals (`from..to`, the most each can have held the machine) of the
/// stalls that overlap it; one stall seen by witnesses on several CPUs counts once.
pub fn stalled_ns(stalls: &[Stall], from_ns: u64, to_ns: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = stalls
        .iter()
        .filter(|s| s.from_ns <= to_ns && from_ns <= s.to_ns)
        .map(|s| (s.from_ns, s.to_ns))
        .collect();
    spans.sort_unstable();
    let mut total = 0;
    let mut open: Option<(u64, u64)> = None;
    for (a, b) in spans {
        open = match open {
            Some((oa, ob)) if a <= ob => Some((oa, ob.max(b))),
            Some((oa, ob)) => {
                total += ob - oa;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + open.map_or(0, |(a, b)| b - a)
}

/// Whether stalls explain a job released at `release_ns` that finished at `finish_ns`, after
/// its deadline: the machine can have stalled during the job for at least as long as the job
/// was late. A miss is the one definition (`schedkit_core::trace::misses_deadline`).
pub fn explains_miss(stalls: &[Stall], release_ns: u64, deadline_ns: u64, finish_ns: u64) -> bool {
    use schedkit_core::{trace::misses_deadline, Nanos};
    misses_deadline(Nanos(deadline_ns), Some(Nanos(finish_ns)), Nanos(finish_ns))
        && stalled_ns(stalls, release_ns, finish_ns) >= finish_ns - deadline_ns
}

/// What one run of a real-time check saw, for [`rerun_while_stalled`].
#[derive(Debug, Default)]
pub struct Verdict {
    /// Deadline misses the check counts (0 where it does not assert deadlines).
    pub misses: usize,
    /// The misses the run's stalls do not explain (see [`explains_miss`]), described.
    pub unexplained: Vec<String>,
    pub stalls: Vec<Stall>,
}

/// Runs a real-time check at most `attempts` times and returns the first run without a miss.
/// A miss that the run's stalls do not explain fails at once (a panic naming `what`); a run
/// whose misses all fall in machine stalls is run again. For tests on machines whose host can
/// hold every CPU for milliseconds.
pub fn rerun_while_stalled<R>(
    what: &str,
    attempts: usize,
    mut run: impl FnMut() -> (R, Verdict),
) -> R {
    for attempt in 1.. {
        let (r, v) = run();
        assert!(
            v.unexplained.is_empty(),
            "{what}: misses no stall explains: {:?}",
            v.unexplained
        );
        if v.misses == 0 {
            return r;
        }
        assert!(
            attempt < attempts,
            "{what}: the machine stalled in {attempts} runs of {attempts}"
        );
        eprintln!(
            "{what}: {} misses, all during machine stalls {:?}; running again",
            v.misses, v.stalls
        );
    }
    unreachable!("the loop returns or panics")
}

/// A running witness; [`StallWitness::stop`] ends it and returns what it saw.
/// Dropping it stops the thread without waiting for it.
pub struct StallWitness {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Stall>>>,
    /// Why the witness runs below SCHED_FIFO, if it does.
    pub warning: Option<String>,
}

impl StallWitness {
    /// Starts the witness: it sleeps `step` at a time and records each wake-up more than
    /// `threshold` late. It runs under the first of `classes` the kernel grants (else
    /// SCHED_OTHER); [`StallWitness::warning`] says what was refused. Below the highest class
    /// on the machine it also reports the time it was held off by the threads above it.
    pub fn start(
        step: Duration,
        threshold: Duration,
        classes: Vec<Policy>,
    ) -> std::io::Result<StallWitness> {
        StallWitness::start_on(None, step, threshold, classes)
    }

    /// [`StallWitness::start`] pinned to `cpu` (when given): it then sees that CPU's stalls,
    /// including those of that CPU alone.
    pub fn start_on(
        cpu: Option<usize>,
        step: Duration,
        threshold: Duration,
        classes: Vec<Policy>,
    ) -> std::io::Result<StallWitness> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("schedkit-stall".into())
            .spawn(move || {
                let mut refused = Vec::new();
                if let Some(c) = cpu {
                    if let Err(e) = crate::affinity::pin_current(c) {
                        refused.push(format!("pinning to CPU {c} refused ({e})"));
                    }
                }
                for c in &classes {
                    // A deadline witness may reclaim bandwidth others leave unused (GRUB): a
                    // wake-up that overruns its small runtime (a slow timer exit in a VM)
                    // must not throttle it for periods, which would look like a stall.
                    let flags = match c {
                        Policy::Deadline { .. } => sched::SCHED_FLAG_RECLAIM,
                        _ => 0,
                    };
                    match sched::set_thread_with_flags(0, *c, flags) {
                        Ok(()) => break,
                        Err(e) => refused.push(format!("{} refused ({e})", class_name(c))),
                    }
                }
                let warning =
                    (!refused.is_empty()).then(|| format!("stall witness: {}", refused.join("; ")));
                let _ = tx.send(warning);
                let (step_ns, threshold_ns) = (step.as_nanos() as u64, threshold.as_nanos() as u64);
                let mut seen = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    let from_ns = monotonic();
                    std::thread::sleep(step);
                    let to_ns = monotonic();
                    let late_ns = (to_ns - from_ns).saturating_sub(step_ns);
                    if late_ns > threshold_ns {
                        seen.push(Stall {
                            from_ns,
                            to_ns,
                            late_ns,
                        });
                    }
                }
                seen
            })?;
        let warning = rx.recv().unwrap_or(None);
        Ok(StallWitness {
            stop,
            thread: Some(thread),
            warning,
        })
    }

    /// The deadline bandwidth (runtime / period) [`StallWitness::start_default`] reserves.
    pub const DEFAULT_BANDWIDTH: f64 = 0.02;

    /// The witness schedkit's real-time runs and tests use: 1 ms steps, stalls of more than
    /// 2 ms, SCHED_DEADLINE with 20 us of runtime every 1 ms when permitted (the earliest
    /// deadline of any thread whose own relative deadline is longer, so neither SCHED_FIFO
    /// threads nor the deadline threads of a task set hold it off; it reserves 2 % of one
    /// CPU's deadline bandwidth, and the kernel refuses it to a thread pinned to fewer CPUs
    /// than its root domain), else SCHED_FIFO 99.
    pub fn start_default() -> std::io::Result<StallWitness> {
        let step = Duration::from_millis(1);
        StallWitness::start(
            step,
            Duration::from_millis(2),
            vec![
                Policy::Deadline {
                    runtime: (StallWitness::DEFAULT_BANDWIDTH * step.as_nanos() as f64) as u64,
                    deadline: step.as_nanos() as u64,
                    period: step.as_nanos() as u64,
                },
                Policy::Fifo { priority: 99 },
            ],
        )
    }

    /// One witness pinned to each of `cpus` at SCHED_FIFO 99 (the kernel refuses
    /// SCHED_DEADLINE to pinned threads), 1 ms steps, stalls of more than 2 ms: a host that
    /// holds one vCPU alone is seen too, which one unpinned witness misses whenever it runs on
    /// another CPU. For runs whose threads are SCHED_FIFO below 99 (the real-time pool); a
    /// deadline thread would hold these off (use [`StallWitness::start_default`] there).
    pub fn start_per_cpu(cpus: &[usize]) -> std::io::Result<Vec<StallWitness>> {
        cpus.iter()
            .map(|&c| {
                StallWitness::start_on(
                    Some(c),
                    Duration::from_millis(1),
                    Duration::from_millis(2),
                    vec![Policy::Fifo { priority: 99 }],
                )
            })
            .collect()
    }

    /// Stops every witness of `ws`: their stalls merged in time order, and their warnings.
    pub fn stop_all(ws: Vec<StallWitness>) -> (Vec<Stall>, Vec<String>) {
        let mut warnings: Vec<String> = ws.iter().filter_map(|w| w.warning.clone()).collect();
        warnings.dedup();
        let mut stalls: Vec<Stall> = ws.into_iter().flat_map(StallWitness::stop).collect();
        stalls.sort_by_key(|s| (s.from_ns, s.to_ns));
        (stalls, warnings)
    }

    /// Stops the witness and returns the stalls it saw, in order.
    pub fn stop(mut self) -> Vec<Stall> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for StallWitness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_is_rerun_only_while_its_misses_fall_in_stalls() {
        let mut runs = 0;
        let r = rerun_while_stalled("check", 3, || {
            runs += 1;
            let misses = if runs == 1 { 2 } else { 0 };
            (
                runs,
                Verdict {
                    misses,
                    ..Verdict::default()
                },
            )
        });
        assert_eq!((r, runs), (2, 2));
        let unexplained = std::panic::catch_unwind(|| {
            rerun_while_stalled("check", 3, || {
                let v = Verdict {
                    misses: 1,
                    unexplained: vec!["job 7".into()],
                    stalls: Vec::new(),
                };
                ((), v)
            })
        });
        assert!(unexplained.is_err());
        let always_stalled = std::panic::catch_unwind(|| {
            rerun_while_stalled("check", 3, || {
                let v = Verdict {
                    misses: 1,
                    ..Verdict::default()
                };
                ((), v)
            })
        });
        assert!(always_stalled.is_err());
    }

    #[test]
    fn one_stall_seen_on_two_cpus_counts_once() {
        let st = |a: u64, b: u64| Stall {
            from_ns: a,
            to_ns: b,
            late_ns: b - a - 1,
        };
        // CPU 0 and CPU 1 saw the same 10-unit stall, shifted by 1; a separate one later.
        let s = [st(100, 110), st(101, 111), st(200, 205)];
        assert_eq!(stalled_ns(&s, 0, 150), 11);
        assert_eq!(stalled_ns(&s, 0, 1000), 16);
        assert_eq!(stalled_ns(&s, 120, 190), 0);
        assert!(explains_miss(&s, 95, 100, 111));
        assert!(!explains_miss(&s, 95, 100, 113));
    }

    #[test]
    fn a_thread_held_off_the_cpu_is_seen_as_a_stall() {
        // A real hold-off, not a simulated one: the witness runs SCHED_OTHER pinned with a
        // SCHED_FIFO spinner on its CPU for 30 ms (root), so it cannot run for that long.
        if !crate::privilege::Privileges::current().sys_nice {
            eprintln!("skipped: a SCHED_FIFO spinner needs root or CAP_SYS_NICE");
            return;
        }
        let Some(cpu) = crate::affinity::get_thread(0)
            .ok()
            .and_then(|c| c.iter().last())
        else {
            eprintln!("skipped: cannot read the allowed CPUs");
            return;
        };
        let w = std::thread::spawn(move || {
            crate::affinity::pin_current(cpu).unwrap();
            StallWitness::start(
                Duration::from_millis(1),
                Duration::from_millis(5),
                Vec::new(),
            )
            .unwrap()
        })
        .join()
        .unwrap();
        // The witness thread inherited the pin of the thread that spawned it.
        std::thread::sleep(Duration::from_millis(20));
        let held = std::thread::spawn(move || {
            crate::affinity::pin_current(cpu).unwrap();
            sched::set_thread(0, Policy::Fifo { priority: 10 }).unwrap();
            let t = monotonic();
            while monotonic() < t + 30_000_000 {
                std::hint::spin_loop();
            }
            t
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let seen = w.stop();
        // It saw the hold-off as a stall of most of its 30 ms...
        assert!(
            stalled_ns(&seen, held, held + 30_000_000) >= 20_000_000,
            "{seen:?}"
        );
        // ...which explains a job that was 20 ms late then, not one 40 ms late.
        let release = held - 1_000_000;
        assert!(
            explains_miss(&seen, release, held, held + 20_000_000),
            "{seen:?}"
        );
        assert!(
            !explains_miss(&seen, release, held, held + 40_000_000),
            "{seen:?}"
        );
    }
}
