//! The fair-share engine's control socket: `schedkit ctl` requests (status, a group's weight)
//! answered between samples, and group weight changes (also the controller's).

use super::FairRun;
use crate::Result;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::Event;
use schedkit_core::Nanos;

impl FairRun {
    /// Answers the `schedkit ctl` requests the control socket's thread has passed on; never
    /// waits for a client (see [`crate::ctl`]). What went wrong on that thread since the last
    /// call (a failing accept, a class it could not leave) joins the run's `warnings`, so the
    /// report names it; what arrives after the last call reaches the binary through
    /// [`crate::ctl::take_unclaimed_warnings`] when the socket is dropped.
    pub(in crate::run) fn serve_ctl(
        &mut self,
        now: u64,
        scenario: &Scenario,
        events: &mut Vec<Event>,
        warnings: &mut Vec<String>,
    ) {
        let Some(mut srv) = self.ctl.take() else {
            return;
        };
        srv.poll(|req| self.handle(req, now, scenario, events));
        self.ctl_refused = srv.counts().refused;
        self.merge_ctl_warnings(srv.take_warning_counts(), warnings);
        self.ctl = Some(srv);
    }

    /// One line per distinct message over the whole run, its count kept up to date: a
    /// failing accept repeats every few milliseconds and is taken at every sample.
    fn merge_ctl_warnings(&mut self, new: Vec<(String, u64)>, warnings: &mut Vec<String>) {
        for (m, n) in new {
            match self.ctl_warnings.iter_mut().find(|(k, _)| *k == m) {
                Some((_, total)) => {
                    let old = crate::ctl::counted(&m, *total);
                    *total += n;
                    let line = crate::ctl::counted(&m, *total);
                    match warnings.iter_mut().find(|w| **w == old) {
                        Some(w) => *w = line,
                        None => warnings.push(line),
                    }
                }
                None => {
                    warnings.push(crate::ctl::counted(&m, n));
                    self.ctl_warnings.push((m, n));
                }
            }
        }
    }

    fn handle(
        &mut self,
        req: crate::ctl::Request,
        now: u64,
        scenario: &Scenario,
        events: &mut Vec<Event>,
    ) -> crate::ctl::Reply {
        use crate::ctl::{GroupStatus, Reply, Request, Status};
        match req {
            Request::Status => Reply {
                ok: true,
                error: None,
                message: None,
                status: Some(Status {
                    pid: std::process::id() as i32,
                    policy: self.policy.clone(),
                    period_ns: self.period,
                    elapsed_ns: now,
                    controller: self
                        .cgroups
                        .as_ref()
                        .map(|c| format!("{} at {}", c.controller().name(), c.parent().display()))
                        .unwrap_or_default(),
                    groups: scenario
                        .groups()
                        .iter()
                        .enumerate()
                        .map(|(g, sg)| GroupStatus {
                            name: sg.name().to_string(),
                            weight: self.group_weights[g],
                            kernel_value: self
                                .cgroups
                                .as_ref()
                                .and_then(|c| c.read_weight_value(*self.cg_of_group.get(g)?)),
                        })
                        .collect(),
                    changes: self.changes.clone(),
                }),
            },
            Request::SetWeight { group, weight } => {
                if let Err(m) = crate::ctl::check_weight(weight) {
                    return Reply::error(m);
                }
                let Some(g) = scenario.groups().iter().position(|sg| sg.name() == group) else {
                    let known: Vec<&str> = scenario.groups().iter().map(|g| g.name()).collect();
                    return Reply::error(format!(
                        "unknown group `{group}` (groups of this run: {})",
                        known.join(", ")
                    ));
                };
                match self.set_group_weight(g, weight, now, scenario, events) {
                    Ok(()) => Reply::done(format!(
                        "weight of group {group} set to {weight} at {}",
                        Nanos(now)
                    )),
                    Err(e) => Reply::error(e.to_string()),
                }
            }
        }
    }

    pub(super) fn set_group_weight(
        &mut self,
        g: usize,
        weight: u64,
        now: u64,
        scenario: &Scenario,
        events: &mut Vec<Event>,
    ) -> Result<()> {
        if let (Some(cg), Some(&i)) = (self.cgroups.as_mut(), self.cg_of_group.get(g)) {
            cg.set_weight(i, weight)?;
            // With the trim on, the group keeps its correction factor from the first moment.
            if let (true, Some(e)) = (
                self.trim.is_some(),
                self.trim_cgroup.iter().position(|&c| c == i),
            ) {
                cg.set_weight_trimmed(i, weight as f64 * self.trim_factor[e])?;
            }
        }
        self.group_weights[g] = weight;
        events.push(Event::GroupWeightChange {
            t: Nanos(now),
            group: g,
            weight,
        });
        self.changes.push(crate::ctl::WeightChange {
            t_ns: now,
            group: scenario.groups()[g].name().to_string(),
            weight,
        });
        Ok(())
    }
}
