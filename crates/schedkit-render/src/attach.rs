//! The text of `schedkit run --pid | --cgroup | --unit` (work already running) after it
//! ends: what exclusive mode moved, what was changed and undone, and whether every change
//! was undone ([`failed_undos`]: the binary exits 1 when one was not).

use schedkit_linux::attach::AttachReport;

/// Changes that could not be undone (`schedkit restore` is the way out).
pub fn failed_undos(r: &AttachReport) -> usize {
    r.undone.iter().filter(|u| u.outcome.is_err()).count()
}

/// The lines printed on stdout: exclusive mode's moves (when it ran), then one line of what
/// was changed, how it ended and what was restored.
pub fn text(r: &AttachReport) -> String {
    let mut out = String::new();
    if let Some(x) = &r.exclusive {
        out += &format!(
            "exclusive mode: system CPUs {}, job CPUs {}, SCHED_FIFO {}; moved {} other \
                thread(s) and {} IRQ(s) to the system CPUs (the kernel refused {} IRQ(s))\n",
            x.system_cpus,
            x.job_cpus,
            x.priority,
            x.moved_threads,
            x.moved_irqs.len(),
            x.refused_irqs.len()
        );
    }
    let ok = r.undone.iter().filter(|u| u.outcome == Ok(true)).count();
    let failed = failed_undos(r);
    out += &format!(
        "{}: changed {} thread(s) of {} process(es); ended by {}; restored {ok} change(s){}; \
            the work was left running\n",
        r.target,
        r.threads,
        r.processes,
        r.ended_by,
        if failed == 0 {
            String::new()
        } else {
            format!(", {failed} FAILED (run `schedkit restore`)")
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_linux::journal::{Entry, Undone};

    #[test]
    fn says_what_was_restored_and_what_failed() {
        let undone = |outcome| Undone {
            entry: Entry::Irq {
                irq: 7,
                old: "1".into(),
            },
            outcome,
        };
        let mut r = AttachReport {
            target: "process 7 (spin)".into(),
            ended_by: "signal".into(),
            threads: 2,
            processes: 1,
            exclusive: None,
            warnings: Vec::new(),
            undone: vec![undone(Ok(true)), undone(Ok(false))],
        };
        assert_eq!(failed_undos(&r), 0);
        assert_eq!(
            text(&r),
            "process 7 (spin): changed 2 thread(s) of 1 process(es); ended by signal; \
             restored 1 change(s); the work was left running\n"
        );
        r.undone.push(undone(Err("EPERM".into())));
        assert_eq!(failed_undos(&r), 1);
        assert!(text(&r).contains("restored 1 change(s), 1 FAILED (run `schedkit restore`);"));
    }
}
