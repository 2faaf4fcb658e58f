//! Time in integer nanoseconds, and the unit-carrying durations of scenario files.
//!
//! Every engine, metric and report uses [`Nanos`]; there is no second time unit anywhere in
//! schedkit (mixed units are a classic simulator bug). Scenario files write durations with a
//! unit (`"250us"`, `"4ms"`, `"1.5s"`); a bare number is rejected because `4` could mean
//! anything.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in time or a duration, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }

    /// Parses a time window `FROM..TO` (`"2s..2.1s"`, `--window`): two durations, `TO` after
    /// `FROM`; the error says what is wrong, for the caller to prefix with the flag.
    pub fn parse_window(text: &str) -> Result<(Nanos, Nanos), String> {
        let (a, b) = text
            .split_once("..")
            .ok_or_else(|| "give it as FROM..TO, e.g. 2s..2.1s".to_string())?;
        let (a, b) = (Nanos::parse(a.trim())?, Nanos::parse(b.trim())?);
        if b <= a {
            return Err("TO must be after FROM".into());
        }
        Ok((a, b))
    }

    /// Parses `"250us"`, `"4ms"`, `"1.5s"`, `"10ns"`, `"2m"` (minutes). The number must be
    /// non-negative and the unit is mandatory.
    pub fn parse(text: &str) -> Result<Nanos, String> {
        let s = text.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .ok_or_else(|| {
                format!("invalid duration \"{text}\": missing unit (write e.g. \"4ms\"; units: ns, us, ms, s, m)")
            })?;
        let (num, unit) = s.split_at(split);
        let unit = unit.trim();
        if num.is_empty() {
            return Err(if s.starts_with('-') {
                format!("invalid duration \"{text}\": must not be negative")
            } else {
                format!("invalid duration \"{text}\": expected a number before the unit")
            });
        }
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" | "min" => 60e9,
            _ => {
                return Err(format!(
                    "invalid duration \"{text}\": unknown unit \"{unit}\" (units: ns, us, ms, s, m)"
                ))
            }
        };
        let value: f64 = num
            .replace('_', "")
            .parse()
            .map_err(|_| format!("invalid duration \"{text}\": \"{num}\" is not a number"))?;
        let ns = value * scale;
        if !ns.is_finite() || ns > u64::MAX as f64 / 2.0 {
            return Err(format!("invalid duration \"{text}\": too large"));
        }
        if ns.fract() != 0.0 && ns.fract() > 1e-6 {
            return Err(format!(
                "invalid duration \"{text}\": finer than one nanosecond"
            ));
        }
        Ok(Nanos(ns.round() as u64))
    }
}

impl fmt::Display for Nanos {
    /// The shortest exact form: `4ms`, `1.5s`, `250us`, `17ns`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let (div, unit) = if n == 0 {
            (1, "s")
        } else if n.is_multiple_of(1_000_000_000) || n >= 10_000_000_000 {
            (1_000_000_000, "s")
        } else if n.is_multiple_of(1_000_000) || n >= 10_000_000 {
            (1_000_000, "ms")
        } else if n.is_multiple_of(1_000) || n >= 10_000 {
            (1_000, "us")
        } else {
            (1, "ns")
        };
        if n.is_multiple_of(div) {
            write!(f, "{}{unit}", n / div)
        } else {
            let width = div.ilog10() as usize;
            let frac = format!("{:0width$}", n % div);
            write!(f, "{}.{}{unit}", n / div, frac.trim_end_matches('0'))
        }
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0 + o.0)
    }
}
impl AddAssign for Nanos {
    fn add_assign(&mut self, o: Nanos) {
        self.0 += o.0;
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, o: Nanos) -> Nanos {
        Nanos(self.0 - o.0)
    }
}
impl SubAssign for Nanos {
    fn sub_assign(&mut self, o: Nanos) {
        self.0 -= o.0;
    }
}

impl Serialize for Nanos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Nanos, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Nanos;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration with a unit, such as \"4ms\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Nanos, E> {
                Nanos::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Nanos, E> {
                Err(E::custom(format!(
                    "invalid duration {v}: missing unit (write e.g. \"{v}ms\")"
                )))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Nanos, E> {
                self.visit_i64(v as i64)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Nanos, E> {
                Err(E::custom(format!(
                    "invalid duration {v}: missing unit (write e.g. \"{v}ms\")"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// A byte size with a unit (`"5MB"`, `"64KiB"`, `"1GB"`), as used by workload parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn parse(text: &str) -> Result<Bytes, String> {
        let s = text.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let scale: f64 = match unit.trim() {
            "" | "B" => 1.0,
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" | "K" => 1024.0,
            "MiB" | "M" => 1024.0 * 1024.0,
            "GiB" | "G" => 1024.0 * 1024.0 * 1024.0,
            u => {
                return Err(format!(
                    "invalid size \"{text}\": unknown unit \"{u}\" (B, KB, MB, GB, KiB, MiB, GiB)"
                ))
            }
        };
        let v: f64 = num
            .parse()
            .map_err(|_| format!("invalid size \"{text}\": \"{num}\" is not a number"))?;
        Ok(Bytes((v * scale).round() as u64))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = String::deserialize(d)?;
        Bytes::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_windows() {
        assert_eq!(
            Nanos::parse_window("2s..2.1s"),
            Ok((Nanos::from_secs(2), Nanos::from_ms(2100)))
        );
        assert_eq!(
            Nanos::parse_window(" 1ms .. 3ms "),
            Ok((Nanos::from_ms(1), Nanos::from_ms(3)))
        );
        assert!(Nanos::parse_window("2s").unwrap_err().contains("FROM..TO"));
        assert!(Nanos::parse_window("2s..1s").unwrap_err().contains("after"));
        assert!(Nanos::parse_window("2..3s")
            .unwrap_err()
            .contains("missing unit"));
    }

    #[test]
    fn parses_units() {
        assert_eq!(Nanos::parse("250us"), Ok(Nanos(250_000)));
        assert_eq!(Nanos::parse("4ms"), Ok(Nanos(4_000_000)));
        assert_eq!(Nanos::parse("1.5s"), Ok(Nanos(1_500_000_000)));
        assert_eq!(Nanos::parse("10ns"), Ok(Nanos(10)));
        assert_eq!(Nanos::parse("0s"), Ok(Nanos(0)));
        assert!(Nanos::parse("4").unwrap_err().contains("missing unit"));
        assert!(Nanos::parse("-4ms").unwrap_err().contains("negative"));
        assert!(Nanos::parse("4 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
    }

    #[test]
    fn display_round_trips() {
        for n in [
            0u64,
            1,
            999,
            1_000,
            250_000,
            4_000_000,
            1_500_000_000,
            12_345_678,
        ] {
            let s = Nanos(n).to_string();
            assert_eq!(Nanos::parse(&s), Ok(Nanos(n)), "{s}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(Bytes::parse("5MB"), Ok(Bytes(5_000_000)));
        assert_eq!(Bytes::parse("64KiB"), Ok(Bytes(65_536)));
        assert!(Bytes::parse("5XB").is_err());
    }
}
