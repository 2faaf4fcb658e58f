//! The real engine on small scenarios: counters through the fake source (this VM has no PMU,
//! so the hardware-counter path is exercised with fixed values), and the trace contract.

use schedkit_core::scenario::Scenario;
use schedkit_core::trace::Event;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_linux::perf::{CounterKind, FakeSource, Reading};

const TWO_SPINNERS: &str = r#"
cores = 2
[policy]
name = "default"
[run]
horizon = "2s"
[[process]]
name = "spin"
work = "spin"
threads = 2
burst = "30ms"
"#;

#[test]
fn hardware_counters_flow_from_the_source_to_the_outcome() {
    let s = Scenario::parse("t.toml", TWO_SPINNERS).unwrap();
    let mut fake = FakeSource::default();
    fake.values.insert(CounterKind::Cycles, 1000);
    fake.values.insert(CounterKind::DtlbLoadMisses, 7);
    fake.values.insert(CounterKind::ContextSwitches, 3);
    let mut opts = RunOptions::new(RunPolicy::Default);
    opts.counters = Some(Box::new(fake));
    let o = engine::run(&s, opts).unwrap();
    let p = &o.processes[0];
    let get = |k: CounterKind| p.counters.iter().find(|(x, _)| *x == k).unwrap().1.clone();
    // Per-thread counters are summed over the process' two threads.
    assert_eq!(get(CounterKind::Cycles).value(), Some(2000));
    assert_eq!(get(CounterKind::DtlbLoadMisses).value(), Some(14));
    assert_eq!(get(CounterKind::ContextSwitches).value(), Some(6));
    assert_eq!(get(CounterKind::Instructions), Reading::NotSupported);
    assert_eq!(p.threads, 2);
    assert!(p.work_done.unwrap() > 0);
}

#[test]
fn trace_of_a_real_run_keeps_the_event_contract() {
    let s = Scenario::parse("t.toml", TWO_SPINNERS).unwrap();
    let mut opts = RunOptions::new(RunPolicy::Default);
    opts.perf = false;
    let o = engine::run(&s, opts).unwrap();
    let mut last = 0;
    let mut running = std::collections::HashMap::new();
    let mut finished = 0;
    for e in &o.events {
        assert!(e.time().0 >= last, "time went backwards at {e:?}");
        last = e.time().0;
        match e {
            Event::Dispatch { slot, core, .. } => {
                assert!(
                    running.insert(*slot, *core).is_none(),
                    "dispatched twice: {e:?}"
                )
            }
            Event::Deschedule { slot, core, .. } => {
                assert_eq!(running.remove(slot), Some(*core), "{e:?}")
            }
            Event::Finish { slot, .. } => {
                assert!(!running.contains_key(slot), "finished while running: {e:?}");
                finished += 1;
            }
            _ => {}
        }
    }
    assert_eq!(finished, 2);
    // Each thread's CPU time in the trace matches the 30 ms it burned, within a sample
    // period (10 ms): the trace places run pieces inside each sample, so it may be short by
    // up to one sample (seen: 27.6 ms) and long by the sampler's lag.
    let mut cpu = std::collections::HashMap::new();
    let mut open = std::collections::HashMap::new();
    for e in &o.events {
        match e {
            Event::Dispatch { t, slot, .. } => {
                open.insert(*slot, t.0);
            }
            Event::Deschedule { t, slot, .. } => {
                *cpu.entry(*slot).or_insert(0u64) += t.0 - open.remove(slot).unwrap();
            }
            _ => {}
        }
    }
    for (slot, ns) in cpu {
        assert!(
            (20_000_000..=45_000_000).contains(&ns),
            "slot {slot}: {ns} ns"
        );
    }
}

/// Five busy single-thread processes on two CPUs: every CPU is overfull all the time, which
/// is where the reconstruction used to lose time (a running thread's schedstat total lags by
/// up to a tick, and a thread that moved CPU had its whole interval put on the new one).
fn five_busy(policy: &str) -> Scenario {
    let mut text = format!(
        "cores = 2\n[policy]\nname = \"{policy}\"\nperiod = \"20ms\"\n[run]\nhorizon = \"1500ms\"\n"
    );
    for (i, nice) in [0, 5, 5, 5, 5].iter().enumerate() {
        text += &format!("[[process]]\nname = \"T{i}\"\nnice = {nice}\nwork = \"spin\"\n");
    }
    Scenario::parse("five.toml", &text).unwrap()
}

/// Each process's CPU time in the trace against the kernel's exact total for its threads; and
/// the trace never has two threads on one CPU.
fn trace_against_kernel(o: &engine::RunOutcome) -> Vec<(String, u64, u64)> {
    use schedkit_core::trace::Owner;
    let mut process_of = std::collections::HashMap::new();
    let mut open = std::collections::HashMap::new();
    let mut traced = vec![0u64; o.scenario.processes().len()];
    let mut on_core = std::collections::HashMap::new();
    for e in &o.events {
        match e {
            Event::Arrive {
                slot,
                owner: Owner::Process { process, .. },
                ..
            } => {
                process_of.insert(*slot, *process);
            }
            Event::Dispatch { t, slot, core } => {
                // A thread read every other sample while it waits for a CPU must still be
                // closed before it is dispatched again.
                assert!(
                    open.insert(*slot, t.0).is_none(),
                    "slot {slot} dispatched twice, at {t}"
                );
                let before = on_core.insert(*core, *slot);
                assert!(before.is_none(), "two threads on CPU {core} at {t}");
            }
            Event::Deschedule { t, slot, core, .. } => {
                let since = open.remove(slot).expect("a Deschedule without a Dispatch");
                assert_eq!(on_core.remove(core), Some(*slot), "{e:?}");
                traced[process_of[slot]] += t.0 - since;
            }
            _ => {}
        }
    }
    o.scenario
        .processes()
        .iter()
        .zip(traced)
        .map(|(p, traced)| {
            let exact = o
                .threads
                .iter()
                .filter(|t| t.process == p.name())
                .map(|t| t.cpu_ns)
                .sum();
            (p.name().to_string(), traced, exact)
        })
        .collect()
}

#[test]
fn the_trace_keeps_every_threads_cpu_time_on_overfull_cpus() {
    let mut policies = vec![("default", RunPolicy::Default)];
    if unsafe { libc::geteuid() } == 0 {
        let s = five_busy("global-fair");
        policies.push(("global-fair", RunPolicy::from_scenario(&s).unwrap()));
    } else {
        eprintln!("global-fair part skipped: moving threads between CPUs needs root");
    }
    for (name, policy) in policies {
        let s = five_busy(name);
        let mut opts = RunOptions::new(policy);
        opts.perf = false;
        opts.state_dir = std::env::temp_dir().join(format!(
            "schedkit-engine-five-{name}-{}",
            std::process::id()
        ));
        let o = engine::run(&s, opts).unwrap();
        for (p, traced, exact) in trace_against_kernel(&o) {
            // What the last sample interval still carried (at most one interval, 10 ms) may
            // be missing; nothing else.
            let diff = traced.abs_diff(exact);
            assert!(
                diff <= exact / 100 + 10_000_000,
                "{name} {p}: trace {traced} ns against the kernel's {exact} ns"
            );
        }
    }
}

/// A process that lives a fraction of the status refresh cycle (~5 s per thread): its switch
/// counts come from readings while it lived, not from its first reading alone (its files are
/// gone once it has ended). The subshell waits for 60 `sleep 0.002` children, one at a time:
/// at least 60 voluntary switches in about 0.2-0.5 s, of which the readings may miss only
/// those after its last sample (one period, 10 ms: a handful).
#[test]
fn a_short_lived_process_keeps_the_switches_it_made_while_it_lived() {
    let text = r#"
cores = 1
[policy]
name = "default"
[run]
horizon = "3s"
[[process]]
name = "burst"
command = ["sh", "-c", "(i=0; while [ $i -lt 60 ]; do sleep 0.002; i=$((i+1)); done) & sleep 1.5; wait"]
"#;
    let s = Scenario::parse("burst.toml", text).unwrap();
    let mut opts = RunOptions::new(RunPolicy::Default);
    opts.perf = false;
    opts.state_dir =
        std::env::temp_dir().join(format!("schedkit-engine-burst-{}", std::process::id()));
    let o = engine::run(&s, opts).unwrap();
    let most = o
        .threads
        .iter()
        .filter(|t| t.process == "burst")
        .map(|t| t.voluntary_switches)
        .max()
        .unwrap_or(0);
    eprintln!(
        "threads tracked: {}; most voluntary switches of one: {most}",
        o.threads.len()
    );
    assert!(
        most >= 30,
        "the subshell's voluntary switches: {most} (at least 60 were made)"
    );
}

#[test]
fn a_fifo_class_process_runs_sched_fifo_under_the_kernels_scheduler() {
    // `class = "fifo"` under `policy = "default"`: the process's threads run SCHED_FIFO
    // (policy 1 in /proc/<tid>/stat's 41st field), the others stay SCHED_OTHER (0).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: SCHED_FIFO needs root (CAP_SYS_NICE)");
        return;
    }
    let s = Scenario::parse(
        "t.toml",
        "cores = 1\n[policy]\nname = \"default\"\n[run]\nhorizon = \"1500ms\"\n\
         [[process]]\nname = \"fifoclass\"\nclass = \"fifo\"\n\
         pattern = [{ run = \"1ms\" }, { sleep = \"20ms\" }]\n\
         [[process]]\nname = \"otherclass\"\nburst = \"1s\"\n",
    )
    .unwrap();
    let mut opts = RunOptions::new(RunPolicy::Default);
    opts.perf = false;
    fn policy_of(comm: &str) -> Option<u32> {
        for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let p = t.path();
            let c = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
            if c.trim() == comm {
                let stat = std::fs::read_to_string(p.join("stat")).ok()?;
                let after = &stat[stat.rfind(')')? + 2..];
                // Fields from the 3rd on; the policy is the 41st.
                return after.split(' ').nth(38)?.parse().ok();
            }
        }
        None
    }
    // The job's threads are threads of this process; a watcher reads their policies while
    // the run goes on in this thread.
    let watch = std::thread::spawn(|| {
        let mut seen = (None, None);
        for _ in 0..120 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            seen = (policy_of("fifoclass.0"), policy_of("otherclass.0"));
            if seen.0.is_some() && seen.1.is_some() {
                break;
            }
        }
        seen
    });
    let o = engine::run(&s, opts).unwrap();
    assert_eq!(o.processes.len(), 2);
    let seen = watch.join().unwrap();
    assert_eq!(seen, (Some(1), Some(0)), "(fifoclass, otherclass) policies");
}
