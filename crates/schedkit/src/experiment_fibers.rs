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
//! system. Times are medians over `--repeat` runs.

use crate::output::table;
use schedkit_experiments::stats::median;
use std::cell::UnsafeCell;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use comfy_table::Table;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedkit_runtime::{Arch, Config, Event, EventKind, Runtime, Stats};
use serde::Serialize;

use crate::failure::{Failure, EXIT_BAD_INPUT};
use schedkit_render::chart::{side_by_side, Axis, Chart, LineChart, Series};

/// The paper's thread counts.
pub const PAPER_THREADS: [usize; 6] = [32, 128, 496, 992, 3968, 7936];

#[derive(Args, Debug, Clone)]
pub struct FibersGaussArgs {
    /// CI-sized run: size 256, threads 32,128,496, 1 repeat (unless given).
    #[arg(long)]
    pub quick: bool,
    /// Architectures, comma-separated: A0, A1, A2, may.
    #[arg(long, value_delimiter = ',', default_value = "A0,A1,A2,may")]
    pub arch: Vec<String>,
    /// Methods, comma-separated: 1 (rows per thread), 2 (2-D tiles).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub method: Vec<u8>,
    /// User-thread counts, comma-separated (default: the paper's 32,128,496,992,3968,7936).
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<usize>>,
    /// Matrix size n (default 1024; 256 with --quick). Method 1 needs n >= threads.
    #[arg(long)]
    pub size: Option<usize>,
    /// Runs per cell; the table shows medians (default 3; 1 with --quick).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Scheduler threads for A1, A2 and may (default: the CPUs this process may use).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Seed of the random system.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print {"rows": [...]} as JSON instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Also print the scheduler's counters per phase (blocks, wake-ups, cross-ST hand-overs,
    /// steals, slot runs, parks; per run, summed over the STs) for A1 and A2.
    #[arg(long)]
    pub counters: bool,
    /// Where to write the chart of time against thread count.
    #[arg(long, value_name = "FILE.svg", default_value = "fibers-gauss.svg")]
    pub svg: PathBuf,
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

fn bad(msg: String) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: msg,
    }
}

pub fn run(a: FibersGaussArgs) -> Result<(), Failure> {
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
        return Err(bad(format!("--size: {size} is too small (at least 2)")));
    }
    if repeat == 0 {
        return Err(bad("--repeat: must be at least 1".into()));
    }
    if let Some(t) = threads.iter().find(|&&t| t == 0) {
        return Err(bad(format!("--threads: {t} is not a thread count")));
    }
    let mut peers = Vec::new();
    for s in &a.arch {
        let p = if s.eq_ignore_ascii_case("may") {
            Peer::May
        } else {
            Peer::Arch(Arch::parse(s).ok_or_else(|| {
                bad(format!(
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
            return Err(bad(format!("--method: unknown method {m} (1 or 2)")));
        }
    }
    let workers = a.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if workers == 0 || workers > 64 {
        return Err(bad(format!("--workers: {workers} is out of range 1..=64")));
    }

    // Cells to run; Method 1 needs a row per thread, Method 2 a row and a column per tile.
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    for &m in &a.method {
        for &t in &threads {
            let ok = match m {
                1 => t <= size,
                _ => {
                    let (r, c) = grid(t);
                    r <= size && c <= size
                }
            };
            if ok {
                for &p in &peers {
                    cells.push((m, t, p));
                }
            } else {
                skipped.push(format!(
                    "method {m} with {t} threads needs a larger --size than {size}"
                ));
            }
        }
    }

    let sys = Arc::new(System::random(size, a.seed));
    let runtimes: Vec<(Arch, Runtime)> = peers
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
        .context("starting the fiber runtimes")?;
    if peers.contains(&Peer::May) {
        may::config().set_workers(workers).set_stack_size(8 * 1024);
    }

    let bar = ProgressBar::new((cells.len() * repeat) as u64);
    if a.json || !std::io::stdout().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]")
            .unwrap(),
    );
    let mut rows = Vec::new();
    let mut counters = Vec::new();
    for &(m, t, p) in &cells {
        let mut fw = Vec::new();
        let mut bw = Vec::new();
        let mut worst = 0.0f64;
        let mut cnt = [Stats::default(); 2];
        for _ in 0..repeat {
            bar.set_message(format!("method {m}, {} threads, {}", t, p.name()));
            let (f, b, res) = match p {
                Peer::Arch(arch) => {
                    let rt = &runtimes.iter().find(|(x, _)| *x == arch).unwrap().1;
                    solve(&SkBackend(rt, a.counters), &sys, m, t)
                }
                Peer::May => solve(&MayBackend, &sys, m, t),
            }
            .map_err(|e| {
                Failure::from(e.context(format!("method {m}, {t} threads, {}", p.name())))
            })?;
            if res.is_nan() || res >= 1e-8 {
                return Err(Failure::from(anyhow::anyhow!(
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
            bar.inc(1);
        }
        let (f, b) = (median(&fw), median(&bw));
        if a.counters && matches!(p, Peer::Arch(x) if x != Arch::A0) {
            for (phase, c) in ["forward", "backward"].iter().zip(cnt) {
                counters.push((m, t, p.name(), *phase, c.zip(c, |x, _| x / repeat as u64)));
            }
        }
        rows.push(Row {
            method: m,
            arch: p.name(),
            threads: t,
            size,
            forward_s: f,
            backward_s: b,
            total_s: f + b,
            residual: worst,
        });
    }
    bar.finish_and_clear();
    drop(runtimes);

    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "rows": rows })).unwrap()
        );
    } else {
        println!(
            "Blocked Gaussian elimination, n = {size}, {workers} scheduler threads, median of {repeat} run(s)\n"
        );
        println!("{}\n", times_table(&rows));
        if let Some(t) = speedup_table(&rows) {
            println!(
                "Speed-up in % ((t_old / t_new - 1) x 100), per phase, as in seed 003 figures 3 and 5:\n"
            );
            println!("{t}\n");
        }
        if !counters.is_empty() {
            println!("Scheduler counters per run (mean over the repeats, summed over the STs):\n");
            println!("{}\n", counters_table(&counters));
        }
        for s in &skipped {
            println!("skipped: {s}");
        }
    }
    if !rows.is_empty() {
        let svg = chart(&rows, size);
        std::fs::write(&a.svg, svg).with_context(|| format!("writing {}", a.svg.display()))?;
        eprintln!("chart: {}", a.svg.display());
    }
    Ok(())
}

/// The most square R x C = t grid with R <= C.
fn grid(t: usize) -> (usize, usize) {
    let mut r = (t as f64).sqrt() as usize;
    while r > 1 && !t.is_multiple_of(r) {
        r -= 1;
    }
    (r.max(1), t / r.max(1))
}

/// Splits `len` items into `parts` near-equal consecutive blocks: the start of block `i`.
fn split(len: usize, parts: usize, i: usize) -> usize {
    i * len / parts
}

/// The system to solve: a dense, diagonally dominant random matrix and right-hand side.
pub struct System {
    pub n: usize,
    /// Row-major n x n.
    pub a: Vec<f64>,
    pub b: Vec<f64>,
}

impl System {
    pub fn random(n: usize, seed: u64) -> System {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            let mut sum = 0.0;
            for j in 0..n {
                if i != j {
                    let v: f64 = rng.gen_range(-1.0..1.0);
                    a[i * n + j] = v;
                    sum += v.abs();
                }
            }
            a[i * n + i] = sum + 1.0;
        }
        let b = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
        System { n, a, b }
    }

    /// ||Ax - b|| / ||b||.
    pub fn residual(&self, x: &[f64]) -> f64 {
        let n = self.n;
        let mut r2 = 0.0;
        let mut b2 = 0.0;
        for i in 0..n {
            let row = &self.a[i * n..(i + 1) * n];
            let ax: f64 = row.iter().zip(x).map(|(a, x)| a * x).sum();
            r2 += (ax - self.b[i]).powi(2);
            b2 += self.b[i] * self.b[i];
        }
        (r2 / b2).sqrt()
    }
}

/// What the solver needs from a threading system: manual-reset events and "run these user
/// threads to completion".
pub trait Backend {
    type Ev: Send + Sync + 'static;
    fn event(&self) -> Self::Ev;
    fn wait(e: &Self::Ev);
    fn set(e: &Self::Ev);
    /// `group(i)` is user thread i's placement group ([`schedkit_runtime::Handle::spawn_near`]):
    /// threads that share data get the same group.
    fn run_all(&self, jobs: Vec<Job>, group: &dyn Fn(usize) -> usize) -> anyhow::Result<()>;
    /// The scheduler's counters so far, where it keeps them.
    fn stats(&self) -> Option<Stats> {
        None
    }
}

/// A schedkit runtime; with `counters`, each phase also reads the scheduler's counters (and
/// pauses 1 ms after it so that the STs' last updates land: the next phase then starts on
/// parked STs, so timings taken with `--counters` are not comparable with those without).
struct SkBackend<'a>(&'a Runtime, bool);

impl Backend for SkBackend<'_> {
    type Ev = Event;
    fn event(&self) -> Event {
        Event::new(self.0.handle(), EventKind::ManualReset, false)
    }
    fn wait(e: &Event) {
        e.wait();
    }
    fn set(e: &Event) {
        e.set();
    }
    fn run_all(&self, jobs: Vec<Job>, group: &dyn Fn(usize) -> usize) -> anyhow::Result<()> {
        let hs: Vec<_> = jobs
            .into_iter()
            .enumerate()
            .map(|(i, j)| self.0.handle().spawn_near(group(i), j))
            .collect();
        for h in hs {
            h.join()
                .map_err(|e| anyhow::anyhow!("a user thread failed: {e}"))?;
        }
        Ok(())
    }
    fn stats(&self) -> Option<Stats> {
        (self.1 && self.0.arch() != Arch::A0).then(|| self.0.handle().stats())
    }
}

struct MayBackend;

impl Backend for MayBackend {
    type Ev = may::sync::SyncFlag;
    fn event(&self) -> Self::Ev {
        may::sync::SyncFlag::new()
    }
    fn wait(e: &Self::Ev) {
        e.wait();
    }
    fn set(e: &Self::Ev) {
        e.fire();
    }
    fn run_all(&self, jobs: Vec<Job>, _group: &dyn Fn(usize) -> usize) -> anyhow::Result<()> {
        let hs: Vec<_> = jobs
            .into_iter()
            // SAFETY: may requires that coroutines do not hold thread-local references across
            // blocking calls; the solver's code uses none.
            .map(|j| unsafe { may::coroutine::spawn(j) })
            .collect();
        for h in hs {
            h.join()
                .map_err(|_| anyhow::anyhow!("a may coroutine panicked"))?;
        }
        Ok(())
    }
}

/// Doubles per cache line (64 bytes).
const LINE: usize = 8;

/// One cache line of doubles, so that shared arrays start on a line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f64; LINE]);

/// Memory shared by the user threads; the event protocol guarantees that no element is
/// written by one thread while another reads or writes it. It starts on a cache line, and
/// the matrix's rows are padded to whole lines ([`stride`]), so that threads writing
/// different rows or tiles never write the same line (false sharing would make a
/// distribution that runs neighbours side by side pay for their layout, not their scheduling).
struct Shared {
    lines: UnsafeCell<Vec<Line>>,
    len: usize,
}
// SAFETY: see above; every cross-thread access is ordered by an event.
unsafe impl Sync for Shared {}
impl Shared {
    fn new(v: &[f64]) -> Shared {
        let mut lines = vec![Line([0.0; LINE]); v.len().div_ceil(LINE)];
        for (i, &e) in v.iter().enumerate() {
            lines[i / LINE].0[i % LINE] = e;
        }
        Shared {
            lines: UnsafeCell::new(lines),
            len: v.len(),
        }
    }
    #[inline]
    #[allow(clippy::mut_from_ref)]
    fn get(&self) -> &mut [f64] {
        // SAFETY: see the type's comment; `Line` is `LINE` doubles with no padding, so the
        // lines are `len` (or more) contiguous doubles.
        unsafe {
            let v = &mut *self.lines.get();
            std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<f64>(), self.len)
        }
    }
}

/// The row stride of the augmented n x (n + 1) matrix: n + 1 rounded up to whole cache lines.
fn stride(n: usize) -> usize {
    (n + 1).next_multiple_of(LINE)
}

/// One timed phase: seconds, and the scheduler's counters for it (schedkit runtimes only).
struct Phase {
    secs: f64,
    stats: Option<Stats>,
}

/// One user thread of a phase.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs one phase's user threads to completion, timing them.
fn timed<B: Backend>(
    be: &B,
    jobs: Vec<Job>,
    group: &dyn Fn(usize) -> usize,
) -> anyhow::Result<Phase> {
    let before = be.stats();
    let t0 = Instant::now();
    be.run_all(jobs, group)?;
    let secs = t0.elapsed().as_secs_f64();
    // The STs update their counters after the last join returns; a short wait lets them settle
    // (only with --counters: see `SkBackend`).
    let stats = before.map(|b| {
        // Idle time up to the end of the phase, not including the settling pause.
        let at_end = be.stats().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1));
        Stats {
            idle_ns: at_end.idle_ns.saturating_sub(b.idle_ns),
            ..be.stats().unwrap() - b
        }
    });
    Ok(Phase { secs, stats })
}

/// Solves `sys` with method `m` and `t` user threads; returns (forward, backward, residual).
fn solve<B: Backend>(be: &B, sys: &System, m: u8, t: usize) -> anyhow::Result<(Phase, Phase, f64)> {
    let n = sys.n;
    let w = stride(n);
    let mut aug = vec![0.0; n * w];
    for i in 0..n {
        aug[i * w..i * w + n].copy_from_slice(&sys.a[i * n..(i + 1) * n]);
        aug[i * w + n] = sys.b[i];
    }
    let a = Arc::new(Shared::new(&aug));
    let x = Arc::new(Shared::new(&vec![0.0; n]));
    let (f, b) = match m {
        1 => method1(be, &a, &x, n, t)?,
        _ => method2(be, &a, &x, n, t)?,
    };
    let res = sys.residual(x.get());
    Ok((f, b, res))
}

fn method1<B: Backend>(
    be: &B,
    a: &Arc<Shared>,
    x: &Arc<Shared>,
    n: usize,
    t: usize,
) -> anyhow::Result<(Phase, Phase)> {
    let w = stride(n);
    let row_ready: Arc<Vec<B::Ev>> = Arc::new((0..n).map(|_| be.event()).collect());
    let jobs: Vec<Job> = (0..t)
        .map(|th| {
            let (a, ev) = (a.clone(), row_ready.clone());
            Box::new(move || {
                let (lo, hi) = (split(n, t, th), split(n, t, th + 1));
                let a = a.get();
                for k in 0..hi {
                    let first = if k < lo {
                        B::wait(&ev[k]);
                        lo
                    } else {
                        // Row k is ours and final: publish it, then use it on the rows below.
                        B::set(&ev[k]);
                        k + 1
                    };
                    let (top, rest) = a.split_at_mut((k + 1) * w);
                    let pivot = &top[k * w..];
                    let pkk = pivot[k];
                    for i in first..hi {
                        let row = &mut rest[(i - k - 1) * w..(i - k) * w];
                        let f = row[k] / pkk;
                        row[k] = 0.0;
                        for j in k + 1..w {
                            row[j] -= f * pivot[j];
                        }
                    }
                }
            }) as Job
        })
        .collect();
    let fw = timed(be, jobs, &|id| id)?;

    let x_ready: Arc<Vec<B::Ev>> = Arc::new((0..n).map(|_| be.event()).collect());
    let jobs: Vec<Job> = (0..t)
        .map(|th| {
            let (a, x, ev) = (a.clone(), x.clone(), x_ready.clone());
            Box::new(move || {
                let (lo, hi) = (split(n, t, th), split(n, t, th + 1));
                if lo == hi {
                    return;
                }
                let (a, x) = (a.get(), x.get());
                let mut acc: Vec<f64> = (lo..hi).map(|i| a[i * w + n]).collect();
                for j in (hi..n).rev() {
                    B::wait(&ev[j]);
                    let xj = x[j];
                    for i in lo..hi {
                        acc[i - lo] -= a[i * w + j] * xj;
                    }
                }
                for i in (lo..hi).rev() {
                    let mut s = acc[i - lo];
                    for j in i + 1..hi {
                        s -= a[i * w + j] * x[j];
                    }
                    x[i] = s / a[i * w + i];
                    B::set(&ev[i]);
                }
            }) as Job
        })
        .collect();
    Ok((fw, timed(be, jobs, &|id| id)?))
}

/// Tile geometry of method 2 over the augmented n x (n+1) matrix.
#[derive(Clone, Copy)]
struct Tiles {
    n: usize,
    r: usize,
    c: usize,
}

impl Tiles {
    fn rows(&self, i: usize) -> (usize, usize) {
        (split(self.n, self.r, i), split(self.n, self.r, i + 1))
    }
    /// Column block `j`: whole cache lines of the padded rows where there are at least as
    /// many lines as column blocks (so that no two tiles write one line), else single columns.
    fn cols(&self, j: usize) -> (usize, usize) {
        let cols = self.n + 1;
        let unit = if cols.div_ceil(LINE) >= self.c {
            LINE
        } else {
            1
        };
        let units = cols.div_ceil(unit);
        let at = |j: usize| (split(units, self.c, j) * unit).min(cols);
        (at(j), at(j + 1))
    }
}

fn method2<B: Backend>(
    be: &B,
    a: &Arc<Shared>,
    x: &Arc<Shared>,
    n: usize,
    t: usize,
) -> anyhow::Result<(Phase, Phase)> {
    let w = stride(n);
    let (r, c) = grid(t);
    let g = Tiles { n, r, c };
    // Tiles start on the STs (the same placement for A1 and A2) by pairs of adjacent column
    // blocks taken in a snake: block 0 alone, then 1-2, 3-4, ..., the groups alternating
    // between the STs. The tiles of a column block pass row k's segment down at every pivot
    // step, and a pair keeps the column right of a pivot column (the next pivot's) on the
    // same core half the time; the offset of one balances the work, which grows to the
    // right (4 x 8 tiles on 2 STs: 51 / 49 % of the flops, against 59 / 41 % for pairs
    // from block 0 and 55 / 45 % for single blocks). Round robin would lay a grid with an
    // odd column count out as a chessboard, every neighbour on the other core, which A2 (it
    // seldom steals) keeps for the whole solve (docs/fibers.md, "Placement").
    let by_column_snake = |id: usize| (id % c).div_ceil(2);
    // seg[k * c + J]: row k's segment in column block J is final.
    // mult[k * r + I]: the multipliers of pivot k for row block I are stored in column k.
    let seg: Arc<Vec<B::Ev>> = Arc::new((0..n * c).map(|_| be.event()).collect());
    let mult: Arc<Vec<B::Ev>> = Arc::new((0..n * r).map(|_| be.event()).collect());
    let jobs: Vec<Job> = (0..t)
        .map(|id| {
            let (a, seg, mult) = (a.clone(), seg.clone(), mult.clone());
            Box::new(move || {
                let (bi, bj) = (id / c, id % c);
                let (r0, r1) = g.rows(bi);
                let (c0, c1) = g.cols(bj);
                let a = a.get();
                for k in 0..n {
                    if k >= r0 && k < r1 && c1 > k {
                        // Row k has every earlier pivot applied in this tile: publish.
                        B::set(&seg[k * c + bj]);
                    }
                    let i0 = r0.max(k + 1);
                    if i0 >= r1 {
                        // No rows below the pivot here, now or later.
                        break;
                    }
                    let j0 = c0.max(k + 1);
                    let holds_k = c0 <= k && k < c1;
                    if !holds_k && j0 >= c1 {
                        continue;
                    }
                    // Row k's segment over our columns (and, in the tile holding column k,
                    // the pivot itself).
                    B::wait(&seg[k * c + bj]);
                    if holds_k {
                        let pkk = a[k * w + k];
                        for i in i0..r1 {
                            a[i * w + k] /= pkk;
                        }
                        B::set(&mult[k * r + bi]);
                    } else {
                        B::wait(&mult[k * r + bi]);
                    }
                    for i in i0..r1 {
                        let f = a[i * w + k];
                        for j in j0..c1 {
                            a[i * w + j] -= f * a[k * w + j];
                        }
                    }
                }
            }) as Job
        })
        .collect();
    let fw = timed(be, jobs, &by_column_snake)?;

    // Backward. x_ready[j]: x[j] is known. part_ready[I * c + J]: tile (I, J)'s partial sums
    // (over its columns, for its rows left of the block) are in partial[tile].
    let x_ready: Arc<Vec<B::Ev>> = Arc::new((0..n).map(|_| be.event()).collect());
    let part_ready: Arc<Vec<B::Ev>> = Arc::new((0..t).map(|_| be.event()).collect());
    let partial: Arc<Vec<Shared>> = Arc::new(
        (0..t)
            .map(|id| {
                let (r0, r1) = g.rows(id / c);
                Shared::new(&vec![0.0; r1 - r0])
            })
            .collect(),
    );
    let jobs: Vec<Job> = (0..t)
        .map(|id| {
            let (a, x, xr, pr, partial) = (
                a.clone(),
                x.clone(),
                x_ready.clone(),
                part_ready.clone(),
                partial.clone(),
            );
            Box::new(move || {
                let (bi, bj) = (id / c, id % c);
                let (r0, r1) = g.rows(bi);
                let (c0, c1) = g.cols(bj);
                let cx1 = c1.min(n); // x columns of this tile (column n is b)
                let (a, x) = (a.get(), x.get());
                // 1. Rows whose diagonal lies in this tile: wait for the partial sums of the
                //    tiles to the right, then solve bottom up.
                let s0 = r0.max(c0);
                let s1 = r1.min(cx1);
                if s0 < s1 {
                    let mut acc: Vec<f64> = (s0..s1).map(|i| a[i * w + n]).collect();
                    for jb in bj + 1..c {
                        if g.cols(jb).0 >= n {
                            continue;
                        }
                        B::wait(&pr[bi * c + jb]);
                        let p = partial[bi * c + jb].get();
                        for i in s0..s1 {
                            acc[i - s0] -= p[i - r0];
                        }
                    }
                    for i in (s0..s1).rev() {
                        let mut s = acc[i - s0];
                        for j in i + 1..cx1 {
                            if j >= r1 {
                                B::wait(&xr[j]);
                            }
                            s -= a[i * w + j] * x[j];
                        }
                        x[i] = s / a[i * w + i];
                        B::set(&xr[i]);
                    }
                }
                // 2. Rows left of this tile's columns: contribute their partial sums.
                let p1 = r1.min(c0);
                if r0 < p1 && c0 < cx1 {
                    let p = partial[id].get();
                    for j in (c0..cx1).rev() {
                        B::wait(&xr[j]);
                        let xj = x[j];
                        for i in r0..p1 {
                            p[i - r0] += a[i * w + j] * xj;
                        }
                    }
                    B::set(&pr[id]);
                }
            }) as Job
        })
        .collect();
    Ok((fw, timed(be, jobs, &by_column_snake)?))
}

fn times_table(rows: &[Row]) -> Table {
    let mut t = table(&[
        "method",
        "threads",
        "arch",
        "forward s",
        "backward s",
        "total s",
        "residual",
    ]);
    for r in rows {
        t.add_row(vec![
            r.method.to_string(),
            r.threads.to_string(),
            r.arch.clone(),
            format!("{:.4}", r.forward_s),
            format!("{:.4}", r.backward_s),
            format!("{:.4}", r.total_s),
            format!("{:.1e}", r.residual),
        ]);
    }
    t
}

fn counters_table(rows: &[(u8, usize, String, &str, Stats)]) -> Table {
    let mut t = table(&[
        "method",
        "threads",
        "arch",
        "phase",
        "runs",
        "slot runs",
        "blocks",
        "wakes",
        "cross-ST",
        "steals",
        "parks",
        "idle ms",
        "A1 scans",
        "A1 scanned",
    ]);
    for (m, th, arch, phase, s) in rows {
        t.add_row(vec![
            m.to_string(),
            th.to_string(),
            arch.clone(),
            phase.to_string(),
            s.runs.to_string(),
            s.slot_runs.to_string(),
            s.blocks.to_string(),
            s.wakes.to_string(),
            s.remote_readies.to_string(),
            s.steals.to_string(),
            s.parks.to_string(),
            format!("{:.2}", s.idle_ns as f64 / 1e6),
            s.a1_scans.to_string(),
            s.a1_scanned.to_string(),
        ]);
    }
    t
}

fn speedup_table(rows: &[Row]) -> Option<Table> {
    let pairs = [("A1", "A0"), ("A2", "A1"), ("A2", "A0"), ("A2", "may")];
    let find = |m: u8, t: usize, a: &str| {
        rows.iter()
            .find(|r| r.method == m && r.threads == t && r.arch == a)
    };
    let pct = |old: f64, new: f64| format!("{:+.1}", (old / new - 1.0) * 100.0);
    let mut keys: Vec<(u8, usize)> = rows.iter().map(|r| (r.method, r.threads)).collect();
    keys.sort();
    keys.dedup();
    let mut t = table(&[
        "method",
        "threads",
        "new vs old",
        "forward %",
        "backward %",
        "total %",
    ]);
    let mut any = false;
    for (m, th) in keys {
        for (new, old) in pairs {
            if let (Some(n), Some(o)) = (find(m, th, new), find(m, th, old)) {
                any = true;
                t.add_row(vec![
                    m.to_string(),
                    th.to_string(),
                    format!("{new} vs {old}"),
                    pct(o.forward_s, n.forward_s),
                    pct(o.backward_s, n.backward_s),
                    pct(o.total_s, n.total_s),
                ]);
            }
        }
    }
    any.then_some(t)
}

/// One panel per method, log-log (times span three decades), an architecture per line with
/// the same colour in both panels.
fn chart(rows: &[Row], size: usize) -> String {
    let mut archs: Vec<&str> = rows.iter().map(|r| r.arch.as_str()).collect();
    archs.sort_by_key(|a| ["A0", "A1", "A2", "may"].iter().position(|k| k == a));
    archs.dedup();
    let mut methods: Vec<u8> = rows.iter().map(|r| r.method).collect();
    methods.sort();
    methods.dedup();
    let panels: Vec<LineChart> = methods
        .iter()
        .map(|&m| {
            let name = if m == 1 { "rows" } else { "tiles" };
            let mut ch = LineChart::new(
                &format!("method {m} ({name})"),
                Axis::new("user threads", "").log(),
                Axis::new("forward + backward time, median", "s").log(),
            );
            for arch in &archs {
                let pts: Vec<(f64, f64)> = rows
                    .iter()
                    .filter(|r| r.method == m && r.arch == *arch)
                    .map(|r| (r.threads as f64, r.total_s))
                    .collect();
                ch.series(Series::new(arch, pts));
            }
            ch
        })
        .collect();
    let refs: Vec<&dyn Chart> = panels.iter().map(|c| c as &dyn Chart).collect();
    side_by_side(
        &format!("Blocked Gaussian elimination (n = {size}): solve time against user threads"),
        &refs,
        560.0,
        480.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(arch: Arch, m: u8, n: usize, t: usize) {
        let sys = System::random(n, 7);
        let mut c = Config::new(arch);
        c.workers = 2;
        let rt = Runtime::new(c).unwrap();
        let (_, _, res) = solve(&SkBackend(&rt, arch != Arch::A0), &sys, m, t).unwrap();
        assert!(
            res < 1e-10,
            "{arch} method {m} n {n} t {t}: residual {res:e}"
        );
    }

    #[test]
    fn tiles_and_rows_start_on_cache_lines_and_cover_every_column() {
        for (n, t) in [(1024, 32), (1024, 496), (1024, 7936), (64, 8), (8, 7)] {
            let (r, c) = grid(t);
            let g = Tiles { n, r, c };
            let lines_enough = (n + 1).div_ceil(LINE) >= c;
            let mut next = 0;
            for j in 0..c {
                let (c0, c1) = g.cols(j);
                assert_eq!(c0, next, "n {n} t {t} block {j}");
                assert!(c0 <= c1 && c1 <= n + 1);
                if lines_enough {
                    assert_eq!(c0 % LINE, 0, "n {n} t {t} block {j}");
                }
                next = c1;
            }
            assert_eq!(next, n + 1);
        }
        let a = Shared::new(&vec![1.0; 3 * stride(20)]);
        assert_eq!(a.get().as_ptr() as usize % 64, 0);
        assert_eq!(stride(20) % LINE, 0);
        assert_eq!(a.get().len(), 3 * 24);
    }

    #[test]
    fn grids_are_the_most_square_factorisation() {
        assert_eq!(grid(32), (4, 8));
        assert_eq!(grid(496), (16, 31));
        assert_eq!(grid(3968), (62, 64));
        assert_eq!(grid(7936), (64, 124));
        assert_eq!(grid(7), (1, 7));
    }

    #[test]
    fn both_methods_solve_under_every_architecture() {
        for arch in Arch::ALL {
            for (m, n, t) in [
                (1, 64, 8),
                (1, 50, 50),
                (2, 64, 12),
                (2, 40, 128),
                (2, 33, 7),
            ] {
                check(arch, m, n, t);
            }
        }
    }

    #[test]
    fn may_peer_solves_too() {
        may::config().set_workers(2);
        let sys = System::random(48, 3);
        for (m, t) in [(1, 16), (2, 24)] {
            let (_, _, res) = solve(&MayBackend, &sys, m, t).unwrap();
            assert!(res < 1e-10, "method {m}: {res:e}");
        }
    }

    #[test]
    fn a_wrong_solution_has_a_large_residual() {
        let sys = System::random(16, 1);
        assert!(sys.residual(&[0.0; 16]) > 0.5);
    }
}
