//! The real side of the experiment: [`KernelRunner`] runs a scenario file on this machine
//! under the kernel's own scheduler through the real engine (as `schedkit run` does; a
//! `policy = "default"` run takes no machine lease, so other runs may be live beside it, and
//! their work is measured as the machine's other work) and reduces it to a [`Measure`] from the kernel's
//! per-thread counts: schedstat CPU time and run-queue delay, voluntary and involuntary
//! switches, perf migrations, and the wake-up latencies the `pattern` workload records. Also
//! what the command line needs before a run: the default files, the models and the check that
//! every file runs under the kernel's scheduler.

use super::{quantile, response_ms, shares, Measure, Outside, OutsideTask, RealRunner};
use crate::Error;
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::Nanos;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::perf::{CounterKind, Reading};
use schedkit_linux::workload;
use std::path::{Path, PathBuf};

/// The real engine as the experiment's runner.
pub struct KernelRunner;

/// The probe that measures this machine's wake-up path ([`RealRunner::wake_path`]): on one
/// CPU a hog and a sleeper (a quarter of each 2 ms cycle running), so that the sleeper, whose
/// lag is positive at each wake-up, preempts the hog at once; how late it runs after its
/// timer is then the path alone (timer interrupt, wake-up, switch), and the median of about
/// 500 wake-ups is the model's `[policy] wake_path`.
pub fn wake_path_probe() -> Scenario {
    const PROBE: &str = "cores = 1\n[policy]\nname = \"default\"\n[run]\nhorizon = \"1s\"\n\
        [[process]]\nname = \"hog\"\ncpus = [0]\n\
        [[process]]\nname = \"sleeper\"\ncpus = [0]\n\
        pattern = [{ run = \"500us\" }, { sleep = \"1500us\" }]\n";
    Scenario::parse("wake-up path probe (built in)", PROBE).expect("the built-in probe parses")
}

impl RealRunner for KernelRunner {
    fn wake_path(&mut self) -> Result<Option<Nanos>, Error> {
        let m = self.run(&wake_path_probe())?;
        Ok(m.wake_p50_us.map(|us| Nanos((us * 1e3).round() as u64)))
    }

    fn run(&mut self, sc: &Scenario) -> Result<Measure, Error> {
        let fail = |m: String| Error::Run {
            scenario: sc.file().to_string(),
            message: m,
        };
        let _ = workload::take_wake_latencies();
        let mut opts = RunOptions::new(RunPolicy::Default);
        opts.scan_other_tasks = true;
        // The model starts at newidle_ratio = 0 (`simulated`); the kernel is brought there.
        opts.settle_newidle = true;
        let o = engine::run(sc, opts).map_err(|e| fail(e.to_string()))?;
        let end_ns = o.end.0.max(1) as f64;
        let cores = o.cores as f64;
        let mut metrics = Metrics::new(&o.scenario, "run", o.cores);
        for e in &o.events {
            schedkit_core::trace::TraceSink::record(&mut metrics, e);
        }
        let report = metrics.finish(o.end);
        let names: Vec<String> = sc
            .processes()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        let per = |f: &dyn Fn(&engine::ThreadOutcome) -> u64| -> Vec<f64> {
            names
                .iter()
                .map(|n| {
                    o.threads
                        .iter()
                        .filter(|t| &t.process == n)
                        .map(f)
                        .sum::<u64>() as f64
                })
                .collect()
        };
        let cpu = per(&|t| t.cpu_ns);
        let wait = per(&|t| t.runqueue_wait_ns);
        let nthreads: Vec<f64> = sc.processes().iter().map(|p| p.threads() as f64).collect();
        let switches: u64 = o
            .threads
            .iter()
            .map(|t| t.voluntary_switches + t.involuntary_switches)
            .sum();
        let perf_migrations: Option<u64> = o
            .processes
            .iter()
            .map(|p| {
                p.counters.iter().find_map(|(k, r)| match (k, r) {
                    (CounterKind::CpuMigrations, Reading::Value { value, .. }) => Some(*value),
                    _ => None,
                })
            })
            .sum();
        let migrations =
            perf_migrations.unwrap_or_else(|| o.threads.iter().map(|t| t.migrations_seen).sum());
        let mut wakes: Vec<u64> = workload::take_wake_latencies()
            .into_iter()
            .flat_map(|w| w.samples)
            .collect();
        Ok(Measure {
            share_pct: shares(&cpu),
            job_pct: 100.0 * cpu.iter().sum::<f64>() / (end_ns * cores),
            wait_ms: wait
                .iter()
                .zip(&nthreads)
                .map(|(w, n)| w / 1e6 / n)
                .collect(),
            wait_all_ms: wait.iter().sum::<f64>() / 1e6 / nthreads.iter().sum::<f64>(),
            response_ms: response_ms(sc, &report),
            wake_p50_us: quantile(&mut wakes, 0.5).map(|x| x / 1e3),
            wake_p99_us: quantile(&mut wakes, 0.99).map(|x| x / 1e3),
            wakeups: wakes.len(),
            switches_per_s: switches as f64 / (end_ns / 1e9),
            migrations_per_s: migrations as f64 / (end_ns / 1e9),
            outside: o
                .frame
                .other_tasks
                .as_ref()
                .filter(|t| t.window_ns > 0)
                .map(|t| {
                    let secs = t.window_ns as f64 / 1e9;
                    Outside {
                        runs_per_s: t.runs / secs,
                        busy_ms_per_s: t.run_ns / 1e6 / secs,
                        by_task: t
                            .by_task
                            .iter()
                            .map(|k| OutsideTask {
                                runs_per_s: k.runs / secs,
                                mean_run_us: k.run_ns / k.runs.max(1e-9) / 1e3,
                            })
                            .collect(),
                    }
                }),
            names,
        })
    }
}

/// What the machine was like around the real runs, said before and after them: a reader of
/// the errors must know how busy the machine was and how the kernel weighed the job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineState {
    /// `uname -r` (empty where unknown).
    pub kernel: String,
    /// `/proc/loadavg`, trimmed (empty where unreadable).
    pub load: String,
    /// This session's autogroup (`/proc/self/autogroup`; `None` without autogroup). With
    /// autogroup the job's session competes as one entity with the machine's other
    /// sessions, so its group's nice decides how much of the machine the job gets.
    pub autogroup: Option<String>,
}

impl MachineState {
    /// What makes the real runs other than the experiment means them to be: a session
    /// autogroup not at nice -20, where every other session's task competes with the whole
    /// job at the root of the hierarchy and moves the job's threads between CPUs
    /// (greedy-1-8-50: 12.7-25.0 migrations/s in runs at nice 0, 0-1.7/s at nice -20;
    /// docs/results/fidelity.md).
    pub fn warnings(&self) -> Vec<String> {
        let nice = self.autogroup.as_deref().and_then(|g| {
            g.split_whitespace()
                .skip_while(|w| *w != "nice")
                .nth(1)
                .and_then(|n| n.parse::<i32>().ok())
        });
        match nice {
            Some(n) if n != -20 => vec![format!(
                "this session's autogroup is at nice {n}, not -20: other sessions' tasks \
                 compete with the whole job and move its threads between CPUs; run it as \
                 setsid -w sh -c 'echo -20 > /proc/self/autogroup; exec schedkit experiment fidelity ...'"
            )],
            _ => Vec::new(),
        }
    }

    /// Reads it now.
    pub fn read() -> MachineState {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|t| t.trim().to_string())
                .unwrap_or_default()
        };
        MachineState {
            kernel: schedkit_sim::policies::kernel_release().unwrap_or_default(),
            load: read("/proc/loadavg"),
            autogroup: Some(read("/proc/self/autogroup")).filter(|g| !g.is_empty()),
        }
    }
}

/// The scenario files of the experiment: `files`, or every `*.toml` of `dir` (the command
/// line's `examples/fidelity`) in name order when none is named.
pub fn scenario_files(files: &[PathBuf], dir: &Path) -> Result<Vec<PathBuf>, Error> {
    if !files.is_empty() {
        return Ok(files.to_vec());
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| {
            Error::Failed(format!(
                "{}: {e} (run from the repository root or name files)",
                dir.display()
            ))
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    Ok(v)
}

/// `--models`: each `eevdf` or `cfs`.
pub fn parse_models(models: &[String]) -> Result<Vec<PolicyName>, Error> {
    models
        .iter()
        .map(|m| match PolicyName::parse(m) {
            Some(p @ (PolicyName::Eevdf | PolicyName::Cfs)) => Ok(p),
            _ => Err(Error::bad_option(
                "models",
                m,
                "the models are eevdf and cfs",
            )),
        })
        .collect()
}

/// Loads the scenario files, each of which must run under `policy = "default"`.
pub fn load_scenarios(files: &[PathBuf]) -> Result<Vec<Scenario>, Error> {
    let scenarios = files
        .iter()
        .map(|f| Scenario::load(f))
        .collect::<Result<Vec<_>, _>>()?;
    for s in &scenarios {
        if s.policy().name() != PolicyName::Default {
            return Err(Error::bad_option(
                "files",
                s.file(),
                "a fidelity scenario runs under policy = \"default\" (the kernel's scheduler)",
            ));
        }
    }
    Ok(scenarios)
}

#[cfg(test)]
mod machine_tests {
    use super::{wake_path_probe, MachineState};

    #[test]
    fn the_wake_path_probe_is_one_cpu_a_hog_and_a_sleeper_beside_it() {
        let p = wake_path_probe();
        assert_eq!(p.cores(), 1);
        let names: Vec<&str> = p.processes().iter().map(|x| x.name()).collect();
        assert_eq!(names, ["hog", "sleeper"]);
        assert!(p.processes().iter().all(|x| x.cpus() == Some(&[0][..])));
        assert!(p.processes()[1].pattern().is_some());
    }

    #[test]
    fn an_autogroup_not_at_nice_minus_20_is_warned_about() {
        let at = |g: Option<&str>| MachineState {
            autogroup: g.map(str::to_string),
            ..MachineState::default()
        };
        assert!(at(Some("/autogroup-542 nice -20")).warnings().is_empty());
        assert!(at(None).warnings().is_empty());
        let w = at(Some("/autogroup-472 nice 0")).warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("nice 0") && w[0].contains("echo -20"),
            "{w:?}"
        );
    }
}
