//! The sampler of the real engine: every job thread's `/proc` readings, and the trace events
//! they become.
//!
//! ## From samples to the trace
//!
//! Every `sample` period (10 ms by default, the SPEC's bound) the sampler reads each job
//! thread's `/proc` files. Between two samples `[t0, t1)` a thread ran `r` ns (schedstat), was
//! scheduled in `v + i` times (schedstat; status splits them into voluntary + involuntary)
//! and was last seen on CPU `c`. The
//! interval becomes, per CPU, a sequence of run pieces: each thread's `r` is cut into
//! `1 + min(v + i, 8)` pieces, interleaved round robin with the other job threads of that
//! CPU, and the rest of the interval (time the CPU gave to threads outside the job, or idle)
//! is spread as gaps between pieces. A thread that was running at `t0` on the same CPU and
//! still is continues without a new dispatch, so a pinned thread that is never preempted
//! produces one dispatch for the whole run. A CPU change is a `Migrate`. The placement
//! inside an interval is a reconstruction (the kernel does not tell us the order); the totals
//! (CPU time per thread per interval, switches up to 8 per interval, migrations, the CPU) are
//! measured. Exact kernel counts (switches, migrations, run-queue wait, perf counters, the
//! longest stall) are kept beside the trace in [`RunOutcome`](super::RunOutcome) and shown by `schedkit run`.
//!
//! No CPU time is lost in the layout: schedstat's total of a running thread lags up to a tick,
//! so a busy CPU can show more CPU time than its interval holds; the excess carries into the
//! thread's next interval. A thread seen on a new CPU whose time overfills it gives the
//! overflow back to its old CPU (as far as that has room), placed first there; its piece on
//! the new CPU comes last and after that.
//!
//! ## What sampling costs, and how the engine keeps it small
//!
//! Reading three `/proc` files per thread per sample (stat, schedstat, status: open, read,
//! close, each time through a path lookup) cost schedkit 31-33 % of a core with 100 threads
//! at 5 ms, and walking every thread's `children` file to find new processes cost as much
//! again. So each sample reads one file per thread, `schedstat`, with `pread` on a
//! descriptor kept open, and the dearer files only when they can have changed
//! ([`crate::threadfiles`]: `stat` when the thread was scheduled in, `status` about every
//! five seconds per thread, staggered); discovery looks for new threads and processes only below
//! threads that were scheduled in since the last sample ([`discover`]), and not at all while
//! the command's job cgroup holds as many tasks as are tracked (its count read through a
//! descriptor kept open, [`crate::jobcg::TaskCount`]); a thread asleep since the last sample
//! is read every fourth sample only ([`IDLE_EVERY`]), and one waiting for a CPU since the
//! last sample every second ([`WAITING_EVERY`]). Exact switch counts
//! are read once more at the end of the run. With [`RunOptions::sample_budget`](super::RunOptions::sample_budget) the period
//! adapts: after every sample the engine reads its own thread's CPU clock around the
//! sampling step and sets the next period to `cost per sample / budget` (EWMA of the cost,
//! 1/4), between the requested `sample` and [`RunOptions::max_sample`](super::RunOptions::max_sample); a period longer than
//! the SPEC's 10 ms is stated in the run's warnings. The run reports the sampler's own CPU
//! and the periods it used ([`SamplerReport`]); the lag figures of a run have the resolution
//! of that period. Measured in `docs/results/run-cost.md` (`bench/run-cost/sampler.sh`).
//!
//! Rejected: a tracer (ftrace/eBPF) per context switch, which needs debugfs or BPF and
//! root on every run; sampling is what works for every user and every kernel.

use super::layout::{lay_out, Obs};
use crate::perf::CounterSet;
use crate::procfs::{self, ThreadStat};
use crate::spawn;
use crate::threadfiles::ThreadFiles;
use crate::workload::{self, ThreadShared};
use crate::{Result, Roots};
use schedkit_core::trace::{Event, Reason, Slot};
use schedkit_core::Nanos;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// What sampling cost: the engine thread's CPU time inside the sampling steps (its CPU
/// clock read around each), and the sampling periods used.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SamplerReport {
    pub samples: u64,
    pub cpu_ns: u64,
    /// Run length, for `cpu_ns` as a share of one core.
    pub wall_ns: u64,
    /// Shortest and longest period between two samples the engine asked for, ns.
    pub min_period_ns: u64,
    pub max_period_ns: u64,
    /// The budget it adapted to (fraction of one core), if any.
    pub budget: Option<f64>,
}

impl SamplerReport {
    /// Sampler CPU as a percentage of one core over the run.
    pub fn cpu_pct(&self) -> f64 {
        100.0 * self.cpu_ns as f64 / self.wall_ns.max(1) as f64
    }

    /// Mean period between samples, ns.
    pub fn mean_period_ns(&self) -> u64 {
        self.wall_ns / self.samples.max(1)
    }

    /// One line for reports.
    pub fn line(&self) -> String {
        format!(
            "sampler cpu {:.3} ms ({:.3} % of one core, {:.1} us per sample); {} samples, period {}..{} (mean {}){}",
            self.cpu_ns as f64 / 1e6,
            self.cpu_pct(),
            self.cpu_ns as f64 / 1e3 / self.samples.max(1) as f64,
            self.samples,
            Nanos(self.min_period_ns),
            Nanos(self.max_period_ns),
            Nanos(self.mean_period_ns()),
            self.budget
                .map(|b| format!(", adapted to a budget of {:.1} % of one core", b * 100.0))
                .unwrap_or_default()
        )
    }
}

/// The sampling period's controller (see the module docs).
pub(super) struct SamplePeriod {
    min: u64,
    max: u64,
    budget: Option<f64>,
    /// EWMA of the cost of one sample, ns.
    cost: f64,
    pub(super) period: u64,
    pub(super) report: SamplerReport,
}

/// The SPEC's bound on the sampling period of real runs.
pub(super) const MAX_SAMPLE_NS: u64 = 10_000_000;

impl SamplePeriod {
    pub(super) fn new(min: Duration, max: Duration, budget: Option<f64>) -> SamplePeriod {
        let min = (min.as_nanos() as u64).max(1);
        SamplePeriod {
            min,
            max: (max.as_nanos() as u64).max(min),
            budget: budget.filter(|b| *b > 0.0),
            cost: 0.0,
            period: min,
            report: SamplerReport {
                min_period_ns: min,
                max_period_ns: min,
                budget,
                ..SamplerReport::default()
            },
        }
    }

    /// Records one sample's cost and sets the next period.
    pub(super) fn record(&mut self, cost_ns: u64) {
        let r = &mut self.report;
        if r.samples == 0 {
            self.cost = cost_ns as f64;
        } else {
            self.cost += (cost_ns as f64 - self.cost) / 4.0;
        }
        r.samples += 1;
        r.cpu_ns += cost_ns;
        if let Some(b) = self.budget {
            self.period = ((self.cost / b) as u64).clamp(self.min, self.max);
            r.min_period_ns = r.min_period_ns.min(self.period);
            r.max_period_ns = r.max_period_ns.max(self.period);
        }
    }
}

/// Reads one thread through its open files ([`crate::threadfiles`]); when that fails (the
/// thread ended), a read by path says how (zombie) or that it is gone.
fn read_thread(
    roots: &Roots,
    tr: &mut Track,
    (refresh, young): (bool, bool),
    buf: &mut [u8],
) -> Result<ThreadStat> {
    if tr.files.is_none() {
        tr.files = ThreadFiles::open(roots, tr.pid, tr.tid);
    }
    if let Some(r) = tr
        .files
        .as_mut()
        .and_then(|f| f.read(buf, &mut tr.last, refresh, young))
    {
        return Ok(r.0);
    }
    tr.files = None;
    ThreadStat::read(roots, tr.pid, tr.tid)
}

/// Per-thread sampler state.
impl Track {
    /// Closes the thread's open run interval, if any, with a Deschedule for `reason`.
    pub(super) fn leave_core(&mut self, events: &mut Vec<Event>, t: Nanos, reason: Reason) {
        if let Some(core) = self.open_core.take() {
            events.push(Event::Deschedule {
                t,
                core,
                slot: self.slot,
                reason,
            });
        }
    }
}

pub(super) struct Track {
    pub(super) process: usize,
    pub(super) index: u32,
    pub(super) pid: i32,
    pub(super) tid: i32,
    pub(super) slot: Slot,
    /// Time of the thread's `Arrive` event: nothing of it is placed earlier.
    pub(super) arrive_ns: u64,
    pub(super) prev_run: u64,
    /// Run-queue delay (schedstat) at the last sample: with the CPU time it tells how much
    /// of an interval the thread was runnable, and so how much it slept.
    pub(super) prev_wait: u64,
    /// CPU time seen but not yet placed in the trace (it did not fit its interval).
    pub(super) carry: u64,
    pub(super) prev_sw: (u64, u64),
    pub(super) open_core: Option<usize>,
    pub(super) last_core: Option<usize>,
    pub(super) runnable: bool,
    pub(super) finished: bool,
    pub(super) shared: Option<Arc<ThreadShared>>,
    pub(super) last: ThreadStat,
    pub(super) migrations: u64,
    pub(super) stall_run: u64,
    pub(super) stall_since: Option<u64>,
    pub(super) longest_stall: u64,
    pub(super) counters: Option<CounterSet>,
    /// Open `/proc` files for fast samples.
    pub(super) files: Option<ThreadFiles>,
    /// Scheduled in since the previous sample (or new): it may have started threads or
    /// processes, so discovery looks at it (a thread that never ran forked nothing).
    pub(super) active: bool,
    /// Samples in a row that found it not scheduled in: past [`IDLE_SAMPLES`] it is read
    /// only every [`IDLE_EVERY`] samples.
    pub(super) idle: u32,
    /// Samples in a row that found it runnable and not scheduled in (waiting for a CPU):
    /// from one on it is read every [`WAITING_EVERY`] samples.
    pub(super) waiting: u32,
    /// When it was last read (the end of that sample's interval; 0: never): the start of
    /// the window its next reading covers.
    pub(super) read_at: u64,
    /// The start of the interval of its first reading: for [`YOUNG_NS`].
    pub(super) since: u64,
}

pub(super) enum Body {
    Builtin(workload::Running),
    Command { pid: i32, exit: Option<String> },
}

pub(super) struct Proc {
    pub(super) start_ns: u64,
    pub(super) end_ns: Option<u64>,
    /// A command's job cgroup's task count ([`crate::jobcg::task_counter`]), where the
    /// hierarchy has one: while it equals the threads tracked, nothing new was started and
    /// discovery reads nothing more.
    pub(super) tasks_file: Option<crate::jobcg::TaskCount>,
    /// A command's job cgroup (`cmd-<n>`), where the run has them: the gang engine freezes
    /// it in place rather than moving the job out of it.
    pub(super) job_dir: Option<PathBuf>,
    pub(super) body: Body,
    pub(super) counters: Option<CounterSet>,
    pub(super) next_index: u32,
}

/// Sort rank at equal times: leave a CPU before anyone takes it.
pub(super) fn rank(e: &Event) -> u8 {
    match e {
        // A thread exists before anything else happens to it at the same instant (a sleep
        // placed at its arrival, say).
        Event::Arrive { .. } => 0,
        Event::Deschedule { .. } => 1,
        Event::Finish { .. } => 2,
        Event::Block { .. } => 3,
        Event::Wake { .. } => 4,
        Event::Migrate { .. } => 5,
        Event::Dispatch { .. } => 6,
        _ => 7,
    }
}

/// `pid` and every process below it (through `/proc/PID/task/TID/children`).
pub(super) fn descendants(roots: &Roots, pid: i32) -> Vec<i32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < 4096 {
        let p = out[i];
        for tid in procfs::tids(roots, p) {
            let f = roots
                .proc
                .join(p.to_string())
                .join("task")
                .join(tid.to_string())
                .join("children");
            if let Ok(s) = std::fs::read_to_string(f) {
                out.extend(s.split_whitespace().filter_map(|x| x.parse::<i32>().ok()));
            }
        }
        i += 1;
    }
    out
}

/// The threads of a command's process tree to look at: every thread (and every child) of
/// `new` and of the processes found below the active threads, and every thread of an
/// active thread's process. Only a thread that was scheduled in since the last look can
/// have started a thread or a process, so a job of a thousand sleeping threads costs no
/// directory reads at all (a walk of every thread's `children` file each sample cost more
/// than the samples themselves).
pub(super) fn discover(
    roots: &Roots,
    new: Option<i32>,
    active: &[(i32, i32)],
    known: &HashMap<i32, usize>,
    live: impl Fn(i32) -> u64,
) -> Vec<(i32, i32)> {
    let children = |pid: i32, tid: i32| -> Vec<i32> {
        let f = roots
            .proc
            .join(pid.to_string())
            .join("task")
            .join(tid.to_string())
            .join("children");
        std::fs::read_to_string(f)
            .map(|s| {
                s.split_ascii_whitespace()
                    .filter_map(|x| x.parse::<i32>().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut listed: std::collections::HashSet<i32> = Default::default();
    let mut queue: Vec<i32> = new.into_iter().collect();
    for &(pid, tid) in active {
        if listed.insert(pid) {
            // A large process whose thread count is the one tracked started no thread (or
            // one that replaced a thread that ended, seen a sample later once that one's
            // end is seen): its `stat` costs one read, its task directory a walk of every
            // thread.
            let n = live(pid);
            let same =
                n >= 16 && procfs::read_stat(roots, pid, pid).is_some_and(|s| s.num_threads == n);
            if !same {
                out.extend(procfs::tids(roots, pid).into_iter().map(|t| (pid, t)));
            }
        }
        // Children already tracked look after themselves (their own active threads).
        queue.extend(
            children(pid, tid)
                .into_iter()
                .filter(|c| !known.contains_key(c)),
        );
    }
    let mut i = 0;
    while i < queue.len() && out.len() < 65_536 {
        let p = queue[i];
        i += 1;
        if !listed.insert(p) {
            continue;
        }
        for t in procfs::tids(roots, p) {
            out.push((p, t));
            queue.extend(
                children(p, t)
                    .into_iter()
                    .filter(|c| !known.contains_key(c)),
            );
        }
    }
    out
}

/// A thread found asleep and not scheduled in at this many samples in a row is read only
/// every [`IDLE_EVERY`] samples until it runs again: a job of a thousand threads that mostly
/// sleep (a pool, a server) costs a quarter of the reads. Its CPU time stays exact (schedstat
/// counts on); a wake-up is seen up to `IDLE_EVERY - 1` periods late, and its CPU time is
/// then placed in the interval where it is seen (the trace's layout, not its totals). One
/// sample, not three: a thousand threads that each wake once a second spent most of their
/// reads in the three samples after each wake-up (docs/results/run-cost.md).
const IDLE_SAMPLES: u32 = 1;
const IDLE_EVERY: u64 = 4;

/// A thread found runnable but not scheduled in (waiting in a run queue) is read every
/// second sample until it runs again, staggered by slot so that each sample reads half of
/// the waiting threads. With more busy threads than CPUs most of them wait in any period
/// (1,000 spinners on 2 CPUs: about 66 run in a 100 ms period) and one `schedstat` read of
/// each was most of a sample's cost, over the 3 % of a core that issue 15 allows at 1,000
/// threads. What it costs: a waiting thread's start is seen up to one period late, its CPU
/// time then placed in the interval where it is seen (the trace's layout; its totals, its
/// run-queue delay and its switch counts stay exact, schedstat counts on), and a stall is
/// counted to the start of the window its next reading covers, so it is never longer than
/// what the readings show.
const WAITING_EVERY: u64 = 2;

/// For this long after its first reading a thread's `status` (its switch counts) is read
/// whenever it was scheduled in, not only at its turn every ~5 s: a thread of a burst that
/// lives 100 ms kept the counts of its first reading (its files are gone when it has ended),
/// and a run of short-lived threads reported mostly the switches of its long-lived ones.
const YOUNG_NS: u64 = 1_000_000_000;

/// Whether a thread is read at this sample (`turn`: the sample's number plus its slot, so
/// that skipped threads are spread over the samples).
fn due(idle: u32, waiting: u32, turn: u64) -> bool {
    if idle >= IDLE_SAMPLES {
        turn.is_multiple_of(IDLE_EVERY)
    } else if waiting >= 1 {
        turn.is_multiple_of(WAITING_EVERY)
    } else {
        true
    }
}

/// Which sample this is, for the threads' turns.
#[derive(Clone, Copy, Debug)]
pub(super) struct Turn {
    pub(super) sample_no: u64,
    /// Each thread's `status` is read every this many samples, at its own turn.
    pub(super) refresh_every: u64,
    /// The run's last sample: every thread is read.
    pub(super) last: bool,
}

/// One sampling step over `[t0, t1)`: reads every live thread and writes the interval's
/// events (see the module docs).
pub(super) fn sample(
    roots: &Roots,
    (tracks, procs): (&mut [Track], &mut [Option<Proc>]),
    events: &mut Vec<Event>,
    (t0, t1): (u64, u64),
    turn: Turn,
    buf: &mut [u8],
) {
    let mut obs = observe(roots, tracks, (t0, t1), turn, buf);
    lay_out(tracks, &mut obs, events, (t0, t1));
    ended_processes(tracks, procs, events, t1);
}

/// Reads every live thread (an idle one only at its turn) and what it did in the interval.
fn observe(
    roots: &Roots,
    tracks: &mut [Track],
    (t0, t1): (u64, u64),
    Turn {
        sample_no,
        refresh_every,
        last,
    }: Turn,
    buf: &mut [u8],
) -> Vec<Obs> {
    let mut obs: Vec<Obs> = Vec::new();
    for (i, tr) in tracks.iter_mut().enumerate() {
        if tr.finished {
            // (Active for one discovery after it ended: what it started is looked for.)
            tr.active = false;
            continue;
        }
        let fin_at = tr
            .shared
            .as_ref()
            .map(|s| s.finished_at.load(Ordering::Acquire))
            .filter(|&f| f != 0);
        let turn = sample_no + tr.slot as u64;
        // A thread the trace still shows on a CPU (a piece of carried-over time left open)
        // is read every sample: the layout closes a piece only for a thread it observes,
        // and a piece left open under the next one there would put two threads on a CPU.
        let open = tr.open_core.is_some();
        if !last && !open && !due(tr.idle, tr.waiting, turn) && fin_at.is_none() {
            continue;
        }
        if tr.read_at == 0 {
            tr.since = t0;
        }
        // The window this reading covers: longer than [t0, t1) after a skipped sample.
        let w0 = if tr.read_at == 0 {
            t0
        } else {
            tr.read_at.min(t0)
        };
        tr.read_at = t1;
        let refresh = turn.is_multiple_of(refresh_every);
        let young = t1.saturating_sub(tr.since) < YOUNG_NS;
        let st = read_thread(roots, tr, (refresh, young), buf);
        // Times scheduled in since the last sample (schedstat), for the pieces.
        let mut slices = None;
        let mut waited = 0;
        let (run, sw, core, runnable, finish) = match (st, fin_at) {
            (Ok(st), None) if st.state != 'Z' && st.state != 'X' => {
                if tr.last.tid != 0 {
                    slices = Some(st.timeslices.saturating_sub(tr.last.timeslices));
                }
                waited = st.wait_ns.saturating_sub(tr.prev_wait);
                tr.prev_wait = st.wait_ns.max(tr.prev_wait);
                let r = (
                    st.run_ns,
                    (st.voluntary_switches, st.involuntary_switches),
                    st.cpu,
                    st.is_runnable(),
                    None,
                );
                tr.last = st;
                r
            }
            (st, fin) => {
                // Gone (or done): last known values, or the thread's own final CPU time.
                let cpu_final = tr
                    .shared
                    .as_ref()
                    .map(|s| s.cpu_at_finish.load(Ordering::Relaxed))
                    .unwrap_or(tr.prev_run)
                    .max(tr.prev_run);
                let (sw, core) = match st {
                    Ok(st) => ((st.voluntary_switches, st.involuntary_switches), st.cpu),
                    Err(_) => (tr.prev_sw, tr.last.cpu),
                };
                let f = fin.unwrap_or(t1).clamp(t0, t1);
                (cpu_final, sw, core, false, Some(f))
            }
        };
        let ran = run.saturating_sub(tr.prev_run);
        tr.active = ran > 0 || slices.is_some_and(|n| n > 0);
        tr.idle = if tr.active || runnable {
            0
        } else {
            tr.idle.saturating_add(1)
        };
        tr.waiting = if runnable && !tr.active {
            tr.waiting.saturating_add(1)
        } else {
            0
        };
        let dv = sw.0.saturating_sub(tr.prev_sw.0);
        let di = sw.1.saturating_sub(tr.prev_sw.1);
        tr.prev_run = run.max(tr.prev_run);
        tr.prev_sw = (sw.0.max(tr.prev_sw.0), sw.1.max(tr.prev_sw.1));
        // Stall from samples: runnable but no progress.
        if ran == 0 && runnable {
            tr.stall_since.get_or_insert(w0);
        } else if let Some(s) = tr.stall_since.take() {
            // It progressed somewhere in [w0, t1): the stall is counted to w0.
            tr.longest_stall = tr.longest_stall.max(w0.saturating_sub(s));
        }
        let _ = tr.stall_run;
        obs.push(Obs {
            tr: i,
            waited,
            ran: ran + std::mem::take(&mut tr.carry),
            pieces: 1 + slices.unwrap_or(dv + di).min(8),
            core,
            runnable,
            finish,
            involuntary: di > 0 || (runnable && slices.is_some_and(|n| n > 0)),
        });
    }
    obs
}

/// Processes that ended: their threads still held finish now, and the process's end.
fn ended_processes(
    tracks: &mut [Track],
    procs: &mut [Option<Proc>],
    events: &mut Vec<Event>,
    t1: u64,
) {
    for (p, slot) in procs.iter_mut().enumerate() {
        let Some(pr) = slot.as_mut() else { continue };
        if pr.end_ns.is_some() {
            continue;
        }
        let done = match &mut pr.body {
            Body::Builtin(r) => r.all_finished(),
            Body::Command { pid, exit } => {
                if exit.is_none() {
                    *exit = spawn::try_wait(*pid);
                }
                exit.is_some()
            }
        };
        if done {
            // Threads of an ended command that the sampler still holds finish now.
            for tr in tracks.iter_mut().filter(|t| t.process == p && !t.finished) {
                tr.leave_core(events, Nanos(t1), Reason::Finished);
                events.push(Event::Finish {
                    t: Nanos(t1),
                    slot: tr.slot,
                });
                tr.finished = true;
            }
            pr.end_ns = Some(
                tracks
                    .iter()
                    .filter(|t| t.process == p)
                    .filter_map(|t| t.shared.as_ref())
                    .map(|s| s.finished_at.load(Ordering::Relaxed))
                    .max()
                    .unwrap_or(t1),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_threads_are_read_every_second_sample_and_sleepers_every_fourth() {
        // A thread that ran (or is new) is read every sample.
        assert!((0..8).all(|turn| due(0, 0, turn)));
        // Waiting for a CPU since the last reading: every second sample, staggered by slot
        // (turn = sample + slot), so that half of the waiting threads are read each time.
        let waiting: Vec<u64> = (0..8).filter(|&t| due(0, 1, t)).collect();
        assert_eq!(waiting, [0, 2, 4, 6]);
        assert_eq!((0..8).filter(|&t| due(0, 1, t + 1)).count(), 4);
        // Asleep: every fourth, whatever it was before it slept.
        let asleep: Vec<u64> = (0..8).filter(|&t| due(IDLE_SAMPLES, 0, t)).collect();
        assert_eq!(asleep, [0, 4]);
    }

    #[test]
    fn the_sample_period_grows_to_the_budget_within_its_bounds() {
        // 100 us per sample against 1 % of a core: 10 ms, the SPEC's bound.
        let mut p = SamplePeriod::new(
            Duration::from_millis(2),
            Duration::from_nanos(MAX_SAMPLE_NS),
            Some(0.01),
        );
        p.record(100_000);
        assert_eq!(p.period, MAX_SAMPLE_NS);
        // 40 us per sample (EWMA 1/4 from 100): 85 us, then down towards 4 ms.
        for _ in 0..40 {
            p.record(40_000);
        }
        assert!((4_000_000..4_100_000).contains(&p.period), "{}", p.period);
        // Cheap samples never go below the requested period.
        for _ in 0..40 {
            p.record(1_000);
        }
        assert_eq!(p.period, 2_000_000);
        assert_eq!(
            (p.report.min_period_ns, p.report.max_period_ns),
            (2_000_000, MAX_SAMPLE_NS)
        );
        assert_eq!(p.report.samples, 81);
        // Without a budget the period is fixed.
        let mut f = SamplePeriod::new(Duration::from_millis(5), Duration::from_millis(5), None);
        f.record(10_000_000);
        assert_eq!(f.period, 5_000_000);
    }
}
