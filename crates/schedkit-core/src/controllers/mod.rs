//! The fair-share controllers of seed 004 (chapters 3-5), and the load-balancing arithmetic
//! they share with the simulator's CFS model.
//!
//! Every controller here is a [`Controller`]: it runs every `policy.period` on a
//! [`crate::control::Snapshot`] and returns actions, so the *same code* drives the simulator
//! (which applies the actions to its CFS model) and `schedkit run` (which applies them with
//! setpriority, sched_setaffinity and cgroup writes).
//!
//! | policy | controller | source | action |
//! |---|---|---|---|
//! | `pfs` | [`pfs::Pfs`] | 3.3.2 (Wong et al.) | `SetWeight`: process weight / its threads |
//! | `tfps` | [`tfps::Tfps`] | 3.3.3 | `SetWeight`: x n_op / n for greedy processes |
//! | `twrs` | [`twrs::Twrs`] | 3.4.3, eq. 3.3 | `SetWeight`: x (threads on core - own threads) |
//! | `global-fair` | [`global_fair::GlobalFair`] | 4.4 | `Migrate`: the shuttle process |
//! | `tenants` | [`tenants::Tenants`] | 5.3 | `SetWeight`: group weight split among threads |
//! | `gang` | [`gang::Gang`] | seed 002, Ousterhout matrix | `Migrate`, `Stop`/`Resume` per time slot |
//! | `process-fair`, `tenants` (`trim`) | [`trim::Trim`] | feedback on seed 004 ch. 3 | `SetEntityWeight`: nominal x correction |
//!
//! The share trim ([`trim`]) corrects the kernel's group-scheduling bias on real cores. The
//! real engine runs it beside the policy's own controller; [`build`] leaves it out (the
//! simulator's models have no such bias), and [`trim::build`] gives it to either engine.
//!
//! Threads that arrive between two ticks run at their scenario weight until the next tick (at
//! most one period): controllers act periodically, as the thesis's kernel code does once per
//! scheduling round.

pub mod gang;
pub mod global_fair;
pub mod pfs;
pub mod tenants;
pub mod tfps;
pub mod trim;
pub mod twrs;

use crate::control::{Action, Controller, ThreadView};
use crate::scenario::{PolicyName, Scenario};

/// The controller of a fair-share policy, or `None` for policies without one (`cfs` itself
/// and every non-fair-share policy).
pub fn build(scenario: &Scenario) -> Option<Box<dyn Controller>> {
    let spec = &scenario.policy();
    Some(match spec.name() {
        PolicyName::Pfs => Box::new(pfs::Pfs::new(spec.period())),
        PolicyName::Tfps => Box::new(tfps::Tfps::new(spec.period())),
        PolicyName::Twrs => Box::new(twrs::Twrs::new(spec.period())),
        PolicyName::GlobalFair => Box::new(global_fair::GlobalFair::new(
            spec.period(),
            spec.imbalance_pct(),
        )),
        PolicyName::Tenants => Box::new(tenants::Tenants::new(spec.period())),
        PolicyName::Gang => {
            let g = gang::Gang::new(spec.quantum(), scenario.cores());
            Box::new(match &spec.gang_overhead() {
                Some(o) => g.with_overhead(gang::ClusterOverhead {
                    model: crate::gang_overhead::OverheadModel::default(),
                    cores_per_node: o.cores_per_node,
                    pattern: o.pattern,
                }),
                None => g,
            })
        }
        _ => return None,
    })
}

/// Pushes `SetWeight` for `t` unless it already has `weight` (weights are at least 1).
pub(crate) fn set_weight(t: &ThreadView, weight: u64, out: &mut Vec<Action>) {
    let weight = weight.max(1);
    if t.weight != weight {
        out.push(Action::SetWeight {
            thread: t.id,
            weight,
        });
    }
}

/// `num / den` rounded to the nearest integer (den > 0).
pub(crate) fn div_round(num: u128, den: u128) -> u64 {
    ((num + den / 2) / den) as u64
}

/// CFS's load-balancing test between a busiest run queue and a local one (seed 004, 4.2.1).
///
/// - eq. 4.1: `Load_k` is the sum of the weights of the threads in run queue k (the callers
///   pass those sums: `busiest`, `local`, and `total` over all `cores` queues);
/// - eq. 4.2: `Load_imbal = min(Load_busiest - Load_avg, Load_avg - Load_local)` with
///   `Load_avg = total / cores`. The thesis prints `min(min(Load_busiest, Load_avg);
///   Load_avg - Load_k)`; we read its inner term as the kernel's `max_load - avg_load`
///   (2.6.24 `find_busiest_group`). Both readings give 158 in the 4.2.2 example;
/// - eq. 4.3: migration only if `Load_imbal >= min_weight / 2`, where `min_weight` is the
///   smallest weight in the busiest queue (a closure, evaluated only when the cheaper gates
///   pass: finding it may scan the queue);
/// - and the kernel's `imbalance_pct` gate: nothing moves unless
///   `100 * busiest > imbalance_pct * local`.
///
/// Returns `cores * Load_imbal` (kept scaled so the arithmetic stays exact in integers) when
/// load should move, `None` otherwise. In the 4.2.2 example (1024 vs 4 x 335 on 2 cores),
/// `Load_imbal` = 158 < 335 / 2 = 167.5, so it returns `None`: the thesis's unbalanced case.
pub fn cfs_imbalance(
    busiest: u64,
    local: u64,
    total: u64,
    cores: usize,
    imbalance_pct: u32,
    min_weight: impl FnOnce() -> u64,
) -> Option<u128> {
    let imbal_n = load_imbalance(busiest, local, total, cores, imbalance_pct)?;
    // eq. 4.3 times 2n: 2 * imbal >= min_weight.
    (2 * imbal_n >= min_weight() as u128 * cores as u128).then_some(imbal_n)
}

/// Eqs. 4.1-4.2 and the `imbalance_pct` gate of [`cfs_imbalance`] without eq. 4.3: the test
/// of Linux 6.x's `find_busiest_group` / `calculate_imbalance` for overloaded one-CPU groups,
/// which leaves the "is a thread light enough" question to `detach_tasks` (see the `eevdf`
/// model). Returns `cores * Load_imbal`, or `None` when the queues count as balanced.
pub fn load_imbalance(
    busiest: u64,
    local: u64,
    total: u64,
    cores: usize,
    imbalance_pct: u32,
) -> Option<u128> {
    let (b, l, t, n) = (busiest as u128, local as u128, total as u128, cores as u128);
    if cores < 2 || b <= l || 100 * b <= imbalance_pct as u128 * l {
        return None;
    }
    // Both sides of eq. 4.2 times `cores`: b*n - t and t - l*n.
    if b * n <= t || t <= l * n {
        return None;
    }
    Some((b * n - t).min(t - l * n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thesis_example_stays_unbalanced() {
        // 4.2.2: loads 1024 and 1340 on two cores; imbalance 158 < 167.5.
        assert_eq!(cfs_imbalance(1340, 1024, 2364, 2, 125, || 335), None);
        // The same loads with a lighter thread in the busiest queue would move.
        assert_eq!(
            cfs_imbalance(1340, 1024, 2364, 2, 125, || 316),
            Some(2 * 158)
        );
        // An idle core pulls from a queue of two nice-0 threads.
        assert_eq!(
            cfs_imbalance(2048, 0, 2048, 2, 125, || 1024),
            Some(2 * 1024)
        );
        // imbalance_pct: 1100 vs 1000 is within 25 %.
        assert_eq!(cfs_imbalance(1100, 1000, 2100, 2, 125, || 10), None);
        assert!(cfs_imbalance(1100, 1000, 2100, 2, 105, || 10).is_some());
        // One core never balances.
        assert_eq!(cfs_imbalance(5000, 0, 5000, 1, 125, || 1), None);
    }

    #[test]
    fn rounding() {
        assert_eq!(div_round(1024, 50), 20);
        assert_eq!(div_round(1024 * 3, 6), 512);
        assert_eq!(div_round(1024, 6), 171);
    }
}
