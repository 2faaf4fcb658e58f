//! The validated scenario's types.

use crate::time::Nanos;
use crate::weights::nice_to_weight;
use serde::Serialize;

use super::{PolicySpec, ScenarioError};

/// A built-in synthetic workload for `schedkit run` (the simulator models every workload as
/// CPU demand).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Work {
    /// A busy loop.
    Spin,
    /// A strided walk over an array of `array` bytes, `stride` bytes apart.
    Stride { array: u64, stride: u64 },
    /// Iterations of `compute` busy work followed by a spin barrier across the process' threads.
    Barrier { compute: Nanos },
    /// Two threads passing a token through shared memory with busy waiting.
    PingPong,
}

/// How a process's threads weigh against others: a nice value (its weight is the kernel's
/// `prio_to_weight` entry) or a weight given directly (`nice` and `weight` in the file; one
/// or the other).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    Nice(i32),
    Weight(u64),
}

impl Share {
    /// The CFS weight per thread: the one place a nice value becomes a weight.
    pub fn weight(self) -> u64 {
        match self {
            Share::Nice(n) => nice_to_weight(n),
            Share::Weight(w) => w,
        }
    }

    /// The nice value the real engine applies: a weight given directly runs at nice 0 (the
    /// weight then matters where schedkit sets weights itself: the simulator, cgroups).
    pub fn nice(self) -> i32 {
        match self {
            Share::Nice(n) => n,
            Share::Weight(_) => 0,
        }
    }
}

/// One `[[process]]`. Made in code with [`Process::new`] and the `with_*` setters, checked
/// when the scenario holding it is built; inside a [`Scenario`] it is valid.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(into = "ProcessRow")]
pub struct Process {
    pub(super) name: String,
    pub(super) arrival: Nanos,
    /// CPU demand per thread; `None` runs until the horizon.
    pub(super) burst: Option<Nanos>,
    pub(super) threads: u32,
    pub(super) share: Share,
    /// Smaller is more important.
    pub(super) priority: i32,
    pub(super) tickets: u64,
    /// Index into [`Scenario::groups`].
    pub(super) group: Option<usize>,
    /// Initial placement / affinity.
    pub(super) cpus: Option<Vec<usize>>,
    pub(super) work: Work,
    /// External command (`run` only; the simulator treats it as CPU-bound demand).
    pub(super) command: Option<Vec<String>>,
    /// Run and sleep phases each thread repeats (`None`: always runnable). `burst`, if given,
    /// still bounds the thread's total CPU time.
    pub(super) pattern: Option<Vec<Phase>>,
    /// The kernel scheduling class its threads run in under `policy = "default"` (and the
    /// simulator's kernel models).
    pub(super) class: Class,
    /// 1-based line of the `[[process]]` entry in the file, for messages from engines.
    pub(super) line: usize,
}

/// `[[process]] class`: the scheduling class of a process's threads under the kernel's own
/// scheduler (`policy = "default"`, and the `eevdf` and `cfs` models of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// SCHED_OTHER: the fair class (nice, weights).
    #[default]
    Other,
    /// SCHED_FIFO: the real-time class, above every fair thread; runs until it blocks.
    Fifo,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Other => "other",
            Class::Fifo => "fifo",
        }
    }
    fn is_other(&self) -> bool {
        *self == Class::Other
    }
}

/// A process as serialised: `nice` and `weight` side by side, as scenarios were written
/// before [`Share`] (serialised outputs stay the same).
#[derive(Serialize)]
struct ProcessRow {
    name: String,
    arrival: Nanos,
    burst: Option<Nanos>,
    threads: u32,
    nice: i32,
    weight: u64,
    priority: i32,
    tickets: u64,
    group: Option<usize>,
    cpus: Option<Vec<usize>>,
    work: Work,
    command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<Vec<Phase>>,
    #[serde(skip_serializing_if = "Class::is_other")]
    class: Class,
    line: usize,
}

impl From<Process> for ProcessRow {
    fn from(p: Process) -> ProcessRow {
        ProcessRow {
            nice: p.nice(),
            weight: p.weight(),
            name: p.name,
            arrival: p.arrival,
            burst: p.burst,
            threads: p.threads,
            priority: p.priority,
            tickets: p.tickets,
            group: p.group,
            cpus: p.cpus,
            work: p.work,
            command: p.command,
            pattern: p.pattern,
            class: p.class,
            line: p.line,
        }
    }
}

impl Process {
    /// A process built in code (experiments, the one-line `run`): arrives at 0, runs until
    /// the horizon, nice 0, one ticket, no group or affinity, the scenario defaults otherwise.
    pub fn new(name: impl Into<String>, threads: u32, work: Work) -> Process {
        Process {
            name: name.into(),
            arrival: Nanos::ZERO,
            burst: None,
            threads,
            share: Share::Nice(0),
            priority: 0,
            tickets: 1,
            group: None,
            cpus: None,
            work,
            command: None,
            pattern: None,
            class: Class::Other,
            line: 0,
        }
    }

    /// The scheduling class of its threads under the kernel's scheduler.
    pub fn class(&self) -> Class {
        self.class
    }
    pub fn with_class(mut self, class: Class) -> Process {
        self.class = class;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn arrival(&self) -> Nanos {
        self.arrival
    }
    /// CPU demand per thread; `None` runs until the horizon.
    pub fn burst(&self) -> Option<Nanos> {
        self.burst
    }
    pub fn threads(&self) -> u32 {
        self.threads
    }
    pub fn share(&self) -> Share {
        self.share
    }
    /// CFS weight per thread (see [`Share::weight`]).
    pub fn weight(&self) -> u64 {
        self.share.weight()
    }
    /// The nice value (see [`Share::nice`]).
    pub fn nice(&self) -> i32 {
        self.share.nice()
    }
    /// Smaller is more important.
    pub fn priority(&self) -> i32 {
        self.priority
    }
    pub fn tickets(&self) -> u64 {
        self.tickets
    }
    /// Index into [`Scenario::groups`].
    pub fn group(&self) -> Option<usize> {
        self.group
    }
    /// Initial placement / affinity: sorted, without repeats.
    pub fn cpus(&self) -> Option<&[usize]> {
        self.cpus.as_deref()
    }
    pub fn work(&self) -> &Work {
        &self.work
    }
    /// External command (`run` only; the simulator treats it as CPU-bound demand).
    pub fn command(&self) -> Option<&[String]> {
        self.command.as_deref()
    }
    /// Run and sleep phases each thread repeats (`None`: always runnable).
    pub fn pattern(&self) -> Option<&[Phase]> {
        self.pattern.as_deref()
    }
    /// 1-based line of the `[[process]]` entry in the file (0: made in code).
    pub fn line(&self) -> usize {
        self.line
    }

    pub fn with_name(mut self, name: impl Into<String>) -> Process {
        self.name = name.into();
        self
    }
    pub fn with_arrival(mut self, arrival: Nanos) -> Process {
        self.arrival = arrival;
        self
    }
    pub fn with_burst(mut self, burst: impl Into<Option<Nanos>>) -> Process {
        self.burst = burst.into();
        self
    }
    pub fn with_threads(mut self, threads: u32) -> Process {
        self.threads = threads;
        self
    }
    pub fn with_share(mut self, share: Share) -> Process {
        self.share = share;
        self
    }
    pub fn with_nice(self, nice: i32) -> Process {
        self.with_share(Share::Nice(nice))
    }
    pub fn with_weight(self, weight: u64) -> Process {
        self.with_share(Share::Weight(weight))
    }
    pub fn with_priority(mut self, priority: i32) -> Process {
        self.priority = priority;
        self
    }
    pub fn with_tickets(mut self, tickets: u64) -> Process {
        self.tickets = tickets;
        self
    }
    pub fn with_cpus(mut self, cpus: impl Into<Option<Vec<usize>>>) -> Process {
        self.cpus = cpus.into();
        self
    }
    pub fn with_work(mut self, work: Work) -> Process {
        self.work = work;
        self
    }
    pub fn with_command(mut self, command: impl Into<Option<Vec<String>>>) -> Process {
        self.command = command.into();
        self
    }
    pub fn with_pattern(mut self, pattern: impl Into<Option<Vec<Phase>>>) -> Process {
        self.pattern = pattern.into();
        self
    }
}

/// One phase of a thread's `pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Be runnable until this much CPU time was received.
    Run(Nanos),
    /// Block for this much wall-clock (simulated) time, then wake.
    Sleep(Nanos),
}

/// One `[[group]]` (tenant).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    pub(super) name: String,
    pub(super) weight: u64,
}

impl Group {
    /// A group made in code; checked when the scenario is built.
    pub fn new(name: impl Into<String>, weight: u64) -> Group {
        Group {
            name: name.into(),
            weight,
        }
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn weight(&self) -> u64 {
        self.weight
    }
    pub fn with_weight(mut self, weight: u64) -> Group {
        self.weight = weight;
        self
    }
}

/// One region of a periodic task's job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Region {
    /// Sequential work.
    Seq(Nanos),
    /// Parallel threads with these execution times; the next region starts when all finish.
    Par(Vec<Nanos>),
}

impl Region {
    /// Total execution time of the region.
    pub fn work(&self) -> Nanos {
        match self {
            Region::Seq(c) => *c,
            Region::Par(v) => Nanos(v.iter().map(|c| c.0).sum()),
        }
    }
}

/// One `[[task]]`: a periodic real-time task. Made in code with [`Task::new`], checked when
/// the scenario holding it is built.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Task {
    pub(super) name: String,
    pub(super) period: Nanos,
    /// Relative deadline (defaults to the period).
    pub(super) deadline: Nanos,
    /// First release.
    pub(super) offset: Nanos,
    pub(super) regions: Vec<Region>,
    pub(super) cpus: Option<Vec<usize>>,
    pub(super) line: usize,
}

impl Task {
    /// A task made in code: deadline = period, first release at 0, no affinity.
    pub fn new(name: impl Into<String>, period: Nanos, regions: Vec<Region>) -> Task {
        Task {
            name: name.into(),
            period,
            deadline: period,
            offset: Nanos::ZERO,
            regions,
            cpus: None,
            line: 0,
        }
    }
    pub fn with_deadline(mut self, deadline: Nanos) -> Task {
        self.deadline = deadline;
        self
    }
    pub fn with_offset(mut self, offset: Nanos) -> Task {
        self.offset = offset;
        self
    }
    pub fn with_cpus(mut self, cpus: impl Into<Option<Vec<usize>>>) -> Task {
        self.cpus = cpus.into();
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn period(&self) -> Nanos {
        self.period
    }
    /// Relative deadline.
    pub fn deadline(&self) -> Nanos {
        self.deadline
    }
    /// First release.
    pub fn offset(&self) -> Nanos {
        self.offset
    }
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }
    pub fn cpus(&self) -> Option<&[usize]> {
        self.cpus.as_deref()
    }
    /// 1-based line of the `[[task]]` entry in the file (0: made in code).
    pub fn line(&self) -> usize {
        self.line
    }

    /// Total execution time of one job.
    pub fn work(&self) -> Nanos {
        Nanos(self.regions.iter().map(|r| r.work().0).sum())
    }
    /// Utilisation C / T.
    pub fn utilisation(&self) -> f64 {
        self.work().0 as f64 / self.period.0 as f64
    }
    /// Critical path length: the longest chain through the regions.
    pub fn critical_path(&self) -> Nanos {
        Nanos(
            self.regions
                .iter()
                .map(|r| match r {
                    Region::Seq(c) => c.0,
                    Region::Par(v) => v.iter().map(|c| c.0).max().unwrap_or(0),
                })
                .sum(),
        )
    }
}

/// A validated scenario: made only by parsing ([`Scenario::parse`]) or by a
/// [`super::ScenarioBuilder`], both of which run the same checks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scenario {
    /// File the scenario came from (for messages).
    pub(super) file: String,
    /// Modelled cores (`sim`); `run` detects the machine.
    pub(super) cores: usize,
    pub(super) policy: PolicySpec,
    /// Stop time for unbounded work.
    pub(super) horizon: Nanos,
    pub(super) processes: Vec<Process>,
    pub(super) groups: Vec<Group>,
    pub(super) tasks: Vec<Task>,
}

impl Scenario {
    /// File the scenario came from (for messages).
    pub fn file(&self) -> &str {
        &self.file
    }
    /// Modelled cores (`sim`); `run` detects the machine.
    pub fn cores(&self) -> usize {
        self.cores
    }
    pub fn policy(&self) -> &PolicySpec {
        &self.policy
    }
    /// Stop time for unbounded work.
    pub fn horizon(&self) -> Nanos {
        self.horizon
    }
    pub fn processes(&self) -> &[Process] {
        &self.processes
    }
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Total threads across processes.
    pub fn total_threads(&self) -> usize {
        self.processes.iter().map(|p| p.threads as usize).sum()
    }

    /// Whether any work is unbounded (runs until the horizon).
    pub fn has_unbounded_work(&self) -> bool {
        !self.tasks.is_empty() || self.processes.iter().any(|p| p.burst.is_none())
    }

    /// A located error for an engine that cannot run this scenario's policy.
    pub fn policy_error(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.clone(),
            line: 0,
            column: 0,
            field: "policy.name".into(),
            message: message.into(),
        }
    }
}
