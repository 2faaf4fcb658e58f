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
//! at one CPU per runnable thread), and multiplies the entity's correction factor by
//! `(target / got)^GAIN`; the cgroup is written `nominal x factor`. This is integral control
//! in the log domain: a constant bias is removed whatever its size, and `GAIN` < 1 damps the
//! noise of one period's measurement (schedstat lags a running thread by up to a tick).
//!
//! Invariants: factors stay within `[1/MAX_FACTOR, MAX_FACTOR]`; an entity with no runnable
//! thread, or whose GPS share is its cap (it cannot use more), keeps its factor; a change of
//! nominal weight (`schedkit ctl set-weight`) takes effect at once, the factor carrying on as
//! the correction of the kernel's bias.

/// Exponent of one period's correction (0.5: half of the measured log-error per period).
pub const GAIN: f64 = 0.5;
/// Largest correction either way.
pub const MAX_FACTOR: f64 = 8.0;
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
#[derive(Clone, Debug, Default)]
pub struct ShareTrim {
    factor: Vec<f64>,
    last_cpu: Vec<u64>,
    last_weight: Vec<u64>,
    last_t: Option<u64>,
}

impl ShareTrim {
    pub fn new() -> ShareTrim {
        ShareTrim::default()
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
            .map(|e| (e.weight as f64, e.runnable as f64 * dt))
            .collect();
        let target = schedkit_core::gps::water_fill(job, &caps);
        for i in 0..n {
            let capped = target[i] >= caps[i].1 * 0.999;
            if entities[i].runnable == 0 || capped || got[i] <= 0.0 || target[i] <= 0.0 {
                continue;
            }
            let f = self.factor[i] * (target[i] / got[i]).powf(GAIN);
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
        schedkit_core::gps::water_fill(cpus * dt, &eff)
    }

    fn run(
        bias: &[f64],
        nominal: &[u64],
        runnable: &[usize],
        periods: usize,
    ) -> (ShareTrim, Vec<f64>) {
        let mut trim = ShareTrim::new();
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
        let (trim, shares) = run(&[1.15, 1.0, 0.95], &[100, 100, 100], &[1, 8, 50], 30);
        for s in &shares {
            assert!((s - 1.0 / 3.0).abs() < 0.002, "{shares:?}");
        }
        assert!(trim.factor(0) < 0.9 && trim.factor(2) > 1.0, "{trim:?}");
    }

    #[test]
    fn weighted_tenants_reach_their_fractions() {
        let (_, shares) = run(&[0.9, 1.1], &[100, 300], &[6, 6], 30);
        assert!((shares[0] - 0.25).abs() < 0.002, "{shares:?}");
    }

    #[test]
    fn a_period_with_a_weight_change_corrects_nothing() {
        let mut trim = ShareTrim::new();
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
}
