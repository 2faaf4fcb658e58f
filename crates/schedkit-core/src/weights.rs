//! The Linux CFS weight table (`sched_prio_to_weight` in kernel/sched/core.c): nice -20..19
//! mapped to load weights, 1024 at nice 0, each step about 1.25x. Seed 004 (3.2, 4.2.2) uses
//! these weights (1024 for nice 0, 335 for nice 5).

/// Weight of nice -20 at index 0 through nice 19 at index 39.
pub const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, // -20 .. -16
    29154, 23254, 18705, 14949, 11916, // -15 .. -11
    9548, 7620, 6100, 4904, 3906, // -10 .. -6
    3121, 2501, 1991, 1586, 1277, // -5 .. -1
    1024, 820, 655, 526, 423, // 0 .. 4
    335, 272, 215, 172, 137, // 5 .. 9
    110, 87, 70, 56, 45, // 10 .. 14
    36, 29, 23, 18, 15, // 15 .. 19
];

/// CFS weight of a nice value (clamped to -20..19).
pub fn nice_to_weight(nice: i32) -> u64 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// The nice value whose weight is nearest to `weight` (in ratio, as the kernel's table is
/// geometric). Used by controllers that compute a weight but can only set a nice value.
pub fn nearest_nice(weight: f64) -> i32 {
    let mut best = 0;
    let mut best_err = f64::INFINITY;
    for (i, &w) in PRIO_TO_WEIGHT.iter().enumerate() {
        let err = (w as f64 / weight.max(1e-9)).ln().abs();
        if err < best_err {
            best_err = err;
            best = i as i32 - 20;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_anchors() {
        assert_eq!(nice_to_weight(0), 1024);
        assert_eq!(nice_to_weight(5), 335);
        assert_eq!(nice_to_weight(-20), 88761);
        assert_eq!(nice_to_weight(19), 15);
        assert_eq!(nearest_nice(1024.0), 0);
        assert_eq!(nearest_nice(335.0), 5);
        assert_eq!(nearest_nice(1e9), -20);
        for n in -20..=19 {
            assert_eq!(nearest_nice(nice_to_weight(n) as f64), n);
        }
    }
}
