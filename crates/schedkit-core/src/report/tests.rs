use super::*;

#[test]
fn a_deadline_is_met_at_the_instant_and_missed_after_or_unfinished_before_the_end() {
    let (d, end) = (Nanos(100), Nanos(200));
    assert!(!misses_deadline(d, Some(Nanos(100)), end));
    assert!(misses_deadline(d, Some(Nanos(101)), end));
    assert!(misses_deadline(d, None, end));
    assert!(!misses_deadline(Nanos(200), None, end));
    assert!(!misses_deadline(Nanos(300), None, end));
}

/// Open jobs behave as the map they replace: any insertion order, removal from anywhere.
#[test]
fn open_jobs_act_as_a_map_by_job_number() {
    let v = |x: u64| (Nanos(x), Nanos(x + 10));
    let mut o = OpenJobs::default();
    for j in [0, 1, 3, 2] {
        o.insert(j, v(j));
    }
    o.insert(1, v(100));
    assert_eq!(o.remove(1), Some(v(100)));
    assert_eq!(o.remove(1), None);
    assert_eq!(o.remove(0), Some(v(0)));
    assert_eq!(o.values().copied().collect::<Vec<_>>(), [v(2), v(3)]);
    assert_eq!(o.remove(3), Some(v(3)));
    assert_eq!(o.remove(2), Some(v(2)));
    assert_eq!(o.remove(2), None);
}

/// Lag is piecewise linear; its peak between samples must not be missed.
#[test]
fn max_abs_lag_is_exact_between_samples() {
    let s = Scenario::parse(
        "t.toml",
        "cores = 1\n[run]\nhorizon = \"9ms\"\n[[process]]\nname = \"A\"\n[[process]]\nname = \"B\"\n",
    )
    .unwrap();
    let mut m = Metrics::new(&s, "test", 1);
    let ms = Nanos::from_ms;
    let a = Owner::Process {
        process: 0,
        thread: 0,
    };
    let b = Owner::Process {
        process: 1,
        thread: 0,
    };
    let run = |m: &mut Metrics, slot, from, to| {
        m.record(&Event::Dispatch {
            t: from,
            core: 0,
            slot,
        });
        m.record(&Event::Deschedule {
            t: to,
            core: 0,
            slot,
            reason: Reason::Expired,
        });
    };
    m.record(&Event::Arrive {
        t: ms(0),
        slot: 0,
        owner: a,
    });
    m.record(&Event::Arrive {
        t: ms(0),
        slot: 1,
        owner: b,
    });
    run(&mut m, 0, ms(0), ms(4));
    run(&mut m, 1, ms(4), ms(8));
    run(&mut m, 0, ms(8), ms(9));
    let r = m.finish(ms(9));
    // At 4 ms: A has 4 ms against GPS's 2 ms, B 0 against 2 ms.
    assert_eq!(r.processes[0].max_abs_lag_ns, 2_000_000);
    assert_eq!(r.processes[1].max_abs_lag_ns, 2_000_000);
    assert_eq!(r.processes[0].lag_ns, -500_000);
    assert_eq!(r.summary.max_abs_lag_ns, 2_000_000);
}

/// Sleep is not waiting: a thread that runs 10 ms, sleeps 20 ms and runs 10 ms beside an
/// idle core waited 0; one that shares its core the whole time waited what the other ran.
/// Job shares are of the job's CPU time, machine shares of cores x window.
#[test]
fn waiting_excludes_blocked_time_and_job_shares_split_the_job() {
    let s = Scenario::parse(
        "t.toml",
        "cores = 2\n[run]\nhorizon = \"40ms\"\n[[process]]\nname = \"A\"\n[[process]]\nname = \"B\"\n",
    )
    .unwrap();
    let mut m = Metrics::new(&s, "test", 2);
    let ms = Nanos::from_ms;
    let owner = |process| Owner::Process { process, thread: 0 };
    let mut ev = vec![
        Event::Arrive {
            t: ms(0),
            slot: 0,
            owner: owner(0),
        },
        Event::Arrive {
            t: ms(0),
            slot: 1,
            owner: owner(1),
        },
        Event::Dispatch {
            t: ms(0),
            core: 0,
            slot: 0,
        },
        Event::Deschedule {
            t: ms(10),
            core: 0,
            slot: 0,
            reason: Reason::Blocked,
        },
        Event::Block { t: ms(10), slot: 0 },
        Event::Dispatch {
            t: ms(10),
            core: 0,
            slot: 1,
        },
        Event::Deschedule {
            t: ms(20),
            core: 0,
            slot: 1,
            reason: Reason::Blocked,
        },
        Event::Block { t: ms(20), slot: 1 },
        Event::Wake { t: ms(30), slot: 0 },
        Event::Dispatch {
            t: ms(30),
            core: 0,
            slot: 0,
        },
        Event::Finish { t: ms(40), slot: 0 },
    ];
    ev.sort_by_key(|e| e.time());
    for e in &ev {
        m.record(e);
    }
    let mut m2 = Metrics::new(&s, "test", 2);
    for e in &ev {
        m2.record(e);
    }
    m2.measured_waiting(1, 0, 3_000_000);
    let r = m.finish(ms(40));
    // A: turnaround 40, cpu 20, blocked 20 -> waiting 0.
    assert_eq!(r.threads[0].waiting_ns, 0);
    // B: waited 10 ms for the core (0-10), ran 10, then slept to the end: waiting 10.
    assert_eq!(r.threads[1].waiting_ns, ms(10).0);
    // 30 ms of job CPU: A has 2/3 of the job, 20 / (2 x 40) = 1/4 of the machine.
    assert_eq!(r.summary.job_cpu_ns, ms(30).0);
    assert!((r.processes[0].job_share - 2.0 / 3.0).abs() < 1e-9);
    assert!((r.processes[0].share - 0.25).abs() < 1e-9);
    let sum: f64 = r.processes.iter().map(|p| p.ideal_job_share).sum();
    assert!((sum - 1.0).abs() < 1e-9, "ideal job shares sum to {sum}");
    // The engine's own measurement, where given, is the figure.
    let r2 = m2.finish(ms(40));
    assert_eq!(r2.threads[1].waiting_ns, 3_000_000);
    assert_eq!(r2.threads[0].waiting_ns, 0);
}
