//! The kernel's view of a real process run (`schedkit run`), after the shared report: what
//! only a real run knows (the kernel's own switch and migration counts, perf counters, the
//! longest stall, gang switches, what a fair-share run and exclusive mode did, what was
//! restored), as text ([`text`]) and as the JSON of `--linux-json` ([`json`]).

use crate::table::ms;
use schedkit_core::Nanos;
use schedkit_linux::engine::{FairReport, ProcessOutcome, RunOutcome};
use schedkit_linux::exclusive::{ExclusiveReport, RtThrottle};
use schedkit_linux::perf::CounterKind;

fn counter(po: &ProcessOutcome, k: CounterKind) -> Option<u64> {
    po.counters
        .iter()
        .find(|(x, _)| *x == k)
        .and_then(|(_, r)| r.value())
}

/// The kernel's view of the run, after the shared report.
pub fn text(o: &RunOutcome) -> String {
    use comfy_table::{presets::UTF8_BORDERS_ONLY, CellAlignment, Table};
    let mut out = String::from("\nkernel view (exact counts from /proc and perf)\n");
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(vec![
        "process",
        "pid",
        "threads",
        "wall ms",
        "cpu-migrations",
        "switches vol/invol",
        "forced /s",
        "longest stall ms",
        "end",
    ]);
    for i in 1..9 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    for po in &o.processes {
        let wall = po.end_ns.saturating_sub(po.start_ns);
        let mig = counter(po, CounterKind::CpuMigrations).map_or_else(
            || {
                o.threads
                    .iter()
                    .filter(|t| t.process == po.name)
                    .map(|t| t.migrations_seen)
                    .sum::<u64>()
                    .to_string()
                    + " (seen)"
            },
            |v| v.to_string(),
        );
        t.add_row(vec![
            po.name.clone(),
            po.pid.map_or("schedkit".into(), |p| p.to_string()),
            po.threads.to_string(),
            ms(wall),
            mig,
            format!("{}/{}", po.voluntary_switches, po.involuntary_switches),
            format!(
                "{:.2}",
                po.involuntary_switches as f64 / (wall.max(1) as f64 / 1e9)
            ),
            ms(po.longest_stall_ns),
            po.exit.clone().unwrap_or_else(|| "finished".into()),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    for po in &o.processes {
        if po.counters.is_empty() {
            continue;
        }
        out.push_str(&format!("\nperf counters of {}:\n", po.name));
        for (k, r) in &po.counters {
            out.push_str(&format!("  {:<18} {}\n", k.name(), r));
        }
    }
    if let Some(g) = &o.gang {
        out.push_str(&format!(
            "\ngang: {} slot switches through the {} (threads: {}); switch (stop all + resume all) median {:.1} us, p90 {:.1} us, max {:.1} us\n",
            g.switches,
            g.backend_processes,
            g.backend_threads.as_deref().unwrap_or("none"),
            g.switch_us_median,
            g.switch_us_p90,
            g.switch_us_max
        ));
    }
    if let Some(f) = &o.fair {
        out.push_str(&fair_text(f));
    }
    if let Some(x) = &o.exclusive {
        out.push_str(&exclusive_text(x));
    }
    if !o.undone.is_empty() {
        let ok = o.undone.iter().filter(|u| u.outcome == Ok(true)).count();
        let bad = o.undone.iter().filter(|u| u.outcome.is_err()).count();
        out.push_str(&format!(
            "\nrestored {ok} change(s) to the machine{}\n",
            if bad > 0 {
                format!(", {bad} FAILED (run `schedkit restore`)")
            } else {
                String::new()
            }
        ));
    }
    out
}

/// What exclusive mode did: the CPUs, the threads and IRQs it moved (and those the kernel
/// kept), RT throttling.
pub fn exclusive_text(x: &ExclusiveReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\nexclusive mode: system CPUs {}, job CPUs {}, SCHED_FIFO {}\n",
        x.system_cpus, x.job_cpus, x.priority
    ));
    out.push_str(&format!(
        "  moved {} thread(s) to the system CPUs; {} left where they are (kernel-bound):",
        x.moved_threads,
        x.kept_threads.len()
    ));
    let names: Vec<String> = x
        .kept_threads
        .iter()
        .take(12)
        .map(|k| format!("{}[{}]", k.comm, k.tid))
        .collect();
    out.push_str(&format!(
        " {}{}\n",
        names.join(" "),
        if x.kept_threads.len() > 12 {
            " ..."
        } else {
            ""
        }
    ));
    out.push_str(&format!(
        "  moved {} IRQ(s) to the system CPUs; the kernel refused {}",
        x.moved_irqs.len(),
        x.refused_irqs.len()
    ));
    if !x.refused_irqs.is_empty() {
        let r: Vec<String> = x
            .refused_irqs
            .iter()
            .map(|r| {
                format!(
                    "{} ({})",
                    r.irq,
                    r.errno
                        .map_or("?".into(), |e| std::io::Error::from_raw_os_error(e)
                            .kind()
                            .to_string()
                            + &format!(", errno {e}"))
                )
            })
            .collect();
        out.push_str(&format!(": {}", r.join(", ")));
    }
    out.push('\n');
    match (x.rt_throttle, x.rt_runtime_us, x.rt_period_us) {
        (Some(RtThrottle::Off), _, _) => {
            out.push_str("  RT throttling: off for the run (restored afterwards)\n")
        }
        (_, Some(r), Some(p)) if r >= 0 => out.push_str(&format!(
            "  RT throttling kept: runtime {r} us per {p} us — a FIFO thread may be held off {} ms each period when anything else wants its CPU (--rt-throttle off avoids it)\n",
            ms(x.rt_throttle_cost_ns.unwrap_or(0))
        )),
        _ => out.push_str("  RT throttling: not active on this kernel\n"),
    }
    for w in &x.warnings {
        out.push_str(&format!("  warning: {w}\n"));
    }
    out
}

/// `--linux-json`: the kernel's view as JSON.
pub fn json(o: &RunOutcome) -> serde_json::Value {
    serde_json::json!({
        "threads": o.threads,
        "processes": o.processes.iter().map(|p| serde_json::json!({
            "name": p.name,
            "pid": p.pid,
            "exit": p.exit,
            "start_ns": p.start_ns,
            "end_ns": p.end_ns,
            "wall_ns": p.end_ns.saturating_sub(p.start_ns),
            "threads": p.threads,
            "voluntary_switches": p.voluntary_switches,
            "involuntary_switches": p.involuntary_switches,
            "longest_stall_ns": p.longest_stall_ns,
            "work_done": p.work_done,
            "counters": p.counters.iter().map(|(k, r)| (k.name().to_string(), serde_json::to_value(r).unwrap_or_default())).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
        "exclusive": o.exclusive,
        "fair": o.fair,
        "sampler": o.sampler,
        "schedkit_cpu_ns": o.frame.schedkit_cpu_ns,
        "warnings": o.warnings,
        "interrupted": o.interrupted,
        "restored": o.undone.iter().filter(|u| u.outcome == Ok(true)).count(),
    })
}

/// The fair-share part of `schedkit run`'s text report.
pub fn fair_text(f: &FairReport) -> String {
    let mut out = if f.ticks == 0 {
        format!("\n{}: no controller (cgroup weights only)\n", f.policy)
    } else {
        format!(
        "\n{}: {} controller tick(s) every {}; controller cpu {:.3} ms ({:.3} % of one core, {:.1} us per tick, up to {} threads)\n",
        f.policy,
        f.ticks,
        Nanos(f.period_ns),
        f.controller_cpu_ns as f64 / 1e6,
        f.controller_cpu_pct(),
        f.controller_cpu_ns as f64 / 1e3 / f.ticks.max(1) as f64,
        f.max_threads
    )
    };
    if let Some(s) = &f.sampler {
        out.push_str(&format!("  {}\n", s.line()));
    }
    if let Some(c) = &f.cgroups {
        let w: Vec<String> = f
            .cgroup_weights
            .iter()
            .map(|(k, w)| format!("{k}={w}"))
            .collect();
        out.push_str(&format!(
            "  cgroups: {c}; weights (cpu.weight units): {}\n",
            w.join(" ")
        ));
    }
    if !f.trim_factors.is_empty() {
        let t: Vec<String> = f
            .trim_factors
            .iter()
            .map(|(k, x)| format!("{k} x{x:.3}"))
            .collect();
        out.push_str(&format!(
            "  share trim: {} weight write(s); final correction factors: {}; CPU time from {}\n",
            f.trim_writes,
            t.join(" "),
            f.trim_source
                .as_deref()
                .unwrap_or("the sampler's per-thread readings")
        ));
    }
    if !f.entity_cpu_ns.is_empty() {
        let total: u64 = f.entity_cpu_ns.iter().map(|(_, c)| c).sum();
        let t: Vec<String> = f
            .entity_cpu_ns
            .iter()
            .map(|(k, c)| {
                format!(
                    "{k} {} ({:.1} %)",
                    Nanos(*c),
                    100.0 * *c as f64 / total.max(1) as f64
                )
            })
            .collect();
        out.push_str(&format!(
            "  CPU time by the kernel's accounting (every task, ended ones too): {}\n",
            t.join(", ")
        ));
    }
    if f.nice_changes > 0 || f.overrides > 0 {
        out.push_str(&format!(
            "  nice values set: {}; threads that changed their own nice, set back: {}\n",
            f.nice_changes, f.overrides
        ));
        for o in &f.first_overrides {
            out.push_str(&format!("    {o}\n"));
        }
    }
    if f.migrations > 0 {
        out.push_str(&format!(
            "  shuttle moves (sched_setaffinity): {} ({:.1} per second)\n",
            f.migrations,
            f.migrations as f64 * 1e9 / f.wall_ns.max(1) as f64
        ));
    }
    if let Some(p) = &f.ctl_socket {
        out.push_str(&format!("  control socket: {}\n", p.display()));
    }
    for c in &f.weight_changes {
        out.push_str(&format!(
            "  weight of group {} set to {} at {}\n",
            c.group,
            c.weight,
            Nanos(c.t_ns)
        ));
    }
    if f.ctl_refused > 0 {
        out.push_str(&format!(
            "  control connections refused (not the run's owner): {}\n",
            f.ctl_refused
        ));
    }
    out
}
