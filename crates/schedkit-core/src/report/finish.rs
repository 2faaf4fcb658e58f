//! The end of the fold: [`Metrics::finish`] builds the [`Report`].
//!
//! `finish` is a sequence of named steps (close the window, the thread rows, the measured
//! task counts, the task rows, the share tables, the summary's errors and makespan), each
//! reading what the fold kept; the order of the steps matters where one writes what a later
//! one reads (measured task CPU time goes into the entities before any share is computed).

use super::*;

/// A process's waiting and turnaround summed over its threads, and how many threads.
#[derive(Clone, Copy, Default)]
struct Waits {
    waiting: u64,
    turnaround: u64,
    threads: u64,
}

impl Waits {
    fn add(&mut self, other: Waits) {
        self.waiting += other.waiting;
        self.turnaround += other.turnaround;
        self.threads += other.threads;
    }
}

/// The thread rows and what the summary's averages need from them.
struct ThreadRows {
    rows: Vec<ThreadReport>,
    /// Per process, in process order.
    waits: Vec<Waits>,
    sum_wait: u64,
    sum_turn: u64,
    sum_resp: u64,
    /// Threads that arrived, and those of them that started.
    n_thr: u64,
    n_resp: u64,
}

/// Which tasks an engine measured instead of tracing ([`Metrics::measured_task`]).
#[derive(Clone, Copy)]
struct Measured {
    any: bool,
    /// Every task, with its CPU time.
    all_cpu: bool,
}

/// What every share row is measured against.
struct ShareBase {
    /// The window in ns (at least 1).
    window: u64,
    /// Core time in the window: cores x window.
    capacity: f64,
    /// The job's CPU time and its GPS ideal, over every process and task.
    job_cpu: u64,
    job_ideal: f64,
}

impl ShareBase {
    /// One row of `processes` or `groups` from its totals; `work_*` are left to the caller.
    fn row(
        &self,
        name: String,
        threads: u64,
        cpu: u64,
        ideal: f64,
        max_abs_lag: f64,
        wait: Waits,
    ) -> ShareReport {
        let frac = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
        ShareReport {
            name,
            threads,
            cpu_ns: cpu,
            share: cpu as f64 / self.capacity,
            ideal_share: ideal / self.capacity,
            job_share: frac(cpu as f64, self.job_cpu as f64),
            ideal_job_share: frac(ideal, self.job_ideal),
            lag_ns: (ideal - cpu as f64).round() as i64,
            max_abs_lag_ns: max_abs_lag.round() as u64,
            avg_waiting_ns: wait.waiting.checked_div(wait.threads).unwrap_or(0),
            avg_turnaround_ns: wait.turnaround.checked_div(wait.threads).unwrap_or(0),
            work_done: None,
            work_rate: None,
            cpu_source: None,
            sampled_cpu_ns: None,
        }
    }
}

/// The summary's fairness errors over the processes (tasks left out).
struct ShareErrors {
    max_abs_share_error: f64,
    max_abs_job_share_error: f64,
    mean_abs_pct_error: f64,
    max_abs_lag_ns: u64,
}

impl Metrics {
    /// Ends the fold at time `end` (the window is `[0, end]`) and builds the report.
    pub fn finish(mut self, end: Nanos) -> Report {
        let end = self.close_window(end);
        let window = end.0.max(1);
        let capacity = (self.cores as u64 * window) as f64;

        let ThreadRows {
            rows: mut threads,
            waits,
            sum_wait,
            sum_turn,
            sum_resp,
            n_thr,
            n_resp,
        } = self.thread_rows(end);
        let measured = self.apply_measured_tasks();
        let sampled = self.apply_measured_processes();
        let (misses, jobs) = self.task_rows(end, &mut threads);

        let base = self.share_base(window, capacity);
        let processes = self.process_shares(&base, &waits, measured, &sampled);
        let groups = self.group_shares(&base, &waits);
        let errors = share_errors(&processes[..self.process_names.len()]);
        let makespan = self.makespan(end);
        let div = |a: u64, n: u64| a.checked_div(n).unwrap_or(0);
        let summary = Summary {
            avg_waiting_ns: div(sum_wait, n_thr),
            avg_turnaround_ns: div(sum_turn, n_thr),
            avg_response_ns: div(sum_resp, n_resp),
            context_switches: self.measured_totals.map_or(self.switches, |m| m.0),
            dispatches: self.dispatches,
            preemptions: self.preemptions,
            migrations: self.measured_totals.map_or(self.migrations, |m| m.1),
            deadline_misses: misses,
            jobs,
            max_abs_share_error: errors.max_abs_share_error,
            max_abs_job_share_error: errors.max_abs_job_share_error,
            job_cpu_ns: base.job_cpu,
            mean_abs_pct_error: errors.mean_abs_pct_error,
            max_abs_lag_ns: errors.max_abs_lag_ns,
            makespan_ns: makespan.0,
            utilisation: self.busy_ns as f64 / capacity,
        };
        let mut warnings = self.warnings;
        if let Some(rule) = self.frame_rule.take() {
            warnings.extend(rule(&summary));
        }
        Report {
            engine: self.engine,
            policy: self.policy,
            scenario: self.scenario,
            cores: self.cores,
            window_ns: end.0,
            summary,
            threads,
            processes,
            groups,
            cpus: self.cpus,
            warnings,
        }
    }

    /// Brings the fold to `end` (at least the last event): closes the run intervals still
    /// open, advances GPS and the lag samples, and settles every entity's ideal at `end`.
    /// Returns the end used.
    fn close_window(&mut self, end: Nanos) -> Nanos {
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
        end
    }

    /// One row per process thread that arrived (in process, then thread order), with the
    /// per-process waits and the sums behind the summary's averages.
    fn thread_rows(&self, end: Nanos) -> ThreadRows {
        let mut out = ThreadRows {
            rows: Vec::new(),
            waits: vec![Waits::default(); self.process_names.len()],
            sum_wait: 0,
            sum_turn: 0,
            sum_resp: 0,
            n_thr: 0,
            n_resp: 0,
        };
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
                out.sum_wait += waiting;
                out.sum_turn += turnaround;
                out.n_thr += 1;
                if let Some(r) = response {
                    out.sum_resp += r;
                    out.n_resp += 1;
                }
                out.waits[p].add(Waits {
                    waiting,
                    turnaround,
                    threads: 1,
                });
                out.rows.push(ThreadReport {
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
        out
    }

    /// Measured task counts replace the traced ones (there are none to replace); a
    /// measured CPU time becomes the task's and counts as busy time.
    fn apply_measured_tasks(&mut self) -> Measured {
        let np = self.process_names.len();
        let any = self.measured_tasks.iter().any(Option::is_some);
        let all_cpu = any
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
        Measured { any, all_cpu }
    }

    /// A process's CPU time counted whole by the engine replaces the traced one before any
    /// share is computed (busy time follows). Returns each process's traced CPU time where it
    /// was replaced.
    fn apply_measured_processes(&mut self) -> Vec<Option<u64>> {
        let mut sampled = vec![None; self.process_names.len()];
        for (p, m) in self.measured_process_cpu.iter().enumerate() {
            let Some((cpu, _)) = m else { continue };
            let traced = std::mem::replace(&mut self.entities[p].cpu, *cpu);
            self.busy_ns = (self.busy_ns + cpu).saturating_sub(traced);
            sampled[p] = Some(traced);
        }
        sampled
    }

    /// Where process `p`'s CPU time came from (`None`: the simulator).
    fn cpu_source_of(&self, p: usize) -> Option<String> {
        match self.measured_process_cpu.get(p) {
            Some(Some((_, source))) => Some(source.clone()),
            _ => self.traced_cpu_source.clone(),
        }
    }

    /// One row per real-time task, after the process threads; counts the jobs still open
    /// at `end` past their deadline as misses. Returns (deadline misses, jobs).
    fn task_rows(&mut self, end: Nanos, threads: &mut Vec<ThreadReport>) -> (u64, u64) {
        let np = self.process_names.len();
        let (mut misses, mut jobs) = (0, 0);
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
        (misses, jobs)
    }

    /// Entity `i`'s ideal CPU time in the window: GPS for a process, utilisation x window
    /// for a task.
    fn ideal_of(&self, i: usize, window: u64) -> f64 {
        let np = self.process_names.len();
        if i < np {
            self.entities[i].gps_settled
        } else {
            self.task_utilisation[i - np] * window as f64
        }
    }

    fn share_base(&self, window: u64, capacity: f64) -> ShareBase {
        ShareBase {
            window,
            capacity,
            job_cpu: self.entities.iter().map(|e| e.cpu).sum(),
            job_ideal: (0..self.entities.len())
                .map(|i| self.ideal_of(i, window))
                .sum(),
        }
    }

    /// The `processes` table: every process, then every task.
    fn process_shares(
        &self,
        base: &ShareBase,
        waits: &[Waits],
        measured: Measured,
        sampled: &[Option<u64>],
    ) -> Vec<ShareReport> {
        let np = self.process_names.len();
        let mut processes: Vec<ShareReport> = self
            .entities
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let wait = if i < np { waits[i] } else { Waits::default() };
                let ideal = self.ideal_of(i, base.window);
                let row = base.row(e.name.clone(), e.threads, e.cpu, ideal, e.max_abs_lag, wait);
                let sampled = sampled.get(i).copied().flatten();
                ShareReport {
                    work_done: e.work_done,
                    work_rate: e.work_done.map(|w| w as f64 / (base.window as f64 / 1e9)),
                    // A count known at the end only: its lag over time is not known.
                    max_abs_lag_ns: if sampled.is_some() {
                        row.lag_ns.unsigned_abs()
                    } else {
                        row.max_abs_lag_ns
                    },
                    cpu_source: if i < np { self.cpu_source_of(i) } else { None },
                    sampled_cpu_ns: sampled,
                    ..row
                }
            })
            .collect();
        // A measured task's lag is known at the end only; unmeasured CPU means no lag at all.
        if measured.any {
            for p in processes.iter_mut().skip(np) {
                if measured.all_cpu {
                    p.max_abs_lag_ns = p.lag_ns.unsigned_abs();
                } else {
                    (p.lag_ns, p.max_abs_lag_ns) = (0, 0);
                }
            }
        }
        processes
    }

    /// The `groups` table: each group's processes summed (tasks are in no group).
    fn group_shares(&self, base: &ShareBase, waits: &[Waits]) -> Vec<ShareReport> {
        let np = self.process_names.len();
        (0..self.group_names.len())
            .map(|g| {
                let members: Vec<usize> = (0..np)
                    .filter(|&i| self.entities[i].group == Some(g))
                    .collect();
                let cpu: u64 = members.iter().map(|&i| self.entities[i].cpu).sum();
                let ideal: f64 = members.iter().map(|&i| self.entities[i].gps_settled).sum();
                let mut wait = Waits::default();
                for &i in &members {
                    wait.add(waits[i]);
                }
                // A group's source is its members' when they agree.
                let mut sources = members.iter().map(|&i| self.cpu_source_of(i));
                let first = sources.next().flatten();
                let cpu_source = if sources.all(|s| s == first) {
                    first
                } else {
                    Some("mixed: some members kernel-counted, some sampled".into())
                };
                let row = base.row(
                    self.group_names[g].clone(),
                    members.iter().map(|&i| self.entities[i].threads).sum(),
                    cpu,
                    ideal,
                    self.group_max_abs_lag[g],
                    wait,
                );
                // Members counted whole at the end only: the group's lag over time is not
                // known either.
                let all_measured = !members.is_empty()
                    && members
                        .iter()
                        .all(|&i| self.measured_process_cpu[i].is_some());
                ShareReport {
                    cpu_source,
                    max_abs_lag_ns: if all_measured {
                        row.lag_ns.unsigned_abs()
                    } else {
                        row.max_abs_lag_ns
                    },
                    ..row
                }
            })
            .collect()
    }

    /// The last finish; the end itself when tasks ran or a thread that arrived never
    /// finished.
    fn makespan(&self, end: Nanos) -> Nanos {
        let unfinished = self
            .threads
            .iter()
            .any(|t| t.arrival.is_some() && t.finish.is_none());
        self.threads
            .iter()
            .filter_map(|t| t.finish)
            .max()
            .unwrap_or(Nanos::ZERO)
            .max(if self.task_count > 0 || unfinished {
                end
            } else {
                Nanos::ZERO
            })
    }
}

/// The summary's fairness errors over `fair`, the processes' rows.
fn share_errors(fair: &[ShareReport]) -> ShareErrors {
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
    ShareErrors {
        max_abs_share_error,
        max_abs_job_share_error,
        mean_abs_pct_error,
        max_abs_lag_ns: fair.iter().map(|p| p.max_abs_lag_ns).max().unwrap_or(0),
    }
}
