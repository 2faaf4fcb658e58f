//! The experiments' scenarios: busy processes (spinners) under a policy, as one `Scenario`
//! that both the real engine and the simulator run.

use super::*;

/// One busy process of an experiment: name, spinner plan, nice, group.
pub(super) struct Busy {
    name: String,
    plan: String,
    nice: i32,
    group: Option<usize>,
}

pub(super) fn busy(name: &str, plan: &str, nice: i32, group: Option<usize>) -> Busy {
    Busy {
        name: name.into(),
        plan: plan.into(),
        nice,
        group,
    }
}

/// `--nice`: added to every busy process's nice value (set once by [`setup`], read by
/// [`scenario`]).
pub(super) static NICE_OFFSET: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The scenario both engines run. The simulator sees each process's largest thread count
/// (it has no mid-run thread changes; the change case runs for real only).
pub(super) fn scenario(
    title: &str,
    policy: PolicyName,
    period: Nanos,
    cores: usize,
    horizon: Nanos,
    procs: &[Busy],
    groups: &[(String, u64)],
) -> Result<Scenario, Failure> {
    let exe =
        crate::self_exe().map_err(|e| anyhow::anyhow!("locating the schedkit binary: {e}"))?;
    let mut spec = PolicySpec::new(policy);
    spec.period = period;
    let mut processes = Vec::new();
    for b in procs {
        let plan = parse_plan(&b.plan).map_err(bad)?;
        let threads = plan.iter().map(|p| p.1).max().unwrap_or(1);
        let mut p = Process::new(b.name.clone(), threads, Work::Spin);
        p.nice = (b.nice + NICE_OFFSET.load(std::sync::atomic::Ordering::Relaxed)).clamp(-20, 19);
        p.weight = schedkit_core::weights::nice_to_weight(p.nice);
        p.group = b.group;
        p.command = Some(vec![
            exe.to_string_lossy().to_string(),
            "experiment".into(),
            "greedy".into(),
            "--spinner".into(),
            b.plan.clone(),
        ]);
        processes.push(p);
    }
    Ok(Scenario {
        file: format!("experiment {title}"),
        cores,
        policy: spec,
        horizon,
        processes,
        groups: groups
            .iter()
            .map(|(n, w)| Group {
                name: n.clone(),
                weight: *w,
            })
            .collect(),
        tasks: Vec::new(),
    })
}
