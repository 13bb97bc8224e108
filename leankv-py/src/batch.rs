//! `leankv.WriteBatch`: changes to one or more trees, committed atomically.

use crate::bytes::extract;
use crate::db::Db;
use crate::drop_detached;
use crate::errors::{new_error, Kind};
use crate::tree::Tree;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Mutex, PoisonError};

/// Changes to trees of one :class:`Db`, applied atomically (after any crash, entirely there
/// or entirely absent) by :meth:`commit`. From :meth:`Db.write_batch`.
///
/// As a context manager it commits at the end of the ``with`` block, or discards the
/// changes if an exception leaves the block::
///
///     with db.write_batch() as batch:
///         batch.insert(accounts, b"alice", b"70")
///         batch[accounts][b"bob"] = b"30"
///         batch.remove(log, b"old")
///
/// Changes apply in the order they were added; a later change to the same key wins. A batch
/// is atomic but not isolated: readers may see some of its changes while it is committed.
/// After ``commit`` or ``discard`` the batch refuses further use with ``ClosedError``;
/// calling either inside the ``with`` block is fine: the end of the block then does nothing
/// (it neither commits again nor raises).
#[pyclass(frozen, module = "leankv", name = "WriteBatch")]
pub struct WriteBatch {
    db: Py<Db>,
    durability: Option<leankv::Durability>,
    /// `None` once committed or discarded.
    state: Mutex<Option<leankv::WriteBatch>>,
}

fn finished(py: Python<'_>) -> PyErr {
    new_error(
        py,
        Kind::Closed,
        "this write batch was already committed or discarded",
    )
}

impl WriteBatch {
    pub(crate) fn new(db: Py<Db>, durability: Option<leankv::Durability>) -> WriteBatch {
        WriteBatch {
            db,
            durability,
            state: Mutex::new(Some(leankv::WriteBatch::new())),
        }
    }

    /// Runs `f` on the batch while it is open; `None` once it is committed or discarded.
    /// The lock is tried with the GIL held and waited for without it (a commit holds it
    /// without the GIL).
    fn update<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Option<leankv::WriteBatch>) -> R + Send,
    ) -> R {
        if let Ok(mut state) = self.state.try_lock() {
            return f(&mut state);
        }
        py.detach(|| f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner)))
    }

    /// Closes the batch: its changes, `None` if it was committed or discarded already.
    fn take(&self, py: Python<'_>) -> Option<leankv::WriteBatch> {
        self.update(py, Option::take)
    }

    /// Commits `batch`, taken from this one.
    fn apply(&self, py: Python<'_>, batch: leankv::WriteBatch) -> PyResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let durability = self.durability;
        self.db.get().with(py, move |db| match durability {
            Some(durability) => db.write_with(batch, durability),
            None => db.write(batch),
        })
    }

    /// `tree` is of the batch's database, and that is not closed (a change added then could
    /// never be committed).
    fn check_tree(&self, py: Python<'_>, tree: &Tree) -> PyResult<()> {
        self.db.get().check_open(py)?;
        if tree.db.is(&self.db) {
            Ok(())
        } else {
            Err(new_error(
                py,
                Kind::InvalidOptions,
                "the tree belongs to another database than the write batch",
            ))
        }
    }
}

#[pymethods]
impl WriteBatch {
    /// Sets ``key`` to ``value`` in ``tree`` when the batch commits.
    fn insert(
        &self,
        py: Python<'_>,
        tree: PyRef<'_, Tree>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.check_tree(py, &tree)?;
        let (key, value) = (extract(key, "key")?, extract(value, "value")?);
        let tree = &tree.inner;
        self.update(py, |state| {
            state.as_mut().map(|b| b.insert(tree, &key, &value))
        })
        .ok_or_else(|| finished(py))
    }

    /// Removes ``key`` from ``tree`` when the batch commits (nothing if it is absent then).
    fn remove(
        &self,
        py: Python<'_>,
        tree: PyRef<'_, Tree>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.check_tree(py, &tree)?;
        let key = extract(key, "key")?;
        let tree = &tree.inner;
        self.update(py, |state| state.as_mut().map(|b| b.remove(tree, &key)))
            .ok_or_else(|| finished(py))
    }

    /// ``batch[tree]``: a view of the batch for one tree, with ``view[key] = value`` and
    /// ``del view[key]``.
    fn __getitem__(slf: &Bound<'_, Self>, tree: Bound<'_, Tree>) -> PyResult<BatchTree> {
        slf.get().check_tree(slf.py(), tree.get())?;
        Ok(BatchTree {
            batch: slf.clone().unbind(),
            tree: tree.unbind(),
        })
    }

    /// Applies the changes atomically, durable as the database's (or this batch's)
    /// ``durability`` says. The batch cannot be used afterwards, even if the commit fails.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let batch = self.take(py).ok_or_else(|| finished(py))?;
        self.apply(py, batch)
    }

    /// Drops the changes without applying them. Does nothing once committed or discarded.
    fn discard(&self, py: Python<'_>) {
        if let Some(batch) = self.take(py) {
            // Its tree handles may be the last ones.
            drop_detached(batch);
        }
    }

    /// The number of changes in the batch.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.update(py, |state| state.as_ref().map(|b| b.len()))
            .ok_or_else(|| finished(py))
    }

    /// Whether the batch was committed or discarded.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.update(py, |state| state.is_none())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits if the block ended normally, discards if it raised; does nothing if the batch
    /// was already committed or discarded in the block.
    #[pyo3(signature = (exc_type, *_rest))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _rest: &Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        if exc_type.is_none() {
            if let Some(batch) = self.take(py) {
                self.apply(py, batch)?;
            }
        } else {
            self.discard(py);
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.update(py, |state| state.as_ref().map(|b| b.len())) {
            Some(changes) => format!("<leankv.WriteBatch {changes} changes>"),
            None => "<leankv.WriteBatch closed>".into(),
        }
    }
}

impl Drop for WriteBatch {
    /// A batch neither committed nor discarded: its changes hold tree handles.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(batch) = state.take() {
            drop_detached(batch);
        }
    }
}

/// ``batch[tree]``: the changes of a :class:`WriteBatch` to one tree, as a write-only mapping.
#[pyclass(frozen, module = "leankv", name = "BatchTree")]
pub struct BatchTree {
    batch: Py<WriteBatch>,
    tree: Py<Tree>,
}

#[pymethods]
impl BatchTree {
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let tree = self.tree.bind(py).borrow();
        self.batch.get().insert(py, tree, key, value)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let tree = self.tree.bind(py).borrow();
        self.batch.get().remove(py, tree, key)
    }
}
