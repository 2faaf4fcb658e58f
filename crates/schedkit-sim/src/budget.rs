//! The event budget: before simulating, estimate how much work a scenario implies, so that a
//! file that would run for hours (a 1 ns quantum, a 9e9 s horizon, a million cores) is
//! refused at once with the keys that drive the estimate, instead of running without a sign.
//!
//! The estimate is an order of magnitude, not a count: each term below follows one mechanism
//! of the engine ([`crate::engine`]) and assumes the worst that is cheap to compute (every
//! core busy for the whole span the work could last).
//!
//! - arrivals and ends: two events per process thread;
//! - slice ends: a running thread has a slice-end event every slice (`quantum`; CFS's
//!   `max(min_granularity, sched_latency / threads per core)`; EEVDF's `base_slice`, since a
//!   thread that reads its clock may switch between ticks), on every busy core;
//! - sleep phases: two events per `pattern` cycle per thread;
//! - controller ticks: every `period` (the gang matrix: every `quantum`) the controller looks
//!   at every thread;
//! - load balancing (CFS models): every `balance_interval`, a look at every core;
//! - real-time jobs: per job, its release and two events per thread of each region;
//! - decisions: after each instant with events, every idle core is offered a thread, so each
//!   decision costs a step per core beyond the one with the event (what makes a million
//!   modelled cores slow).
//!
//! Budget is counted in these steps; [`DEFAULT_MAX_EVENTS`] is about a minute of simulation
//! on a laptop core at the measured 2-10 million events per second.

use crate::policies::model_of_release;
use schedkit_core::scenario::{PolicyName, Region, Scenario, ScenarioError};
use schedkit_core::Nanos;

/// The default budget of `schedkit sim` and `compare` (`--max-events` changes it).
pub const DEFAULT_MAX_EVENTS: u64 = 100_000_000;

/// One term of the estimate: what it counts, the scenario keys that drive it, its size.
#[derive(Clone, Debug, PartialEq)]
pub struct Driver {
    /// What the term counts, with the numbers that make it (`"slice ends: 2 busy cores x
    /// 10s / 1ns"`).
    pub what: String,
    /// The scenario keys that drive it (`policy.quantum`, `run.horizon`).
    pub keys: Vec<&'static str>,
    pub events: f64,
}

/// The estimate: the total and its terms, largest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub events: f64,
    pub drivers: Vec<Driver>,
}

/// How long a core runs one thread before a slice-end event, under the scenario's policy;
/// `None` for policies that run a thread until it blocks, finishes or is preempted.
fn slice(s: &Scenario, threads_per_core: f64) -> Option<(f64, Vec<&'static str>)> {
    let p = &s.policy();
    let name = match p.name() {
        PolicyName::Default => model_of_release(crate::policies::kernel_release().as_deref()),
        n => n,
    };
    let cfs = || {
        let share = p.sched_latency().0 as f64 / threads_per_core.max(1.0);
        (
            share.max(p.min_granularity().0 as f64),
            vec!["policy.min_granularity", "policy.sched_latency"],
        )
    };
    match name {
        PolicyName::Rr
        | PolicyName::Lottery
        | PolicyName::Stride
        | PolicyName::Mlfq
        | PolicyName::Gang => Some((p.quantum().0 as f64, vec!["policy.quantum"])),
        PolicyName::Cfs
        | PolicyName::Pfs
        | PolicyName::Tfps
        | PolicyName::Twrs
        | PolicyName::GlobalFair
        | PolicyName::Tenants => Some(cfs()),
        // A thread that reads its CPU clock (a burst or a pattern) may switch at its slice's
        // end between ticks; others at ticks.
        PolicyName::Eevdf => Some((
            p.base_slice().0 as f64,
            vec!["policy.base_slice", "policy.tick"],
        )),
        _ => None,
    }
}

/// The controller's period, if the policy has a controller.
fn controller_period(s: &Scenario) -> Option<(Nanos, &'static str)> {
    match s.policy().name() {
        PolicyName::Pfs
        | PolicyName::Tfps
        | PolicyName::Twrs
        | PolicyName::GlobalFair
        | PolicyName::Tenants => Some((s.policy().period(), "policy.period")),
        PolicyName::Gang => Some((s.policy().quantum(), "policy.quantum")),
        _ => None,
    }
}

/// The interval of the dispatcher's periodic `balance` (the fair models on several cores,
/// MLFQ's boost), as the dispatchers declare it.
fn balance_interval(s: &Scenario) -> Option<Nanos> {
    let name = match s.policy().name() {
        PolicyName::Default => model_of_release(crate::policies::kernel_release().as_deref()),
        n => n,
    };
    match name {
        PolicyName::Cfs
        | PolicyName::Eevdf
        | PolicyName::Pfs
        | PolicyName::Tfps
        | PolicyName::Twrs
        | PolicyName::GlobalFair
        | PolicyName::Tenants
            if s.cores() > 1 =>
        {
            Some(s.policy().balance_interval())
        }
        PolicyName::Mlfq if s.policy().boost() > Nanos::ZERO => Some(s.policy().boost()),
        _ => None,
    }
}

/// `12.3 G`, `450 M`, `7 k`: an estimate's size in words a person reads at a glance.
pub fn human(x: f64) -> String {
    for (div, unit) in [(1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")] {
        if x >= div {
            return format!("{:.1}{unit}", x / div);
        }
    }
    format!("{x:.0}")
}

/// The terms gathered so far, and the instants with events that they imply (each instant
/// costs a decision step on every other core: the last term).
struct Terms {
    drivers: Vec<Driver>,
    instants: f64,
}

impl Terms {
    /// Adds a term; those under one event are left out.
    fn add(&mut self, what: String, keys: Vec<&'static str>, events: f64) {
        if events >= 1.0 {
            self.drivers.push(Driver { what, keys, events });
        }
    }
}

/// The facts every term reads: the horizon and the span the work can keep cores busy.
struct Shape {
    /// The horizon, ns.
    h: f64,
    cores: f64,
    /// Process threads in all.
    threads: f64,
    /// Cores the threads can keep busy.
    busy: f64,
    /// How long processes can keep cores busy, ns: to the horizon if any runs until it, else
    /// until the last arrival plus the total work spread over the cores it can use.
    span: f64,
}

impl Shape {
    fn of(s: &Scenario) -> Shape {
        let h = s.horizon().0 as f64;
        let cores = s.cores() as f64;
        let threads: f64 = s.processes().iter().map(|p| p.threads() as f64).sum();
        let unbounded = s.processes().iter().any(|p| p.burst().is_none()) || !s.tasks().is_empty();
        let busy = threads.min(cores);
        let span = if unbounded || busy == 0.0 {
            h
        } else {
            let work: f64 = s
                .processes()
                .iter()
                .map(|p| p.burst().map_or(0.0, |b| b.0 as f64) * p.threads() as f64)
                .sum();
            let last = s
                .processes()
                .iter()
                .map(|p| p.arrival().0)
                .max()
                .unwrap_or(0) as f64;
            h.min(last + work / busy)
        };
        Shape {
            h,
            cores,
            threads,
            busy,
            span,
        }
    }

    fn span_n(&self) -> Nanos {
        Nanos(self.span as u64)
    }
}

/// Estimates the work of simulating `s` (see the module docs): one step per mechanism of the
/// engine, in the order the module docs list them.
pub fn estimate(s: &Scenario) -> Estimate {
    let shape = Shape::of(s);
    let mut terms = Terms {
        drivers: Vec::new(),
        instants: s.processes().len() as f64,
    };
    let threads = shape.threads;
    terms.add(
        format!("arrivals and ends: 2 x {threads} process threads"),
        vec!["process.threads"],
        2.0 * threads,
    );
    slice_ends(s, &shape, &mut terms);
    sleep_phases(s, &shape, &mut terms);
    periodic(s, &shape, &mut terms);
    real_time_jobs(s, &shape, &mut terms);
    // The core that has the instant's event is counted by its event; the others are extra.
    let instants = terms.instants;
    terms.add(
        format!(
            "decisions: about {} instants x {} more cores offered a thread",
            human(instants),
            shape.cores - 1.0
        ),
        vec!["cores"],
        instants * (shape.cores - 1.0),
    );
    let mut drivers = terms.drivers;
    drivers.sort_by(|a, b| b.events.total_cmp(&a.events));
    Estimate {
        events: drivers.iter().map(|d| d.events).sum(),
        drivers,
    }
}

/// Slice ends on every busy core.
fn slice_ends(s: &Scenario, shape: &Shape, terms: &mut Terms) {
    let busy = shape.busy;
    if busy <= 0.0 {
        return;
    }
    if let Some((slice, mut keys)) = slice(s, shape.threads / shape.cores) {
        let per_core = shape.span / slice.max(1.0);
        terms.instants += per_core;
        keys.push("run.horizon");
        terms.add(
            format!(
                "slice ends: {busy} busy cores x {} / a slice of {}",
                shape.span_n(),
                Nanos(slice as u64)
            ),
            keys,
            busy * per_core,
        );
    }
}

/// Two events per `pattern` cycle per thread.
fn sleep_phases(s: &Scenario, shape: &Shape, terms: &mut Terms) {
    for p in s.processes() {
        let Some(pattern) = p.pattern() else { continue };
        let cycle: u64 = pattern
            .iter()
            .map(|ph| match *ph {
                schedkit_core::scenario::Phase::Run(d)
                | schedkit_core::scenario::Phase::Sleep(d) => d.0,
            })
            .sum();
        let cycles = shape.span / cycle.max(1) as f64;
        terms.instants += cycles;
        terms.add(
            format!(
                "sleep phases of \"{}\": {} threads x {} / a cycle of {}",
                p.name(),
                p.threads(),
                shape.span_n(),
                Nanos(cycle)
            ),
            vec!["process.pattern", "run.horizon"],
            2.0 * p.threads() as f64 * cycles,
        );
    }
}

/// The controller's ticks over every thread, and the dispatcher's load balancing over every
/// core.
fn periodic(s: &Scenario, shape: &Shape, terms: &mut Terms) {
    let (span_n, threads, cores) = (shape.span_n(), shape.threads, shape.cores);
    if let Some((period, key)) = controller_period(s) {
        let ticks = shape.span / period.0.max(1) as f64;
        terms.instants += ticks;
        terms.add(
            format!("controller ticks: {span_n} / {period}, each over {threads} threads"),
            vec![key, "process.threads", "run.horizon"],
            ticks * (1.0 + threads),
        );
    }
    if let Some(iv) = balance_interval(s) {
        let runs = shape.span / iv.0.max(1) as f64;
        terms.instants += runs;
        terms.add(
            format!("load balancing: {span_n} / {iv}, each over {cores} cores"),
            vec!["policy.balance_interval", "cores", "run.horizon"],
            runs * cores,
        );
    }
}

/// Per real-time job, its release and two events per thread of each region.
fn real_time_jobs(s: &Scenario, shape: &Shape, terms: &mut Terms) {
    let mut jobs_total = 0.0;
    let mut task_events = 0.0;
    let mut worst: Option<(&str, f64)> = None;
    for t in s.tasks() {
        let jobs = ((shape.h - t.offset().0 as f64) / t.period().0.max(1) as f64)
            .ceil()
            .max(1.0);
        let per_job: f64 = t
            .regions()
            .iter()
            .map(|r| match r {
                Region::Seq(_) => 1.0,
                Region::Par(v) => v.len() as f64,
            })
            .sum();
        let events = jobs * (1.0 + 2.0 * per_job);
        jobs_total += jobs;
        task_events += events;
        if worst.is_none_or(|(_, e)| events > e) {
            worst = Some((t.name(), events));
        }
    }
    if let Some((name, _)) = worst {
        terms.instants += jobs_total;
        terms.add(
            format!(
                "real-time jobs: {} jobs of {} tasks over {} (most from \"{name}\")",
                human(jobs_total),
                s.tasks().len(),
                s.horizon()
            ),
            vec!["task.period", "task.regions", "run.horizon"],
            task_events,
        );
    }
}

/// The estimate of `s`, or an input error if it exceeds `max_events`: the estimate, its
/// largest terms and their keys, and how to go on (`--max-events`).
pub fn check(s: &Scenario, max_events: u64) -> Result<Estimate, ScenarioError> {
    let e = estimate(s);
    if e.events <= max_events as f64 {
        return Ok(e);
    }
    let top = &e.drivers[0];
    let terms: Vec<String> = e
        .drivers
        .iter()
        .take(3)
        .map(|d| format!("{} ~ {} ({})", d.what, human(d.events), d.keys.join(", ")))
        .collect();
    Err(ScenarioError {
        file: s.file().to_string(),
        line: 0,
        column: 0,
        field: top.keys[0].to_string(),
        message: format!(
            "this scenario implies about {} simulation steps, beyond the budget of {} \
             (--max-events): {}. Change the keys named, or pass --max-events {} to run it \
             anyway",
            human(e.events),
            human(max_events as f64),
            terms.join("; "),
            (e.events.min(u64::MAX as f64) as u64).saturating_add(1),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(text: &str) -> Estimate {
        estimate(&Scenario::parse("t.toml", text).unwrap())
    }

    #[test]
    fn a_small_scenario_is_small_and_a_tiny_quantum_is_named() {
        let text = "[policy]\nname = \"rr\"\n[run]\nhorizon = \"1s\"\n[[process]]\nname = \"a\"\n";
        assert!(est(text).events < 1e4, "{:?}", est(text));
        let tiny = text.replace("\"rr\"", "\"rr\"\nquantum = \"1ns\"");
        let e = est(&tiny);
        assert!(e.events > 1e9, "{e:?}");
        assert!(e.drivers[0].keys.contains(&"policy.quantum"));
        let err = check(
            &Scenario::parse("t.toml", &tiny).unwrap(),
            DEFAULT_MAX_EVENTS,
        )
        .unwrap_err();
        assert_eq!(err.field, "policy.quantum");
        assert!(err.message.contains("--max-events"), "{err}");
    }

    #[test]
    fn bounded_work_ends_the_span_early() {
        // 8 ms of work under a 10 s horizon: slices over 8 ms, not 10 s.
        let e = est("[policy]\nname = \"rr\"\nquantum = \"1us\"\n[[process]]\nname = \"a\"\nburst = \"8ms\"\n");
        assert!(e.events < 1e5, "{e:?}");
    }
}
