//! The experiments' scenarios: files in `examples/fair/`, embedded at build time (so the
//! binary runs them from any directory), with what an experiment varies applied on top:
//! policy, controller period, cores, horizon, thread counts and nice values. A user can open
//! each file, edit it and run it with `schedkit sim` and `schedkit run`; the experiment runs
//! the same scenario with every process made a real busy process (the helper executable's
//! hidden `--spinner PLAN`).

use crate::Error;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::Nanos;
use std::path::Path;

/// A scenario file as shipped in `examples/`: its path in the repository and its text.
#[derive(Clone, Copy, Debug)]
pub struct File {
    pub path: &'static str,
    pub text: &'static str,
}

macro_rules! example {
    ($path:literal) => {
        File {
            path: $path,
            text: include_str!(concat!("../../../../", $path)),
        }
    };
}

/// `experiment greedy`: A, B and C of 1, 8 and 50 threads (C's count is an option).
pub const GREEDY: File = example!("examples/fair/greedy-50.toml");
/// `experiment greedy`'s controller cost: 4 processes of 25 threads.
pub const CONTROLLER_COST: File = example!("examples/fair/controller-cost.toml");
/// `experiment global-fairness`: T1 at nice 0, T2-T5 at nice 5.
pub const GLOBAL: File = example!("examples/fair/global.toml");
/// `experiment tenants`: one file per weight configuration.
pub const TENANTS: [(&[u64], File); 6] = [
    (&[1, 1], example!("examples/fair/tenants-1-1.toml")),
    (&[1, 2], example!("examples/fair/tenants-1-2.toml")),
    (&[1, 3], example!("examples/fair/tenants-1-3.toml")),
    (&[1, 4], example!("examples/fair/tenants-1-4.toml")),
    (&[1, 5], example!("examples/fair/tenants-1-5.toml")),
    (&[1, 2, 3], example!("examples/fair/tenants-1-2-3.toml")),
];

/// The tenants file of a weight configuration.
pub fn tenants_file(weights: &[u64]) -> Result<File, Error> {
    TENANTS
        .iter()
        .find(|(w, _)| *w == weights)
        .map(|(_, f)| *f)
        .ok_or_else(|| Error::BadInput(format!("no tenants scenario for weights {weights:?}")))
}

impl File {
    /// The file as parsed (before any override).
    pub fn parse(&self) -> Result<Scenario, Error> {
        Ok(Scenario::parse(self.path, self.text)?)
    }
}

/// What an experiment changes in a scenario file.
#[derive(Clone, Debug)]
pub struct Overrides<'a> {
    pub policy: PolicyName,
    /// The controller period (`policy.period`); `None` keeps the file's.
    pub period: Option<Nanos>,
    /// Cores; `None` keeps the file's (the simulated machine).
    pub cores: Option<usize>,
    pub horizon: Nanos,
    /// Added to every process's nice value (clamped to -20..19; the weight follows).
    pub nice: i32,
    /// Spinner plans by process name (`N`, or `N,M@T`; see [`super::spinner::parse_plan`]);
    /// a process not named keeps its thread count. The simulator sees each process's largest
    /// thread count (it has no mid-run thread changes).
    pub plans: &'a [(&'a str, String)],
    /// The helper executable whose `experiment greedy --spinner PLAN` is each process.
    pub exe: &'a Path,
}

impl<'a> Overrides<'a> {
    /// The same overrides for `policy` on `cores` (the simulator's `None`: the file's).
    pub fn with(&self, policy: PolicyName, cores: Option<usize>) -> Overrides<'a> {
        Overrides {
            policy,
            cores,
            ..self.clone()
        }
    }
}

/// `file` with `o` applied: the scenario both engines run.
pub fn load(file: &File, o: &Overrides) -> Result<Scenario, Error> {
    let sc = file.parse()?;
    let mut policy = sc.policy().clone().with_name(o.policy);
    if let Some(p) = o.period {
        policy = policy.with_period(p);
    }
    let b = sc
        .to_builder()
        .with_policy(policy)
        .with_cores(o.cores.unwrap_or(sc.cores()))
        .with_horizon(o.horizon);
    let b = b.map_processes(|p| {
        let plan = match o.plans.iter().find(|(n, _)| *n == p.name()) {
            Some((_, plan)) => plan.clone(),
            None => p.threads().to_string(),
        };
        let steps = super::spinner::parse_plan(&plan)
            .map_err(|m| Error::BadInput(format!("{}: process {}: {m}", file.path, p.name())))?;
        let threads = steps.iter().map(|s| s.1).max().unwrap_or(1);
        let nice = (p.nice() + o.nice).clamp(-20, 19);
        let command = vec![
            o.exe.to_string_lossy().to_string(),
            "experiment".into(),
            "greedy".into(),
            "--spinner".into(),
            plan,
        ];
        Ok::<_, Error>(
            p.with_threads(threads)
                .with_nice(nice)
                .with_command(command),
        )
    })?;
    Ok(b.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_file_parses() {
        for f in [GREEDY, CONTROLLER_COST, GLOBAL]
            .iter()
            .chain(TENANTS.iter().map(|(_, f)| f))
        {
            f.parse().unwrap_or_else(|e| panic!("{}: {e}", f.path));
        }
    }

    #[test]
    fn overrides_apply_to_the_file() {
        let exe = Path::new("/bin/schedkit");
        let sc = load(
            &GREEDY,
            &Overrides {
                policy: PolicyName::Cfs,
                period: Some(Nanos::from_ms(50)),
                cores: Some(4),
                horizon: Nanos::from_secs(2),
                nice: -10,
                plans: &[("C", "1,20@1s".into())],
                exe,
            },
        )
        .unwrap();
        assert_eq!(sc.policy().name(), PolicyName::Cfs);
        assert_eq!(sc.policy().period(), Nanos::from_ms(50));
        assert_eq!((sc.cores(), sc.horizon()), (4, Nanos::from_secs(2)));
        let threads: Vec<u32> = sc.processes().iter().map(|p| p.threads()).collect();
        assert_eq!(threads, [1, 8, 20]);
        assert!(sc.processes().iter().all(|p| p.nice() == -10));
        let cmd = sc.processes()[2].command().unwrap();
        assert_eq!(cmd.last().unwrap(), "1,20@1s");
    }
}
