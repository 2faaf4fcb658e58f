//! `schedkit experiment fibers-gauss`: seed 003's experiment. Blocked parallel Gaussian
//! elimination (no pivoting; the matrix is diagonally dominant, so none is needed) solving
//! Ax = b with T user threads, in the paper's two data distributions, under the scheduler
//! architectures A0, A1, A2 and, as an outside peer, the `may` crate's coroutines:
//!
//! - **Method 1**: thread t owns a block of consecutive rows. Forward: for each pivot row k it
//!   waits for the manual-reset event "row k is final" (set by the owner of row k once all
//!   earlier pivots are applied to it) and eliminates column k from its rows. Backward: it
//!   waits for "x[j] is known" for every j below its block, accumulating, then solves its rows
//!   bottom up and sets their events. Needs size >= threads.
//! - **Method 2**: thread (I, J) owns a 2-D tile (row block I, column block J of the augmented
//!   matrix [A | b]; the grid R x C = T is the most square factorisation). Forward step k:
//!   the tile holding row k's segment publishes it ("row k, block J final"); the tile of column
//!   block of k computes the multipliers of its rows ("multipliers k, block I ready"); every
//!   other tile waits for both and updates. Backward: tiles right of the diagonal accumulate
//!   partial sums of their rows as x values appear and publish them per tile; diagonal tiles
//!   wait for the partial sums to their right and solve.
//!
//! The forward elimination and the back substitution are timed apart (each phase spawns its T
//! user threads and joins them, so thread creation is inside the phase, as in the paper's
//! per-phase times). Every run checks the residual ||Ax - b|| / ||b|| against the original
//! system. Times are medians over `repeat` runs.
//!
//! [`run`] returns the measured rows; [`render`] has the tables and the chart; the solver and
//! its threading back ends are in [`solve`]. The `may` peer needs this crate's `may` feature
//! (a comparison peer the shipped binary does not carry unless built with it).

pub mod render;
pub mod solve;

use crate::progress::Progress;
use crate::stats::median;
use crate::Error;
use schedkit_runtime::{Arch, Config, Runtime, Stats};
use serde::Serialize;
use solve::{grid, solve, SkBackend, System};
use std::sync::Arc;

/// The paper's thread counts.
pub const PAPER_THREADS: [usize; 6] = [32, 128, 496, 992, 3968, 7936];

/// What to run (`None`: the default, which depends on `quick`).
#[derive(Debug, Clone, Default)]
pub struct FibersOptions {
    /// CI-sized run: size 256, threads 32,128,496, 1 repeat (unless given).
    pub quick: bool,
    /// Architectures: A0, A1, A2, may.
    pub arch: Vec<String>,
    /// Methods: 1 (rows per thread), 2 (2-D tiles).
    pub method: Vec<u8>,
    /// User-thread counts (default: the paper's 32,128,496,992,3968,7936).
    pub threads: Option<Vec<usize>>,
    /// Matrix size n (default 1024; 256 with `quick`). Method 1 needs n >= threads.
    pub size: Option<usize>,
    /// Runs per cell; rows are medians (default 3; 1 with `quick`).
    pub repeat: Option<usize>,
    /// Scheduler threads for A1, A2 and may (default: the CPUs this process may use).
    pub workers: Option<usize>,
    /// Seed of the random system.
    pub seed: u64,
    /// Also read the scheduler's counters per phase for A1 and A2.
    pub counters: bool,
}

/// One measured cell (medians over the repeats).
#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub method: u8,
    pub arch: String,
    pub threads: usize,
    pub size: usize,
    pub forward_s: f64,
    pub backward_s: f64,
    pub total_s: f64,
    pub residual: f64,
}

/// One architecture's scheduler counters in one phase of one cell (mean per run).
#[derive(Clone, Debug)]
pub struct CounterRow {
    pub method: u8,
    pub threads: usize,
    pub arch: String,
    pub phase: &'static str,
    pub stats: Stats,
}

/// Every cell's row, the counters (with `counters`), the cells that did not fit, and the
/// parameters after the defaults.
#[derive(Clone, Debug)]
pub struct FibersResult {
    pub rows: Vec<Row>,
    pub counters: Vec<CounterRow>,
    pub skipped: Vec<String>,
    pub size: usize,
    pub workers: usize,
    pub repeat: usize,
    /// Where the run is not what a reader would assume (fewer CPUs than the machine has).
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Peer {
    Arch(Arch),
    May,
}

impl Peer {
    fn name(self) -> String {
        match self {
            Peer::Arch(a) => a.name().to_string(),
            Peer::May => "may".to_string(),
        }
    }
}

/// Runs every cell `repeat` times and checks every solution; one progress step per run.
pub fn run(a: &FibersOptions, progress: &dyn Progress) -> Result<FibersResult, Error> {
    let Plan {
        size,
        repeat,
        threads,
        peers,
    } = plan(a)?;
    let (workers, warnings) = workers_for(a.workers)?;
    let (cells, skipped) = cells(&a.method, &threads, &peers, size);
    let sys = Arc::new(System::random(size, a.seed));
    let runtimes = start_runtimes(&peers, workers)?;
    progress.start((cells.len() * repeat) as u64);
    let mut rows = Vec::new();
    let mut counters = Vec::new();
    for &cell in &cells {
        let (row, cnt) = run_cell(a, cell, (&sys, size, repeat), &runtimes, progress)?;
        let (m, t, p) = cell;
        if a.counters && matches!(p, Peer::Arch(x) if x != Arch::A0) {
            for (phase, c) in ["forward", "backward"].iter().zip(cnt) {
                counters.push(CounterRow {
                    method: m,
                    threads: t,
                    arch: p.name(),
                    phase,
                    stats: c.zip(c, |x, _| x / repeat as u64),
                });
            }
        }
        rows.push(row);
    }
    progress.finish();
    drop(runtimes);
    Ok(FibersResult {
        rows,
        counters,
        skipped,
        size,
        workers,
        repeat,
        warnings,
    })
}

/// The options with their defaults applied and checked.
struct Plan {
    size: usize,
    repeat: usize,
    threads: Vec<usize>,
    peers: Vec<Peer>,
}

/// Applies the defaults (`--quick` or the paper's) and refuses what cannot run.
fn plan(a: &FibersOptions) -> Result<Plan, Error> {
    let size = a.size.unwrap_or(if a.quick { 256 } else { 1024 });
    let repeat = a.repeat.unwrap_or(if a.quick { 1 } else { 3 });
    let threads = a.threads.clone().unwrap_or_else(|| {
        if a.quick {
            vec![32, 128, 496]
        } else {
            PAPER_THREADS.to_vec()
        }
    });
    if size < 2 {
        return Err(Error::BadInput(format!(
            "--size: {size} is too small (at least 2)"
        )));
    }
    if repeat == 0 {
        return Err(Error::BadInput("--repeat: must be at least 1".into()));
    }
    if let Some(t) = threads.iter().find(|&&t| t == 0) {
        return Err(Error::BadInput(format!(
            "--threads: {t} is not a thread count"
        )));
    }
    let mut peers = Vec::new();
    for s in &a.arch {
        let p = if s.eq_ignore_ascii_case("may") {
            if cfg!(not(feature = "may")) {
                return Err(Error::BadInput(
                    "--arch may: this schedkit is built without the `may` peer (feature `may`)"
                        .into(),
                ));
            }
            Peer::May
        } else {
            Peer::Arch(Arch::parse(s).ok_or_else(|| {
                Error::BadInput(format!(
                    "--arch: unknown architecture '{s}' (A0, A1, A2, may)"
                ))
            })?)
        };
        if !peers.contains(&p) {
            peers.push(p);
        }
    }
    for &m in &a.method {
        if m != 1 && m != 2 {
            return Err(Error::BadInput(format!(
                "--method: unknown method {m} (1 or 2)"
            )));
        }
    }
    Ok(Plan {
        size,
        repeat,
        threads,
        peers,
    })
}

/// One cell: a method, a thread count and a peer.
type Cell = (u8, usize, Peer);

/// The cells to run, and in words those the system is too small for: Method 1 needs a row
/// per thread, Method 2 a row and a column per tile.
fn cells(
    methods: &[u8],
    threads: &[usize],
    peers: &[Peer],
    size: usize,
) -> (Vec<Cell>, Vec<String>) {
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    for &m in methods {
        for &t in threads {
            let ok = match m {
                1 => t <= size,
                _ => {
                    let (r, c) = grid(t);
                    r <= size && c <= size
                }
            };
            if ok {
                for &p in peers {
                    cells.push((m, t, p));
                }
            } else {
                skipped.push(format!(
                    "method {m} with {t} threads needs a larger --size than {size}"
                ));
            }
        }
    }
    (cells, skipped)
}

/// One fiber runtime per architecture asked for (and `may`'s workers, where it runs).
fn start_runtimes(peers: &[Peer], workers: usize) -> Result<Vec<(Arch, Runtime)>, Error> {
    let runtimes = peers
        .iter()
        .filter_map(|p| match p {
            Peer::Arch(arch) => Some(*arch),
            Peer::May => None,
        })
        .map(|arch| {
            let mut c = Config::new(arch);
            c.workers = workers;
            Runtime::new(c).map(|r| (arch, r))
        })
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::io("starting the fiber runtimes", e))?;
    #[cfg(feature = "may")]
    if peers.contains(&Peer::May) {
        may::config().set_workers(workers).set_stack_size(8 * 1024);
    }
    Ok(runtimes)
}

/// A cell's `repeat` solves: its row (median times, worst residual) and the counters of its
/// forward and backward phases summed over the repeats. A residual of 1e-8 or more is a
/// wrong solve, not a slow one, and fails the experiment.
fn run_cell(
    a: &FibersOptions,
    (m, t, p): Cell,
    (sys, size, repeat): (&Arc<System>, usize, usize),
    runtimes: &[(Arch, Runtime)],
    progress: &dyn Progress,
) -> Result<(Row, [Stats; 2]), Error> {
    let mut fw = Vec::new();
    let mut bw = Vec::new();
    let mut worst = 0.0f64;
    let mut cnt = [Stats::default(); 2];
    for _ in 0..repeat {
        progress.message(&format!("method {m}, {} threads, {}", t, p.name()));
        let (f, b, res) = match p {
            Peer::Arch(arch) => {
                let rt = &runtimes.iter().find(|(x, _)| *x == arch).unwrap().1;
                solve(&SkBackend(rt, a.counters), sys, m, t)
            }
            #[cfg(feature = "may")]
            Peer::May => solve(&solve::MayBackend, sys, m, t),
            #[cfg(not(feature = "may"))]
            Peer::May => unreachable!("refused when the options were read"),
        }
        .map_err(|e| Error::Failed(format!("method {m}, {t} threads, {}: {e}", p.name())))?;
        if res.is_nan() || res >= 1e-8 {
            return Err(Error::Failed(format!(
                "method {m}, {t} threads, {}: residual {res:e} is too large: the solve is wrong",
                p.name()
            )));
        }
        worst = worst.max(res);
        for (c, ph) in cnt.iter_mut().zip([&f, &b]) {
            if let Some(s) = ph.stats {
                *c = *c + s;
            }
        }
        fw.push(f.secs);
        bw.push(b.secs);
        progress.step();
    }
    let (f, b) = (median(&fw), median(&bw));
    let row = Row {
        method: m,
        arch: p.name(),
        threads: t,
        size,
        forward_s: f,
        backward_s: b,
        total_s: f + b,
        residual: worst,
    };
    Ok((row, cnt))
}

/// The scheduler-thread count and what to warn about. Each scheduler thread is pinned to its
/// own allowed CPU, so more threads than allowed CPUs would share CPUs and time something
/// else than the experiment: `--workers` above the allowed count is refused. Without
/// `--workers` the count is the allowed CPUs, and a narrowed affinity (a taskset, or a
/// cgroup's cpuset, perhaps from another run) is warned about: it once made a run use one
/// scheduler thread without a word.
pub fn workers_for(asked: Option<usize>) -> Result<(usize, Vec<String>), Error> {
    let (allowed, online) = crate::machine::allowed_cpus();
    let n = allowed.len().max(1);
    let workers = match asked {
        Some(w) if w == 0 || w > 64 => {
            return Err(Error::BadInput(format!(
                "--workers: {w} is out of range 1..=64"
            )))
        }
        Some(w) if w > n => {
            return Err(Error::BadInput(format!(
                "--workers {w}: this process may use only {n} CPU(s) ({}) of the {online} online \
                 (its CPU affinity: a taskset, or a cpuset of its cgroup); give --workers {n} \
                 or widen the affinity",
                allowed.to_list(),
            )))
        }
        Some(w) => w,
        None => n,
    };
    let warnings = if asked.is_none() {
        crate::machine::narrowed_warning(&format!("{n} scheduler thread(s)"))
            .into_iter()
            .collect()
    } else {
        Vec::new()
    };
    Ok((workers, warnings))
}

#[cfg(test)]
mod tests {
    /// More scheduler threads than allowed CPUs is refused as bad input; the default is the
    /// allowed count (whatever this test's affinity is).
    #[test]
    fn workers_above_the_allowed_cpus_are_refused() {
        let n = crate::machine::allowed_cpus().0.len().max(1);
        let e = super::workers_for(Some(n + 1)).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(e.to_string().contains("--workers"), "{e}");
        assert_eq!(super::workers_for(Some(n)).unwrap().0, n);
        assert_eq!(super::workers_for(None).unwrap().0, n);
    }
}
