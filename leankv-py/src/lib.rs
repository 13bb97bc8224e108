//! The native part of the `leankv` Python package (`leankv._leankv`): a thin layer over the
//! public API of the Rust crate. The package's `__init__.py` re-exports it with the
//! exceptions of `leankv/_errors.py`.
//!
//! Threads: every class is `frozen` and `Sync`; each call into the engine runs with the GIL
//! released (`Python::detach`), and no lock of this crate is waited for with the GIL held.

mod batch;
mod bytes;
mod db;
mod errors;
mod iter;
mod tree;

use pyo3::prelude::*;

#[pymodule]
fn _leankv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(db::open, m)?)?;
    m.add_class::<db::Db>()?;
    m.add_class::<tree::Tree>()?;
    m.add_class::<iter::RangeIter>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<batch::BatchTree>()?;
    m.add("MAX_KEY_SIZE", leankv::MAX_KEY_SIZE)?;
    m.add("MAX_VALUE_SIZE", leankv::MAX_VALUE_SIZE)?;
    m.add("DEFAULT_PAGE_SIZE", leankv::DEFAULT_PAGE_SIZE)?;
    m.add("DEFAULT_POOL_SIZE", db::DEFAULT_POOL_SIZE)?;
    Ok(())
}
