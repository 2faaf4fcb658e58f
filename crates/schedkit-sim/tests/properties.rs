//! Property tests over random workloads for every policy the simulator runs.
//!
//! Each case draws a random machine and workload (processes with random arrival, burst or
//! unbounded, threads, nice, priority, tickets, groups, sometimes `cpus`; and random
//! periodic tasks with sequential and parallel regions), renders it as scenario text, and runs
//! it under **every policy in [`SIM_POLICIES`]**, so policies added later are covered without
//! touching this file. Real-time policies get the task set (plus, sometimes, background
//! processes); the others get the processes. On the full trace it checks:
//!
//! 1. no thread is on two cores at once and no core runs two threads;
//! 2. a finished thread received exactly its demand; a finished real-time job exactly the
//!    work of its regions; an unfinished thread never more than its demand;
//! 3. if the dispatcher says it is work-conserving, no core is idle while a ready thread
//!    allowed on it waits (timeline rebuilt from Arrive/Dispatch/Deschedule/Finish/Block/Wake,
//!    checked after every instant's batch; only without context-switch cost, which idles a
//!    core on purpose, and only for policies without a controller, which may move threads);
//! 4. the GPS ideal shares integrate to `min(cores, runnable threads)` over the window;
//! 5. the engine corrected no invalid pick.
//!
//! `SCHEDKIT_TEST_POLICIES=lottery,stride` restricts the run to those policies.
//!
//! A policy may reject a generated scenario at build time (P-EDF when a task fits on no
//! core, or when tasks carry `cpus`: then the case is retried without affinities); such cases are counted and printed, and the test fails if a policy never ran at all.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::{Event, Owner, TraceLog};
use schedkit_core::Nanos;
use schedkit_sim::policies::{build, SIM_POLICIES};
use schedkit_sim::{simulate_report, SimStats};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

// ---------------------------------------------------------------------------------------------
// Random workloads

#[derive(Clone, Debug)]
struct GenProcess {
    arrival_us: u64,
    burst_us: Option<u64>,
    threads: u32,
    nice: i32,
    priority: i32,
    tickets: u64,
    cpus_mask: Option<u8>,
    group: Option<usize>,
    /// A run/sleep pattern (us each): the thread blocks and wakes through the engine.
    pattern: Option<(u64, u64)>,
}

#[derive(Clone, Debug)]
enum GenRegion {
    Seq(u64),
    Par(Vec<u64>),
}

#[derive(Clone, Debug)]
struct GenTask {
    period_us: u64,
    /// Relative deadline as a percentage of the period (`None`: implicit).
    deadline_pct: Option<u64>,
    offset_us: u64,
    /// Region times as per-mille of the period.
    regions: Vec<GenRegion>,
    cpus_mask: Option<u8>,
}

#[derive(Clone, Debug)]
struct Workload {
    cores: usize,
    quantum_us: u64,
    horizon_ms: u64,
    context_switch_us: u64,
    seed: u64,
    levels: u32,
    boost_ms: u64,
    groups: Vec<u64>,
    processes: Vec<GenProcess>,
    tasks: Vec<GenTask>,
    /// Real-time policies also get the processes (as background load).
    rt_background: bool,
}

fn process() -> impl Strategy<Value = GenProcess> {
    (
        (0u64..20_000, prop::option::weighted(0.75, 100u64..20_000)),
        (1u32..=3, -20i32..=19, -5i32..=5, 1u64..=100),
        (
            prop::option::weighted(0.3, 1u8..16),
            any::<Option<prop::sample::Index>>(),
            prop::option::weighted(0.25, (50u64..5_000, 50u64..10_000)),
        ),
    )
        .prop_map(
            |(
                (arrival_us, burst_us),
                (threads, nice, priority, tickets),
                (cpus_mask, group, pattern),
            )| {
                GenProcess {
                    arrival_us,
                    burst_us,
                    threads,
                    nice,
                    priority,
                    tickets,
                    cpus_mask,
                    // Resolved against the number of groups when rendering.
                    group: group.map(|g| g.index(usize::MAX)),
                    pattern,
                }
            },
        )
}

fn region() -> impl Strategy<Value = GenRegion> {
    prop_oneof![
        (10u64..250).prop_map(GenRegion::Seq),
        prop::collection::vec(10u64..200, 1..=3).prop_map(GenRegion::Par),
    ]
}

fn task() -> impl Strategy<Value = GenTask> {
    (
        1_000u64..20_000,
        prop::option::weighted(0.3, 50u64..=150),
        0u64..5_000,
        prop::collection::vec(region(), 1..=3),
        prop::option::weighted(0.3, 1u8..16),
    )
        .prop_map(
            |(period_us, deadline_pct, offset_us, regions, cpus_mask)| GenTask {
                period_us,
                deadline_pct,
                offset_us,
                regions,
                cpus_mask,
            },
        )
}

fn workload() -> impl Strategy<Value = Workload> {
    (
        (1usize..=4, 200u64..5_000, 5u64..80),
        (
            prop_oneof![3 => Just(0u64), 1 => 1u64..100],
            0u64..i64::MAX as u64, // TOML integers are i64
            1u32..=4,
            prop_oneof![Just(0u64), 5u64..40],
        ),
        prop::collection::vec(1u64..4096, 0..=2),
        prop::collection::vec(process(), 1..=6),
        prop::collection::vec(task(), 1..=4),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(
                (cores, quantum_us, horizon_ms),
                (context_switch_us, seed, levels, boost_ms),
                groups,
                processes,
                tasks,
                rt_background,
            )| Workload {
                cores,
                quantum_us,
                horizon_ms,
                context_switch_us,
                seed,
                levels,
                boost_ms,
                groups,
                processes,
                tasks,
                rt_background,
            },
        )
}

/// Policies whose work is periodic real-time tasks.
fn is_realtime(p: PolicyName) -> bool {
    matches!(
        p,
        PolicyName::Edf
            | PolicyName::Rm
            | PolicyName::Dm
            | PolicyName::Gedf
            | PolicyName::Pedf
            | PolicyName::Paws
            | PolicyName::Ws
            | PolicyName::SchedDeadline
    )
}

fn cpus_list(mask: u8, cores: usize) -> Option<String> {
    let cpus: Vec<String> = (0..cores)
        .filter(|c| mask & (1 << c) != 0)
        .map(|c| c.to_string())
        .collect();
    (!cpus.is_empty()).then(|| format!("[{}]", cpus.join(", ")))
}

/// The workload as a scenario file for `policy`.
fn render(w: &Workload, policy: PolicyName, with_cpus: bool) -> String {
    let mut s = String::new();
    let us = |v: u64| format!("\"{v}us\"");
    writeln!(s, "cores = {}", w.cores).unwrap();
    writeln!(s, "[policy]\nname = \"{policy}\"").unwrap();
    writeln!(s, "quantum = {}", us(w.quantum_us)).unwrap();
    writeln!(s, "seed = {}", w.seed).unwrap();
    writeln!(s, "context_switch = {}", us(w.context_switch_us)).unwrap();
    writeln!(s, "levels = {}", w.levels).unwrap();
    writeln!(s, "boost = \"{}ms\"", w.boost_ms).unwrap();
    writeln!(s, "[run]\nhorizon = \"{}ms\"", w.horizon_ms).unwrap();
    for (i, g) in w.groups.iter().enumerate() {
        writeln!(s, "[[group]]\nname = \"g{i}\"\nweight = {g}").unwrap();
    }
    let realtime = is_realtime(policy);
    if !realtime || w.rt_background {
        for (i, p) in w.processes.iter().enumerate() {
            writeln!(s, "[[process]]\nname = \"p{i}\"").unwrap();
            writeln!(s, "arrival = {}", us(p.arrival_us)).unwrap();
            if let Some(b) = p.burst_us {
                writeln!(s, "burst = {}", us(b)).unwrap();
            }
            writeln!(s, "threads = {}", p.threads).unwrap();
            writeln!(s, "nice = {}", p.nice).unwrap();
            writeln!(s, "priority = {}", p.priority).unwrap();
            writeln!(s, "tickets = {}", p.tickets).unwrap();
            if let Some(c) = p
                .cpus_mask
                .filter(|_| with_cpus)
                .and_then(|m| cpus_list(m, w.cores))
            {
                writeln!(s, "cpus = {c}").unwrap();
            }
            if let Some((run, sleep)) = p.pattern {
                writeln!(
                    s,
                    "pattern = [{{ run = {} }}, {{ sleep = {} }}]",
                    us(run),
                    us(sleep)
                )
                .unwrap();
            }
            if let (Some(g), false) = (p.group, w.groups.is_empty()) {
                writeln!(s, "group = \"g{}\"", g % w.groups.len()).unwrap();
            }
        }
    }
    if realtime {
        for (i, t) in w.tasks.iter().enumerate() {
            writeln!(s, "[[task]]\nname = \"t{i}\"").unwrap();
            writeln!(s, "period = {}", us(t.period_us)).unwrap();
            if let Some(d) = t.deadline_pct {
                writeln!(s, "deadline = {}", us((t.period_us * d / 100).max(1))).unwrap();
            }
            writeln!(s, "offset = {}", us(t.offset_us)).unwrap();
            let time = |pm: u64| us((t.period_us * pm / 1000).max(1));
            let regions: Vec<String> = t
                .regions
                .iter()
                .map(|r| match r {
                    GenRegion::Seq(c) => format!("{{ seq = {} }}", time(*c)),
                    GenRegion::Par(v) => format!(
                        "{{ par = [{}] }}",
                        v.iter().map(|c| time(*c)).collect::<Vec<_>>().join(", ")
                    ),
                })
                .collect();
            writeln!(s, "regions = [{}]", regions.join(", ")).unwrap();
            if let Some(c) = t
                .cpus_mask
                .filter(|_| with_cpus)
                .and_then(|m| cpus_list(m, w.cores))
            {
                writeln!(s, "cpus = {c}").unwrap();
            }
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Checking a trace

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ready,
    Running(usize),
    Blocked,
    Done,
}

/// One thread's life in the trace (slots are reused, so one per `Arrive`).
struct Life {
    owner: Owner,
    state: State,
    since: Nanos,
    cpu: u64,
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)*) => {
        if !$cond {
            return Err(format!($($msg)*));
        }
    };
}

fn demand(s: &Scenario, owner: Owner) -> Option<u64> {
    match owner {
        Owner::Process { process, .. } => s.processes()[process].burst().map(|b| b.0),
        // Checked per job at JobFinish; one thread's share of a region is not in its owner.
        Owner::Task { .. } => None,
    }
}

fn allowed(s: &Scenario, owner: Owner, core: usize) -> bool {
    let cpus = match owner {
        Owner::Process { process, .. } => &s.processes()[process].cpus(),
        Owner::Task { task, .. } => &s.tasks()[task].cpus(),
    };
    cpus.as_ref().is_none_or(|c| c.contains(&core))
}

/// Checks properties 1-4 on `log`; returns the first violation.
fn check_trace(
    s: &Scenario,
    log: &TraceLog,
    report: &Report,
    stats: &SimStats,
    work_conserving: bool,
    static_affinity: bool,
) -> Result<(), String> {
    let end = stats.end;
    let mut lives: Vec<Life> = Vec::new();
    let mut current: HashMap<u32, usize> = HashMap::new();
    let mut cores: Vec<Option<u32>> = vec![None; s.cores()];
    let mut job_cpu: BTreeMap<(usize, u64), u64> = BTreeMap::new();
    let mut runnable: u64 = 0;
    let mut gps_integral: f64 = 0.0;
    let mut last_t = Nanos::ZERO;
    let check_wc = work_conserving && static_affinity && s.policy().context_switch() == Nanos::ZERO;

    let events = &log.events;
    let mut i = 0;
    while i < events.len() {
        let t = events[i].time();
        ensure!(t >= last_t, "time went backwards at {:?}", events[i]);
        gps_integral += (t - last_t).0 as f64 * runnable.min(s.cores() as u64) as f64;
        last_t = t;
        // One instant's batch.
        while i < events.len() && events[i].time() == t {
            let e = &events[i];
            i += 1;
            let life = |slot: &u32, current: &HashMap<u32, usize>| -> Result<usize, String> {
                current
                    .get(slot)
                    .copied()
                    .ok_or_else(|| format!("{e:?}: slot never arrived"))
            };
            match *e {
                Event::Arrive { slot, owner, .. } => {
                    if let Some(&k) = current.get(&slot) {
                        ensure!(
                            lives[k].state == State::Done,
                            "{e:?}: slot reused while its thread is {:?}",
                            lives[k].state
                        );
                    }
                    current.insert(slot, lives.len());
                    lives.push(Life {
                        owner,
                        state: State::Ready,
                        since: t,
                        cpu: 0,
                    });
                    runnable += gps_counted(owner);
                }
                Event::Dispatch { core, slot, .. } => {
                    let k = life(&slot, &current)?;
                    ensure!(
                        lives[k].state == State::Ready,
                        "{e:?}: thread dispatched while {:?} (on two cores?)",
                        lives[k].state
                    );
                    ensure!(
                        cores[core].is_none(),
                        "{e:?}: core {core} already runs slot {:?}",
                        cores[core]
                    );
                    ensure!(
                        allowed(s, lives[k].owner, core) || !static_affinity,
                        "{e:?}: dispatched outside its affinity"
                    );
                    cores[core] = Some(slot);
                    lives[k].state = State::Running(core);
                    lives[k].since = t;
                }
                Event::Deschedule { core, slot, .. } => {
                    let k = life(&slot, &current)?;
                    ensure!(
                        lives[k].state == State::Running(core) && cores[core] == Some(slot),
                        "{e:?}: descheduled while {:?}, core runs {:?}",
                        lives[k].state,
                        cores[core]
                    );
                    cores[core] = None;
                    let ran = (t - lives[k].since).0;
                    lives[k].cpu += ran;
                    lives[k].state = State::Ready;
                    if let Owner::Task { task, job } = lives[k].owner {
                        *job_cpu.entry((task, job)).or_default() += ran;
                    }
                }
                Event::Block { slot, .. } => {
                    let k = life(&slot, &current)?;
                    ensure!(
                        lives[k].state == State::Ready,
                        "{e:?}: blocked while {:?}",
                        lives[k].state
                    );
                    lives[k].state = State::Blocked;
                    runnable -= gps_counted(lives[k].owner);
                }
                Event::Wake { slot, .. } => {
                    let k = life(&slot, &current)?;
                    ensure!(
                        lives[k].state == State::Blocked,
                        "{e:?}: woken while {:?}",
                        lives[k].state
                    );
                    lives[k].state = State::Ready;
                    runnable += gps_counted(lives[k].owner);
                }
                Event::Finish { slot, .. } => {
                    let k = life(&slot, &current)?;
                    ensure!(
                        lives[k].state == State::Ready,
                        "{e:?}: finished while {:?}",
                        lives[k].state
                    );
                    if let Some(d) = demand(s, lives[k].owner) {
                        ensure!(
                            lives[k].cpu == d,
                            "{e:?}: finished after {} ns of CPU, demand {d} ns",
                            lives[k].cpu
                        );
                    }
                    lives[k].state = State::Done;
                    runnable -= gps_counted(lives[k].owner);
                }
                Event::JobFinish { task, job, .. } => {
                    let got = job_cpu.remove(&(task, job)).unwrap_or(0);
                    let want = s.tasks()[task].work().0;
                    ensure!(
                        got == want,
                        "{e:?}: job received {got} ns of CPU, its regions need {want} ns"
                    );
                }
                _ => {}
            }
        }
        // Property 3, after the whole batch of this instant.
        if check_wc && t < end {
            for (core, run) in cores.iter().enumerate() {
                if run.is_some() {
                    continue;
                }
                if let Some(l) = lives
                    .iter()
                    .find(|l| l.state == State::Ready && allowed(s, l.owner, core))
                {
                    return Err(format!(
                        "at {t}: core {core} idle while {:?} is ready and allowed on it",
                        l.owner
                    ));
                }
            }
        }
    }
    ensure!(
        cores.iter().all(Option::is_none),
        "threads still running after the end: {cores:?}"
    );
    for l in &lives {
        if let Some(d) = demand(s, l.owner) {
            ensure!(
                l.cpu <= d,
                "{:?} received {} ns, more than its demand {d} ns",
                l.owner,
                l.cpu
            );
        }
    }
    // Property 4: the GPS reference hands out exactly min(cores, runnable process threads)
    // over the window (real-time tasks are measured against their utilisation instead).
    ensure!(
        report.window_ns == end.0,
        "report window {} vs end {end}",
        report.window_ns
    );
    // Shares are of `cores * max(window, 1)` (an empty window does not divide by zero).
    let window = end.0.max(1);
    gps_integral += (end.0.max(last_t.0) - last_t.0) as f64 * runnable.min(s.cores() as u64) as f64;
    let ideal: f64 = report
        .processes
        .iter()
        .take(s.processes().len())
        .map(|p| p.ideal_share * s.cores() as f64 * window as f64)
        .sum();
    let tolerance = 1e-9 * (s.cores() as f64 * window as f64) + 1.0;
    let close = (ideal - gps_integral).abs() <= tolerance;
    ensure!(
        close,
        "GPS ideal CPU {ideal:.1} ns vs integral of min(cores, runnable) {gps_integral:.1} ns"
    );
    Ok(())
}

/// Every simulator policy, or those named in `SCHEDKIT_TEST_POLICIES` (comma-separated), to
/// iterate quickly on one policy.
fn policies_under_test() -> Vec<PolicyName> {
    match std::env::var("SCHEDKIT_TEST_POLICIES") {
        Ok(list) => list
            .split(',')
            .map(|n| {
                let p = PolicyName::parse(n.trim())
                    .unwrap_or_else(|| panic!("SCHEDKIT_TEST_POLICIES: unknown policy {n:?}"));
                assert!(SIM_POLICIES.contains(&p), "{p} is not a simulator policy");
                p
            })
            .collect(),
        Err(_) => SIM_POLICIES.to_vec(),
    }
}

#[derive(Default)]
struct Tally {
    ran: u64,
    rejected: u64,
    reason: Option<String>,
}

#[test]
fn every_policy_keeps_the_invariants_on_random_workloads() {
    let tally: RefCell<BTreeMap<&'static str, Tally>> = RefCell::new(BTreeMap::new());
    // A few hundred milliseconds by default; `PROPTEST_CASES=5000` for a deeper search.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let policies = policies_under_test();
    let result = runner.run(&workload(), |w| {
        for &policy in &policies {
            let parse = |text: &str| {
                Scenario::parse("random.toml", text).map_err(|e| {
                    TestCaseError::fail(format!("generated bad scenario: {e}\n{text}"))
                })
            };
            let mut text = render(&w, policy, true);
            let mut s = parse(&text)?;
            let mut built = build(&s);
            if built.is_err() {
                // Some policies place threads themselves (P-EDF packs tasks onto cores) and
                // reject `cpus`: try the same workload without affinities.
                text = render(&w, policy, false);
                s = parse(&text)?;
                built = build(&s);
            }
            // A controller may move threads (changing their affinity where the trace does not
            // show it): the affinity-based checks then do not apply.
            let (work_conserving, static_affinity) = match built {
                Ok(p) => (p.dispatcher.work_conserving(), p.controller.is_none()),
                Err(e) => {
                    let mut t = tally.borrow_mut();
                    let entry = t.entry(policy.as_str()).or_default();
                    entry.rejected += 1;
                    entry.reason.get_or_insert(e.message);
                    continue;
                }
            };
            let (report, log, stats) = simulate_report(&s, true)
                .map_err(|e| TestCaseError::fail(format!("{policy}: {e}\n{text}")))?;
            prop_assert_eq!(
                stats.invariants.invalid_picks,
                0,
                "{}: invalid picks\n{}",
                policy,
                text
            );
            check_trace(
                &s,
                &log.unwrap(),
                &report,
                &stats,
                work_conserving,
                static_affinity,
            )
            .map_err(|m| {
                TestCaseError::fail(format!(
                    "{policy} (work-conserving: {work_conserving}): {m}\n{text}"
                ))
            })?;
            tally.borrow_mut().entry(policy.as_str()).or_default().ran += 1;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let tally = tally.into_inner();
    for policy in &policies {
        let t = tally.get(policy.as_str());
        let (ran, rejected) = t.map_or((0, 0), |t| (t.ran, t.rejected));
        println!(
            "{:<20} ran {ran:>3} cases, rejected {rejected:>3}",
            policy.as_str()
        );
        if let Some(reason) = t.and_then(|t| t.reason.as_ref()) {
            println!("{:<20} first rejection: {reason}", "");
        }
        assert!(
            ran > 0,
            "{policy}: rejected every generated scenario ({:?}); extend the generator",
            t.and_then(|t| t.reason.as_ref())
        );
    }
}

/// Process threads take part in the GPS reference; real-time job threads do not.
fn gps_counted(owner: Owner) -> u64 {
    matches!(owner, Owner::Process { .. }) as u64
}
