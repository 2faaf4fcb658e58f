//! One-command mode's flags and work already running (`schedkit run --policy fifo
//! --priority 10 --cpus 1 -- CMD`, `schedkit run --pid PID ...`): argument handling only;
//! the checks and the kernel calls are `schedkit_linux::oneshot` and `schedkit_linux::attach`.

use super::{bad, engine, RtThrottleArg, RunArgs};
use crate::failure::Failure;
use clap::{Args, ValueEnum};
use schedkit_core::Nanos;
use schedkit_linux::affinity::CpuSet;
use schedkit_linux::exclusive::{ExclusiveConfig, RtThrottle};
use schedkit_linux::oneshot::{Class, Request};
use std::path::PathBuf;

/// `--policy`: the kernel's scheduling classes.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ClassArg {
    /// SCHED_OTHER: the kernel's fair scheduler (with --nice).
    Other,
    /// SCHED_BATCH: fair, but treated as CPU-bound (fewer preemptions; with --nice).
    Batch,
    /// SCHED_IDLE: runs only when nothing else wants the CPU.
    Idle,
    /// SCHED_FIFO: real time, first in first out (with --priority).
    Fifo,
    /// SCHED_RR: real time, round robin among equal priorities (with --priority).
    Rr,
    /// SCHED_DEADLINE: runtime per period before a deadline (with --runtime, --period).
    Deadline,
}

impl From<ClassArg> for Class {
    fn from(c: ClassArg) -> Class {
        match c {
            ClassArg::Other => Class::Other,
            ClassArg::Batch => Class::Batch,
            ClassArg::Idle => Class::Idle,
            ClassArg::Fifo => Class::Fifo,
            ClassArg::Rr => Class::Rr,
            ClassArg::Deadline => Class::Deadline,
        }
    }
}

/// One-command mode's flags (`--policy`, `--nice`, `--cpus`, ...) and the targets of work
/// already running (`--pid`, `--cgroup`, `--unit`, `--for`).
#[derive(Args)]
pub struct OneArgs {
    /// One command (or --pid): its scheduling class, as `chrt` sets it; the command and every
    /// thread and child it starts run so. fifo and rr need --priority; deadline needs
    /// --runtime and --period.
    #[arg(long, value_enum, value_name = "CLASS")]
    pub policy: Option<ClassArg>,
    /// One command (or --pid): nice value, -20..19 (SCHED_OTHER and SCHED_BATCH).
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: Option<i32>,
    /// One command (or --pid): the CPUs it may run on, as `taskset -c` (a list: `1`,
    /// `0-1,4`); must be among the CPUs schedkit may use.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// --policy deadline: CPU time per period (`2ms`).
    #[arg(long, value_name = "DURATION")]
    pub runtime: Option<String>,
    /// --policy deadline: relative deadline (`5ms`); default: the period.
    #[arg(long, value_name = "DURATION")]
    pub deadline: Option<String>,
    /// --policy deadline: period (`10ms`).
    #[arg(long, value_name = "DURATION")]
    pub period: Option<String>,
    /// One command (or --pid, --cgroup, --unit): cgroup cpu weight, 1..10000 (v2 units, 100
    /// = a nice-0 process; written as cpu.shares = W*1024/100 where the cpu controller is on
    /// cgroup v1). Needs root.
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub weight: Option<u64>,
    /// Work already running: apply the flags (or --exclusive) to process PID, all its
    /// threads and the children it starts, until schedkit ends (Ctrl-C, --for, or PID
    /// exits); then undo. PID is never signalled, and `schedkit restore` after a kill of
    /// schedkit undoes the changes and leaves it running.
    #[arg(long, value_name = "PID", conflicts_with_all = ["cgroup", "unit", "file", "command"])]
    pub pid: Option<i32>,
    /// Work already running: an existing cgroup (a directory under a cgroup mount, or a
    /// path like `/system.slice/foo.service`): --weight writes its own weight; the other
    /// flags apply to every thread of its processes.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["unit", "file", "command"])]
    pub cgroup: Option<PathBuf>,
    /// Work already running: a systemd unit's cgroup (as --cgroup); needs systemd as PID 1.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["file", "command"])]
    pub unit: Option<String>,
    /// With --pid, --cgroup or --unit: undo after this long (`30s`); default: at Ctrl-C or
    /// SIGTERM, or when the work is gone.
    #[arg(long = "for", value_name = "DURATION")]
    pub for_: Option<String>,
}

/// A duration flag in nanoseconds.
pub(super) fn duration_ns(flag: &str, v: &Option<String>) -> Result<Option<u64>, Failure> {
    v.as_deref()
        .map(|t| {
            Nanos::parse(t)
                .map(|n| n.0)
                .map_err(|m| bad(format!("{flag}: {m}")))
        })
        .transpose()
}

/// One-command mode's flags as the library's [`Request`].
pub(super) fn request_of(a: &RunArgs) -> Result<Request, Failure> {
    Ok(Request {
        class: a.one.policy.map(Class::from),
        priority: a.priority,
        nice: a.one.nice,
        cpus: a
            .one
            .cpus
            .as_deref()
            .map(CpuSet::parse_list)
            .transpose()
            .map_err(|m| bad(format!("--cpus: {m}")))?,
        runtime: duration_ns("--runtime", &a.one.runtime)?,
        deadline: duration_ns("--deadline", &a.one.deadline)?,
        period: duration_ns("--period", &a.one.period)?,
        weight: a.one.weight,
        exclusive: a.exclusive,
    })
}

pub(super) fn exclusive_config(
    a: &RunArgs,
    system: Option<CpuSet>,
    priority: u32,
) -> ExclusiveConfig {
    ExclusiveConfig {
        system,
        priority,
        rt_throttle: match a.rt_throttle {
            RtThrottleArg::Keep => RtThrottle::Keep,
            RtThrottleArg::Off => RtThrottle::Off,
        },
        ..ExclusiveConfig::default()
    }
}

pub(super) fn wait_of(a: &RunArgs) -> Result<Option<std::time::Duration>, Failure> {
    Ok(match a.wait.as_deref() {
        None => None,
        Some("forever") => Some(std::time::Duration::MAX),
        Some(d) => Some(std::time::Duration::from_nanos(
            Nanos::parse(d).map_err(|m| bad(format!("--wait: {m}")))?.0,
        )),
    })
}

/// `schedkit run --pid PID | --cgroup PATH | --unit NAME [flags]`: work already running.
pub(super) fn attach(a: &RunArgs, req: Request) -> Result<(), Failure> {
    use schedkit_linux::attach::{self, AttachOptions, Target};
    for (given, flag) in [
        (a.horizon.is_some(), "--horizon (use --for DURATION)"),
        (
            a.keep_running,
            "--keep-running (attached work always keeps running)",
        ),
        (a.gantt.is_some(), "--gantt"),
        (a.trace.is_some(), "--trace"),
        (a.linux_json.is_some(), "--linux-json"),
        (a.stall_witness, "--stall-witness"),
        (a.report.json || a.report.csv, "--json/--csv"),
        (a.allow_degraded, "--allow-degraded"),
    ] {
        if given {
            return Err(bad(format!(
                "{flag}: does not apply to work already running (--pid, --cgroup, --unit); \
                    those runs change settings and report what they changed"
            )));
        }
    }
    if !req.has_placement() && !req.exclusive && req.priority.is_none() {
        return Err(bad(
            "nothing to apply: give --policy (with --priority or --nice), --nice, --cpus, \
                --weight or --exclusive",
        ));
    }
    if !req.exclusive && (a.system_cores.is_some() || matches!(a.rt_throttle, RtThrottleArg::Off)) {
        return Err(bad(
            "--system-cores and --rt-throttle apply to exclusive mode only (add --exclusive)",
        ));
    }
    let target = match (a.one.pid, &a.one.cgroup, &a.one.unit) {
        (Some(p), _, _) => Target::Pid(p),
        (_, Some(c), _) => Target::Cgroup(c.clone()),
        (_, _, Some(u)) => Target::Unit(u.clone()),
        _ => unreachable!("attach is called with a target"),
    };
    let roots = schedkit_linux::Roots::host();
    let topo = schedkit_linux::topo::Topology::read(&roots)?;
    let allowed = schedkit_linux::honest::allowed_cpus(&topo.online);
    let plan = req.plan(&allowed, &roots)?;
    let system = super::system_cores(a)?;
    let duration = duration_ns("--for", &a.one.for_)?.map(std::time::Duration::from_nanos);
    if duration.is_some_and(|d| d.is_zero()) {
        return Err(bad("--for: must be greater than zero"));
    }
    for n in plan.notes() {
        eprintln!("schedkit: note: {n}");
    }
    engine::install_signal_handlers();
    let bar = crate::progress::RunBar::new(
        false,
        "in force until --for passes, the work ends, or Ctrl-C (then undone)",
    );
    let notice_bar = bar.clone();
    let o = AttachOptions {
        target,
        exclusive: exclusive_config(a, system, a.priority.unwrap_or(99)),
        plan,
        duration,
        guard: schedkit_linux::guard::GuardOptions {
            wait: wait_of(a)?,
            restore_stale: a.restore_stale,
            keep_running: true,
            lease_dir: None,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        },
        roots,
        state_dir: schedkit_linux::journal::state_dir(),
        stop: Default::default(),
        notice: Some(Box::new(move |n| {
            // Printed once the changes are in force: from then on the spinner turns until
            // the end (--for, Ctrl-C, or the work is gone).
            notice_bar.eprintln(&format!("schedkit: {n}"));
            notice_bar.tick_every(std::time::Duration::from_millis(500));
        })),
    };
    let r = attach::run(o);
    bar.finish();
    print_attached(&r?)
}

/// What an attached run changed and undid (`schedkit_render::attach`); exit 1 when a change
/// could not be undone.
fn print_attached(r: &schedkit_linux::attach::AttachReport) -> Result<(), Failure> {
    for w in &r.warnings {
        eprintln!("schedkit: warning: {w}");
    }
    print!("{}", schedkit_render::attach::text(r));
    match schedkit_render::attach::failed_undos(r) {
        0 => Ok(()),
        failed => Err(Failure {
            status: 1,
            message: format!("{failed} change(s) could not be undone"),
        }),
    }
}

/// One command's flags, checked against the machine before anything starts (`None` for a
/// scenario FILE, which sets them per process).
pub(super) fn command_plan(
    a: &RunArgs,
    request: &Request,
) -> Result<Option<schedkit_linux::oneshot::Plan>, Failure> {
    if a.one.for_.is_some() {
        return Err(bad(
            "--for applies to work already running (--pid, --cgroup, --unit); a run schedkit \
             starts stops at --horizon",
        ));
    }
    if request.has_placement() && a.command.is_empty() {
        return Err(bad(
            "--policy, --nice, --cpus, --weight and --runtime/--deadline/--period apply to one \
             command (after `--`) or to work already running (--pid, --cgroup, --unit); a \
             scenario file sets them per process",
        ));
    }
    if a.file.is_some() || a.command.is_empty() {
        return Ok(None);
    }
    let topo = schedkit_linux::topo::Topology::host()?;
    let allowed = schedkit_linux::honest::allowed_cpus(&topo.online);
    Ok(Some(
        request.plan(&allowed, &schedkit_linux::Roots::host())?,
    ))
}

/// Says what the command gets, and has the engine apply it before the command execs.
pub(super) fn before_exec(
    opts: &mut engine::RunOptions,
    plan: schedkit_linux::oneshot::Plan,
    cmd: &str,
) {
    eprintln!("schedkit: {cmd} runs with {}", plan.describe());
    for n in plan.notes() {
        eprintln!("schedkit: note: {n}");
    }
    let roots = opts.roots.clone();
    opts.before_exec = Some(Box::new(move |pid, journal| {
        plan.apply_before_exec(&roots, journal, pid)
    }));
}
