//! The text of `schedkit ctl status`: a running `tenants` run's policy, period and time, its
//! groups with their weights and what the kernel holds, then the weight changes so far.

use schedkit_core::Nanos;
use schedkit_linux::ctl::Status;
use std::fmt::Write;

/// The status of a run, one line each (header, group table, changes).
pub fn status(s: &Status) -> String {
    let mut out = format!(
        "run {} · policy {} · period {} · {} elapsed{}\n",
        s.pid,
        s.policy,
        Nanos(s.period_ns),
        Nanos(s.elapsed_ns),
        if s.controller.is_empty() {
            String::new()
        } else {
            format!(" · {}", s.controller)
        }
    );
    let rows: Vec<[String; 3]> = s
        .groups
        .iter()
        .map(|g| {
            [
                g.name.clone(),
                g.weight.to_string(),
                g.kernel_value.map_or("-".into(), |v| v.to_string()),
            ]
        })
        .collect();
    let w = rows.iter().map(|r| r[0].len()).max().unwrap_or(0).max(5);
    let _ = writeln!(
        out,
        "{:<w$}  {:>6}  {:>12}",
        "group", "weight", "kernel value"
    );
    for r in rows {
        let _ = writeln!(out, "{:<w$}  {:>6}  {:>12}", r[0], r[1], r[2]);
    }
    for c in &s.changes {
        let _ = writeln!(
            out,
            "weight of group {} set to {} at {}",
            c.group,
            c.weight,
            Nanos(c.t_ns)
        );
    }
    out
}
