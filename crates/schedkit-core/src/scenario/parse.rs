//! Text to a validated [`Scenario`]: serde into the raw layer, then the checks.

use super::check::{check_cpus, check_name, check_pattern, list_or_none, parse_policy, positive};
use super::raw::RawScenario;
use super::{
    Diagnostic, Group, Locator, PolicyName, PolicySpec, Process, Region, Scenario, ScenarioError,
    Task, Work,
};
use crate::time::{Bytes, Nanos};
use crate::weights::nice_to_weight;
use std::collections::HashSet;
use std::path::Path;

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: file.clone(),
            line: 0,
            column: 0,
            field: "file".into(),
            message: format!("cannot read scenario: {e}"),
        })?;
        Scenario::parse(&file, &text)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_located(file, text).map_err(|d| d.error)
    }

    /// [`Scenario::parse`], with the byte span of the offending text beside the error (for a
    /// caret under it).
    pub fn parse_located(file: &str, text: &str) -> Result<Scenario, Diagnostic> {
        let loc = Locator::new(file, text);
        Scenario::parse_with(&loc).map_err(|error| Diagnostic {
            error,
            span: loc.last_span.get().map(|(a, b)| a..b),
        })
    }

    fn parse_with(loc: &Locator) -> Result<Scenario, ScenarioError> {
        let text = loc.text;
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().to_string();
            // The TOML parser leaves the message empty for some syntax errors (a key with
            // no value at the end of the text); the user still needs a sentence.
            let msg = if msg.is_empty() {
                "invalid TOML here (a value is missing or malformed)".to_string()
            } else {
                msg
            };
            // `unknown field `x`` errors point at the key itself; others at the value.
            let unknown = msg
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string);
            let field = unknown
                .clone()
                .or_else(|| loc.key_at(span.start))
                .unwrap_or_else(|| "document".into());
            let msg = match unknown {
                Some(key) => crate::validate::unknown_key_message(&key, &msg),
                None => msg,
            };
            loc.err(span, &field, msg)
        })?;
        Scenario::from_raw(loc, raw)
    }

    fn from_raw(loc: &Locator, raw: RawScenario) -> Result<Scenario, ScenarioError> {
        let cores = match &raw.cores {
            Some(c) if *c.get_ref() < 1 || *c.get_ref() > 1 << 20 => {
                return Err(loc.err(c.span(), "cores", "must be between 1 and 1048576"))
            }
            Some(c) => *c.get_ref() as usize,
            None => 1,
        };
        let policy = match raw.policy {
            None => PolicySpec::new(PolicyName::Fcfs),
            Some(p) => {
                let span = p.span();
                parse_policy(loc, p.into_inner(), span, cores)?
            }
        };
        let horizon = match raw.run.and_then(|r| r.horizon) {
            Some(h) if h.get_ref().0 == 0 => {
                return Err(loc.err(h.span(), "run.horizon", "must be greater than zero"))
            }
            Some(h) => *h.get_ref(),
            None => Nanos::from_secs(10),
        };

        let mut groups = Vec::new();
        let mut group_names = HashSet::new();
        for g in &raw.group {
            let g = g.get_ref();
            check_name(loc, &g.name, "group.name", &mut group_names)?;
            let weight = match &g.weight {
                Some(w) => positive(loc, w, "group.weight")?,
                None => 1024,
            };
            groups.push(Group {
                name: g.name.get_ref().clone(),
                weight,
            });
        }

        // Processes and tasks share one namespace: both are rows of the report.
        let mut names = HashSet::new();
        let mut processes: Vec<Process> = Vec::new();
        for p in raw.process {
            let entry_line = loc.line_col(p.span().start).0;
            let p = p.into_inner();
            check_name(loc, &p.name, "process.name", &mut names)?;
            let burst = match p.burst {
                Some(b) if b.get_ref().0 == 0 => {
                    return Err(loc.err(b.span(), "process.burst", "must be greater than zero"))
                }
                b => b.map(|b| *b.get_ref()),
            };
            let threads = match &p.threads {
                Some(t) if *t.get_ref() < 1 || *t.get_ref() > 1_000_000 => {
                    return Err(loc.err(
                        t.span(),
                        "process.threads",
                        "must be between 1 and 1000000",
                    ))
                }
                Some(t) => *t.get_ref() as u32,
                None => 1,
            };
            if let (Some(_), Some(w)) = (&p.nice, &p.weight) {
                return Err(loc.err(
                    w.span(),
                    "process.weight",
                    "give either `nice` or `weight`, not both",
                ));
            }
            let nice = match &p.nice {
                Some(n) if !(-20..=19).contains(n.get_ref()) => {
                    return Err(loc.err(n.span(), "process.nice", "must be between -20 and 19"))
                }
                Some(n) => *n.get_ref() as i32,
                None => 0,
            };
            let weight = match &p.weight {
                Some(w) => positive(loc, w, "process.weight")?,
                None => nice_to_weight(nice),
            };
            let tickets = match &p.tickets {
                Some(t) => positive(loc, t, "process.tickets")?,
                None => 1,
            };
            let group = match &p.group {
                Some(g) => Some(
                    groups
                        .iter()
                        .position(|x| x.name == *g.get_ref())
                        .ok_or_else(|| {
                            loc.err(
                                g.span(),
                                "process.group",
                                format!(
                                    "no [[group]] named \"{}\"{} (groups: {})",
                                    g.get_ref(),
                                    crate::validate::did_you_mean(
                                        g.get_ref(),
                                        groups.iter().map(|x| x.name.as_str())
                                    ),
                                    list_or_none(groups.iter().map(|x| x.name.as_str()))
                                ),
                            )
                        })?,
                ),
                None => None,
            };
            let cpus = check_cpus(loc, p.cpus.as_ref(), cores, "process.cpus")?;
            let work = match &p.work {
                None => Work::Spin,
                Some(w) => match w.get_ref().as_str() {
                    "spin" => Work::Spin,
                    "stride" => Work::Stride {
                        array: p.array.unwrap_or(Bytes(5_000_000)).0,
                        stride: p.stride.unwrap_or(Bytes(64)).0,
                    },
                    "barrier" => Work::Barrier {
                        compute: p.compute.unwrap_or(Nanos::from_us(100)),
                    },
                    "pingpong" => Work::PingPong,
                    other => {
                        return Err(loc.err(
                            w.span(),
                            "process.work",
                            format!(
                                "unknown workload \"{other}\" (spin, stride, barrier, pingpong)"
                            ),
                        ))
                    }
                },
            };
            let command = match p.command {
                Some(c) if c.get_ref().is_empty() || c.get_ref()[0].is_empty() => {
                    return Err(loc.err(
                        c.span(),
                        "process.command",
                        "must name a program: command = [\"prog\", \"arg\"]",
                    ))
                }
                Some(c) => {
                    if p.work.is_some() {
                        return Err(loc.err(
                            c.span(),
                            "process.command",
                            "give either `work` or `command`, not both",
                        ));
                    }
                    Some(c.into_inner())
                }
                None => None,
            };
            let pattern = check_pattern(loc, p.pattern, &work, command.is_some())?;
            processes.push(Process {
                name: p.name.into_inner(),
                arrival: p.arrival,
                burst,
                threads,
                nice,
                weight,
                priority: p.priority.unwrap_or(0) as i32,
                tickets,
                group,
                cpus,
                work,
                command,
                pattern,
                line: entry_line,
            });
        }

        let mut tasks: Vec<Task> = Vec::new();
        for t in raw.task {
            let entry_span = t.span();
            let entry_line = loc.line_col(entry_span.start).0;
            let t = t.into_inner();
            check_name(loc, &t.name, "task.name", &mut names)?;
            if t.period.get_ref().0 == 0 {
                return Err(loc.err(t.period.span(), "task.period", "must be greater than zero"));
            }
            let deadline = match &t.deadline {
                Some(d) if d.get_ref().0 == 0 => {
                    return Err(loc.err(d.span(), "task.deadline", "must be greater than zero"))
                }
                Some(d) => *d.get_ref(),
                None => *t.period.get_ref(),
            };
            let regions = match (t.regions, t.wcet) {
                (Some(_), Some(w)) => {
                    return Err(loc.err(
                        w.span(),
                        "task.wcet",
                        "give either `regions` or `wcet`, not both",
                    ))
                }
                (None, None) => {
                    return Err(loc.err(
                        entry_span,
                        "task.regions",
                        "a task needs `regions = [{ seq = \"2ms\" }, ...]` or `wcet = \"2ms\"`",
                    ))
                }
                (None, Some(w)) if w.get_ref().0 == 0 => {
                    return Err(loc.err(w.span(), "task.wcet", "must be greater than zero"))
                }
                (None, Some(w)) => vec![Region::Seq(*w.get_ref())],
                (Some(rs), None) => {
                    if rs.get_ref().is_empty() {
                        return Err(loc.err(rs.span(), "task.regions", "must not be empty"));
                    }
                    let span = rs.span();
                    let mut out = Vec::new();
                    for r in rs.into_inner() {
                        out.push(match (r.seq, r.par) {
                            (Some(s), None) if s.get_ref().0 == 0 => {
                                return Err(loc.err(s.span(), "task.regions.seq", "must be greater than zero"))
                            }
                            (Some(s), None) => Region::Seq(s.into_inner()),
                            (None, Some(p)) => {
                                if p.get_ref().is_empty() || p.get_ref().iter().any(|c| c.0 == 0) {
                                    return Err(loc.err(
                                        p.span(),
                                        "task.regions.par",
                                        "needs at least one thread, each with a time greater than zero",
                                    ));
                                }
                                Region::Par(p.into_inner())
                            }
                            _ => {
                                return Err(loc.err(
                                    span.clone(),
                                    "task.regions",
                                    "each region is either { seq = \"2ms\" } or { par = [\"1ms\", \"3ms\"] }",
                                ))
                            }
                        });
                    }
                    out
                }
            };
            let cpus = check_cpus(loc, t.cpus.as_ref(), cores, "task.cpus")?;
            tasks.push(Task {
                name: t.name.into_inner(),
                period: *t.period.get_ref(),
                deadline,
                offset: t.offset,
                regions,
                cpus,
                line: entry_line,
            });
        }

        Ok(Scenario {
            file: loc.file.to_string(),
            cores,
            policy,
            horizon,
            processes,
            groups,
            tasks,
        })
    }

}
