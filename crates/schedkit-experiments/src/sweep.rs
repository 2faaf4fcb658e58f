//! `schedkit sim FILE --sweep seeds=A..B --utilisations FROM..TO:STEP [--policies P,Q]
//! [--generator seed001|uunifast:N] [--json]`: a parameter sweep over generated task sets.
//!
//! FILE supplies the machine (`cores`), the simulated time (`[run] horizon`), the default
//! policy and its parameters; its own tasks and processes are replaced, at every point of the
//! sweep, by a task set drawn from the generator with that point's seed and normalised
//! utilisation `u` (a fraction of the machine):
//! - `seed001` (default): seed 001's generator (u_i in [0.1, 0.4], periods 100-150 ms,
//!   fork-join jobs with up to 3m threads), total utilisation window `[u - 0.02, u] x cores`
//!   (the paper's windows are 0.02 wide);
//! - `uunifast:N`: N sequential implicit-deadline tasks, total utilisation `u x cores`.
//!
//! Every policy runs on the *same* task set at each point (paired comparison). Points run in
//! parallel on all cores (rayon); results are collected in sweep order, so the output is
//! identical for any number of threads. A partitioned policy that cannot pack a set counts
//! that set as rejected (unschedulable) rather than failing the sweep.
//!
//! The table has one row per utilisation and policy: sets, sets with at least one deadline
//! miss (and their percentage), rejected sets, the job miss ratio (missed jobs / released
//! jobs), and mean migrations and context switches per set (seed 001's overhead metrics).

use crate::progress::Progress;
use crate::Error;
use comfy_table::{presets::UTF8_BORDERS_ONLY, CellAlignment, Table};
use rayon::prelude::*;
use schedkit_core::generate::{Seed001, UUniFast};
use schedkit_core::scenario::{PolicyName, Scenario, Task};
use serde::{Deserialize, Serialize};

/// What to sweep, as `schedkit sim`'s flags spell it (the binary's `SweepArgs` convert).
#[derive(Clone, Debug, Default)]
pub struct SweepOptions {
    /// Sweep generated task sets instead of simulating FILE's own work: `seeds=A..B`
    /// (inclusive), one task set per seed and utilisation. FILE gives cores, horizon, policy.
    pub sweep: Option<String>,
    /// Normalised utilisations for --sweep (fractions of the machine): `FROM..TO:STEP`
    /// (inclusive) or a list `0.3,0.6,0.9`. Default `0.1..1.0:0.1`.
    pub utilisations: Option<String>,
    /// Policies to compare in --sweep, e.g. `gedf,pedf` (default: FILE's policy).
    pub policies: Vec<String>,
    /// Task-set generator for --sweep: `seed001` (seed 001's generator, window
    /// [u - 0.02, u] x cores) or `uunifast:N` (N tasks, U = u x cores).
    pub generator: String,
}

fn bad(flag: &str, value: &str, why: impl std::fmt::Display) -> Error {
    Error::bad_option(flag, value, why)
}

/// `seeds=A..B` -> A..=B.
pub fn parse_seeds(s: &str) -> Result<std::ops::RangeInclusive<u64>, Error> {
    let range = s
        .strip_prefix("seeds=")
        .ok_or_else(|| bad("sweep", s, "expected `seeds=A..B`, e.g. seeds=1..500"))?;
    let (a, b) = range
        .split_once("..")
        .ok_or_else(|| bad("sweep", s, "expected `seeds=A..B`, e.g. seeds=1..500"))?;
    let a: u64 = a
        .trim()
        .parse()
        .map_err(|e| bad("sweep", s, format!("first seed: {e}")))?;
    let b: u64 = b
        .trim()
        .trim_start_matches('=')
        .parse()
        .map_err(|e| bad("sweep", s, format!("last seed: {e}")))?;
    if b < a {
        return Err(bad("sweep", s, "the last seed is smaller than the first"));
    }
    Ok(a..=b)
}

/// `FROM..TO:STEP` (inclusive, values rounded to 1e-9) or `a,b,c`.
pub fn parse_utilisations(s: &str) -> Result<Vec<f64>, Error> {
    let num = |x: &str| -> Result<f64, Error> {
        let v: f64 = x
            .trim()
            .parse()
            .map_err(|e| bad("utilisations", s, format!("`{x}`: {e}")))?;
        if v.is_nan() || v <= 0.0 || v > 1.0 {
            return Err(bad(
                "utilisations",
                s,
                format!("{v} is not a fraction of the machine in (0, 1]"),
            ));
        }
        Ok(v)
    };
    if let Some((range, step)) = s.split_once(':') {
        let (a, b) = range
            .split_once("..")
            .ok_or_else(|| bad("utilisations", s, "expected FROM..TO:STEP"))?;
        let (a, b) = (num(a)?, num(b)?);
        let step: f64 = step
            .trim()
            .parse()
            .map_err(|e| bad("utilisations", s, format!("step: {e}")))?;
        // `is_nan` too: NaN compares false with everything.
        if step <= 0.0 || step.is_nan() || b < a {
            return Err(bad(
                "utilisations",
                s,
                "needs FROM <= TO and a positive STEP",
            ));
        }
        let n = ((b - a) / step + 1e-9).floor() as usize + 1;
        Ok((0..n)
            .map(|i| ((a + i as f64 * step) * 1e9).round() / 1e9)
            .collect())
    } else {
        s.split(',').map(num).collect()
    }
}

/// Which task sets to draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Generator {
    Seed001,
    UUniFast(usize),
}

pub fn parse_generator(s: &str) -> Result<Generator, Error> {
    if s == "seed001" {
        return Ok(Generator::Seed001);
    }
    if let Some(n) = s.strip_prefix("uunifast:") {
        let n: usize = n
            .parse()
            .map_err(|e| bad("generator", s, format!("task count: {e}")))?;
        if n == 0 {
            return Err(bad("generator", s, "needs at least one task"));
        }
        return Ok(Generator::UUniFast(n));
    }
    Err(bad("generator", s, "expected `seed001` or `uunifast:N`"))
}

fn draw(g: Generator, cores: usize, u: f64, seed: u64) -> Result<Vec<Task>, String> {
    match g {
        Generator::Seed001 => Seed001::new(cores, ((u - 0.02).max(0.0), u), seed).try_generate(),
        Generator::UUniFast(n) => {
            let total = u * cores as f64;
            if total > n as f64 {
                return Err(format!(
                    "uunifast:{n} cannot reach utilisation {total} (at most 1 per task)"
                ));
            }
            Ok(UUniFast::new(n, total, seed).generate())
        }
    }
}

/// One (utilisation, policy) row.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Row {
    pub utilisation: f64,
    pub policy: String,
    pub sets: u64,
    /// Sets with at least one deadline miss (rejected sets not included).
    pub sets_with_misses: u64,
    /// Sets the policy could not run (a partitioned policy that found no packing).
    pub rejected: u64,
    pub jobs: u64,
    pub deadline_misses: u64,
    pub migrations: u64,
    pub context_switches: u64,
}

impl Row {
    /// The row of `policy` at `utilisation` before any set is counted (what a sweep sums
    /// into; also the column template of the `sweep` table).
    pub fn empty(utilisation: f64, policy: String) -> Row {
        Row {
            utilisation,
            policy,
            sets: 0,
            sets_with_misses: 0,
            rejected: 0,
            jobs: 0,
            deadline_misses: 0,
            migrations: 0,
            context_switches: 0,
        }
    }

    /// Fraction of sets that were rejected or missed a deadline.
    pub fn unschedulable(&self) -> f64 {
        (self.sets_with_misses + self.rejected) as f64 / self.sets.max(1) as f64
    }
    pub fn job_miss_ratio(&self) -> f64 {
        self.deadline_misses as f64 / self.jobs.max(1) as f64
    }
}

/// The outcome of one policy on one task set.
#[derive(Clone, Copy)]
enum Outcome {
    Ran {
        jobs: u64,
        misses: u64,
        migrations: u64,
        switches: u64,
    },
    Rejected,
}

/// Runs the sweep over `base` (the machine, horizon and default policy).
pub fn sweep(base: &Scenario, args: &SweepOptions) -> Result<Vec<Row>, Error> {
    sweep_with_progress(base, args, &crate::progress::Silent)
}

/// [`sweep`], reporting progress to `progress` (from the worker threads): one step per task
/// set run under every policy.
pub fn sweep_with_progress(
    base: &Scenario,
    args: &SweepOptions,
    progress: &dyn Progress,
) -> Result<Vec<Row>, Error> {
    let spec = args.sweep.as_deref().unwrap_or_default();
    let seeds = parse_seeds(spec)?;
    let us = parse_utilisations(args.utilisations.as_deref().unwrap_or("0.1..1.0:0.1"))?;
    let generator = parse_generator(&args.generator)?;
    let policies: Vec<PolicyName> = if args.policies.is_empty() {
        vec![base.policy().name()]
    } else {
        args.policies
            .iter()
            .map(|p| {
                PolicyName::parse(p.trim())
                    .ok_or_else(|| bad("policies", p, "unknown policy (see docs/scenario.md)"))
            })
            .collect::<Result<_, _>>()?
    };
    // Check every policy and generator once, up front, so bad input fails before the work.
    for &u in &us {
        draw(generator, base.cores(), u, *seeds.start())
            .map_err(|e| bad("utilisations", &u.to_string(), e))?;
    }
    for &p in &policies {
        if !schedkit_sim::policies::SIM_POLICIES.contains(&p) {
            return Err(bad("policies", p.as_str(), "not a simulator policy"));
        }
    }

    let points: Vec<(usize, u64)> = (0..us.len())
        .flat_map(|i| seeds.clone().map(move |s| (i, s)))
        .collect();
    progress.start(points.len() as u64);
    let outcomes: Vec<Result<Vec<Outcome>, Error>> = points
        .par_iter()
        .map(|&(i, seed)| {
            let tasks = draw(generator, base.cores(), us[i], seed)
                .map_err(|e| bad("utilisations", &us[i].to_string(), e))?;
            let set = base.to_builder().without_work().tasks(tasks);
            let mut out = Vec::with_capacity(policies.len());
            for &p in &policies {
                let s = set
                    .clone()
                    .with_policy(base.policy().clone().with_name(p))
                    .build()?;
                out.push(match schedkit_sim::simulate_report(&s, false) {
                    Ok((r, _, _)) => Outcome::Ran {
                        jobs: r.summary.jobs,
                        misses: r.summary.deadline_misses,
                        migrations: r.summary.migrations,
                        switches: r.summary.context_switches,
                    },
                    // Building the policy is the only step that can fail on a valid scenario:
                    // a partitioned policy that finds no packing.
                    Err(_) => Outcome::Rejected,
                });
            }
            progress.step();
            Ok(out)
        })
        .collect();
    progress.finish();

    let mut rows: Vec<Row> = us
        .iter()
        .flat_map(|&u| {
            policies
                .iter()
                .map(move |p| Row::empty(u, p.as_str().to_string()))
        })
        .collect();
    for (&(i, _), res) in points.iter().zip(outcomes) {
        for (k, o) in res?.into_iter().enumerate() {
            let row = &mut rows[i * policies.len() + k];
            row.sets += 1;
            match o {
                Outcome::Ran {
                    jobs,
                    misses,
                    migrations,
                    switches,
                } => {
                    row.jobs += jobs;
                    row.deadline_misses += misses;
                    row.migrations += migrations;
                    row.context_switches += switches;
                    if misses > 0 {
                        row.sets_with_misses += 1;
                    }
                }
                Outcome::Rejected => row.rejected += 1,
            }
        }
    }
    Ok(rows)
}

/// The sweep table.
pub fn render(base: &Scenario, args: &SweepOptions, rows: &[Row]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    let header = [
        "utilisation",
        "policy",
        "sets",
        "sets missing",
        "% sets missing",
        "rejected",
        "jobs",
        "job miss %",
        "migrations/set",
        "switches/set",
    ];
    t.set_header(header.to_vec());
    for i in 0..header.len() {
        if i != 1 {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    for r in rows {
        let per_set = |x: u64| format!("{:.1}", x as f64 / (r.sets - r.rejected).max(1) as f64);
        t.add_row(vec![
            format!("{:.2}", r.utilisation),
            r.policy.clone(),
            r.sets.to_string(),
            r.sets_with_misses.to_string(),
            format!("{:.1}", r.unschedulable() * 100.0),
            r.rejected.to_string(),
            r.jobs.to_string(),
            format!("{:.3}", r.job_miss_ratio() * 100.0),
            per_set(r.migrations),
            per_set(r.context_switches),
        ]);
    }
    format!(
        "sweep of {} · {} cores · {} per set · generator {} · {}\n\
         (% sets missing counts rejected sets as unschedulable)\n{t}\n",
        base.file(),
        base.cores(),
        base.horizon(),
        args.generator,
        args.sweep.as_deref().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seed_ranges_and_utilisation_steps() {
        assert_eq!(parse_seeds("seeds=1..500").ok(), Some(1..=500));
        assert!(parse_seeds("1..500").is_err());
        assert!(parse_seeds("seeds=5..1").is_err());
        let us = parse_utilisations("0.1..1.0:0.1").ok().unwrap();
        assert_eq!(us.len(), 10);
        assert_eq!(us[0], 0.1);
        assert_eq!(us[9], 1.0);
        assert_eq!(us[2], 0.3, "no floating-point drift");
        assert_eq!(parse_utilisations("0.3,0.6").ok(), Some(vec![0.3, 0.6]));
        assert!(parse_utilisations("0..1:0.1").is_err());
        assert!(parse_utilisations("0.1..1.5:0.1").is_err());
        assert_eq!(
            parse_generator("uunifast:20").ok(),
            Some(Generator::UUniFast(20))
        );
        assert!(parse_generator("simso").is_err());
    }

    fn base() -> Scenario {
        Scenario::parse(
            "base.toml",
            "cores = 2\n[policy]\nname = \"gedf\"\n[run]\nhorizon = \"600ms\"\n",
        )
        .unwrap()
    }

    #[test]
    fn sweep_counts_sets_and_is_deterministic() {
        let args = SweepOptions {
            sweep: Some("seeds=1..6".into()),
            utilisations: Some("0.3,0.95".into()),
            policies: vec!["gedf".into(), "pedf".into()],
            generator: "uunifast:4".into(),
        };
        let rows = sweep(&base(), &args).ok().unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.sets == 6));
        // At 30 % of two cores both policies meet every deadline.
        assert_eq!(rows[0].sets_with_misses + rows[0].rejected, 0);
        assert_eq!(rows[1].sets_with_misses + rows[1].rejected, 0);
        assert!(rows[0].jobs > 0);
        // Partitioned never migrates.
        assert_eq!(rows[3].migrations, 0);
        assert_eq!(rows, sweep(&base(), &args).ok().unwrap());
        let text = render(&base(), &args, &rows);
        assert!(text.contains("pedf"));
    }
}
