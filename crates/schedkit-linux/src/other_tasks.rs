//! The machine's other tasks during a run: how often they ran on the job's CPUs and for how
//! long, from every task's `schedstat` (ns on a CPU, timeslices) read at the window's start
//! and end. `/proc/stat` gives the busy time of the job's CPUs only in 10 ms ticks and no
//! count of runs; `/proc/schedstat`, which has per-CPU counts, needs CONFIG_SCHEDSTATS and is
//! missing on many kernels (this machine's among them). `experiment fidelity` replays what
//! this measures in its simulated runs (RunOptions::scan_other_tasks).
//!
//! "Other" is every task that is neither schedkit's own process (the engine, its sampler and
//! the built-in workload threads it hosts) nor one of its descendants (the job's commands).
//! A task that may run on CPUs outside the job's counts in proportion to the share of its
//! allowed CPUs that are the job's (the kernel's placement within its mask is not known from
//! outside). What it cannot see: tasks that started and ended between the two scans.

use crate::affinity::{self, CpuSet};
use crate::{procfs, Roots};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// One scan: per task (tid), its CPU time and timeslices so far and the share of them that
/// falls on the job's CPUs.
#[derive(Clone, Debug)]
pub struct TaskScan {
    at: Instant,
    tasks: HashMap<i32, Counts>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Counts {
    run_ns: u64,
    slices: u64,
    share: f64,
}

/// The other tasks over a window: their runs and CPU time on the job's CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OtherTasks {
    /// Runs (schedstat timeslices), weighted by each task's share of the job's CPUs.
    pub runs: f64,
    /// CPU time, ns, weighted the same way.
    pub run_ns: f64,
    /// The window between the two scans, ns.
    pub window_ns: u64,
    /// How many tasks ran in it.
    pub tasks: usize,
    /// Each of those tasks' runs and CPU time (weighted the same way), the largest CPU time
    /// first: how long a run of other work lasts depends on whose it is (a `kdamond` pass of
    /// milliseconds, a `kworker` item of microseconds).
    pub by_task: Vec<TaskRuns>,
}

/// One other task's runs and CPU time over the window (see [`OtherTasks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TaskRuns {
    pub runs: f64,
    pub run_ns: f64,
}

impl TaskScan {
    /// Reads every task of the machine now but `own_pid`'s process and its descendants.
    pub fn read(roots: &Roots, job: &CpuSet, own_pid: i32) -> TaskScan {
        let pids = procfs::pids(roots);
        let parent: HashMap<i32, i32> = pids
            .iter()
            .filter_map(|&p| Some((p, ppid(roots, p)?)))
            .collect();
        let ours = descendants_of(own_pid, &parent);
        let mut tasks = HashMap::new();
        for &pid in pids.iter().filter(|p| !ours.contains(p)) {
            for tid in procfs::tids(roots, pid) {
                let Some((run_ns, _, slices)) = procfs::schedstat(roots, pid, tid) else {
                    continue;
                };
                let share = affinity::get_thread(tid)
                    .ok()
                    .filter(|a| !a.is_empty())
                    .map_or(1.0, |a| a.intersection(job).len() as f64 / a.len() as f64);
                tasks.insert(
                    tid,
                    Counts {
                        run_ns,
                        slices,
                        share,
                    },
                );
            }
        }
        TaskScan {
            at: Instant::now(),
            tasks,
        }
    }

    /// What ran from this scan to `later`. A task that was not there before (or whose
    /// counts went back: its id was reused) counts from zero; one that ran without a new
    /// timeslice counts as one run.
    pub fn since(&self, later: &TaskScan) -> OtherTasks {
        let mut out = OtherTasks {
            window_ns: later.at.saturating_duration_since(self.at).as_nanos() as u64,
            ..OtherTasks::default()
        };
        for (tid, b) in &later.tasks {
            let a = self
                .tasks
                .get(tid)
                .filter(|a| a.slices <= b.slices && a.run_ns <= b.run_ns);
            let (run, slices) = match a {
                Some(a) => (b.run_ns - a.run_ns, b.slices - a.slices),
                None => (b.run_ns, b.slices),
            };
            // A task that ran the whole window without being switched out has no new
            // timeslice: it is one run, still going (a hog alone on a CPU).
            if (slices > 0 || run > 0) && b.share > 0.0 {
                let t = TaskRuns {
                    runs: slices.max(1) as f64 * b.share,
                    run_ns: run as f64 * b.share,
                };
                out.tasks += 1;
                out.runs += t.runs;
                out.run_ns += t.run_ns;
                out.by_task.push(t);
            }
        }
        out.by_task.sort_by(|a, b| b.run_ns.total_cmp(&a.run_ns));
        out
    }
}

/// `pid`'s parent (`stat` field 4).
fn ppid(roots: &Roots, pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `root` and every process below it in `parent`. From every process's parent rather than
/// the `children` files the sampler walks (`run::sampler::descendants`), which are empty
/// without CONFIG_PROC_CHILDREN: leaving the job out must not depend on it.
fn descendants_of(root: i32, parent: &HashMap<i32, i32>) -> HashSet<i32> {
    let mut out = HashSet::from([root]);
    // Walk each process's chain up until it reaches a known answer; memoised in `out` and
    // `not`, so the whole table costs one pass.
    let mut not = HashSet::new();
    for &p in parent.keys() {
        let mut chain = Vec::new();
        let mut q = p;
        let inside = loop {
            if out.contains(&q) {
                break true;
            }
            if not.contains(&q) || chain.len() > parent.len() {
                break false;
            }
            chain.push(q);
            match parent.get(&q) {
                Some(&up) if up > 0 => q = up,
                _ => break false,
            }
        };
        if inside {
            out.extend(chain);
        } else {
            not.extend(chain);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn descendants_follow_the_parent_chain() {
        // 1 -> 10 -> 11 -> 12, 10 -> 13; 1 -> 20 -> 21.
        let parent = HashMap::from([(10, 1), (11, 10), (12, 11), (13, 10), (20, 1), (21, 20)]);
        let d = descendants_of(10, &parent);
        assert_eq!(d, HashSet::from([10, 11, 12, 13]));
        assert_eq!(descendants_of(21, &parent), HashSet::from([21]));
    }

    #[test]
    fn a_task_that_ran_without_a_new_timeslice_counts_as_one_run() {
        // Task 7 ran 150 ms still in the timeslice it had (a hog alone on its CPU), task 8
        // was switched in twice for 1 ms, task 9 did not run: 7 and 8 count, 9 does not.
        let c = |run_ns, slices| Counts {
            run_ns,
            slices,
            share: 1.0,
        };
        let at = Instant::now();
        let a = TaskScan {
            at,
            tasks: HashMap::from([(7, c(20_000_000, 1)), (8, c(5, 3)), (9, c(9, 9))]),
        };
        let b = TaskScan {
            at,
            tasks: HashMap::from([(7, c(170_000_000, 1)), (8, c(1_000_005, 5)), (9, c(9, 9))]),
        };
        let o = a.since(&b);
        assert_eq!(o.tasks, 2);
        assert_eq!(o.runs, 3.0);
        assert_eq!(o.run_ns, 151_000_000.0);
        assert_eq!(
            o.by_task[0],
            TaskRuns {
                runs: 1.0,
                run_ns: 150_000_000.0
            }
        );
    }

    #[test]
    fn a_busy_process_counts_unless_it_is_ours() {
        // A real child spinning between two scans. Scanned as another run's engine would
        // see it (`own_pid` of no process: everything is other), its CPU time and runs are
        // in the count; scanned as ours (`own_pid` = this process, its parent), neither this
        // process nor the child is. Nothing timed: the child's own schedstat is the yardstick.
        let roots = Roots::host();
        // The job is every online CPU, so the child's share is 1 whichever CPUs it may use
        // (`0..available_parallelism` counts this thread's CPUs and cgroup quotas instead).
        let all = crate::topo::Topology::host().expect("topology").online;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        let pid = child.id() as i32;
        let me = std::process::id() as i32;
        std::thread::sleep(Duration::from_millis(20));
        let (a_all, a_ours) = (
            TaskScan::read(&roots, &all, -1),
            TaskScan::read(&roots, &all, me),
        );
        let c0 = procfs::schedstat(&roots, pid, pid).expect("child schedstat");
        std::thread::sleep(Duration::from_millis(150));
        let c1 = procfs::schedstat(&roots, pid, pid).expect("child schedstat");
        let (b_all, b_ours) = (
            TaskScan::read(&roots, &all, -1),
            TaskScan::read(&roots, &all, me),
        );
        let _ = child.kill();
        let _ = child.wait();
        // The child's affinity is this process's; its share of `all` is 1.
        let everything = a_all.since(&b_all);
        assert!(b_all.tasks.contains_key(&pid) && b_all.tasks.contains_key(&me));
        assert!(everything.run_ns >= (c1.0 - c0.0) as f64, "{everything:?}");
        assert!(everything.runs >= (c1.2 - c0.2) as f64, "{everything:?}");
        assert!(everything.tasks >= 1 && everything.window_ns > 0);
        // The per-task parts add up to the totals, the largest first.
        assert_eq!(everything.by_task.len(), everything.tasks);
        let sum: f64 = everything.by_task.iter().map(|t| t.run_ns).sum();
        assert!((sum - everything.run_ns).abs() <= 1e-6 * everything.run_ns.max(1.0));
        assert!(everything
            .by_task
            .windows(2)
            .all(|w| w[0].run_ns >= w[1].run_ns));
        assert!(!b_ours.tasks.contains_key(&pid) && !b_ours.tasks.contains_key(&me));
        assert!(!a_ours.tasks.contains_key(&pid) && !a_ours.tasks.contains_key(&me));
    }
}
