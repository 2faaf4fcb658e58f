//! Summary statistics the experiments and benchmarks share: medians (the machine is shared
//! and noisy, so headline numbers are medians of repeats) and means with a Student-t 95 %
//! confidence interval.

/// The median of `xs` (NaN when empty); the mean of the two middle values for an even count.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Mean and 95 % confidence half-width (Student's t).
pub fn mean_ci(x: &[f64]) -> (f64, f64) {
    let n = x.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    // t(0.975, df) for df = 1..30; beyond, the normal 1.96.
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let t = T.get(n - 2).copied().unwrap_or(1.96);
    (mean, t * (var / n as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::{mean_ci, median};

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn confidence_interval_uses_students_t() {
        // n = 10, sd = 1: half-width t(0.975, 9) / sqrt(10) = 2.262 / 3.162.
        let x = [9.0, 11.0, 9.0, 11.0, 9.0, 11.0, 9.0, 11.0, 10.0, 10.0];
        let (m, ci) = mean_ci(&x);
        assert_eq!(m, 10.0);
        let sd = (8.0f64 / 9.0).sqrt();
        assert!((ci - 2.262 * sd / 10f64.sqrt()).abs() < 1e-9, "{ci}");
        assert_eq!(mean_ci(&[4.0]), (4.0, 0.0));
    }
}
