//! The raw serde layer: what the TOML text deserialises into before the checks.

use crate::time::{Bytes, Nanos};
use serde::Deserialize;
use toml::Spanned;


#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) cores: Option<Spanned<i64>>,
    pub(super) policy: Option<Spanned<RawPolicy>>,
    pub(super) run: Option<RawRun>,
    #[serde(default)]
    pub(super) process: Vec<Spanned<RawProcess>>,
    #[serde(default)]
    pub(super) group: Vec<Spanned<RawGroup>>,
    #[serde(default)]
    pub(super) task: Vec<Spanned<RawTask>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) name: Spanned<String>,
    pub(super) quantum: Option<Spanned<Nanos>>,
    pub(super) seed: Option<u64>,
    pub(super) sched_latency: Option<Spanned<Nanos>>,
    pub(super) min_granularity: Option<Spanned<Nanos>>,
    pub(super) balance_interval: Option<Spanned<Nanos>>,
    pub(super) tick: Option<Spanned<Nanos>>,
    pub(super) period: Option<Spanned<Nanos>>,
    pub(super) context_switch: Option<Nanos>,
    pub(super) levels: Option<Spanned<i64>>,
    pub(super) boost: Option<Nanos>,
    pub(super) imbalance_pct: Option<Spanned<i64>>,
    pub(super) comm: Option<Spanned<String>>,
    pub(super) cores_per_node: Option<Spanned<i64>>,
    pub(super) trim: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRun {
    pub(super) horizon: Option<Spanned<Nanos>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProcess {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) arrival: Nanos,
    pub(super) burst: Option<Spanned<Nanos>>,
    pub(super) threads: Option<Spanned<i64>>,
    pub(super) nice: Option<Spanned<i64>>,
    pub(super) weight: Option<Spanned<i64>>,
    pub(super) priority: Option<i64>,
    pub(super) tickets: Option<Spanned<i64>>,
    pub(super) group: Option<Spanned<String>>,
    pub(super) cpus: Option<Spanned<Vec<i64>>>,
    pub(super) work: Option<Spanned<String>>,
    pub(super) array: Option<Bytes>,
    pub(super) stride: Option<Bytes>,
    pub(super) compute: Option<Nanos>,
    pub(super) command: Option<Spanned<Vec<String>>>,
    pub(super) pattern: Option<Spanned<Vec<RawPhase>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPhase {
    pub(super) run: Option<Spanned<Nanos>>,
    pub(super) sleep: Option<Spanned<Nanos>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    pub(super) name: Spanned<String>,
    pub(super) weight: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) name: Spanned<String>,
    pub(super) period: Spanned<Nanos>,
    pub(super) deadline: Option<Spanned<Nanos>>,
    #[serde(default)]
    pub(super) offset: Nanos,
    pub(super) regions: Option<Spanned<Vec<RawRegion>>>,
    /// Shorthand for `regions = [{ seq = wcet }]`.
    pub(super) wcet: Option<Spanned<Nanos>>,
    pub(super) cpus: Option<Spanned<Vec<i64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegion {
    pub(super) seq: Option<Spanned<Nanos>>,
    pub(super) par: Option<Spanned<Vec<Nanos>>>,
}
