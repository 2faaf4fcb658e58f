//! Generalized Processor Sharing, the ideal reference of seed 004 (4.3.1).
//!
//! Under GPS every runnable entity receives CPU at a rate proportional to its weight, with one
//! constraint: a thread cannot use more than one core, so an entity with `n` runnable threads
//! is capped at `n` cores. Capacity a capped entity cannot use is shared among the others in
//! proportion to their weights ("water-filling").
//!
//! schedkit's GPS is hierarchical and process-fair: the top level shares the machine between
//! groups (tenants) and ungrouped processes by weight; a group shares its rate among its
//! runnable member processes by weight; a process shares its rate equally among its runnable
//! threads. A process's weight is its per-thread weight (`weight`, or `nice` through
//! prio_to_weight), *not* multiplied by its thread count: a process that spawns more threads
//! does not deserve more CPU. This is the reference that seed 004 ch. 3 measures the greedy
//! gap against; for single-threaded processes (ch. 4) it is plain weighted GPS.

/// Water-filling: shares `capacity` among entries `(weight, cap)` in proportion to weight,
/// no entry receiving more than its cap. Returns the rate of each entry. The rates sum to
/// `min(capacity, sum of caps)`.
///
/// Invariant: an entry is capped only if its proportional share exceeds its cap; the loop
/// caps the entries with the largest weight/cap ratio first, which is the unique fixed point.
pub fn water_fill(capacity: f64, entries: &[(f64, f64)]) -> Vec<f64> {
    let mut rates = vec![0.0; entries.len()];
    let mut order: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].0 > 0.0 && entries[i].1 > 0.0)
        .collect();
    // Entries most likely to hit their cap first: largest weight per unit of cap.
    order.sort_by(|&a, &b| {
        let ra = entries[a].0 / entries[a].1;
        let rb = entries[b].0 / entries[b].1;
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut left = capacity;
    let mut weight_left: f64 = order.iter().map(|&i| entries[i].0).sum();
    let mut k = 0;
    while k < order.len() {
        let i = order[k];
        let (w, cap) = entries[i];
        let share = left * w / weight_left;
        if share >= cap {
            rates[i] = cap;
            left -= cap;
            weight_left -= w;
            k += 1;
        } else {
            break;
        }
    }
    for &i in &order[k..] {
        rates[i] = if weight_left > 0.0 {
            left * entries[i].0 / weight_left
        } else {
            0.0
        };
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn thesis_example_is_uncapped() {
        // 4.2.2: one process of weight 1024 and four of 335 on two cores.
        let e = [
            (1024.0, 1.0),
            (335.0, 1.0),
            (335.0, 1.0),
            (335.0, 1.0),
            (335.0, 1.0),
        ];
        let r = water_fill(2.0, &e);
        assert!((r[0] - 2.0 * 1024.0 / 2364.0).abs() < 1e-12);
        assert!((r.iter().sum::<f64>() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn heavy_entry_is_capped() {
        let r = water_fill(2.0, &[(10_000.0, 1.0), (1.0, 1.0), (1.0, 1.0)]);
        assert_eq!(r[0], 1.0);
        assert!((r[1] - 0.5).abs() < 1e-12 && (r[2] - 0.5).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn sums_to_min_of_capacity_and_caps(
            cap in 1usize..64,
            entries in proptest::collection::vec((1u32..100_000, 1u32..8), 0..40)
        ) {
            let e: Vec<(f64, f64)> = entries.iter().map(|&(w, c)| (w as f64, c as f64)).collect();
            let r = water_fill(cap as f64, &e);
            let total: f64 = e.iter().map(|x| x.1).sum();
            let want = (cap as f64).min(total);
            prop_assert!((r.iter().sum::<f64>() - want).abs() < 1e-6);
            for (i, x) in r.iter().enumerate() {
                prop_assert!(*x <= e[i].1 + 1e-9);
            }
        }
    }
}
