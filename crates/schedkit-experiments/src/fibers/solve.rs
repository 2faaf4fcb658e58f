//! The solver: blocked Gaussian elimination in the paper's two data distributions over any
//! threading system that offers manual-reset events and "run these user threads" (a
//! [`Backend`]): schedkit's fiber runtimes and, with the `may` feature, the `may` crate.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedkit_runtime::{Arch, Event, EventKind, Runtime, Stats};
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::time::Instant;

/// The most square R x C = t grid with R <= C.
pub fn grid(t: usize) -> (usize, usize) {
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
    fn run_all(&self, jobs: Vec<Job>, group: &dyn Fn(usize) -> usize) -> Result<(), String>;
    /// The scheduler's counters so far, where it keeps them.
    fn stats(&self) -> Option<Stats> {
        None
    }
}

/// A schedkit runtime; with `counters`, each phase also reads the scheduler's counters (and
/// pauses 1 ms after it so that the STs' last updates land: the next phase then starts on
/// parked STs, so timings taken with `--counters` are not comparable with those without).
pub struct SkBackend<'a>(pub &'a Runtime, pub bool);

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
    fn run_all(&self, jobs: Vec<Job>, group: &dyn Fn(usize) -> usize) -> Result<(), String> {
        let hs: Vec<_> = jobs
            .into_iter()
            .enumerate()
            .map(|(i, j)| self.0.handle().spawn_near(group(i), j))
            .collect();
        for h in hs {
            h.join().map_err(|e| format!("a user thread failed: {e}"))?;
        }
        Ok(())
    }
    fn stats(&self) -> Option<Stats> {
        (self.1 && self.0.arch() != Arch::A0).then(|| self.0.handle().stats())
    }
}

#[cfg(feature = "may")]
pub struct MayBackend;

#[cfg(feature = "may")]
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
    fn run_all(&self, jobs: Vec<Job>, _group: &dyn Fn(usize) -> usize) -> Result<(), String> {
        let hs: Vec<_> = jobs
            .into_iter()
            // SAFETY: may requires that coroutines do not hold thread-local references across
            // blocking calls; the solver's code uses none.
            .map(|j| unsafe { may::coroutine::spawn(j) })
            .collect();
        for h in hs {
            h.join()
                .map_err(|_| "a may coroutine panicked".to_string())?;
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
pub struct Phase {
    pub secs: f64,
    pub stats: Option<Stats>,
}

/// One user thread of a phase.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Runs one phase's user threads to completion, timing them.
fn timed<B: Backend>(
    be: &B,
    jobs: Vec<Job>,
    group: &dyn Fn(usize) -> usize,
) -> Result<Phase, String> {
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
pub fn solve<B: Backend>(
    be: &B,
    sys: &System,
    m: u8,
    t: usize,
) -> Result<(Phase, Phase, f64), String> {
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
) -> Result<(Phase, Phase), String> {
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

/// Method 2 of seed 003: the tiled elimination, forward then backward. Kept in one piece
/// (about 140 lines, over the ~120 this codebase otherwise keeps to): the forward and backward
/// phases share the tile grid, the readiness flags and the placement, and reading the two
/// phases side by side is how their synchronisation is checked against the paper.
fn method2<B: Backend>(
    be: &B,
    a: &Arc<Shared>,
    x: &Arc<Shared>,
    n: usize,
    t: usize,
) -> Result<(Phase, Phase), String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_runtime::Config;

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

    #[cfg(feature = "may")]
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
