//! Sweeps split and merged back exactly.
//!
//! A sweep's rows are sums over task sets (sets, sets with misses, rejected sets, jobs,
//! misses, migrations, switches), and every task set depends only on its seed and
//! utilisation. So a sweep over seeds A..B can be cut into seed ranges, run anywhere (a
//! Slurm job array with `--shard I/N`, Dask workers in batches), and the rows summed: the
//! result equals the single-machine sweep to the last count. [`merge`] checks that the
//! pieces belong to one sweep and cover it exactly once before it sums.

use crate::Error;
use schedkit_core::scenario::{PolicyName, Scenario};
use schedkit_experiments::progress::Progress;
use schedkit_experiments::sweep::{
    parse_seeds, parse_utilisations, sweep, sweep_with_progress, Row, SweepOptions,
};
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;

/// `--shard I/N`: the I-th (1-based) of N parts of the seed range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub fn parse(s: &str) -> Result<Shard, Error> {
        let bad = |why: &str| Error::bad_option("shard", s, why);
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("expected I/N, e.g. 3/16"))?;
        let index: u64 = i.trim().parse().map_err(|_| bad("I is not a number"))?;
        let count: u64 = n.trim().parse().map_err(|_| bad("N is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(bad("needs 1 <= I <= N"));
        }
        Ok(Shard { index, count })
    }

    /// This shard's contiguous part of `seeds` (the first `len % N` shards take one seed
    /// more); `None` when there are fewer seeds than shards and this one gets none.
    pub fn seeds(&self, seeds: &RangeInclusive<u64>) -> Option<RangeInclusive<u64>> {
        let len = seeds.end() - seeds.start() + 1;
        let (base, extra) = (len / self.count, len % self.count);
        let i = self.index - 1;
        let first = seeds.start() + i * base + i.min(extra);
        let n = base + u64::from(i < extra);
        (n > 0).then(|| first..=first + n - 1)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The `--json` document of a sweep, of one shard of it, or of merged shards. A whole or
/// merged sweep has no `shard` and no `seeds`; a shard names its part of `sweep`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepDoc {
    pub file: String,
    pub cores: usize,
    pub horizon_ns: u64,
    pub generator: String,
    pub sweep: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// The seeds this shard ran (`seeds=A..B`), `None` for a shard that got none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<String>,
    pub rows: Vec<Row>,
}

/// Rows with every count zero, in sweep order: what a shard without seeds contributes.
fn zero_rows(base: &Scenario, options: &SweepOptions) -> Result<Vec<Row>, Error> {
    let us = parse_utilisations(options.utilisations.as_deref().unwrap_or("0.1..1.0:0.1"))?;
    let policies: Vec<String> = if options.policies.is_empty() {
        vec![base.policy().name().to_string()]
    } else {
        let names = crate::compare::parse_policies(&options.policies)?;
        names
            .iter()
            .map(|p: &PolicyName| p.as_str().to_string())
            .collect()
    };
    Ok(us
        .iter()
        .flat_map(|&u| policies.iter().map(move |p| Row::empty(u, p.clone())))
        .collect())
}

/// Runs a sweep, or with `shard` one part of it, and returns its document.
pub fn run(
    base: &Scenario,
    options: &SweepOptions,
    shard: Option<Shard>,
    progress: &dyn Progress,
) -> Result<SweepDoc, Error> {
    let full = parse_seeds(options.sweep.as_deref().unwrap_or_default())?;
    let mut doc = SweepDoc {
        file: base.file().to_string(),
        cores: base.cores(),
        horizon_ns: base.horizon().0,
        generator: options.generator.clone(),
        sweep: options.sweep.clone(),
        shard: shard.map(|s| s.to_string()),
        seeds: None,
        rows: Vec::new(),
    };
    let part = match shard {
        None => Some(full),
        Some(s) => s.seeds(&full),
    };
    doc.rows = match part {
        Some(p) => {
            let spec = format!("seeds={}..{}", p.start(), p.end());
            if shard.is_some() {
                doc.seeds = Some(spec.clone());
            }
            let opts = SweepOptions {
                sweep: Some(spec),
                ..options.clone()
            };
            sweep_with_progress(base, &opts, progress)?
        }
        None => zero_rows(base, options)?,
    };
    Ok(doc)
}

/// The rows of a sweep over the given seed ranges (each inclusive), summed: the Python
/// module's sweep over any set of seeds, and one Dask batch.
pub fn run_ranges(
    base: &Scenario,
    options: &SweepOptions,
    ranges: &[(u64, u64)],
) -> Result<Vec<Row>, Error> {
    let mut total = zero_rows(base, options)?;
    for &(a, b) in ranges {
        let opts = SweepOptions {
            sweep: Some(format!("seeds={a}..{b}")),
            ..options.clone()
        };
        let rows = sweep(base, &opts)?;
        add_rows(&mut total, &rows, "range")?;
    }
    Ok(total)
}

/// Adds `more` into `total`, row by row; the rows must be the same (utilisation, policy)
/// points in the same order.
pub fn add_rows(total: &mut [Row], more: &[Row], what: &str) -> Result<(), Error> {
    if total.len() != more.len()
        || total
            .iter()
            .zip(more)
            .any(|(a, b)| a.utilisation != b.utilisation || a.policy != b.policy)
    {
        return Err(Error::bad_option(
            "merge",
            what,
            "its rows are other (utilisation, policy) points than the first part's",
        ));
    }
    for (t, m) in total.iter_mut().zip(more) {
        t.sets += m.sets;
        t.sets_with_misses += m.sets_with_misses;
        t.rejected += m.rejected;
        t.jobs += m.jobs;
        t.deadline_misses += m.deadline_misses;
        t.migrations += m.migrations;
        t.context_switches += m.context_switches;
    }
    Ok(())
}

/// Reads the shard documents of `sweep merge` (each the `--json` output of a sharded
/// sweep), named by their paths for [`merge`]'s messages.
pub fn read_docs(files: &[std::path::PathBuf]) -> Result<Vec<(String, SweepDoc)>, Error> {
    let mut docs = Vec::new();
    for f in files {
        let name = f.display().to_string();
        let text =
            std::fs::read_to_string(f).map_err(|e| Error::file(format!("reading {name}"), e))?;
        let doc: SweepDoc = serde_json::from_str(&text).map_err(|e| {
            Error::bad_option("merge", &name, format!("not a sweep --json document: {e}"))
        })?;
        docs.push((name, doc));
    }
    Ok(docs)
}

/// The table of a sweep document, as `sim --sweep` prints it: its heading names the file,
/// cores and horizon, so that much of the base scenario is rebuilt from the document.
pub fn render(doc: &SweepDoc) -> Result<String, Error> {
    let base = Scenario::parse(
        &doc.file,
        &format!(
            "cores = {}\n[run]\nhorizon = \"{}ns\"\n",
            doc.cores, doc.horizon_ns
        ),
    )?;
    let options = SweepOptions {
        sweep: doc.sweep.clone(),
        utilisations: None,
        policies: Vec::new(),
        generator: doc.generator.clone(),
    };
    Ok(schedkit_experiments::sweep::render(
        &base, &options, &doc.rows,
    ))
}

/// Merges shard documents (`name` for messages, e.g. the file path) into the document of the
/// whole sweep. Every shard must come from the same file, machine, horizon, generator and
/// seed range, with the same N, and each of 1..=N must be there exactly once.
pub fn merge(docs: &[(String, SweepDoc)]) -> Result<SweepDoc, Error> {
    let Some((first_name, first)) = docs.first() else {
        return Err(Error::bad_option(
            "merge",
            "",
            "name at least one shard file",
        ));
    };
    let shard_of = |name: &str, d: &SweepDoc| -> Result<Shard, Error> {
        let s = d.shard.as_deref().ok_or_else(|| {
            Error::bad_option(
                "merge",
                name,
                "not a shard (run the sweep with --shard I/N)",
            )
        })?;
        Shard::parse(s)
    };
    let count = shard_of(first_name, first)?.count;
    let mut seen = vec![false; count as usize];
    let mut total = first.clone();
    total.shard = None;
    total.seeds = None;
    for (k, (name, d)) in docs.iter().enumerate() {
        let s = shard_of(name, d)?;
        let same = d.file == first.file
            && d.cores == first.cores
            && d.horizon_ns == first.horizon_ns
            && d.generator == first.generator
            && d.sweep == first.sweep;
        if !same {
            return Err(Error::bad_option(
                "merge",
                name,
                format!(
                    "another sweep than {first_name} (file, cores, horizon, generator and seeds must match)"
                ),
            ));
        }
        if s.count != count {
            return Err(Error::bad_option(
                "merge",
                name,
                format!("shard {s} of another split than {first_name} (N = {count})"),
            ));
        }
        if std::mem::replace(&mut seen[s.index as usize - 1], true) {
            return Err(Error::bad_option(
                "merge",
                name,
                format!("shard {s} is given twice"),
            ));
        }
        if k > 0 {
            add_rows(&mut total.rows, &d.rows, name)?;
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !seen[*i as usize - 1])
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(Error::bad_option(
            "merge",
            first_name,
            format!("shards missing: {}", missing.join(", ")),
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_experiments::progress::Silent;

    fn base() -> Scenario {
        Scenario::parse(
            "base.toml",
            "cores = 2\n[policy]\nname = \"gedf\"\n[run]\nhorizon = \"300ms\"\n",
        )
        .unwrap()
    }

    fn options(seeds: &str) -> SweepOptions {
        SweepOptions {
            sweep: Some(seeds.into()),
            utilisations: Some("0.5,0.95".into()),
            policies: vec!["gedf".into(), "pedf".into()],
            generator: "uunifast:4".into(),
        }
    }

    #[test]
    fn shards_partition_the_seeds() {
        let s = |t| Shard::parse(t).unwrap();
        assert_eq!(s("1/3").seeds(&(1..=10)), Some(1..=4));
        assert_eq!(s("2/3").seeds(&(1..=10)), Some(5..=7));
        assert_eq!(s("3/3").seeds(&(1..=10)), Some(8..=10));
        assert_eq!(s("3/3").seeds(&(0..=1)), None);
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn merged_shards_equal_the_whole_sweep() {
        let whole = run(&base(), &options("seeds=1..7"), None, &Silent).unwrap();
        let docs: Vec<(String, SweepDoc)> = (1..=3)
            .map(|i| {
                let shard = Shard { index: i, count: 3 };
                let d = run(&base(), &options("seeds=1..7"), Some(shard), &Silent).unwrap();
                (format!("s{i}.json"), d)
            })
            .collect();
        assert_eq!(docs[1].1.seeds.as_deref(), Some("seeds=4..5"));
        let merged = merge(&docs).unwrap();
        assert_eq!(merged, whole);
        assert!(merged.rows.iter().all(|r| r.sets == 7));
        // Through JSON, as files between machines.
        let text = serde_json::to_string(&docs[0].1).unwrap();
        assert_eq!(serde_json::from_str::<SweepDoc>(&text).unwrap(), docs[0].1);

        let e = merge(&docs[..2]).unwrap_err().to_string();
        assert!(e.contains("shards missing: 3/3"), "{e}");
        let twice = vec![docs[0].clone(), docs[0].clone(), docs[2].clone()];
        assert!(merge(&twice).unwrap_err().to_string().contains("twice"));
        let mut other = docs.clone();
        other[2].1.horizon_ns += 1;
        assert!(merge(&other)
            .unwrap_err()
            .to_string()
            .contains("another sweep"));

        let ranges = run_ranges(&base(), &options("seeds=1..1"), &[(1, 3), (4, 7)]).unwrap();
        assert_eq!(ranges, whole.rows);
    }

    #[test]
    fn more_shards_than_seeds_give_empty_parts() {
        let whole = run(&base(), &options("seeds=1..2"), None, &Silent).unwrap();
        let docs: Vec<(String, SweepDoc)> = (1..=3)
            .map(|i| {
                let sh = Shard { index: i, count: 3 };
                (
                    i.to_string(),
                    run(&base(), &options("seeds=1..2"), Some(sh), &Silent).unwrap(),
                )
            })
            .collect();
        assert_eq!(docs[2].1.seeds, None);
        assert_eq!(merge(&docs).unwrap(), whole);
    }
}
