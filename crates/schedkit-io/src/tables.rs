//! A report and a trace as column tables: what the Python module turns into pandas
//! DataFrames and `--parquet` writes as Parquet files, from one definition.
//!
//! The report tables (`summary`, `threads`, `processes`, `groups`) are built from the
//! report's serde form, so a metric added to `schedkit_core::report` appears here (and in
//! every DataFrame and Parquet file) without a second list of fields to keep in step.
//! Columns keep the report's order; integers stay integers (nanoseconds are `*_ns`
//! integer columns, never floats); a field that is absent for some rows is nullable.

use indexmap::IndexMap;
use schedkit_core::report::Report;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{run_intervals_with_reasons, Owner, Reason, TraceLog};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

/// One column's values. Integers are signed 64-bit (nanoseconds up to 292 years).
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Str(Vec<Option<String>>),
    Bool(Vec<Option<bool>>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Str(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any value is missing.
    pub fn has_nulls(&self) -> bool {
        match self {
            Column::Int(v) => v.iter().any(Option::is_none),
            Column::Float(v) => v.iter().any(Option::is_none),
            Column::Str(v) => v.iter().any(Option::is_none),
            Column::Bool(v) => v.iter().any(Option::is_none),
        }
    }
}

/// A named table of equally long columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub name: String,
    pub columns: Vec<(String, Column)>,
}

impl Table {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
}

/// The kind a column takes from its non-null values: any float makes it a float column.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Kind {
    Unknown,
    Bool,
    Int,
    Float,
    Str,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::Null => Kind::Unknown,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::Number(_) => Kind::Int,
        _ => Kind::Str,
    }
}

/// A row's fields in declaration order, read from its text: a struct serialises field by
/// field in that order, and an IndexMap keeps it (serde_json's own map sorts keys).
fn field_order<T: Serialize>(row: &T) -> Vec<String> {
    let text = serde_json::to_string(row).expect("report rows serialise");
    let order: IndexMap<String, serde::de::IgnoredAny> =
        serde_json::from_str(&text).expect("serialised rows parse");
    order.into_keys().collect()
}

/// A row's fields and values; the values come from `to_value`, not from text, so floats
/// stay bit-exact.
fn fields_of<T: Serialize>(row: &T) -> serde_json::Map<String, Value> {
    match serde_json::to_value(row).expect("report rows serialise") {
        Value::Object(o) => o,
        _ => serde_json::Map::new(),
    }
}

/// Rows of one serialisable type as a table; `prefix` columns (constant per table) first,
/// then the first row's fields in declaration order. With no rows, `template` (a row of the
/// same type) gives the columns their names and kinds, so an empty table still has its
/// schema. The field order is read once per table, not per row: a 10,000-thread report's
/// tables took 0.7 s when every row was serialised three times.
fn table_of<T: Serialize>(
    name: &str,
    prefix: &[(&str, Value)],
    rows: &[T],
    template: Option<&T>,
) -> Table {
    let objects: Vec<serde_json::Map<String, Value>> = rows.iter().map(fields_of).collect();
    let fields = match (rows.first(), template) {
        (Some(first), _) => field_order(first),
        (None, Some(t)) => field_order(t),
        (None, None) => Vec::new(),
    };
    let kinds: HashMap<String, Kind> = template
        .map(|t| {
            fields_of(t)
                .into_iter()
                .map(|(k, v)| (k, kind_of(&v)))
                .collect()
        })
        .unwrap_or_default();
    let mut columns: Vec<(String, Column)> = prefix
        .iter()
        .map(|(k, v)| (k.to_string(), column_of(vec![v; rows.len()], kind_of(v))))
        .collect();
    for n in fields {
        let vals: Vec<&Value> = objects
            .iter()
            .map(|o| o.get(&n).unwrap_or(&Value::Null))
            .collect();
        let start = kinds.get(&n).copied().unwrap_or(Kind::Unknown);
        let col = column_of(vals, start);
        columns.push((n, col));
    }
    Table {
        name: name.to_string(),
        columns,
    }
}

/// A column from its values; its kind is the widest of `start` and the values' kinds.
fn column_of(vals: Vec<&Value>, start: Kind) -> Column {
    let kind = vals
        .iter()
        .map(|v| kind_of(v))
        .fold(start, |a, b| if b > a { b } else { a });
    match kind {
        Kind::Unknown | Kind::Int => Column::Int(vals.iter().map(|v| v.as_i64()).collect()),
        Kind::Float => Column::Float(vals.iter().map(|v| v.as_f64()).collect()),
        Kind::Bool => Column::Bool(vals.iter().map(|v| v.as_bool()).collect()),
        Kind::Str => Column::Str(
            vals.iter()
                .map(|v| match v {
                    Value::Null => None,
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                })
                .collect(),
        ),
    }
}

/// `summary` (one row, led by the run's policy, scenario, engine, cores and window),
/// `threads`, `processes` and `groups`, in that order.
pub fn report_tables(r: &Report) -> Vec<Table> {
    let run: [(&str, Value); 5] = [
        ("policy", Value::from(r.policy.clone())),
        ("scenario", Value::from(r.scenario.clone())),
        ("engine", Value::from(r.engine.clone())),
        ("cores", Value::from(r.cores)),
        ("window_ns", Value::from(r.window_ns)),
    ];
    vec![
        table_of("summary", &run, std::slice::from_ref(&r.summary), None),
        table_of("threads", &[], &r.threads, None),
        table_of("processes", &[], &r.processes, None),
        // Groups have the processes' row type: an empty groups table keeps their columns.
        table_of("groups", &[], &r.groups, r.processes.first()),
    ]
}

/// `sim --parquet`: the report's tables and the trace's `intervals`.
pub fn sim_tables(scenario: &Scenario, report: &Report, trace: &TraceLog) -> Vec<Table> {
    let mut t = report_tables(report);
    t.push(intervals_table(scenario, trace));
    t
}

/// `compare --parquet`: the same five tables, every run's rows appended, with a leading
/// `policy` column (the summary has one already). A run's intervals are those of the
/// scenario under its policy.
pub fn compare_tables(
    scenario: &Scenario,
    runs: &[crate::compare::Run],
) -> Result<Vec<Table>, crate::Error> {
    let mut all: Vec<Table> = Vec::new();
    for r in runs {
        let mut t = report_tables(&r.report);
        if let Some((trace, _)) = &r.trace {
            let s = scenario.with_policy(&r.report.policy)?;
            t.push(intervals_table(&s, trace));
        }
        for (i, table) in t.into_iter().enumerate() {
            let table = if table.name == "summary" {
                table
            } else {
                table.with_leading("policy", &r.report.policy)
            };
            match all.get_mut(i) {
                Some(acc) => acc
                    .append(table)
                    .map_err(|m| crate::Error::file("compare --parquet", m))?,
                None => all.push(table),
            }
        }
    }
    Ok(all)
}

/// One run interval with the reason it ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    pub core: usize,
    /// The process or task name.
    pub process: String,
    /// The thread's index in its process (processes only).
    pub thread: Option<u32>,
    /// The job's release count (tasks only).
    pub job: Option<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Why it left the core: finished, preempted, expired, blocked, horizon.
    pub reason: &'static str,
}

fn reason_str(r: Reason) -> &'static str {
    match r {
        Reason::Finished => "finished",
        Reason::Preempted => "preempted",
        Reason::Expired => "expired",
        Reason::Blocked => "blocked",
        Reason::Horizon => "horizon",
    }
}

/// The trace's run intervals (dispatch to deschedule), ordered by start then core, from
/// `schedkit_core::trace::run_intervals_with_reasons` (the one rebuild of intervals from
/// events), named by the scenario's processes and tasks.
pub fn intervals(s: &Scenario, trace: &TraceLog) -> Vec<Interval> {
    run_intervals_with_reasons(&trace.events)
        .into_iter()
        .map(|(iv, reason)| {
            let (process, thread, job) = match iv.owner {
                Owner::Process { process, thread } => (
                    s.processes()[process].name().to_string(),
                    Some(thread),
                    None,
                ),
                Owner::Task { task, job } => (s.tasks()[task].name().to_string(), None, Some(job)),
            };
            Interval {
                core: iv.core,
                process,
                thread,
                job,
                start_ns: iv.start.0,
                end_ns: iv.end.0,
                reason: reason_str(reason),
            }
        })
        .collect()
}

/// The intervals as the `intervals` table.
pub fn intervals_table(s: &Scenario, trace: &TraceLog) -> Table {
    let template = Interval {
        core: 0,
        process: String::new(),
        thread: None,
        job: None,
        start_ns: 0,
        end_ns: 0,
        reason: "",
    };
    table_of("intervals", &[], &intervals(s, trace), Some(&template))
}

/// The rows of a sweep as the `sweep` table.
pub fn sweep_table(rows: &[schedkit_experiments::sweep::Row]) -> Table {
    let template = schedkit_experiments::sweep::Row::empty(0.0, String::new());
    table_of("sweep", &[], rows, Some(&template))
}

impl Table {
    /// The table with a constant column put first (e.g. each run's `policy`).
    pub fn with_leading(mut self, name: &str, value: &str) -> Table {
        let col = Column::Str(vec![Some(value.to_string()); self.rows()]);
        self.columns.insert(0, (name.to_string(), col));
        self
    }

    /// Appends `other`'s rows; both must have the same columns of the same kinds.
    pub fn append(&mut self, other: Table) -> Result<(), String> {
        let names = |t: &Table| t.columns.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        if names(self) != names(&other) {
            return Err(format!(
                "table {}: the runs have different columns",
                self.name
            ));
        }
        for ((_, a), (n, b)) in self.columns.iter_mut().zip(other.columns) {
            // An all-null integer column (a field no row of one run has) takes the other
            // run's kind.
            if matches!(a, Column::Int(v) if v.iter().all(Option::is_none))
                && !matches!(b, Column::Int(_))
            {
                let n0 = a.len();
                *a = match &b {
                    Column::Float(_) => Column::Float(vec![None; n0]),
                    Column::Str(_) => Column::Str(vec![None; n0]),
                    _ => Column::Bool(vec![None; n0]),
                };
            }
            match (a, b) {
                (Column::Int(a), Column::Int(b)) => a.extend(b),
                (Column::Float(a), Column::Float(b)) => a.extend(b),
                (Column::Str(a), Column::Str(b)) => a.extend(b),
                (Column::Bool(a), Column::Bool(b)) => a.extend(b),
                _ => {
                    return Err(format!(
                        "table {}: column {n} has different kinds",
                        self.name
                    ))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> (Scenario, Report, TraceLog) {
        let s = Scenario::parse(
            "t.toml",
            "cores = 1\n[policy]\nname = \"rr\"\nquantum = \"2ms\"\n\
             [[process]]\nname = \"a\"\nburst = \"3ms\"\n[[process]]\nname = \"b\"\nburst = \"2ms\"\n",
        )
        .unwrap();
        let (r, t, _) = schedkit_sim::simulate_report(&s, true).unwrap();
        (s, r, t.unwrap())
    }

    #[test]
    fn report_tables_keep_order_types_and_nulls() {
        let (_, r, _) = run();
        let t = report_tables(&r);
        let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["summary", "threads", "processes", "groups"]);
        let threads = &t[1];
        assert_eq!(threads.rows(), 2);
        assert_eq!(threads.columns[0].0, "name");
        assert_eq!(threads.columns[2].0, "arrival_ns");
        assert_eq!(
            threads.column("cpu_ns"),
            Some(&Column::Int(vec![Some(3_000_000), Some(2_000_000)]))
        );
        // Processes have no jobs: a nullable integer column.
        assert_eq!(threads.column("jobs"), Some(&Column::Int(vec![None, None])));
        assert!(matches!(t[2].column("share"), Some(Column::Float(_))));
        assert_eq!(t[0].rows(), 1);
        assert_eq!(
            t[0].column("policy"),
            Some(&Column::Str(vec![Some("rr".into())]))
        );
        assert_eq!(t[3].rows(), 0);
        assert_eq!(t[3].columns.len(), t[2].columns.len());
        assert!(matches!(t[3].column("share"), Some(Column::Float(_))));
        assert_eq!(t[3].columns.len(), t[2].columns.len());
        assert!(matches!(t[3].column("share"), Some(Column::Float(_))));
    }

    #[test]
    fn intervals_carry_reasons() {
        let (s, _, trace) = run();
        let iv = intervals(&s, &trace);
        // a 0-2 (expired), b 2-4 (finished), a 4-5 (finished).
        let got: Vec<(&str, u64, u64, &str)> = iv
            .iter()
            .map(|i| (i.process.as_str(), i.start_ns, i.end_ns, i.reason))
            .collect();
        assert_eq!(
            got,
            [
                ("a", 0, 2_000_000, "expired"),
                ("b", 2_000_000, 4_000_000, "finished"),
                ("a", 4_000_000, 5_000_000, "finished")
            ]
        );
        assert_eq!(intervals_table(&s, &trace).rows(), 3);
    }
}
