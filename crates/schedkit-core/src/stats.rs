//! Order statistics every part of schedkit reports the same way.
//!
//! One definition of a percentile (docs/metrics.md): the nearest rank. The `p`-th percentile of
//! n values is the value of rank `ceil(p / 100 * n)` (at least 1) in ascending order, so it is
//! always one of the values measured, p50 of an even count is the lower middle value, and p100
//! is the maximum. Used by the report tables, the experiments, the runtime pool's statistics
//! and the real gang engine's switch times.

/// The `p`-th percentile (0..=100, nearest rank) of `v`; `None` when empty.
pub fn percentile(v: &[u64], p: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = ((p / 100.0) * s.len() as f64).ceil().max(1.0) as usize;
    Some(s[rank.min(s.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&[7], 1.0), Some(7));
        assert_eq!(percentile(&[4, 1, 3, 2], 50.0), Some(2));
        assert_eq!(percentile(&[4, 1, 3, 2], 90.0), Some(4));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
