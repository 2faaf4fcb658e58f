//! Gang scheduling with an Ousterhout matrix (Ousterhout, "Scheduling techniques for
//! concurrent systems", 1982; SCore-D in seed 002, Hori et al. 1998).
//!
//! Policy: every `[[process]]` is a gang (a parallel job) of `threads` threads. The matrix has
//! one column per core and as many rows (time slots) as needed. An arriving job takes the
//! first row, top to bottom, with a contiguous run of free columns as wide as the job
//! (leftmost such run), else a new row: narrow jobs are packed side by side in one slot, and
//! contiguous columns keep a job on as few nodes as possible when cores are grouped into
//! nodes. Each of the job's threads is pinned (`Action::Migrate`) to its own column. One row
//! runs at a time for `quantum`: every job of the running row is resumed, every other job is
//! stopped (`Action::Stop`/`Action::Resume`, applied by the simulator to its model and by
//! `schedkit run` through the freezer). Then the next row runs, round robin.
//!
//! A switch may cost time (seed 002's overhead model, [`crate::gang_overhead`]): the old row
//! is stopped, nothing runs for the switch cost, then the new row is resumed. With no cost,
//! stop and resume happen at the same instant (stops first).
//!
//! Jobs that finish free their columns; an emptied row disappears (if it was running, the
//! next row starts at once). Jobs are noticed at ticks: in the simulator the controller ticks
//! at every slot or switch boundary, so a job arriving mid-slot is placed at the next
//! boundary (its threads are not dispatched before: the gang dispatcher runs only pinned
//! threads); `schedkit run` ticks it at every sample.
//!
//! Invariants: a core column holds at most one job per row; at any time the running threads
//! all belong to jobs of one row; a job wider than the machine is clamped to `cores` columns
//! (its threads share those columns, k-th thread on column k mod width).
//! Ties: rows in creation order, jobs in process-index order, a job's threads in id order.

use crate::control::{Action, Controller, Snapshot};
use crate::gang_overhead::{OverheadModel, Pattern, SwitchCost};
use crate::time::Nanos;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The matrix: `rows[r][c]` is the process in time slot `r`, column (core) `c`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Matrix {
    cores: usize,
    rows: Vec<Vec<Option<usize>>>,
}

impl Matrix {
    pub fn new(cores: usize) -> Matrix {
        Matrix {
            cores: cores.max(1),
            rows: Vec::new(),
        }
    }

    pub fn rows(&self) -> &[Vec<Option<usize>>] {
        &self.rows
    }

    /// Places `process` of `width` columns (clamped to 1..=cores): first row with a
    /// contiguous free run that wide, leftmost run; else a new row. Returns (row, column).
    pub fn place(&mut self, process: usize, width: usize) -> (usize, usize) {
        let w = width.clamp(1, self.cores);
        let found = self.rows.iter().enumerate().find_map(|(r, row)| {
            let mut run = 0;
            for (c, cell) in row.iter().enumerate() {
                run = if cell.is_none() { run + 1 } else { 0 };
                if run == w {
                    return Some((r, c + 1 - w));
                }
            }
            None
        });
        let (r, c) = found.unwrap_or_else(|| {
            self.rows.push(vec![None; self.cores]);
            (self.rows.len() - 1, 0)
        });
        for cell in &mut self.rows[r][c..c + w] {
            *cell = Some(process);
        }
        (r, c)
    }

    /// Frees `process`'s cells in `row`; returns true when the row became empty and was
    /// removed (later rows move up by one).
    pub fn free(&mut self, process: usize, row: usize) -> bool {
        for cell in &mut self.rows[row] {
            if *cell == Some(process) {
                *cell = None;
            }
        }
        if self.rows[row].iter().all(Option::is_none) {
            self.rows.remove(row);
            true
        } else {
            false
        }
    }
}

/// Where a job sits and which of its threads are pinned.
#[derive(Clone, Debug)]
struct Placed {
    row: usize,
    col: usize,
    width: usize,
    /// Thread numbers (not handles: the simulator reuses a finished thread's slot, and the
    /// kernel may reuse a TID, so a handle could make a new thread look pinned already).
    pinned: BTreeSet<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The current row runs until then.
    Running(Nanos),
    /// Every job is stopped until then (switch overhead), then the current row resumes.
    Switching(Nanos),
}

/// The switch overhead of a simulated cluster: `cores_per_node` consecutive cores form a
/// node, and the jobs communicate with `pattern`.
#[derive(Clone, Debug)]
pub struct ClusterOverhead {
    pub model: OverheadModel,
    pub cores_per_node: usize,
    pub pattern: Pattern,
}

/// Totals of one gang run (shared with whoever built the controller).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GangStats {
    /// Row changes (with or without overhead).
    pub switches: u64,
    /// Summed overhead by part.
    pub cost: SwitchCost,
    /// Most rows the matrix ever had.
    pub max_rows: usize,
}

/// The gang controller (see the module docs).
pub struct Gang {
    quantum: Nanos,
    matrix: Matrix,
    jobs: BTreeMap<usize, Placed>,
    stopped: BTreeSet<usize>,
    current: usize,
    phase: Phase,
    next_period: Nanos,
    overhead: Option<ClusterOverhead>,
    stats: Arc<Mutex<GangStats>>,
    // Scratch, reused every tick.
    /// Live threads per process as (thread number, id): columns go in thread-number order.
    live: BTreeMap<usize, Vec<(usize, u64)>>,
}

impl Gang {
    pub fn new(quantum: Nanos, cores: usize) -> Gang {
        let quantum = quantum.max(Nanos(1));
        Gang {
            quantum,
            matrix: Matrix::new(cores),
            jobs: BTreeMap::new(),
            stopped: BTreeSet::new(),
            current: 0,
            // The first tick ends this empty "switch" and starts row 0 without counting it.
            phase: Phase::Switching(Nanos::ZERO),
            next_period: quantum,
            overhead: None,
            stats: Arc::default(),
            live: BTreeMap::new(),
        }
    }

    /// Charges every switch with seed 002's overhead model.
    pub fn with_overhead(mut self, o: ClusterOverhead) -> Gang {
        self.overhead = Some(o);
        self
    }

    /// The totals, readable while and after the controller runs.
    pub fn stats(&self) -> Arc<Mutex<GangStats>> {
        self.stats.clone()
    }

    pub fn matrix(&self) -> &Matrix {
        &self.matrix
    }

    /// The processes of the running row (empty while switching).
    pub fn running(&self) -> Vec<usize> {
        match self.phase {
            Phase::Switching(_) => Vec::new(),
            Phase::Running(_) => self
                .jobs
                .iter()
                .filter(|(_, j)| j.row == self.current)
                .map(|(&p, _)| p)
                .collect(),
        }
    }

    /// Cost of leaving the current row.
    fn switch_cost(&self) -> SwitchCost {
        let Some(o) = &self.overhead else {
            return SwitchCost::default();
        };
        let cpn = o.cores_per_node.max(1);
        let nodes = self.matrix.cores.div_ceil(cpn);
        // The widest outgoing job decides the flush (all nodes flush in parallel).
        let job_nodes = self
            .jobs
            .values()
            .filter(|j| j.row == self.current)
            .map(|j| (j.col + j.width).div_ceil(cpn) - j.col / cpn)
            .max()
            .unwrap_or(1);
        o.model.switch(nodes, job_nodes, o.pattern)
    }

    /// Moves to the next row, paying the switch cost.
    fn rotate(&mut self, now: Nanos, advance: bool) {
        let cost = self.switch_cost();
        if advance {
            self.current += 1;
        }
        if self.current >= self.matrix.rows.len() {
            self.current = 0;
        }
        let mut st = self.stats.lock().expect("gang stats");
        st.switches += 1;
        st.cost.fixed += cost.fixed;
        st.cost.flush += cost.flush;
        st.cost.context += cost.context;
        drop(st);
        self.phase = if cost.total() > Nanos::ZERO {
            Phase::Switching(now + cost.total())
        } else {
            Phase::Running(now + self.quantum)
        };
    }
}

impl Controller for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn period(&self) -> Nanos {
        self.next_period
    }

    fn emits(&self) -> &'static [crate::control::ActionKind] {
        use crate::control::ActionKind;
        &[ActionKind::Migrate, ActionKind::Stop, ActionKind::Resume]
    }
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        let now = snap.now;
        self.live.clear();
        for t in snap.threads {
            self.live
                .entry(t.process)
                .or_default()
                .push((t.index, t.id));
        }
        // Finished jobs free their columns.
        let gone: Vec<usize> = self
            .jobs
            .keys()
            .filter(|p| !self.live.contains_key(p))
            .copied()
            .collect();
        let mut current_gone = false;
        for p in gone {
            let j = self.jobs.remove(&p).expect("placed");
            self.stopped.remove(&p);
            if self.matrix.free(p, j.row) {
                current_gone |= j.row == self.current;
                for other in self.jobs.values_mut() {
                    if other.row > j.row {
                        other.row -= 1;
                    }
                }
                if j.row < self.current {
                    self.current -= 1;
                }
            }
        }
        // Arrivals get a place; every new thread is pinned to its column.
        for (&p, ids) in &mut self.live {
            ids.sort_unstable();
            let job = self.jobs.entry(p).or_insert_with(|| {
                let width = snap.scenario.processes()[p].threads().max(1) as usize;
                let (row, col) = self.matrix.place(p, width);
                Placed {
                    row,
                    col,
                    width: width.min(self.matrix.cores),
                    pinned: BTreeSet::new(),
                }
            });
            for &(index, id) in ids.iter() {
                if !job.pinned.contains(&index) {
                    let core = job.col + job.pinned.len() % job.width;
                    job.pinned.insert(index);
                    out.push(Action::Migrate { thread: id, core });
                }
            }
        }
        {
            let mut st = self.stats.lock().expect("gang stats");
            st.max_rows = st.max_rows.max(self.matrix.rows.len());
        }
        // Slot rotation.
        let rows = self.matrix.rows.len();
        match self.phase {
            _ if rows == 0 => {
                self.current = 0;
                self.phase = Phase::Running(now + self.quantum);
            }
            // The running row emptied: the row now at `current` starts.
            Phase::Running(_) if current_gone => self.rotate(now, false),
            Phase::Running(until) if now >= until => {
                if rows > 1 {
                    self.rotate(now, true);
                } else {
                    self.phase = Phase::Running(now + self.quantum);
                }
            }
            Phase::Switching(until) if now >= until => {
                if self.current >= rows {
                    self.current = 0;
                }
                self.phase = Phase::Running(now + self.quantum);
            }
            _ => {}
        }
        // Stops first, then resumes, so two rows never share a core.
        let mut resume = Vec::new();
        for (&p, j) in &self.jobs {
            let run = matches!(self.phase, Phase::Running(_)) && j.row == self.current;
            if run && self.stopped.remove(&p) {
                resume.push(Action::Resume { process: p });
            } else if !run && self.stopped.insert(p) {
                out.push(Action::Stop { process: p });
            }
        }
        out.extend(resume);
        self.next_period = match self.phase {
            Phase::Running(u) | Phase::Switching(u) => u.saturating_sub(now).max(Nanos(1)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ThreadView;
    use crate::scenario::Scenario;

    fn scenario(widths: &[u32], cores: usize) -> Scenario {
        let mut text = format!("cores = {cores}\n[policy]\nname = \"gang\"\nquantum = \"10ms\"\n");
        for (i, w) in widths.iter().enumerate() {
            text += &format!("[[process]]\nname = \"j{i}\"\nthreads = {w}\nburst = \"1s\"\n");
        }
        Scenario::parse("t.toml", &text).expect("valid")
    }

    fn views(procs: &[(usize, u32)]) -> Vec<ThreadView> {
        // Thread ids are stable across ticks: 100 * process + thread.
        let mut v = Vec::new();
        for &(p, n) in procs {
            for k in 0..n as u64 {
                v.push(ThreadView {
                    id: 100 * p as u64 + k,
                    process: p,
                    index: k as usize,
                    group: None,
                    core: None,
                    weight: 1024,
                    base_weight: 1024,
                    runnable: true,
                    cpu: Nanos::ZERO,
                });
            }
        }
        v
    }

    fn tick(g: &mut Gang, s: &Scenario, now: u64, live: &[(usize, u32)]) -> Vec<Action> {
        let threads = views(live);
        let snap = Snapshot {
            now: Nanos::from_ms(now),
            cores: s.cores(),
            threads: &threads,
            group_weights: &[],
            process_cpu: &[],
            process_cpu_epoch: 0,
            scenario: s,
        };
        let mut out = Vec::new();
        g.tick(&snap, &mut out);
        out
    }

    #[test]
    fn packing_is_first_fit_contiguous() {
        let mut m = Matrix::new(4);
        assert_eq!(m.place(0, 2), (0, 0));
        assert_eq!(m.place(1, 3), (1, 0)); // does not fit beside job 0
        assert_eq!(m.place(2, 2), (0, 2)); // packed beside job 0
        assert_eq!(m.place(3, 1), (1, 3));
        assert_eq!(m.place(4, 9), (2, 0)); // clamped to the machine
        assert_eq!(
            m.rows(),
            &[
                vec![Some(0), Some(0), Some(2), Some(2)],
                vec![Some(1), Some(1), Some(1), Some(3)],
                vec![Some(4); 4],
            ]
        );
        // A hole that is not contiguous is not used for a wider job.
        assert!(!m.free(0, 0));
        assert!(!m.free(3, 1));
        assert_eq!(m.place(5, 2), (0, 0));
        assert_eq!(m.place(6, 1), (1, 3));
        // Emptying a row removes it.
        assert!(m.free(4, 2));
        assert_eq!(m.rows().len(), 2);
    }

    #[test]
    fn rotation_without_overhead() {
        // 4 cores; jobs of widths 2, 3, 2: rows [0 0 2 2] and [1 1 1 -].
        let s = scenario(&[2, 3, 2], 4);
        let mut g = Gang::new(s.policy().quantum(), 4);
        let all = [(0, 2), (1, 3), (2, 2)];
        let out = tick(&mut g, &s, 0, &all);
        let migrations: Vec<(u64, usize)> = out
            .iter()
            .filter_map(|a| match a {
                Action::Migrate { thread, core } => Some((*thread, *core)),
                _ => None,
            })
            .collect();
        assert_eq!(
            migrations,
            vec![
                (0, 0),
                (1, 1),
                (100, 0),
                (101, 1),
                (102, 2),
                (200, 2),
                (201, 3)
            ]
        );
        assert_eq!(&out[7..], &[Action::Stop { process: 1 }]);
        assert_eq!(g.running(), vec![0, 2]);
        assert_eq!(g.period(), Nanos::from_ms(10));
        // Next slot: row 1 runs.
        let out = tick(&mut g, &s, 10, &all);
        assert_eq!(
            out,
            vec![
                Action::Stop { process: 0 },
                Action::Stop { process: 2 },
                Action::Resume { process: 1 },
            ]
        );
        // Back to row 0.
        let out = tick(&mut g, &s, 20, &all);
        assert_eq!(
            out,
            vec![
                Action::Stop { process: 1 },
                Action::Resume { process: 0 },
                Action::Resume { process: 2 },
            ]
        );
        // A tick before the slot ends changes nothing.
        assert!(tick(&mut g, &s, 25, &all).is_empty());
        assert_eq!(g.period(), Nanos::from_ms(5));
        // Job 0 and job 2 finish: their row disappears and job 1 starts at once.
        let out = tick(&mut g, &s, 26, &[(1, 3)]);
        assert_eq!(out, vec![Action::Resume { process: 1 }]);
        assert_eq!(g.matrix().rows().len(), 1);
        assert_eq!(g.stats().lock().unwrap().switches, 3);
        // One row: no more switches.
        assert!(tick(&mut g, &s, 36, &[(1, 3)]).is_empty());
    }

    #[test]
    fn switch_overhead_leaves_a_gap() {
        let s = scenario(&[4, 4], 4);
        let model = OverheadModel::default();
        let mut g = Gang::new(s.policy().quantum(), 4).with_overhead(ClusterOverhead {
            model: model.clone(),
            cores_per_node: 2,
            pattern: Pattern::Neighbour,
        });
        let all = [(0, 4), (1, 4)];
        tick(&mut g, &s, 0, &all);
        let cost = model.switch(2, 2, Pattern::Neighbour).total();
        let out = tick(&mut g, &s, 10, &all);
        assert_eq!(out, vec![Action::Stop { process: 0 }]);
        assert_eq!(g.period(), cost);
        assert!(g.running().is_empty());
        let snap_at = Nanos::from_ms(10) + cost;
        let threads = views(&all);
        let mut out = Vec::new();
        g.tick(
            &Snapshot {
                now: snap_at,
                cores: 4,
                threads: &threads,
                group_weights: &[],
                process_cpu: &[],
                process_cpu_epoch: 0,
                scenario: &s,
            },
            &mut out,
        );
        assert_eq!(out, vec![Action::Resume { process: 1 }]);
        assert_eq!(g.period(), Nanos::from_ms(10));
        assert_eq!(g.stats().lock().unwrap().cost.total(), cost);
    }
}
