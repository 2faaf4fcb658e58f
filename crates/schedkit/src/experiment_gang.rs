//! `schedkit experiment gang`: where gang scheduling pays (seed 002, Hori et al.).
//!
//! (a) **This machine.** Two jobs of two threads, each iterating `compute` of busy work and
//! then a spin barrier across its threads. Each job runs alone first (its solo rate: alone
//! under `gang`, i.e. one thread pinned per CPU and never stopped: a dedicated machine), then
//! both together under `default` (the kernel decides; nothing keeps a job's threads
//! together) and under `gang` for every quantum (the matrix puts each job in its own slot on
//! both cores; the freezer stops the other). Per configuration: barrier rounds per second per
//! job, that rate as a percentage of the job's solo rate (gang's ideal is 50 %: half a
//! dedicated machine), the CPU split between the jobs, the rounds per CPU-second of the job's
//! threads against solo (the loss gang switching costs a job in the time it runs, apart from
//! how the time is split), and the measured switch time (stop all + resume all). Medians over
//! `--repeat` runs, configurations interleaved per repeat.
//!
//! (b) **The simulator at cluster scale.** Two jobs spanning the whole 64-node cluster, gang
//! scheduled with seed 002's switch-overhead model ([`schedkit_core::gang_overhead`]) for
//! each communication pattern; the slowdown is the makespan against the same run with free
//! switches. Also the fraction of switch time spent saving and restoring network context.
//!
//! (c) **Scale.** 1,024 nodes x 4 cores and 100 jobs of random widths and arrivals: the
//! simulator's wall time for the whole run.

use crate::cli::Failure;
use crate::output::table;
use clap::Args;
use comfy_table::Table;
use rand::{Rng, SeedableRng};
use schedkit_core::controllers::gang::{ClusterOverhead, Gang};
use schedkit_core::gang_overhead::{OverheadModel, Pattern};
use schedkit_core::report::Metrics;
use schedkit_core::scenario::{PolicyName, PolicySpec, Process, Scenario, Work};
use schedkit_core::Nanos;
use schedkit_experiments::stats::median;
use schedkit_linux::engine::{self, RunOptions, RunPolicy};
use schedkit_render::chart::{Axis, Chart, LineChart, Series};
use schedkit_sim::policies::gang::GangDispatch;
use schedkit_sim::Engine;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args)]
pub struct GangExpArgs {
    /// Quanta of the real runs, in ms.
    #[arg(long, value_delimiter = ',', default_value = "10,50,100,200,1000")]
    pub quanta: Vec<u64>,
    /// Repeats per configuration (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Length of each real run.
    #[arg(long, default_value = "3s")]
    pub duration: String,
    /// Busy work between two barriers.
    #[arg(long, default_value = "100us")]
    pub compute: String,
    /// A short run for CI: one repeat of 1 s, quanta 20 and 100 ms, fewer simulated slices,
    /// a 128-node scale row.
    #[arg(long)]
    pub quick: bool,
    /// Nice value of the job threads in every real configuration (solo, default, gang). The
    /// default, -10, keeps other load on a shared machine from dominating the comparison;
    /// 0 shows the plain kernel.
    #[arg(long, default_value_t = -10, allow_hyphen_values = true)]
    pub nice: i32,
    /// Skip part (a) (it needs root for the freezer).
    #[arg(long)]
    pub sim_only: bool,
    /// Nodes of the scale row (part c).
    #[arg(long, default_value_t = 1024)]
    pub scale_nodes: usize,
    /// Directory for gang.json, gang-real.svg and gang-sim.svg.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

fn process(name: &str, threads: u32, burst: Option<Nanos>, arrival: Nanos, work: Work) -> Process {
    Process {
        arrival,
        burst,
        ..Process::new(name, threads, work)
    }
}

fn scenario(cores: usize, policy: PolicySpec, horizon: Nanos, processes: Vec<Process>) -> Scenario {
    Scenario {
        file: "experiment gang".into(),
        cores,
        policy,
        horizon,
        processes,
        groups: Vec::new(),
        tasks: Vec::new(),
    }
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
    jobs: usize,
    policy: PolicySpec,
    horizon: Nanos,
    compute: Nanos,
    nice: i32,
) -> Result<RealRun, Failure> {
    let run_policy = match policy.name {
        PolicyName::Gang => RunPolicy::Gang {
            quantum: policy.quantum,
        },
        _ => RunPolicy::Default,
    };
    let procs = (0..jobs)
        .map(|j| Process {
            nice,
            ..process(
                ["a", "b"][j],
                2,
                None,
                Nanos::ZERO,
                Work::Barrier { compute },
            )
        })
        .collect();
    let sc = scenario(2, policy, horizon, procs);
    let mut opts = RunOptions::new(run_policy);
    opts.perf = false;
    let o = engine::run(&sc, opts)?;
    if o.interrupted {
        return Err(Failure {
            status: 130,
            message: "interrupted; every change was undone".into(),
        });
    }
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

/// Part (b): makespan of two full-width jobs on `nodes` nodes under gang with the overhead
/// model (or free switches).
struct SimPoint {
    makespan: Nanos,
    switches: u64,
    context_fraction: f64,
    switch_ms: f64,
}

fn sim_cluster(
    nodes: usize,
    cpn: usize,
    slice: Nanos,
    pattern: Option<Pattern>,
    burst: Nanos,
) -> SimPoint {
    let cores = nodes * cpn;
    let mut spec = PolicySpec::new(PolicyName::Gang);
    spec.quantum = slice;
    let procs = ["job-1", "job-2"]
        .iter()
        .map(|n| process(n, cores as u32, Some(burst), Nanos::ZERO, Work::Spin))
        .collect();
    let sc = scenario(cores, spec, Nanos::from_secs(3600), procs);
    let mut ctl = Gang::new(slice, cores);
    if let Some(p) = pattern {
        ctl = ctl.with_overhead(ClusterOverhead {
            model: OverheadModel::default(),
            cores_per_node: cpn,
            pattern: p,
        });
    }
    let stats = ctl.stats();
    let mut metrics = Metrics::new(&sc, "sim", cores);
    let st = Engine::new(
        &sc,
        Box::new(GangDispatch::new(cores)),
        Some(Box::new(ctl)),
        &mut metrics,
    )
    .run();
    let s = stats.lock().expect("stats").clone();
    SimPoint {
        makespan: st.end,
        switches: s.switches,
        context_fraction: s.cost.context_fraction(),
        switch_ms: if s.switches > 0 {
            s.cost.total().as_ms_f64() / s.switches as f64
        } else {
            0.0
        },
    }
}

/// Part (c): the scale row.
struct ScaleRow {
    nodes: usize,
    cores: usize,
    jobs: usize,
    threads: usize,
    wall_s: f64,
    sim_s: f64,
    events: u64,
    switches: u64,
    max_rows: usize,
}

fn scale(nodes: usize, cpn: usize, jobs: usize) -> ScaleRow {
    let cores = nodes * cpn;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    let mut procs = Vec::new();
    let mut threads = 0;
    for j in 0..jobs {
        // Widths in whole nodes, from one node to the whole cluster (log-uniform, as job
        // sizes on real clusters are), bursts 0.5-5 s, arrivals over the first 10 s.
        let exp = rng.gen_range(0.0..(nodes as f64).log2());
        let w = (2f64.powf(exp).round() as usize).clamp(1, nodes) * cpn;
        threads += w;
        procs.push(process(
            &format!("j{j}"),
            w as u32,
            Some(Nanos::from_ms(rng.gen_range(500..5000))),
            Nanos::from_ms(rng.gen_range(0..10_000)),
            Work::Spin,
        ));
    }
    let spec = PolicySpec::new(PolicyName::Gang);
    let sc = scenario(cores, spec.clone(), Nanos::from_secs(36_000), procs);
    let ctl = Gang::new(spec.quantum, cores).with_overhead(ClusterOverhead {
        model: OverheadModel::default(),
        cores_per_node: cpn,
        pattern: Pattern::Neighbour,
    });
    let stats = ctl.stats();
    let t0 = Instant::now();
    let mut metrics = Metrics::new(&sc, "sim", cores);
    let st = Engine::new(
        &sc,
        Box::new(GangDispatch::new(cores)),
        Some(Box::new(ctl)),
        &mut metrics,
    )
    .run();
    let report = metrics.finish(st.end);
    let wall_s = t0.elapsed().as_secs_f64();
    assert!(report.threads.iter().all(|t| t.finish_ns.is_some()));
    let s = stats.lock().expect("stats").clone();
    ScaleRow {
        nodes,
        cores,
        jobs,
        threads,
        wall_s,
        sim_s: st.end.as_secs_f64(),
        events: st.events,
        switches: s.switches,
        max_rows: s.max_rows,
    }
}

fn write_chart(path: &Path, chart: &LineChart) -> Result<(), Failure> {
    std::fs::write(path, chart.to_svg(820.0, 460.0))
        .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    eprintln!("chart: {}", path.display());
    Ok(())
}

pub fn run(a: GangExpArgs) -> Result<(), Failure> {
    let bad = |m: String| Failure {
        status: crate::cli::EXIT_BAD_INPUT,
        message: m,
    };
    let duration = Nanos::parse(&a.duration).map_err(|m| bad(format!("--duration: {m}")))?;
    let compute = Nanos::parse(&a.compute).map_err(|m| bad(format!("--compute: {m}")))?;
    let (repeat, duration, quanta) = if a.quick {
        (1, Nanos::from_secs(1), vec![20, 100])
    } else {
        (a.repeat.max(1), duration, a.quanta.clone())
    };
    if quanta.contains(&0) {
        return Err(bad("--quanta: a quantum must be at least 1 ms".into()));
    }
    std::fs::create_dir_all(&a.out).map_err(|e| anyhow::anyhow!("{}: {e}", a.out.display()))?;
    let slices: Vec<u64> = if a.quick {
        vec![10, 100, 1000]
    } else {
        vec![10, 20, 50, 100, 200, 500, 1000]
    };
    let scale_nodes = if a.quick { 128 } else { a.scale_nodes };
    let real_runs = if a.sim_only {
        0
    } else {
        repeat * (2 + 1 + quanta.len())
    };
    let total = real_runs + slices.len() * (Pattern::ALL.len() + 1) + 1;
    let bar = if std::io::stdout().is_terminal() {
        let b = indicatif::ProgressBar::new(total as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} · {msg} · ETA {eta}")
                .expect("template"),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut json = serde_json::Map::new();

    // (a) Real runs.
    if !a.sim_only {
        engine::install_signal_handlers();
        let mut solo: Vec<Vec<f64>> = vec![Vec::new(); 2];
        let mut solo_per_cpu: Vec<Vec<f64>> = vec![Vec::new(); 2];
        let mut default: Vec<RealRun> = Vec::new();
        let mut gang: Vec<Vec<RealRun>> = vec![Vec::new(); quanta.len()];
        for _ in 0..repeat {
            for (j, s) in solo.iter_mut().enumerate() {
                bar.set_message(format!("job {} alone", ["a", "b"][j]));
                // Alone under gang: one slot, never stopped, one thread per CPU: the
                // dedicated machine (alone under `default` the kernel may still put both
                // threads on one CPU, which is no reference).
                let r = real_run(
                    1,
                    PolicySpec::new(PolicyName::Gang),
                    duration,
                    compute,
                    a.nice,
                )?;
                s.push(r.rate[0]);
                solo_per_cpu[j].push(r.per_cpu[0]);
                bar.inc(1);
            }
            bar.set_message("default");
            default.push(real_run(
                2,
                PolicySpec::new(PolicyName::Default),
                duration,
                compute,
                a.nice,
            )?);
            bar.inc(1);
            for (i, &q) in quanta.iter().enumerate() {
                bar.set_message(format!("gang {q} ms"));
                let mut spec = PolicySpec::new(PolicyName::Gang);
                spec.quantum = Nanos::from_ms(q);
                gang[i].push(real_run(2, spec, duration, compute, a.nice)?);
                bar.inc(1);
            }
        }
        let solo_rate: Vec<f64> = solo.iter().map(|v| median(v)).collect();
        let solo_per_cpu_med: Vec<f64> = solo_per_cpu.iter().map(|v| median(v)).collect();
        let mut t = table(&[
            "configuration",
            "a rounds/s",
            "b rounds/s",
            "a % of solo",
            "b % of solo",
            "CPU split a:b %",
            "a per CPU-s % of solo",
            "b per CPU-s % of solo",
            "switch us",
            "switches",
        ]);
        let mut rows_json = Vec::new();
        let mut pct_series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 2];
        let mut add =
            |name: String, runs: &[RealRun], q: Option<u64>, t: &mut Table| -> (f64, f64) {
                let rate: Vec<f64> = (0..2)
                    .map(|j| median(&runs.iter().map(|r| r.rate[j]).collect::<Vec<_>>()))
                    .collect();
                let pct: Vec<f64> = (0..2).map(|j| 100.0 * rate[j] / solo_rate[j]).collect();
                let eff: Vec<f64> = (0..2)
                    .map(|j| {
                        100.0 * median(&runs.iter().map(|r| r.per_cpu[j]).collect::<Vec<_>>())
                            / solo_per_cpu_med[j]
                    })
                    .collect();
                let split = median(
                    &runs
                        .iter()
                        .map(|r| 100.0 * r.cpu[0] / (r.cpu[0] + r.cpu[1]).max(1e-9))
                        .collect::<Vec<_>>(),
                );
                let sw: Vec<f64> = runs.iter().filter_map(|r| r.switch_us).collect();
                let sw_med = median(&sw);
                let switches = runs.iter().map(|r| r.switches).max().unwrap_or(0);
                t.add_row(vec![
                    name.clone(),
                    format!("{:.0}", rate[0]),
                    format!("{:.0}", rate[1]),
                    format!("{:.1}", pct[0]),
                    format!("{:.1}", pct[1]),
                    format!("{:.1}:{:.1}", split, 100.0 - split),
                    format!("{:.1}", eff[0]),
                    format!("{:.1}", eff[1]),
                    if sw.is_empty() {
                        "-".into()
                    } else {
                        format!("{sw_med:.1}")
                    },
                    if q.is_some() {
                        switches.to_string()
                    } else {
                        "-".into()
                    },
                ]);
                rows_json.push(serde_json::json!({
                "configuration": name, "quantum_ms": q, "rounds_per_s": rate,
                "pct_of_solo": pct, "cpu_split_a_pct": split, "per_cpu_s_pct_of_solo": eff,
                "switch_us_median": if sw.is_empty() { None } else { Some(sw_med) },
                "switches": switches,
                "rounds_per_s_each_repeat": runs.iter().map(|r| r.rate.clone()).collect::<Vec<_>>(),
            }));
                (pct[0], pct[1])
            };
        let solo_rows: Vec<RealRun> = (0..repeat)
            .map(|i| RealRun {
                rate: vec![solo[0][i], solo[1][i]],
                per_cpu: vec![solo_per_cpu[0][i], solo_per_cpu[1][i]],
                cpu: vec![1.0, 1.0],
                ..Default::default()
            })
            .collect();
        add("each job alone (pinned)".into(), &solo_rows, None, &mut t);
        let d = add("default (both)".into(), &default, None, &mut t);
        for (i, &q) in quanta.iter().enumerate() {
            let p = add(format!("gang {q} ms"), &gang[i], Some(q), &mut t);
            pct_series[0].push((q as f64, p.0));
            pct_series[1].push((q as f64, p.1));
        }
        let backend = gang
            .iter()
            .flatten()
            .find_map(|r| r.backend.clone())
            .unwrap_or_else(|| "none".into());
        println!(
            "(a) this machine: two jobs of 2 threads, {} of work then a spin barrier; {} per run, \
             median of {repeat}; job threads at nice {}; the freezer for built-in threads: {backend}\n{t}\n",
            compute,
            duration,
            a.nice
        );
        json.insert("real".into(), serde_json::Value::Array(rows_json));
        let mut c = LineChart::new(
            "Two 2-thread spin-barrier jobs on 2 cores: rate vs quantum",
            Axis::new("gang quantum", "ms"),
            Axis::new("rate, % of the job alone", "%"),
        );
        c.series(Series::new("gang: job a", pct_series[0].clone()));
        c.series(Series::new("gang: job b", pct_series[1].clone()));
        let xs: Vec<f64> = quanta.iter().map(|&q| q as f64).collect();
        c.series(Series::new(
            "default: job a",
            xs.iter().map(|&x| (x, d.0)).collect(),
        ));
        c.series(Series::new(
            "default: job b",
            xs.iter().map(|&x| (x, d.1)).collect(),
        ));
        c.series(Series::new(
            "ideal (half a dedicated machine)",
            xs.iter().map(|&x| (x, 50.0)).collect(),
        ));
        write_chart(&a.out.join("gang-real.svg"), &c)?;
    }

    // (b) Simulated 64-node cluster.
    let nodes = 64;
    let burst = Nanos::from_secs(20);
    let mut t = table(&[
        "slice ms",
        "pattern",
        "switch ms",
        "switches",
        "slowdown %",
        "net context % of switch",
    ]);
    let mut curves: Vec<Series> = Vec::new();
    let mut sim_json = Vec::new();
    let mut per_pattern: Vec<Vec<(f64, f64)>> = vec![Vec::new(); Pattern::ALL.len()];
    for &s in &slices {
        bar.set_message(format!("sim {s} ms"));
        let slice = Nanos::from_ms(s);
        let free = sim_cluster(nodes, 1, slice, None, burst);
        bar.inc(1);
        for (i, p) in Pattern::ALL.iter().enumerate() {
            let pt = sim_cluster(nodes, 1, slice, Some(*p), burst);
            bar.inc(1);
            let slow = 100.0 * (pt.makespan.0 as f64 / free.makespan.0 as f64 - 1.0);
            per_pattern[i].push((s as f64, slow));
            t.add_row(vec![
                s.to_string(),
                p.as_str().into(),
                format!("{:.3}", pt.switch_ms),
                pt.switches.to_string(),
                format!("{slow:.2}"),
                format!("{:.1}", 100.0 * pt.context_fraction),
            ]);
            sim_json.push(serde_json::json!({
                "slice_ms": s, "pattern": p.as_str(), "switch_ms": pt.switch_ms,
                "switches": pt.switches, "slowdown_pct": slow,
                "context_fraction": pt.context_fraction,
                "makespan_ns": pt.makespan.0, "makespan_free_ns": free.makespan.0,
            }));
        }
    }
    for (i, p) in Pattern::ALL.iter().enumerate() {
        curves.push(Series::new(p.as_str(), per_pattern[i].clone()));
    }
    println!(
        "(b) simulator: {nodes} nodes x 1 core, two jobs on all nodes ({} of CPU per thread), \
         seed 002's overhead model (defaults in gang_overhead.rs); slowdown = makespan / makespan \
         with free switches - 1\n{t}\n",
        burst
    );
    json.insert("sim".into(), serde_json::Value::Array(sim_json));
    let mut c = LineChart::new(
        "Gang scheduling on a simulated 64-node cluster: slowdown vs time slice",
        Axis::new("time slice", "ms"),
        Axis::new("slowdown against free switches", "%"),
    );
    for s in curves {
        c.series(s);
    }
    write_chart(&a.out.join("gang-sim.svg"), &c)?;

    // (c) Scale.
    bar.set_message(format!("scale {scale_nodes} nodes"));
    let r = scale(scale_nodes, 4, 100);
    bar.inc(1);
    bar.finish_and_clear();
    let mut t = table(&[
        "nodes",
        "cores",
        "jobs",
        "threads",
        "simulated s",
        "events",
        "switches",
        "max slots",
        "wall s",
    ]);
    t.add_row(vec![
        r.nodes.to_string(),
        r.cores.to_string(),
        r.jobs.to_string(),
        r.threads.to_string(),
        format!("{:.1}", r.sim_s),
        r.events.to_string(),
        r.switches.to_string(),
        r.max_rows.to_string(),
        format!("{:.2}", r.wall_s),
    ]);
    println!(
        "(c) simulator scale: nodes of 4 cores, 100 jobs, 100 ms slices, neighbour overhead\n{t}"
    );
    json.insert(
        "scale".into(),
        serde_json::json!({"nodes": r.nodes, "cores": r.cores, "jobs": r.jobs,
            "threads": r.threads, "simulated_s": r.sim_s, "events": r.events,
            "switches": r.switches, "max_slots": r.max_rows, "wall_s": r.wall_s}),
    );
    let jp = a.out.join("gang.json");
    std::fs::write(
        &jp,
        serde_json::to_string_pretty(&serde_json::Value::Object(json)).expect("json"),
    )
    .map_err(|e| anyhow::anyhow!("write {}: {e}", jp.display()))?;
    eprintln!("data: {}", jp.display());
    Ok(())
}
