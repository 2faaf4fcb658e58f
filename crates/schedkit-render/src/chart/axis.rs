//! Axes: ticks (linear and log), tick labels, time units.

/// "Nice" ticks covering [lo, hi]: steps of 1, 2 or 5 x 10^k, about `target` of them.
/// Returns the ticks (first <= lo, last >= hi) and the step.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        (lo - lo.abs() * 0.5, hi + hi.abs() * 0.5)
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    let ticks = (first as i64..=last as i64)
        .map(|k| k as f64 * step)
        .collect();
    (ticks, step)
}

/// Formats a tick value with just enough decimals for `step`.
pub fn tick_label(v: f64, step: f64) -> String {
    // The fewest decimals that write every multiple of `step` exactly (0.25 -> 2, 2.5 -> 1).
    let decimals = (0..6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6);
    let s = format!("{:.*}", decimals as usize, v);
    if s.starts_with('-') && s.trim_start_matches(['-', '0', '.']).is_empty() {
        s[1..].to_string()
    } else {
        s
    }
}

/// Ticks of a logarithmic axis covering [lo, hi] (both > 0): 1, 2 and 5 x 10^k, the first
/// <= lo and the last >= hi; only powers of ten when the range spans more than three decades.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    // A range with nothing a logarithm can place (no data: `data_range` gives [0, 1]) gets a
    // decade, not a tick loop from log10(0) = -inf.
    let (lo, hi) = match (lo > 0.0 && lo.is_finite(), hi > 0.0 && hi.is_finite()) {
        (true, true) => (lo, hi),
        (false, true) => (hi / 10.0, hi),
        _ => (1.0, 10.0),
    };
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let mantissas: &[f64] = if hi / lo > 1e3 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let all: Vec<f64> = (lo.log10().floor() as i32 - 1..=hi.log10().ceil() as i32 + 1)
        .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
        .collect();
    let first = all
        .iter()
        .rposition(|t| *t <= lo * (1.0 + 1e-9))
        .unwrap_or(0);
    let last = all
        .iter()
        .position(|t| *t >= hi * (1.0 - 1e-9))
        .unwrap_or(all.len() - 1);
    all[first..=last].to_vec()
}

/// A tick label of a logarithmic axis: as many decimals as the tick's own magnitude needs.
pub(super) fn log_tick_label(v: f64) -> String {
    // Past what six decimals or a short integer write, as a power of ten ("1e-7", "2e8"):
    // fixed decimals would print a 1e-7 tick as "0".
    if v > 0.0 && !(1e-4..1e6).contains(&v) {
        let k = v.log10().floor();
        let m = (v / 10f64.powf(k)).round();
        return format!("{m}e{k}");
    }
    tick_label(v, 10f64.powf(v.log10().floor()))
}

/// The unit a time axis spanning `span_ns` reads best in: (nanoseconds per unit, symbol).
pub fn time_unit(span_ns: u64) -> (f64, &'static str) {
    match span_ns {
        s if s >= 2_000_000_000 => (1e9, "s"),
        s if s >= 2_000_000 => (1e6, "ms"),
        s if s >= 2_000 => (1e3, "µs"),
        _ => (1.0, "ns"),
    }
}

/// An axis: what is measured and its unit ("waiting", "ms").
#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub unit: String,
    /// Logarithmic: ticks at 1, 2 and 5 x 10^k, values <= 0 left out.
    pub log: bool,
}

impl Axis {
    pub fn new(label: &str, unit: &str) -> Axis {
        Axis {
            label: label.to_string(),
            unit: unit.to_string(),
            log: false,
        }
    }

    /// The same axis on a logarithmic scale, for values that span decades.
    pub fn log(mut self) -> Axis {
        self.log = true;
        self
    }

    /// Whether a value has a place on this axis (a logarithmic one has none for v <= 0).
    pub fn places(&self, v: f64) -> bool {
        !self.log || v > 0.0
    }

    /// "waiting (ms)", or just the label when there is no unit.
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.unit)
        }
    }
}

/// A rectangle of the canvas.
#[derive(Clone, Copy, Debug)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}
