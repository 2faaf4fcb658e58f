//! The fair-share part of `schedkit run`'s text report (what `schedkit_linux::run::FairRun`
//! did: controller ticks and cost, cgroups, the share trim, nice values, shuttle moves, the
//! control socket).

use schedkit_core::Nanos;
use schedkit_linux::engine::FairReport;

/// The fair-share part of `schedkit run`'s text report.
pub(super) fn render_fair(f: &FairReport) -> String {
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
