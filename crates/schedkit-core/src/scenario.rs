//! The scenario file: one TOML document that both engines (`sim` and `run`) read.
//!
//! Parsing happens in two steps. Serde turns the text into the `Raw*` structs, which reject
//! unknown keys and malformed values with the byte span of the offending value; then
//! [`Scenario::from_raw`] checks what serde cannot (duplicate names, groups that do not exist,
//! zero quanta, CPUs beyond `cores`) using the spans kept by `toml::Spanned`. Every error is a
//! [`ScenarioError`] naming file, line, column and field. After this module, nothing
//! downstream re-checks the scenario: a `Scenario` value is valid by construction.
//!
//! The format is documented key by key in `docs/scenario.md`.

use crate::time::{Bytes, Nanos};
use crate::weights::nice_to_weight;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// A scenario error with its location. Displayed as `file:line:col: field: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: `{}`: {}",
                self.file, self.line, self.column, self.field, self.message
            )
        }
    }
}

/// Every policy name the scenario format knows. Which engine runs which is decided by the
/// engines (`sim` rejects `run`-only policies with a located error, and vice versa).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    Fcfs,
    Sjf,
    Srtf,
    Rr,
    Priority,
    PriorityPreemptive,
    Lottery,
    Stride,
    Mlfq,
    Cfs,
    Eevdf,
    Pfs,
    Tfps,
    Twrs,
    GlobalFair,
    Tenants,
    Edf,
    Rm,
    Dm,
    Gedf,
    Pedf,
    Paws,
    Ws,
    SchedDeadline,
    Gang,
    Default,
    Exclusive,
    ProcessFair,
}

impl PolicyName {
    pub const ALL: &'static [PolicyName] = &[
        PolicyName::Fcfs,
        PolicyName::Sjf,
        PolicyName::Srtf,
        PolicyName::Rr,
        PolicyName::Priority,
        PolicyName::PriorityPreemptive,
        PolicyName::Lottery,
        PolicyName::Stride,
        PolicyName::Mlfq,
        PolicyName::Cfs,
        PolicyName::Eevdf,
        PolicyName::Pfs,
        PolicyName::Tfps,
        PolicyName::Twrs,
        PolicyName::GlobalFair,
        PolicyName::Tenants,
        PolicyName::Edf,
        PolicyName::Rm,
        PolicyName::Dm,
        PolicyName::Gedf,
        PolicyName::Pedf,
        PolicyName::Paws,
        PolicyName::Ws,
        PolicyName::SchedDeadline,
        PolicyName::Gang,
        PolicyName::Default,
        PolicyName::Exclusive,
        PolicyName::ProcessFair,
    ];

    /// The name as written in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Fcfs => "fcfs",
            PolicyName::Sjf => "sjf",
            PolicyName::Srtf => "srtf",
            PolicyName::Rr => "rr",
            PolicyName::Priority => "priority",
            PolicyName::PriorityPreemptive => "priority-preemptive",
            PolicyName::Lottery => "lottery",
            PolicyName::Stride => "stride",
            PolicyName::Mlfq => "mlfq",
            PolicyName::Cfs => "cfs",
            PolicyName::Eevdf => "eevdf",
            PolicyName::Pfs => "pfs",
            PolicyName::Tfps => "tfps",
            PolicyName::Twrs => "twrs",
            PolicyName::GlobalFair => "global-fair",
            PolicyName::Tenants => "tenants",
            PolicyName::Edf => "edf",
            PolicyName::Rm => "rm",
            PolicyName::Dm => "dm",
            PolicyName::Gedf => "gedf",
            PolicyName::Pedf => "pedf",
            PolicyName::Paws => "paws",
            PolicyName::Ws => "ws",
            PolicyName::SchedDeadline => "sched-deadline",
            PolicyName::Gang => "gang",
            PolicyName::Default => "default",
            PolicyName::Exclusive => "exclusive",
            PolicyName::ProcessFair => "process-fair",
        }
    }

    pub fn parse(s: &str) -> Option<PolicyName> {
        PolicyName::ALL.iter().copied().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[policy]`: the policy and every parameter any policy reads. Defaults are documented in
/// `docs/scenario.md` and applied here, so engines never guess.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicySpec {
    pub name: PolicyName,
    /// Time slice of RR, lottery, stride, MLFQ's top level, gang. Default 4 ms (100 ms for gang).
    pub quantum: Nanos,
    /// Seed of every random choice (lottery draws, generators). Default 1.
    pub seed: u64,
    /// CFS targeted latency. Default 6 ms (the kernel's `sched_latency_ns`).
    pub sched_latency: Nanos,
    /// CFS minimum granularity. Default 0.75 ms.
    pub min_granularity: Nanos,
    /// CFS load-balancing interval. Default 4 ms.
    pub balance_interval: Nanos,
    /// The scheduler tick (1 / CONFIG_HZ) of the `eevdf` model: a thread whose slice is used
    /// up is switched out at the next tick. Default 4 ms (HZ = 250).
    #[serde(skip_serializing_if = "is_default_tick")]
    pub tick: Nanos,
    /// Controller period (PFS/TFPS/TWRS readjustment, shuttle balancer, tenant weights).
    /// Default 100 ms.
    pub period: Nanos,
    /// Cost charged for every context switch in the simulator. Default 0.
    pub context_switch: Nanos,
    /// MLFQ: number of levels (default 3); quantum doubles per level.
    pub levels: u32,
    /// MLFQ: priority boost interval (default 1 s; 0 disables).
    pub boost: Nanos,
    /// CFS: percentage the busiest core's load must exceed the local one by before the
    /// balancer moves anything (the kernel's `imbalance_pct`, default 125 = 25 %).
    pub imbalance_pct: u32,
    /// Gang: charge every slot switch with seed 002's overhead model for a cluster of
    /// `cores / cores_per_node` nodes whose jobs communicate with this pattern. `None` (no
    /// `comm` key): switches are free.
    pub gang_overhead: Option<GangOverheadSpec>,
    /// `process-fair` and `tenants` on real cores: correct the cgroup weights every period
    /// so that measured shares follow GPS (the kernel splits a group's weight over CPUs by
    /// its load there, which biases the shares of groups of different thread counts).
    /// Default true; the simulator's groups are exact and ignore it.
    pub trim: bool,
}

/// `[policy] comm` and `cores_per_node`: the simulated cluster behind gang switch costs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GangOverheadSpec {
    /// Consecutive cores that form one node (default 1).
    pub cores_per_node: usize,
    #[serde(skip)]
    pub pattern: crate::gang_overhead::Pattern,
}

/// The default `tick`: HZ = 250.
pub const DEFAULT_TICK: Nanos = Nanos::from_ms(4);

/// Keeps `tick` out of serialised scenarios that do not set it (their outputs predate it).
fn is_default_tick(t: &Nanos) -> bool {
    *t == DEFAULT_TICK
}

impl PolicySpec {
    pub fn new(name: PolicyName) -> PolicySpec {
        PolicySpec {
            name,
            quantum: if name == PolicyName::Gang {
                Nanos::from_ms(100)
            } else {
                Nanos::from_ms(4)
            },
            seed: 1,
            sched_latency: Nanos::from_ms(6),
            min_granularity: Nanos::from_us(750),
            balance_interval: Nanos::from_ms(4),
            tick: DEFAULT_TICK,
            period: Nanos::from_ms(100),
            context_switch: Nanos::ZERO,
            levels: 3,
            boost: Nanos::from_secs(1),
            imbalance_pct: 125,
            gang_overhead: None,
            trim: true,
        }
    }
}

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

/// One `[[process]]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Process {
    pub name: String,
    pub arrival: Nanos,
    /// CPU demand per thread; `None` runs until the horizon.
    pub burst: Option<Nanos>,
    pub threads: u32,
    pub nice: i32,
    /// CFS weight per thread (from `weight`, or from `nice` via prio_to_weight).
    pub weight: u64,
    /// Smaller is more important.
    pub priority: i32,
    pub tickets: u64,
    /// Index into [`Scenario::groups`].
    pub group: Option<usize>,
    /// Initial placement / affinity.
    pub cpus: Option<Vec<usize>>,
    pub work: Work,
    /// External command (`run` only; the simulator treats it as CPU-bound demand).
    pub command: Option<Vec<String>>,
    /// Run and sleep phases each thread repeats (`None`: always runnable). `burst`, if given,
    /// still bounds the thread's total CPU time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Vec<Phase>>,
    /// 1-based line of the `[[process]]` entry in the file, for messages from engines.
    pub line: usize,
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
            nice: 0,
            weight: nice_to_weight(0),
            priority: 0,
            tickets: 1,
            group: None,
            cpus: None,
            work,
            command: None,
            pattern: None,
            line: 0,
        }
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
    pub name: String,
    pub weight: u64,
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

/// One `[[task]]`: a periodic real-time task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Task {
    pub name: String,
    pub period: Nanos,
    /// Relative deadline (defaults to the period).
    pub deadline: Nanos,
    /// First release.
    pub offset: Nanos,
    pub regions: Vec<Region>,
    pub cpus: Option<Vec<usize>>,
    pub line: usize,
}

impl Task {
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

/// A validated scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scenario {
    /// File the scenario came from (for messages).
    pub file: String,
    /// Modelled cores (`sim`); `run` detects the machine.
    pub cores: usize,
    pub policy: PolicySpec,
    /// Stop time for unbounded work.
    pub horizon: Nanos,
    pub processes: Vec<Process>,
    pub groups: Vec<Group>,
    pub tasks: Vec<Task>,
}

// ---------------------------------------------------------------------------------------------
// Raw serde layer

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    cores: Option<Spanned<i64>>,
    policy: Option<Spanned<RawPolicy>>,
    run: Option<RawRun>,
    #[serde(default)]
    process: Vec<Spanned<RawProcess>>,
    #[serde(default)]
    group: Vec<Spanned<RawGroup>>,
    #[serde(default)]
    task: Vec<Spanned<RawTask>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Spanned<String>,
    quantum: Option<Spanned<Nanos>>,
    seed: Option<u64>,
    sched_latency: Option<Spanned<Nanos>>,
    min_granularity: Option<Spanned<Nanos>>,
    balance_interval: Option<Spanned<Nanos>>,
    tick: Option<Spanned<Nanos>>,
    period: Option<Spanned<Nanos>>,
    context_switch: Option<Nanos>,
    levels: Option<Spanned<i64>>,
    boost: Option<Nanos>,
    imbalance_pct: Option<Spanned<i64>>,
    comm: Option<Spanned<String>>,
    cores_per_node: Option<Spanned<i64>>,
    trim: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    horizon: Option<Spanned<Nanos>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProcess {
    name: Spanned<String>,
    #[serde(default)]
    arrival: Nanos,
    burst: Option<Spanned<Nanos>>,
    threads: Option<Spanned<i64>>,
    nice: Option<Spanned<i64>>,
    weight: Option<Spanned<i64>>,
    priority: Option<i64>,
    tickets: Option<Spanned<i64>>,
    group: Option<Spanned<String>>,
    cpus: Option<Spanned<Vec<i64>>>,
    work: Option<Spanned<String>>,
    array: Option<Bytes>,
    stride: Option<Bytes>,
    compute: Option<Nanos>,
    command: Option<Spanned<Vec<String>>>,
    pattern: Option<Spanned<Vec<RawPhase>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    run: Option<Spanned<Nanos>>,
    sleep: Option<Spanned<Nanos>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: Spanned<String>,
    weight: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    name: Spanned<String>,
    period: Spanned<Nanos>,
    deadline: Option<Spanned<Nanos>>,
    #[serde(default)]
    offset: Nanos,
    regions: Option<Spanned<Vec<RawRegion>>>,
    /// Shorthand for `regions = [{ seq = wcet }]`.
    wcet: Option<Spanned<Nanos>>,
    cpus: Option<Spanned<Vec<i64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegion {
    seq: Option<Spanned<Nanos>>,
    par: Option<Spanned<Vec<Nanos>>>,
}

// ---------------------------------------------------------------------------------------------

/// Converts byte offsets to 1-based line and column.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
    /// Byte offset where each line starts, so a lookup is a binary search (scenarios with
    /// 10,000 processes must not parse in quadratic time).
    line_starts: Vec<usize>,
}

impl<'a> Locator<'a> {
    fn new(file: &'a str, text: &'a str) -> Locator<'a> {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Locator {
            file,
            text,
            line_starts,
        }
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let col = self.text[start..offset].chars().count() + 1;
        (line, col)
    }

    fn err(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ScenarioError {
        let (line, column) = self.line_col(span.start);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The key whose value starts at `offset`: the identifier before the nearest `=` to the
    /// left on the same line. Serde errors carry a span but not always the key name.
    fn key_at(&self, offset: usize) -> Option<String> {
        let offset = offset.min(self.text.len());
        let line_start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let before = &self.text[line_start..offset];
        let eq = before.rfind('=')?;
        let key = before[..eq]
            .trim_end()
            .rsplit(|c: char| c == '{' || c == ',' || c.is_whitespace())
            .next()?
            .trim();
        (!key.is_empty()).then(|| key.to_string())
    }
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: "file".into(),
            message: format!("cannot read scenario: {e}"),
        })?;
        Scenario::parse(&file, &text)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let loc = Locator::new(file, text);
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            // The TOML parser leaves the message empty for some syntax errors (a key with
            // no value at the end of the text); the user still needs a sentence.
            let msg = if msg.is_empty() {
                "invalid TOML here (a value is missing or malformed)".to_string()
            } else {
                msg
            };
            // `unknown field `x`` errors point at the key itself; others at the value.
            let field = msg
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string)
                .or_else(|| loc.key_at(span.start))
                .unwrap_or_else(|| "document".into());
            loc.err(span, &field, msg)
        })?;
        Scenario::from_raw(&loc, raw)
    }

    fn from_raw(loc: &Locator, raw: RawScenario) -> Result<Scenario, ScenarioError> {
        let cores = match &raw.cores {
            Some(c) if *c.get_ref() < 1 || *c.get_ref() > 1 << 20 => {
                return Err(loc.err(c.span(), "cores", "must be between 1 and 1048576"))
            }
            Some(c) => *c.get_ref() as usize,
            None => 1,
        };
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
        let mut names = HashSet::new();
        let mut processes: Vec<Process> = Vec::new();
        for p in raw.process {
            let entry_line = loc.line_col(p.span().start).0;
            let p = p.into_inner();
            check_name(loc, &p.name, "process.name", &mut names)?;
            let burst = match p.burst {
                Some(b) if b.get_ref().0 == 0 => {
                    return Err(loc.err(b.span(), "process.burst", "must be greater than zero"))
                }
                b => b.map(|b| *b.get_ref()),
            };
            let threads = match &p.threads {
                Some(t) if *t.get_ref() < 1 || *t.get_ref() > 1_000_000 => {
                    return Err(loc.err(
                        t.span(),
                        "process.threads",
                        "must be between 1 and 1000000",
                    ))
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
            let weight = match &p.weight {
                Some(w) => positive(loc, w, "process.weight")?,
                None => nice_to_weight(nice),
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
                                    "no [[group]] named \"{}\" (groups: {})",
                                    g.get_ref(),
                                    list_or_none(groups.iter().map(|x| x.name.as_str()))
                                ),
                            )
                        })?,
                ),
                None => None,
            };
            let cpus = check_cpus(loc, p.cpus.as_ref(), cores, "process.cpus")?;
            let work = match &p.work {
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
                            format!(
                                "unknown workload \"{other}\" (spin, stride, barrier, pingpong)"
                            ),
                        ))
                    }
                },
            };
            let command = match p.command {
                Some(c) if c.get_ref().is_empty() || c.get_ref()[0].is_empty() => {
                    return Err(loc.err(
                        c.span(),
                        "process.command",
                        "must name a program: command = [\"prog\", \"arg\"]",
                    ))
                }
                Some(c) => {
                    if p.work.is_some() {
                        return Err(loc.err(
                            c.span(),
                            "process.command",
                            "give either `work` or `command`, not both",
                        ));
                    }
                    Some(c.into_inner())
                }
                None => None,
            };
            let pattern = check_pattern(loc, p.pattern, &work, command.is_some())?;
            processes.push(Process {
                name: p.name.into_inner(),
                arrival: p.arrival,
                burst,
                threads,
                nice,
                weight,
                priority: p.priority.unwrap_or(0) as i32,
                tickets,
                group,
                cpus,
                work,
                command,
                pattern,
                line: entry_line,
            });
        }

        let mut tasks: Vec<Task> = Vec::new();
        for t in raw.task {
            let entry_span = t.span();
            let entry_line = loc.line_col(entry_span.start).0;
            let t = t.into_inner();
            check_name(loc, &t.name, "task.name", &mut names)?;
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
                                return Err(loc.err(s.span(), "task.regions.seq", "must be greater than zero"))
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
                            _ => {
                                return Err(loc.err(
                                    span.clone(),
                                    "task.regions",
                                    "each region is either { seq = \"2ms\" } or { par = [\"1ms\", \"3ms\"] }",
                                ))
                            }
                        });
                    }
                    out
                }
            };
            let cpus = check_cpus(loc, t.cpus.as_ref(), cores, "task.cpus")?;
            tasks.push(Task {
                name: t.name.into_inner(),
                period: *t.period.get_ref(),
                deadline,
                offset: t.offset,
                regions,
                cpus,
                line: entry_line,
            });
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

fn parse_policy(
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
                "unknown policy \"{}\" (known: {})",
                p.name.get_ref(),
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
fn check_name(
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

fn positive(loc: &Locator, v: &Spanned<i64>, field: &str) -> Result<u64, ScenarioError> {
    if *v.get_ref() < 1 {
        return Err(loc.err(v.span(), field, "must be a positive integer"));
    }
    Ok(*v.get_ref() as u64)
}

fn check_cpus(
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
fn check_pattern(
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

fn list_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<_> = names.collect();
    if v.is_empty() {
        "none defined".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ScenarioError {
        Scenario::parse("t.toml", text).unwrap_err()
    }

    #[test]
    fn minimal() {
        let s = Scenario::parse(
            "t.toml",
            "cores = 2\n[policy]\nname = \"rr\"\nquantum = \"4ms\"\n[[process]]\nname = \"a\"\nburst = \"8ms\"\n",
        )
        .unwrap();
        assert_eq!(s.cores, 2);
        assert_eq!(s.policy.quantum, Nanos::from_ms(4));
        assert_eq!(s.processes[0].burst, Some(Nanos::from_ms(8)));
        assert_eq!(s.processes[0].weight, 1024);
    }

    #[test]
    fn trim_is_on_unless_turned_off_and_must_be_a_boolean() {
        let base = "cores = 2\n[policy]\nname = \"process-fair\"\n";
        assert!(Scenario::parse("t.toml", base).unwrap().policy.trim);
        let off = Scenario::parse("t.toml", &format!("{base}trim = false\n")).unwrap();
        assert!(!off.policy.trim);
        let e = err(&format!("{base}trim = \"no\"\n"));
        assert_eq!(e.line, 4, "{e}");
        assert!(e.to_string().contains("trim"), "{e}");
    }

    #[test]
    fn errors_are_located() {
        let e = err("cores = 2\n[policy]\nname = \"rr\"\nquantum = \"0ms\"\n");
        assert_eq!((e.line, e.field.as_str()), (4, "policy.quantum"));
        let e = err("[policy]\nname = \"nope\"\n");
        assert_eq!((e.line, e.field.as_str()), (2, "policy.name"));
        let e = err("[[process]]\nname = \"a\"\nburst = \"8\"\n");
        assert_eq!(e.line, 3);
        assert_eq!(e.field, "burst");
        assert!(e.message.contains("missing unit"), "{e}");
        let e = err("[[process]]\nname = \"a\"\nbogus = 1\n");
        assert_eq!(e.field, "bogus");
        assert_eq!(e.line, 3);
        let e = err("[[process]]\nname = \"a\"\n[[process]]\nname = \"a\"\n");
        assert_eq!((e.line, e.field.as_str()), (4, "process.name"));
        let e = err("[[process]]\nname = \"a\"\ngroup = \"g\"\n");
        assert_eq!((e.line, e.field.as_str()), (3, "process.group"));
        let e = err("cores = 2\n[[process]]\nname = \"a\"\ncpus = [2]\n");
        assert_eq!((e.line, e.field.as_str()), (4, "process.cpus"));
        let e = err("[[process]]\nname = \"a\"\nburst = \"-3ms\"\n");
        assert!(e.message.contains("negative"), "{e}");
        let e = err("[policy]\nname = \"rr\"\nquantum = \"-4ms\"\n");
        assert_eq!((e.line, e.field.as_str()), (3, "quantum"));
    }

    #[test]
    fn patterns_parse_and_errors_are_located() {
        let base = "[[process]]\nname = \"s\"\n";
        let s = Scenario::parse(
            "t.toml",
            &format!("{base}pattern = [{{ run = \"2ms\" }}, {{ sleep = \"8ms\" }}]\n"),
        )
        .unwrap();
        assert_eq!(
            s.processes[0].pattern,
            Some(vec![
                Phase::Run(Nanos::from_ms(2)),
                Phase::Sleep(Nanos::from_ms(8))
            ])
        );
        for (text, field) in [
            ("pattern = []\n", "process.pattern"),
            ("pattern = [{ sleep = \"8ms\" }]\n", "process.pattern"),
            ("pattern = [{ run = \"0ms\" }]\n", "process.pattern.run"),
            (
                "pattern = [{ run = \"1ms\", sleep = \"1ms\" }]\n",
                "process.pattern",
            ),
            ("pattern = [{ run = \"1ms\" }, { nap = \"1ms\" }]\n", "nap"),
            (
                "work = \"barrier\"\npattern = [{ run = \"1ms\" }]\n",
                "process.pattern",
            ),
        ] {
            let e = err(&format!("{base}{text}"));
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.line >= 3, "{text}: {e}");
        }
        let e = err(&format!("{base}pattern = [{{ run = \"2\" }}]\n"));
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("missing unit"), "{e}");
    }

    #[test]
    fn tasks() {
        let s = Scenario::parse(
            "t.toml",
            "[[task]]\nname = \"t1\"\nperiod = \"100ms\"\nregions = [{ seq = \"2ms\" }, { par = [\"3ms\", \"1ms\", \"4ms\"] }, { seq = \"1ms\" }]\n",
        )
        .unwrap();
        let t = &s.tasks[0];
        assert_eq!(t.deadline, Nanos::from_ms(100));
        assert_eq!(t.work(), Nanos::from_ms(11));
        assert_eq!(t.critical_path(), Nanos::from_ms(7));
        let e = err("[[task]]\nname = \"t1\"\nperiod = \"10ms\"\nregions = [{ seq = \"1ms\", par = [\"1ms\"] }]\n");
        assert_eq!(e.field, "task.regions");
    }
}
