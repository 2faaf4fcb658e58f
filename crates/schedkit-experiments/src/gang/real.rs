//! Part (a): two spin-barrier jobs on this machine's real cores, alone, under `default` and
//! under `gang` for several quanta.

use super::{process, scenario};
use crate::machine::Machine;
use crate::progress::Progress;
use crate::stats::median;
use crate::Error;
use schedkit_core::scenario::{PolicyName, PolicySpec, Work};
use schedkit_core::Nanos;
use schedkit_linux::engine::{RunOptions, RunPolicy};
use serde::Serialize;

/// The real runs' parameters (after `quick` is applied).
#[derive(Clone, Debug)]
pub struct Setup {
    pub repeat: usize,
    pub duration: Nanos,
    pub compute: Nanos,
    pub nice: i32,
    pub quanta: Vec<u64>,
}

/// One configuration's medians over the repeats.
#[derive(Clone, Debug, Serialize)]
pub struct RealRow {
    pub configuration: String,
    /// The gang quantum; `None` for the solo and default rows.
    pub quantum_ms: Option<u64>,
    /// Barrier rounds per second, per job.
    pub rounds_per_s: Vec<f64>,
    /// That rate against the job alone, per job.
    pub pct_of_solo: Vec<f64>,
    /// Job a's share of the two jobs' CPU time.
    pub cpu_split_a_pct: f64,
    /// Rounds per CPU-second against the job alone, per job.
    pub per_cpu_s_pct_of_solo: Vec<f64>,
    pub switch_us_median: Option<f64>,
    pub switches: u64,
    pub rounds_per_s_each_repeat: Vec<Vec<f64>>,
}

/// Part (a)'s rows: solo, default, then one per quantum.
#[derive(Clone, Debug)]
pub struct RealPart {
    pub setup: Setup,
    pub rows: Vec<RealRow>,
    /// How the freezer stops built-in threads (`none` when no gang run reported it).
    pub backend: String,
}

/// One real run's numbers per job.
#[derive(Clone, Debug, Default)]
struct RealRun {
    /// Barrier rounds per second, per job.
    rate: Vec<f64>,
    /// Barrier rounds per CPU-second of the job's threads: what a job gets out of the time it
    /// runs, apart from how much time it gets (the CPU split).
    per_cpu: Vec<f64>,
    /// CPU seconds per job.
    cpu: Vec<f64>,
    switch_us: Option<f64>,
    switches: u64,
    backend: Option<String>,
}

fn real_run(
    machine: &dyn Machine,
    jobs: usize,
    policy: PolicySpec,
    s: &Setup,
) -> Result<RealRun, Error> {
    let run_policy = match policy.name() {
        PolicyName::Gang => RunPolicy::Gang {
            quantum: policy.quantum(),
        },
        _ => RunPolicy::Default,
    };
    let procs = (0..jobs)
        .map(|j| {
            process(
                ["a", "b"][j],
                2,
                None,
                Nanos::ZERO,
                Work::Barrier { compute: s.compute },
            )
            .with_nice(s.nice)
        })
        .collect();
    let sc = scenario(2, policy, s.duration, procs)?;
    let mut opts = RunOptions::new(run_policy);
    opts.perf = false;
    let o = machine.run(&sc, opts)?;
    let mut r = RealRun::default();
    for p in &o.processes {
        let secs = (p.end_ns.saturating_sub(p.start_ns)) as f64 / 1e9;
        // work_done counts each thread's rounds: rounds of the job = work / threads.
        let rounds = p.work_done.unwrap_or(0) as f64 / p.threads.max(1) as f64;
        r.rate.push(if secs > 0.0 { rounds / secs } else { 0.0 });
        let cpu: u64 = o
            .threads
            .iter()
            .filter(|t| t.process == p.name)
            .map(|t| t.cpu_ns)
            .sum();
        r.cpu.push(cpu as f64 / 1e9);
        r.per_cpu.push(if cpu > 0 {
            rounds / (cpu as f64 / 1e9)
        } else {
            0.0
        });
    }
    if let Some(g) = &o.gang {
        r.switch_us = Some(g.switch_us_median);
        r.switches = g.switches;
        r.backend = g.backend_threads.clone();
    }
    Ok(r)
}

/// Medians of one configuration's repeats against the solo rates.
fn row(
    configuration: String,
    runs: &[RealRun],
    quantum_ms: Option<u64>,
    solo_rate: &[f64],
    solo_per_cpu: &[f64],
) -> RealRow {
    let rate: Vec<f64> = (0..2)
        .map(|j| median(&runs.iter().map(|r| r.rate[j]).collect::<Vec<_>>()))
        .collect();
    let pct_of_solo = (0..2).map(|j| 100.0 * rate[j] / solo_rate[j]).collect();
    let per_cpu_s_pct_of_solo = (0..2)
        .map(|j| {
            100.0 * median(&runs.iter().map(|r| r.per_cpu[j]).collect::<Vec<_>>()) / solo_per_cpu[j]
        })
        .collect();
    let cpu_split_a_pct = median(
        &runs
            .iter()
            .map(|r| 100.0 * r.cpu[0] / (r.cpu[0] + r.cpu[1]).max(1e-9))
            .collect::<Vec<_>>(),
    );
    let sw: Vec<f64> = runs.iter().filter_map(|r| r.switch_us).collect();
    RealRow {
        configuration,
        quantum_ms,
        rounds_per_s: rate,
        pct_of_solo,
        cpu_split_a_pct,
        per_cpu_s_pct_of_solo,
        switch_us_median: if sw.is_empty() {
            None
        } else {
            Some(median(&sw))
        },
        switches: runs.iter().map(|r| r.switches).max().unwrap_or(0),
        rounds_per_s_each_repeat: runs.iter().map(|r| r.rate.clone()).collect(),
    }
}

/// Runs part (a): per repeat, each job alone, both under default, both under gang per quantum.
pub fn run(s: &Setup, machine: &dyn Machine, progress: &dyn Progress) -> Result<RealPart, Error> {
    let mut solo: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut solo_per_cpu: Vec<Vec<f64>> = vec![Vec::new(); 2];
    let mut default: Vec<RealRun> = Vec::new();
    let mut gang: Vec<Vec<RealRun>> = vec![Vec::new(); s.quanta.len()];
    for _ in 0..s.repeat {
        for (j, rates) in solo.iter_mut().enumerate() {
            progress.message(&format!("job {} alone", ["a", "b"][j]));
            // Alone under gang: one slot, never stopped, one thread per CPU: the dedicated
            // machine (alone under `default` the kernel may still put both threads on one
            // CPU, which is no reference).
            let r = real_run(machine, 1, PolicySpec::new(PolicyName::Gang), s)?;
            rates.push(r.rate[0]);
            solo_per_cpu[j].push(r.per_cpu[0]);
            progress.step();
        }
        progress.message("default");
        default.push(real_run(
            machine,
            2,
            PolicySpec::new(PolicyName::Default),
            s,
        )?);
        progress.step();
        for (i, &q) in s.quanta.iter().enumerate() {
            progress.message(&format!("gang {q} ms"));
            let spec = PolicySpec::new(PolicyName::Gang).with_quantum(Nanos::from_ms(q));
            gang[i].push(real_run(machine, 2, spec, s)?);
            progress.step();
        }
    }
    let solo_rate: Vec<f64> = solo.iter().map(|v| median(v)).collect();
    let solo_per_cpu_med: Vec<f64> = solo_per_cpu.iter().map(|v| median(v)).collect();
    let solo_rows: Vec<RealRun> = (0..s.repeat)
        .map(|i| RealRun {
            rate: vec![solo[0][i], solo[1][i]],
            per_cpu: vec![solo_per_cpu[0][i], solo_per_cpu[1][i]],
            cpu: vec![1.0, 1.0],
            ..Default::default()
        })
        .collect();
    let mut rows = vec![
        row(
            "each job alone (pinned)".into(),
            &solo_rows,
            None,
            &solo_rate,
            &solo_per_cpu_med,
        ),
        row(
            "default (both)".into(),
            &default,
            None,
            &solo_rate,
            &solo_per_cpu_med,
        ),
    ];
    for (i, &q) in s.quanta.iter().enumerate() {
        rows.push(row(
            format!("gang {q} ms"),
            &gang[i],
            Some(q),
            &solo_rate,
            &solo_per_cpu_med,
        ));
    }
    let backend = gang
        .iter()
        .flatten()
        .find_map(|r| r.backend.clone())
        .unwrap_or_else(|| "none".into());
    Ok(RealPart {
        setup: s.clone(),
        rows,
        backend,
    })
}
