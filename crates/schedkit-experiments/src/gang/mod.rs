//! `schedkit experiment gang`: where gang scheduling pays (seed 002, Hori et al.).
//!
//! (a) **This machine** ([`real`]). Two jobs of two threads, each iterating `compute` of busy
//! work and then a spin barrier across its threads. Each job runs alone first (its solo rate:
//! alone under `gang`, i.e. one thread pinned per CPU and never stopped: a dedicated machine),
//! then both together under `default` (the kernel decides; nothing keeps a job's threads
//! together) and under `gang` for every quantum (the matrix puts each job in its own slot on
//! both cores; the freezer stops the other). Per configuration: barrier rounds per second per
//! job, that rate as a percentage of the job's solo rate (gang's ideal is 50 %: half a
//! dedicated machine), the CPU split between the jobs, the rounds per CPU-second of the job's
//! threads against solo (the loss gang switching costs a job in the time it runs, apart from
//! how the time is split), and the measured switch time (stop all + resume all). Medians over
//! `repeat` runs, configurations interleaved per repeat.
//!
//! (b) **The simulator at cluster scale** ([`sim`]). Two jobs spanning the whole 64-node
//! cluster, gang scheduled with seed 002's switch-overhead model
//! ([`schedkit_core::gang_overhead`]) for each communication pattern; the slowdown is the
//! makespan against the same run with free switches. Also the fraction of switch time spent
//! saving and restoring network context.
//!
//! (c) **Scale** ([`sim::scale`]). 1,024 nodes x 4 cores and 100 jobs of random widths and
//! arrivals: the simulator's wall time for the whole run.
//!
//! [`run`] returns a [`GangResult`]; [`render`] turns it into tables, charts and JSON.

pub mod real;
pub mod render;
pub mod sim;

use crate::machine::Machine;
use crate::progress::Progress;
use crate::Error;
use schedkit_core::gang_overhead::Pattern;
use schedkit_core::scenario::{PolicySpec, Process, Scenario, Work};
use schedkit_core::Nanos;

/// What to run.
#[derive(Clone, Debug)]
pub struct GangOptions {
    /// Quanta of the real runs, in ms.
    pub quanta: Vec<u64>,
    /// Repeats per configuration (medians are reported).
    pub repeat: usize,
    /// Length of each real run.
    pub duration: Nanos,
    /// Busy work between two barriers.
    pub compute: Nanos,
    /// A short run for CI: one repeat of 1 s, quanta 20 and 100 ms, fewer simulated slices,
    /// a 128-node scale row.
    pub quick: bool,
    /// Nice value of the job threads in every real configuration.
    pub nice: i32,
    /// Skip part (a) (it needs root for the freezer).
    pub sim_only: bool,
    /// Nodes of the scale row (part c).
    pub scale_nodes: usize,
}

/// Everything the experiment measured.
#[derive(Clone, Debug)]
pub struct GangResult {
    /// Part (a), unless `sim_only`.
    pub real: Option<real::RealPart>,
    /// Part (b).
    pub sim: sim::SimPart,
    /// Part (c).
    pub scale: sim::ScaleRow,
}

/// Runs the three parts; one progress step per run.
pub fn run(
    o: &GangOptions,
    machine: &dyn Machine,
    progress: &dyn Progress,
) -> Result<GangResult, Error> {
    let (repeat, duration, quanta) = if o.quick {
        (1, Nanos::from_secs(1), vec![20, 100])
    } else {
        (o.repeat.max(1), o.duration, o.quanta.clone())
    };
    if quanta.contains(&0) {
        return Err(Error::bad_option(
            "quanta",
            "0",
            "a quantum must be at least 1 ms",
        ));
    }
    let slices: Vec<u64> = if o.quick {
        vec![10, 100, 1000]
    } else {
        vec![10, 20, 50, 100, 200, 500, 1000]
    };
    let scale_nodes = if o.quick { 128 } else { o.scale_nodes };
    let real_runs = if o.sim_only {
        0
    } else {
        repeat * (2 + 1 + quanta.len())
    };
    progress.start((real_runs + slices.len() * (Pattern::ALL.len() + 1) + 1) as u64);
    let real = if o.sim_only {
        None
    } else {
        let setup = real::Setup {
            repeat,
            duration,
            compute: o.compute,
            nice: o.nice,
            quanta,
        };
        Some(real::run(&setup, machine, progress)?)
    };
    let sim = sim::cluster_sweep(&slices, progress);
    progress.message(&format!("scale {scale_nodes} nodes"));
    let scale = sim::scale(scale_nodes, 4, 100);
    progress.step();
    progress.finish();
    Ok(GangResult { real, sim, scale })
}

fn process(name: &str, threads: u32, burst: Option<Nanos>, arrival: Nanos, work: Work) -> Process {
    Process::new(name, threads, work)
        .with_arrival(arrival)
        .with_burst(burst)
}

fn scenario(
    cores: usize,
    policy: PolicySpec,
    horizon: Nanos,
    processes: Vec<Process>,
) -> Result<Scenario, Error> {
    Ok(Scenario::builder("experiment gang")
        .with_cores(cores)
        .with_policy(policy)
        .with_horizon(horizon)
        .processes(processes)
        .build()?)
}
