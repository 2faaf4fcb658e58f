//! `simulate`, `compare` and the sweeps: each runs with the GIL released, and hands Python
//! the tables of `schedkit_io::tables` (pandas DataFrames on the Python side) or the JSON
//! documents the command line prints, so both fronts give the same numbers.

use crate::errors::{io_error, scenario_error};
use crate::scenario::PyScenario;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyList, PyTuple};
use schedkit_core::report::Report;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::TraceLog;
use schedkit_core::Nanos;
use schedkit_experiments::sweep::SweepOptions;
use schedkit_io::shard::{self, Shard, SweepDoc};
use schedkit_io::tables::{self, Column, Table};
use std::sync::OnceLock;

/// One simulated run. The trace is kept only when asked for (`simulate(..., trace=True)`)
/// or recorded on first use by `intervals()` / `gantt()`: the simulation is deterministic, so
/// running it again with the trace kept gives the same run.
#[pyclass(name = "SimResult", module = "schedkit", frozen)]
pub struct PySimResult {
    scenario: Scenario,
    report: Report,
    trace: OnceLock<(TraceLog, Nanos)>,
}

/// A column's values for numpy: the native-endian bytes of its `i64`, `f64` or `bool`
/// values, filled straight into a Python `bytearray` (one copy, and writable, so numpy's
/// array over it is too), nulls written as `fill`.
fn buffer<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: &[Option<T>],
    fill: T,
    bytes: impl Fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, values.len() * N, |buf| {
        for (chunk, v) in buf.chunks_exact_mut(N).zip(values) {
            chunk.copy_from_slice(&bytes(v.unwrap_or(fill)));
        }
        Ok(())
    })
}

/// The null mask (one byte per row, 1 where the value is missing), or `None` without nulls.
fn mask<'py, T>(
    py: Python<'py>,
    values: &[Option<T>],
) -> PyResult<Option<Bound<'py, PyByteArray>>> {
    if values.iter().all(Option::is_some) {
        return Ok(None);
    }
    PyByteArray::new_with(py, values.len(), |buf| {
        for (b, v) in buf.iter_mut().zip(values) {
            *b = u8::from(v.is_none());
        }
        Ok(())
    })
    .map(Some)
}

/// `(name, [(column, kind, values, mask)])`: `values` is a `bytearray` of native `int64`,
/// `float64` (NaN where null) or `bool` values for numpy, or a list of `str`/`None` for a
/// string column; `mask` a `bytearray` of 1 where null, `None` when nothing is. No Python
/// object per cell but the strings: a 10,000-row table's integer columns cost one copy
/// each instead of 10,000 Python ints.
fn table_to_py<'py>(py: Python<'py>, t: &Table) -> PyResult<Bound<'py, PyTuple>> {
    let cols = PyList::empty(py);
    for (name, col) in &t.columns {
        let (kind, values, nulls) = match col {
            Column::Int(v) => (
                "int",
                buffer(py, v, 0, i64::to_ne_bytes)?.into_any(),
                mask(py, v)?,
            ),
            Column::Float(v) => (
                "float",
                buffer(py, v, f64::NAN, f64::to_ne_bytes)?.into_any(),
                mask(py, v)?,
            ),
            Column::Bool(v) => (
                "bool",
                buffer(py, v, false, |b| [u8::from(b)])?.into_any(),
                mask(py, v)?,
            ),
            Column::Str(v) => ("str", v.into_pyobject(py)?.into_any(), None),
        };
        cols.append((name.as_str(), kind, values, nulls))?;
    }
    (t.name.as_str(), cols).into_pyobject(py)
}

impl PySimResult {
    fn trace(&self, py: Python<'_>) -> PyResult<&(TraceLog, Nanos)> {
        if let Some(t) = self.trace.get() {
            return Ok(t);
        }
        let s = &self.scenario;
        let (_, trace, stats) = py
            .allow_threads(|| schedkit_sim::simulate_report(s, true))
            .map_err(scenario_error)?;
        let trace = trace.ok_or_else(|| PyRuntimeError::new_err("the simulator kept no trace"))?;
        Ok(self.trace.get_or_init(|| (trace, stats.end)))
    }
}

#[pymethods]
impl PySimResult {
    /// `[(name, [(column, kind, values, mask)])]` for summary, threads, processes, groups
    /// (`table_to_py`), built with the GIL released.
    fn tables<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let report = &self.report;
        py.allow_threads(|| tables::report_tables(report))
            .iter()
            .map(|t| table_to_py(py, t))
            .collect()
    }

    /// The run intervals as `(name, [(column, kind, values, mask)])`.
    fn intervals_table<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (trace, _) = self.trace(py)?;
        let s = &self.scenario;
        table_to_py(py, &py.allow_threads(|| tables::intervals_table(s, trace)))
    }

    /// The Gantt chart, the same SVG as `schedkit sim --gantt`.
    fn gantt_svg(&self, py: Python<'_>) -> PyResult<String> {
        let (trace, end) = self.trace(py)?;
        Ok(schedkit_render::gantt::render(
            &self.scenario,
            &self.report,
            trace,
            *end,
        ))
    }

    /// The report as `schedkit sim --json` prints it.
    fn report_json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&self.report)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    #[getter]
    fn policy(&self) -> &str {
        &self.report.policy
    }
}

/// Simulates a scenario (the GIL released); `trace` keeps the trace for `intervals()` and
/// `gantt()` from the start.
#[pyfunction]
#[pyo3(signature = (scenario, trace = false))]
pub fn simulate(py: Python<'_>, scenario: &PyScenario, trace: bool) -> PyResult<PySimResult> {
    let s = scenario.inner.clone();
    let (report, log, stats) = py
        .allow_threads(|| schedkit_sim::simulate_report(&s, trace))
        .map_err(scenario_error)?;
    let cell = OnceLock::new();
    if let Some(log) = log {
        let _ = cell.set((log, stats.end));
    }
    Ok(PySimResult {
        scenario: s,
        report,
        trace: cell,
    })
}

/// Runs the scenario once per policy, in parallel, in the order given.
#[pyfunction]
pub fn compare(
    py: Python<'_>,
    scenario: &PyScenario,
    policies: Vec<String>,
) -> PyResult<Vec<PySimResult>> {
    let names = schedkit_io::compare::parse_policies(&policies).map_err(io_error)?;
    let s = &scenario.inner;
    let runs = py
        .allow_threads(|| {
            schedkit_experiments::compare::run_all(
                s,
                &names,
                &schedkit_experiments::progress::Silent,
            )
        })
        .map_err(|e| io_error(e.into()))?;
    Ok(runs
        .into_iter()
        .zip(&names)
        .map(|(report, p)| PySimResult {
            // Each result re-simulates under its own policy if its trace is asked for.
            scenario: s.with_policy(p.as_str()).expect("a parsed policy name"),
            report,
            trace: OnceLock::new(),
        })
        .collect())
}

fn options(utilisations: Option<String>, policies: Vec<String>, generator: String) -> SweepOptions {
    SweepOptions {
        sweep: None,
        utilisations,
        policies,
        generator,
    }
}

/// The summed rows (JSON) of a sweep over inclusive seed ranges; every range runs on all
/// cores.
#[pyfunction]
#[pyo3(signature = (scenario, ranges, utilisations, policies, generator))]
pub fn sweep_ranges(
    py: Python<'_>,
    scenario: &PyScenario,
    ranges: Vec<(u64, u64)>,
    utilisations: Option<String>,
    policies: Vec<String>,
    generator: String,
) -> PyResult<String> {
    let opts = options(utilisations, policies, generator);
    let s = &scenario.inner;
    let rows = py
        .allow_threads(|| shard::run_ranges(s, &opts, &ranges))
        .map_err(io_error)?;
    serde_json::to_string(&rows).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// `schedkit sim --sweep SEEDS [--shard I/N] --json`: the sweep document.
#[pyfunction]
#[pyo3(signature = (scenario, seeds, utilisations, policies, generator, shard = None))]
pub fn sweep_shard(
    py: Python<'_>,
    scenario: &PyScenario,
    seeds: String,
    utilisations: Option<String>,
    policies: Vec<String>,
    generator: String,
    shard: Option<String>,
) -> PyResult<String> {
    let mut opts = options(utilisations, policies, generator);
    opts.sweep = Some(seeds);
    let shard = shard
        .map(|s| Shard::parse(&s))
        .transpose()
        .map_err(io_error)?;
    let s = &scenario.inner;
    let doc = py
        .allow_threads(|| shard::run(s, &opts, shard, &schedkit_experiments::progress::Silent))
        .map_err(io_error)?;
    serde_json::to_string_pretty(&doc).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// `schedkit sweep merge`: shard documents `(name, json)` into the whole sweep's document.
#[pyfunction]
pub fn merge_shards(docs: Vec<(String, String)>) -> PyResult<String> {
    let parsed = docs
        .into_iter()
        .map(|(name, text)| {
            let d: SweepDoc = serde_json::from_str(&text).map_err(|e| {
                io_error(schedkit_io::Error::bad_option(
                    "merge",
                    &name,
                    format!("not a sweep document: {e}"),
                ))
            })?;
            Ok((name, d))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let doc = shard::merge(&parsed).map_err(io_error)?;
    serde_json::to_string_pretty(&doc).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
