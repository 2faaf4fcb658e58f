//! `schedkit experiment paws`: seed 001's experiment (Fonseca et al., section 5) on this
//! machine and in the simulator.
//!
//! Task sets come from the paper's generator ([`Seed001`]: `m` cores, `u_i` in [0.1, 0.4],
//! `T_i` in [100, 150] ms, `n_i = x * 3m` threads per parallel region, each job
//! `seq, par(n_i), seq` with its parts summing to `C_i`), `--sets` per utilisation window,
//! seeded (`--seed`; set `s` of window `w` uses seed `seed + 1000 w + s`), so every policy
//! runs the very same sets. Windows: the paper's four, read as total utilisation
//! ([0.28, 0.30] ... [0.83, 0.85]), and the same scaled by `m` (`m x` [0.28, 0.30] ...), where
//! the global-EDF bound `U <= m - u_max (m - 1)` (Goossens et al., the paper's [10]) is
//! checked per set and reported.
//!
//! Real runs (one after another, the policies interleaved per set so that machine noise
//! spreads evenly): `paws`, `gedf`, `ws` on the runtime's real-time pool (one pinned worker per
//! CPU, SCHED_FIFO), and `sched-deadline` (kernel threads under SCHED_DEADLINE); each run
//! releases jobs for `--duration` (default 1.5 s: 10 to 15 periods of every task) and waits for
//! the released jobs. Simulated runs: `paws`, `gedf`, `pedf` over `--sim-horizon`.
//!
//! Reported per window and policy: task sets with at least one deadline miss (the paper's
//! Table 1), average migrations and context switches per set (its Figs. 2 and 3; real runs:
//! the kernel's counts for the threads that ran the work, plus for the pool its own
//! user-level counts, charted as the sum), response-time percentiles over all jobs, and for
//! the pool the steals and the preemption latency. Charts: `paws-migrations.svg` and
//! `paws-switches.svg` in `--out`, with `paws.json` (everything, per set).

use crate::failure::{Failure, EXIT_BAD_INPUT};
use crate::output::table;
use crate::taskrun::{percentile, run_real, RealOptions};
use clap::{Args, ValueEnum};
use schedkit_core::generate::{scenario as gen_scenario, Seed001};
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, Task};
use schedkit_core::trace::{Event, Tee, TraceSink};
use schedkit_core::Nanos;
use schedkit_render::chart::{side_by_side, Axis, BarChart, BarSeries};
use schedkit_runtime::paws::PreemptionStages;
use serde_json::json;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// The paper's four windows of total utilisation.
pub const WINDOWS: [(f64, f64); 4] = [(0.28, 0.30), (0.58, 0.60), (0.78, 0.80), (0.83, 0.85)];

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WindowSet {
    /// The paper's windows as total utilisation.
    Paper,
    /// The same scaled by the number of cores.
    Scaled,
    Both,
}

#[derive(Args)]
pub struct PawsExpArgs {
    /// Cores `m` of the generated sets (default: this machine's CPUs; real runs use them all).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Task sets per window.
    #[arg(long, default_value_t = 20)]
    pub sets: usize,
    /// Release window of each real run.
    #[arg(long, default_value = "1500ms")]
    pub duration: String,
    /// Simulated window of each simulated run.
    #[arg(long, default_value = "10s")]
    pub sim_horizon: String,
    /// Base seed of the generator (and of the victim choice).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Windows to run.
    #[arg(long, value_enum, default_value = "both")]
    pub windows: WindowSet,
    /// Policies run on real cores.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "paws,gedf,ws,sched-deadline"
    )]
    pub real: Vec<String>,
    /// Policies run in the simulator.
    #[arg(long, value_delimiter = ',', default_value = "paws,gedf,pedf")]
    pub sim: Vec<String>,
    /// Simulator only (no root needed).
    #[arg(long)]
    pub sim_only: bool,
    /// A short run for CI: at most 2 sets per window, 300 ms real runs, 2 s simulated.
    #[arg(long)]
    pub quick: bool,
    /// Print everything as JSON on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Directory for paws.json, paws-migrations.svg and paws-switches.svg.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Run a stall witness beside every real run (SCHED_DEADLINE, 1 ms steps; see
    /// schedkit_linux::stall) and say which misses the machine's stalls explain. Its wake-ups
    /// preempt the threads under test and count in their kernel context switches.
    #[arg(long)]
    pub stall_witness: bool,
}

/// One utilisation window.
#[derive(Clone, Debug)]
struct Window {
    label: String,
    /// Total utilisation bounds.
    lo: f64,
    hi: f64,
    scaled: bool,
}

/// One run of one set under one policy.
#[derive(Clone, Debug, Default)]
struct Outcome {
    jobs: u64,
    misses: u64,
    /// Kernel (real) or simulated counts.
    migrations: u64,
    switches: u64,
    /// The pool's own counts (real pool runs only).
    user_migrations: Option<u64>,
    user_switches: Option<u64>,
    steals: Option<u64>,
    responses: Vec<u64>,
    preemption_latency: Vec<u64>,
    preemption_stages: Vec<[u64; 5]>,
    /// Why the policy could not run the set (P-EDF: no partition).
    rejected: Option<String>,
    /// With a stall witness: the misses its stalls do not explain, and how late it woke in
    /// each stall (ns).
    unexplained: Option<u64>,
    stalls: Vec<u64>,
}

impl Outcome {
    fn total_migrations(&self) -> u64 {
        self.migrations + self.user_migrations.unwrap_or(0)
    }
    fn total_switches(&self) -> u64 {
        self.switches + self.user_switches.unwrap_or(0)
    }
}

/// Collects every job's response time from a simulated trace.
#[derive(Default)]
struct Responses {
    open: HashMap<(usize, u64), Nanos>,
    out: Vec<u64>,
}

impl TraceSink for Responses {
    fn record(&mut self, e: &Event) {
        match *e {
            Event::JobRelease { t, task, job, .. } => {
                self.open.insert((task, job), t);
            }
            Event::JobFinish { t, task, job } => {
                if let Some(r) = self.open.remove(&(task, job)) {
                    self.out.push((t - r).0);
                }
            }
            _ => {}
        }
    }
}

fn sim_run(tasks: &[Task], m: usize, policy: PolicyName, horizon: Nanos, seed: u64) -> Outcome {
    let mut s = gen_scenario("experiment paws", m, policy, horizon, tasks.to_vec());
    s.policy.seed = seed;
    let mut metrics = Metrics::new(&s, "sim", m);
    let mut resp = Responses::default();
    let stats = {
        let mut tee = Tee(&mut metrics, &mut resp);
        match schedkit_sim::simulate(&s, &mut tee) {
            Ok(st) => st,
            Err(e) => {
                return Outcome {
                    rejected: Some(e.message),
                    ..Outcome::default()
                }
            }
        }
    };
    let r = metrics.finish(stats.end);
    Outcome {
        jobs: r.summary.jobs,
        misses: r.summary.deadline_misses,
        migrations: r.summary.migrations,
        switches: r.summary.context_switches,
        steals: stats
            .policy_counters
            .iter()
            .find(|c| c.0 == "steals")
            .map(|c| c.1),
        responses: resp.out,
        ..Outcome::default()
    }
}

fn real_outcome(tasks: &[Task], policy: PolicyName, o: &RealOptions) -> Result<Outcome, Failure> {
    let r = run_real(tasks, policy, o)?;
    let unexplained = r.stalls.is_some().then(|| r.unexplained_misses());
    for w in &r.warnings {
        eprintln!("schedkit: warning: {policy}: {w}");
    }
    Ok(Outcome {
        jobs: r.jobs.len() as u64,
        misses: r.misses(),
        migrations: r.kernel_migrations.unwrap_or(0),
        switches: r.kernel_switches.unwrap_or(0),
        user_migrations: r.user_migrations,
        user_switches: r.user_switches,
        steals: r.steals,
        responses: r.jobs.iter().map(|j| j.response()).collect(),
        preemption_latency: r.preemption_latency,
        preemption_stages: r.preemption_stages,
        rejected: None,
        unexplained,
        stalls: r.stalls.iter().flatten().map(|s| s.late_ns).collect(),
    })
}

/// The global-EDF bound of the paper's section 2.
fn gedf_bound_holds(tasks: &[Task], m: usize) -> bool {
    let u: f64 = tasks.iter().map(|t| t.utilisation()).sum();
    let umax = tasks.iter().map(|t| t.utilisation()).fold(0.0, f64::max);
    u <= m as f64 - umax * (m as f64 - 1.0) && umax <= 1.0
}

fn parse_policies(
    list: &[String],
    allowed: &[PolicyName],
    flag: &str,
) -> Result<Vec<PolicyName>, Failure> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            PolicyName::parse(s.trim())
                .filter(|p| allowed.contains(p))
                .ok_or_else(|| Failure {
                    status: EXIT_BAD_INPUT,
                    message: format!(
                        "{flag}: \"{s}\" is not one of {}",
                        allowed
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
        })
        .collect()
}

/// Aggregates of one (window, engine, policy) cell.
#[derive(Clone, Debug, Default)]
struct Cell {
    sets: usize,
    rejected: usize,
    sets_missing: usize,
    jobs: u64,
    misses: u64,
    migrations: Vec<u64>,
    switches: Vec<u64>,
    kernel_migrations: Vec<u64>,
    kernel_switches: Vec<u64>,
    steals: Vec<u64>,
    responses: Vec<u64>,
    latency: Vec<u64>,
    stages: Vec<[u64; 5]>,
    /// With a stall witness: sets with a miss that no stall explains, and every stall's
    /// lateness (ns).
    witnessed: bool,
    sets_unexplained: usize,
    stalls: Vec<u64>,
}

fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64
    }
}

impl Cell {
    fn add(&mut self, o: &Outcome) {
        if o.rejected.is_some() {
            self.rejected += 1;
            return;
        }
        self.sets += 1;
        self.sets_missing += (o.misses > 0) as usize;
        self.jobs += o.jobs;
        self.misses += o.misses;
        self.migrations.push(o.total_migrations());
        self.switches.push(o.total_switches());
        self.kernel_migrations.push(o.migrations);
        self.kernel_switches.push(o.switches);
        if let Some(s) = o.steals {
            self.steals.push(s);
        }
        self.responses.extend(&o.responses);
        self.latency.extend(&o.preemption_latency);
        self.stages.extend(&o.preemption_stages);
        if let Some(u) = o.unexplained {
            self.witnessed = true;
            self.sets_unexplained += (u > 0) as usize;
            self.stalls.extend(&o.stalls);
        }
    }
    fn table1(&self) -> String {
        if self.sets == 0 {
            return format!("- ({} rejected)", self.rejected);
        }
        let mut s = format!("{}/{}", self.sets_missing, self.sets);
        if self.witnessed && self.sets_missing > 0 {
            s += &format!(" ({} not stalls)", self.sets_unexplained);
        }
        if self.rejected > 0 {
            s += &format!(" ({} rej.)", self.rejected);
        }
        s
    }
    fn json(&self) -> serde_json::Value {
        let q = |p| percentile(&self.responses, p);
        json!({
            "sets": self.sets, "rejected": self.rejected, "sets_with_misses": self.sets_missing,
            "jobs": self.jobs, "misses": self.misses,
            "avg_migrations": mean(&self.migrations), "avg_context_switches": mean(&self.switches),
            "avg_kernel_migrations": mean(&self.kernel_migrations),
            "avg_kernel_context_switches": mean(&self.kernel_switches),
            "avg_steals": if self.steals.is_empty() { None } else { Some(mean(&self.steals)) },
            "response_p50_ns": q(50.0), "response_p90_ns": q(90.0), "response_p99_ns": q(99.0),
            "response_max_ns": q(100.0),
            "preemption_latency_p50_ns": percentile(&self.latency, 50.0),
            "preemption_latency_p99_ns": percentile(&self.latency, 99.0),
            "sets_with_unexplained_misses": self.witnessed.then_some(self.sets_unexplained),
            "stalls": self.witnessed.then_some(self.stalls.len()),
            "longest_stall_ns": self.stalls.iter().max(),
            "preemption_stages_ns": stage_percentiles(&self.stages)
                .into_iter()
                .map(|(name, p50, p99)| (name.to_string(), json!({ "p50": p50, "p99": p99 })))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
}

/// p50 and p99 of each preemption stage (name, p50 ns, p99 ns); empty without preemptions.
fn stage_percentiles(stages: &[[u64; 5]]) -> Vec<(&'static str, Option<u64>, Option<u64>)> {
    if stages.is_empty() {
        return Vec::new();
    }
    PreemptionStages::STAGE_NAMES
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let v: Vec<u64> = stages.iter().map(|s| s[k]).collect();
            (*name, percentile(&v, 50.0), percentile(&v, 99.0))
        })
        .collect()
}

pub fn run(a: PawsExpArgs) -> Result<(), Failure> {
    let bad = |m: String| Failure {
        status: EXIT_BAD_INPUT,
        message: m,
    };
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    let m = a.cores.unwrap_or(machine);
    if m == 0 {
        return Err(bad("--cores: at least 1".into()));
    }
    let (sets, duration, horizon) = if a.quick {
        (a.sets.min(2), Nanos::from_ms(300), Nanos::from_secs(2))
    } else {
        let d = Nanos::parse(&a.duration).map_err(|e| bad(format!("--duration: {e}")))?;
        let h = Nanos::parse(&a.sim_horizon).map_err(|e| bad(format!("--sim-horizon: {e}")))?;
        (a.sets, d, h)
    };
    if sets == 0 || duration.0 == 0 || horizon.0 == 0 {
        return Err(bad(
            "--sets, --duration and --sim-horizon must be greater than zero".into(),
        ));
    }
    let real = if a.sim_only {
        Vec::new()
    } else {
        parse_policies(&a.real, &crate::taskrun::REAL_TASK_POLICIES, "--real")?
    };
    let sim = parse_policies(
        &a.sim,
        &[
            PolicyName::Paws,
            PolicyName::Gedf,
            PolicyName::Pedf,
            PolicyName::Ws,
        ],
        "--sim",
    )?;
    if !real.is_empty() && m != machine {
        return Err(bad(format!(
            "--cores {m}: real runs use all {machine} CPUs of this machine; add --sim-only to \
             simulate {m} cores"
        )));
    }
    if real.contains(&PolicyName::SchedDeadline)
        && !schedkit_linux::privilege::Privileges::current().sys_nice
    {
        return Err(Failure {
            status: crate::run::EXIT_PRIVILEGE,
            message: "the sched-deadline baseline needs root or CAP_SYS_NICE (run as root, or \
                      leave it out with --real paws,gedf,ws, or simulate only with --sim-only)"
                .into(),
        });
    }
    let mut windows = Vec::new();
    if a.windows != WindowSet::Scaled {
        for &(lo, hi) in &WINDOWS {
            windows.push(Window {
                label: format!("{lo:.2}-{hi:.2}"),
                lo,
                hi,
                scaled: false,
            });
        }
    }
    if a.windows != WindowSet::Paper && !(m == 1 && a.windows == WindowSet::Both) {
        for &(lo, hi) in &WINDOWS {
            windows.push(Window {
                label: format!("{:.2}-{:.2} ({m}x)", lo * m as f64, hi * m as f64),
                lo: lo * m as f64,
                hi: hi * m as f64,
                scaled: true,
            });
        }
    }
    std::fs::create_dir_all(&a.out).map_err(|e| anyhow::anyhow!("{}: {e}", a.out.display()))?;

    // Generate every set first: a window the generator cannot reach is bad input, found
    // before anything runs.
    let mut all: Vec<Vec<(u64, Vec<Task>)>> = Vec::new();
    for (w, win) in windows.iter().enumerate() {
        let mut v = Vec::new();
        for s in 0..sets {
            let seed = a.seed + 1000 * w as u64 + s as u64;
            let tasks = Seed001::new(m, (win.lo / m as f64, win.hi / m as f64), seed)
                .try_generate()
                .map_err(bad)?;
            v.push((seed, tasks));
        }
        all.push(v);
    }

    let total = (windows.len() * sets * (real.len() + sim.len())) as u64;
    let bar = if std::io::stderr().is_terminal() && std::io::stdout().is_terminal() {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} · {msg} · ETA {eta}")
                .expect("template"),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let engines: Vec<(&str, PolicyName)> = real
        .iter()
        .map(|&p| ("real", p))
        .chain(sim.iter().map(|&p| ("sim", p)))
        .collect();
    let mut cells: Vec<Vec<Cell>> = vec![vec![Cell::default(); engines.len()]; windows.len()];
    let mut bound: Vec<usize> = vec![0; windows.len()];
    let mut per_set = Vec::new();
    let ropts = |seed| RealOptions {
        duration: Duration::from_nanos(duration.0),
        perf: true,
        seed,
        stall_witness: a.stall_witness,
    };
    for (w, win) in windows.iter().enumerate() {
        for (seed, tasks) in &all[w] {
            let holds = gedf_bound_holds(tasks, m);
            bound[w] += holds as usize;
            let mut row = serde_json::Map::new();
            for (e, &(engine, policy)) in engines.iter().enumerate() {
                bar.set_message(format!("{} · set {seed} · {engine} {policy}", win.label));
                let o = if engine == "real" {
                    match real_outcome(tasks, policy, &ropts(*seed)) {
                        Ok(o) => o,
                        // The kernel's admission control refused the set (its bandwidth with
                        // the budget margins is over what it admits): the run is reported as
                        // rejected, like a set P-EDF cannot partition.
                        Err(f)
                            if f.status == EXIT_BAD_INPUT
                                && policy == PolicyName::SchedDeadline =>
                        {
                            Outcome {
                                rejected: Some(f.message),
                                ..Outcome::default()
                            }
                        }
                        Err(f) => return Err(f),
                    }
                } else {
                    sim_run(tasks, m, policy, horizon, *seed)
                };
                cells[w][e].add(&o);
                row.insert(
                    format!("{engine} {policy}"),
                    json!({
                        "jobs": o.jobs, "misses": o.misses,
                        "migrations": o.migrations, "context_switches": o.switches,
                        "user_migrations": o.user_migrations, "user_context_switches": o.user_switches,
                        "steals": o.steals, "rejected": o.rejected,
                        "unexplained_misses": o.unexplained, "stall_late_ns": o.stalls,
                        "response_max_ns": o.responses.iter().max(),
                    }),
                );
                bar.inc(1);
            }
            let u: f64 = tasks.iter().map(|t| t.utilisation()).sum();
            per_set.push(json!({
                "window": win.label, "seed": seed, "tasks": tasks.len(), "utilisation": u,
                "u_max": tasks.iter().map(|t| t.utilisation()).fold(0.0, f64::max),
                "threads_per_region": tasks.iter().map(|t| t.regions.iter().map(|r| match r {
                    schedkit_core::scenario::Region::Par(v) => v.len(), _ => 0 }).max().unwrap_or(0)).collect::<Vec<_>>(),
                "gedf_bound_holds": holds, "runs": row,
            }));
        }
    }
    bar.finish_and_clear();

    // Tables: one row per window, one column per engine and policy.
    let names: Vec<String> = engines.iter().map(|(e, p)| format!("{e} {p}")).collect();
    let is_pool = |e: usize| engines[e].0 == "real" && engines[e].1 != PolicyName::SchedDeadline;
    let grid = |corner: &str, extra: Option<&str>, f: &dyn Fn(usize, &Cell) -> String| {
        let mut h: Vec<&str> = vec![corner];
        h.extend(names.iter().map(String::as_str));
        h.extend(extra);
        let mut t = table(&h);
        for (w, win) in windows.iter().enumerate() {
            let mut r = vec![win.label.clone()];
            r.extend((0..engines.len()).map(|e| f(e, &cells[w][e])));
            if extra.is_some() {
                r.push(format!("{}/{sets}", bound[w]));
            }
            t.add_row(r);
        }
        t
    };
    let t1 = grid("window (total U)", Some("G-EDF bound holds"), &|_, c| {
        c.table1()
    });
    let split = |e: usize, total: &[u64], kernel: &[u64]| {
        if is_pool(e) {
            format!("{:.0} ({:.0} k)", mean(total), mean(kernel))
        } else {
            format!("{:.0}", mean(total))
        }
    };
    let t2 = grid("window (total U)", None, &|e, c| {
        split(e, &c.migrations, &c.kernel_migrations)
    });
    let t3 = grid("window (total U)", None, &|e, c| {
        split(e, &c.switches, &c.kernel_switches)
    });
    let ms = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{:.1}", v as f64 / 1e6));
    let t4 = grid("window (total U)", None, &|_, c| {
        format!(
            "{} / {} / {}",
            ms(percentile(&c.responses, 50.0)),
            ms(percentile(&c.responses, 99.0)),
            ms(percentile(&c.responses, 100.0))
        )
    });
    let t5 = grid("window (total U)", None, &|_, c| {
        if c.steals.is_empty() {
            "-".into()
        } else {
            format!("{:.0}", mean(&c.steals))
        }
    });

    // Charts: Figs. 2 and 3, real and simulated side by side.
    let cats: Vec<String> = windows.iter().map(|w| w.label.clone()).collect();
    let chart = |engine: &str, title: &str, y: &str, f: &dyn Fn(&Cell) -> f64| {
        let mut c = BarChart::new(
            title,
            "utilisation window",
            Axis::new(y, "per task set"),
            cats.clone(),
        );
        for (e, &(en, p)) in engines.iter().enumerate() {
            if en == engine {
                c.series(BarSeries::new(
                    p.as_str(),
                    (0..windows.len()).map(|w| f(&cells[w][e])).collect(),
                ));
            }
        }
        c
    };
    let dur_label = format!("{duration}");
    let mut files = Vec::new();
    for (file, what, f) in [
        (
            "paws-migrations.svg",
            "migrations",
            (&|c: &Cell| mean(&c.migrations)) as &dyn Fn(&Cell) -> f64,
        ),
        ("paws-switches.svg", "context switches", &|c: &Cell| {
            mean(&c.switches)
        }),
    ] {
        let rc = chart(
            "real",
            &format!("Real ({m} CPUs, {dur_label} per run; pool: kernel + user level)"),
            &format!("avg {what}"),
            f,
        );
        let sc = chart(
            "sim",
            &format!("Simulated ({m} cores, {horizon} per run)"),
            &format!("avg {what}"),
            f,
        );
        let title =
            format!("Seed 001 experiment: average {what} per task set ({sets} sets per window)");
        let svg = match (real.is_empty(), sim.is_empty()) {
            (false, false) => side_by_side(&title, &[&rc, &sc], 760.0, 460.0),
            (false, true) => side_by_side(&title, &[&rc], 900.0, 460.0),
            _ => side_by_side(&title, &[&sc], 900.0, 460.0),
        };
        let path = a.out.join(file);
        std::fs::write(&path, svg).map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
        files.push(path);
    }

    let doc = json!({
        "cores": m, "sets_per_window": sets, "seed": a.seed,
        "real_duration_ns": duration.0, "sim_horizon_ns": horizon.0,
        "windows": windows.iter().enumerate().map(|(w, win)| json!({
            "label": win.label, "u_min": win.lo, "u_max": win.hi, "scaled_by_m": win.scaled,
            "gedf_bound_holds_sets": bound[w],
            "policies": engines.iter().enumerate().map(|(e, (en, p))| {
                let mut v = cells[w][e].json();
                v["engine"] = json!(en);
                v["policy"] = json!(p.as_str());
                v
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "sets": per_set,
    });
    let jpath = a.out.join("paws.json");
    std::fs::write(&jpath, serde_json::to_string_pretty(&doc).expect("json"))
        .map_err(|e| anyhow::anyhow!("write {}: {e}", jpath.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else {
        println!(
            "seed 001 experiment: m = {m}, {sets} task sets per window (seed {}), real runs of {} \
             (jobs released for that long, then run to completion), simulated runs of {}\n",
            a.seed, duration, horizon
        );
        println!("Table 1: task sets with at least one deadline miss\n{t1}\n");
        if a.stall_witness {
            let all: Vec<u64> = cells
                .iter()
                .flatten()
                .flat_map(|c| c.stalls.clone())
                .collect();
            println!(
                "Stall witness: {} machine stalls over 2 ms seen during the real runs (longest \
                 {:.1} ms); \"not stalls\": sets with a miss that the stalls during the job do \
                 not explain\n",
                all.len(),
                all.iter().max().copied().unwrap_or(0) as f64 / 1e6
            );
        }
        println!(
            "Fig. 2: average migrations per task set (real pool: kernel + user level, kernel \
             alone in parentheses)\n{t2}\n"
        );
        println!("Fig. 3: average context switches per task set (same convention)\n{t3}\n");
        println!("Response time over all jobs, p50 / p99 / max (ms)\n{t4}\n");
        println!("Average steals per task set\n{t5}\n");
        for c in (0..engines.len()).filter(|&e| is_pool(e)) {
            let lat: Vec<u64> = cells.iter().flat_map(|w| w[c].latency.clone()).collect();
            if let (Some(p50), Some(p99)) = (percentile(&lat, 50.0), percentile(&lat, 99.0)) {
                println!(
                    "{}: preemption latency (release to first instruction of a preempting job) \
                     p50 {:.1} us, p99 {:.1} us over {} preemptions",
                    names[c],
                    p50 as f64 / 1e3,
                    p99 as f64 / 1e3,
                    lat.len()
                );
                let stages: Vec<[u64; 5]> =
                    cells.iter().flat_map(|w| w[c].stages.clone()).collect();
                let by_stage: Vec<String> = stage_percentiles(&stages)
                    .into_iter()
                    .map(|(name, p50, p99)| {
                        let us = |x: Option<u64>| x.map_or(0.0, |x| x as f64 / 1e3);
                        format!("{name} {:.1} / {:.1}", us(p50), us(p99))
                    })
                    .collect();
                if !by_stage.is_empty() {
                    println!("  by stage, p50 / p99 us: {}", by_stage.join(", "));
                }
            }
        }
        for f in &files {
            println!("chart: {}", f.display());
        }
        println!("json: {}", jpath.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_percentiles_name_every_stage_and_take_each_column() {
        assert!(stage_percentiles(&[]).is_empty());
        // Stage k of preemption i is (k + 1) * (i + 1) us.
        let stages: Vec<[u64; 5]> = (1..=100u64)
            .map(|i| std::array::from_fn(|k| (k as u64 + 1) * i * 1000))
            .collect();
        let got = stage_percentiles(&stages);
        let names: Vec<&str> = got.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names, ["timer", "request", "reach", "pick", "switch"]);
        for (k, (_, p50, p99)) in got.into_iter().enumerate() {
            let col: Vec<u64> = stages.iter().map(|s| s[k]).collect();
            assert_eq!(p50, percentile(&col, 50.0));
            assert_eq!(p99, percentile(&col, 99.0));
            assert!(p50.unwrap() < p99.unwrap());
        }
    }
}
