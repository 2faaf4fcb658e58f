//! Share trim: a feedback loop on cgroup weights that makes measured shares follow GPS.
//!
//! Policy: `process-fair` and `tenants` on real cores give every top-level entity (a process,
//! or a tenant group) a cgroup whose weight is its nominal weight. The kernel's group
//! scheduling shares a CPU between the group entities queued *on that CPU*, and splits a
//! group's weight over the CPUs in proportion to the group's load on each. A one-thread
//! process therefore weighs its full weight on its one CPU while a fifty-thread process
//! spreads its own over both, and the load balancer moves threads only when imbalance
//! exceeds its margin: measured shares drift a point or two from GPS, and after a process
//! changes its thread count they take seconds to settle (seed 004 ch. 3 on a stock kernel).
//!
//! Every period the trim compares each entity's CPU time in that period with its GPS share
//! of the CPU time the job received (water-filling over the nominal weights, an entity capped
//! at one CPU per runnable thread and at the job's CPUs), and multiplies the entity's
//! correction factor by `(target / got)^GAIN`, the step bounded by `MAX_STEP`; the cgroup is
//! written `nominal x factor`. This is integral control in the log domain: a constant bias is
//! removed whatever its size.
//!
//! Damping: the kernel answers a weight change late (a group's per-CPU weight follows its
//! PELT load averages, and the balancer moves threads after that), and every entity is
//! corrected at once, so the *ratio* of two entities' weights moves by twice each one's step.
//! A gain of 0.5 per entity (the first version) corrected the ratio by the whole measured
//! error each period and overshot: beside a one-thread hog, hackbench's 400 tasks went from
//! 1,024 to 439 cpu.shares and the hog from 1,024 to 6,928 within the first second. Hence
//! `GAIN` 0.2 (the ratio moves by 0.4 of its log-error per period) and `MAX_STEP`.
//!
//! Invariants: factors stay within `[1/MAX_FACTOR, MAX_FACTOR]`; an entity with no runnable
//! thread, or whose GPS share is its cap (it cannot use more), keeps its factor; an entity is
//! never *raised* while it already gets `FULL` of all the CPU its runnable threads can use
//! (a one-thread hog that runs a whole CPU cannot run more: a higher weight would only wind
//! up its factor); a change of nominal weight (`schedkit ctl set-weight`) takes effect at
//! once, the factor carrying on as the correction of the kernel's bias.
//!
//! Input: each entity's CPU time must be exact, so the controller reads
//! [`Snapshot::process_cpu`] (every thread, ended ones too), never the live threads' `cpu`.
//! The real engine fills it from the kernel's per-cgroup accounting (schedkit-linux's
//! `run/fair/usage.rs`), not from the sampler's per-thread readings, which miss tasks not
//! found yet and tasks that ended between two samples; the simulator from its own exact
//! count.
//!
//! As a [`Controller`] ([`Trim`]) it runs in both engines: every period it turns the
//! snapshot into one [`EntityPeriod`] per top-level entity and pushes
//! [`Action::SetEntityWeight`] for each when [`ShareTrim::tick`] has weights. The real
//! engine writes them to the entities' cgroups; the simulator gives them to the entities'
//! threads. Neither engine attaches it by itself to a simulated policy: the simulator's CFS
//! model has no group-scheduling bias to remove, so its golden outputs stay as they are.

use crate::control::{Action, ActionKind, Controller, Entity, Snapshot, ENTITY_WEIGHT_SCALE};
use crate::scenario::{PolicyName, Scenario};
use crate::time::Nanos;

/// Exponent of one period's correction (0.2: a fifth of the measured log-error per entity
/// per period; see the module docs).
pub const GAIN: f64 = 0.2;
/// Largest correction of one period, either way.
pub const MAX_STEP: f64 = 1.25;
/// Largest correction either way.
pub const MAX_FACTOR: f64 = 8.0;
/// An entity getting this fraction of what its runnable threads can use is not raised.
pub const FULL: f64 = 0.95;
/// A period in which the job received less CPU than this fraction of one CPU says nothing.
const MIN_JOB_CPU: f64 = 0.05;

/// One top-level entity's measurement for a period.
#[derive(Clone, Copy, Debug)]
pub struct EntityPeriod {
    /// Nominal weight (v2 units).
    pub weight: u64,
    /// Runnable threads at the end of the period (its GPS cap in CPUs).
    pub runnable: usize,
    /// Its CPU time, cumulative, ns.
    pub cpu_ns: u64,
}

/// The trim's state: one factor and the last CPU total per entity.
#[derive(Clone, Debug)]
pub struct ShareTrim {
    /// The job's CPUs: no entity can use more.
    cpus: usize,
    factor: Vec<f64>,
    last_cpu: Vec<u64>,
    last_weight: Vec<u64>,
    last_t: Option<u64>,
}

impl ShareTrim {
    /// A trim for a job that may use `cpus` CPUs.
    pub fn new(cpus: usize) -> ShareTrim {
        ShareTrim {
            cpus: cpus.max(1),
            factor: Vec::new(),
            last_cpu: Vec::new(),
            last_weight: Vec::new(),
            last_t: None,
        }
    }

    /// The next `tick` only takes the starting totals (the CPU times' source changed).
    pub fn rebase(&mut self) {
        self.last_t = None;
    }

    /// Current factor of entity `i` (1 before its first correction).
    pub fn factor(&self, i: usize) -> f64 {
        self.factor.get(i).copied().unwrap_or(1.0)
    }

    /// One period ending at `now_ns`: updates the factors from what each entity got since the
    /// last call and returns the weights to write (`nominal x factor`, v2 units, unrounded).
    /// The first call only takes the starting totals; so does a period in which a nominal
    /// weight changed (its CPU time mixes the old share with the new one, and correcting by
    /// it would overshoot).
    pub fn tick(&mut self, now_ns: u64, entities: &[EntityPeriod]) -> Option<Vec<f64>> {
        let n = entities.len();
        self.factor.resize(n, 1.0);
        self.last_cpu.resize(n, 0);
        let weights: Vec<u64> = entities.iter().map(|e| e.weight).collect();
        let reweighted = self.last_weight != weights;
        self.last_weight = weights;
        let last_t = self.last_t.replace(now_ns);
        let (Some(t0), false) = (last_t, reweighted) else {
            for (last, e) in self.last_cpu.iter_mut().zip(entities) {
                *last = e.cpu_ns;
            }
            return None;
        };
        let dt = now_ns.saturating_sub(t0) as f64;
        let got: Vec<f64> = entities
            .iter()
            .zip(&mut self.last_cpu)
            .map(|(e, last)| {
                let d = e.cpu_ns.saturating_sub(*last) as f64;
                *last = (*last).max(e.cpu_ns);
                d
            })
            .collect();
        let job: f64 = got.iter().sum();
        if dt <= 0.0 || job < MIN_JOB_CPU * dt {
            return None;
        }
        let caps: Vec<(f64, f64)> = entities
            .iter()
            .map(|e| (e.weight as f64, e.runnable.min(self.cpus) as f64 * dt))
            .collect();
        let target = crate::gps::water_fill(job, &caps);
        for i in 0..n {
            let cap = caps[i].1;
            let capped = target[i] >= cap * 0.999;
            if entities[i].runnable == 0 || capped || got[i] <= 0.0 || target[i] <= 0.0 {
                continue;
            }
            let step = (target[i] / got[i])
                .powf(GAIN)
                .clamp(1.0 / MAX_STEP, MAX_STEP);
            if step > 1.0 && got[i] >= FULL * cap {
                continue; // it runs all it can: more weight would only wind up its factor
            }
            let f = self.factor[i] * step;
            self.factor[i] = f.clamp(1.0 / MAX_FACTOR, MAX_FACTOR);
        }
        Some(
            entities
                .iter()
                .zip(&self.factor)
                .map(|(e, f)| e.weight as f64 * f)
                .collect(),
        )
    }
}

/// The share trim as a [`Controller`] over a scenario's top-level entities (see the module
/// docs).
#[derive(Clone, Debug)]
pub struct Trim {
    period: Nanos,
    tenants: bool,
    entities: Vec<Entity>,
    /// The entity of each scenario process (index into `entities`).
    entity_of_process: Vec<usize>,
    trim: ShareTrim,
    /// `Snapshot::process_cpu_epoch` at the last tick.
    epoch: Option<u64>,
}

/// The top-level entities the trim corrects, in order, and the entity of each process:
/// under `tenants` each group (at its first member) and each ungrouped process; otherwise
/// every process (a `process-fair` cgroup each, whatever its group).
pub fn entities(scenario: &Scenario, tenants: bool) -> (Vec<Entity>, Vec<usize>) {
    let mut entities = Vec::new();
    let mut of_group: Vec<Option<usize>> = vec![None; scenario.groups().len()];
    let mut of_process = Vec::new();
    for (p, sp) in scenario.processes().iter().enumerate() {
        let e = match sp.group().filter(|_| tenants) {
            Some(g) => *of_group[g].get_or_insert_with(|| {
                entities.push(Entity::Group(g));
                entities.len() - 1
            }),
            None => {
                entities.push(Entity::Process(p));
                entities.len() - 1
            }
        };
        of_process.push(e);
    }
    (entities, of_process)
}

impl Trim {
    /// The trim of `scenario`'s entities every `period`; `tenants`: the entities are tenant
    /// groups and ungrouped processes (the `tenants` policy), otherwise processes.
    pub fn new(scenario: &Scenario, period: Nanos, tenants: bool) -> Trim {
        let (entities, entity_of_process) = entities(scenario, tenants);
        Trim {
            period,
            tenants,
            entities,
            entity_of_process,
            // The scenario's cores, as the real engine's trim has always used: no entity can
            // use more (a real run on fewer CPUs is refused or stated as degraded).
            trim: ShareTrim::new(scenario.cores()),
            epoch: None,
        }
    }

    /// The entities it corrects, in the order of [`Trim::factor`].
    pub fn entities(&self) -> &[Entity] {
        &self.entities
    }

    /// Current correction factor of entity `i` (1 before its first correction).
    pub fn factor(&self, i: usize) -> f64 {
        self.trim.factor(i)
    }

    /// Entity `e`'s nominal weight in cgroup v2 units, as its cgroup holds it: a
    /// `process-fair` process 100 (a new cgroup's default); a tenant group its current
    /// weight; an ungrouped process under `tenants` its weight / 1024 (a nice-0 process
    /// weighs as much as a tenant of weight 1).
    fn nominal(&self, e: Entity, snap: &Snapshot) -> u64 {
        match (e, self.tenants) {
            (Entity::Group(g), _) => snap.group_weights.get(g).copied().unwrap_or(1),
            (Entity::Process(p), true) => (snap.scenario.processes()[p].weight() + 512) / 1024,
            (Entity::Process(_), false) => 100,
        }
        .clamp(1, 10_000)
    }
}

impl Controller for Trim {
    fn name(&self) -> &'static str {
        "share-trim"
    }
    fn period(&self) -> Nanos {
        self.period
    }
    fn emits(&self) -> &'static [ActionKind] {
        &[ActionKind::SetEntityWeight]
    }
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        if self.epoch.replace(snap.process_cpu_epoch) != Some(snap.process_cpu_epoch) {
            // The CPU times' source changed: the next period starts afresh.
            self.trim.rebase();
        }
        let mut ents: Vec<EntityPeriod> = self
            .entities
            .iter()
            .map(|&e| EntityPeriod {
                weight: self.nominal(e, snap),
                runnable: 0,
                cpu_ns: 0,
            })
            .collect();
        for (p, &e) in self.entity_of_process.iter().enumerate() {
            ents[e].cpu_ns += snap.process_cpu.get(p).map_or(0, |c| c.0);
        }
        for t in snap.threads.iter().filter(|t| t.runnable) {
            if let Some(&e) = self.entity_of_process.get(t.process) {
                ents[e].runnable += 1;
            }
        }
        let Some(weights) = self.trim.tick(snap.now.0, &ents) else {
            return;
        };
        for (&entity, w) in self.entities.iter().zip(weights) {
            out.push(Action::SetEntityWeight {
                entity,
                weight: ((w * ENTITY_WEIGHT_SCALE as f64).round() as u64).max(1),
            });
        }
    }
}

/// The share trim of a `process-fair` or `tenants` scenario that asks for it (`policy.trim`,
/// on by default), every `policy.period`; `None` for any other.
pub fn build(scenario: &Scenario) -> Option<Trim> {
    let spec = scenario.policy();
    let tenants = match spec.name() {
        PolicyName::ProcessFair => false,
        PolicyName::Tenants => true,
        _ => return None,
    };
    spec.trim()
        .then(|| Trim::new(scenario, spec.period(), tenants))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of the biased kernel: entity i receives CPU in proportion to
    /// `written weight x bias[i]`, capped at its runnable threads.
    fn kernel(weights: &[f64], bias: &[f64], runnable: &[usize], cpus: f64, dt: f64) -> Vec<f64> {
        let eff: Vec<(f64, f64)> = weights
            .iter()
            .zip(bias)
            .zip(runnable)
            .map(|((w, b), &r)| (w * b, r as f64 * dt))
            .collect();
        crate::gps::water_fill(cpus * dt, &eff)
    }

    fn run(
        bias: &[f64],
        nominal: &[u64],
        runnable: &[usize],
        periods: usize,
    ) -> (ShareTrim, Vec<f64>) {
        let mut trim = ShareTrim::new(2);
        let mut cpu = vec![0u64; bias.len()];
        let mut written: Vec<f64> = nominal.iter().map(|&w| w as f64).collect();
        let dt = 100e6;
        let mut last = Vec::new();
        for p in 0..=periods {
            let ents: Vec<EntityPeriod> = (0..bias.len())
                .map(|i| EntityPeriod {
                    weight: nominal[i],
                    runnable: runnable[i],
                    cpu_ns: cpu[i],
                })
                .collect();
            if let Some(w) = trim.tick(p as u64 * dt as u64, &ents) {
                written = w;
            }
            last = kernel(&written, bias, runnable, 2.0, dt);
            for (c, g) in cpu.iter_mut().zip(&last) {
                *c += *g as u64;
            }
        }
        let total: f64 = last.iter().sum();
        (trim, last.iter().map(|g| g / total).collect())
    }

    #[test]
    fn a_constant_kernel_bias_is_removed() {
        // Process-fair: three equal processes, the kernel favouring the first by 15 %.
        let (trim, shares) = run(&[1.15, 1.0, 0.95], &[100, 100, 100], &[1, 8, 50], 60);
        for s in &shares {
            assert!((s - 1.0 / 3.0).abs() < 0.002, "{shares:?}");
        }
        assert!(trim.factor(0) < 0.9 && trim.factor(2) > 1.0, "{trim:?}");
    }

    #[test]
    fn weighted_tenants_reach_their_fractions() {
        let (_, shares) = run(&[0.9, 1.1], &[100, 300], &[6, 6], 60);
        assert!((shares[0] - 0.25).abs() < 0.002, "{shares:?}");
    }

    #[test]
    fn a_period_with_a_weight_change_corrects_nothing() {
        let mut trim = ShareTrim::new(2);
        let e = |w: u64, cpu: u64| EntityPeriod {
            weight: w,
            runnable: 6,
            cpu_ns: cpu,
        };
        assert!(trim.tick(0, &[e(100, 0), e(100, 0)]).is_none());
        // vm2 goes 1 -> 3 inside the period: its CPU time is half old share, half new.
        assert!(trim.tick(100, &[e(100, 80), e(300, 120)]).is_none());
        assert_eq!((trim.factor(0), trim.factor(1)), (1.0, 1.0));
        let w = trim.tick(200, &[e(100, 130), e(300, 270)]).unwrap();
        assert_eq!(w, vec![100.0, 300.0], "on target: {trim:?}");
    }

    #[test]
    fn a_capped_entity_keeps_its_factor() {
        // One thread cannot take more than one of two CPUs: no wind-up while it is capped.
        let (trim, shares) = run(&[1.0, 1.0], &[1000, 100], &[1, 4], 30);
        assert_eq!(trim.factor(0), 1.0);
        assert!((shares[0] - 0.5).abs() < 1e-9, "{shares:?}");
    }

    #[test]
    fn factors_stay_within_their_bounds() {
        let (trim, _) = run(&[200.0, 1.0], &[100, 100], &[4, 4], 60);
        assert!(trim.factor(0) >= 1.0 / MAX_FACTOR - 1e-12);
        assert!(trim.factor(1) <= MAX_FACTOR + 1e-12);
    }

    #[test]
    fn an_entity_running_all_it_can_is_never_raised() {
        // A one-thread hog on 0.96 of a CPU, its GPS share 0.98: below its cap of one CPU, but
        // more weight cannot buy it more; the other entity is still lowered.
        let mut trim = ShareTrim::new(2);
        let e = |runnable: usize, cpu: u64| EntityPeriod {
            weight: 100,
            runnable,
            cpu_ns: cpu,
        };
        assert!(trim.tick(0, &[e(1, 0), e(400, 0)]).is_none());
        trim.tick(1000, &[e(1, 960), e(400, 1000)]).unwrap();
        assert_eq!(trim.factor(0), 1.0, "{trim:?}");
        assert!(trim.factor(1) < 1.0, "{trim:?}");
    }

    #[test]
    fn one_period_moves_a_factor_by_at_most_max_step() {
        // A tenfold error (a period measured badly) moves a factor by a bounded step.
        let mut trim = ShareTrim::new(4);
        let e = |cpu: u64| EntityPeriod {
            weight: 100,
            runnable: 4,
            cpu_ns: cpu,
        };
        assert!(trim.tick(0, &[e(0), e(0)]).is_none());
        trim.tick(1000, &[e(2000), e(200)]).unwrap();
        // Targets 1,100 each: the second's step (5.5^GAIN) is bounded, the first's is not.
        assert!((trim.factor(1) - MAX_STEP).abs() < 1e-12, "{trim:?}");
        assert!((trim.factor(0) - (1100.0f64 / 2000.0).powf(GAIN)).abs() < 1e-12);
    }

    #[test]
    fn a_kernel_that_answers_late_is_not_overshot() {
        // The kernel applies the weights written two ticks earlier (its load averages lag)
        // and favours the first entity threefold: the shares settle at a half and pass it
        // by under 2 points on the way.
        let (bias, runnable, dt) = ([3.0, 1.0], [3usize, 3], 100e6);
        let mut trim = ShareTrim::new(2);
        let mut cpu = [0u64; 2];
        let (mut written, mut pending) = (vec![100.0; 2], vec![100.0; 2]);
        let mut first = Vec::new();
        for p in 0..=80u64 {
            let ents: Vec<EntityPeriod> = (0..2)
                .map(|i| EntityPeriod {
                    weight: 100,
                    runnable: runnable[i],
                    cpu_ns: cpu[i],
                })
                .collect();
            let next = trim
                .tick(p * dt as u64, &ents)
                .unwrap_or_else(|| pending.clone());
            let got = kernel(&written, &bias, &runnable, 2.0, dt);
            (written, pending) = (pending, next);
            first.push(got[0] / (got[0] + got[1]));
            for (c, g) in cpu.iter_mut().zip(&got) {
                *c += *g as u64;
            }
        }
        assert!(first.iter().all(|&s| s > 0.5 - 0.02), "{first:?}");
        assert!((first[80] - 0.5).abs() < 0.01, "{first:?}");
    }
}
