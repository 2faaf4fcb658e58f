//! `schedkit.Scenario`: a validated scenario, built from a file, TOML text, a dict or a
//! SimSo configuration, and changed only through the same overrides the command line uses.
//!
//! A scenario pickles (for Dask workers) as its source text plus the overrides applied to
//! it, and unpickles by parsing and applying them again: the same checks, the same value.

use crate::errors::{io_error, scenario_error};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use schedkit_core::scenario::{Scenario, ScenarioError};
use schedkit_core::Nanos;
use std::path::PathBuf;

#[pyclass(name = "Scenario", module = "schedkit", frozen)]
#[derive(Clone)]
pub struct PyScenario {
    pub inner: Scenario,
    /// The TOML text it was parsed from (generated TOML for dicts and SimSo files).
    text: String,
    /// `(name, value)` overrides applied after parsing, in order.
    overrides: Vec<(String, String)>,
}

/// A duration argument: an integer number of nanoseconds or a string with a unit ("4ms").
fn duration(field: &str, v: &Bound<'_, PyAny>) -> PyResult<Nanos> {
    if let Ok(ns) = v.extract::<u64>() {
        return Ok(Nanos(ns));
    }
    let s: String = v.extract().map_err(|_| {
        PyValueError::new_err(format!(
            "{field}: expected nanoseconds (int) or a duration string like \"4ms\""
        ))
    })?;
    Nanos::parse(&s).map_err(|m| {
        scenario_error(ScenarioError {
            file: "<argument>".into(),
            line: 0,
            column: 0,
            field: field.into(),
            message: m,
        })
    })
}

fn apply(s: &Scenario, name: &str, value: &str) -> Result<Scenario, ScenarioError> {
    let ns = |field: &str| {
        Nanos::parse(value).map_err(|m| ScenarioError {
            file: s.file().to_string(),
            line: 0,
            column: 0,
            field: field.into(),
            message: m,
        })
    };
    let int = |field: &str| {
        value.parse::<u64>().map_err(|e| ScenarioError {
            file: s.file().to_string(),
            line: 0,
            column: 0,
            field: field.into(),
            message: format!("\"{value}\": {e}"),
        })
    };
    match name {
        "policy" => s.with_policy(value),
        "horizon" => s.with_horizon(ns("run.horizon")?),
        "quantum" => s.with_quantum(ns("policy.quantum")?),
        "cores" => s.with_cores(int("cores")? as usize),
        "seed" => Ok(s.with_seed(int("policy.seed")?)),
        other => Err(ScenarioError {
            file: s.file().to_string(),
            line: 0,
            column: 0,
            field: other.into(),
            message: "not an override".into(),
        }),
    }
}

impl PyScenario {
    pub fn parse(file: &str, text: String) -> PyResult<PyScenario> {
        let inner = Scenario::parse(file, &text).map_err(scenario_error)?;
        Ok(PyScenario {
            inner,
            text,
            overrides: Vec::new(),
        })
    }

    fn with(&self, name: &str, value: String) -> PyResult<PyScenario> {
        let inner = apply(&self.inner, name, &value).map_err(scenario_error)?;
        let mut overrides = self.overrides.clone();
        overrides.push((name.to_string(), value));
        Ok(PyScenario {
            inner,
            text: self.text.clone(),
            overrides,
        })
    }
}

#[pymethods]
impl PyScenario {
    /// Reads and validates a scenario file (TOML, docs/scenario.md).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<PyScenario> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|e| {
            scenario_error(ScenarioError {
                file: file.clone(),
                line: 0,
                column: 0,
                field: "file".into(),
                message: format!("cannot read scenario: {e}"),
            })
        })?;
        PyScenario::parse(&file, text)
    }

    /// Parses scenario TOML text; `file` names it in errors.
    #[staticmethod]
    #[pyo3(signature = (text, file = "<string>"))]
    fn from_toml(text: String, file: &str) -> PyResult<PyScenario> {
        PyScenario::parse(file, text)
    }

    /// Builds a scenario from a dict shaped like the TOML file (`{"cores": 2, "policy":
    /// {"name": "rr"}, "process": [{"name": "a", "burst": "4ms"}]}`). Errors name the field;
    /// their line refers to the dict written out as TOML (`Scenario.toml`).
    #[staticmethod]
    #[pyo3(signature = (d, file = "<dict>"))]
    fn from_dict(py: Python<'_>, d: &Bound<'_, PyAny>, file: &str) -> PyResult<PyScenario> {
        let json: String = py.import("json")?.call_method1("dumps", (d,))?.extract()?;
        let value: toml::Value = serde_json::from_str(&json)
            .map_err(|e| PyValueError::new_err(format!("{file}: not a scenario dict: {e}")))?;
        let text = toml::to_string(&value)
            .map_err(|e| PyValueError::new_err(format!("{file}: not a scenario dict: {e}")))?;
        PyScenario::parse(file, text)
    }

    /// Imports a SimSo configuration (XML); what schedkit does not model is an error, what
    /// it models differently a warning (Python's `warnings`).
    #[staticmethod]
    fn from_simso(py: Python<'_>, path: PathBuf) -> PyResult<PyScenario> {
        let imported = schedkit_io::simso::import_file(&path).map_err(io_error)?;
        let warn = py.import("warnings")?;
        for w in &imported.warnings {
            warn.call_method1("warn", (w.as_str(),))?;
        }
        PyScenario::parse(&path.display().to_string(), imported.toml)
    }

    /// The scenario as a SimSo configuration (XML), for the periodic subset.
    fn to_simso(&self) -> PyResult<String> {
        schedkit_io::simso::export(&self.inner).map_err(io_error)
    }

    /// The scenario under another policy, every other `[policy]` parameter kept.
    fn with_policy(&self, name: String) -> PyResult<PyScenario> {
        self.with("policy", name)
    }

    /// Another `[run] horizon`: nanoseconds or a duration string.
    fn with_horizon(&self, horizon: &Bound<'_, PyAny>) -> PyResult<PyScenario> {
        let ns = duration("run.horizon", horizon)?;
        self.with("horizon", format!("{}ns", ns.0))
    }

    /// Another `[policy] quantum`: nanoseconds or a duration string.
    fn with_quantum(&self, quantum: &Bound<'_, PyAny>) -> PyResult<PyScenario> {
        let ns = duration("policy.quantum", quantum)?;
        self.with("quantum", format!("{}ns", ns.0))
    }

    /// Another number of modelled cores (every `cpus` list must still fit).
    fn with_cores(&self, cores: u64) -> PyResult<PyScenario> {
        self.with("cores", cores.to_string())
    }

    /// Another `[policy] seed`.
    fn with_seed(&self, seed: u64) -> PyResult<PyScenario> {
        self.with("seed", seed.to_string())
    }

    #[getter]
    fn file(&self) -> &str {
        self.inner.file()
    }
    #[getter]
    fn cores(&self) -> usize {
        self.inner.cores()
    }
    #[getter]
    fn policy(&self) -> &'static str {
        self.inner.policy().name().as_str()
    }
    #[getter]
    fn horizon_ns(&self) -> u64 {
        self.inner.horizon().0
    }
    #[getter]
    fn processes(&self) -> Vec<String> {
        self.inner
            .processes()
            .iter()
            .map(|p| p.name().to_string())
            .collect()
    }
    #[getter]
    fn tasks(&self) -> Vec<String> {
        self.inner
            .tasks()
            .iter()
            .map(|t| t.name().to_string())
            .collect()
    }
    /// The TOML text the scenario was parsed from (before any override).
    #[getter]
    fn toml(&self) -> &str {
        &self.text
    }
    /// The overrides applied since parsing, as `(name, value)` pairs.
    #[getter]
    fn overrides(&self) -> Vec<(String, String)> {
        self.overrides.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Scenario(file={:?}, cores={}, policy={:?}, processes={}, tasks={})",
            self.inner.file(),
            self.inner.cores(),
            self.inner.policy().name().as_str(),
            self.inner.processes().len(),
            self.inner.tasks().len()
        )
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .extract::<PyRef<'_, PyScenario>>()
            .is_ok_and(|o| o.inner == self.inner)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let rebuild = py
            .import("schedkit._schedkit")?
            .getattr("_rebuild_scenario")?;
        let args = (
            self.inner.file().to_string(),
            self.text.clone(),
            self.overrides.clone(),
        );
        (rebuild, args).into_pyobject(py)
    }
}

/// Unpickling: parse the text again and replay the overrides.
#[pyfunction]
pub fn _rebuild_scenario(
    file: &str,
    text: String,
    overrides: Vec<(String, String)>,
) -> PyResult<PyScenario> {
    let mut s = PyScenario::parse(file, text)?;
    for (k, v) in overrides {
        s = s.with(&k, v)?;
    }
    Ok(s)
}
