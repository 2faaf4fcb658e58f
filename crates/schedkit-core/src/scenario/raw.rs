//! The raw serde layer: what the TOML text deserialises into before the checks.

use crate::time::{Bytes, Nanos};
use serde::Deserialize;
use std::ops::Range;
use toml::Spanned;

/// A value and where it was written: its byte span in the scenario text, or `None` for a
/// value made in code (a [`super::ScenarioBuilder`]'s). The checks take these, so a file and
/// a builder go through the same code and errors point into the file when there is one.
#[derive(Clone, Debug)]
pub(super) struct Val<T> {
    pub(super) value: T,
    pub(super) span: Option<Range<usize>>,
}

impl<T> Val<T> {
    /// A value made in code.
    pub(super) fn new(value: T) -> Val<T> {
        Val { value, span: None }
    }
    pub(super) fn get_ref(&self) -> &T {
        &self.value
    }
    pub(super) fn into_inner(self) -> T {
        self.value
    }
    pub(super) fn span(&self) -> Option<Range<usize>> {
        self.span.clone()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Val<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<T>::deserialize(d)?;
        Ok(Val {
            span: Some(s.span()),
            value: s.into_inner(),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) cores: Option<Val<i64>>,
    pub(super) policy: Option<Val<RawPolicy>>,
    pub(super) run: Option<RawRun>,
    #[serde(default)]
    pub(super) process: Vec<Val<RawProcess>>,
    #[serde(default)]
    pub(super) group: Vec<Val<RawGroup>>,
    #[serde(default)]
    pub(super) task: Vec<Val<RawTask>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) name: Val<String>,
    pub(super) quantum: Option<Val<Nanos>>,
    pub(super) seed: Option<u64>,
    pub(super) sched_latency: Option<Val<Nanos>>,
    pub(super) min_granularity: Option<Val<Nanos>>,
    pub(super) base_slice: Option<Val<Nanos>>,
    pub(super) wake_path: Option<Val<Nanos>>,
    pub(super) balance_interval: Option<Val<Nanos>>,
    pub(super) tick: Option<Val<Nanos>>,
    pub(super) period: Option<Val<Nanos>>,
    pub(super) context_switch: Option<Nanos>,
    pub(super) levels: Option<Val<i64>>,
    pub(super) boost: Option<Nanos>,
    pub(super) imbalance_pct: Option<Val<i64>>,
    pub(super) comm: Option<Val<String>>,
    pub(super) cores_per_node: Option<Val<i64>>,
    pub(super) trim: Option<bool>,
    pub(super) task_group: Option<bool>,
    pub(super) spawner: Option<Val<String>>,
    pub(super) newidle_ratio: Option<Val<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRun {
    pub(super) horizon: Option<Val<Nanos>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProcess {
    pub(super) name: Val<String>,
    #[serde(default)]
    pub(super) arrival: Nanos,
    pub(super) burst: Option<Val<Nanos>>,
    pub(super) threads: Option<Val<i64>>,
    pub(super) nice: Option<Val<i64>>,
    pub(super) weight: Option<Val<i64>>,
    pub(super) priority: Option<i64>,
    pub(super) tickets: Option<Val<i64>>,
    pub(super) group: Option<Val<String>>,
    pub(super) cpus: Option<Val<Vec<i64>>>,
    pub(super) work: Option<Val<String>>,
    pub(super) array: Option<Bytes>,
    pub(super) stride: Option<Bytes>,
    pub(super) compute: Option<Nanos>,
    pub(super) command: Option<Val<Vec<String>>>,
    pub(super) pattern: Option<Val<Vec<RawPhase>>>,
    pub(super) class: Option<Val<String>>,
    /// The entry's line when it has no span (a process taken from a parsed scenario into a
    /// builder keeps its line for messages).
    #[serde(skip)]
    pub(super) line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPhase {
    pub(super) run: Option<Val<Nanos>>,
    pub(super) sleep: Option<Val<Nanos>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) name: Val<String>,
    pub(super) weight: Option<Val<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) name: Val<String>,
    pub(super) period: Val<Nanos>,
    pub(super) deadline: Option<Val<Nanos>>,
    #[serde(default)]
    pub(super) offset: Nanos,
    pub(super) regions: Option<Val<Vec<RawRegion>>>,
    /// Shorthand for `regions = [{ seq = wcet }]`.
    pub(super) wcet: Option<Val<Nanos>>,
    pub(super) cpus: Option<Val<Vec<i64>>>,
    /// As [`RawProcess::line`].
    #[serde(skip)]
    pub(super) line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegion {
    pub(super) seq: Option<Val<Nanos>>,
    pub(super) par: Option<Val<Vec<Nanos>>>,
}
