//! One-command mode: what `chrt`, `taskset`, `renice` and `systemd-run -p CPUWeight=` do,
//! as flags of `schedkit run -- CMD` (and of `schedkit run --pid PID`, [`crate::attach`]).
//!
//! A [`Request`] is what the user typed; [`Request::plan`] checks it against the machine
//! before anything changes and turns it into a [`Plan`], or refuses:
//!
//! - [`Error::Input`] (exit 2) for a bad combination: `--priority` without a real-time class,
//!   `--nice` with a class that has no nice value, deadline parameters without
//!   `--policy deadline` or out of order, CPUs outside the set this process may use;
//! - [`Error::Privilege`] (exit 3) for a missing right (CAP_SYS_NICE for real-time classes
//!   and negative nice, root for a cgroup) or a missing kernel feature (SCHED_DEADLINE, a
//!   cpu controller).
//!
//! Nothing is dropped: every field of a `Plan` is applied, or the run fails.
//!
//! ## How a new command gets it
//!
//! The command is forked held at its start gate ([`crate::spawn`]); [`Plan::apply_before_exec`]
//! puts it into its weight cgroup, sets its affinity and its class on that one task, and
//! only then is it released to exec. Everything it creates later (threads, children,
//! grandchildren) inherits class, nice, affinity and cgroup from its creator, so the whole
//! tree runs as asked without schedkit touching it again, and a command that changes its
//! own settings later (a `chrt` inside the script) keeps its choice.
//!
//! One exception is the kernel's: a SCHED_DEADLINE task may not fork (`fork` fails with
//! EAGAIN) unless it carries `SCHED_FLAG_RESET_ON_FORK`, and then its children start in
//! SCHED_OTHER. schedkit sets the flag (a shell or any program that starts a helper would
//! otherwise fail), and [`Plan::notes`] says so.
//!
//! ## Weight
//!
//! `--weight W` (cgroup v2 units, 1..10000, 100 = a nice-0 process) puts the command in a
//! cgroup of its own, `<cpu mount>/schedkit-<pid>`, beside the machine's top-level groups,
//! with `cpu.weight = W` on cgroup v2, or `cpu.shares = W * 1024 / 100` where the cpu
//! controller is on cgroup v1 (detected by [`crate::cgroup::detect`]). The directory is
//! journaled before it is made ([`crate::journal::Entry::Cgroup`]), so a run's end, a signal
//! or `schedkit restore` removes it.

use crate::affinity::CpuSet;
use crate::cgroup::{self, CpuController};
use crate::journal::{Entry, Journal};
use crate::privilege::Privileges;
use crate::sched::{self, Policy};
use crate::{Error, Result, Roots};
use std::path::{Path, PathBuf};

/// `sched_attr.sched_flags`: children start in SCHED_OTHER (and a SCHED_DEADLINE task may
/// fork at all).
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// `--policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

impl Class {
    pub fn flag_name(self) -> &'static str {
        match self {
            Class::Other => "other",
            Class::Batch => "batch",
            Class::Idle => "idle",
            Class::Fifo => "fifo",
            Class::Rr => "rr",
            Class::Deadline => "deadline",
        }
    }
}

/// What the user asked for on the command line (durations in ns).
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub class: Option<Class>,
    pub priority: Option<u32>,
    pub nice: Option<i32>,
    pub cpus: Option<CpuSet>,
    pub runtime: Option<u64>,
    pub deadline: Option<u64>,
    pub period: Option<u64>,
    /// cgroup v2 units.
    pub weight: Option<u64>,
    pub exclusive: bool,
}

/// What will be applied: every field, or nothing (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The class with its parameters.
    pub class: Option<Policy>,
    /// Only `--nice` was given: keep each thread's class (OTHER or BATCH) and set its nice.
    pub nice_only: bool,
    pub cpus: Option<CpuSet>,
    pub weight: Option<u64>,
    /// Exclusive mode (its priority is `class`'s, SCHED_FIFO).
    pub exclusive: bool,
}

impl Request {
    /// Whether any one-command flag (other than `--exclusive` and `--priority`, which
    /// scenario runs have too) was given.
    pub fn has_placement(&self) -> bool {
        self.class.is_some()
            || self.nice.is_some()
            || self.cpus.is_some()
            || self.runtime.is_some()
            || self.deadline.is_some()
            || self.period.is_some()
            || self.weight.is_some()
    }

    /// Checks the request (module docs); `allowed` is the set of CPUs this process may use.
    pub fn plan(&self, allowed: &CpuSet, roots: &Roots) -> Result<Plan> {
        self.check_combinations()?;
        let class = self.class_and_cpus(allowed)?;
        self.check_machine(&class, roots)?;
        Ok(Plan {
            class,
            nice_only: self.class.is_none() && self.nice.is_some() && !self.exclusive,
            cpus: self.cpus.clone(),
            weight: self.weight,
            exclusive: self.exclusive,
        })
    }

    /// The flags that cannot go together (exit 2).
    fn check_combinations(&self) -> Result<()> {
        let input = |m: String| Err(Error::Input(m));
        let dl_given = self.runtime.is_some() || self.deadline.is_some() || self.period.is_some();
        if self.exclusive {
            // Exclusive mode decides class and CPUs itself: say which flags cannot join it.
            if let Some(c) = self.class.filter(|c| *c != Class::Fifo) {
                return input(format!(
                    "--policy {}: exclusive mode runs the job SCHED_FIFO (give --priority to \
                     choose its priority, or leave out --exclusive)",
                    c.flag_name()
                ));
            }
            for (given, flag, why) in [
                (
                    self.cpus.is_some(),
                    "--cpus",
                    "exclusive mode gives the job every CPU but the system ones; choose those with --system-cores",
                ),
                (
                    self.nice.is_some(),
                    "--nice",
                    "exclusive mode runs the job SCHED_FIFO, which has no nice value",
                ),
                (
                    self.weight.is_some(),
                    "--weight",
                    "a cpu weight does not act on SCHED_FIFO threads",
                ),
                (
                    dl_given,
                    "--runtime/--deadline/--period",
                    "they belong to --policy deadline",
                ),
            ] {
                if given {
                    return input(format!("{flag} cannot be combined with --exclusive: {why}"));
                }
            }
        }
        if let Some(p) = self.priority {
            if !(1..=99).contains(&p) {
                return input(format!("--priority {p}: out of range (1..99)"));
            }
            match self.class {
                Some(Class::Fifo | Class::Rr) => {}
                None if self.exclusive => {}
                Some(c) => {
                    return input(format!(
                        "--priority applies to --policy fifo and rr; `{}` has no real-time \
                         priority{}",
                        c.flag_name(),
                        if matches!(c, Class::Other | Class::Batch) {
                            " (use --nice)"
                        } else {
                            ""
                        }
                    ))
                }
                None => {
                    return input(
                        "--priority needs a real-time class: add --policy fifo or --policy rr \
                         (or --exclusive)"
                            .into(),
                    )
                }
            }
        }
        if let Some(n) = self.nice {
            if !(-20..=19).contains(&n) {
                return input(format!("--nice {n}: out of range (-20..19)"));
            }
            if let Some(c) = self
                .class
                .filter(|c| !matches!(c, Class::Other | Class::Batch))
            {
                return input(format!(
                    "--nice applies to --policy other and batch; `{}` has no nice value",
                    c.flag_name()
                ));
            }
        }
        if dl_given && self.class != Some(Class::Deadline) {
            return input("--runtime, --deadline and --period belong to --policy deadline".into());
        }
        Ok(())
    }

    /// The class with its parameters, and the CPUs checked against `allowed` (exit 2).
    fn class_and_cpus(&self, allowed: &CpuSet) -> Result<Option<Policy>> {
        let input = |m: String| Err(Error::Input(m));
        let class = match self.class {
            None if self.exclusive => Some(Policy::Fifo {
                priority: self.priority.unwrap_or(99),
            }),
            None => self.nice.map(|nice| Policy::Other { nice }),
            Some(Class::Other) => Some(Policy::Other {
                nice: self.nice.unwrap_or(0),
            }),
            Some(Class::Batch) => Some(Policy::Batch {
                nice: self.nice.unwrap_or(0),
            }),
            Some(Class::Idle) => Some(Policy::Idle),
            Some(Class::Fifo) if self.exclusive => Some(Policy::Fifo {
                priority: self.priority.unwrap_or(99),
            }),
            Some(c @ (Class::Fifo | Class::Rr)) => {
                let Some(priority) = self.priority else {
                    return input(format!(
                        "--policy {} needs --priority N (1..99), as chrt does",
                        c.flag_name()
                    ));
                };
                Some(if c == Class::Fifo {
                    Policy::Fifo { priority }
                } else {
                    Policy::Rr { priority }
                })
            }
            Some(Class::Deadline) => {
                let (Some(runtime), Some(period)) = (self.runtime, self.period) else {
                    return input(
                        "--policy deadline needs --runtime and --period (and --deadline, which \
                         defaults to the period), e.g. --runtime 2ms --period 10ms"
                            .into(),
                    );
                };
                let deadline = self.deadline.unwrap_or(period);
                if self.cpus.is_some() {
                    return input(
                        "--cpus cannot be combined with --policy deadline: the kernel admits a \
                         SCHED_DEADLINE task only with an affinity that spans its whole root \
                         domain (give it its own CPUs with an exclusive cpuset instead)"
                            .into(),
                    );
                }
                Some(Policy::Deadline {
                    runtime,
                    deadline,
                    period,
                })
            }
        };
        if let Some(c) = &class {
            c.validate().map_err(|e| {
                Error::Input(match c {
                    Policy::Deadline { .. } => format!("--runtime/--deadline/--period: {e}"),
                    _ => e.to_string(),
                })
            })?;
        }
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return input("--cpus: the list is empty".into());
            }
            let outside = cpus.difference(allowed);
            if !outside.is_empty() {
                return input(format!(
                    "--cpus {}: CPU(s) {} are not among the CPUs this process may use ({}: \
                     online CPUs narrowed by its affinity or cpuset)",
                    cpus.to_list(),
                    outside.to_list(),
                    allowed.to_list()
                ));
            }
        }
        if let Some(w) = self.weight {
            if !(1..=10_000).contains(&w) {
                return input(format!(
                    "--weight {w}: out of range (1..10000, cgroup v2 cpu.weight units; 100 is a \
                     nice-0 process)"
                ));
            }
            if matches!(
                class,
                Some(Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. })
            ) {
                return input(
                    "--weight: a cgroup's cpu weight shares time between SCHED_OTHER/BATCH/IDLE \
                     tasks only; it does not act on real-time or deadline classes"
                        .into(),
                );
            }
        }
        Ok(class)
    }

    /// What the machine must allow for `class` and the other flags (exit 3).
    fn check_machine(&self, class: &Option<Policy>, roots: &Roots) -> Result<()> {
        let privs = Privileges::current();
        let may_nice = privs.root || privs.sys_nice;
        if let Some(c) = class {
            if c.needs_cap_sys_nice() && !may_nice {
                return Err(Error::Privilege(format!(
                    "{} needs CAP_SYS_NICE: {}",
                    c.name_with_priority(),
                    Privileges::HOW_TO_NICE
                )));
            }
            if matches!(c, Policy::Deadline { .. }) && !kernel_has_deadline() {
                return Err(Error::Privilege(
                    "this kernel has no SCHED_DEADLINE (sched_get_priority_max(SCHED_DEADLINE) \
                     failed)"
                        .into(),
                ));
            }
        }
        if self.exclusive && !may_nice {
            return Err(Error::Privilege(format!(
                "--exclusive needs real-time scheduling (CAP_SYS_NICE): {}",
                Privileges::HOW_TO_NICE
            )));
        }
        if self.weight.is_some() {
            if !privs.root {
                return Err(Error::Privilege(
                    "--weight creates a cgroup under the cpu controller's mount: run as root"
                        .into(),
                ));
            }
            if cgroup::detect(roots).is_none() {
                return Err(Error::Privilege(
                    "--weight: no cgroup hierarchy with the cpu controller is mounted (neither a \
                     cgroup2 mount listing `cpu` nor a v1 mount with the `cpu` option)"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// The scenario of a one-liner (`schedkit run -- CMD`): one process named after the
/// command's file name, running `cmd` under `policy` until `horizon`, on as many cores as
/// this process may use (a `taskset` around schedkit narrows them, on purpose).
pub fn command_scenario(
    cmd: &[String],
    policy: schedkit_core::PolicyName,
    horizon: schedkit_core::Nanos,
) -> std::result::Result<schedkit_core::Scenario, schedkit_core::ScenarioError> {
    use schedkit_core::scenario::{PolicySpec, Process, Work};
    let name = Path::new(&cmd[0])
        .file_name()
        .map_or(cmd[0].clone(), |n| n.to_string_lossy().to_string());
    let cores =
        crate::topo::Topology::host().map_or(1, |t| crate::honest::allowed_cpus(&t.online).len());
    schedkit_core::Scenario::builder("command line")
        .with_cores(cores)
        .with_policy(PolicySpec::new(policy))
        .with_horizon(horizon)
        .process(Process::new(name, 1, Work::Spin).with_command(cmd.to_vec()))
        .build()
}

/// Whether the kernel knows SCHED_DEADLINE.
pub fn kernel_has_deadline() -> bool {
    // SAFETY: a plain query.
    unsafe { libc::sched_get_priority_max(6) >= 0 }
}

impl Plan {
    /// `SCHED_FIFO 10, CPUs 1, weight 200` (or `the kernel's defaults`).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.exclusive {
            parts.push("exclusive mode".to_string());
        }
        match (&self.class, self.nice_only) {
            (Some(Policy::Other { nice }), true) => parts.push(format!("nice {nice}")),
            (
                Some(Policy::Deadline {
                    runtime,
                    deadline,
                    period,
                }),
                _,
            ) => parts.push(format!(
                "SCHED_DEADLINE runtime {runtime} ns, deadline {deadline} ns, period {period} ns"
            )),
            (Some(c), _) => parts.push(c.name_with_priority()),
            (None, _) => {}
        }
        if let Some(c) = &self.cpus {
            parts.push(format!("CPUs {}", c.to_list()));
        }
        if let Some(w) = self.weight {
            parts.push(format!("cpu weight {w}"));
        }
        if parts.is_empty() {
            "the kernel's defaults".into()
        } else {
            parts.join(", ")
        }
    }

    /// What the user should know about how the plan acts (not errors).
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if matches!(self.class, Some(Policy::Deadline { .. })) {
            out.push(
                "SCHED_DEADLINE is set with SCHED_FLAG_RESET_ON_FORK: the kernel lets a \
                 deadline task fork only so, and its children and threads start in SCHED_OTHER"
                    .into(),
            );
        }
        out
    }

    /// `sched_attr.sched_flags` for the class.
    pub fn sched_flags(&self) -> u64 {
        match self.class {
            Some(Policy::Deadline { .. }) => SCHED_FLAG_RESET_ON_FORK,
            _ => 0,
        }
    }

    /// Applies the plan to a command held at its start gate (pid `pid`, one thread, not yet
    /// exec'ed): cgroup first (v1 refuses to move a real-time task into a new group), then
    /// CPUs, then class. Everything it starts later inherits all three.
    pub fn apply_before_exec(
        &self,
        roots: &Roots,
        journal: Option<&mut Journal>,
        pid: i32,
    ) -> Result<()> {
        if let Some(w) = self.weight {
            let j = journal.ok_or_else(|| {
                Error::Input(
                    "--weight needs a journaled run (it cannot be combined with --keep-running)"
                        .into(),
                )
            })?;
            let g = WeightGroup::create(roots, j, w, None)?;
            g.attach(pid)?;
        }
        if let Some(c) = &self.cpus {
            crate::affinity::set_thread(pid, c).map_err(|e| privilege_of(e, "set the CPUs of"))?;
        }
        if let Some(c) = self.class {
            set_class(pid, c, self.sched_flags())?;
        }
        Ok(())
    }
}

/// `sched_setattr` with the errors a user can act on: EPERM is a missing right (exit 3),
/// EBUSY of SCHED_DEADLINE is the kernel's admission control (exit 3).
pub fn set_class(tid: i32, c: Policy, flags: u64) -> Result<()> {
    match sched::set_thread_with_flags(tid, c, flags) {
        Err(e) if e.errno() == Some(libc::EBUSY) && matches!(c, Policy::Deadline { .. }) => {
            Err(Error::Privilege(format!(
                "the kernel's admission control refused {} for task {tid} (EBUSY): the \
                 deadline bandwidth free on these CPUs (kernel/sched_rt_runtime_us of \
                 kernel/sched_rt_period_us, less what other deadline tasks hold) is smaller \
                 than runtime/period",
                c.name_with_priority()
            )))
        }
        r => r,
    }
}

/// An EPERM of another task turned into a missing right (exit 3).
pub fn privilege_of(e: Error, what: &str) -> Error {
    if e.errno() == Some(libc::EPERM) {
        Error::Privilege(format!(
            "not permitted to {what} another user's task ({e}): {}",
            Privileges::HOW_TO_NICE
        ))
    } else {
        e
    }
}

/// A cgroup of the run's, `<cpu mount>/schedkit-<pid>`, with a cpu weight.
pub struct WeightGroup {
    pub ctl: CpuController,
    pub path: PathBuf,
}

impl WeightGroup {
    /// Journals and creates the group with `weight` (v2 units). Tasks still inside at undo
    /// go back to `back` (a cgroup directory of the same hierarchy; default: the one
    /// schedkit itself sits in).
    pub fn create(
        roots: &Roots,
        journal: &mut Journal,
        weight: u64,
        back: Option<PathBuf>,
    ) -> Result<WeightGroup> {
        let ctl = cgroup::detect(roots).ok_or_else(|| {
            Error::Privilege("no cgroup hierarchy with the cpu controller is mounted".into())
        })?;
        let back = match back {
            Some(b) => b,
            None => {
                let me = std::process::id() as i32;
                let rel = cgroup::cgroup_of(roots, &ctl, me).unwrap_or_else(|| "/".into());
                ctl.mount().join(rel.strip_prefix("/").unwrap_or(&rel))
            }
        };
        let path = ctl.mount().join(format!("schedkit-{}", std::process::id()));
        journal.record(Entry::Cgroup {
            path: path.clone(),
            tasks_file: ctl.tasks_file().into(),
            back,
        })?;
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("mkdir {}", path.display()), e)),
        }
        let file = match ctl {
            CpuController::V2(_) => "cpu.weight",
            CpuController::V1(_) => "cpu.shares",
        };
        let value = ctl.weight_value(weight).to_string();
        std::fs::write(path.join(file), &value)
            .map_err(|e| Error::io(format!("write {value} to {}", path.join(file).display()), e))?;
        Ok(WeightGroup { ctl, path })
    }

    /// Moves task `id` in (v1: a thread id; v2: a whole process).
    pub fn attach(&self, id: i32) -> Result<()> {
        write_task(&self.path, self.ctl.tasks_file(), id)
    }
}

/// Writes `id` into `dir/tasks_file`; a task gone meanwhile is not an error.
pub fn write_task(dir: &Path, tasks_file: &str, id: i32) -> Result<()> {
    let f = dir.join(tasks_file);
    match std::fs::write(&f, id.to_string()) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(Error::Input(format!(
            "cannot move task {id} into {} (EINVAL): cgroup v1 refuses a real-time task in a \
             group without real-time runtime; --weight acts on SCHED_OTHER tasks only",
            dir.display()
        ))),
        Err(e) => Err(Error::io(format!("write {id} to {}", f.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> CpuSet {
        CpuSet::parse_list("0-1").unwrap()
    }

    fn plan(r: Request) -> Result<Plan> {
        r.plan(&all(), &Roots::host())
    }

    fn input_err(r: Request) -> String {
        match plan(r) {
            Err(Error::Input(m)) => m,
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn bad_combinations_are_input_errors() {
        assert!(input_err(Request {
            priority: Some(10),
            ..Default::default()
        })
        .contains("--policy fifo"));
        assert!(input_err(Request {
            class: Some(Class::Batch),
            priority: Some(10),
            ..Default::default()
        })
        .contains("no real-time priority"));
        assert!(input_err(Request {
            class: Some(Class::Fifo),
            ..Default::default()
        })
        .contains("needs --priority"));
        assert!(input_err(Request {
            class: Some(Class::Fifo),
            priority: Some(100),
            ..Default::default()
        })
        .contains("out of range"));
        assert!(input_err(Request {
            class: Some(Class::Rr),
            priority: Some(5),
            nice: Some(3),
            ..Default::default()
        })
        .contains("no nice value"));
        assert!(input_err(Request {
            runtime: Some(1_000_000),
            ..Default::default()
        })
        .contains("--policy deadline"));
        assert!(input_err(Request {
            class: Some(Class::Deadline),
            runtime: Some(5_000_000),
            period: Some(1_000_000),
            ..Default::default()
        })
        .contains("runtime"));
        assert!(input_err(Request {
            cpus: Some(CpuSet::parse_list("7").unwrap()),
            ..Default::default()
        })
        .contains("not among the CPUs"));
        assert!(input_err(Request {
            exclusive: true,
            class: Some(Class::Rr),
            priority: Some(5),
            ..Default::default()
        })
        .contains("exclusive mode runs the job SCHED_FIFO"));
        assert!(input_err(Request {
            exclusive: true,
            cpus: Some(CpuSet::single(1)),
            ..Default::default()
        })
        .contains("--system-cores"));
        assert!(input_err(Request {
            class: Some(Class::Fifo),
            priority: Some(5),
            weight: Some(200),
            ..Default::default()
        })
        .contains("does not act on real-time"));
        assert!(input_err(Request {
            weight: Some(0),
            ..Default::default()
        })
        .contains("1..10000"));
    }

    #[test]
    fn good_requests_plan_every_flag() {
        // Classes that need no privilege plan anywhere.
        let p = plan(Request {
            class: Some(Class::Batch),
            nice: Some(5),
            cpus: Some(CpuSet::single(0)),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.class, Some(Policy::Batch { nice: 5 }));
        assert_eq!(p.cpus, Some(CpuSet::single(0)));
        assert_eq!(p.describe(), "SCHED_BATCH nice 5, CPUs 0");
        let p = plan(Request {
            nice: Some(7),
            ..Default::default()
        })
        .unwrap();
        assert!(p.nice_only);
        assert_eq!(p.describe(), "nice 7");
        let p = plan(Request {
            class: Some(Class::Idle),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(p.class, Some(Policy::Idle));
    }
}
