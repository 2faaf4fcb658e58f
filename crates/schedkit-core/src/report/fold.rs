//! The fold's bookkeeping: building the sink, measured figures from the real engine, GPS
//! and lag, runnable and running intervals.

use super::*;
use crate::gps::water_fill;

impl Metrics {
    /// Default lag sampling period (SPEC: at least every 10 ms).
    pub const SAMPLE_INTERVAL: Nanos = Nanos::from_ms(10);

    pub fn new(scenario: &Scenario, engine: &str, cores: usize) -> Metrics {
        let mut process_thread_base = Vec::new();
        let mut n = 0;
        for p in scenario.processes() {
            process_thread_base.push(n);
            n += p.threads() as usize;
        }
        // Proportional-share policies state the user's intent in tickets, the others in
        // weights (nice): the GPS reference follows whichever the policy honours.
        let by_tickets = matches!(
            scenario.policy().name(),
            crate::scenario::PolicyName::Lottery | crate::scenario::PolicyName::Stride
        );
        let mut entities: Vec<Entity> = scenario
            .processes()
            .iter()
            .map(|p| Entity {
                name: p.name().to_string(),
                group: p.group(),
                weight: if by_tickets {
                    p.tickets() as f64
                } else {
                    p.weight() as f64
                },
                threads: p.threads() as u64,
                ..Entity::default()
            })
            .collect();
        // Real-time tasks are not part of the GPS reference (their "fair share" is their
        // utilisation, see `finish`); weight 0 keeps them out of water-filling.
        entities.extend(scenario.tasks().iter().map(|t| Entity {
            name: t.name().to_string(),
            weight: 0.0,
            ..Entity::default()
        }));
        let task_utilisation = scenario.tasks().iter().map(|t| t.utilisation()).collect();
        // Sampling groups costs O(grouped processes); for very large scenarios the period
        // grows so that sampling stays a small fraction of the work (docs/metrics.md).
        let scale = (entities.len() as u64).div_ceil(1000).max(1);
        let sample_interval = Self::SAMPLE_INTERVAL.0 * scale;
        Metrics {
            engine: engine.to_string(),
            policy: scenario.policy().name().to_string(),
            scenario: scenario.file().to_string(),
            cores,
            process_names: scenario
                .processes()
                .iter()
                .map(|p| p.name().to_string())
                .collect(),
            process_thread_base,
            threads: vec![ThreadStats::default(); n],
            tasks: vec![TaskStats::default(); scenario.tasks().len()],
            task_count: scenario.tasks().len(),
            task_utilisation,
            entities,
            group_names: scenario
                .groups()
                .iter()
                .map(|g| g.name().to_string())
                .collect(),
            group_weights: scenario
                .groups()
                .iter()
                .map(|g| g.weight() as f64)
                .collect(),
            group_max_abs_lag: vec![0.0; scenario.groups().len()],
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
            measured_tasks: vec![None; scenario.tasks().len()],
            measured_totals: None,
            cpus: None,
            warnings: Vec::new(),
            frame_rule: None,
            measured_process_cpu: vec![None; scenario.processes().len()],
            traced_cpu_source: None,
        }
    }

    /// Process `process`'s CPU time over the window as the engine counted it whole (the real
    /// engine: the kernel's per-cgroup accounting, which counts every task of the process,
    /// ended ones too), and `source`, in words. It becomes the process's `cpu_ns`, its shares
    /// and its lag; the traced figure stays beside it as `sampled_cpu_ns`. The count is known
    /// at the end only, so the process's `max_abs_lag_ns` is |lag| at the end, as for a
    /// measured task. The thread rows keep their traced CPU time.
    pub fn measured_process_cpu(&mut self, process: usize, cpu_ns: u64, source: &str) {
        if let Some(slot) = self.measured_process_cpu.get_mut(process) {
            *slot = Some((cpu_ns, source.to_string()));
        }
    }

    /// Names where the traced CPU time comes from (the real engine: its samples), so that
    /// every share row of a real run says its source ([`ShareReport::cpu_source`]).
    pub fn traced_cpu_source(&mut self, source: &str) {
        self.traced_cpu_source = Some(source.to_string());
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

    /// The frame of a real run, stated by its engine before the fold ends: the CPUs the job
    /// could use (`0-1`, `2 worker(s)`) and where the run was not what the scenario asked
    /// (one sentence each). They enter the report as inputs, like the measured counts, so
    /// no engine edits a finished report.
    pub fn frame(&mut self, cpus: Option<String>, warnings: Vec<String>) {
        self.cpus = cpus;
        self.warnings = warnings;
    }

    /// [`Metrics::frame`] for warnings that depend on the fold's own totals: `rule` is
    /// given the finished summary when [`Metrics::finish`] builds the report, and what it
    /// returns follows the warnings given to [`Metrics::frame`]. The real engine's
    /// outside-load warning compares the machine's busy time with the job's CPU time this
    /// way, so that the report is built once and nothing edits it afterwards.
    pub fn frame_with(&mut self, cpus: Option<String>, rule: FrameRule) {
        self.cpus = cpus;
        self.frame_rule = Some(rule);
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
    pub(super) fn note_blocked(&mut self, owner: Owner, blocked: bool, t: Nanos) {
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

    pub(super) fn entity_of(&self, owner: Owner) -> usize {
        match owner {
            Owner::Process { process, .. } => process,
            Owner::Task { task, .. } => self.process_names.len() + task,
        }
    }

    pub(super) fn thread_index(&self, owner: Owner) -> Option<usize> {
        match owner {
            Owner::Process { process, thread } => {
                Some(self.process_thread_base[process] + thread as usize)
            }
            Owner::Task { .. } => None,
        }
    }

    /// Recomputes GPS rates after the set of runnable threads changed at time `at`.
    pub(super) fn recompute_gps(&mut self, at: u64) {
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
    pub(super) fn recompute_gps_full(&mut self, at: u64) {
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
    pub(super) fn lag_at(&self, i: usize, t: u64) -> f64 {
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
    pub(super) fn touch(&mut self, i: usize, t: u64) {
        let lag = self.lag_at(i, t).abs();
        let e = &mut self.entities[i];
        e.max_abs_lag = e.max_abs_lag.max(lag);
    }

    /// Samples group lags (a group's lag is the sum of its members', whose breakpoints do not
    /// coincide, so groups are sampled every `sample_interval` instead).
    pub(super) fn sample(&mut self, t: u64) {
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
    pub(super) fn advance(&mut self, t: u64) {
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

    pub(super) fn set_runnable(&mut self, slot: Slot, runnable: bool, t: u64) {
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

    pub(super) fn close_interval(&mut self, slot: Slot, t: Nanos) {
        let s = self.slots[slot as usize].as_mut().expect("unknown slot");
        let Some((_, since)) = s.running.take() else {
            return;
        };
        let owner = s.owner;
        let e = self.entity_of(owner);
        let ran = self.charge_entity(e, since, t);
        if let Some(i) = self.thread_index(owner) {
            self.threads[i].cpu += ran;
        }
    }

    /// Charges entity `e` (process or group) the interval `[since, t)` that one of its
    /// running threads just ended; the CPU time it ran. Shared by the event fold and the
    /// periodic engine's per-job path (`jobs.rs`).
    #[inline]
    pub(super) fn charge_entity(&mut self, e: usize, since: Nanos, t: Nanos) -> u64 {
        let ran = (t - since).0;
        self.touch(e, t.0);
        let ent = &mut self.entities[e];
        ent.cpu += ran;
        ent.running -= 1;
        ent.since_sum -= since.0;
        self.busy_ns += ran;
        ran
    }
}
