//! The binary's side of the experiments' [`Machine`]: the real engine of `schedkit run` and
//! this executable as the helper for spinners, hogs and the `ctl` client.

use crate::taskrun::{run_real, RealOptions};
use schedkit_core::scenario::{PolicyName, Scenario, Task};
use schedkit_experiments::machine::{Machine, TaskRun, TaskRunOptions};
use schedkit_experiments::Error;
use schedkit_linux::engine::{self, RunOptions, RunOutcome};
use std::path::PathBuf;

/// This machine, driven by `schedkit_linux`'s engine.
pub struct ThisMachine;

impl Machine for ThisMachine {
    fn run(&self, scenario: &Scenario, options: RunOptions) -> Result<RunOutcome, Error> {
        // Before the first real run, not at start: SIGINT should still end an experiment
        // that only simulates. With them, an interrupted run undoes its changes and returns.
        static HANDLERS: std::sync::Once = std::sync::Once::new();
        HANDLERS.call_once(engine::install_signal_handlers);
        let o = engine::run(scenario, options)?;
        if o.interrupted {
            return Err(Error::Interrupted);
        }
        Ok(o)
    }

    fn helper_exe(&self) -> Result<PathBuf, Error> {
        crate::self_exe().map_err(|e| Error::io("locating the schedkit binary", e))
    }

    fn run_tasks(
        &self,
        tasks: &[Task],
        policy: PolicyName,
        o: &TaskRunOptions,
    ) -> Result<TaskRun, Error> {
        let options = RealOptions {
            duration: o.duration,
            perf: o.perf,
            seed: o.seed,
            stall_witness: o.stall_witness,
        };
        let r = run_real(tasks, policy, &options).map_err(Error::from)?;
        Ok(TaskRun {
            jobs: r.jobs.len() as u64,
            misses: r.misses(),
            kernel_migrations: r.kernel_migrations,
            kernel_switches: r.kernel_switches,
            user_migrations: r.user_migrations,
            user_switches: r.user_switches,
            steals: r.steals,
            responses: r.jobs.iter().map(|j| j.response()).collect(),
            unexplained_misses: r.stalls.is_some().then(|| r.unexplained_misses()),
            stall_lateness: r.stalls.iter().flatten().map(|s| s.late_ns).collect(),
            preemption_latency: r.preemption_latency,
            preemption_stages: r.preemption_stages,
            warnings: r.warnings,
        })
    }
}
