//! The sysfs/procfs readers and the journal against a fake tree (Roots::at), so that the
//! parsing and the undo logic are tested on any machine, with no root.

use schedkit_linux::affinity::CpuSet;
use schedkit_linux::journal::{self, Entry, Journal};
use schedkit_linux::topo::Topology;
use schedkit_linux::{irq, Roots};
use std::fs;
use std::path::Path;

fn w(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// Two packages x two cores x two SMT threads, CPU 7 offline, two NUMA nodes.
fn fake_machine(root: &Path) {
    w(root, "sys/devices/system/cpu/online", "0-6\n");
    for cpu in 0..8 {
        let pkg = cpu / 4;
        let core = (cpu % 4) / 2;
        let sib = format!("{}-{}", cpu - cpu % 2, cpu - cpu % 2 + 1);
        let d = format!("sys/devices/system/cpu/cpu{cpu}");
        w(
            root,
            &format!("{d}/topology/physical_package_id"),
            &format!("{pkg}\n"),
        );
        w(root, &format!("{d}/topology/core_id"), &format!("{core}\n"));
        w(
            root,
            &format!("{d}/topology/thread_siblings_list"),
            &format!("{sib}\n"),
        );
        w(root, &format!("{d}/cache/index0/level"), "1\n");
        w(root, &format!("{d}/cache/index0/type"), "Data\n");
        w(root, &format!("{d}/cache/index0/size"), "32K\n");
        w(
            root,
            &format!("{d}/cache/index0/shared_cpu_list"),
            &format!("{sib}\n"),
        );
        w(
            root,
            &format!("{d}/cache/index0/coherency_line_size"),
            "64\n",
        );
        w(root, &format!("{d}/cache/index3/level"), "3\n");
        w(root, &format!("{d}/cache/index3/type"), "Unified\n");
        w(root, &format!("{d}/cache/index3/size"), "8192K\n");
        let llc = if pkg == 0 { "0-3" } else { "4-7" };
        w(
            root,
            &format!("{d}/cache/index3/shared_cpu_list"),
            &format!("{llc}\n"),
        );
    }
    w(root, "sys/devices/system/node/node0/cpulist", "0-3\n");
    w(root, "sys/devices/system/node/node1/cpulist", "4-7\n");
    for (n, mask) in [(24, "ff"), (25, "0f"), (26, "01")] {
        w(
            root,
            &format!("proc/irq/{n}/smp_affinity"),
            &format!("{mask}\n"),
        );
    }
    w(root, "proc/irq/default_smp_affinity", "ff\n");
    w(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    w(root, "proc/sys/kernel/sched_rt_period_us", "1000000\n");
}

#[test]
fn topology_of_a_fake_machine() {
    let dir = tempfile::tempdir().unwrap();
    fake_machine(dir.path());
    let t = Topology::read(&Roots::at(dir.path())).unwrap();
    assert_eq!(t.online.to_list(), "0-6");
    assert_eq!(t.n_cpus(), 7);
    assert_eq!(t.packages, 2);
    assert_eq!(t.cores, 4);
    assert_eq!(t.cpus[5].siblings.to_list(), "4-5");
    assert_eq!(t.cpus[5].node, 1);
    assert!(t.numa_from_sysfs);
    // L1 per SMT pair (4 of them, CPU 7 offline but its pair 6-7 is seen through CPU 6),
    // L3 per package.
    assert_eq!(t.caches.iter().filter(|c| c.level == 1).count(), 4);
    assert_eq!(t.caches.iter().filter(|c| c.level == 3).count(), 2);
    assert_eq!(t.llc_bytes(5), Some(8 << 20));
    // System cores: CPU 0 and its SMT sibling; a CPU that does not exist is an input error.
    assert_eq!(t.system_cpus(None).unwrap().to_list(), "0-1");
    let e = t.system_cpus(Some(&CpuSet::single(9))).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(t
        .system_cpus(Some(&CpuSet::parse_list("0-6").unwrap()))
        .is_err());
}

#[test]
fn journal_undoes_irqs_and_sysctls_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    fake_machine(dir.path());
    let roots = Roots::at(dir.path());
    let state = dir.path().join("state");
    {
        let mut j = Journal::create(&state, &roots).unwrap();
        j.set_irq(24, &CpuSet::single(0)).unwrap();
        // Changing the same IRQ twice: undo must end at the first value.
        j.set_irq(24, &CpuSet::single(1)).unwrap();
        j.set_irq(26, &CpuSet::single(0)).unwrap(); // already 01: no entry
        j.set_sysctl("kernel/sched_rt_runtime_us", "-1").unwrap();
        assert_eq!(j.entries().len(), 3);
        assert_eq!(irq::read(&roots, 24).unwrap().affinity.to_list(), "1");
        // The file holds the entries already (written before the changes).
        let text = fs::read_to_string(j.path()).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        // Dropped here: undo.
    }
    let irq24 = fs::read_to_string(dir.path().join("proc/irq/24/smp_affinity")).unwrap();
    assert_eq!(irq24.trim(), "ff");
    assert_eq!(
        fs::read_to_string(dir.path().join("proc/sys/kernel/sched_rt_runtime_us")).unwrap(),
        "950000"
    );
    assert!(
        fs::read_dir(&state).unwrap().next().is_none(),
        "journal file removed"
    );
}

#[test]
fn restore_undoes_a_journal_left_by_a_dead_run() {
    let dir = tempfile::tempdir().unwrap();
    fake_machine(dir.path());
    let roots = Roots::at(dir.path());
    let state = dir.path().join("state");
    let mut j = Journal::create(&state, &roots).unwrap();
    j.set_irq(25, &CpuSet::single(0)).unwrap();
    j.set_sysctl("kernel/sched_rt_runtime_us", "-1").unwrap();
    let path = j.path().to_path_buf();
    // A crash: the journal is never dropped. The fake tree has no /proc/<pid>, so its owner
    // reads as gone and restore undoes it.
    std::mem::forget(j);
    let r = journal::restore(&state, &roots, false).unwrap();
    assert_eq!(r.len(), 1);
    assert!(!r[0].owner_alive);
    assert_eq!(r[0].undone.len(), 2);
    assert!(
        r[0].undone.iter().all(|u| u.outcome == Ok(true)),
        "{:?}",
        r[0].undone
    );
    assert_eq!(irq::read(&roots, 25).unwrap().mask_text, "0f");
    assert!(!path.exists());
    // A torn last line (crash during the write) is skipped: its change was never made.
    let mut j = Journal::create(&state, &roots).unwrap();
    j.set_irq(26, &CpuSet::single(1)).unwrap();
    let path = j.path().to_path_buf();
    std::mem::forget(j);
    fs::write(
        &path,
        fs::read_to_string(&path).unwrap() + "{\"op\":\"irq\",\"ir",
    )
    .unwrap();
    let r = journal::restore(&state, &roots, false).unwrap();
    assert_eq!(r[0].skipped_lines, 1);
    assert_eq!(irq::read(&roots, 26).unwrap().mask_text, "01");
    // Entries serialise as one JSON object per line with an `op` tag.
    let e = Entry::Irq {
        irq: 3,
        old: "f".into(),
    };
    assert_eq!(
        serde_json::to_string(&e).unwrap(),
        r#"{"op":"irq","irq":3,"old":"f"}"#
    );
}
