//! The machine's other work in the simulated runs: what ran on the job's CPUs during the real
//! runs besides the job and schedkit (kernel threads, daemons, other sessions), measured by the
//! real engine ([`Outside`], from every other task's schedstat at the window's start and end),
//! and a stand-in for it in the simulated scenario ([`with_outside_work`]).
//!
//! Why it is modelled: the kernel's wake-up tails are made by it. Traced on this machine
//! (docs/results/fidelity.md, "Other work on the job's CPUs"): in affinity-sleeper the roamer's
//! four longest waits were behind `kdamond` and a `kworker`; in sleepers-hogs, other tasks'
//! runs (about 30 per second per CPU, 0.2-0.35 ms each on average) move each CPU's
//! sleeper-and-hog cycle between its regimes, one of which makes a waking sleeper wait for the
//! next tick (3.3-3.7 ms). Without them the model's cycles are exact and lock: one CPU of
//! sleepers-hogs never had a long wait at all.
//!
//! The stand-in: on each simulated core, one real-time thread pinned there, whose runs
//! arrive as a Poisson process at the measured rate divided among the cores; each run is one
//! of the measured tasks' (drawn in proportion to their rates) and lasts an exponentially
//! distributed time of that task's mean run (the real engine measures each task's count and
//! total only, and these are the distributions that assume nothing more; a file recorded
//! before the per-task counts draws every run with the overall mean). Real-time, not a
//! nice-0 fair thread: with the job's autogroup at nice -20 (weight 88,761) a root-level
//! task of weight 1,024 hardly counts in the loads the balancer compares, as a real-time task
//! does not, and it gets its CPU within a slice; a group-less model with a fair stand-in
//! moved the job's threads for it (docs/results/fidelity.md). The random draws come from a
//! ChaCha stream seeded by the scenario's `[policy] seed`, the draw and the core, so a
//! replay is reproducible. [`super::sim_measure`] leaves it out of every metric.

use super::Measure;
use crate::Error;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schedkit_core::scenario::{Class, Phase, Process, Scenario, Work};
use schedkit_core::Nanos;
use serde::{Deserialize, Serialize};

/// The stand-ins' process names: this, a dash and the core (`other-work-0`).
pub const OTHER_WORK: &str = "other-work";

/// Other work on the job's CPUs during one real run: the tasks outside the job and outside
/// schedkit, their runs weighted by the share of the job's CPUs among the CPUs each may use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outside {
    /// Their runs (schedstat timeslices) per second of the window, all the job's CPUs
    /// together.
    pub runs_per_s: f64,
    /// Their CPU time per second of the window (ms/s: 10 is 1 % of one CPU), all the job's
    /// CPUs together.
    pub busy_ms_per_s: f64,
    /// The same per task (absent in files recorded before it was measured: then every run
    /// is drawn with the overall mean length).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_task: Vec<OutsideTask>,
}

/// One other task's share of [`Outside`]: its runs per second and their mean length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutsideTask {
    pub runs_per_s: f64,
    pub mean_run_us: f64,
}

impl Outside {
    /// The mean over the repeats that measured it (`None` when none did): the totals
    /// averaged, and every repeat's tasks together, each at its rate over the repeats.
    pub fn mean(reals: &[Measure]) -> Option<Outside> {
        let xs: Vec<&Outside> = reals.iter().filter_map(|m| m.outside.as_ref()).collect();
        (!xs.is_empty()).then(|| {
            let n = xs.len() as f64;
            Outside {
                runs_per_s: xs.iter().map(|o| o.runs_per_s).sum::<f64>() / n,
                busy_ms_per_s: xs.iter().map(|o| o.busy_ms_per_s).sum::<f64>() / n,
                by_task: xs
                    .iter()
                    .flat_map(|o| o.by_task.iter())
                    .map(|t| OutsideTask {
                        runs_per_s: t.runs_per_s / n,
                        mean_run_us: t.mean_run_us,
                    })
                    .collect(),
            }
        })
    }

    /// A run's length, ns: with the tasks measured, whose run it is drawn in proportion to
    /// their rates and its length exponential with that task's mean; without, exponential
    /// with the overall mean. `u` and `pick` are uniform draws in (0, 1].
    fn run_ns(&self, pick: f64, u: f64) -> f64 {
        let total: f64 = self.by_task.iter().map(|t| t.runs_per_s).sum();
        let mean = if total > 0.0 {
            let mut left = pick * total;
            self.by_task
                .iter()
                .find(|t| {
                    left -= t.runs_per_s;
                    left <= 0.0
                })
                .or(self.by_task.last())
                .map_or(0.0, |t| t.mean_run_us * 1e3)
        } else {
            self.mean_run_ns().unwrap_or(0.0)
        };
        -mean * u.ln()
    }

    /// The mean length of a run, ns (`None` without runs).
    pub fn mean_run_ns(&self) -> Option<f64> {
        (self.runs_per_s > 0.0).then(|| self.busy_ms_per_s * 1e6 / self.runs_per_s)
    }
}

/// The shortest phase the stand-in draws: the simulator's phases are whole nanoseconds, and
/// a run of nothing would not be a run.
const MIN_PHASE_NS: f64 = 1_000.0;

/// `sc` with one stand-in per core for the other work `o` (module docs), the `draw`-th of
/// its random draws; `sc` itself when `o` has no runs.
pub fn with_outside_work(sc: &Scenario, o: &Outside, draw: u64) -> Result<Scenario, Error> {
    if o.mean_run_ns().is_none() {
        return Ok(sc.clone());
    }
    let cores = sc.cores().max(1);
    let rate_per_ns = o.runs_per_s / cores as f64 / 1e9;
    // The pattern repeats after its last phase: draw past the horizon so that it never does
    // within the run.
    let cover = sc.horizon().0 as f64 + 1e9;
    let mut b = sc.to_builder();
    for core in 0..cores {
        // One stream per (seed, draw, core).
        let mut rng = ChaCha8Rng::seed_from_u64(
            sc.policy().seed() ^ (draw << 32) ^ (0x6f74_6865_7200 + core as u64),
        );
        // Uniform draws in (0, 1] (inverse transforms take their logarithm).
        let mut unit = || 1.0 - rng.gen::<f64>();
        let (mut phases, mut t) = (Vec::new(), 0.0);
        while t < cover {
            let gap = Nanos((-unit().ln() / rate_per_ns).max(MIN_PHASE_NS) as u64);
            // Which task's run it is takes a draw only where tasks were measured, so a file
            // recorded without them replays the same stand-in as before they were.
            let pick = if o.by_task.is_empty() { 1.0 } else { unit() };
            let run = Nanos(o.run_ns(pick, unit()).max(MIN_PHASE_NS) as u64);
            t += (gap.0 + run.0) as f64;
            phases.push(Phase::Sleep(gap));
            phases.push(Phase::Run(run));
        }
        b = b.process(
            Process::new(format!("{OTHER_WORK}-{core}"), 1, Work::Spin)
                .with_pattern(phases)
                .with_cpus(vec![core])
                .with_class(Class::Fifo),
        );
    }
    Ok(b.build()?)
}

/// The mean of simulated draws of one scenario under one model, as the real repeats are
/// averaged (`judge.rs`): geometric for the wake-up latencies, arithmetic for the rest.
pub fn mean_of_draws(ms: &[Measure]) -> Measure {
    let n = ms.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Measure) -> f64| ms.iter().map(f).sum::<f64>() / n;
    // A draw with no wait at all (0) makes the geometric mean 0, as it is.
    let geo = |f: &dyn Fn(&Measure) -> Option<f64>| -> Option<f64> {
        let xs: Vec<f64> = ms.iter().filter_map(f).collect();
        (xs.len() == ms.len() && !xs.is_empty()).then(|| {
            if xs.iter().any(|&x| x <= 0.0) {
                0.0
            } else {
                (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
            }
        })
    };
    let first = ms.first().cloned().unwrap_or_default();
    let each = |len: usize, f: &dyn Fn(&Measure, usize) -> f64| -> Vec<f64> {
        (0..len).map(|i| mean(&|m| f(m, i))).collect()
    };
    let responses: Vec<f64> = ms.iter().filter_map(|m| m.response_ms).collect();
    Measure {
        share_pct: each(first.share_pct.len(), &|m, i| m.share_pct[i]),
        job_pct: mean(&|m| m.job_pct),
        wait_ms: each(first.wait_ms.len(), &|m, i| m.wait_ms[i]),
        wait_all_ms: mean(&|m| m.wait_all_ms),
        response_ms: (responses.len() == ms.len() && !responses.is_empty())
            .then(|| responses.iter().sum::<f64>() / n),
        wake_p50_us: geo(&|m| m.wake_p50_us),
        wake_p99_us: geo(&|m| m.wake_p99_us),
        wakeups: (mean(&|m| m.wakeups as f64)).round() as usize,
        switches_per_s: mean(&|m| m.switches_per_s),
        migrations_per_s: mean(&|m| m.migrations_per_s),
        names: first.names,
        outside: None,
    }
}

/// The other work each scenario's real runs met, as the simulated runs replay it: a table,
/// or the sentence that says it was not measured (a file recorded before it was).
pub fn render_other_work(real: &[(String, Vec<Measure>)]) -> String {
    let rows: Vec<(&str, Outside)> = real
        .iter()
        .filter_map(|(n, reps)| Some((n.as_str(), Outside::mean(reps)?)))
        .collect();
    if rows.is_empty() {
        return "\nother work on the job's CPUs: not measured in these real runs; simulated \
                without it\n"
            .to_string();
    }
    let mut out = String::from(
        "\nother work on the job's CPUs during the real runs (tasks outside the job and \
         schedkit; mean of the repeats),\nsimulated as a real-time stand-in per core \
         (Poisson runs, each of a measured task's mean length, exponential), one draw per \
         real repeat:\n",
    );
    out += &format!(
        "{:<22} {:>8} {:>10} {:>12}\n",
        "scenario", "runs/s", "CPU ms/s", "mean run us"
    );
    for (name, o) in &rows {
        out += &format!(
            "{:<22} {:>8.1} {:>10.2} {:>12.0}\n",
            name,
            o.runs_per_s,
            o.busy_ms_per_s,
            o.mean_run_ns().unwrap_or(0.0) / 1e3
        );
    }
    let missing: Vec<&str> = real
        .iter()
        .filter(|(_, reps)| Outside::mean(reps).is_none())
        .map(|(n, _)| n.as_str())
        .collect();
    if !missing.is_empty() {
        out += &format!(
            "not measured (simulated without it): {}\n",
            missing.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        let text = "cores = 2\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"2s\"\n\
                    [[process]]\nname = \"hog\"\nthreads = 2\n";
        Scenario::parse("t.toml", text).unwrap()
    }

    #[test]
    fn the_stand_in_runs_what_was_measured_on_each_core() {
        // 60 runs/s of 0.3 ms on two CPUs: 30 runs/s and 9 ms/s per core.
        let o = Outside {
            runs_per_s: 60.0,
            busy_ms_per_s: 18.0,
            ..Outside::default()
        };
        let s = with_outside_work(&scenario(), &o, 0).unwrap();
        assert_eq!(s.processes().len(), 3);
        for (core, p) in s.processes()[1..].iter().enumerate() {
            assert_eq!(p.name(), format!("other-work-{core}"));
            assert_eq!(p.cpus(), Some(&[core][..]));
            let phases = p.pattern().unwrap();
            let (mut runs, mut run_ns, mut t) = (0u32, 0u64, 0u64);
            for ph in phases {
                match ph {
                    Phase::Run(d) => {
                        if t < 2_000_000_000 {
                            runs += 1;
                            run_ns += d.0;
                        }
                        t += d.0;
                    }
                    Phase::Sleep(d) => t += d.0,
                }
            }
            // Poisson: 60 runs expected in 2 s (sd 7.7); 18 ms of CPU (sd about 3.3 ms).
            assert!((35..=85).contains(&runs), "core {core}: {runs} runs");
            assert!(
                (6e6..30e6).contains(&(run_ns as f64)),
                "core {core}: {run_ns} ns"
            );
            // Drawn past the horizon, so the pattern does not repeat inside the run.
            assert!(t > 2_000_000_000);
        }
        // Another draw differs.
        let other = with_outside_work(&scenario(), &o, 1).unwrap();
        assert_ne!(
            format!("{:?}", other.processes()[1].pattern()),
            format!("{:?}", s.processes()[1].pattern())
        );
        // The same seed draws the same stand-in; the two cores' draws differ.
        let again = with_outside_work(&scenario(), &o, 0).unwrap();
        assert_eq!(
            format!("{:?}", again.processes()[1].pattern()),
            format!("{:?}", s.processes()[1].pattern())
        );
        assert_ne!(
            format!("{:?}", s.processes()[1].pattern()),
            format!("{:?}", s.processes()[2].pattern())
        );
    }

    #[test]
    fn draws_average_as_the_real_repeats_do() {
        let m = |share: f64, p99: f64| Measure {
            names: vec!["a".into(), "b".into()],
            share_pct: vec![share, 100.0 - share],
            wake_p99_us: Some(p99),
            migrations_per_s: share / 10.0,
            ..Measure::default()
        };
        let avg = mean_of_draws(&[m(40.0, 10.0), m(60.0, 1000.0)]);
        assert_eq!(avg.share_pct, vec![50.0, 50.0]);
        assert!((avg.migrations_per_s - 5.0).abs() < 1e-12);
        // Geometric: sqrt(10 * 1000) = 100.
        assert!((avg.wake_p99_us.unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(avg.wake_p50_us, None);
        // A draw without any wait: the geometric mean is 0, not a tiny number.
        assert_eq!(
            mean_of_draws(&[m(40.0, 0.0), m(60.0, 1000.0)]).wake_p99_us,
            Some(0.0)
        );
        assert_eq!(avg.names, vec!["a", "b"]);
    }

    #[test]
    fn the_other_work_table_says_what_was_measured_and_what_was_not() {
        let with = Measure {
            outside: Some(Outside {
                runs_per_s: 40.0,
                busy_ms_per_s: 8.0,
                ..Outside::default()
            }),
            ..Measure::default()
        };
        let t = render_other_work(&[
            ("a".into(), vec![with.clone(), with]),
            ("b".into(), vec![Measure::default()]),
        ]);
        assert!(
            t.contains("a                          40.0       8.00          200"),
            "{t}"
        );
        assert!(t.contains("not measured (simulated without it): b"), "{t}");
        let none = render_other_work(&[("b".into(), vec![Measure::default()])]);
        assert!(none.contains("not measured in these real runs"), "{none}");
    }

    #[test]
    fn runs_are_drawn_from_the_tasks_that_were_measured() {
        // 38 short runs a second (0.1 ms) and 2 long ones (2 ms), over two repeats that
        // measured them: the stand-in's runs are mostly short, some milliseconds long, and
        // its CPU time is what the tasks used (7.8 ms/s).
        let task = |r, us| OutsideTask {
            runs_per_s: r,
            mean_run_us: us,
        };
        let rep = Measure {
            outside: Some(Outside {
                runs_per_s: 40.0,
                busy_ms_per_s: 7.8,
                by_task: vec![task(38.0, 100.0), task(2.0, 2000.0)],
            }),
            ..Measure::default()
        };
        let o = Outside::mean(&[rep.clone(), rep]).unwrap();
        assert_eq!(o.by_task.len(), 4);
        assert!((o.by_task.iter().map(|t| t.runs_per_s).sum::<f64>() - 40.0).abs() < 1e-9);
        let text = "cores = 1\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"60s\"\n\
                    [[process]]\nname = \"hog\"\n";
        let s = with_outside_work(&Scenario::parse("t.toml", text).unwrap(), &o, 0).unwrap();
        let runs: Vec<u64> = s.processes()[1]
            .pattern()
            .unwrap()
            .iter()
            .filter_map(|p| match p {
                Phase::Run(d) => Some(d.0),
                Phase::Sleep(_) => None,
            })
            .collect();
        let n = runs.len() as f64;
        // About 40/s over 61 s.
        assert!((2000.0..2900.0).contains(&n), "{n} runs");
        let long = runs.iter().filter(|&&r| r > 1_000_000).count() as f64;
        // 5 % of runs are the long task's, of which exp(-0.5) = 61 % last over 1 ms; the
        // short task's do so with probability exp(-10).
        assert!((0.015..0.05).contains(&(long / n)), "{long} of {n}");
        let mean_us = runs.iter().sum::<u64>() as f64 / n / 1e3;
        assert!((160.0..235.0).contains(&mean_us), "{mean_us} us");
    }

    #[test]
    fn no_runs_measured_means_no_stand_in() {
        let s = with_outside_work(&scenario(), &Outside::default(), 0).unwrap();
        assert_eq!(s.processes().len(), 1);
        let m = Measure::default();
        assert_eq!(Outside::mean(&[m.clone(), m]), None);
    }
}
