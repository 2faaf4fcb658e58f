//! Fair sharing in the simulator (seed 004, chapters 3-5): the CFS model, the weight
//! readjusting controllers (PFS, TFPS, TWRS), the shuttle balancer and tenant weights, on the
//! bundled examples in `examples/fairness/`. Run with `--nocapture` to see the tables that
//! `docs/fairness.md` quotes.

use schedkit_core::control::{Action, Controller, Snapshot};
use schedkit_core::report::Report;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::{Owner, TraceLog};
use schedkit_core::Nanos;
use schedkit_sim::{policies, simulate_report, Engine};
use std::path::Path;

fn example(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/fairness")
        .join(name);
    Scenario::load(&path).expect("example parses")
}

fn run(sc: &Scenario, policy: PolicyName) -> Report {
    let sc = sc
        .with_policy_spec(sc.policy().clone().with_name(policy))
        .unwrap();
    simulate_report(&sc, false).expect("simulates").0
}

/// CPU usage of each process in percent of the machine.
fn usage(r: &Report) -> Vec<f64> {
    r.processes.iter().map(|p| p.share * 100.0).collect()
}

/// G(Z, Y) = CPUU(Z) - CPUU(Y), in percentage points (seed 004, 3.6.1).
fn gap(r: &Report, z: usize, y: usize) -> f64 {
    let u = usage(r);
    u[z] - u[y]
}

fn greedy(c_threads: u32) -> Scenario {
    let mut i = 0;
    example("greedy.toml")
        .to_builder()
        .map_processes(|p| {
            i += 1;
            Ok::<_, ()>(if i == 3 { p.with_threads(c_threads) } else { p })
        })
        .unwrap()
        .build()
        .unwrap()
}

#[test]
fn greedy_cfs_rewards_threads_and_gaps_grow() {
    println!("policy  C   CPUU(A)  CPUU(B)  CPUU(C)  G(C,A)  G(C,B)");
    let mut prev = (f64::MIN, f64::MIN);
    for n in [10u32, 20, 50] {
        let r = run(&greedy(n), PolicyName::Cfs);
        let u = usage(&r);
        println!(
            "cfs    {n:>3}  {:>7.2}  {:>7.2}  {:>7.2}  {:>6.2}  {:>6.2}",
            u[0],
            u[1],
            u[2],
            gap(&r, 2, 0),
            gap(&r, 2, 1)
        );
        // Thread-fair: each process gets its thread count over 9 + n.
        let total = 9.0 + n as f64;
        for (i, threads) in [1.0, 8.0, n as f64].into_iter().enumerate() {
            assert!(
                (u[i] - 100.0 * threads / total).abs() < 0.5,
                "n = {n}: {u:?}"
            );
        }
        assert!(u[2] > u[1] && u[2] > u[0], "C has the largest share");
        let g = (gap(&r, 2, 0), gap(&r, 2, 1));
        assert!(g.0 > prev.0 && g.1 > prev.1, "gaps grow with C's threads");
        prev = g;
    }
}

#[test]
fn greedy_gaps_shrink_under_weight_readjustment() {
    for n in [10u32, 20, 50] {
        let sc = greedy(n);
        let cfs = run(&sc, PolicyName::Cfs);
        for policy in [PolicyName::Pfs, PolicyName::Tfps, PolicyName::Twrs] {
            let r = run(&sc, policy);
            let u = usage(&r);
            println!(
                "{:<6} {n:>3}  {:>7.2}  {:>7.2}  {:>7.2}  {:>6.2}  {:>6.2}",
                policy.as_str(),
                u[0],
                u[1],
                u[2],
                gap(&r, 2, 0),
                gap(&r, 2, 1)
            );
            assert!(gap(&r, 2, 0) < gap(&cfs, 2, 0) - 10.0, "{policy} n={n}");
            assert!(gap(&r, 2, 1) < gap(&cfs, 2, 1) - 5.0, "{policy} n={n}");
        }
        // PFS (and TFPS, equal to it on one core): every process a third, up to the
        // rounding of 1024 / n to an integer weight.
        let pfs = usage(&run(&sc, PolicyName::Pfs));
        for u in &pfs {
            assert!((u - 100.0 / 3.0).abs() < 1.0, "pfs n={n}: {pfs:?}");
        }
        // TWRS, eq. 3.3 on one core: weights 1024 * (59 - own threads) for n = 50 etc.
        let total = 9 + n as u64;
        let w = [
            (total - 1) as f64,
            8.0 * (total - 8) as f64,
            n as f64 * (total - n as u64).max(1) as f64,
        ];
        let sum: f64 = w.iter().sum();
        let twrs = usage(&run(&sc, PolicyName::Twrs));
        for i in 0..3 {
            assert!(
                (twrs[i] - 100.0 * w[i] / sum).abs() < 0.5,
                "twrs n={n}: {twrs:?}"
            );
        }
    }
}

#[test]
fn greedy_work_waiting_and_turnaround() {
    // Each process does the same 3 s of work split among its threads (3.6.2).
    let sc = example("greedy-work.toml");
    println!("policy  avg waiting ms (A, B, C, all threads)   avg turnaround ms (A, B, C, all)");
    let mut by_policy = Vec::new();
    for policy in [
        PolicyName::Cfs,
        PolicyName::Pfs,
        PolicyName::Tfps,
        PolicyName::Twrs,
    ] {
        let r = run(&sc, policy);
        let ms = |ns: u64| ns as f64 / 1e6;
        println!(
            "{:<6}  {:>8.1} {:>8.1} {:>8.1} {:>8.1}     {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            policy.as_str(),
            ms(r.processes[0].avg_waiting_ns),
            ms(r.processes[1].avg_waiting_ns),
            ms(r.processes[2].avg_waiting_ns),
            ms(r.summary.avg_waiting_ns),
            ms(r.processes[0].avg_turnaround_ns),
            ms(r.processes[1].avg_turnaround_ns),
            ms(r.processes[2].avg_turnaround_ns),
            ms(r.summary.avg_turnaround_ns),
        );
        // Every thread got its demand, and waiting = turnaround - execution.
        for t in &r.threads {
            assert_eq!(t.waiting_ns + t.cpu_ns, t.turnaround_ns);
            assert_eq!(Some(t.turnaround_ns), t.finish_ns.map(|f| f - t.arrival_ns));
        }
        assert_eq!(r.summary.makespan_ns, 9_000_000_000, "work conserving");
        by_policy.push(r);
    }
    let (cfs, pfs) = (&by_policy[0], &by_policy[1]);
    // CFS: all 59 threads progress alike, so C's last thread ends when every thread has run
    // 60 ms: at 59 x 60 ms = 3.54 s.
    let c_done = cfs
        .threads
        .iter()
        .filter(|t| t.process == "C")
        .filter_map(|t| t.finish_ns)
        .max()
        .unwrap();
    assert!((c_done as f64 / 3.54e9 - 1.0).abs() < 0.01, "{c_done}");
    // PFS: the three processes progress at the same rate and all finish near 9 s.
    for p in &pfs.processes {
        assert!(p.avg_turnaround_ns as f64 > 8.5e9, "{}", p.name);
    }
}

#[test]
fn global_cfs_leaves_the_heavy_process_alone() {
    let sc = example("global.toml");
    let r = run(&sc, PolicyName::Cfs);
    let window = r.window_ns;
    // T1 (1024) alone on one core for the whole run; T2-T5 (335) share the other.
    assert_eq!(r.processes[0].cpu_ns, window, "T1 never shares its core");
    for p in &r.processes[1..] {
        assert!((p.cpu_ns as f64 / (window as f64 / 4.0) - 1.0).abs() < 0.01);
    }
    assert_eq!(
        r.summary.migrations, 0,
        "imbalance 158 < 335/2: no balancing"
    );
    // T1 runs 4x as long as each 335 process, not 1024/335 = 3.06x.
    let ratio = r.processes[0].cpu_ns as f64 / r.processes[1].cpu_ns as f64;
    assert!((ratio - 4.0).abs() < 0.05, "{ratio}");
}

#[test]
fn global_fair_moves_closer_to_gps() {
    let sc = example("global.toml");
    let cfs = run(&sc, PolicyName::Cfs);
    let gf = run(&sc, PolicyName::GlobalFair);
    println!("policy       T1 share  T2..T5 shares                     mean |%err|  max |lag| ms");
    for r in [&cfs, &gf] {
        let u = usage(r);
        println!(
            "{:<12} {:>7.2}   {:>6.2} {:>6.2} {:>6.2} {:>6.2}          {:>6.2}      {:>7.1}",
            r.policy,
            u[0],
            u[1],
            u[2],
            u[3],
            u[4],
            r.summary.mean_abs_pct_error,
            r.summary.max_abs_lag_ns as f64 / 1e6
        );
    }
    // GPS: T1 = 1024 / 2364 of two cores = 43.3 %; each 335 = 14.2 %.
    assert!((cfs.processes[0].ideal_share - 1024.0 / 2364.0).abs() < 1e-3);
    assert!(gf.summary.mean_abs_pct_error < cfs.summary.mean_abs_pct_error / 2.0);
    assert!(gf.summary.max_abs_lag_ns < cfs.summary.max_abs_lag_ns);
    // The shuttle moved: every other period one 335 thread goes to T1's core and back.
    assert!(gf.summary.migrations >= 40, "{}", gf.summary.migrations);
    // T1 now gets less than a whole core, the 335s more than a quarter of one.
    assert!(gf.processes[0].share < cfs.processes[0].share - 0.02);
}

#[test]
fn tenants_follow_their_weights() {
    let sc = example("tenants.toml");
    let r = run(&sc, PolicyName::Tenants);
    let (a, b) = (r.groups[0].share * 100.0, r.groups[1].share * 100.0);
    println!("tenants 1:3 -> {a:.2} % : {b:.2} %");
    assert!((a - 25.0).abs() < 1.0 && (b - 75.0).abs() < 1.0, "{a} {b}");
    // Plain CFS splits by thread count instead: 6 and 6 threads, 50:50.
    let cfs = run(&sc, PolicyName::Cfs);
    assert!((cfs.groups[0].share - 0.5).abs() < 0.01);
    // Weights 1:1 .. 1:5 (table 5.3).
    for w in 1..=5u64 {
        let s = sc
            .to_builder()
            .map_groups(|g| {
                if g.name() == sc.groups()[1].name() {
                    g.with_weight(w)
                } else {
                    g
                }
            })
            .build()
            .unwrap();
        let r = run(&s, PolicyName::Tenants);
        let want = 100.0 * w as f64 / (1 + w) as f64;
        let got = r.groups[1].share * 100.0;
        println!("tenants 1:{w} -> vm2 {got:.2} % (want {want:.2} %)");
        assert!((got - want).abs() < 1.0, "1:{w}: {got}");
    }
}

/// A controller that runs another and, at `at`, also emits `extra` (as `schedkit ctl` or a
/// user would, changing a weight while the run goes on).
struct Scripted {
    inner: Box<dyn Controller>,
    at: Nanos,
    extra: Vec<Action>,
}

impl Controller for Scripted {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn period(&self) -> Nanos {
        self.inner.period()
    }
    fn emits(&self) -> &'static [schedkit_core::control::ActionKind] {
        schedkit_core::control::ActionKind::ALL
    }
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        self.inner.tick(snap, out);
        if snap.now == self.at {
            out.append(&mut self.extra);
        }
    }
}

#[test]
fn tenant_weight_change_takes_effect_within_one_period() {
    let sc = example("tenants.toml");
    let period = sc.policy().period();
    let change = Nanos::from_secs(5);
    let policy = policies::build(&sc).expect("policy");
    let ctl = Scripted {
        inner: policy.controller.expect("tenants has a controller"),
        at: change,
        extra: vec![Action::SetGroupWeight {
            group: 1,
            weight: 1,
        }],
    };
    let mut log = TraceLog::default();
    Engine::new(&sc, policy.dispatcher, Some(Box::new(ctl)), &mut log).run();
    // vm2's share of the CPU in a window.
    let share = |from: Nanos, to: Nanos| {
        let mut cpu = [0u64; 2];
        for iv in log.intervals() {
            let Owner::Process { process, .. } = iv.owner else {
                continue;
            };
            let (s, e) = (iv.start.max(from), iv.end.min(to));
            if e > s {
                cpu[sc.processes()[process].group().expect("grouped")] += (e - s).0;
            }
        }
        100.0 * cpu[1] as f64 / (cpu[0] + cpu[1]) as f64
    };
    let before = share(Nanos::from_secs(1), change);
    let after = share(change + period, Nanos::from_secs(10));
    println!("vm2 share: {before:.2} % before, {after:.2} % from one period after 3 -> 1");
    assert!((before - 75.0).abs() < 1.0, "{before}");
    assert!((after - 50.0).abs() < 1.0, "{after}");
}

#[test]
fn greedy_equal_thread_work_waiting_and_turnaround() {
    // The other reading of 3.6.2: every thread does the same work (60 ms), so C brings 50x
    // A's work. CFS then is processor sharing among equal jobs, which finishes them all at
    // the end; readjusted weights finish A's and B's threads early and cut the averages.
    let sc = example("greedy-work.toml")
        .to_builder()
        .map_processes(|p| Ok::<_, ()>(p.with_burst(Nanos::from_ms(60))))
        .unwrap()
        .build()
        .unwrap();
    println!("equal thread work: policy  avg waiting ms  avg turnaround ms (all threads)");
    let avg = |p| {
        let r = run(&sc, p);
        println!(
            "                   {:<6}  {:>14.1}  {:>17.1}",
            p.as_str(),
            r.summary.avg_waiting_ns as f64 / 1e6,
            r.summary.avg_turnaround_ns as f64 / 1e6
        );
        (r.summary.avg_waiting_ns, r.summary.avg_turnaround_ns)
    };
    let cfs = avg(PolicyName::Cfs);
    for p in [PolicyName::Pfs, PolicyName::Twrs] {
        let r = avg(p);
        assert!(r.0 < cfs.0 && r.1 < cfs.1, "{p}: {r:?} vs cfs {cfs:?}");
    }
}

#[test]
fn cfs_balancer_moves_load_when_eq_4_3_allows() {
    // Q (nice -5, weight 3121) lands alone on core 0, and the four nice-0 threads of P on
    // core 1 (3 x 1024 < 3121 still chooses core 1). While Q runs the imbalance is
    // min(4096 - 3608.5, 3608.5 - 3121) = 487.5 < 1024 / 2: nothing moves. When Q finishes at
    // 10 ms, core 0 goes idle and takes one waiting thread at once (newly idle pull); the
    // next periodic balance sees 1024 vs 3072, imbalance 1024 >= 1024 / 2, and moves one more:
    // P ends 2 + 2.
    let sc = Scenario::parse(
        "balance.toml",
        r#"
cores = 2
[policy]
name = "cfs"
[run]
horizon = "1s"
[[process]]
name = "Q"
nice = -5
burst = "10ms"
[[process]]
name = "P"
threads = 4
"#,
    )
    .expect("scenario");
    let r = simulate_report(&sc, false).expect("simulates").0;
    assert_eq!(r.summary.migrations, 2, "exactly two threads move, once");
    let p: Vec<u64> = r.threads[1..].iter().map(|t| t.cpu_ns).collect();
    let mean = p.iter().sum::<u64>() as f64 / 4.0;
    for c in &p {
        assert!((*c as f64 / mean - 1.0).abs() < 0.02, "{p:?}");
    }
}
