//! Starting a scenario's processes at their arrival and placing their threads: the CPUs and
//! class each new job thread gets under the policy ([`Placement`]), a command held at its
//! start gate until it is placed, a built-in workload's threads placing themselves, and the
//! threads the sampler finds (every thread a command starts) tracked and placed as they come.

use super::policy::rt_priority;
use super::sampler::{discover, Body, Proc, Track};
use super::{Live, RunPolicy};
use crate::affinity::{self, CpuSet};
use crate::perf::{CounterSet, Target};
use crate::procfs::ThreadStat;
use crate::sched::{self, Policy};
use crate::spawn;
use crate::workload::{self, ThreadShared, WorkSpec};
use crate::{Error, Result};
use schedkit_core::scenario::{Class, Process};
use schedkit_core::trace::{Event, Owner, Slot};
use schedkit_core::Nanos;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Placement of one new job thread (asked by the sampler for commands' threads, and by the
/// thread itself for built-in workloads): its CPUs and its class under the run's policy.
pub(super) struct Placement {
    policy: RunPolicy,
    /// Exclusive mode: the job's CPUs, one per thread in turn.
    job_list: Vec<usize>,
    fifo_prio: Option<u32>,
}

impl Placement {
    pub(super) fn new(policy: &RunPolicy, job_cpus: &CpuSet) -> Placement {
        Placement {
            policy: policy.clone(),
            job_list: job_cpus.iter().collect(),
            fifo_prio: match policy {
                RunPolicy::Exclusive(cfg) => Some(cfg.priority),
                _ => None,
            },
        }
    }

    /// The CPUs and class of the `k`-th thread placed in the run, of process `proc_`.
    pub(super) fn of(&self, proc_: &Process, k: usize) -> (Option<CpuSet>, Option<Policy>) {
        match &self.policy {
            // The kernel's own scheduler: the process's class (`class = "fifo"`: SCHED_FIFO at
            // the priority the `fcfs` policy would give it), else its nice if not 0.
            RunPolicy::Default => (
                proc_.cpus().as_ref().map(|c| c.iter().copied().collect()),
                match proc_.class() {
                    Class::Fifo => Some(Policy::Fifo {
                        priority: rt_priority(None, proc_.priority()),
                    }),
                    Class::Other => {
                        (proc_.nice() != 0).then_some(Policy::Other { nice: proc_.nice() })
                    }
                },
            ),
            RunPolicy::Fifo { priority } => (
                proc_.cpus().as_ref().map(|c| c.iter().copied().collect()),
                Some(Policy::Fifo {
                    priority: rt_priority(*priority, proc_.priority()),
                }),
            ),
            RunPolicy::Rr { priority, .. } => (
                proc_.cpus().as_ref().map(|c| c.iter().copied().collect()),
                Some(Policy::Rr {
                    priority: rt_priority(*priority, proc_.priority()),
                }),
            ),
            // The gang controller pins each thread to its matrix column; the class is set
            // explicitly, since the engine thread they inherit from runs SCHED_FIFO.
            RunPolicy::Gang { .. } => (None, Some(Policy::Other { nice: proc_.nice() })),
            // SCHED_OTHER explicitly: weights (nice, cgroup shares) only act on that class,
            // and v1 refuses real-time threads in a new cpu cgroup.
            RunPolicy::ProcessFair | RunPolicy::Fair { .. } => (
                proc_.cpus().as_ref().map(|c| c.iter().copied().collect()),
                Some(Policy::Other { nice: proc_.nice() }),
            ),
            RunPolicy::Exclusive(_) => (
                Some(CpuSet::single(self.job_list[k % self.job_list.len()])),
                Some(Policy::Fifo {
                    priority: self.fifo_prio.unwrap_or(99),
                }),
            ),
        }
    }
}

impl Live<'_> {
    /// Starts every process whose arrival time has come (none once stopping or past the
    /// horizon).
    pub(super) fn arrivals(&mut self, now: u64) -> Result<()> {
        let scenario = self.scenario;
        while let Some(&p) = self.pending.peek() {
            if scenario.processes()[p].arrival().0 > now || self.interrupted || now >= self.horizon
            {
                break;
            }
            self.pending.next();
            let sp = &scenario.processes()[p];
            let start_ns = self.origin.elapsed().as_nanos() as u64;
            if let Some(cmd) = sp.command() {
                self.spawn_command(p, cmd, start_ns)?;
                continue;
            }
            let body = self.start_builtin(p)?;
            self.procs[p] = Some(Proc {
                start_ns,
                end_ns: None,
                tasks_file: None,
                job_dir: None,
                body,
                counters: None,
                next_index: 0,
            });
        }
        Ok(())
    }

    /// A command: forked and held at its start gate, put in the run's job cgroup, placed,
    /// given its cgroup and one-command flags and counters, then let go.
    fn spawn_command(&mut self, p: usize, cmd: &[String], start_ns: u64) -> Result<()> {
        let scenario = self.scenario;
        let sp = &scenario.processes()[p];
        // Into the run's job cgroup before it runs (born there where the kernel allows):
        // everything it forks, even what leaves its process group, is born inside and ends
        // with the run.
        let target = self.jobs.as_mut().map(|j| j.next_dir()).transpose()?;
        let fd = target.as_ref().and_then(|t| t.1.as_ref()).map(|f| {
            use std::os::fd::AsRawFd;
            f.as_raw_fd()
        });
        let g = spawn::fork_gated(cmd, !self.opts.guard.keep_running, fd)?;
        let pid = g.pid;
        if let (Some(j), Some((dir, _))) = (self.jobs.as_ref(), target.as_ref()) {
            if !g.in_cgroup {
                j.attach(dir, pid)?;
            }
        }
        if let Some((iso, _)) = self.isolation.as_mut() {
            iso.exempt(pid);
        }
        let (cpus, pol) = self.placement.of(sp, self.next_pin);
        // The main thread gets the whole job set until the sampler pins it.
        let first = match &self.opts.policy {
            RunPolicy::Exclusive(_) => Some(self.job_cpus.clone()),
            _ => cpus,
        };
        if let Some(c) = first {
            affinity::set_thread(pid, &c)?;
        }
        if let Some(pol) = pol {
            sched::set_thread(pid, pol)?;
        }
        // Into its cgroup before it runs: every thread and child it makes is born inside.
        if let Some(f) = self.fair.as_ref() {
            f.attach_command(p, pid)?;
        }
        if let Some(hook) = self.opts.before_exec.as_mut() {
            hook(pid, self.journal.as_mut())?;
        }
        let counters = self
            .opts
            .perf
            .then(|| CounterSet::open(self.source.as_mut(), Target::Inherit(pid), &self.kinds));
        if let Err(errno) = g.release() {
            return Err(Error::Input(format!(
                "{}:{}: process.command: cannot execute `{}`: {}",
                scenario.file(),
                sp.line(),
                cmd[0],
                std::io::Error::from_raw_os_error(errno)
            )));
        }
        self.procs[p] = Some(Proc {
            start_ns,
            end_ns: None,
            tasks_file: target
                .as_ref()
                .and_then(|t| crate::jobcg::task_counter(&t.0))
                .map(crate::jobcg::TaskCount::new),
            job_dir: target.as_ref().map(|t| t.0.clone()),
            body: Body::Command { pid, exit: None },
            counters,
            next_index: 0,
        });
        Ok(())
    }

    /// A built-in workload: its threads start inside schedkit and place themselves.
    fn start_builtin(&mut self, p: usize) -> Result<Body> {
        let sp = &self.scenario.processes()[p];
        let spec = WorkSpec {
            work: sp.work().clone(),
            threads: sp.threads(),
            burst: sp.burst().map(|b| b.0),
            iterations: self.opts.iterations,
            pattern: sp.pattern().map(<[_]>::to_vec),
        };
        let base = self.next_pin;
        self.next_pin += sp.threads() as usize;
        let plans: Vec<(Option<CpuSet>, Option<Policy>)> = (0..sp.threads() as usize)
            .map(|k| self.placement.of(sp, base + k))
            .collect();
        let refused = self.thread_warnings.clone();
        let name = sp.name().to_string();
        let setup: Arc<dyn Fn(u32) + Send + Sync> = Arc::new(move |k: u32| {
            // Class first, then the CPU: a real-time thread that moves to its CPU preempts
            // what runs there, while a SCHED_OTHER one would queue behind it and could be
            // overtaken by a later thread that became real-time first (FCFS order would
            // break).
            let (c, pol) = &plans[k as usize];
            if let Some(pol) = pol {
                if let Err(e) = sched::set_thread(0, *pol) {
                    // The run's warnings, once per process and message (the library does
                    // not print).
                    let w = format!("{name}: {e}");
                    let mut r = refused.lock().unwrap_or_else(|p| p.into_inner());
                    if !r.contains(&w) {
                        r.push(w);
                    }
                }
            }
            if let Some(c) = c {
                let _ = affinity::set_thread(0, c);
            }
        });
        let running = workload::start(
            sp.name(),
            &spec,
            self.origin,
            self.stop_threads.clone(),
            setup,
        )
        .map_err(|e| Error::io("start workload threads", e))?;
        Ok(Body::Builtin(running))
    }

    /// Tracks (and places) every thread of a live process that is not tracked yet.
    pub(super) fn discover_threads(&mut self) -> Result<()> {
        for p in 0..self.procs.len() {
            let Some(pr) = self.procs[p].as_mut() else {
                continue;
            };
            if pr.end_ns.is_some() {
                continue;
            }
            // A command whose job cgroup holds as many tasks as are tracked started nothing.
            let unchanged = matches!(pr.body, Body::Command { .. })
                && pr
                    .tasks_file
                    .as_mut()
                    .and_then(|c| c.count())
                    .is_some_and(|n| {
                        n == self
                            .tracks
                            .iter()
                            .filter(|t| t.process == p && !t.finished)
                            .count()
                    });
            if unchanged {
                continue;
            }
            for (pid, tid, shared) in self.found_threads(p) {
                if self.by_tid.contains_key(&tid) {
                    continue;
                }
                self.track_thread(p, pid, tid, shared)?;
            }
        }
        Ok(())
    }

    /// The threads of process `p` to look at: a built-in workload's threads that have
    /// started, or what [`discover`] finds in a command's tree.
    fn found_threads(&self, p: usize) -> Vec<(i32, i32, Option<Arc<ThreadShared>>)> {
        let Some(pr) = self.procs[p].as_ref() else {
            return Vec::new();
        };
        let tracks = &self.tracks;
        match &pr.body {
            Body::Builtin(r) => {
                let me = std::process::id() as i32;
                r.shared
                    .iter()
                    .filter_map(|s| {
                        let tid = s.tid.load(Ordering::Acquire);
                        (tid != 0).then(|| (me, tid, Some(s.clone())))
                    })
                    .collect()
            }
            Body::Command { pid, .. } => {
                let active: Vec<(i32, i32)> = tracks
                    .iter()
                    .filter(|t| t.process == p && t.active)
                    .map(|t| (t.pid, t.tid))
                    .collect();
                let fresh = !self.by_tid.contains_key(pid);
                let live =
                    |q: i32| tracks.iter().filter(|t| t.pid == q && !t.finished).count() as u64;
                discover(
                    &self.roots,
                    fresh.then_some(*pid),
                    &active,
                    &self.by_tid,
                    live,
                )
                .into_iter()
                .map(|(pid, tid)| (pid, tid, None))
                .collect()
            }
        }
    }

    /// A new thread of process `p`: its `Arrive`, its placement (a command's thread; a
    /// built-in one placed itself), its cgroup, its counters, and its sampler state.
    fn track_thread(
        &mut self,
        p: usize,
        pid: i32,
        tid: i32,
        shared: Option<Arc<ThreadShared>>,
    ) -> Result<()> {
        let scenario = self.scenario;
        let pr = self.procs[p].as_mut().expect("a started process");
        let index = pr.next_index;
        pr.next_index += 1;
        let slot_no = self.tracks.len() as Slot;
        let arrive_at = if index < scenario.processes()[p].threads() {
            pr.start_ns
        } else {
            self.t_prev.max(pr.start_ns)
        };
        self.events.push(Event::Arrive {
            t: Nanos(arrive_at),
            slot: slot_no,
            owner: Owner::Process {
                process: p,
                thread: index,
            },
        });
        let is_cmd = shared.is_none();
        if is_cmd {
            self.place_command_thread(p, pid, tid);
        }
        if let Some(f) = self.fair.as_ref() {
            f.attach_thread(p, pid, tid, is_cmd, scenario.processes()[p].nice())?;
        }
        let counters = (self.opts.perf && !is_cmd)
            .then(|| CounterSet::open(self.source.as_mut(), Target::Thread(tid), &self.kinds));
        self.by_tid.insert(tid, self.tracks.len());
        self.tracks.push(Track {
            process: p,
            index,
            pid,
            tid,
            slot: slot_no,
            arrive_ns: arrive_at,
            prev_run: 0,
            prev_wait: 0,
            carry: 0,
            prev_sw: (0, 0),
            open_core: None,
            last_core: None,
            runnable: true,
            finished: false,
            shared,
            last: ThreadStat::default(),
            files: None,
            active: true,
            idle: 0,
            waiting: 0,
            read_at: 0,
            since: 0,
            migrations: 0,
            stall_run: 0,
            stall_since: None,
            longest_stall: 0,
            counters,
        });
        Ok(())
    }

    /// A command's new thread gets the policy's CPUs and class; under exclusive mode a thread
    /// that chose a real-time class itself keeps it (said once per process).
    fn place_command_thread(&mut self, p: usize, pid: i32, tid: i32) {
        let scenario = self.scenario;
        if let Some((iso, _)) = self.isolation.as_mut() {
            iso.exempt(pid);
        }
        let (cpus, pol) = self.placement.of(&scenario.processes()[p], self.next_pin);
        self.next_pin += 1;
        if let Some(c) = cpus {
            let _ = affinity::set_thread(tid, &c);
        }
        let Some(pol) = pol else { return };
        let Ok(cur) = sched::get_thread(tid) else {
            return;
        };
        let own_rt = matches!(
            cur,
            Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. }
        );
        if own_rt && matches!(self.opts.policy, RunPolicy::Exclusive(_)) {
            // The job chose a real-time class itself (cyclictest's -p 80): exclusive mode
            // pins it but keeps its choice.
            if cur != pol && self.kept_rt.insert(p) {
                self.warnings.push(format!(
                    "{}: kept the job's own {} (exclusive mode gives job threads {} only \
                     when they choose no real-time class)",
                    scenario.processes()[p].name(),
                    cur.name_with_priority(),
                    pol.name_with_priority()
                ));
            }
        } else if cur != pol {
            let _ = sched::set_thread(tid, pol);
        }
    }
}
