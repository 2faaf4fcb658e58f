//! Real-time scheduling in the simulator: the classical results (EDF optimal on one core, RM
//! below it, Dhall's effect for global EDF, partitioned EDF avoiding it), fork-join response
//! times checked by hand, and memory that stays bounded over long horizons.
//!
//! The scenarios are the bundled files in `examples/realtime/`, so the documentation and the
//! tests cannot drift apart.

use schedkit_core::generate::{scenario, Seed001, UUniFast};
use schedkit_core::report::{Report, ThreadReport};
use schedkit_core::scenario::{PolicyName, PolicySpec, Scenario};
use schedkit_core::Nanos;
use schedkit_sim::{simulate_report, SimStats};
use std::path::PathBuf;

fn example(name: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/realtime")
        .join(name);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn with_policy(s: Scenario, name: PolicyName) -> Scenario {
    s.with_policy_spec(PolicySpec::new(name)).unwrap()
}

fn run(s: &Scenario) -> (Report, SimStats) {
    let (report, _, stats) = simulate_report(s, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        stats.invariants.invalid_picks, 0,
        "the policy made invalid picks"
    );
    (report, stats)
}

fn task<'r>(r: &'r Report, name: &str) -> &'r ThreadReport {
    r.threads
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

fn misses(r: &Report, name: &str) -> u64 {
    task(r, name).deadline_misses.expect("a real-time task")
}

#[test]
fn edf_meets_every_deadline_at_utilisation_one() {
    let s = example("edf-full.toml");
    let u: f64 = s.tasks().iter().map(|t| t.utilisation()).sum();
    assert!(
        (u - 1.0).abs() < 1e-12,
        "the set must be exactly at 1.0, is {u}"
    );
    let (r, _) = run(&s);
    assert_eq!(r.summary.deadline_misses, 0);
    // 200 ms / 4 + 200 / 5 + 200 / 10 jobs, and the core never idles.
    assert_eq!(r.summary.jobs, 50 + 40 + 20);
    assert_eq!(r.summary.utilisation, 1.0);
    // The same set under RM (U above its bound) does miss: the test can fail.
    let (rm, _) = run(&with_policy(s, PolicyName::Rm));
    assert!(rm.summary.deadline_misses > 0);
}

#[test]
fn rm_misses_where_edf_does_not() {
    let s = example("rm-vs-edf.toml");
    assert_eq!(s.policy().name(), PolicyName::Rm);
    let (rm, _) = run(&s);
    assert_eq!(misses(&rm, "t1"), 0, "t1 has the highest RM priority");
    assert!(misses(&rm, "t2") >= 1, "t2 finishes at 8 ms, deadline 7 ms");
    // The first t2 job: released 0, runs 2-5 and 7-8; t1's jobs respond in 2 ms.
    assert_eq!(task(&rm, "t1").max_response_ns, Some(Nanos::from_ms(2).0));
    assert!(task(&rm, "t2").max_response_ns.unwrap() >= Nanos::from_ms(8).0);
    let (edf, _) = run(&with_policy(s, PolicyName::Edf));
    assert_eq!(edf.summary.deadline_misses, 0);
}

#[test]
fn global_edf_shows_dhalls_effect_and_pedf_avoids_it() {
    let s = example("dhall.toml");
    let u: f64 = s.tasks().iter().map(|t| t.utilisation()).sum();
    assert!((u - 1.309).abs() < 1e-3, "total utilisation {u}");
    let (g, _) = run(&s);
    assert_eq!(misses(&g, "light1"), 0);
    assert_eq!(misses(&g, "light2"), 0);
    assert!(
        misses(&g, "heavy") >= 1,
        "the heavy task must miss under global EDF"
    );
    // The first heavy job waits 2 ms for both light jobs, then runs 10 ms: done at 12 > 11.
    assert!(task(&g, "heavy").max_response_ns.unwrap() >= Nanos::from_ms(12).0);

    let p = with_policy(s, PolicyName::Pedf);
    let (r, _) = run(&p);
    assert_eq!(r.summary.deadline_misses, 0, "pedf schedules Dhall's set");
    assert_eq!(r.summary.migrations, 0, "partitioned threads never migrate");
    assert_eq!(
        task(&r, "heavy").max_response_ns,
        Some(Nanos::from_ms(10).0)
    );
    let part = schedkit_sim::policies::pedf::build(&p).unwrap();
    let a = part.assignment();
    assert_ne!(a[2], a[0], "the heavy task is alone on its core");
    assert_eq!(a[0], a[1], "both light tasks share the other core");
}

#[test]
fn pedf_reports_a_task_that_fits_nowhere() {
    let text = r#"
cores = 2
[policy]
name = "pedf"

[[task]]
name = "a"
period = "10ms"
wcet = "6ms"

[[task]]
name = "b"
period = "10ms"
wcet = "6ms"

[[task]]
name = "too-much"
period = "10ms"
wcet = "5ms"
"#;
    let s = Scenario::parse("three.toml", text).unwrap();
    let err = simulate_report(&s, false).expect_err("must not partition");
    assert_eq!(err.file, "three.toml");
    assert_eq!(err.line, 16, "{err}");
    assert_eq!(err.field, "task");
    assert!(err.message.contains("\"too-much\""), "{err}");
    assert!(err.message.contains("fits on no core"), "{err}");
}

#[test]
fn pedf_rejects_processes_and_pinned_tasks_with_located_errors() {
    let proc_text =
        "cores = 2\n[policy]\nname = \"pedf\"\n\n[[process]]\nname = \"p\"\nburst = \"1ms\"\n";
    let s = Scenario::parse("p.toml", proc_text).unwrap();
    let err = simulate_report(&s, false).expect_err("processes rejected");
    assert_eq!((err.line, err.field.as_str()), (5, "process"), "{err}");
    let pinned = "cores = 2\n[policy]\nname = \"pedf\"\n\n[[task]]\nname = \"t\"\nperiod = \"10ms\"\nwcet = \"1ms\"\ncpus = [1]\n";
    let s = Scenario::parse("t.toml", pinned).unwrap();
    let err = simulate_report(&s, false).expect_err("cpus rejected");
    assert_eq!((err.line, err.field.as_str()), (5, "task.cpus"), "{err}");
}

#[test]
fn fork_join_response_times_match_the_hand_computation() {
    let (r, _) = run(&example("forkjoin.toml"));
    assert_eq!(r.summary.deadline_misses, 0);
    assert_eq!(task(&r, "pipeline").jobs, Some(2));
    assert_eq!(task(&r, "control").jobs, Some(4));
    assert_eq!(
        task(&r, "pipeline").max_response_ns,
        Some(Nanos::from_ms(9).0)
    );
    assert_eq!(
        task(&r, "control").max_response_ns,
        Some(Nanos::from_ms(3).0)
    );
    // CPU time: 2 jobs x 11 ms and 4 jobs x 3 ms.
    assert_eq!(task(&r, "pipeline").cpu_ns, Nanos::from_ms(22).0);
    assert_eq!(task(&r, "control").cpu_ns, Nanos::from_ms(12).0);
}

#[test]
fn pedf_runs_fork_join_tasks_serially_on_their_core() {
    // On one core, P-EDF is EDF: the 11 ms pipeline job runs its threads one after another.
    let s = with_policy(example("forkjoin.toml"), PolicyName::Pedf);
    let (r, _) = run(&s);
    assert_eq!(r.summary.deadline_misses, 0);
    assert_eq!(r.summary.migrations, 0);
    // Density 11/20 + 3/10 = 0.85 fits one core: both tasks on core 0. Pipeline's first job
    // waits for control (deadline 10 < 20): control 0-3, seq 3-5, threads 5-13. At 13 the
    // last seq region is released (its threads' release time is 13), and control's second
    // job (released 10, same deadline 20) wins the tie by release time: control 13-16, seq
    // 16-17. Response 17 ms; the second pipeline job repeats it (control released at 30).
    assert_eq!(
        task(&r, "pipeline").max_response_ns,
        Some(Nanos::from_ms(17).0)
    );
    assert_eq!(
        task(&r, "control").max_response_ns,
        Some(Nanos::from_ms(6).0)
    );
}

#[test]
fn memory_stays_bounded_for_long_horizons() {
    let make = |secs: u64| {
        scenario(
            "uunifast",
            4,
            PolicyName::Gedf,
            Nanos::from_secs(secs),
            UUniFast::new(20, 3.0, 11).generate(),
        )
        .unwrap()
    };
    let (_, short) = run(&make(2));
    let (r, long) = run(&make(40));
    assert!(
        long.jobs > 15 * short.jobs,
        "{} vs {}",
        long.jobs,
        short.jobs
    );
    assert!(r.summary.jobs > 0);
    // At most one live job per task at a time (implicit deadlines, U < m) plus the queue's
    // stale entries: the high-water marks do not move with 20x the simulated time.
    assert_eq!(long.peak_slots, short.peak_slots);
    assert_eq!(long.peak_jobs, short.peak_jobs);
    assert!(long.peak_slots <= 2 * 20, "slots {}", long.peak_slots);
    assert!(long.peak_queue <= 4 * (20 + 4), "queue {}", long.peak_queue);

    // The same for fork-join sets from seed 001's generator.
    let fj = |secs: u64| {
        scenario(
            "seed001",
            2,
            PolicyName::Gedf,
            Nanos::from_secs(secs),
            Seed001::new(2, (0.58, 0.60), 5).generate(),
        )
        .unwrap()
    };
    let (_, a) = run(&fj(2));
    let (_, b) = run(&fj(40));
    assert!(
        b.peak_slots <= a.peak_slots.max(1) * 2,
        "{} vs {}",
        b.peak_slots,
        a.peak_slots
    );
    assert!(
        b.peak_jobs <= a.peak_jobs.max(1) * 2,
        "{} vs {}",
        b.peak_jobs,
        a.peak_jobs
    );
}

#[test]
fn generated_sets_are_schedulable_by_edf_below_one_core() {
    // Sanity across the generator: any UUniFast set with U <= 1 on one core meets all
    // deadlines under EDF (and the partitioner accepts it on one core).
    for seed in 0..20 {
        let tasks = UUniFast::new(8, 0.95, seed).generate();
        let u: f64 = tasks.iter().map(|t| t.utilisation()).sum();
        if u > 1.0 {
            continue;
        }
        let s = scenario("u", 1, PolicyName::Edf, Nanos::from_secs(1), tasks).unwrap();
        let (r, _) = run(&s);
        assert_eq!(r.summary.deadline_misses, 0, "seed {seed}");
        let (p, _) = run(&with_policy(s, PolicyName::Pedf));
        assert_eq!(p.summary.deadline_misses, 0, "seed {seed}");
    }
}

#[test]
fn metrics_count_as_docs_metrics_md_defines() {
    use schedkit_core::report::Metrics;
    use schedkit_core::trace::{Event, Owner, Reason, TraceSink};
    // A hand-made trace on 2 cores: A runs 0-2 on core 0 and is preempted by B (2-5, core 0);
    // A resumes on core 1 at 3 (a migration) and finishes at 6.
    let s = Scenario::parse(
        "two.toml",
        "cores = 2\n[policy]\nname = \"fcfs\"\n[[process]]\nname = \"A\"\nburst = \"5ms\"\n[[process]]\nname = \"B\"\nburst = \"3ms\"\n",
    )
    .unwrap();
    let ms = Nanos::from_ms;
    let a = Owner::Process {
        process: 0,
        thread: 0,
    };
    let b = Owner::Process {
        process: 1,
        thread: 0,
    };
    let mut m = Metrics::new(&s, "sim", 2);
    for e in [
        Event::Arrive {
            t: ms(0),
            slot: 0,
            owner: a,
        },
        Event::Arrive {
            t: ms(0),
            slot: 1,
            owner: b,
        },
        Event::Dispatch {
            t: ms(0),
            core: 0,
            slot: 0,
        },
        Event::Deschedule {
            t: ms(2),
            core: 0,
            slot: 0,
            reason: Reason::Preempted,
        },
        Event::Dispatch {
            t: ms(2),
            core: 0,
            slot: 1,
        },
        Event::Migrate {
            t: ms(3),
            slot: 0,
            from: 0,
            to: 1,
        },
        Event::Dispatch {
            t: ms(3),
            core: 1,
            slot: 0,
        },
        Event::Deschedule {
            t: ms(5),
            core: 0,
            slot: 1,
            reason: Reason::Finished,
        },
        Event::Finish { t: ms(5), slot: 1 },
        Event::Deschedule {
            t: ms(6),
            core: 1,
            slot: 0,
            reason: Reason::Finished,
        },
        Event::Finish { t: ms(6), slot: 0 },
    ] {
        m.record(&e);
    }
    let r = m.finish(ms(6));
    let sm = &r.summary;
    assert_eq!(sm.dispatches, 3, "every Dispatch event");
    assert_eq!(sm.preemptions, 1, "Deschedule for Preempted or Expired");
    assert_eq!(
        sm.context_switches, 1,
        "core 0: A then B; core 1's first dispatch is none"
    );
    assert_eq!(sm.migrations, 1);
    let (ta, tb) = (&r.threads[0], &r.threads[1]);
    assert_eq!(
        (ta.context_switches, tb.context_switches),
        (1, 0),
        "switched out unfinished"
    );
    assert_eq!((ta.migrations, tb.migrations), (1, 0));
    assert_eq!(
        (ta.cpu_ns, ta.turnaround_ns, ta.waiting_ns),
        (ms(5).0, ms(6).0, ms(1).0)
    );
    assert_eq!(
        (tb.cpu_ns, tb.turnaround_ns, tb.waiting_ns),
        (ms(3).0, ms(5).0, ms(2).0)
    );
    assert_eq!((ta.response_ns, tb.response_ns), (Some(0), Some(ms(2).0)));
    assert_eq!(sm.avg_waiting_ns, 1_500_000);
    assert_eq!(sm.avg_response_ns, 1_000_000);
    assert!((sm.utilisation - 8.0 / 12.0).abs() < 1e-12);
    assert_eq!(sm.makespan_ns, ms(6).0);
}

#[test]
fn task_rows_sum_their_threads_migrations_and_switches() {
    // Real-time task rows carry the per-thread counts summed over all their jobs' threads, so
    // they add up to the summary (no thread blocks here: switches == preemptions).
    let mut preemptions = 0;
    for file in [
        "dhall.toml",
        "rm-vs-edf.toml",
        "forkjoin.toml",
        "edf-full.toml",
    ] {
        let (r, _) = run(&example(file));
        let mig: u64 = r.threads.iter().map(|t| t.migrations).sum();
        let sw: u64 = r.threads.iter().map(|t| t.context_switches).sum();
        assert_eq!(mig, r.summary.migrations, "{file}");
        assert_eq!(sw, r.summary.preemptions, "{file}");
        preemptions += r.summary.preemptions;
    }
    // RM preempts t2 at 5 ms (t1's second job): the sums are not all zero.
    assert!(preemptions > 0);
}
