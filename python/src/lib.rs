//! The Python module `schedkit._schedkit`: the Rust side of `import schedkit`.
//!
//! It holds no scheduling logic of its own: scenarios are parsed and overridden by
//! `schedkit-core`, simulated by `schedkit-sim`, drawn by `schedkit-render`, turned into
//! tables, compared, swept and imported by `schedkit-io`, exactly as the command line does.
//! Simulations run with the GIL released. The Python package (`python/schedkit/`) wraps the
//! results into pandas DataFrames and spreads sweeps over Dask.

use pyo3::prelude::*;

mod errors;
mod result;
mod scenario;

/// The module. `errors` registers the exception classes the package re-exports.
#[pymodule]
fn _schedkit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<scenario::PyScenario>()?;
    m.add_class::<result::PySimResult>()?;
    m.add_function(wrap_pyfunction!(scenario::_rebuild_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(result::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(result::compare, m)?)?;
    m.add_function(wrap_pyfunction!(result::sweep_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(result::sweep_shard, m)?)?;
    m.add_function(wrap_pyfunction!(result::merge_shards, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
