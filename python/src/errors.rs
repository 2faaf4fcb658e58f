//! Rust errors as Python exceptions that keep their location: a `ScenarioError` carries
//! `file`, `line`, `column` (None when the problem has no place in a file, such as an
//! override), `field` and `message`; an `OptionError` carries `option` and `value`.

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use schedkit_core::scenario::ScenarioError;

create_exception!(
    schedkit,
    ScenarioErrorPy,
    PyValueError,
    "A problem in a scenario or SimSo file: `file`, `line`, `column`, `field`, `message`."
);
create_exception!(
    schedkit,
    OptionError,
    PyValueError,
    "An argument that cannot be used (a policy list, seeds, utilisations, a shard): `option`, `value`, `message`."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ScenarioError", py.get_type::<ScenarioErrorPy>())?;
    m.add("OptionError", py.get_type::<OptionError>())?;
    Ok(())
}

fn with_attrs(py: Python<'_>, err: PyErr, attrs: &[(&str, PyObject)]) -> PyErr {
    let value = err.value(py);
    for (k, v) in attrs {
        // Setting an attribute on a fresh exception instance cannot fail in practice; if it
        // did, the exception still carries its message.
        let _ = value.setattr(*k, v);
    }
    err
}

pub fn scenario_error(e: ScenarioError) -> PyErr {
    Python::with_gil(|py| {
        let located = e.line > 0;
        let attrs: [(&str, PyObject); 5] = [
            (
                "file",
                e.file
                    .clone()
                    .into_pyobject(py)
                    .unwrap()
                    .into_any()
                    .unbind(),
            ),
            (
                "line",
                if located {
                    e.line.into_pyobject(py).unwrap().into_any().unbind()
                } else {
                    py.None()
                },
            ),
            (
                "column",
                if located {
                    e.column.into_pyobject(py).unwrap().into_any().unbind()
                } else {
                    py.None()
                },
            ),
            (
                "field",
                e.field
                    .clone()
                    .into_pyobject(py)
                    .unwrap()
                    .into_any()
                    .unbind(),
            ),
            (
                "message",
                e.message
                    .clone()
                    .into_pyobject(py)
                    .unwrap()
                    .into_any()
                    .unbind(),
            ),
        ];
        with_attrs(py, ScenarioErrorPy::new_err(e.to_string()), &attrs)
    })
}

fn option_error(option: &str, value: &str, text: String) -> PyErr {
    Python::with_gil(|py| {
        let attrs: [(&str, PyObject); 3] = [
            (
                "option",
                option.into_pyobject(py).unwrap().into_any().unbind(),
            ),
            (
                "value",
                value.into_pyobject(py).unwrap().into_any().unbind(),
            ),
            (
                "message",
                text.clone().into_pyobject(py).unwrap().into_any().unbind(),
            ),
        ];
        with_attrs(py, OptionError::new_err(text), &attrs)
    })
}

pub fn io_error(e: schedkit_io::Error) -> PyErr {
    use schedkit_io::Error;
    let text = e.to_string();
    match e {
        Error::Scenario(s) => scenario_error(s),
        Error::Experiment(schedkit_experiments::Error::Scenario(s)) => scenario_error(s),
        Error::Experiment(schedkit_experiments::Error::BadOption { flag, value, .. })
        | Error::BadOption { flag, value, .. } => option_error(&flag, &value, text),
        Error::File { .. } => PyOSError::new_err(text),
        // Options unusable together, a failed measurement: input or not, Python's ValueError
        // says it as well as any.
        Error::Experiment(_) => PyValueError::new_err(text),
    }
}
