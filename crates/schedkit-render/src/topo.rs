//! The machine's topology (`schedkit topo`): CPUs, packages, cores, SMT siblings, NUMA nodes
//! and caches as tables.

use crate::table::table;
use schedkit_linux::topo::Topology;

/// Bytes as the kernel's sysfs would say them (32K, 3M).
fn human(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// The human rendering.
pub fn text(t: &Topology) -> String {
    let mut out = format!(
        "{} online CPUs ({}) · {} package(s) · {} physical core(s) · {} NUMA node(s){}\n\n",
        t.n_cpus(),
        t.online,
        t.packages,
        t.cores,
        t.nodes.len(),
        if t.numa_from_sysfs {
            ""
        } else {
            " (assumed: no NUMA in sysfs)"
        }
    );
    let mut c = table(&["cpu", "package", "core", "SMT siblings", "node"]);
    for cpu in &t.cpus {
        c.add_row(vec![
            cpu.cpu.to_string(),
            cpu.package.to_string(),
            cpu.core.to_string(),
            cpu.siblings.to_list(),
            cpu.node.to_string(),
        ]);
    }
    out.push_str(&c.to_string());
    out.push_str("\n\n");
    let mut k = table(&["cache", "type", "size", "line", "shared by CPUs"]);
    for x in &t.caches {
        k.add_row(vec![
            format!("L{}", x.level),
            x.kind.clone(),
            human(x.size_bytes),
            x.line_bytes.map_or("-".into(), |l| format!("{l} B")),
            x.shared_cpus.to_list(),
        ]);
    }
    out.push_str(&k.to_string());
    out.push('\n');
    out
}
