//! The simulator and `schedkit run` give a controller the same decisions from the same
//! machine state, whatever handles their threads carry.
//!
//! The two engines hand controllers the same snapshot contents but different thread handles:
//! the simulator's slots (reused when threads end, so not in creation order) and the kernel's
//! TIDs (whatever the kernel assigned). Each test drives one controller twice over the same
//! evolving machine, once with slot-like handles and once with TID-like ones, applies its
//! actions to that machine (a fluid model: each core shares its time among its runnable
//! threads by weight), and requires the same actions, tick by tick, once handles are mapped
//! back to the engine-independent key (scenario process, thread number). Threads end and new
//! ones arrive during the run, so slots get reused. A controller that broke a tie by handle
//! would move or weigh a different thread in one of the two runs, and the runs would diverge.

use schedkit_core::control::{
    Action, Controller, Entity, Snapshot, ThreadView, ENTITY_WEIGHT_SCALE,
};
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use std::collections::BTreeMap;

type Key = (usize, usize);

/// One thread of the model machine.
#[derive(Clone)]
struct T {
    key: Key,
    group: Option<usize>,
    core: usize,
    weight: u64,
    base_weight: u64,
    runnable: bool,
    cpu: u64,
    /// The tick at which it ends (`None`: runs to the end).
    ends: Option<u64>,
}

/// How an engine names threads.
enum Handles {
    /// Simulator-like: the lowest free slot, reused after a thread ends.
    Slots { free: Vec<u64>, next: u64 },
    /// Kernel-like: scattered, non-monotone TIDs.
    Tids { state: u64 },
}

impl Handles {
    fn fresh(&mut self) -> u64 {
        match self {
            Handles::Slots { free, next } => free.pop().unwrap_or_else(|| {
                *next += 1;
                *next - 1
            }),
            Handles::Tids { state } => {
                // A 64-bit LCG: distinct, unordered values.
                *state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                1000 + (*state >> 40)
            }
        }
    }
    fn release(&mut self, id: u64) {
        if let Handles::Slots { free, .. } = self {
            free.push(id);
            // Lowest slot first, as a stack of freed slots would not give.
            free.sort_unstable_by(|a, b| b.cmp(a));
        }
    }
}

/// One run: the machine, the handle map and the controller's decisions in key space.
struct Run {
    threads: Vec<T>,
    ids: BTreeMap<Key, u64>,
    handles: Handles,
    group_weights: Vec<u64>,
    /// CPU time of ended threads, per process (a snapshot's `process_cpu` counts them).
    ended_cpu: Vec<u64>,
    log: Vec<(u64, String)>,
}

impl Run {
    fn new(threads: &[T], groups: usize, handles: Handles) -> Run {
        let mut run = Run {
            threads: Vec::new(),
            ids: BTreeMap::new(),
            handles,
            group_weights: vec![1024; groups],
            ended_cpu: Vec::new(),
            log: Vec::new(),
        };
        for t in threads {
            run.add(t.clone());
        }
        run
    }

    fn add(&mut self, t: T) {
        let id = self.handles.fresh();
        self.ids.insert(t.key, id);
        self.threads.push(t);
    }

    fn key_of(&self, id: u64) -> Option<Key> {
        self.ids.iter().find(|(_, &v)| v == id).map(|(k, _)| *k)
    }

    fn tick(&mut self, ctl: &mut dyn Controller, sc: &Scenario, cores: usize, tick: u64) {
        let period = ctl.period().0;
        // Threads whose work is done end (their handle is freed).
        let ended: Vec<Key> = self
            .threads
            .iter()
            .filter(|t| t.ends.is_some_and(|e| e <= tick))
            .map(|t| t.key)
            .collect();
        for k in ended {
            let id = self.ids.remove(&k).expect("live thread has a handle");
            self.handles.release(id);
            let cpu: u64 = self
                .threads
                .iter()
                .filter(|t| t.key == k)
                .map(|t| t.cpu)
                .sum();
            self.ended_cpu[k.0] += cpu;
            self.threads.retain(|t| t.key != k);
        }
        // Both engines sort their views by key before the tick (the Snapshot contract).
        let mut views: Vec<ThreadView> = self
            .threads
            .iter()
            .map(|t| ThreadView {
                id: self.ids[&t.key],
                process: t.key.0,
                index: t.key.1,
                group: t.group,
                core: Some(t.core),
                weight: t.weight,
                base_weight: t.base_weight,
                runnable: t.runnable,
                cpu: Nanos(t.cpu),
            })
            .collect();
        views.sort_unstable_by_key(ThreadView::key);
        let mut process_cpu: Vec<Nanos> = self.ended_cpu.iter().map(|&c| Nanos(c)).collect();
        for t in &self.threads {
            process_cpu[t.key.0] += Nanos(t.cpu);
        }
        let mut out = Vec::new();
        ctl.tick(
            &Snapshot {
                now: Nanos(tick * period),
                cores,
                threads: &views,
                group_weights: &self.group_weights,
                process_cpu: &process_cpu,
                process_cpu_epoch: 0,
                scenario: sc,
            },
            &mut out,
        );
        for a in out {
            // Engines refuse runs by what a controller declares, so the declaration must hold.
            assert!(
                ctl.emits().contains(&a.kind()),
                "{} pushed {a:?}, which its `emits` does not declare",
                ctl.name()
            );
            let line = match a {
                Action::SetWeight { thread, weight } => {
                    let k = self.key_of(thread).expect("action names a live thread");
                    self.threads.iter_mut().find(|t| t.key == k).unwrap().weight = weight;
                    format!("weight {k:?} {weight}")
                }
                Action::Migrate { thread, core } => {
                    let k = self.key_of(thread).expect("action names a live thread");
                    self.threads.iter_mut().find(|t| t.key == k).unwrap().core = core;
                    format!("migrate {k:?} {core}")
                }
                Action::SetGroupWeight { group, weight } => {
                    self.group_weights[group] = weight;
                    format!("group {group} {weight}")
                }
                Action::Stop { process } => {
                    self.set_runnable(process, false);
                    format!("stop {process}")
                }
                Action::Resume { process } => {
                    self.set_runnable(process, true);
                    format!("resume {process}")
                }
                Action::SetEntityWeight { entity, weight } => {
                    self.set_entity_weight(sc, entity, weight);
                    format!("entity {entity:?} {weight}")
                }
            };
            self.log.push((tick, line));
        }
        // One period of a fluid machine: each core's time goes to its runnable threads by
        // weight (group weights scale a thread's claim when groups exist).
        for c in 0..cores {
            let claim = |t: &T| {
                let g = t.group.map_or(1024, |g| self.group_weights[g]);
                t.weight as u128 * g as u128
            };
            let total: u128 = self
                .threads
                .iter()
                .filter(|t| t.runnable && t.core == c)
                .map(claim)
                .sum();
            if total == 0 {
                continue;
            }
            let shares: Vec<(Key, u64)> = self
                .threads
                .iter()
                .filter(|t| t.runnable && t.core == c)
                .map(|t| (t.key, (period as u128 * claim(t) / total) as u64))
                .collect();
            for (k, got) in shares {
                self.threads.iter_mut().find(|t| t.key == k).unwrap().cpu += got;
            }
        }
    }

    /// The entity's weight (10.24 thread units per cgroup v2 unit) split among its member
    /// processes' threads by process weight, then equally, as the simulator applies it.
    fn set_entity_weight(&mut self, sc: &Scenario, entity: Entity, weight: u64) {
        let member = |p: usize| match entity {
            Entity::Process(q) => p == q,
            Entity::Group(g) => sc.processes()[p].group() == Some(g),
        };
        let mut live = vec![0u64; sc.processes().len()];
        for t in self.threads.iter().filter(|t| member(t.key.0)) {
            live[t.key.0] += 1;
        }
        let sum: u64 = (0..live.len())
            .filter(|&p| live[p] > 0)
            .map(|p| sc.processes()[p].weight())
            .sum();
        let total = weight as f64 / ENTITY_WEIGHT_SCALE as f64 * 10.24;
        for t in self.threads.iter_mut().filter(|t| live[t.key.0] > 0) {
            let part = sc.processes()[t.key.0].weight() as f64 / sum as f64;
            t.weight = (total * part / live[t.key.0] as f64).round().max(1.0) as u64;
        }
    }

    fn set_runnable(&mut self, process: usize, runnable: bool) {
        for t in self.threads.iter_mut().filter(|t| t.key.0 == process) {
            t.runnable = runnable;
        }
    }
}

/// Where a thread starts: `(process, thread number, threads placed so far, cores) -> core`.
type Place = fn(usize, usize, usize, usize) -> usize;

/// Round-robin over the cores.
fn round_robin(_: usize, _: usize, placed: usize, cores: usize) -> usize {
    placed % cores
}

/// Threads of `sc`'s processes, placed by `place`; every third thread of a multi-threaded
/// process ends at tick `5 + thread number`.
fn machine(sc: &Scenario, place: Place) -> Vec<T> {
    let mut v = Vec::new();
    let mut next_core = 0;
    for (p, sp) in sc.processes().iter().enumerate() {
        for i in 0..sp.threads() as usize {
            v.push(T {
                key: (p, i),
                group: sp.group(),
                core: place(p, i, next_core, sc.cores()),
                weight: sp.weight(),
                base_weight: sp.weight(),
                runnable: true,
                cpu: 0,
                ends: (sp.threads() > 1 && i % 3 == 2).then_some(5 + i as u64),
            });
            next_core += 1;
        }
    }
    v
}

/// The controller of `sc`: its policy's, or the share trim for `process-fair` (whose only
/// controller it is).
fn build(sc: &Scenario) -> Box<dyn Controller> {
    schedkit_core::controllers::build(sc)
        .or_else(|| {
            schedkit_core::controllers::trim::build(sc).map(|t| Box::new(t) as Box<dyn Controller>)
        })
        .expect("a controller policy")
}

/// Runs `toml`'s controller over 60 ticks under both kinds of handles, with a late process
/// arriving at tick 12 (a copy of the first process's threads, numbered after them), and
/// requires the same decisions.
fn same_decisions(toml: &str, place: Place) {
    let sc = Scenario::parse("identity.toml", toml).expect("test scenario parses");
    let groups = sc.groups().len();
    let start = machine(&sc, place);
    let mut runs = [
        Run::new(
            &start,
            groups,
            Handles::Slots {
                free: Vec::new(),
                next: 0,
            },
        ),
        Run::new(&start, groups, Handles::Tids { state: 7 }),
    ];
    let mut decisions = Vec::new();
    for run in &mut runs {
        run.ended_cpu = vec![0; sc.processes().len()];
        let mut ctl = build(&sc);
        for tick in 0..60 {
            if tick == 12 {
                // Late threads of process 0 take the slots freed by the ended ones.
                let first = sc.processes()[0].threads() as usize;
                for i in 0..3 {
                    run.add(T {
                        key: (0, first + i),
                        group: sc.processes()[0].group(),
                        core: i % sc.cores(),
                        weight: sc.processes()[0].weight(),
                        base_weight: sc.processes()[0].weight(),
                        runnable: true,
                        cpu: 0,
                        ends: None,
                    });
                }
            }
            run.tick(ctl.as_mut(), &sc, sc.cores(), tick);
        }
        decisions.push(std::mem::take(&mut run.log));
    }
    assert!(
        !decisions[0].is_empty(),
        "the controller made no decision: the test would prove nothing"
    );
    assert_eq!(
        decisions[0], decisions[1],
        "slot handles and TID handles led to different decisions"
    );
}

#[test]
fn global_fair_decides_by_key_not_handle() {
    // Seed 004's shape: T1 (1024) alone on core 0, four 335s on core 1, where CFS's balancer
    // never moves anything. The shuttle is a choice among four equal threads every period.
    same_decisions(
        r#"
cores = 2
[policy]
name = "global-fair"
period = "100ms"
[[process]]
name = "T1"
[[process]]
name = "T2"
nice = 5
[[process]]
name = "T3"
nice = 5
[[process]]
name = "T4"
nice = 5
[[process]]
name = "T5"
nice = 5
"#,
        |p, _, _, _| usize::from(p > 0),
    );
}

#[test]
fn gang_columns_follow_thread_numbers() {
    same_decisions(
        r#"
cores = 4
[policy]
name = "gang"
quantum = "100ms"
[[process]]
name = "a"
threads = 3
[[process]]
name = "b"
threads = 4
[[process]]
name = "c"
threads = 2
"#,
        round_robin,
    );
}

#[test]
fn weight_controllers_decide_by_key_not_handle() {
    for policy in ["pfs", "tfps", "twrs"] {
        same_decisions(
            &format!(
                r#"
cores = 2
[policy]
name = "{policy}"
period = "100ms"
[[process]]
name = "one"
[[process]]
name = "eight"
threads = 8
[[process]]
name = "three"
threads = 3
nice = 2
"#
            ),
            round_robin,
        );
    }
}

#[test]
fn tenants_decide_by_key_not_handle() {
    same_decisions(
        r#"
cores = 2
[policy]
name = "tenants"
period = "100ms"
[[group]]
name = "vm1"
weight = 1
[[group]]
name = "vm2"
weight = 3
[[process]]
name = "P1"
threads = 5
group = "vm1"
[[process]]
name = "P2"
threads = 4
group = "vm2"
"#,
        round_robin,
    );
}

#[test]
fn engines_can_tell_what_they_cannot_apply() {
    use schedkit_core::control::{unsupported, ActionKind};
    let sc = Scenario::parse(
        "gang.toml",
        "cores = 2\n[policy]\nname = \"gang\"\n[[process]]\nname = \"a\"\n",
    )
    .expect("test scenario parses");
    let gang = schedkit_core::controllers::build(&sc).expect("gang has a controller");
    let fair = [
        ActionKind::SetWeight,
        ActionKind::Migrate,
        ActionKind::SetGroupWeight,
    ];
    assert_eq!(
        unsupported(gang.as_ref(), &fair),
        vec![ActionKind::Stop, ActionKind::Resume]
    );
    assert!(unsupported(gang.as_ref(), ActionKind::ALL).is_empty());
}

#[test]
fn the_share_trim_decides_by_entity_in_both_engines() {
    // Process-fair on the fluid machine: one thread alone on core 0 would take a whole CPU
    // while eight and three threads share core 1, so the trim has a bias to correct; threads
    // end and arrive, so its CPU totals must count ended threads (`process_cpu`).
    same_decisions(
        r#"
cores = 2
[policy]
name = "process-fair"
period = "100ms"
[[process]]
name = "one"
[[process]]
name = "eight"
threads = 8
[[process]]
name = "three"
threads = 3
"#,
        |p, _, _, _| usize::from(p > 0),
    );
}

#[test]
fn the_share_trim_is_refused_by_an_engine_without_entity_weights() {
    use schedkit_core::control::{unsupported, ActionKind};
    let sc = Scenario::parse(
        "pf.toml",
        "cores = 2\n[policy]\nname = \"process-fair\"\n[[process]]\nname = \"a\"\n",
    )
    .expect("test scenario parses");
    let trim = schedkit_core::controllers::trim::build(&sc).expect("trim is on by default");
    let gang = [ActionKind::Migrate, ActionKind::Stop, ActionKind::Resume];
    assert_eq!(unsupported(&trim, &gang), vec![ActionKind::SetEntityWeight]);
    assert!(unsupported(&trim, ActionKind::ALL).is_empty());
}
