//! `leankv.Tree`: one named, ordered map of `bytes` to `bytes`, with the mapping protocol.

use crate::bytes::{extract, extract_opt};
use crate::db::Db;
use crate::errors::IntoPyResult;
use crate::iter::{Mode, RangeIter};
use crate::DropDetached;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::ops::Bound as Edge;

/// A named, ordered map of ``bytes`` keys to ``bytes`` values in a :class:`Db`, from
/// ``db.tree(name)``.
///
/// It supports the mapping protocol (``tree[k]``, ``tree[k] = v``, ``del tree[k]``,
/// ``k in tree``, ``len(tree)``, iteration over keys) plus ordered iteration (``range``,
/// ``prefix``). Every write is its own atomic commit, durable as the database's
/// ``durability`` says; group writes with :meth:`Db.write_batch`. Keys and values may be
/// ``bytes``, ``bytearray``, ``memoryview`` or any other buffer; results are ``bytes``.
/// The GIL is released while the engine works, so threads can share a tree.
#[pyclass(frozen, module = "leankv", name = "Tree")]
pub struct Tree {
    pub(crate) inner: DropDetached<leankv::Tree>,
    name: String,
    /// Keeps the database open while a handle to one of its trees exists.
    pub(crate) db: Py<Db>,
}

impl Tree {
    pub(crate) fn new(inner: leankv::Tree, name: String, db: Py<Db>) -> Tree {
        Tree {
            inner: DropDetached::new(inner),
            name,
            db,
        }
    }

    /// Runs `f` on the tree with the GIL released; `ClosedError` (at once) once `close` was
    /// called, as for every handle.
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&leankv::Tree) -> leankv::Result<R> + Send,
    ) -> PyResult<R> {
        self.db.get().check_open(py)?;
        py.detach(|| f(&self.inner)).py_err(py)
    }

    fn iter(&self, py: Python<'_>, range: leankv::Range, reverse: bool, mode: Mode) -> RangeIter {
        RangeIter::new(range, reverse, mode, self.db.clone_ref(py))
    }

    fn all(&self, py: Python<'_>, reverse: bool, mode: Mode) -> RangeIter {
        self.iter(py, self.inner.iter(), reverse, mode)
    }
}

fn pair<'py>(py: Python<'py>, (key, value): (Vec<u8>, Vec<u8>)) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])
}

#[pymethods]
impl Tree {
    /// The value of ``key``; ``KeyError`` if absent.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = extract(key, "key")?;
        match self.run(py, |tree| tree.get(&bytes))? {
            Some(value) => Ok(PyBytes::new(py, &value)),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// Sets ``key`` to ``value`` (one atomic commit).
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (extract(key, "key")?, extract(value, "value")?);
        self.run(py, |tree| tree.insert(&key, &value))
    }

    /// Removes ``key``; ``KeyError`` if absent.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = extract(key, "key")?;
        if self.run(py, |tree| tree.remove(&bytes))? {
            Ok(())
        } else {
            Err(PyKeyError::new_err(key.clone().unbind()))
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = extract(key, "key")?;
        self.run(py, |tree| tree.contains_key(&key))
    }

    /// The number of keys: exact, O(1).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let keys = self.run(py, |tree| tree.len())?;
        Ok(usize::try_from(keys).unwrap_or(usize::MAX))
    }

    /// Iterates over the keys in ascending order.
    fn __iter__(&self, py: Python<'_>) -> RangeIter {
        self.all(py, false, Mode::Keys)
    }

    /// The value of ``key``, or ``default`` if absent.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = extract(key, "key")?;
        match self.run(py, |tree| tree.get(&key))? {
            Some(value) => Ok(PyBytes::new(py, &value).into_any()),
            None => Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
        }
    }

    /// The values of ``keys`` (any iterable of keys), as a list in their order, ``None`` for
    /// each key absent. Beyond memory much faster than one ``get`` after another: the pages
    /// not in memory are read together.
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let keys = keys
            .try_iter()?
            .map(|key| Ok(extract(&key?, "key")?.into_owned()))
            .collect::<PyResult<Vec<Vec<u8>>>>()?;
        let values = self.run(py, |tree| tree.get_many(&keys))?;
        PyList::new(
            py,
            values
                .iter()
                .map(|value| value.as_deref().map(|value| PyBytes::new(py, value))),
        )
    }

    /// Sets ``key`` to ``value``, like ``tree[key] = value``.
    fn insert(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.__setitem__(py, key, value)
    }

    /// Removes ``key``; returns whether it was there (no ``KeyError``).
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = extract(key, "key")?;
        self.run(py, |tree| tree.remove(&key))
    }

    /// Iterates over the ``(key, value)`` pairs with ``start <= key < end`` (``None``: no
    /// bound) in ascending key order, or descending with ``reverse=True``.
    #[pyo3(signature = (start = None, end = None, reverse = false))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<RangeIter> {
        let start = extract_opt(start, "key")?;
        let end = extract_opt(end, "key")?;
        let low = start.map_or(Edge::Unbounded, |key| Edge::Included(key.into_owned()));
        let high = end.map_or(Edge::Unbounded, |key| Edge::Excluded(key.into_owned()));
        let range = self.inner.range::<Vec<u8>, _>((low, high));
        Ok(self.iter(py, range, reverse, Mode::Items))
    }

    /// Iterates over the ``(key, value)`` pairs whose key starts with ``prefix``, in
    /// ascending key order, or descending with ``reverse=True``.
    #[pyo3(signature = (prefix, reverse = false))]
    fn prefix(
        &self,
        py: Python<'_>,
        prefix: &Bound<'_, PyAny>,
        reverse: bool,
    ) -> PyResult<RangeIter> {
        let prefix = extract(prefix, "key")?;
        Ok(self.iter(py, self.inner.scan_prefix(&prefix), reverse, Mode::Items))
    }

    /// Iterates over all ``(key, value)`` pairs in key order.
    #[pyo3(signature = (reverse = false))]
    fn items(&self, py: Python<'_>, reverse: bool) -> RangeIter {
        self.all(py, reverse, Mode::Items)
    }

    /// Iterates over all keys in order.
    #[pyo3(signature = (reverse = false))]
    fn keys(&self, py: Python<'_>, reverse: bool) -> RangeIter {
        self.all(py, reverse, Mode::Keys)
    }

    /// Iterates over all values in key order.
    #[pyo3(signature = (reverse = false))]
    fn values(&self, py: Python<'_>, reverse: bool) -> RangeIter {
        self.all(py, reverse, Mode::Values)
    }

    /// The ``(key, value)`` pair with the smallest key, or ``None`` if the tree is empty.
    fn first<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let item = self.run(py, |tree| tree.first())?;
        item.map(|item| pair(py, item)).transpose()
    }

    /// The ``(key, value)`` pair with the largest key, or ``None`` if the tree is empty.
    fn last<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let item = self.run(py, |tree| tree.last())?;
        item.map(|item| pair(py, item)).transpose()
    }

    /// Sets ``key`` to ``new`` (``None``: removes it) only if its value is ``expected``
    /// (``None``: absent), atomically. Returns whether it did.
    #[pyo3(signature = (key, expected, new))]
    fn compare_and_swap(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
        new: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let key = extract(key, "key")?;
        let expected = extract_opt(expected, "value")?;
        let new = extract_opt(new, "value")?;
        let swapped = self.run(py, |tree| {
            tree.compare_and_swap(&key, expected.as_deref(), new.as_deref())
        })?;
        Ok(swapped.is_ok())
    }

    /// Removes every key (one atomic commit; whole leaves freed). Returns how many there were.
    fn clear(&self, py: Python<'_>) -> PyResult<u64> {
        self.run(py, |tree| tree.remove_range::<&[u8], _>(..))
    }

    /// The tree's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The database the tree belongs to.
    #[getter]
    fn db(&self, py: Python<'_>) -> Py<Db> {
        self.db.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let name = self.name.as_str().into_pyobject(py)?.repr()?;
        Ok(format!("<leankv.Tree {name}>"))
    }
}
