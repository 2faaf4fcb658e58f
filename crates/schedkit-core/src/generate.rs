//! Random periodic task-set generators, seeded and deterministic: the same parameters and seed
//! give the same task set, byte for byte, on every machine.
//!
//! Two generators:
//!
//! - [`uunifast`] / [`UUniFast`]: Bini & Buttazzo's UUniFast ("Measuring the performance of
//!   schedulability tests", Real-Time Systems 30, 2005) draws `n` utilisations that sum to `U`
//!   uniformly over the simplex. For multicore sets (`U > 1`) a single utilisation may exceed 1,
//!   which no core can serve; [`UUniFast::generate`] discards such draws and draws again
//!   ("UUniFast-Discard", Davis & Burns 2009). Periods are log-uniform in `[t_min, t_max]`
//!   rounded to whole milliseconds, deadlines are implicit (`D = T`), and each task is one
//!   sequential region of `C = round(u * T)` (at least 1 us), rounded to whole microseconds
//!   so that simulators counting in ms or us (SimSo) see the same numbers.
//!
//! - [`Seed001`]: the generator of seed 001 (Fonseca et al., section 5). Per task:
//!   `T_i = T_min + x (T_max - T_min)`, `u_i = u_min + x (u_max - u_min)`, `C_i = T_i u_i`, each
//!   `x` a fresh uniform draw in `[0, 1)`; tasks are added until the total utilisation enters
//!   the window `[U_min, U_max]`; `n_i = x * 3m` parallel threads. Decisions the paper leaves
//!   open, made here and documented:
//!   * the window is *normalised* by the number of cores (the paper's windows 0.28-0.30 ...
//!     0.83-0.85 are printed as percentages of the machine), so the total lies in
//!     `[m U_min, m U_max]`;
//!   * a draw that would overshoot `m U_max` is drawn again, so every set lands inside the
//!     window; redrawing a uniform variable until it falls in `[u_min, r]` is the uniform
//!     distribution on `[u_min, r]`, which is what the code draws directly (`r` = what is left
//!     of the window). When less than `u_min` is left below `m U_max` but the sum is still
//!     under `m U_min`, the set is started afresh (at most 100,000 times, then an error);
//!   * `n_i = max(1, ceil(x * 3m))`, so a task has between 1 and `3m` parallel threads;
//!   * a job is `seq, par(n_i threads), seq` ("executes sequentially; splits into multiple
//!     parallel threads; synchronizes; resumes master thread execution"), with the share of
//!     `C_i` in each of the three parts and between the parallel threads drawn at random;
//!     the parts sum to exactly `C_i` (the paper bounds the total by `C_i`).
//!
//! Rejected alternative: drawing task utilisations with UUniFast in the seed-001 generator
//! would not respect the paper's per-task bounds `[u_min, u_max]`.

use crate::scenario::{
    PolicyName, PolicySpec, Process, Region, Scenario, ScenarioError, Task, Work,
};
use crate::time::Nanos;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// UUniFast: `n` utilisations, uniformly distributed over `{u >= 0, sum u = total}`.
pub fn uunifast<R: Rng>(rng: &mut R, n: usize, total: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    let mut sum = total;
    for i in 1..n {
        let next = sum * rng.gen::<f64>().powf(1.0 / (n - i) as f64);
        out.push(sum - next);
        sum = next;
    }
    if n > 0 {
        out.push(sum);
    }
    out
}

/// Parameters of a UUniFast task set with implicit deadlines.
#[derive(Clone, Debug, PartialEq)]
pub struct UUniFast {
    pub tasks: usize,
    /// Total utilisation (e.g. 3.0 on 4 cores).
    pub utilisation: f64,
    pub period_min: Nanos,
    pub period_max: Nanos,
    pub seed: u64,
}

impl UUniFast {
    /// `tasks` tasks of total utilisation `utilisation`, periods 10-100 ms.
    pub fn new(tasks: usize, utilisation: f64, seed: u64) -> UUniFast {
        UUniFast {
            tasks,
            utilisation,
            period_min: Nanos::from_ms(10),
            period_max: Nanos::from_ms(100),
            seed,
        }
    }

    /// Draws the task set (UUniFast-Discard: no task above utilisation 1). Tasks are named
    /// `t0`, `t1`, ...
    pub fn generate(&self) -> Vec<Task> {
        assert!(
            self.utilisation <= self.tasks as f64,
            "UUniFast: {} tasks cannot carry utilisation {}",
            self.tasks,
            self.utilisation
        );
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let us = loop {
            let us = uunifast(&mut rng, self.tasks, self.utilisation);
            if us.iter().all(|&u| u <= 1.0) {
                break us;
            }
        };
        let (lo, hi) = (
            (self.period_min.0 as f64).ln(),
            (self.period_max.0 as f64).ln(),
        );
        us.iter()
            .enumerate()
            .map(|(i, &u)| {
                let raw = (lo + rng.gen::<f64>() * (hi - lo)).exp();
                let period = round_to(raw, 1_000_000).max(1_000_000);
                let wcet = round_to(u * period as f64, 1_000).clamp(1_000, period);
                Task::new(
                    format!("t{i}"),
                    Nanos(period),
                    vec![Region::Seq(Nanos(wcet))],
                )
            })
            .collect()
    }
}

fn round_to(x: f64, unit: u64) -> u64 {
    ((x / unit as f64).round() as u64) * unit
}

/// Parameters of seed 001's generator (defaults: the paper's values for `m` cores).
#[derive(Clone, Debug, PartialEq)]
pub struct Seed001 {
    /// Cores `m`.
    pub cores: usize,
    pub u_min: f64,
    pub u_max: f64,
    pub period_min: Nanos,
    pub period_max: Nanos,
    /// Normalised total-utilisation window `[U_min, U_max]` (fractions of the machine).
    pub window: (f64, f64),
    pub seed: u64,
}

impl Seed001 {
    /// The paper's parameters: u in [0.1, 0.4], periods 100-150 ms, the given window.
    pub fn new(cores: usize, window: (f64, f64), seed: u64) -> Seed001 {
        Seed001 {
            cores,
            u_min: 0.1,
            u_max: 0.4,
            period_min: Nanos::from_ms(100),
            period_max: Nanos::from_ms(150),
            window,
            seed,
        }
    }

    /// Draws the task set. Panics where [`Seed001::try_generate`] returns an error.
    pub fn generate(&self) -> Vec<Task> {
        self.try_generate().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Draws the task set, or says why the window cannot be reached.
    pub fn try_generate(&self) -> Result<Vec<Task>, String> {
        let m = self.cores as f64;
        let (lo, hi) = (self.window.0 * m, self.window.1 * m);
        if !(hi >= self.u_min && lo <= hi && self.u_min <= self.u_max && self.u_min > 0.0) {
            return Err(format!(
                "seed-001 generator: window [{}, {}] x {} cores is unreachable with task \
                 utilisations in [{}, {}]",
                self.window.0, self.window.1, self.cores, self.u_min, self.u_max
            ));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut attempts = 0;
        let us = 'set: loop {
            attempts += 1;
            if attempts > 100_000 {
                return Err(format!(
                    "seed-001 generator: no task set found in window [{}, {}] x {} cores after \
                     100000 attempts",
                    self.window.0, self.window.1, self.cores
                ));
            }
            let mut us: Vec<f64> = Vec::new();
            let mut sum = 0.0;
            while sum < lo {
                let top = self.u_max.min(hi - sum);
                if top < self.u_min {
                    continue 'set;
                }
                let u = self.u_min + rng.gen::<f64>() * (top - self.u_min);
                sum += u;
                us.push(u);
            }
            break us;
        };
        let span = (self.period_max - self.period_min).0 as f64;
        Ok(us
            .iter()
            .enumerate()
            .map(|(i, &u)| {
                let period = self.period_min.0 + (rng.gen::<f64>() * span) as u64;
                let c = ((period as f64 * u) as u64).max(3);
                let threads = ((rng.gen::<f64>() * 3.0 * m).ceil() as usize).max(1);
                Task::new(
                    format!("t{i}"),
                    Nanos(period),
                    split_job(&mut rng, c, threads),
                )
            })
            .collect())
    }
}

/// Splits `c` ns into `seq, par(threads), seq`, every piece at least 1 ns, summing to `c`.
fn split_job<R: Rng>(rng: &mut R, c: u64, threads: usize) -> Vec<Region> {
    let parts = split(rng, c, 2 + threads);
    vec![
        Region::Seq(Nanos(parts[0])),
        Region::Par(parts[2..].iter().map(|&p| Nanos(p)).collect()),
        Region::Seq(Nanos(parts[1])),
    ]
}

/// `k` random positive integers summing to `total` (requires `total >= k`).
fn split<R: Rng>(rng: &mut R, total: u64, k: usize) -> Vec<u64> {
    let k = k.min(total as usize).max(1);
    let weights: Vec<f64> = (0..k).map(|_| 0.05 + rng.gen::<f64>()).collect();
    let sum: f64 = weights.iter().sum();
    let free = total - k as u64;
    let mut out: Vec<u64> = weights
        .iter()
        .map(|w| 1 + (free as f64 * w / sum) as u64)
        .collect();
    let given: u64 = out.iter().sum();
    out[k - 1] += total - given;
    out
}

/// A scenario holding `tasks` on `cores` under `policy`, simulated until `horizon`.
pub fn scenario(
    name: &str,
    cores: usize,
    policy: PolicyName,
    horizon: Nanos,
    tasks: Vec<Task>,
) -> Result<Scenario, ScenarioError> {
    Scenario::builder(name)
        .with_cores(cores)
        .with_policy(PolicySpec::new(policy))
        .with_horizon(horizon)
        .tasks(tasks)
        .build()
}

/// Writes `scenario`'s cores, policy, horizon and tasks as a scenario file that
/// [`Scenario::parse`] reads back to the same tasks (processes and groups are not written).
pub fn tasks_toml(scenario: &Scenario) -> String {
    let mut s = format!(
        "# Generated by schedkit ({} tasks, utilisation {:.4}).\ncores = {}\nrun = {{ horizon = \"{}ns\" }}\npolicy = {{ name = \"{}\" }}\n",
        scenario.tasks().len(),
        scenario.tasks().iter().map(|t| t.utilisation()).sum::<f64>(),
        scenario.cores(),
        scenario.horizon().0,
        scenario.policy().name().as_str()
    );
    for t in scenario.tasks() {
        let regions: Vec<String> = t
            .regions()
            .iter()
            .map(|r| match r {
                Region::Seq(c) => format!("{{ seq = \"{}ns\" }}", c.0),
                Region::Par(v) => format!(
                    "{{ par = [{}] }}",
                    v.iter()
                        .map(|c| format!("\"{}ns\"", c.0))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
            .collect();
        s.push_str(&format!(
            "\n[[task]]\nname = \"{}\"\nperiod = \"{}ns\"\ndeadline = \"{}ns\"\nregions = [{}]\n",
            t.name(),
            t.period().0,
            t.deadline().0,
            regions.join(", ")
        ));
    }
    s
}

/// One benchmark workload: a scenario and what it stands for. `schedkit bench sim` and the
/// criterion benches of `schedkit-sim` both build their inputs here, so they measure the same
/// thing. The scenario is built on demand ([`Workload::scenario`]): the RR workload alone has
/// 10,000 processes.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Short name, e.g. `gedf-1000x64`.
    pub name: String,
    /// What the throughput target counts: `events` or `jobs` per second.
    pub unit: &'static str,
    /// The target, in `unit` per second of wall time (single-threaded).
    pub target: f64,
    pub policy: PolicyName,
    pub cores: usize,
    pub horizon: Nanos,
    kind: WorkloadKind,
}

#[derive(Clone, Debug)]
enum WorkloadKind {
    Processes(usize),
    Tasks {
        tasks: usize,
        utilisation: f64,
        seed: u64,
    },
}

impl Workload {
    /// Builds the scenario (deterministic).
    pub fn scenario(&self) -> Scenario {
        match self.kind {
            WorkloadKind::Processes(n) => {
                processes_workload(self.policy, n, self.cores, self.horizon)
            }
            WorkloadKind::Tasks {
                tasks,
                utilisation,
                seed,
            } => gedf_workload(tasks, self.cores, utilisation, self.horizon, seed)
                .expect("a benchmark workload is valid"),
        }
    }
}

/// `processes` CPU-bound single-thread processes (no burst: they run until the horizon) on
/// `cores` under `policy` (`rr` with a 1 ms quantum, or `cfs` with its defaults).
pub fn processes_workload(
    policy: PolicyName,
    processes: usize,
    cores: usize,
    horizon: Nanos,
) -> Scenario {
    Scenario::builder(format!("{}-{processes}x{cores}", policy.as_str()))
        .with_cores(cores)
        .with_horizon(horizon)
        .with_policy(PolicySpec::new(policy).with_quantum(Nanos::from_ms(1)))
        .processes((0..processes).map(|i| Process::new(format!("p{i}"), 1, Work::Spin)))
        .build()
        .expect("a generated workload is valid")
}

/// A UUniFast set of `tasks` implicit-deadline tasks of total utilisation `utilisation` on
/// `cores` under global EDF.
pub fn gedf_workload(
    tasks: usize,
    cores: usize,
    utilisation: f64,
    horizon: Nanos,
    seed: u64,
) -> Result<Scenario, ScenarioError> {
    scenario(
        &format!("gedf-{tasks}x{cores}"),
        cores,
        PolicyName::Gedf,
        horizon,
        UUniFast::new(tasks, utilisation, seed).generate(),
    )
}

/// The simulator benchmark suite (issue 2): RR with 10,000 processes and a 1 ms quantum on 8
/// cores; CFS with 1,000 threads on 2, 8 and 64 cores; global EDF on UUniFast sets (20 tasks
/// on 4 cores at U = 3.0, 100 tasks on 16 cores and 1,000 on 64 cores, both at U = 0.75 m).
/// Horizons: 20 s (RR), 10 s (the others); `quick` shortens them tenfold (for CI) and
/// `horizon` overrides them all.
pub fn bench_workloads(quick: bool, horizon: Option<Nanos>) -> Vec<Workload> {
    let h = |secs: u64| {
        horizon.unwrap_or(if quick {
            Nanos::from_ms(secs * 100)
        } else {
            Nanos::from_secs(secs)
        })
    };
    let mut out = vec![Workload {
        name: "rr-10000x8".into(),
        unit: "events",
        target: 10e6,
        policy: PolicyName::Rr,
        cores: 8,
        horizon: h(20),
        kind: WorkloadKind::Processes(10_000),
    }];
    for cores in [2, 8, 64] {
        out.push(Workload {
            name: format!("cfs-1000x{cores}"),
            unit: "events",
            target: 2e6,
            policy: PolicyName::Cfs,
            cores,
            horizon: h(10),
            kind: WorkloadKind::Processes(1000),
        });
    }
    // The EEVDF model on the same workloads: issue 19 asks for at least 70 % of the CFS
    // model's events/s, so its target is 70 % of theirs.
    for cores in [2, 8, 64] {
        out.push(Workload {
            name: format!("eevdf-1000x{cores}"),
            unit: "events",
            target: 1.4e6,
            policy: PolicyName::Eevdf,
            cores,
            horizon: h(10),
            kind: WorkloadKind::Processes(1000),
        });
    }
    for (tasks, cores, utilisation) in [(20, 4, 3.0), (100, 16, 12.0), (1000, 64, 48.0)] {
        out.push(Workload {
            name: format!("gedf-{tasks}x{cores}"),
            unit: "jobs",
            target: 1e6,
            policy: PolicyName::Gedf,
            cores,
            horizon: h(10),
            kind: WorkloadKind::Tasks {
                tasks,
                utilisation,
                seed: 1,
            },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uunifast_sums_to_total_and_is_seeded() {
        let mut a = ChaCha8Rng::seed_from_u64(7);
        let mut b = ChaCha8Rng::seed_from_u64(7);
        let x = uunifast(&mut a, 20, 3.0);
        assert_eq!(x, uunifast(&mut b, 20, 3.0));
        assert_eq!(x.len(), 20);
        assert!((x.iter().sum::<f64>() - 3.0).abs() < 1e-9);
        assert!(x.iter().all(|&u| u >= 0.0));
    }

    #[test]
    fn uunifast_sets_are_implicit_deadline_and_near_target() {
        for seed in 0..20 {
            let ts = UUniFast::new(20, 3.0, seed).generate();
            assert_eq!(ts.len(), 20);
            assert_eq!(ts, UUniFast::new(20, 3.0, seed).generate());
            let u: f64 = ts.iter().map(|t| t.utilisation()).sum();
            // Rounding C to 1 us on periods >= 10 ms moves each u by at most 5e-5.
            assert!((u - 3.0).abs() < 20.0 * 5e-5 + 1e-9, "seed {seed}: {u}");
            for t in &ts {
                assert_eq!(t.deadline(), t.period());
                assert!(t.period() >= Nanos::from_ms(10) && t.period() <= Nanos::from_ms(100));
                assert_eq!(t.period().0 % 1_000_000, 0);
                assert!(t.utilisation() <= 1.0);
            }
        }
    }

    #[test]
    fn seed001_respects_the_papers_bounds() {
        for seed in 0..50 {
            let g = Seed001::new(2, (0.78, 0.80), seed);
            let ts = g.generate();
            assert_eq!(ts, g.generate(), "not deterministic");
            let total: f64 = ts.iter().map(|t| t.utilisation()).sum();
            assert!(
                (1.56 - 1e-3..=1.60 + 1e-9).contains(&total),
                "seed {seed}: {total}"
            );
            for t in &ts {
                assert!(t.period() >= Nanos::from_ms(100) && t.period() < Nanos::from_ms(150));
                let u = t.utilisation();
                assert!((0.1 - 1e-6..=0.4 + 1e-9).contains(&u), "u = {u}");
                assert_eq!(t.regions().len(), 3);
                let Region::Par(threads) = &t.regions()[1] else {
                    panic!("middle region must be parallel")
                };
                assert!((1..=6).contains(&threads.len()));
            }
        }
    }

    #[test]
    fn seed001_thread_counts_cover_one_to_3m() {
        let mut seen = [false; 13];
        for seed in 0..200 {
            for t in Seed001::new(4, (0.5, 0.6), seed).generate() {
                let Region::Par(v) = &t.regions()[1] else {
                    unreachable!()
                };
                seen[v.len()] = true;
            }
        }
        assert!(seen[1..=12].iter().all(|&s| s), "{seen:?}");
        assert!(!seen[0]);
    }

    #[test]
    fn seed001_small_and_impossible_windows() {
        // Only 0.1 fits below 0.1 x 1 core: one task at exactly u_min.
        let ts = Seed001::new(1, (0.08, 0.1), 1).try_generate().unwrap();
        assert_eq!(ts.len(), 1);
        assert!(Seed001::new(1, (0.01, 0.05), 1).try_generate().is_err());
    }

    #[test]
    fn bench_workloads_have_the_sizes_of_issues_2_and_19() {
        let w = bench_workloads(true, None);
        let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "rr-10000x8",
                "cfs-1000x2",
                "cfs-1000x8",
                "cfs-1000x64",
                "eevdf-1000x2",
                "eevdf-1000x8",
                "eevdf-1000x64",
                "gedf-20x4",
                "gedf-100x16",
                "gedf-1000x64"
            ]
        );
        let rr = w[0].scenario();
        assert_eq!(rr.processes().len(), 10_000);
        assert_eq!(rr.processes()[9999].name(), "p9999");
        assert_eq!(rr.policy().quantum(), Nanos::from_ms(1));
        assert_eq!(rr.horizon(), Nanos::from_secs(2));
        assert_eq!(w[3].scenario().cores(), 64);
        assert_eq!(w[6].scenario().cores(), 64);
        assert_eq!(w[6].scenario().policy().name(), PolicyName::Eevdf);
        let u: f64 = w[7]
            .scenario()
            .tasks()
            .iter()
            .map(|t| t.utilisation())
            .sum();
        assert!((u - 3.0).abs() < 1e-3);
        assert_eq!(w[9].scenario().tasks().len(), 1000);
    }

    #[test]
    fn toml_round_trips() {
        let tasks = Seed001::new(2, (0.58, 0.60), 3).generate();
        let s = scenario("gen", 2, PolicyName::Gedf, Nanos::from_secs(1), tasks).unwrap();
        let back = Scenario::parse("gen.toml", &tasks_toml(&s)).expect("parses");
        assert_eq!(back.cores(), 2);
        assert_eq!(back.horizon(), s.horizon());
        assert_eq!(back.policy().name(), PolicyName::Gedf);
        let strip = |ts: &[Task]| -> Vec<(String, Nanos, Nanos, Vec<Region>)> {
            ts.iter()
                .map(|t| {
                    let r = t.regions().to_vec();
                    (t.name().to_string(), t.period(), t.deadline(), r)
                })
                .collect()
        };
        assert_eq!(strip(back.tasks()), strip(s.tasks()));
    }
}
