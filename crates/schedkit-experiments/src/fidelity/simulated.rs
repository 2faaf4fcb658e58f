//! The simulated side of the experiment: the scenario a model simulates for a scenario file
//! ([`simulated`]: the stand-ins for the real engine's sampler and for the machine's other
//! work, and the machine's wake-up path), and the reduction of a simulated run to a
//! [`Measure`] ([`sim_measure`], which leaves the stand-ins out).

use super::{quantile, response_ms, shares, with_outside_work, Measure, Outside};
use crate::Error;
use schedkit_core::report::Report;
use schedkit_core::scenario::{
    Class, Phase, PolicyName, Process, Scenario, Work, DEFAULT_NEWIDLE_RATIO, DEFAULT_WAKE_PATH,
};
use schedkit_core::trace::{Event, Reason, TraceLog};
use schedkit_core::Nanos;

/// The real engine's own sampler: `schedkit run` reads the job's threads every 10 ms (its
/// default `--sample`) from its main thread, which runs SCHED_FIFO on the job's CPUs.
/// Measured with `perf sched` on this machine (docs/results/fidelity.md, fid10): 304 runs
/// in a 3 s run, 139 us each on average (median 63 us), staying on one CPU. Its runs matter
/// beyond their CPU time: each preempts the fair thread running there at once, and the
/// fair pick after it is a fresh one, which protects a new slice of whatever runs next.
pub const ENGINE_THREAD: &str = "schedkit-sampler";
const ENGINE_THREAD_RUN: Nanos = Nanos::from_us(140);
const ENGINE_THREAD_PERIOD: Nanos = Nanos::from_ms(10);

/// The scenario with a stand-in for the real engine's sampler thread ([`ENGINE_THREAD`]), so
/// that the simulated kernel schedules what the real one does; [`sim_measure`] leaves it out
/// of every metric.
pub fn with_engine_thread(sc: &Scenario) -> Result<Scenario, Error> {
    let p = Process::new(ENGINE_THREAD, 1, Work::Spin)
        .with_pattern(vec![
            Phase::Run(ENGINE_THREAD_RUN),
            Phase::Sleep(Nanos(ENGINE_THREAD_PERIOD.0 - ENGINE_THREAD_RUN.0)),
        ])
        .with_class(Class::Fifo);
    Ok(sc.to_builder().process(p).build()?)
}

/// The scenario `model` simulates for `sc`: with the stand-ins for the real engine's
/// sampler and for the other work the real repeats met (their mean; the `draw`-th random
/// draw of it), both left out of every metric, and the machine's wake-up path where it was
/// measured and the file keeps the default. The sampler's stand-in is also the spawner (the
/// real engine creates the job's threads from that thread) unless the file names its own.
pub fn simulated(
    sc: &Scenario,
    other: Option<&Outside>,
    draw: u64,
    model: PolicyName,
    wake_path: Option<Nanos>,
) -> Result<Scenario, Error> {
    let mut policy = sc.policy().clone().with_name(model);
    if let Some(p) = wake_path.filter(|_| policy.wake_path() == DEFAULT_WAKE_PATH) {
        policy = policy.with_wake_path(p);
    }
    if policy.spawner().is_none() {
        policy = policy.with_spawner(Some(ENGINE_THREAD.to_string()));
    }
    // The real runs condition the kernel's newidle balance to a ratio near 0 first
    // (`schedkit_linux::newidle`, RunOptions::settle_newidle).
    if policy.newidle_ratio() == DEFAULT_NEWIDLE_RATIO {
        policy = policy.with_newidle_ratio(0);
    }
    let s = with_engine_thread(sc)?;
    let s = match other {
        Some(o) => with_outside_work(&s, o, draw)?,
        None => s,
    };
    Ok(s.with_policy_spec(policy)?)
}

/// What else the simulated side assumes of a real run, for the report (`simulated`).
pub const MODEL_SETUP: &str = "simulated as the real runs are made: the engine's sampler (a \
     real-time thread, left out of every metric) is the spawner of every thread, and under \
     eevdf the job's threads form one task group, as in the real run's autogroup, and each \
     core's newidle balance starts at a success ratio of 0, where each real run first \
     conditions the kernel's (a file's own `spawner`, `task_group = false` or \
     `newidle_ratio` is kept)\n";

/// The wake-up path the models were given, in a sentence for the report.
pub fn render_wake_path(ns: Option<u64>) -> String {
    match ns {
        Some(ns) => format!(
            "\nwake-up path: {:.1} us, this machine's (the median of a probe run before the \
             scenarios: a sleeper preempting a hog on one CPU); the eevdf model was given it\n",
            ns as f64 / 1e3
        ),
        None => format!(
            "\nwake-up path: not measured in these real runs; the eevdf model kept its default \
             {:.1} us\n",
            DEFAULT_WAKE_PATH.0 as f64 / 1e3
        ),
    }
}

/// Reduces a simulated run to a [`Measure`] (module docs for the definitions): of the
/// processes of `s`, the first ones of the simulated scenario (a stand-in added after them,
/// [`with_engine_thread`], is left out).
pub fn sim_measure(s: &Scenario, r: &Report, log: &TraceLog) -> Measure {
    let end_ns = r.window_ns.max(1) as f64;
    let slots = log
        .events
        .iter()
        .filter_map(slot_of)
        .max()
        .map_or(0, |m| m + 1);
    let mut ready_since: Vec<Option<u64>> = vec![None; slots];
    let mut woke_at: Vec<Option<u64>> = vec![None; slots];
    let mut proc_of: Vec<usize> = vec![usize::MAX; slots];
    let mut wait = vec![0u64; s.processes().len()];
    let mut wakes = Vec::new();
    for e in &log.events {
        match *e {
            Event::Arrive { t, slot, owner } => {
                if let schedkit_core::trace::Owner::Process { process, .. } = owner {
                    proc_of[slot as usize] = process;
                }
                ready_since[slot as usize] = Some(t.0);
            }
            Event::Wake { t, slot } => {
                ready_since[slot as usize] = Some(t.0);
                woke_at[slot as usize] = Some(t.0);
            }
            Event::Block { slot, .. } => ready_since[slot as usize] = None,
            Event::Deschedule {
                t,
                slot,
                reason: Reason::Preempted | Reason::Expired,
                ..
            } => {
                ready_since[slot as usize] = Some(t.0);
            }
            Event::Dispatch { t, slot, .. } => {
                let i = slot as usize;
                if let (Some(since), Some(&p)) = (ready_since[i].take(), proc_of.get(i)) {
                    if p < wait.len() {
                        wait[p] += t.0 - since;
                    }
                }
                if let Some(w) = woke_at[i].take() {
                    if proc_of.get(i).is_some_and(|&p| p < wait.len()) {
                        wakes.push(t.0 - w);
                    }
                }
            }
            _ => {}
        }
    }
    let end = r.window_ns;
    for (i, since) in ready_since.iter().enumerate() {
        if let (Some(since), Some(&p)) = (since, proc_of.get(i)) {
            if p < wait.len() && *since < end {
                wait[p] += end - since;
            }
        }
    }
    let threads: Vec<f64> = s.processes().iter().map(|p| p.threads() as f64).collect();
    let own: Vec<&schedkit_core::report::ThreadReport> = r
        .threads
        .iter()
        .filter(|t| s.processes().iter().any(|p| p.name() == t.process))
        .collect();
    let switches: u64 = own.iter().map(|t| t.context_switches).sum();
    let migrations: u64 = own.iter().map(|t| t.migrations).sum();
    let mut m = Measure {
        names: s.processes().iter().map(|p| p.name().to_string()).collect(),
        share_pct: shares(
            &r.processes
                .iter()
                .take(s.processes().len())
                .map(|p| p.cpu_ns as f64)
                .collect::<Vec<_>>(),
        ),
        job_pct: 100.0
            * r.processes
                .iter()
                .take(s.processes().len())
                .map(|p| p.cpu_ns as f64)
                .sum::<f64>()
            / (end_ns * s.cores() as f64),
        wait_ms: wait
            .iter()
            .zip(&threads)
            .map(|(w, n)| *w as f64 / 1e6 / n)
            .collect(),
        wait_all_ms: wait.iter().sum::<u64>() as f64 / 1e6 / threads.iter().sum::<f64>(),
        response_ms: response_ms(s, r),
        wake_p50_us: None,
        wake_p99_us: None,
        wakeups: wakes.len(),
        switches_per_s: switches as f64 / (end_ns / 1e9),
        migrations_per_s: migrations as f64 / (end_ns / 1e9),
        outside: None,
    };
    m.wake_p50_us = quantile(&mut wakes, 0.5).map(|x| x / 1e3);
    m.wake_p99_us = quantile(&mut wakes, 0.99).map(|x| x / 1e3);
    m
}

fn slot_of(e: &Event) -> Option<usize> {
    match *e {
        Event::Arrive { slot, .. }
        | Event::Wake { slot, .. }
        | Event::Block { slot, .. }
        | Event::Dispatch { slot, .. }
        | Event::Deschedule { slot, .. } => Some(slot as usize),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_measure_counts_waiting_and_wake_ups() {
        // One core: a hog and a thread running 1 ms every 10 ms, 100 ms.
        let text = "cores = 1\n[policy]\nname = \"eevdf\"\n[run]\nhorizon = \"100ms\"\n\
             [[process]]\nname = \"hog\"\n[[process]]\nname = \"s\"\n\
             pattern = [{ run = \"1ms\" }, { sleep = \"9ms\" }]\n";
        let sc = Scenario::parse("t.toml", text).unwrap();
        let (r, log, _) = schedkit_sim::simulate_report(&sc, true).unwrap();
        let m = sim_measure(&sc, &r, &log.unwrap());
        // Shares of the job add to 100 %, the sleeper's 9-10 % (its tenth phase may end past
        // the horizon: eevdf's wake-up path and waits behind the hog's protected slice push
        // each phase later); the job used the whole core.
        assert!((m.share_pct[0] + m.share_pct[1] - 100.0).abs() < 1e-9);
        assert!(
            (8.99..=10.01).contains(&m.share_pct[1]),
            "{:?}",
            m.share_pct
        );
        assert!((m.job_pct - 100.0).abs() < 1e-9, "{}", m.job_pct);
        // The hog waits exactly while the sleeper runs: CPU time of the sleeper.
        let sleeper_cpu = r.processes[1].cpu_ns as f64 / 1e6;
        assert!((m.wait_ms[0] - sleeper_cpu).abs() < 1e-9, "{m:?}");
        // Nine timers at most; the later phases may put the last wake-up or its dispatch past
        // the horizon (see the share above).
        assert!((8..=9).contains(&m.wakeups), "{m:?}");
        assert!(m.wake_p99_us.unwrap() <= 4_000.0, "{m:?}");
    }

    #[test]
    fn the_simulated_scenario_has_the_stand_ins_and_the_measured_wake_path() {
        let file = "cores = 2\n[policy]\nname = \"default\"\n[run]\nhorizon = \"1s\"\n\
                    [[process]]\nname = \"hog\"\n";
        let sc = Scenario::parse("t.toml", file).unwrap();
        let real = Measure {
            outside: Some(Outside {
                runs_per_s: 40.0,
                busy_ms_per_s: 6.0,
                ..Outside::default()
            }),
            ..Measure::default()
        };
        let other = Outside::mean(&[real]);
        let s = simulated(
            &sc,
            other.as_ref(),
            0,
            PolicyName::Eevdf,
            Some(Nanos(16_500)),
        )
        .unwrap();
        assert_eq!(s.policy().name(), PolicyName::Eevdf);
        assert_eq!(s.policy().wake_path(), Nanos(16_500));
        // The real engine creates the job's threads from its sampler thread.
        assert_eq!(s.policy().spawner(), Some(ENGINE_THREAD));
        let names: Vec<&str> = s.processes().iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            ["hog", ENGINE_THREAD, "other-work-0", "other-work-1"]
        );
        // Without measurements: the sampler's stand-in alone and the model's default path.
        let s = simulated(&sc, None, 0, PolicyName::Eevdf, None).unwrap();
        assert_eq!(s.processes().len(), 2);
        assert_eq!(s.policy().wake_path(), DEFAULT_WAKE_PATH);
        // A file that sets its own wake-up path keeps it.
        let own = Scenario::parse(
            "t.toml",
            &file.replace("\"default\"", "\"default\"\nwake_path = \"5us\""),
        )
        .unwrap();
        let s = simulated(&own, None, 0, PolicyName::Eevdf, Some(Nanos(16_500))).unwrap();
        assert_eq!(s.policy().wake_path(), Nanos::from_us(5));
    }
}
