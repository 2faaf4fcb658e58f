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

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_linux::ctl::{GroupStatus, WeightChange};

    #[test]
    fn status_lists_groups_and_changes() {
        let s = Status {
            pid: 42,
            policy: "tenants".into(),
            period_ns: 100_000_000,
            elapsed_ns: 2_000_000_000,
            controller: String::new(),
            groups: vec![
                GroupStatus {
                    name: "vm1".into(),
                    weight: 100,
                    kernel_value: Some(100),
                },
                GroupStatus {
                    name: "vm2".into(),
                    weight: 300,
                    kernel_value: None,
                },
            ],
            changes: vec![WeightChange {
                t_ns: 1_000_000_000,
                group: "vm2".into(),
                weight: 300,
            }],
        };
        let text = status(&s);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("run 42 · policy tenants · period "),
            "{text}"
        );
        assert_eq!(lines[1], "group  weight  kernel value");
        assert_eq!(lines[2], "vm1       100           100");
        assert_eq!(lines[3], "vm2       300             -");
        assert!(
            lines[4].starts_with("weight of group vm2 set to 300 at "),
            "{text}"
        );
        assert_eq!(lines.len(), 5);
    }
}
