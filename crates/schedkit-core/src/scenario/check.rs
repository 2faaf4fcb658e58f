//! The checks of the raw layer's values that serde cannot make.

use super::raw::{RawPhase, RawPolicy, RawProcess, RawScenario, RawTask, Val};
use super::{
    Class, GangOverheadSpec, Group, Locator, Phase, PolicyName, PolicySpec, Process, Region,
    Scenario, ScenarioError, Share, Task, Work,
};
use crate::time::{Bytes, Nanos};
use std::collections::HashSet;
use std::ops::Range;

/// The checks: raw values (from the text, or from a builder) to a valid [`Scenario`]. Every
/// scenario goes through here, so "valid" means one thing.
pub(super) fn build(loc: &Locator, raw: RawScenario) -> Result<Scenario, ScenarioError> {
    let cores = match &raw.cores {
        Some(c) if *c.get_ref() < 1 || *c.get_ref() > 1 << 20 => {
            return Err(loc.err(c.span(), "cores", "must be between 1 and 1048576"))
        }
        Some(c) => *c.get_ref() as usize,
        None => 1,
    };
    // Checked once the processes are known.
    let spawner = raw
        .policy
        .as_ref()
        .and_then(|p| p.get_ref().spawner.clone());
    let policy = match raw.policy {
        None => PolicySpec::new(PolicyName::Fcfs),
        Some(p) => {
            let span = p.span();
            parse_policy(loc, p.into_inner(), span, cores)?
        }
    };
    let horizon = match raw.run.and_then(|r| r.horizon) {
        Some(h) if h.get_ref().0 == 0 => {
            return Err(loc.err(h.span(), "run.horizon", "must be greater than zero"))
        }
        Some(h) => *h.get_ref(),
        None => Nanos::from_secs(10),
    };

    let mut groups = Vec::new();
    let mut group_names = HashSet::new();
    for g in &raw.group {
        let g = g.get_ref();
        check_name(loc, &g.name, "group.name", &mut group_names)?;
        let weight = match &g.weight {
            Some(w) => positive(loc, w, "group.weight")?,
            None => 1024,
        };
        groups.push(Group {
            name: g.name.get_ref().clone(),
            weight,
        });
    }

    // Processes and tasks share one namespace: both are rows of the report.
    let mut names = HashSet::with_capacity(raw.process.len() + raw.task.len());
    let mut processes = Vec::with_capacity(raw.process.len());
    for p in raw.process {
        processes.push(process(loc, p, &groups, cores, &mut names)?);
    }
    let mut tasks = Vec::with_capacity(raw.task.len());
    for t in raw.task {
        tasks.push(task(loc, t, cores, &mut names)?);
    }
    if let Some(s) = spawner.filter(|s| !processes.iter().any(|p| &p.name == s.get_ref())) {
        return Err(loc.err(
            s.span(),
            "policy.spawner",
            format!(
                "no process named \"{}\"{}",
                s.get_ref(),
                crate::validate::did_you_mean(
                    s.get_ref(),
                    processes.iter().map(|p| p.name.as_str())
                )
            ),
        ));
    }
    Ok(Scenario {
        file: loc.file.to_string(),
        cores,
        policy,
        horizon,
        processes,
        groups,
        tasks,
    })
}

/// One `[[process]]`; `names` is the namespace of processes and tasks.
fn process(
    loc: &Locator,
    p: Val<RawProcess>,
    groups: &[Group],
    cores: usize,
    names: &mut HashSet<String>,
) -> Result<Process, ScenarioError> {
    let entry_line = entry_line(loc, p.span(), p.get_ref().line);
    let p = p.into_inner();
    check_name(loc, &p.name, "process.name", names)?;
    let burst = match &p.burst {
        Some(b) if b.get_ref().0 == 0 => {
            return Err(loc.err(b.span(), "process.burst", "must be greater than zero"))
        }
        b => b.as_ref().map(|b| *b.get_ref()),
    };
    let threads = match &p.threads {
        Some(t) if *t.get_ref() < 1 || *t.get_ref() > 1_000_000 => {
            return Err(loc.err(t.span(), "process.threads", "must be between 1 and 1000000"))
        }
        Some(t) => *t.get_ref() as u32,
        None => 1,
    };
    if let (Some(_), Some(w)) = (&p.nice, &p.weight) {
        return Err(loc.err(
            w.span(),
            "process.weight",
            "give either `nice` or `weight`, not both",
        ));
    }
    let nice = match &p.nice {
        Some(n) if !(-20..=19).contains(n.get_ref()) => {
            return Err(loc.err(n.span(), "process.nice", "must be between -20 and 19"))
        }
        Some(n) => *n.get_ref() as i32,
        None => 0,
    };
    let share = match &p.weight {
        Some(w) => Share::Weight(positive(loc, w, "process.weight")?),
        None => Share::Nice(nice),
    };
    let tickets = match &p.tickets {
        Some(t) => positive(loc, t, "process.tickets")?,
        None => 1,
    };
    let group = match &p.group {
        Some(g) => Some(
            groups
                .iter()
                .position(|x| x.name == *g.get_ref())
                .ok_or_else(|| {
                    loc.err(
                        g.span(),
                        "process.group",
                        format!(
                            "no [[group]] named \"{}\"{} (groups: {})",
                            g.get_ref(),
                            crate::validate::did_you_mean(
                                g.get_ref(),
                                groups.iter().map(|x| x.name.as_str())
                            ),
                            list_or_none(groups.iter().map(|x| x.name.as_str()))
                        ),
                    )
                })?,
        ),
        None => None,
    };
    let cpus = check_cpus(loc, p.cpus.as_ref(), cores, "process.cpus")?;
    let work = check_work(loc, &p)?;
    let command = check_command(loc, p.command, p.work.is_some())?;
    let pattern = check_pattern(loc, p.pattern, &work, command.is_some())?;
    let class = match &p.class {
        None => Class::Other,
        Some(c) => match c.get_ref().as_str() {
            "other" => Class::Other,
            "fifo" => Class::Fifo,
            other => {
                return Err(loc.err(
                    c.span(),
                    "process.class",
                    format!("unknown class \"{other}\" (classes: other, fifo)"),
                ))
            }
        },
    };
    Ok(Process {
        name: p.name.into_inner(),
        arrival: p.arrival,
        burst,
        threads,
        share,
        priority: p.priority.unwrap_or(0) as i32,
        tickets,
        group,
        cpus,
        work,
        command,
        pattern,
        class,
        line: entry_line,
    })
}

/// A process's `work` and the keys that configure it.
fn check_work(loc: &Locator, p: &RawProcess) -> Result<Work, ScenarioError> {
    Ok(match &p.work {
        None => Work::Spin,
        Some(w) => match w.get_ref().as_str() {
            "spin" => Work::Spin,
            "stride" => Work::Stride {
                array: p.array.unwrap_or(Bytes(5_000_000)).0,
                stride: p.stride.unwrap_or(Bytes(64)).0,
            },
            "barrier" => Work::Barrier {
                compute: p.compute.unwrap_or(Nanos::from_us(100)),
            },
            "pingpong" => Work::PingPong,
            other => {
                return Err(loc.err(
                    w.span(),
                    "process.work",
                    format!("unknown workload \"{other}\" (spin, stride, barrier, pingpong)"),
                ))
            }
        },
    })
}

/// A process's `command`: a program and its arguments, instead of a built-in `work`.
fn check_command(
    loc: &Locator,
    command: Option<Val<Vec<String>>>,
    has_work: bool,
) -> Result<Option<Vec<String>>, ScenarioError> {
    Ok(match command {
        Some(c) if c.get_ref().is_empty() || c.get_ref()[0].is_empty() => {
            return Err(loc.err(
                c.span(),
                "process.command",
                "must name a program: command = [\"prog\", \"arg\"]",
            ))
        }
        Some(c) => {
            if has_work {
                return Err(loc.err(
                    c.span(),
                    "process.command",
                    "give either `work` or `command`, not both",
                ));
            }
            Some(c.into_inner())
        }
        None => None,
    })
}

/// One `[[task]]`; `names` is the namespace of processes and tasks.
fn task(
    loc: &Locator,
    t: Val<RawTask>,
    cores: usize,
    names: &mut HashSet<String>,
) -> Result<Task, ScenarioError> {
    let entry_span = t.span();
    let entry_line = entry_line(loc, entry_span.clone(), t.get_ref().line);
    let t = t.into_inner();
    check_name(loc, &t.name, "task.name", names)?;
    if t.period.get_ref().0 == 0 {
        return Err(loc.err(t.period.span(), "task.period", "must be greater than zero"));
    }
    let deadline = match &t.deadline {
        Some(d) if d.get_ref().0 == 0 => {
            return Err(loc.err(d.span(), "task.deadline", "must be greater than zero"))
        }
        Some(d) => *d.get_ref(),
        None => *t.period.get_ref(),
    };
    let regions = match (t.regions, t.wcet) {
        (Some(_), Some(w)) => {
            return Err(loc.err(
                w.span(),
                "task.wcet",
                "give either `regions` or `wcet`, not both",
            ))
        }
        (None, None) => {
            return Err(loc.err(
                entry_span,
                "task.regions",
                "a task needs `regions = [{ seq = \"2ms\" }, ...]` or `wcet = \"2ms\"`",
            ))
        }
        (None, Some(w)) if w.get_ref().0 == 0 => {
            return Err(loc.err(w.span(), "task.wcet", "must be greater than zero"))
        }
        (None, Some(w)) => vec![Region::Seq(*w.get_ref())],
        (Some(rs), None) => {
            if rs.get_ref().is_empty() {
                return Err(loc.err(rs.span(), "task.regions", "must not be empty"));
            }
            let span = rs.span();
            let mut out = Vec::new();
            for r in rs.into_inner() {
                out.push(match (r.seq, r.par) {
                    (Some(s), None) if s.get_ref().0 == 0 => {
                        return Err(loc.err(
                            s.span(),
                            "task.regions.seq",
                            "must be greater than zero",
                        ))
                    }
                    (Some(s), None) => Region::Seq(s.into_inner()),
                    (None, Some(p)) => {
                        if p.get_ref().is_empty() || p.get_ref().iter().any(|c| c.0 == 0) {
                            return Err(loc.err(
                                p.span(),
                                "task.regions.par",
                                "needs at least one thread, each with a time greater than zero",
                            ));
                        }
                        Region::Par(p.into_inner())
                    }
                    _ => return Err(loc.err(
                        span.clone(),
                        "task.regions",
                        "each region is either { seq = \"2ms\" } or { par = [\"1ms\", \"3ms\"] }",
                    )),
                });
            }
            out
        }
    };
    let cpus = check_cpus(loc, t.cpus.as_ref(), cores, "task.cpus")?;
    Ok(Task {
        name: t.name.into_inner(),
        period: *t.period.get_ref(),
        deadline,
        offset: t.offset,
        regions,
        cpus,
        line: entry_line,
    })
}

/// An entry's 1-based line: from its span in the text, else the line it carries.
fn entry_line(loc: &Locator, span: Option<Range<usize>>, line: usize) -> usize {
    span.map_or(line, |s| loc.line_col(s.start).0)
}

/// `[policy]`: the name, then each group of parameters in the order the checks have always
/// run (so a table with two mistakes names the same one first).
fn parse_policy(
    loc: &Locator,
    p: RawPolicy,
    _span: Option<Range<usize>>,
    cores: usize,
) -> Result<PolicySpec, ScenarioError> {
    let name = policy_name(loc, &p.name)?;
    let mut spec = PolicySpec::new(name);
    policy_durations(loc, &p, &mut spec)?;
    policy_counts(loc, &p, &mut spec)?;
    spec.gang_overhead = gang_overhead(loc, &p, name, cores)?;
    Ok(spec)
}

/// `policy.name`: one of [`PolicyName::ALL`], with a suggestion when it is close to one.
fn policy_name(loc: &Locator, name: &Val<String>) -> Result<PolicyName, ScenarioError> {
    PolicyName::parse(name.get_ref()).ok_or_else(|| {
        loc.err(
            name.span(),
            "policy.name",
            format!(
                "unknown policy \"{}\"{} (known: {})",
                name.get_ref(),
                crate::validate::did_you_mean(
                    name.get_ref(),
                    PolicyName::ALL.iter().map(|p| p.as_str())
                ),
                PolicyName::known_list()
            ),
        )
    })
}

/// The time parameters: each a duration greater than zero when given.
fn policy_durations(
    loc: &Locator,
    p: &RawPolicy,
    spec: &mut PolicySpec,
) -> Result<(), ScenarioError> {
    let nonzero = |v: &Option<Val<Nanos>>, field: &str| -> Result<Option<Nanos>, ScenarioError> {
        match v {
            Some(d) if d.get_ref().0 == 0 => {
                Err(loc.err(d.span(), field, "must be greater than zero"))
            }
            Some(d) => Ok(Some(*d.get_ref())),
            None => Ok(None),
        }
    };
    if let Some(q) = nonzero(&p.quantum, "policy.quantum")? {
        spec.quantum = q;
    }
    if let Some(v) = nonzero(&p.sched_latency, "policy.sched_latency")? {
        spec.sched_latency = v;
    }
    if let Some(v) = nonzero(&p.min_granularity, "policy.min_granularity")? {
        spec.min_granularity = v;
    }
    if let Some(v) = nonzero(&p.base_slice, "policy.base_slice")? {
        spec.base_slice = v;
    }
    // Zero is a model without a wake-up path, which is allowed.
    if let Some(v) = &p.wake_path {
        spec.wake_path = *v.get_ref();
    }
    if let Some(v) = nonzero(&p.balance_interval, "policy.balance_interval")? {
        spec.balance_interval = v;
    }
    if let Some(v) = nonzero(&p.tick, "policy.tick")? {
        spec.tick = v;
    }
    if let Some(v) = nonzero(&p.period, "policy.period")? {
        spec.period = v;
    }
    Ok(())
}

/// The other scalar parameters: seed, context-switch cost, MLFQ levels and boost, trim and
/// the load balancer's imbalance percentage (ranges checked here).
fn policy_counts(loc: &Locator, p: &RawPolicy, spec: &mut PolicySpec) -> Result<(), ScenarioError> {
    if let Some(s) = p.seed {
        spec.seed = s;
    }
    if let Some(c) = p.context_switch {
        spec.context_switch = c;
    }
    if let Some(l) = &p.levels {
        if !(1..=64).contains(l.get_ref()) {
            return Err(loc.err(l.span(), "policy.levels", "must be between 1 and 64"));
        }
        spec.levels = *l.get_ref() as u32;
    }
    if let Some(b) = p.boost {
        spec.boost = b;
    }
    if let Some(t) = p.trim {
        spec.trim = t;
    }
    if let Some(t) = p.task_group {
        spec.task_group = t;
    }
    spec.spawner = p.spawner.as_ref().map(|s| s.get_ref().clone());
    if let Some(i) = &p.imbalance_pct {
        if !(100..=1000).contains(i.get_ref()) {
            return Err(loc.err(
                i.span(),
                "policy.imbalance_pct",
                "must be between 100 and 1000",
            ));
        }
        spec.imbalance_pct = *i.get_ref() as u32;
    }
    if let Some(r) = &p.newidle_ratio {
        if !(0..=1024).contains(r.get_ref()) {
            return Err(loc.err(
                r.span(),
                "policy.newidle_ratio",
                "must be between 0 and 1024 (successes per 1024 newidle balances)",
            ));
        }
        spec.newidle_ratio = *r.get_ref() as u32;
    }
    Ok(())
}

/// `comm` and `cores_per_node`: gang's switch-overhead model, for policy "gang" only and
/// with `cores_per_node` only beside `comm`.
fn gang_overhead(
    loc: &Locator,
    p: &RawPolicy,
    name: PolicyName,
    cores: usize,
) -> Result<Option<GangOverheadSpec>, ScenarioError> {
    if let Some(n) = &p.cores_per_node {
        if p.comm.is_none() {
            return Err(loc.err(
                n.span(),
                "policy.cores_per_node",
                "only used with `comm` (the gang switch-overhead model)",
            ));
        }
        if *n.get_ref() < 1 || *n.get_ref() as usize > cores {
            return Err(loc.err(
                n.span(),
                "policy.cores_per_node",
                format!("must be between 1 and cores ({cores})"),
            ));
        }
    }
    let Some(c) = &p.comm else {
        return Ok(None);
    };
    use crate::gang_overhead::Pattern;
    let pattern = Pattern::ALL
        .into_iter()
        .find(|x| x.as_str() == c.get_ref())
        .ok_or_else(|| {
            loc.err(
                c.span(),
                "policy.comm",
                format!(
                    "unknown communication pattern \"{}\" (none, neighbour, all-to-all)",
                    c.get_ref()
                ),
            )
        })?;
    if name != PolicyName::Gang {
        return Err(loc.err(
            c.span(),
            "policy.comm",
            "the switch-overhead model applies to policy \"gang\" only",
        ));
    }
    Ok(Some(GangOverheadSpec {
        cores_per_node: p
            .cores_per_node
            .as_ref()
            .map_or(1, |n| *n.get_ref() as usize),
        pattern,
    }))
}

/// Checks a name and records it in `seen`, its namespace.
fn check_name(
    loc: &Locator,
    name: &Val<String>,
    field: &str,
    seen: &mut HashSet<String>,
) -> Result<(), ScenarioError> {
    let n = name.get_ref();
    if n.is_empty() || n.chars().any(|c| c.is_control()) {
        return Err(loc.err(name.span(), field, "must be a non-empty printable name"));
    }
    if !seen.insert(n.clone()) {
        return Err(loc.err(name.span(), field, format!("duplicate name \"{n}\"")));
    }
    Ok(())
}

fn positive(loc: &Locator, v: &Val<i64>, field: &str) -> Result<u64, ScenarioError> {
    if *v.get_ref() < 1 {
        return Err(loc.err(v.span(), field, "must be a positive integer"));
    }
    Ok(*v.get_ref() as u64)
}

fn check_cpus(
    loc: &Locator,
    cpus: Option<&Val<Vec<i64>>>,
    cores: usize,
    field: &str,
) -> Result<Option<Vec<usize>>, ScenarioError> {
    let Some(c) = cpus else { return Ok(None) };
    if c.get_ref().is_empty() {
        return Err(loc.err(c.span(), field, "must list at least one CPU"));
    }
    let mut out = Vec::new();
    for &cpu in c.get_ref() {
        if cpu < 0 || cpu as usize >= cores {
            return Err(loc.err(
                c.span(),
                field,
                format!(
                    "CPU {cpu} does not exist (cores = {cores}: CPUs 0..{})",
                    cores - 1
                ),
            ));
        }
        if !out.contains(&(cpu as usize)) {
            out.push(cpu as usize);
        }
    }
    out.sort_unstable();
    Ok(Some(out))
}

/// Validates a `pattern`: a non-empty list of `{ run = D }` / `{ sleep = D }` phases, each
/// positive, at least one run; only for the `spin` workload (an external command decides its
/// own sleeping, and barrier or ping-pong threads wait for each other).
fn check_pattern(
    loc: &Locator,
    raw: Option<Val<Vec<RawPhase>>>,
    work: &Work,
    command: bool,
) -> Result<Option<Vec<Phase>>, ScenarioError> {
    let Some(raw) = raw else { return Ok(None) };
    let span = raw.span();
    if command || *work != Work::Spin {
        return Err(loc.err(
            span,
            "process.pattern",
            "applies to the built-in `spin` workload only (not with `command` or another `work`)",
        ));
    }
    if raw.get_ref().is_empty() {
        return Err(loc.err(span, "process.pattern", "must not be empty"));
    }
    let mut out = Vec::new();
    for ph in raw.into_inner() {
        let (d, field, phase) = match (ph.run, ph.sleep) {
            (Some(r), None) => (r, "process.pattern.run", Phase::Run as fn(Nanos) -> Phase),
            (None, Some(s)) => (
                s,
                "process.pattern.sleep",
                Phase::Sleep as fn(Nanos) -> Phase,
            ),
            _ => {
                return Err(loc.err(
                    span,
                    "process.pattern",
                    "each phase is either { run = \"2ms\" } or { sleep = \"8ms\" }",
                ))
            }
        };
        if d.get_ref().0 == 0 {
            return Err(loc.err(d.span(), field, "must be greater than zero"));
        }
        out.push(phase(*d.get_ref()));
    }
    if !out.iter().any(|p| matches!(p, Phase::Run(_))) {
        return Err(loc.err(span, "process.pattern", "needs at least one `run` phase"));
    }
    Ok(Some(out))
}

fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<_> = names.collect();
    if v.is_empty() {
        "none defined".into()
    } else {
        v.join(", ")
    }
}
