//! The native part of the `leankv` Python package (`leankv._leankv`): a thin layer over the
//! public API of the Rust crate. The package's `__init__.py` re-exports it with the
//! exceptions of `leankv/_errors.py`.
//!
//! Threads: every class is `frozen` and `Sync`; each call into the engine runs with the GIL
//! released (`Python::detach`), and no lock of this crate is waited for with the GIL held:
//! the database's `RwLock` is only taken without it (what is checked with the GIL held is
//! the atomic `closed` flag beside it), and the mutexes of batches and iterators are only
//! tried with it, and waited for without it. Engine objects are dropped without it too
//! ([`drop_detached`]): dropping the last handle of a tree takes an engine lock, dropping
//! the database closes it.

mod batch;
mod bytes;
mod db;
mod errors;
mod iter;
mod tree;

use pyo3::prelude::*;
use std::ops::Deref;

/// Drops `value` with the GIL released. Python objects are freed with the GIL held, and
/// dropping an engine object can wait: the last handle of a tree takes the engine's lock of
/// its open trees (held by a `db.tree` that creates one across a sync), a `leankv::Db`
/// closes the database.
pub(crate) fn drop_detached<T: Send>(value: T) {
    let mut value = Some(value);
    // Not attached (cannot happen for a Python object's fields): dropped right here.
    Python::try_attach(|py| py.detach(|| drop(value.take())));
}

/// An engine object that [`drop_detached`] drops; derefs to it.
pub(crate) struct DropDetached<T: Send>(Option<T>);

impl<T: Send> DropDetached<T> {
    pub(crate) fn new(value: T) -> Self {
        DropDetached(Some(value))
    }
}

impl<T: Send> Deref for DropDetached<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("taken only by drop")
    }
}

impl<T: Send> Drop for DropDetached<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            drop_detached(value);
        }
    }
}

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
