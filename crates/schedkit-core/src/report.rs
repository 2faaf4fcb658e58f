//! The report: every metric of SPEC section 1, computed in one place from the Trace.
//!
//! [`Metrics`] is a [`TraceSink`] that folds events as they arrive (constant memory per thread,
//! per task and per core, nothing per event), so the simulator and the real engine produce the
//! same numbers by construction. [`Metrics::finish`] turns the fold into a [`Report`].
//!
//! Definitions (also in `docs/metrics.md`, which tests keep honest):
//! - turnaround = finish - arrival (for unfinished threads: end of window - arrival);
//!   waiting = turnaround - cpu - blocked (time runnable but not running: a thread's sleep is
//!   not waiting; for threads that never block this is seed 004's turnaround - cpu, 3.1.1);
//!   response = first dispatch - arrival. An engine that measures run-queue delay itself
//!   (the real engine, from schedstat) gives it through [`Metrics::measured_waiting`], and
//!   that figure is the thread's waiting.
//! - a *dispatch* is a `Dispatch` event; a *context switch* is a dispatch on a core whose
//!   previous thread was a different thread (idle in between does not matter; a core's first
//!   dispatch is not a switch); a *preemption* is a `Deschedule` for `Preempted` or `Expired`;
//!   a *migration* is a dispatch on another core than the thread last ran on.
//! - a thread's `context_switches` counts the times it was switched out before finishing.
//! - GPS (see [`crate::gps`]) integrates each process's ideal CPU time over the same window;
//!   `lag = ideal - actual`; `max_abs_lag_ns` is exact for processes and tasks (lag is
//!   piecewise linear, evaluated at every breakpoint) and sampled every `sample_interval`
//!   for groups.

use crate::gps::water_fill;
use crate::scenario::Scenario;
use crate::time::Nanos;
use crate::trace::{Event, Owner, Reason, Slot, TraceSink};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether a job with absolute deadline `deadline` misses it (docs/metrics.md, "deadline
/// miss"): finished (`finish` is `Some`) after the deadline, or not finished by the end of
/// the run, `end`, with the deadline before then. A job finishing exactly at its deadline
/// meets it; `end` matters only for an unfinished job. The one definition the report's
/// counts and the Chrome trace's miss events share.
pub fn misses_deadline(deadline: Nanos, finish: Option<Nanos>, end: Nanos) -> bool {
    match finish {
        Some(t) => t > deadline,
        None => deadline < end,
    }
}

/// Per thread (process threads) or per task (real-time tasks, aggregated over jobs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThreadReport {
    pub name: String,
    pub process: String,
    pub arrival_ns: u64,
    pub start_ns: Option<u64>,
    pub finish_ns: Option<u64>,
    pub cpu_ns: u64,
    pub waiting_ns: u64,
    pub turnaround_ns: u64,
    pub response_ns: Option<u64>,
    pub migrations: u64,
    pub context_switches: u64,
    /// Real-time tasks only.
    pub jobs: Option<u64>,
    pub deadline_misses: Option<u64>,
    pub max_response_ns: Option<u64>,
}

/// Per process (and per real-time task) or per group.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ShareReport {
    pub name: String,
    pub threads: u64,
    pub cpu_ns: u64,
    /// Fraction of the machine's CPU time in the window (cores x window).
    pub share: f64,
    /// GPS share of the machine over the same window.
    pub ideal_share: f64,
    /// Fraction of the CPU time the job (every process of the scenario) received: on a
    /// machine shared with outside load this, not `share`, is the one to hold against
    /// `ideal_job_share`.
    pub job_share: f64,
    /// This entity's GPS service as a fraction of the job's total GPS service.
    pub ideal_job_share: f64,
    /// Ideal minus actual CPU time at the end of the window.
    pub lag_ns: i64,
    pub max_abs_lag_ns: u64,
    pub avg_waiting_ns: u64,
    pub avg_turnaround_ns: u64,
    /// Built-in workloads in `run`: iterations completed, and per second of the window.
    pub work_done: Option<u64>,
    pub work_rate: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub avg_waiting_ns: u64,
    pub avg_turnaround_ns: u64,
    pub avg_response_ns: u64,
    pub context_switches: u64,
    pub dispatches: u64,
    pub preemptions: u64,
    pub migrations: u64,
    pub deadline_misses: u64,
    pub jobs: u64,
    /// Largest |share - ideal_share| over processes (shares of the machine).
    pub max_abs_share_error: f64,
    /// Largest |job_share - ideal_job_share| over processes (shares of the job's CPU time).
    pub max_abs_job_share_error: f64,
    /// CPU time of the whole job (all processes and tasks) in the window.
    pub job_cpu_ns: u64,
    /// Mean over processes of |actual - ideal| / ideal, in percent (seed 004, 4.6).
    pub mean_abs_pct_error: f64,
    pub max_abs_lag_ns: u64,
    pub makespan_ns: u64,
    /// Fraction of core time spent running threads.
    pub utilisation: f64,
}

/// The report both engines produce.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub engine: String,
    pub policy: String,
    pub scenario: String,
    pub cores: usize,
    pub window_ns: u64,
    pub threads: Vec<ThreadReport>,
    pub processes: Vec<ShareReport>,
    pub groups: Vec<ShareReport>,
    pub summary: Summary,
    /// The CPUs the job could use, where the engine knows them (a real run: `0-1`; `null`
    /// for the simulator, whose cores are the scenario's).
    #[serde(default)]
    pub cpus: Option<String>,
    /// Where the run was not what the scenario asked (fewer CPUs, outside load, an overrun
    /// horizon, degraded privileges), one sentence each; empty for the simulator.
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Clone, Default)]
struct ThreadStats {
    arrival: Option<Nanos>,
    start: Option<Nanos>,
    finish: Option<Nanos>,
    cpu: u64,
    migrations: u64,
    switches: u64,
    /// Time blocked (between `Block` and `Wake`), and since when it is blocked now.
    blocked: u64,
    blocked_since: Option<Nanos>,
    /// Run-queue delay measured by the engine itself (see [`Metrics::measured_waiting`]).
    measured_waiting: Option<u64>,
}

#[derive(Clone, Default)]
struct TaskStats {
    jobs: u64,
    misses: u64,
    max_response: u64,
    first_release: Option<Nanos>,
    /// Released, unfinished jobs: job -> (release, deadline).
    open: BTreeMap<u64, (Nanos, Nanos)>,
    /// Over all threads of all jobs: migrations, and times switched out before finishing
    /// (the per-thread definitions, summed per task; docs/metrics.md).
    migrations: u64,
    switches: u64,
}

/// An owner of CPU time: a process (index < processes) or a task.
#[derive(Clone, Default)]
struct Entity {
    name: String,
    group: Option<usize>,
    weight: f64,
    threads: u64,
    /// CPU time of finished run intervals.
    cpu: u64,
    /// Running threads and the sum of their dispatch times, so that the CPU time at any
    /// instant is `cpu + running * t - since_sum` in O(1).
    running: u64,
    since_sum: u64,
    runnable: u64,
    gps_rate: f64,
    gps_settled: f64,
    gps_since: u64,
    max_abs_lag: f64,
    work_done: Option<u64>,
}

impl Entity {
    fn actual_at(&self, t: u64) -> f64 {
        self.cpu as f64 + (self.running * t) as f64 - self.since_sum as f64
    }
    fn ideal_at(&self, t: u64) -> f64 {
        self.gps_settled + self.gps_rate * (t - self.gps_since) as f64
    }
}

#[derive(Clone, Copy)]
struct SlotState {
    owner: Owner,
    generation: u64,
    running: Option<(usize, Nanos)>,
    last_core: Option<usize>,
    runnable: bool,
}

/// The streaming metrics fold. Feed it events, then call [`Metrics::finish`].
pub struct Metrics {
    engine: String,
    policy: String,
    scenario: String,
    cores: usize,
    process_names: Vec<String>,
    process_thread_base: Vec<usize>,
    threads: Vec<ThreadStats>,
    tasks: Vec<TaskStats>,
    task_count: usize,
    entities: Vec<Entity>,
    group_names: Vec<String>,
    group_weights: Vec<f64>,
    group_max_abs_lag: Vec<f64>,
    slots: Vec<Option<SlotState>>,
    core_last: Vec<Option<(Slot, u64)>>,
    generation: u64,
    busy_ns: u64,
    dispatches: u64,
    switches: u64,
    preemptions: u64,
    migrations: u64,
    last_t: Nanos,
    gps_dirty: Option<u64>,
    /// Entities whose runnable count changed at `gps_dirty` (may repeat).
    gps_changed: Vec<usize>,
    /// Runnable threads over all entities.
    total_runnable: u64,
    /// The last full GPS computation gave every entity exactly its cap (runnable threads):
    /// see `recompute_gps`'s fast path.
    gps_all_capped: bool,
    sample_interval: u64,
    next_sample: u64,
    /// C / T of each real-time task: its ideal share of one core.
    task_utilisation: Vec<f64>,
    /// Per task, what an engine that does not trace every dispatch measured instead
    /// ([`Metrics::measured_task`]).
    measured_tasks: Vec<Option<MeasuredTask>>,
    /// Context switches and migrations of the whole run as the engine measured them
    /// ([`Metrics::measured_totals`]).
    measured_totals: Option<(u64, u64)>,
}

/// A task's counts from an engine that measures them rather than tracing each dispatch (the
/// real task runners): CPU time (`None`: not measured per task), migrations, switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeasuredTask {
    pub cpu_ns: Option<u64>,
    pub migrations: u64,
    pub context_switches: u64,
}

impl Metrics {
    /// Default lag sampling period (SPEC: at least every 10 ms).
    pub const SAMPLE_INTERVAL: Nanos = Nanos::from_ms(10);

    pub fn new(scenario: &Scenario, engine: &str, cores: usize) -> Metrics {
        let mut process_thread_base = Vec::new();
        let mut n = 0;
        for p in &scenario.processes {
            process_thread_base.push(n);
            n += p.threads as usize;
        }
        // Proportional-share policies state the user's intent in tickets, the others in
        // weights (nice): the GPS reference follows whichever the policy honours.
        let by_tickets = matches!(
            scenario.policy.name,
            crate::scenario::PolicyName::Lottery | crate::scenario::PolicyName::Stride
        );
        let mut entities: Vec<Entity> = scenario
            .processes
            .iter()
            .map(|p| Entity {
                name: p.name.clone(),
                group: p.group,
                weight: if by_tickets {
                    p.tickets as f64
                } else {
                    p.weight as f64
                },
                threads: p.threads as u64,
                ..Entity::default()
            })
            .collect();
        // Real-time tasks are not part of the GPS reference (their "fair share" is their
        // utilisation, see `finish`); weight 0 keeps them out of water-filling.
        entities.extend(scenario.tasks.iter().map(|t| Entity {
            name: t.name.clone(),
            weight: 0.0,
            ..Entity::default()
        }));
        let task_utilisation = scenario.tasks.iter().map(|t| t.utilisation()).collect();
        // Sampling groups costs O(grouped processes); for very large scenarios the period
        // grows so that sampling stays a small fraction of the work (docs/metrics.md).
        let scale = (entities.len() as u64).div_ceil(1000).max(1);
        let sample_interval = Self::SAMPLE_INTERVAL.0 * scale;
        Metrics {
            engine: engine.to_string(),
            policy: scenario.policy.name.to_string(),
            scenario: scenario.file.clone(),
            cores,
            process_names: scenario.processes.iter().map(|p| p.name.clone()).collect(),
            process_thread_base,
            threads: vec![ThreadStats::default(); n],
            tasks: vec![TaskStats::default(); scenario.tasks.len()],
            task_count: scenario.tasks.len(),
            task_utilisation,
            entities,
            group_names: scenario.groups.iter().map(|g| g.name.clone()).collect(),
            group_weights: scenario.groups.iter().map(|g| g.weight as f64).collect(),
            group_max_abs_lag: vec![0.0; scenario.groups.len()],
            slots: Vec::new(),
            core_last: vec![None; cores],
            generation: 0,
            busy_ns: 0,
            dispatches: 0,
            switches: 0,
            preemptions: 0,
            migrations: 0,
            last_t: Nanos::ZERO,
            gps_dirty: None,
            gps_changed: Vec::new(),
            total_runnable: 0,
            gps_all_capped: false,
            sample_interval,
            next_sample: sample_interval,
            measured_tasks: vec![None; scenario.tasks.len()],
            measured_totals: None,
        }
    }

    /// What the engine measured for task `task` (the real task runners trace releases and
    /// finishes of jobs, not every dispatch). With a CPU time, the task's share and lag are
    /// of that CPU time, known at the end only (so `max_abs_lag_ns` is |lag| at the end);
    /// without one, CPU, share and lag stay unmeasured (zero) for every task.
    pub fn measured_task(&mut self, task: usize, m: MeasuredTask) {
        if let Some(slot) = self.measured_tasks.get_mut(task) {
            *slot = Some(m);
        }
    }

    /// The run's context switches and migrations as the engine counted them (whose counts
    /// they are is the engine's to say); they replace the counts of the traced dispatches.
    pub fn measured_totals(&mut self, context_switches: u64, migrations: u64) {
        self.measured_totals = Some((context_switches, migrations));
    }

    /// Records iterations of a built-in workload (the real engine).
    pub fn set_work_done(&mut self, process: usize, iterations: u64) {
        self.entities[process].work_done = Some(iterations);
    }

    /// The run-queue delay of thread `thread` of process `process` as the engine measured it
    /// (the real engine: schedstat's `run_delay`); it becomes that thread's `waiting_ns`.
    /// Sampled placements cannot tell when inside a sampling period a thread slept, so the
    /// kernel's own count is the one source of the figure in `run`.
    pub fn measured_waiting(&mut self, process: usize, thread: usize, ns: u64) {
        if let Some(&base) = self.process_thread_base.get(process) {
            if let Some(ts) = self.threads.get_mut(base + thread) {
                ts.measured_waiting = Some(ns);
            }
        }
    }

    /// Starts or ends a blocked stretch of a process thread.
    fn note_blocked(&mut self, owner: Owner, blocked: bool, t: Nanos) {
        let Some(ti) = self.thread_index(owner) else {
            return;
        };
        let ts = &mut self.threads[ti];
        match (blocked, ts.blocked_since) {
            (true, None) => ts.blocked_since = Some(t),
            (false, Some(since)) => {
                ts.blocked += (t - since).0;
                ts.blocked_since = None;
            }
            _ => {}
        }
    }

    fn entity_of(&self, owner: Owner) -> usize {
        match owner {
            Owner::Process { process, .. } => process,
            Owner::Task { task, .. } => self.process_names.len() + task,
        }
    }

    fn thread_index(&self, owner: Owner) -> Option<usize> {
        match owner {
            Owner::Process { process, thread } => {
                Some(self.process_thread_base[process] + thread as usize)
            }
            Owner::Task { .. } => None,
        }
    }

    /// Recomputes GPS rates after the set of runnable threads changed at time `at`.
    fn recompute_gps(&mut self, at: u64) {
        // Fast path (exact): without groups, while the runnable threads fit on the cores,
        // water-filling caps every entity, so each entity's rate is its runnable count and a
        // change of one entity's runnable count changes that entity's rate only. Settling just
        // the changed entities keeps a release or finish O(1) instead of O(entities log
        // entities); periodic task sets below saturation live here. `gps_all_capped` says the
        // last full computation ended in that regime (so every other rate is its cap).
        let changed = std::mem::take(&mut self.gps_changed);
        if self.gps_all_capped
            && self.group_weights.is_empty()
            && self.total_runnable <= self.cores as u64
            && changed.iter().all(|&i| self.entities[i].weight > 0.0)
        {
            for &i in &changed {
                self.touch(i, at);
                let e = &mut self.entities[i];
                e.gps_settled = e.ideal_at(at);
                e.gps_since = at;
                e.gps_rate = e.runnable as f64;
            }
            self.gps_changed = changed;
            self.gps_changed.clear();
            return;
        }
        self.gps_changed = changed;
        self.gps_changed.clear();
        self.recompute_gps_full(at);
        self.gps_all_capped = self.group_weights.is_empty()
            && self
                .entities
                .iter()
                .all(|e| e.gps_rate == e.runnable as f64);
    }

    /// Water-fills the whole hierarchy from scratch.
    fn recompute_gps_full(&mut self, at: u64) {
        for i in 0..self.entities.len() {
            self.touch(i, at);
        }
        for e in &mut self.entities {
            e.gps_settled = e.ideal_at(at);
            e.gps_since = at;
            e.gps_rate = 0.0;
        }
        // Top level: groups (their member processes' runnable threads as cap) and ungrouped
        // entities.
        let groups = self.group_weights.len();
        let mut top: Vec<(f64, f64)> = self.group_weights.iter().map(|&w| (w, 0.0)).collect();
        let mut top_index = vec![usize::MAX; self.entities.len()];
        for (i, e) in self.entities.iter().enumerate() {
            if e.runnable == 0 {
                continue;
            }
            match e.group {
                Some(g) => top[g].1 += e.runnable as f64,
                None => {
                    top_index[i] = top.len();
                    top.push((e.weight, e.runnable as f64));
                }
            }
        }
        let rates = water_fill(self.cores as f64, &top);
        for (i, e) in self.entities.iter_mut().enumerate() {
            if top_index[i] != usize::MAX {
                e.gps_rate = rates[top_index[i]];
            }
        }
        for (g, &group_rate) in rates.iter().enumerate().take(groups) {
            if group_rate == 0.0 {
                continue;
            }
            let members: Vec<usize> = (0..self.entities.len())
                .filter(|&i| self.entities[i].group == Some(g) && self.entities[i].runnable > 0)
                .collect();
            let entries: Vec<(f64, f64)> = members
                .iter()
                .map(|&i| (self.entities[i].weight, self.entities[i].runnable as f64))
                .collect();
            for (k, r) in water_fill(group_rate, &entries).into_iter().enumerate() {
                self.entities[members[k]].gps_rate = r;
            }
        }
    }

    /// The lag of entity `i` at `t`: a task's reference is its utilisation, a process's its
    /// GPS service.
    fn lag_at(&self, i: usize, t: u64) -> f64 {
        let e = &self.entities[i];
        let np = self.process_names.len();
        let ideal = if i < np {
            e.ideal_at(t)
        } else {
            self.task_utilisation[i - np] * t as f64
        };
        ideal - e.actual_at(t)
    }

    /// Folds entity `i`'s lag at `t` into its maximum.
    ///
    /// Between two changes of an entity's running count or GPS rate, both its ideal and its
    /// actual service are linear in time, so its lag is too, and the largest |lag| over the
    /// run is reached at one of those changes. Calling this at every change (dispatch,
    /// deschedule, GPS settle, end) makes `max_abs_lag_ns` exact, at O(1) per event, with no
    /// periodic scan of every process.
    fn touch(&mut self, i: usize, t: u64) {
        let lag = self.lag_at(i, t).abs();
        let e = &mut self.entities[i];
        e.max_abs_lag = e.max_abs_lag.max(lag);
    }

    /// Samples group lags (a group's lag is the sum of its members', whose breakpoints do not
    /// coincide, so groups are sampled every `sample_interval` instead).
    fn sample(&mut self, t: u64) {
        if self.group_weights.is_empty() {
            return;
        }
        let mut group_lag = vec![0.0; self.group_weights.len()];
        for i in 0..self.entities.len() {
            if let Some(g) = self.entities[i].group {
                group_lag[g] += self.lag_at(i, t);
            }
        }
        for (g, lag) in group_lag.into_iter().enumerate() {
            self.group_max_abs_lag[g] = self.group_max_abs_lag[g].max(lag.abs());
        }
    }

    /// Brings GPS and lag sampling up to time `t` (exclusive of changes made at `t`).
    fn advance(&mut self, t: u64) {
        while self.next_sample <= t && !self.group_weights.is_empty() {
            if let Some(d) = self.gps_dirty {
                if d < self.next_sample {
                    self.recompute_gps(d);
                    self.gps_dirty = None;
                }
            }
            self.sample(self.next_sample);
            self.next_sample += self.sample_interval;
        }
        if let Some(d) = self.gps_dirty {
            if d < t {
                self.recompute_gps(d);
                self.gps_dirty = None;
            }
        }
    }

    fn set_runnable(&mut self, slot: Slot, runnable: bool, t: u64) {
        let s = self.slots[slot as usize].as_mut().expect("unknown slot");
        if s.runnable == runnable {
            return;
        }
        s.runnable = runnable;
        let owner = s.owner;
        if matches!(owner, Owner::Task { .. }) {
            return;
        }
        let e = self.entity_of(owner);
        if runnable {
            self.entities[e].runnable += 1;
            self.total_runnable += 1;
        } else {
            self.entities[e].runnable -= 1;
            self.total_runnable -= 1;
        }
        self.gps_changed.push(e);
        self.gps_dirty = Some(t);
    }

    fn close_interval(&mut self, slot: Slot, t: Nanos) {
        let s = self.slots[slot as usize].as_mut().expect("unknown slot");
        let Some((_, since)) = s.running.take() else {
            return;
        };
        let ran = (t - since).0;
        let owner = s.owner;
        let e = self.entity_of(owner);
        self.touch(e, t.0);
        let ent = &mut self.entities[e];
        ent.cpu += ran;
        ent.running -= 1;
        ent.since_sum -= since.0;
        self.busy_ns += ran;
        if let Some(i) = self.thread_index(owner) {
            self.threads[i].cpu += ran;
        }
    }

    /// Ends the fold at time `end` (the window is `[0, end]`) and builds the report.
    pub fn finish(mut self, end: Nanos) -> Report {
        let end = end.max(self.last_t);
        // Close intervals still open (engines normally deschedule at the horizon).
        for slot in 0..self.slots.len() {
            if self.slots[slot].is_some_and(|s| s.running.is_some()) {
                self.close_interval(slot as Slot, end);
            }
        }
        self.advance(end.0);
        if let Some(d) = self.gps_dirty.take() {
            self.recompute_gps(d);
        }
        self.sample(end.0);
        for i in 0..self.entities.len() {
            self.touch(i, end.0);
        }
        // Settle GPS up to the end: `gps_settled` only counts up to the last change of the
        // runnable set, and the shares below read it.
        for e in &mut self.entities {
            e.gps_settled = e.ideal_at(end.0);
            e.gps_since = end.0;
        }
        let window = end.0.max(1);
        let capacity = (self.cores as u64 * window) as f64;

        let mut threads = Vec::new();
        let mut proc_wait = vec![(0u64, 0u64, 0u64); self.process_names.len()];
        let (mut sum_wait, mut sum_turn, mut sum_resp, mut n_thr, mut n_resp) = (0, 0, 0, 0, 0);
        let mut thread_migrations = 0;
        for (p, name) in self.process_names.iter().enumerate() {
            let base = self.process_thread_base[p];
            let count = self.entities[p].threads as usize;
            for k in 0..count {
                let ts = &self.threads[base + k];
                let Some(arrival) = ts.arrival else {
                    continue;
                };
                let done = ts.finish.unwrap_or(end);
                let turnaround = (done - arrival).0;
                let blocked = ts.blocked + ts.blocked_since.map_or(0, |b| (done - b).0);
                let waiting = ts
                    .measured_waiting
                    .unwrap_or_else(|| turnaround.saturating_sub(ts.cpu + blocked));
                let response = ts.start.map(|s| (s - arrival).0);
                sum_wait += waiting;
                sum_turn += turnaround;
                n_thr += 1;
                if let Some(r) = response {
                    sum_resp += r;
                    n_resp += 1;
                }
                proc_wait[p].0 += waiting;
                proc_wait[p].1 += turnaround;
                proc_wait[p].2 += 1;
                thread_migrations += ts.migrations;
                threads.push(ThreadReport {
                    name: if count == 1 {
                        name.clone()
                    } else {
                        format!("{name}.{k}")
                    },
                    process: name.clone(),
                    arrival_ns: arrival.0,
                    start_ns: ts.start.map(|s| s.0),
                    finish_ns: ts.finish.map(|s| s.0),
                    cpu_ns: ts.cpu,
                    waiting_ns: waiting,
                    turnaround_ns: turnaround,
                    response_ns: response,
                    migrations: ts.migrations,
                    context_switches: ts.switches,
                    jobs: None,
                    deadline_misses: None,
                    max_response_ns: None,
                });
            }
        }
        let _ = thread_migrations;
        let np = self.process_names.len();
        let mut misses = 0;
        let mut jobs = 0;
        // Measured task counts replace the traced ones (there are none to replace).
        let any_measured = self.measured_tasks.iter().any(Option::is_some);
        let all_cpu_measured = any_measured
            && self
                .measured_tasks
                .iter()
                .all(|m| m.is_some_and(|m| m.cpu_ns.is_some()));
        for (k, m) in self.measured_tasks.iter().enumerate() {
            let Some(m) = m else { continue };
            self.tasks[k].migrations = m.migrations;
            self.tasks[k].switches = m.context_switches;
            if let Some(cpu) = m.cpu_ns {
                self.entities[np + k].cpu = cpu;
                self.busy_ns += cpu;
            }
        }
        for (k, ts) in self.tasks.iter_mut().enumerate() {
            // Jobs still open at the end whose deadline has passed are misses too.
            let late = ts
                .open
                .values()
                .filter(|(_, d)| misses_deadline(*d, None, end))
                .count() as u64;
            ts.misses += late;
            misses += ts.misses;
            jobs += ts.jobs;
            let e = &self.entities[np + k];
            threads.push(ThreadReport {
                name: e.name.clone(),
                process: e.name.clone(),
                arrival_ns: ts.first_release.map_or(0, |r| r.0),
                start_ns: None,
                finish_ns: None,
                cpu_ns: e.cpu,
                waiting_ns: 0,
                turnaround_ns: 0,
                response_ns: None,
                migrations: ts.migrations,
                context_switches: ts.switches,
                jobs: Some(ts.jobs),
                deadline_misses: Some(ts.misses),
                max_response_ns: Some(ts.max_response),
            });
        }

        let task_utilisation = &self.task_utilisation;
        let ideal_of = |i: usize, e: &Entity| {
            if i < np {
                e.gps_settled
            } else {
                task_utilisation[i - np] * window as f64
            }
        };
        let job_cpu: u64 = self.entities.iter().map(|e| e.cpu).sum();
        let job_ideal: f64 = self
            .entities
            .iter()
            .enumerate()
            .map(|(i, e)| ideal_of(i, e))
            .sum();
        let frac = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
        let share_of = |i: usize, e: &Entity, wait: (u64, u64, u64)| -> ShareReport {
            let ideal = ideal_of(i, e);
            ShareReport {
                name: e.name.clone(),
                threads: e.threads,
                cpu_ns: e.cpu,
                share: e.cpu as f64 / capacity,
                ideal_share: ideal / capacity,
                job_share: frac(e.cpu as f64, job_cpu as f64),
                ideal_job_share: frac(ideal, job_ideal),
                lag_ns: (ideal - e.cpu as f64).round() as i64,
                max_abs_lag_ns: e.max_abs_lag.round() as u64,
                avg_waiting_ns: wait.0.checked_div(wait.2).unwrap_or(0),
                avg_turnaround_ns: wait.1.checked_div(wait.2).unwrap_or(0),
                work_done: e.work_done,
                work_rate: e.work_done.map(|w| w as f64 / (window as f64 / 1e9)),
            }
        };
        let mut processes: Vec<ShareReport> = self
            .entities
            .iter()
            .enumerate()
            .map(|(i, e)| share_of(i, e, if i < np { proc_wait[i] } else { (0, 0, 0) }))
            .collect();
        // A measured task's lag is known at the end only; unmeasured CPU means no lag at all.
        if any_measured {
            for p in processes.iter_mut().skip(np) {
                if all_cpu_measured {
                    p.max_abs_lag_ns = p.lag_ns.unsigned_abs();
                } else {
                    (p.lag_ns, p.max_abs_lag_ns) = (0, 0);
                }
            }
        }
        let groups: Vec<ShareReport> = (0..self.group_names.len())
            .map(|g| {
                let members: Vec<usize> = (0..np)
                    .filter(|&i| self.entities[i].group == Some(g))
                    .collect();
                let cpu: u64 = members.iter().map(|&i| self.entities[i].cpu).sum();
                let ideal: f64 = members.iter().map(|&i| self.entities[i].gps_settled).sum();
                let wait = members.iter().fold((0, 0, 0), |a, &i| {
                    (
                        a.0 + proc_wait[i].0,
                        a.1 + proc_wait[i].1,
                        a.2 + proc_wait[i].2,
                    )
                });
                ShareReport {
                    name: self.group_names[g].clone(),
                    threads: members.iter().map(|&i| self.entities[i].threads).sum(),
                    cpu_ns: cpu,
                    share: cpu as f64 / capacity,
                    ideal_share: ideal / capacity,
                    job_share: frac(cpu as f64, job_cpu as f64),
                    ideal_job_share: frac(ideal, job_ideal),
                    lag_ns: (ideal - cpu as f64).round() as i64,
                    max_abs_lag_ns: self.group_max_abs_lag[g].round() as u64,
                    avg_waiting_ns: wait.0.checked_div(wait.2).unwrap_or(0),
                    avg_turnaround_ns: wait.1.checked_div(wait.2).unwrap_or(0),
                    work_done: None,
                    work_rate: None,
                }
            })
            .collect();
        let fair: Vec<&ShareReport> = processes.iter().take(np).collect();
        let max_abs_share_error = fair
            .iter()
            .map(|p| (p.share - p.ideal_share).abs())
            .fold(0.0, f64::max);
        let max_abs_job_share_error = fair
            .iter()
            .map(|p| (p.job_share - p.ideal_job_share).abs())
            .fold(0.0, f64::max);
        let pct: Vec<f64> = fair
            .iter()
            .filter(|p| p.ideal_share > 0.0)
            .map(|p| (p.share - p.ideal_share).abs() / p.ideal_share * 100.0)
            .collect();
        let mean_abs_pct_error = if pct.is_empty() {
            0.0
        } else {
            pct.iter().sum::<f64>() / pct.len() as f64
        };
        let makespan = self
            .threads
            .iter()
            .filter_map(|t| t.finish)
            .max()
            .unwrap_or(Nanos::ZERO)
            .max(
                if self.task_count > 0
                    || self
                        .threads
                        .iter()
                        .any(|t| t.arrival.is_some() && t.finish.is_none())
                {
                    end
                } else {
                    Nanos::ZERO
                },
            );
        let div = |a: u64, n: u64| a.checked_div(n).unwrap_or(0);
        Report {
            engine: self.engine,
            policy: self.policy,
            scenario: self.scenario,
            cores: self.cores,
            window_ns: end.0,
            summary: Summary {
                avg_waiting_ns: div(sum_wait, n_thr),
                avg_turnaround_ns: div(sum_turn, n_thr),
                avg_response_ns: div(sum_resp, n_resp),
                context_switches: self.measured_totals.map_or(self.switches, |m| m.0),
                dispatches: self.dispatches,
                preemptions: self.preemptions,
                migrations: self.measured_totals.map_or(self.migrations, |m| m.1),
                deadline_misses: misses,
                jobs,
                max_abs_share_error,
                max_abs_job_share_error,
                job_cpu_ns: job_cpu,
                mean_abs_pct_error,
                max_abs_lag_ns: processes
                    .iter()
                    .take(np)
                    .map(|p| p.max_abs_lag_ns)
                    .max()
                    .unwrap_or(0),
                makespan_ns: makespan.0,
                utilisation: self.busy_ns as f64 / capacity,
            },
            threads,
            processes,
            groups,
            cpus: None,
            warnings: Vec::new(),
        }
    }
}

impl TraceSink for Metrics {
    fn record(&mut self, event: &Event) {
        let t = event.time();
        debug_assert!(t >= self.last_t, "trace time went backwards: {event:?}");
        self.last_t = t;
        self.advance(t.0);
        match *event {
            Event::Arrive { t, slot, owner } => {
                let i = slot as usize;
                if self.slots.len() <= i {
                    self.slots.resize(i + 1, None);
                }
                self.generation += 1;
                self.slots[i] = Some(SlotState {
                    owner,
                    generation: self.generation,
                    running: None,
                    last_core: None,
                    runnable: false,
                });
                if let Some(ti) = self.thread_index(owner) {
                    self.threads[ti].arrival = Some(t);
                }
                self.set_runnable(slot, true, t.0);
            }
            Event::Dispatch { t, core, slot } => {
                let s = self.slots[slot as usize]
                    .as_mut()
                    .expect("dispatch of unknown slot");
                debug_assert!(s.running.is_none(), "thread dispatched twice: {event:?}");
                s.running = Some((core, t));
                let key = (slot, s.generation);
                let owner = s.owner;
                self.dispatches += 1;
                // Core numbers are the engine's: a real run's job CPUs may be `1-3` while
                // `cores` (the capacity) is 3.
                if core >= self.core_last.len() {
                    self.core_last.resize(core + 1, None);
                }
                if let Some(prev) = self.core_last[core] {
                    if prev != key {
                        self.switches += 1;
                    }
                }
                self.core_last[core] = Some(key);
                let e = self.entity_of(owner);
                self.touch(e, t.0);
                self.entities[e].running += 1;
                self.entities[e].since_sum += t.0;
                if let Some(ti) = self.thread_index(owner) {
                    let ts = &mut self.threads[ti];
                    if ts.start.is_none() {
                        ts.start = Some(t);
                    }
                }
            }
            Event::Deschedule {
                t, slot, reason, ..
            } => {
                self.close_interval(slot, t);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                if matches!(reason, Reason::Preempted | Reason::Expired) {
                    self.preemptions += 1;
                }
                if !matches!(reason, Reason::Finished | Reason::Horizon) {
                    match owner {
                        Owner::Task { task, .. } => self.tasks[task].switches += 1,
                        _ => {
                            if let Some(ti) = self.thread_index(owner) {
                                self.threads[ti].switches += 1;
                            }
                        }
                    }
                }
            }
            Event::Migrate { slot, to, .. } => {
                self.migrations += 1;
                let s = self.slots[slot as usize].as_mut().expect("unknown slot");
                s.last_core = Some(to);
                let owner = s.owner;
                match owner {
                    Owner::Task { task, .. } => self.tasks[task].migrations += 1,
                    _ => {
                        if let Some(ti) = self.thread_index(owner) {
                            self.threads[ti].migrations += 1;
                        }
                    }
                }
            }
            Event::Block { t, slot } => {
                self.set_runnable(slot, false, t.0);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                self.note_blocked(owner, true, t);
            }
            Event::Wake { t, slot } => {
                self.set_runnable(slot, true, t.0);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                self.note_blocked(owner, false, t);
            }
            Event::Finish { t, slot } => {
                self.close_interval(slot, t);
                self.set_runnable(slot, false, t.0);
                let owner = self.slots[slot as usize].expect("unknown slot").owner;
                self.note_blocked(owner, false, t);
                if let Some(ti) = self.thread_index(owner) {
                    self.threads[ti].finish = Some(t);
                }
            }
            Event::JobRelease {
                t,
                task,
                job,
                deadline,
            } => {
                let ts = &mut self.tasks[task];
                ts.jobs += 1;
                ts.first_release.get_or_insert(t);
                ts.open.insert(job, (t, deadline));
            }
            Event::JobFinish { t, task, job } => {
                let ts = &mut self.tasks[task];
                if let Some((release, deadline)) = ts.open.remove(&job) {
                    ts.max_response = ts.max_response.max((t - release).0);
                    if misses_deadline(deadline, Some(t), t) {
                        ts.misses += 1;
                    }
                }
            }
            // The user's weight is the GPS reference: a tenant weight change moves it.
            Event::GroupWeightChange { t, group, weight } => {
                self.group_weights[group] = weight as f64;
                self.gps_dirty = Some(t.0);
            }
            // Controllers' per-thread weights are means to the reference, not the reference.
            Event::WeightChange { .. } | Event::Mark { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_met_at_the_instant_and_missed_after_or_unfinished_before_the_end() {
        let (d, end) = (Nanos(100), Nanos(200));
        assert!(!misses_deadline(d, Some(Nanos(100)), end));
        assert!(misses_deadline(d, Some(Nanos(101)), end));
        assert!(misses_deadline(d, None, end));
        assert!(!misses_deadline(Nanos(200), None, end));
        assert!(!misses_deadline(Nanos(300), None, end));
    }

    /// Lag is piecewise linear; its peak between samples must not be missed.
    #[test]
    fn max_abs_lag_is_exact_between_samples() {
        let s = Scenario::parse(
            "t.toml",
            "cores = 1\n[run]\nhorizon = \"9ms\"\n[[process]]\nname = \"A\"\n[[process]]\nname = \"B\"\n",
        )
        .unwrap();
        let mut m = Metrics::new(&s, "test", 1);
        let ms = Nanos::from_ms;
        let a = Owner::Process {
            process: 0,
            thread: 0,
        };
        let b = Owner::Process {
            process: 1,
            thread: 0,
        };
        let run = |m: &mut Metrics, slot, from, to| {
            m.record(&Event::Dispatch {
                t: from,
                core: 0,
                slot,
            });
            m.record(&Event::Deschedule {
                t: to,
                core: 0,
                slot,
                reason: Reason::Expired,
            });
        };
        m.record(&Event::Arrive {
            t: ms(0),
            slot: 0,
            owner: a,
        });
        m.record(&Event::Arrive {
            t: ms(0),
            slot: 1,
            owner: b,
        });
        run(&mut m, 0, ms(0), ms(4));
        run(&mut m, 1, ms(4), ms(8));
        run(&mut m, 0, ms(8), ms(9));
        let r = m.finish(ms(9));
        // At 4 ms: A has 4 ms against GPS's 2 ms, B 0 against 2 ms.
        assert_eq!(r.processes[0].max_abs_lag_ns, 2_000_000);
        assert_eq!(r.processes[1].max_abs_lag_ns, 2_000_000);
        assert_eq!(r.processes[0].lag_ns, -500_000);
        assert_eq!(r.summary.max_abs_lag_ns, 2_000_000);
    }

    /// Sleep is not waiting: a thread that runs 10 ms, sleeps 20 ms and runs 10 ms beside an
    /// idle core waited 0; one that shares its core the whole time waited what the other ran.
    /// Job shares are of the job's CPU time, machine shares of cores x window.
    #[test]
    fn waiting_excludes_blocked_time_and_job_shares_split_the_job() {
        let s = Scenario::parse(
            "t.toml",
            "cores = 2\n[run]\nhorizon = \"40ms\"\n[[process]]\nname = \"A\"\n[[process]]\nname = \"B\"\n",
        )
        .unwrap();
        let mut m = Metrics::new(&s, "test", 2);
        let ms = Nanos::from_ms;
        let owner = |process| Owner::Process { process, thread: 0 };
        let mut ev = vec![
            Event::Arrive {
                t: ms(0),
                slot: 0,
                owner: owner(0),
            },
            Event::Arrive {
                t: ms(0),
                slot: 1,
                owner: owner(1),
            },
            Event::Dispatch {
                t: ms(0),
                core: 0,
                slot: 0,
            },
            Event::Deschedule {
                t: ms(10),
                core: 0,
                slot: 0,
                reason: Reason::Blocked,
            },
            Event::Block { t: ms(10), slot: 0 },
            Event::Dispatch {
                t: ms(10),
                core: 0,
                slot: 1,
            },
            Event::Deschedule {
                t: ms(20),
                core: 0,
                slot: 1,
                reason: Reason::Blocked,
            },
            Event::Block { t: ms(20), slot: 1 },
            Event::Wake { t: ms(30), slot: 0 },
            Event::Dispatch {
                t: ms(30),
                core: 0,
                slot: 0,
            },
            Event::Finish { t: ms(40), slot: 0 },
        ];
        ev.sort_by_key(|e| e.time());
        for e in &ev {
            m.record(e);
        }
        let mut m2 = Metrics::new(&s, "test", 2);
        for e in &ev {
            m2.record(e);
        }
        m2.measured_waiting(1, 0, 3_000_000);
        let r = m.finish(ms(40));
        // A: turnaround 40, cpu 20, blocked 20 -> waiting 0.
        assert_eq!(r.threads[0].waiting_ns, 0);
        // B: waited 10 ms for the core (0-10), ran 10, then slept to the end: waiting 10.
        assert_eq!(r.threads[1].waiting_ns, ms(10).0);
        // 30 ms of job CPU: A has 2/3 of the job, 20 / (2 x 40) = 1/4 of the machine.
        assert_eq!(r.summary.job_cpu_ns, ms(30).0);
        assert!((r.processes[0].job_share - 2.0 / 3.0).abs() < 1e-9);
        assert!((r.processes[0].share - 0.25).abs() < 1e-9);
        let sum: f64 = r.processes.iter().map(|p| p.ideal_job_share).sum();
        assert!((sum - 1.0).abs() < 1e-9, "ideal job shares sum to {sum}");
        // The engine's own measurement, where given, is the figure.
        let r2 = m2.finish(ms(40));
        assert_eq!(r2.threads[1].waiting_ns, 3_000_000);
        assert_eq!(r2.threads[0].waiting_ns, 0);
    }
}
