//! `--real-from FILE`: the real repeats recorded in an earlier run's `fidelity.json`, played
//! back as the experiment's real side, so that a changed model can be checked against the
//! same kernel data without running anything on the machine (whose load would otherwise
//! change the real numbers between two checks).
//!
//! The file must hold, for every scenario of the experiment, at least one recorded repeat
//! whose process names are the scenario's, and every scenario the same number of repeats;
//! anything else is refused naming the file and the field ([`Error::BadInput`], exit 2).

use super::{scenario_name, Measure, RealRunner};
use crate::Error;
use schedkit_core::scenario::Scenario;
use schedkit_core::Nanos;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The part of `fidelity.json` that is played back (`real`); the rest is recomputed.
#[derive(Deserialize)]
struct File {
    real: Vec<(String, Vec<Measure>)>,
    /// The machine's wake-up path the recording measured (absent in files recorded before
    /// it was measured).
    #[serde(default)]
    wake_path_ns: Option<u64>,
}

/// The recorded real repeats, per scenario name, handed out in the recorded order.
#[derive(Debug)]
pub struct Recorded {
    file: String,
    runs: HashMap<String, Vec<Measure>>,
    /// How many repeats each scenario has (the same for all).
    repeats: usize,
    /// How many of each scenario's repeats were handed out.
    next: HashMap<String, usize>,
    wake_path: Option<Nanos>,
}

impl Recorded {
    /// Reads `path` and checks it against `scenarios` (module docs).
    pub fn load(path: &Path, scenarios: &[Scenario]) -> Result<Recorded, Error> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::BadInput(format!("--real-from {file}: cannot read it: {e}")))?;
        Self::parse(&file, &text, scenarios)
    }

    /// [`Recorded::load`] on a file's text.
    pub fn parse(file: &str, text: &str, scenarios: &[Scenario]) -> Result<Recorded, Error> {
        let bad = |field: &str, why: String| {
            Error::BadInput(format!("--real-from {file}: field `{field}`: {why}"))
        };
        let parsed: File = serde_json::from_str(text).map_err(|e| {
            Error::BadInput(format!(
                "--real-from {file}: line {}, column {}: {e} (expected the fidelity.json of an \
                 earlier `schedkit experiment fidelity` run)",
                e.line(),
                e.column()
            ))
        })?;
        let mut runs = HashMap::new();
        for (i, (name, reps)) in parsed.real.iter().cloned().enumerate() {
            if runs.contains_key(&name) {
                return Err(bad(&format!("real[{i}]"), format!("scenario {name} twice")));
            }
            runs.insert(name, (i, reps));
        }
        let mut repeats = None;
        let mut out = HashMap::new();
        for sc in scenarios {
            let name = scenario_name(sc);
            let Some((i, reps)) = runs.remove(&name) else {
                let mut have: Vec<&String> = out.keys().chain(runs.keys()).collect();
                have.sort();
                return Err(bad(
                    "real",
                    format!("no recorded runs of scenario {name} (it has: {have:?})"),
                ));
            };
            if reps.is_empty() {
                return Err(bad(&format!("real[{i}]"), format!("{name}: no repeats")));
            }
            let want: Vec<&str> = sc.processes().iter().map(|p| p.name()).collect();
            for (k, m) in reps.iter().enumerate() {
                let field = |f: &str| format!("real[{i}][1][{k}].{f}");
                if m.names != want {
                    return Err(bad(
                        &field("names"),
                        format!(
                            "{name}: recorded processes {:?}, the scenario file has {want:?}",
                            m.names
                        ),
                    ));
                }
                for (f, len) in [
                    ("share_pct", m.share_pct.len()),
                    ("wait_ms", m.wait_ms.len()),
                ] {
                    if len != want.len() {
                        return Err(bad(
                            &field(f),
                            format!("{name}: {len} values for {} processes", want.len()),
                        ));
                    }
                }
            }
            match repeats {
                None => repeats = Some(reps.len()),
                Some(r) if r != reps.len() => {
                    return Err(bad(
                        &format!("real[{i}]"),
                        format!(
                            "{name}: {} repeats where the scenarios before it have {r}",
                            reps.len()
                        ),
                    ))
                }
                Some(_) => {}
            }
            out.insert(name, reps);
        }
        Ok(Recorded {
            file: file.to_string(),
            runs: out,
            repeats: repeats.unwrap_or(0),
            next: HashMap::new(),
            wake_path: parsed.wake_path_ns.map(Nanos),
        })
    }

    /// The repeats per scenario.
    pub fn repeats(&self) -> usize {
        self.repeats
    }
}

impl RealRunner for Recorded {
    fn wake_path(&mut self) -> Result<Option<Nanos>, Error> {
        Ok(self.wake_path)
    }

    fn run(&mut self, sc: &Scenario) -> Result<Measure, Error> {
        let name = scenario_name(sc);
        let k = self.next.entry(name.clone()).or_insert(0);
        let m = self.runs.get(&name).and_then(|r| r.get(*k)).cloned();
        *k += 1;
        m.ok_or_else(|| {
            Error::BadInput(format!(
                "--real-from {}: no repeat {} of scenario {name}",
                self.file, *k
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(file: &str) -> Scenario {
        Scenario::parse(file, "cores = 1\n[[process]]\nname = \"p\"\n").expect("scenario")
    }

    fn rep() -> String {
        r#"{"names":["p"],"share_pct":[100.0],"job_pct":99.0,"wait_ms":[0.0],"wait_all_ms":0.0,
            "response_ms":null,"wake_p50_us":null,"wake_p99_us":null,"wakeups":0,
            "switches_per_s":1.0,"migrations_per_s":0.0}"#
            .to_string()
    }

    #[test]
    fn repeats_are_handed_out_in_order_and_must_be_as_many_for_every_scenario() {
        let scs = [sc("a.toml"), sc("b.toml")];
        let two = format!(r#"{{"real":[["a",[{r},{r}]],["b",[{r},{r}]]]}}"#, r = rep());
        let mut rec = Recorded::parse("f.json", &two, &scs).expect("matches");
        assert_eq!(rec.repeats(), 2);
        assert!(rec.run(&scs[0]).is_ok() && rec.run(&scs[0]).is_ok());
        // A third run of the same scenario has nothing to replay.
        let err = rec.run(&scs[0]).unwrap_err().to_string();
        assert!(err.contains("f.json") && err.contains("repeat 3"), "{err}");
        let uneven = format!(r#"{{"real":[["a",[{r},{r}]],["b",[{r}]]]}}"#, r = rep());
        let err = Recorded::parse("f.json", &uneven, &scs).unwrap_err();
        assert!(err.is_bad_input());
        let err = err.to_string();
        assert!(
            err.contains("field `real[1]`") && err.contains("1 repeats"),
            "{err}"
        );
        let twice = format!(r#"{{"real":[["a",[{r}]],["a",[{r}]]]}}"#, r = rep());
        let err = Recorded::parse("f.json", &twice, &scs)
            .unwrap_err()
            .to_string();
        assert!(err.contains("scenario a twice"), "{err}");
    }

    #[test]
    fn the_wake_path_and_the_other_work_are_replayed_and_optional() {
        let scs = [sc("a.toml")];
        let with = rep().replace(
            r#""migrations_per_s":0.0}"#,
            r#""migrations_per_s":0.0,"outside":{"runs_per_s":40.0,"busy_ms_per_s":6.0}}"#,
        );
        let text = format!(r#"{{"wake_path_ns":16500,"real":[["a",[{with}]]]}}"#);
        let mut rec = Recorded::parse("f.json", &text, &scs).expect("matches");
        assert_eq!(rec.wake_path().unwrap(), Some(Nanos(16_500)));
        let m = rec.run(&scs[0]).unwrap();
        assert_eq!(m.outside.map(|o| o.runs_per_s), Some(40.0));
        // A file recorded before either was measured replays without them.
        let old = format!(r#"{{"real":[["a",[{r}]]]}}"#, r = rep());
        let mut rec = Recorded::parse("f.json", &old, &scs).expect("matches");
        assert_eq!(rec.wake_path().unwrap(), None);
        assert_eq!(rec.run(&scs[0]).unwrap().outside, None);
    }
}
