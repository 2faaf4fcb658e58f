//! The end of the fold: [`Metrics::finish`] builds the [`Report`].

use super::*;

impl Metrics {
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
