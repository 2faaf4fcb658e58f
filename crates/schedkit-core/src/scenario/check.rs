//! The checks of the raw layer's values that serde cannot make.

use super::raw::{RawPhase, RawPolicy};
use super::{GangOverheadSpec, Locator, Phase, PolicyName, PolicySpec, ScenarioError, Work};
use crate::time::Nanos;
use std::collections::HashSet;
use std::ops::Range;
use toml::Spanned;

pub(super) fn parse_policy(
    loc: &Locator,
    p: RawPolicy,
    _span: Range<usize>,
    cores: usize,
) -> Result<PolicySpec, ScenarioError> {
    let name = PolicyName::parse(p.name.get_ref()).ok_or_else(|| {
        loc.err(
            p.name.span(),
            "policy.name",
            format!(
                "unknown policy \"{}\"{} (known: {})",
                p.name.get_ref(),
                crate::validate::did_you_mean(
                    p.name.get_ref(),
                    PolicyName::ALL.iter().map(|p| p.as_str())
                ),
                PolicyName::ALL
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let mut spec = PolicySpec::new(name);
    let nonzero =
        |v: &Option<Spanned<Nanos>>, field: &str| -> Result<Option<Nanos>, ScenarioError> {
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
    if let Some(v) = nonzero(&p.balance_interval, "policy.balance_interval")? {
        spec.balance_interval = v;
    }
    if let Some(v) = nonzero(&p.tick, "policy.tick")? {
        spec.tick = v;
    }
    if let Some(v) = nonzero(&p.period, "policy.period")? {
        spec.period = v;
    }
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
    if let Some(c) = &p.comm {
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
        spec.gang_overhead = Some(GangOverheadSpec {
            cores_per_node: p
                .cores_per_node
                .as_ref()
                .map_or(1, |n| *n.get_ref() as usize),
            pattern,
        });
    }
    Ok(spec)
}

/// Checks a name and records it in `seen`, its namespace.
pub(super) fn check_name(
    loc: &Locator,
    name: &Spanned<String>,
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

pub(super) fn positive(loc: &Locator, v: &Spanned<i64>, field: &str) -> Result<u64, ScenarioError> {
    if *v.get_ref() < 1 {
        return Err(loc.err(v.span(), field, "must be a positive integer"));
    }
    Ok(*v.get_ref() as u64)
}

pub(super) fn check_cpus(
    loc: &Locator,
    cpus: Option<&Spanned<Vec<i64>>>,
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
pub(super) fn check_pattern(
    loc: &Locator,
    raw: Option<Spanned<Vec<RawPhase>>>,
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

pub(super) fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<_> = names.collect();
    if v.is_empty() {
        "none defined".into()
    } else {
        v.join(", ")
    }
}
