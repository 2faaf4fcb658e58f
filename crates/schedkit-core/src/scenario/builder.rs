//! Scenarios made in code: experiments, generators, importers and command-line overrides
//! describe a scenario with a [`ScenarioBuilder`], and [`ScenarioBuilder::build`] hands it to
//! the same checks a file gets ([`super::check::build`]), through the same raw layer, so an
//! error names the field as the file would (without a line: nothing was written).

use super::check;
use super::raw::{
    RawGroup, RawPhase, RawPolicy, RawProcess, RawRegion, RawRun, RawScenario, RawTask, Val,
};
use super::{
    Class, Group, Locator, Phase, PolicyName, PolicySpec, Process, Region, Scenario, ScenarioError,
    Share, Task, Work,
};
use crate::time::{Bytes, Nanos};

/// A scenario being described in code. Setters do not check; [`ScenarioBuilder::build`]
/// does, exactly as parsing does.
#[derive(Clone, Debug)]
pub struct ScenarioBuilder {
    file: String,
    cores: usize,
    policy: PolicySpec,
    horizon: Nanos,
    groups: Vec<Group>,
    /// Each process with the name of its group (processes refer to groups by name, as in a
    /// file; the index is resolved by the checks).
    processes: Vec<(Process, Option<String>)>,
    tasks: Vec<Task>,
}

impl Scenario {
    /// A builder with an empty file's defaults (one core, `fcfs`, a 10 s horizon); `file`
    /// names the scenario in messages.
    pub fn builder(file: impl Into<String>) -> ScenarioBuilder {
        ScenarioBuilder {
            file: file.into(),
            cores: 1,
            policy: PolicySpec::new(PolicyName::Fcfs),
            horizon: Nanos::from_secs(10),
            groups: Vec::new(),
            processes: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// A builder holding this scenario (to change it and build it again).
    pub fn to_builder(&self) -> ScenarioBuilder {
        let group_name = |p: &Process| p.group.map(|g| self.groups[g].name.clone());
        ScenarioBuilder {
            file: self.file.clone(),
            cores: self.cores,
            policy: self.policy.clone(),
            horizon: self.horizon,
            groups: self.groups.clone(),
            processes: self
                .processes
                .iter()
                .map(|p| (p.clone(), group_name(p)))
                .collect(),
            tasks: self.tasks.clone(),
        }
    }
}

impl ScenarioBuilder {
    pub fn with_cores(mut self, cores: usize) -> ScenarioBuilder {
        self.cores = cores;
        self
    }
    pub fn with_policy(mut self, policy: PolicySpec) -> ScenarioBuilder {
        self.policy = policy;
        self
    }
    pub fn with_horizon(mut self, horizon: Nanos) -> ScenarioBuilder {
        self.horizon = horizon;
        self
    }
    /// `[policy] seed`.
    pub fn with_seed(mut self, seed: u64) -> ScenarioBuilder {
        self.policy = self.policy.with_seed(seed);
        self
    }
    pub fn cores(&self) -> usize {
        self.cores
    }
    pub fn policy(&self) -> &PolicySpec {
        &self.policy
    }

    /// Adds a `[[group]]`.
    pub fn group(mut self, group: Group) -> ScenarioBuilder {
        self.groups.push(group);
        self
    }
    /// Adds a `[[process]]` in no group.
    pub fn process(mut self, p: Process) -> ScenarioBuilder {
        self.processes.push((p, None));
        self
    }
    /// Adds a `[[process]]` in the group named `group`.
    pub fn process_in(mut self, p: Process, group: impl Into<String>) -> ScenarioBuilder {
        self.processes.push((p, Some(group.into())));
        self
    }
    /// Adds `[[process]]` entries in no group.
    pub fn processes(mut self, ps: impl IntoIterator<Item = Process>) -> ScenarioBuilder {
        self.processes.extend(ps.into_iter().map(|p| (p, None)));
        self
    }
    /// Adds a `[[task]]`.
    pub fn task(mut self, t: Task) -> ScenarioBuilder {
        self.tasks.push(t);
        self
    }
    /// Adds `[[task]]` entries.
    pub fn tasks(mut self, ts: impl IntoIterator<Item = Task>) -> ScenarioBuilder {
        self.tasks.extend(ts);
        self
    }
    /// Removes every process, task and group (a base file whose work is replaced).
    pub fn without_work(mut self) -> ScenarioBuilder {
        self.processes.clear();
        self.tasks.clear();
        self.groups.clear();
        self
    }
    /// Replaces each process by `f` of it (its group kept).
    pub fn map_processes<E>(
        mut self,
        mut f: impl FnMut(Process) -> Result<Process, E>,
    ) -> Result<ScenarioBuilder, E> {
        self.processes = self
            .processes
            .into_iter()
            .map(|(p, g)| f(p).map(|p| (p, g)))
            .collect::<Result<_, E>>()?;
        Ok(self)
    }

    /// Replaces each group by `f` of it.
    pub fn map_groups(mut self, f: impl FnMut(Group) -> Group) -> ScenarioBuilder {
        self.groups = self.groups.into_iter().map(f).collect();
        self
    }

    /// The scenario, checked as a file with these values would be.
    pub fn build(self) -> Result<Scenario, ScenarioError> {
        let raw = RawScenario {
            cores: Some(Val::new(wide(self.cores as u64))),
            policy: Some(Val::new(raw_policy(&self.policy))),
            run: Some(RawRun {
                horizon: Some(Val::new(self.horizon)),
            }),
            group: self
                .groups
                .into_iter()
                .map(|g| {
                    Val::new(RawGroup {
                        name: Val::new(g.name),
                        weight: Some(Val::new(wide(g.weight))),
                    })
                })
                .collect(),
            process: self
                .processes
                .into_iter()
                .map(|(p, g)| Val::new(raw_process(p, g)))
                .collect(),
            task: self
                .tasks
                .into_iter()
                .map(|t| Val::new(raw_task(t)))
                .collect(),
        };
        check::build(&Locator::new(&self.file, ""), raw)
    }
}

/// A count as the file's integer type; a value beyond it stays out of range for the check.
fn wide(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn raw_policy(p: &PolicySpec) -> RawPolicy {
    RawPolicy {
        name: Val::new(p.name.as_str().to_string()),
        quantum: Some(Val::new(p.quantum)),
        seed: Some(p.seed),
        sched_latency: Some(Val::new(p.sched_latency)),
        min_granularity: Some(Val::new(p.min_granularity)),
        base_slice: Some(Val::new(p.base_slice)),
        wake_path: Some(Val::new(p.wake_path)),
        balance_interval: Some(Val::new(p.balance_interval)),
        tick: Some(Val::new(p.tick)),
        period: Some(Val::new(p.period)),
        context_switch: Some(p.context_switch),
        levels: Some(Val::new(i64::from(p.levels))),
        boost: Some(p.boost),
        imbalance_pct: Some(Val::new(i64::from(p.imbalance_pct))),
        comm: p
            .gang_overhead
            .as_ref()
            .map(|g| Val::new(g.pattern.as_str().to_string())),
        cores_per_node: p
            .gang_overhead
            .as_ref()
            .map(|g| Val::new(wide(g.cores_per_node as u64))),
        trim: Some(p.trim),
        task_group: Some(p.task_group),
        spawner: p.spawner.clone().map(Val::new),
        newidle_ratio: Some(Val::new(i64::from(p.newidle_ratio))),
    }
}

fn raw_process(p: Process, group: Option<String>) -> RawProcess {
    let (work, array, stride, compute) = match p.work {
        // Spin is the default: left unset, so that a `command` is not "both".
        Work::Spin => (None, None, None, None),
        Work::Stride { array, stride } => (
            Some("stride"),
            Some(Bytes(array)),
            Some(Bytes(stride)),
            None,
        ),
        Work::Barrier { compute } => (Some("barrier"), None, None, Some(compute)),
        Work::PingPong => (Some("pingpong"), None, None, None),
    };
    let (nice, weight) = match p.share {
        Share::Nice(n) => (Some(Val::new(i64::from(n))), None),
        Share::Weight(w) => (None, Some(Val::new(wide(w)))),
    };
    RawProcess {
        name: Val::new(p.name),
        arrival: p.arrival,
        burst: p.burst.map(Val::new),
        threads: Some(Val::new(i64::from(p.threads))),
        nice,
        weight,
        priority: Some(i64::from(p.priority)),
        tickets: Some(Val::new(wide(p.tickets))),
        group: group.map(Val::new),
        cpus: p.cpus.map(cpu_list),
        work: work.map(|w| Val::new(w.to_string())),
        array,
        stride,
        compute,
        command: p.command.map(Val::new),
        class: (p.class != Class::Other).then(|| Val::new(p.class.as_str().to_string())),
        pattern: p.pattern.map(|ph| {
            Val::new(
                ph.into_iter()
                    .map(|ph| match ph {
                        Phase::Run(d) => RawPhase {
                            run: Some(Val::new(d)),
                            sleep: None,
                        },
                        Phase::Sleep(d) => RawPhase {
                            run: None,
                            sleep: Some(Val::new(d)),
                        },
                    })
                    .collect(),
            )
        }),
        line: p.line,
    }
}

fn raw_task(t: Task) -> RawTask {
    RawTask {
        name: Val::new(t.name),
        period: Val::new(t.period),
        deadline: Some(Val::new(t.deadline)),
        offset: t.offset,
        regions: Some(Val::new(
            t.regions
                .into_iter()
                .map(|r| match r {
                    Region::Seq(c) => RawRegion {
                        seq: Some(Val::new(c)),
                        par: None,
                    },
                    Region::Par(v) => RawRegion {
                        seq: None,
                        par: Some(Val::new(v)),
                    },
                })
                .collect(),
        )),
        wcet: None,
        cpus: t.cpus.map(cpu_list),
        line: t.line,
    }
}

fn cpu_list(cpus: Vec<usize>) -> Val<Vec<i64>> {
    Val::new(cpus.into_iter().map(|c| wide(c as u64)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parsed_scenario_builds_back_to_itself() {
        let text = "cores = 4\n[policy]\nname = \"gang\"\ncomm = \"neighbour\"\ncores_per_node = 2\n\
                    [run]\nhorizon = \"1s\"\n[[group]]\nname = \"g\"\nweight = 3\n\
                    [[process]]\nname = \"a\"\ngroup = \"g\"\nweight = 7\ncpus = [3, 1]\n\
                    pattern = [{ run = \"1ms\" }, { sleep = \"2ms\" }]\n\
                    [[process]]\nname = \"b\"\nwork = \"stride\"\nnice = -3\nthreads = 2\n\
                    [[task]]\nname = \"t\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\" }, { par = [\"1ms\", \"2ms\"] }]\n";
        let s = Scenario::parse("t.toml", text).unwrap();
        assert_eq!(s.to_builder().build().unwrap(), s);
        assert_eq!(s.processes()[0].share(), Share::Weight(7));
        assert_eq!(
            s.processes()[1].weight(),
            crate::weights::nice_to_weight(-3)
        );
    }

    #[test]
    fn build_checks_like_the_parser() {
        let b = || Scenario::builder("code").with_cores(2);
        let e = b()
            .process(Process::new("a", 1, Work::Spin).with_cpus(vec![2]))
            .build()
            .unwrap_err();
        let parsed = Scenario::parse("code", "cores = 2\n[[process]]\nname = \"a\"\ncpus = [2]\n")
            .unwrap_err();
        assert_eq!(
            (e.field.as_str(), &e.message),
            ("process.cpus", &parsed.message)
        );
        assert_eq!(e.line, 0);
        let e = b()
            .process(Process::new("a", 1, Work::Spin))
            .process(Process::new("a", 1, Work::Spin))
            .build()
            .unwrap_err();
        assert_eq!(e.field, "process.name");
        let e = b()
            .process(Process::new("a", 0, Work::Spin))
            .build()
            .unwrap_err();
        assert_eq!(e.field, "process.threads");
        let e = b()
            .process(Process::new("a", 1, Work::Spin).with_nice(20))
            .build()
            .unwrap_err();
        assert_eq!(e.field, "process.nice");
        let e = b()
            .process_in(Process::new("a", 1, Work::Spin), "nope")
            .build()
            .unwrap_err();
        assert_eq!(e.field, "process.group");
        let e = b()
            .with_policy(PolicySpec::new(PolicyName::Rr).with_quantum(Nanos::ZERO))
            .build()
            .unwrap_err();
        assert_eq!(e.field, "policy.quantum");
        let e = b().with_horizon(Nanos::ZERO).build().unwrap_err();
        assert_eq!(e.field, "run.horizon");
        let e = b()
            .task(Task::new("t", Nanos::ZERO, vec![Region::Seq(Nanos(1))]))
            .build()
            .unwrap_err();
        assert_eq!(e.field, "task.period");
        let e = b()
            .process(Process::new("a", 1, Work::PingPong).with_command(vec!["true".to_string()]))
            .build()
            .unwrap_err();
        assert_eq!(e.field, "process.command");
    }
}
