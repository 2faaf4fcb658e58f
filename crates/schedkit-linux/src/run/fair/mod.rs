//! The fair-share policies on real threads: [`FairRun`], the controller loop, and
//! [`FairReport`], what it did; the control socket in [`ctl`], the host's side in
//! [`apply`].

mod apply;
mod ctl;
mod trim_host;
mod usage;

use super::host::Host;
use super::policy::RunPolicy;
use super::sampler::{SamplerReport, Track};
use crate::affinity::CpuSet;
use crate::journal::Journal;
use crate::privilege::Privileges;
use crate::sched::{self, Policy};
use crate::workload::{self};
use crate::{Error, Result, Roots};
use apply::FairApply;
use schedkit_core::control::{Entity, ThreadView};
use schedkit_core::controllers::trim::{self, Trim};
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_core::trace::Event;
use schedkit_core::Nanos;
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// The calling thread raised to SCHED_FIFO for a while; its class is put back on drop.
struct RaisedClass(Policy);

impl RaisedClass {
    /// `None` when the class could not be changed (no CAP_SYS_NICE).
    fn fifo(priority: u32) -> Option<RaisedClass> {
        let old = sched::get_thread(0).ok()?;
        sched::set_thread(0, Policy::Fifo { priority }).ok()?;
        Some(RaisedClass(old))
    }
}

impl Drop for RaisedClass {
    fn drop(&mut self) {
        let _ = sched::set_thread(0, self.0);
    }
}

/// What the fair-share policies did during a run (`schedkit run` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct FairReport {
    pub policy: String,
    pub period_ns: u64,
    /// Controller ticks run.
    pub ticks: u64,
    /// CPU time of the controller loop itself (snapshot, controller, applying its actions,
    /// override checks), the engine thread's CPU clock read around every tick.
    pub controller_cpu_ns: u64,
    /// Run length, for `controller_cpu_ns` as a share of one core.
    pub wall_ns: u64,
    /// Threads the controller saw at its last tick (most at any tick).
    pub max_threads: usize,
    /// `cgroup v1 cpu.shares at /sys/fs/cgroup/cpu/schedkit-123`, when cgroups were used.
    pub cgroups: Option<String>,
    /// Each cgroup's key and final weight (v2 units).
    pub cgroup_weights: Vec<(String, u64)>,
    /// setpriority calls made for `SetWeight`.
    pub nice_changes: u64,
    /// Threads found with a nice value they set themselves, set back.
    pub overrides: u64,
    /// The first few overrides, in words.
    pub first_overrides: Vec<String>,
    /// sched_setaffinity calls made for `Migrate`.
    pub migrations: u64,
    /// Group weight changes through `schedkit ctl`, in order.
    pub weight_changes: Vec<crate::ctl::WeightChange>,
    pub ctl_socket: Option<PathBuf>,
    /// Control connections refused for their peer credentials.
    pub ctl_refused: u64,
    /// The sampler's own cost, beside the controller's.
    pub sampler: Option<SamplerReport>,
    /// The share trim's final correction factor per top-level cgroup (empty: no trim).
    pub trim_factors: Vec<(String, f64)>,
    /// Cgroup weight writes the trim made.
    pub trim_writes: u64,
    /// Where the trim read each entity's CPU time at the end (`cgroup v1 cpuacct.usage (own
    /// groups)`, say); `None`: the sampler's per-thread readings (or no trim).
    pub trim_source: Option<String>,
    /// Each trim entity's CPU time over the run by the kernel's own per-cgroup accounting
    /// (`trim_source`): `process_cpu_ns` summed per entity. Empty without that accounting.
    pub entity_cpu_ns: Vec<(String, u64)>,
    /// Each scenario process's CPU time over the run window by the kernel's own per-cgroup
    /// accounting (`cpu_accounting`), every task counted, ended ones too, read when the
    /// window ended (before the job was torn down); `None` where it could not be read. Empty
    /// without that accounting. The report's shares and lag of these processes are of this
    /// count ([`crate::honest::report`]).
    pub process_cpu_ns: Vec<Option<u64>>,
    /// What counted `process_cpu_ns` (`cgroup v2 cpu.stat`, say).
    pub cpu_accounting: Option<String>,
}

impl FairReport {
    /// Controller CPU as a percentage of one core over the run.
    pub fn controller_cpu_pct(&self) -> f64 {
        100.0 * self.controller_cpu_ns as f64 / self.wall_ns.max(1) as f64
    }
}

/// The controller loop of the fair-share policies on real threads.
///
/// Every `policy.period` (first at the first sample after time 0) it builds the controller
/// [`Snapshot`](schedkit_core::control::Snapshot) from the sampler's latest `/proc` readings
/// (threads come and go: every live thread the sampler tracks, its last CPU, runnable or not,
/// its CPU time), runs the *same* controller the simulator runs, and applies its actions:
///
/// - `SetWeight`: the nearest nice value (`weights::nearest_nice`, the kernel's prio_to_weight
///   table) with setpriority on the TID; the thread's original class is journaled the first
///   time, so undo (or `schedkit restore`) puts its nice value back. Before each tick every
///   thread's nice is read back: one the thread changed itself is set back and counted;
/// - `Migrate`: sched_setaffinity to that one CPU (first change journaled per thread);
/// - `SetGroupWeight`: the group's cgroup weight (tenants), also what `schedkit ctl
///   set-weight` does, recorded in the trace as `GroupWeightChange` and in the report.
///
/// With cgroups carrying the tenant weights, the tenants controller's per-thread `SetWeight`
/// (its model of the same hierarchy on one flat run queue) is not applied: the kernel's group
/// scheduling does that split itself, and both together would count the weights twice.
/// `Stop`/`Resume` belong to gang scheduling, which has its own loop
/// ([`GangRun`](super::GangRun)).
pub struct FairRun {
    policy: String,
    /// The controller, hosted by the one host ([`Host`]).
    host: Option<Host>,
    period: u64,
    pub(super) next_tick: u64,
    cgroups: Option<crate::cgroup::CpuGroups>,
    /// Cgroup of each scenario process.
    cg_of_process: Vec<usize>,
    /// Cgroup of each scenario group (tenants).
    cg_of_group: Vec<usize>,
    group_weights: Vec<u64>,
    /// Apply `SetWeight` with nice (false when cgroups carry the weights).
    thread_weights: bool,
    /// Weight last asked for, per TID.
    weight: HashMap<i32, u64>,
    /// Nice value each thread should have, per TID (set at its first tick, then by us).
    nice: HashMap<i32, i32>,
    sched_journaled: std::collections::HashSet<i32>,
    affinity_journaled: std::collections::HashSet<i32>,
    nice_changes: u64,
    overrides: u64,
    first_overrides: Vec<String>,
    migrations: u64,
    ticks: u64,
    cpu_ns: u64,
    max_threads: usize,
    changes: Vec<crate::ctl::WeightChange>,
    ctl: Option<crate::ctl::CtlServer>,
    ctl_path: Option<PathBuf>,
    ctl_refused: u64,
    /// The control socket thread's warnings so far, each message with its count (see
    /// `serve_ctl`).
    ctl_warnings: Vec<(String, u64)>,
    nice_warned: bool,
    /// global-fair: pin each thread to the CPU it is first seen on.
    pin_first_seen: bool,
    /// process-fair and tenants: the share trim (`schedkit_core::controllers::trim`),
    /// hosted beside the policy's controller; its entities, the top-level cgroup of each,
    /// the entity of each scenario process, and each entity's correction factor as last
    /// written (`SetEntityWeight` / nominal weight).
    pub(super) trim: Option<Host>,
    trim_entities: Vec<Entity>,
    pub(super) trim_cgroup: Vec<usize>,
    trim_entity_of_process: Vec<usize>,
    pub(super) trim_factor: Vec<f64>,
    trim_writes: u64,
    /// A trim write failed this tick: the trim stops (its warning says why).
    trim_failed: bool,
    /// Where each process's CPU time is read (`None`: the sampler's sums), the epoch of that
    /// source (bumped when it changes), and the counts read when the window ended.
    usage: Option<usage::Usage>,
    cpu_epoch: u64,
    final_cpu: Option<Vec<Option<u64>>>,
    /// What the run's user needs to know while it runs (the control socket's path), and
    /// warnings from setting it up: handed to the engine, which passes them on.
    pub notices: Vec<String>,
    pub start_warnings: Vec<String>,
    /// The weight last written to the cgroups' parent: the job's live threads at their
    /// weights, as if they ran beside the rest of the machine at the top level.
    parent_load: u64,
    /// The engine thread raised to SCHED_FIFO 10 (put back when the run ends).
    raised: Option<RaisedClass>,
}

// The controller's and the sampler's own cost are read with the thread CPU clock
// (`workload::thread_cpu_ns`), not getrusage(RUSAGE_THREAD): both read the thread's
// sum_exec_runtime, but getrusage does not add the slice running now, so the difference
// around a tick of a few microseconds reads 0 unless a timer tick or a switch fell inside it
// (measured: 0.000 ms over 30 tenants ticks with getrusage).

fn get_nice(tid: i32) -> Option<i32> {
    // getpriority returns the nice value; -1 is valid, so errno tells failure apart.
    // SAFETY: errno location is thread-local and writable; getpriority has no preconditions.
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        (*libc::__errno_location() == 0).then_some(n)
    }
}

fn set_nice(tid: i32, nice: i32) -> std::io::Result<()> {
    // SAFETY: setpriority has no memory preconditions.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The actions the fair-share engine applies: weights (nice or cgroup), affinity, group
/// weights. Stop/Resume are the gang engine's (the freezer).
const FAIR_APPLIES: &[schedkit_core::control::ActionKind] = &[
    schedkit_core::control::ActionKind::SetWeight,
    schedkit_core::control::ActionKind::Migrate,
    schedkit_core::control::ActionKind::SetGroupWeight,
    schedkit_core::control::ActionKind::SetEntityWeight,
];

impl FairRun {
    pub(super) fn new(
        scenario: &Scenario,
        policy: &RunPolicy,
        roots: &Roots,
        journal: &mut Journal,
        state_dir: &std::path::Path,
    ) -> Result<FairRun> {
        let (name, period, host) = match policy {
            RunPolicy::Fair { name, period } => {
                let sc = scenario
                    .with_policy_spec(
                        scenario
                            .policy()
                            .clone()
                            .with_name(*name)
                            .with_period(*period),
                    )
                    .map_err(|e| Error::Input(e.to_string()))?;
                let c = schedkit_core::controllers::build(&sc).ok_or_else(|| {
                    Error::Input(format!(
                        "{}: policy.name: `{name}` has no controller",
                        scenario.file()
                    ))
                })?;
                // Refuse now what `tick` could not apply later.
                let host = Host::new(c, FAIR_APPLIES, "the fair-share engine").map_err(|missing| {
                    Error::Input(format!(
                        "{}: policy.name: `{name}`'s controller may ask for {missing:?}, which the fair-share engine cannot apply",
                        scenario.file()
                    ))
                })?;
                (*name, period.0.max(1_000_000), Some(host))
            }
            _ => (
                PolicyName::ProcessFair,
                scenario.policy().period().0.max(1_000_000),
                None,
            ),
        };
        let tenants = name == PolicyName::Tenants;
        let mut run = FairRun {
            policy: name.to_string(),
            host,
            period,
            next_tick: 0,
            cgroups: None,
            cg_of_process: Vec::new(),
            cg_of_group: Vec::new(),
            group_weights: scenario.groups().iter().map(|g| g.weight()).collect(),
            thread_weights: !tenants,
            weight: HashMap::new(),
            nice: HashMap::new(),
            sched_journaled: Default::default(),
            affinity_journaled: Default::default(),
            nice_changes: 0,
            overrides: 0,
            first_overrides: Vec::new(),
            migrations: 0,
            ticks: 0,
            cpu_ns: 0,
            max_threads: 0,
            changes: Vec::new(),
            ctl: None,
            ctl_path: None,
            ctl_refused: 0,
            ctl_warnings: Vec::new(),
            nice_warned: false,
            pin_first_seen: name == PolicyName::GlobalFair,
            trim: None,
            trim_entities: Vec::new(),
            trim_cgroup: Vec::new(),
            trim_entity_of_process: Vec::new(),
            trim_factor: Vec::new(),
            trim_writes: 0,
            trim_failed: false,
            usage: None,
            cpu_epoch: 0,
            final_cpu: None,
            notices: Vec::new(),
            start_warnings: Vec::new(),
            parent_load: 0,
            raised: None,
        };
        if name == PolicyName::ProcessFair || tenants {
            run.create_cgroups(scenario, roots, journal, state_dir, tenants)?;
        }
        if run.host.is_none() && run.trim.is_none() {
            run.next_tick = u64::MAX; // process-fair without trim: the cgroups do it all
        }
        // The engine thread samples, ticks and serves the socket: it must not queue behind the
        // job threads whose weights it raises (twrs gives nice -13 to a lone thread among
        // fifty), or every period comes late. SCHED_FIFO 10 where allowed, as gang does; job
        // threads are set SCHED_OTHER by their placement. Put back in `finish`; set last, so
        // that a failure above leaves the class alone.
        run.raised = RaisedClass::fifo(10);
        if run.raised.is_none() {
            run.start_warnings.push(format!("{name}: the engine thread stays SCHED_OTHER (no CAP_SYS_NICE); controller periods may be late under load"));
        }
        Ok(run)
    }

    /// process-fair and tenants: a cgroup per scenario process (tenants: per group, and per
    /// member of a group of several, at the group's weight split by the members' weights),
    /// the control socket (tenants), and the share trim's entities when the scenario asks
    /// for it.
    fn create_cgroups(
        &mut self,
        scenario: &Scenario,
        roots: &Roots,
        journal: &mut Journal,
        state_dir: &std::path::Path,
        tenants: bool,
    ) -> Result<()> {
        let mut cg = crate::cgroup::CpuGroups::create(roots, journal)?;
        cg.set_parent_load(
            scenario
                .processes()
                .iter()
                .map(|p| p.weight() * p.threads().max(1) as u64)
                .sum(),
        )?;
        if tenants {
            for g in scenario.groups() {
                let i = cg.add(journal, g.name(), None, g.weight())?;
                self.cg_of_group.push(i);
            }
            for p in scenario.processes() {
                // A tenant of several processes splits its weight among them by their
                // weights (one cgroup each inside the tenant's); a lone member uses the
                // tenant's cgroup; an ungrouped process is its own tenant of weight
                // w/1024 (a nice-0 process weighs as much as a tenant of weight 1, as in
                // the simulator's tenants controller).
                let i = match p.group() {
                    Some(g) => {
                        let members = scenario
                            .processes()
                            .iter()
                            .filter(|q| q.group() == Some(g))
                            .count();
                        if members > 1 {
                            let w = ((p.weight() * 100 + 512) / 1024).clamp(1, 10_000);
                            cg.add(journal, p.name(), Some(self.cg_of_group[g]), w)?
                        } else {
                            self.cg_of_group[g]
                        }
                    }
                    None => {
                        let w = ((p.weight() + 512) / 1024).clamp(1, 10_000);
                        cg.add(journal, p.name(), None, w)?
                    }
                };
                self.cg_of_process.push(i);
            }
            let srv = crate::ctl::CtlServer::bind(state_dir)?;
            self.notices.push(format!(
                "control socket {} (schedkit ctl set-weight GROUP WEIGHT; schedkit ctl status)",
                srv.path().display()
            ));
            self.ctl_path = Some(srv.path().into());
            self.ctl = Some(srv);
        } else {
            // Equal weights: the default of a new cgroup, written explicitly.
            for p in scenario.processes() {
                let i = cg.add(journal, p.name(), None, 100)?;
                self.cg_of_process.push(i);
            }
        }
        self.cgroups = Some(cg);
        let cg = self.cgroups.as_ref().expect("set above");
        // Exact per-process CPU time for the trim and the report; without it the sampler's
        // sums, which miss tasks (see `usage`), and a word in the warnings.
        let no_usage = |why: String| {
            format!("no per-cgroup CPU accounting ({why}): the share trim and the report's shares measure from the sampler's readings, which miss short-lived tasks")
        };
        match usage::Usage::new(roots, journal, cg, &self.cg_of_process) {
            Ok(Some(u)) => self.usage = Some(u),
            Ok(None) => self.start_warnings.push(no_usage(
                "neither cgroup v2 cpu.stat nor v1 cpuacct on this machine".into(),
            )),
            Err(e) => self.start_warnings.push(no_usage(e.to_string())),
        }
        if scenario.policy().trim() {
            let trim = Trim::new(scenario, Nanos(self.period), tenants);
            let (entities, of_process) = trim::entities(scenario, tenants);
            self.trim_cgroup = entities
                .iter()
                .map(|&e| match e {
                    Entity::Process(p) => self.cg_of_process[p],
                    Entity::Group(g) => self.cg_of_group[g],
                })
                .collect();
            self.trim_factor = vec![1.0; entities.len()];
            self.trim_entities = entities;
            self.trim_entity_of_process = of_process;
            self.trim = Some(
                Host::new(Box::new(trim), FAIR_APPLIES, "the fair-share engine").map_err(
                    |missing| {
                        Error::Input(format!(
                            "{}: policy.trim: the share trim may ask for {missing:?}, which the fair-share engine cannot apply",
                            scenario.file()
                        ))
                    },
                )?,
            );
        }
        Ok(())
    }

    /// The parent cgroup's weight follows the job's live threads (a command that forks 400
    /// tasks weighs as 400 threads, not as the one the scenario names); rewritten when it
    /// changes by more than a tenth, so a steady job costs no writes.
    fn update_parent_load(&mut self, scenario: &Scenario, tracks: &[Track]) {
        let Some(cg) = self.cgroups.as_ref() else {
            return;
        };
        let load: u64 = tracks
            .iter()
            .filter(|t| !t.finished)
            .map(|t| scenario.processes()[t.process].weight())
            .sum::<u64>()
            .max(1);
        let diff = load.abs_diff(self.parent_load);
        if diff * 10 > self.parent_load && cg.set_parent_load(load).is_ok() {
            self.parent_load = load;
        }
    }

    /// A command process joins its cgroup (before it is released).
    pub(super) fn attach_command(&self, p: usize, pid: i32) -> Result<()> {
        if let Some(u) = &self.usage {
            u.attach_process(p, pid)?;
        }
        match &self.cgroups {
            Some(cg) => cg.attach_process(self.cg_of_process[p], pid),
            None => Ok(()),
        }
    }

    /// A newly found thread joins its process's cgroup: built-in workload threads one by one
    /// (they are schedkit's own threads); on v1 command threads too (they were born inside,
    /// unless they moved themselves: the write puts them back).
    pub(super) fn attach_thread(
        &self,
        p: usize,
        pid: i32,
        tid: i32,
        is_cmd: bool,
        nice: i32,
    ) -> Result<()> {
        let Some(cg) = &self.cgroups else {
            return Ok(());
        };
        // A built-in thread found before its own setup ran still has the engine thread's
        // SCHED_FIFO, which a v1 cpu cgroup refuses: give it its SCHED_OTHER class now.
        if matches!(
            sched::get_thread(tid),
            Ok(Policy::Fifo { .. } | Policy::Rr { .. })
        ) {
            let _ = sched::set_thread(tid, Policy::Other { nice });
        }
        if let (Some(u), false) = (&self.usage, is_cmd) {
            // A command's threads are born inside its accounting group.
            u.attach_thread(p, tid)?;
        }
        let i = self.cg_of_process[p];
        match (cg.controller(), is_cmd) {
            (crate::cgroup::CpuController::V2(_), true) => cg.attach_process(i, pid),
            _ => cg.attach_thread(i, tid),
        }
    }

    /// One controller period (see the type's docs), its cost on the engine thread's CPU
    /// clock counted.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tick(
        &mut self,
        now: u64,
        scenario: &Scenario,
        cores: usize,
        tracks: (&[Track], &HashMap<i32, usize>),
        journal: &mut Journal,
        events: &mut Vec<Event>,
        warnings: &mut Vec<String>,
    ) {
        let cpu0 = workload::thread_cpu_ns();
        self.ticks += 1;
        self.next_tick = now + self.period;
        self.period_step(now, scenario, cores, tracks, journal, events, warnings);
        self.cpu_ns += workload::thread_cpu_ns().saturating_sub(cpu0);
    }

    /// The steps of one period: nice overrides set back, the parent's load, then the share
    /// trim and the policy's controller, each a tick of its own host through one step.
    #[allow(clippy::too_many_arguments)]
    fn period_step(
        &mut self,
        now: u64,
        scenario: &Scenario,
        cores: usize,
        (tracks, by_tid): (&[Track], &HashMap<i32, usize>),
        journal: &mut Journal,
        events: &mut Vec<Event>,
        warnings: &mut Vec<String>,
    ) {
        let live = || tracks.iter().filter(|t| !t.finished);
        if self.thread_weights {
            self.set_back_nice(now, scenario, live());
        }
        self.update_parent_load(scenario, tracks);
        if self.host.is_none() && self.trim.is_none() {
            return;
        }
        let views: Vec<ThreadView> = live()
            .map(|tr| {
                let sp = &scenario.processes()[tr.process];
                ThreadView {
                    id: tr.tid as u64,
                    process: tr.process,
                    index: tr.index as usize,
                    group: sp.group(),
                    core: (tr.last.tid != 0).then_some(tr.last.cpu),
                    weight: self.weight.get(&tr.tid).copied().unwrap_or(sp.weight()),
                    base_weight: sp.weight(),
                    runnable: tr.runnable,
                    cpu: Nanos(tr.prev_run),
                }
            })
            .collect();
        // (The snapshots' group weights are those before this tick's actions.)
        let group_weights = self.group_weights.clone();
        // One hosted controller's tick (the trim's and the policy's are the same step):
        // every action through `FairApply`, what the host refused into the warnings.
        let tick = |run: &mut FairRun,
                    host: &mut Host,
                    journal: &mut Journal,
                    events: &mut Vec<Event>,
                    warnings: &mut Vec<String>| {
            let mut apply = FairApply {
                run,
                now,
                scenario,
                tracks: (tracks, by_tid),
                journal,
                events,
                warnings,
            };
            // FairApply never fails: what it cannot apply is a warning.
            let _ = host.tick(Nanos(now), cores, &group_weights, scenario, &mut apply);
            apply.warnings.append(&mut host.refused);
        };
        // The share trim first, as its own controller on the same host contract.
        if let Some(mut trim) = self.trim.take() {
            let cpu = self.process_cpu(now, tracks, warnings);
            trim.set_process_cpu(cpu, self.cpu_epoch);
            trim.set_threads(views.iter().cloned());
            tick(self, &mut trim, journal, events, warnings);
            if !self.trim_failed {
                self.trim = Some(trim);
            }
        }
        let Some(mut host) = self.host.take() else {
            return;
        };
        // Threads seen for the first time keep the nice their placement gave them.
        for tr in live() {
            let sp = &scenario.processes()[tr.process];
            self.nice.entry(tr.tid).or_insert(sp.nice());
        }
        // Tracks go in order of first sighting across processes; the host sorts them into
        // the engine-independent (process, thread number) order the controller contract
        // promises.
        let views = host.set_threads(views);
        self.max_threads = self.max_threads.max(views.len());
        if self.pin_first_seen {
            self.place_new_threads(scenario, cores, views, (tracks, by_tid), journal);
        }
        tick(self, &mut host, journal, events, warnings);
        self.host = Some(host);
    }

    /// A thread's own nice change: found, set back, counted, the first five described.
    fn set_back_nice<'t>(
        &mut self,
        now: u64,
        scenario: &Scenario,
        live: impl Iterator<Item = &'t Track>,
    ) {
        for tr in live {
            let Some(&want) = self.nice.get(&tr.tid) else {
                continue;
            };
            if let Some(cur) = get_nice(tr.tid) {
                if cur != want && set_nice(tr.tid, want).is_ok() {
                    self.overrides += 1;
                    if self.first_overrides.len() < 5 {
                        let sp = &scenario.processes()[tr.process];
                        self.first_overrides.push(format!(
                            "{}.{} (tid {}) set nice {cur} at {}; set back to {want}",
                            sp.name(),
                            tr.index,
                            tr.tid,
                            Nanos(now)
                        ));
                    }
                }
            }
        }
    }

    /// global-fair on real cores: the kernel's balancer keeps moving unpinned threads (T1 of
    /// the global example was seen switching CPUs every half second), which swaps the
    /// shuttle's home and light core under it, and right after they start it may still have
    /// several on one CPU. So every thread the controller has not placed yet is pinned here
    /// (journaled), heaviest first, to the CPU with the least weight of pinned runnable
    /// threads (ties: the CPU it is on): the balance CFS aims for (eq. 4.1), after which only
    /// the controller moves job threads. Scenario `cpus` stay as they are. Updates the views.
    fn place_new_threads(
        &mut self,
        scenario: &Scenario,
        cores: usize,
        views: &mut [ThreadView],
        (tracks, by_tid): (&[Track], &HashMap<i32, usize>),
        journal: &mut Journal,
    ) {
        let mut load = vec![0u64; cores];
        let mut new: Vec<usize> = Vec::new();
        for (k, v) in views.iter().enumerate() {
            let tid = v.id as i32;
            let fixed = scenario.processes()[v.process].cpus().is_some();
            if self.affinity_journaled.contains(&tid) || fixed {
                if let (true, Some(c)) = (v.runnable, v.core.filter(|&c| c < cores)) {
                    load[c] += v.weight;
                }
            } else {
                new.push(k);
            }
        }
        new.sort_by_key(|&k| (std::cmp::Reverse(views[k].weight), views[k].id));
        for k in new {
            let v = &views[k];
            let here = v.core.filter(|&c| c < cores);
            let Some(c) = (0..cores).min_by_key(|&c| (load[c], Some(c) != here)) else {
                return;
            };
            let Some(tr) = by_tid.get(&(v.id as i32)).map(|&i| &tracks[i]) else {
                continue;
            };
            if journal
                .set_affinity(tr.pid, tr.tid, &CpuSet::single(c))
                .is_ok()
            {
                self.affinity_journaled.insert(tr.tid);
                // Counted even if not runnable at this instant: a thread seen for the first
                // time has usually just started (seen here blocked in its start-up, several
                // threads of the global example all went to one CPU).
                load[c] += v.weight;
                views[k].core = Some(c);
            }
        }
    }

    fn warn_nice(&mut self, warnings: &mut Vec<String>, e: &str) {
        if !self.nice_warned {
            self.nice_warned = true;
            warnings.push(format!(
                "a thread weight could not be applied as a nice value ({e}); raising a weight above the scenario's needs CAP_SYS_NICE: {}",
                Privileges::HOW_TO_NICE
            ));
        }
    }

    /// The report; drops the control socket (the run is over). The cgroups go with the
    /// journal's undo.
    pub(super) fn finish(mut self, end: u64) -> FairReport {
        if let Some(srv) = self.ctl.take() {
            self.ctl_refused = srv.counts().refused;
        }
        self.raised = None;
        FairReport {
            policy: self.policy,
            period_ns: self.period,
            ticks: self.ticks,
            controller_cpu_ns: self.cpu_ns,
            wall_ns: end,
            max_threads: self.max_threads,
            cgroups: self
                .cgroups
                .as_ref()
                .map(|c| format!("{} at {}", c.controller().name(), c.parent().display())),
            cgroup_weights: self
                .cgroups
                .as_ref()
                .map(|c| {
                    c.groups()
                        .iter()
                        .map(|g| (g.key.clone(), g.weight))
                        .collect()
                })
                .unwrap_or_default(),
            nice_changes: self.nice_changes,
            overrides: self.overrides,
            first_overrides: self.first_overrides,
            migrations: self.migrations,
            weight_changes: self.changes,
            ctl_socket: self.ctl_path,
            ctl_refused: self.ctl_refused,
            sampler: None,
            trim_factors: match (&self.trim, &self.cgroups) {
                (Some(_), Some(cg)) => self
                    .trim_cgroup
                    .iter()
                    .zip(&self.trim_factor)
                    .map(|(&i, &f)| (cg.groups()[i].key.clone(), f))
                    .collect(),
                _ => Vec::new(),
            },
            trim_writes: self.trim_writes,
            trim_source: self
                .usage
                .as_ref()
                .filter(|_| self.trim.is_some())
                .map(|u| u.describe().to_string()),
            entity_cpu_ns: match (&self.final_cpu, &self.cgroups) {
                (Some(cpu), Some(cg)) => self
                    .trim_cgroup
                    .iter()
                    .enumerate()
                    .filter_map(|(e, &i)| {
                        let members =
                            (0..cpu.len()).filter(|&p| self.trim_entity_of_process[p] == e);
                        let sum = members.map(|p| cpu[p]).sum::<Option<u64>>()?;
                        Some((cg.groups()[i].key.clone(), sum))
                    })
                    .collect(),
                _ => Vec::new(),
            },
            cpu_accounting: self
                .final_cpu
                .as_ref()
                .and(self.usage.as_ref())
                .map(|u| u.describe().to_string()),
            process_cpu_ns: self.final_cpu.unwrap_or_default(),
        }
    }
}
