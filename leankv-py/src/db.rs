//! `leankv.open` and `leankv.Db`: a database, its trees, batches, statistics and close.

use crate::batch::WriteBatch;
use crate::errors::{new_error, to_py, IntoPyResult, Kind};
use crate::tree::Tree;
use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;
use std::time::Duration;

/// The pool size `leankv.open` uses unless told otherwise: 64 MiB (the Rust default, 1 GiB,
/// is a lot for a script).
pub(crate) const DEFAULT_POOL_SIZE: usize = 64 << 20;
const _: () = assert!(DEFAULT_POOL_SIZE == 67108864); // the default in `open`'s signature

/// `"immediate"`, `"eventual"` or `"none"` as a [`leankv::Durability`].
pub(crate) fn parse_durability(text: &str) -> PyResult<leankv::Durability> {
    match text {
        "immediate" => Ok(leankv::Durability::Immediate),
        "eventual" => Ok(leankv::Durability::Eventual),
        "none" => Ok(leankv::Durability::None),
        other => Err(PyValueError::new_err(format!(
            "durability must be 'immediate', 'eventual' or 'none', not {other:?}"
        ))),
    }
}

/// A count option of `open` (`pool_size`, `page_size`, ...) as an unsigned integer; a
/// negative or too large `int` is an `InvalidOptionsError` (a `ValueError`) that names the
/// option, not the `OverflowError` of PyO3's conversion. Not an `int`: `TypeError`.
fn count_option<T: TryFrom<u64>>(value: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    let py = value.py();
    let invalid = |what: &str| {
        let message = format!("invalid options: {name} {what}, not {value}");
        new_error(py, Kind::InvalidOptions, message)
    };
    match value.extract::<u64>() {
        Ok(number) => T::try_from(number).map_err(|_| invalid("is too large")),
        Err(error) if error.is_instance_of::<PyOverflowError>(py) => {
            let negative = value.lt(0)?;
            Err(invalid(if negative {
                "must be >= 0"
            } else {
                "is too large"
            }))
        }
        Err(error) => Err(error),
    }
}

/// `count_option`, `None` passing through.
fn optional_count<T: TryFrom<u64>>(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<T>> {
    if value.is_none() {
        Ok(None)
    } else {
        count_option(value, name).map(Some)
    }
}

// The extractors of `open`'s count options (`from_py_with` takes a function of the value
// alone).
fn pool_size_option(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    count_option(value, "pool_size")
}

fn page_size_option(value: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    optional_count(value, "page_size")
}

fn scan_prefetch_option(value: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    optional_count(value, "scan_prefetch")
}

fn checkpoint_every_option(value: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    optional_count(value, "checkpoint_every")
}

fn log_buffer_size_option(value: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    optional_count(value, "log_buffer_size")
}

/// Opens (creating if missing) the leankv database in directory ``path``.
///
/// ``pool_size`` is the buffer pool's memory in bytes (the engine's memory budget; pages
/// beyond it live on disk). ``durability`` says when a commit is durable: ``"immediate"``
/// (synced before it returns), ``"eventual"`` (synced within ``eventual_sync_delay``
/// seconds, 0.01 by default) or ``"none"`` (synced by ``flush``, ``close`` and checkpoints).
/// The other options are those of the Rust ``leankv::Options``; ``None`` keeps its default.
/// Raises ``AlreadyOpenError`` if another ``Db`` has the directory open, and
/// ``InvalidOptionsError`` (a ``ValueError``) for options that cannot work, a negative
/// count among them.
#[pyfunction]
#[pyo3(signature = (
    // A literal, so that the signature Python shows has it (DEFAULT_POOL_SIZE).
    path, *, pool_size = 67108864, durability = "immediate", page_size = None,
    cooling_fraction = None, direct_io = true, prefault = false, background_writer = true,
    scan_prefetch = None, write_ahead_log = true, open_after_crash = false,
    eventual_sync_delay = None, checkpoint_every = None, log_buffer_size = None
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    #[pyo3(from_py_with = pool_size_option)] pool_size: usize,
    durability: &str,
    #[pyo3(from_py_with = page_size_option)] page_size: Option<usize>,
    cooling_fraction: Option<f64>,
    direct_io: bool,
    prefault: bool,
    background_writer: bool,
    #[pyo3(from_py_with = scan_prefetch_option)] scan_prefetch: Option<usize>,
    write_ahead_log: bool,
    open_after_crash: bool,
    eventual_sync_delay: Option<f64>,
    #[pyo3(from_py_with = checkpoint_every_option)] checkpoint_every: Option<u64>,
    #[pyo3(from_py_with = log_buffer_size_option)] log_buffer_size: Option<usize>,
) -> PyResult<Db> {
    let durability = parse_durability(durability)?;
    let mut options = leankv::Options::default()
        .pool_size(pool_size)
        .durability(durability)
        .direct_io(direct_io)
        .prefault(prefault)
        .background_writer(background_writer)
        .write_ahead_log(write_ahead_log)
        .open_after_crash(open_after_crash);
    if let Some(bytes) = page_size {
        options = options.page_size(bytes);
    }
    if let Some(fraction) = cooling_fraction {
        options = options.cooling_fraction(fraction);
    }
    if let Some(leaves) = scan_prefetch {
        options = options.scan_prefetch(leaves);
    }
    if let Some(seconds) = eventual_sync_delay {
        let delay = Duration::try_from_secs_f64(seconds).map_err(|_| {
            PyValueError::new_err(format!(
                "eventual_sync_delay must be a number of seconds >= 0, not {seconds}"
            ))
        })?;
        options = options.eventual_sync_delay(delay);
    }
    if let Some(bytes) = checkpoint_every {
        options = options.checkpoint_every(bytes);
    }
    if let Some(bytes) = log_buffer_size {
        options = options.log_buffer_size(bytes);
    }
    let db = py.detach(|| leankv::Db::open(&path, options)).py_err(py)?;
    Ok(Db {
        inner: RwLock::new(Some(db)),
        closed: AtomicBool::new(false),
        path,
    })
}

/// An open leankv database (from :func:`leankv.open`): a directory of named, ordered trees
/// of ``bytes`` keys and values.
///
/// Use it as a context manager to close it at the end of the block. Every method may be
/// called from any thread; the engine runs without the GIL.
#[pyclass(frozen, module = "leankv", name = "Db")]
pub struct Db {
    /// `None` once closed. Read-locked while an operation uses the database, write-locked by
    /// `close`, which so waits for those to end; only ever taken with the GIL released.
    inner: RwLock<Option<leankv::Db>>,
    /// Set by `close` before it waits for `inner`: what the checks made with the GIL held
    /// (`closed`, `write_batch`, `repr`, every iterator step) read, never waiting.
    closed: AtomicBool,
    path: PathBuf,
}

impl Db {
    /// Whether `close` was called (it may still be running), without waiting for anything.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// `Err(ClosedError)` once `close` was called.
    pub(crate) fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        if self.is_closed() {
            Err(to_py(py, leankv::Error::Closed))
        } else {
            Ok(())
        }
    }

    /// Runs `f` on the open database with the GIL released; `ClosedError` once closed.
    pub(crate) fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&leankv::Db) -> leankv::Result<R> + Send,
    ) -> PyResult<R> {
        // The flag is read here, not before `detach`, so that `f` (a batch's changes) is
        // dropped without the GIL too.
        py.detach(|| {
            if self.is_closed() {
                return Err(leankv::Error::Closed);
            }
            let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
            match inner.as_ref() {
                Some(db) => f(db),
                None => Err(leankv::Error::Closed),
            }
        })
        .py_err(py)
    }
}

impl Drop for Db {
    /// The last reference went away: closes the database (errors unseen, as documented) with
    /// the GIL released, since a close writes every dirty page.
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        crate::drop_detached(inner.take());
    }
}

#[pymethods]
impl Db {
    /// The tree ``name``, created if missing. Handles are cheap; open one per name and keep it.
    fn tree(slf: &Bound<'_, Self>, name: &str) -> PyResult<Tree> {
        let py = slf.py();
        let tree = slf.get().with(py, |db| db.open_tree(name))?;
        Ok(Tree::new(tree, name.to_owned(), slf.clone().unbind()))
    }

    /// Names of all trees, in byte order.
    fn tree_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, |db| db.tree_names())
    }

    /// Drops the tree ``name``: its keys, its name and its pages, atomically. Returns whether
    /// it existed. Handles to it that outlive it raise ``TreeDroppedError``.
    fn drop_tree(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        self.with(py, |db| db.drop_tree(name))
    }

    /// A new, empty :class:`WriteBatch` of changes to trees of this database, applied
    /// atomically by its ``commit`` (or at the end of a ``with`` block). ``durability``
    /// overrides the database's for this batch.
    #[pyo3(signature = (durability = None))]
    fn write_batch(slf: &Bound<'_, Self>, durability: Option<&str>) -> PyResult<WriteBatch> {
        let durability = durability.map(parse_durability).transpose()?;
        slf.get().check_open(slf.py())?;
        Ok(WriteBatch::new(slf.clone().unbind(), durability))
    }

    /// Makes every commit so far durable and writes a checkpoint (every dirty page).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |db| db.flush())
    }

    /// The engine's counters and facts as a ``dict`` (page reads and writes, evictions,
    /// pool frames, I/O mode, log bytes, what recovery did, ...).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.with(py, |db| Ok(db.stats()))?;
        stats_dict(py, &stats)
    }

    /// Flushes, then checks every tree on disk (checksums, node structure, key order, fence
    /// keys, page ownership). Returns a ``dict``: ``ok`` (no problem found), ``trees``,
    /// ``pages``, ``entries``, ``problems`` (one line each) and ``spaces``, one ``dict`` per tree
    /// walked (``name``, ``height``, ``leaf_pages``, ``inner_pages``, ``large_value_pages``,
    /// ``entries``, ``leaf_fill``: the leaves' bytes in use over their size). Run it while no
    /// writes are in flight.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.with(py, |db| db.check_integrity())?;
        let dict = PyDict::new(py);
        dict.set_item("ok", report.is_ok())?;
        dict.set_item("trees", report.trees)?;
        dict.set_item("pages", report.pages)?;
        dict.set_item("entries", report.entries)?;
        dict.set_item("problems", PyList::new(py, &report.problems)?)?;
        let spaces = PyList::empty(py);
        for space in &report.spaces {
            let entry = PyDict::new(py);
            entry.set_item("name", &space.name)?;
            entry.set_item("height", space.height)?;
            entry.set_item("leaf_pages", space.leaf_pages)?;
            entry.set_item("inner_pages", space.inner_pages)?;
            entry.set_item("large_value_pages", space.large_value_pages)?;
            entry.set_item("entries", space.entries)?;
            entry.set_item("leaf_fill", space.leaf_fill())?;
            spaces.append(entry)?;
        }
        dict.set_item("spaces", spaces)?;
        Ok(dict)
    }

    /// Writes everything and releases the directory. From the moment it is called, handles
    /// (trees, iterators, batches) raise ``ClosedError``; it waits, with the GIL released,
    /// for the database operations in flight to end, then closes. Closing a closed database
    /// does nothing (a close running in another thread is waited for). Dropping the last
    /// reference to a ``Db`` (and its trees) closes it too, but only ``close`` reports errors.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        py.detach(|| {
            let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
            match inner.take() {
                Some(db) => db.close(),
                None => Ok(()),
            }
        })
        .py_err(py)
    }

    /// Whether :meth:`close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Longest key this database accepts, in bytes.
    #[getter]
    fn max_key_size(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |db| Ok(db.max_key_size()))
    }

    /// Longest value this database accepts, in bytes.
    #[getter]
    fn max_value_size(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |db| Ok(db.max_value_size()))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let state = if self.is_closed() { "closed" } else { "open" };
        let path = self.path.to_string_lossy().into_pyobject(py)?.repr()?;
        Ok(format!("<leankv.Db {path} {state}>"))
    }
}

fn stats_dict<'py>(py: Python<'py>, stats: &leankv::Stats) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let facts = [
        ("page_count", stats.page_count),
        ("free_pages", stats.free_pages),
        ("format_version", u64::from(stats.format_version)),
        ("trees_counted_by_scan", stats.trees_counted_by_scan),
    ];
    for (name, value) in stats.counters().into_iter().chain(facts) {
        dict.set_item(name, value)?;
    }
    dict.set_item("io_mode", stats.io_mode.to_string())?;
    dict.set_item("page_size", stats.page_size)?;
    dict.set_item("pool_frames", stats.pool_frames)?;
    dict.set_item("frames_in_use", stats.frames_in_use)?;
    let recovery = PyDict::new(py);
    let r = &stats.recovery;
    recovery.set_item("log_bytes", r.log_bytes)?;
    recovery.set_item("records", r.records)?;
    recovery.set_item("pages", r.pages)?;
    recovery.set_item("pages_written_early", r.pages_written_early)?;
    recovery.set_item("batches_rolled_back", r.batches_rolled_back)?;
    recovery.set_item("range_removals_finished", r.range_removals_finished)?;
    recovery.set_item("seconds", r.duration.as_secs_f64())?;
    dict.set_item("recovery", recovery)?;
    Ok(dict)
}
