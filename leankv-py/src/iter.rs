//! Iterators over key ranges: a `leankv::Range` read ahead in batches with the GIL released,
//! handed out one item at a time with it held.

use crate::db::Db;
use crate::errors::to_py;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Items read per batch at first: short scans (`next(tree.range(k))`) read little.
const FIRST_BATCH: usize = 16;
/// Most items read per batch; each batch doubles the last up to this.
const MAX_BATCH: usize = 1024;
/// A batch ends once it holds this many bytes (a few large values, or many small ones).
const MAX_BATCH_BYTES: usize = 1 << 20;

/// What an iterator yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Items,
    Keys,
    Values,
}

type Item = (Vec<u8>, Vec<u8>);

struct State {
    range: leankv::Range,
    reverse: bool,
    /// Read ahead, not yet yielded.
    buffer: VecDeque<Item>,
    /// The error that ended the read-ahead, raised once `buffer` is drained.
    error: Option<leankv::Error>,
    done: bool,
    batch: usize,
}

impl State {
    /// The next item, reading a batch if none is buffered (the GIL released by the caller).
    fn next(&mut self, mode: Mode) -> Option<leankv::Result<Item>> {
        if self.buffer.is_empty() && !self.done {
            self.fill(mode);
        }
        if let Some(item) = self.buffer.pop_front() {
            return Some(Ok(item));
        }
        self.error.take().map(Err)
    }

    fn fill(&mut self, mode: Mode) {
        let mut bytes = 0;
        while self.buffer.len() < self.batch && bytes < MAX_BATCH_BYTES {
            let item = if self.reverse {
                self.range.next_back()
            } else {
                self.range.next()
            };
            match item {
                Some(Ok((key, mut value))) => {
                    if mode == Mode::Keys {
                        value = Vec::new();
                    }
                    bytes += key.len() + value.len();
                    self.buffer.push_back((key, value));
                }
                Some(Err(error)) => {
                    self.error = Some(error);
                    self.done = true;
                    break;
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        self.batch = (self.batch * 2).min(MAX_BATCH);
    }
}

/// An iterator over a key range of a :class:`Tree` (from ``range``, ``prefix``, ``items``,
/// ``keys``, ``values`` or ``iter(tree)``): ``(key, value)`` tuples, keys or values.
///
/// It reads ahead in batches (16 items at first, up to 1,024 or 1 MiB), so a change made
/// while it runs may or may not show in what it yields; it never yields a key twice. It
/// keeps its database open; after the database is closed it raises ``ClosedError``.
#[pyclass(frozen, module = "leankv", name = "RangeIterator")]
pub struct RangeIter {
    state: Mutex<State>,
    mode: Mode,
    _db: Py<Db>,
}

impl RangeIter {
    pub(crate) fn new(range: leankv::Range, reverse: bool, mode: Mode, db: Py<Db>) -> RangeIter {
        RangeIter {
            state: Mutex::new(State {
                range,
                reverse,
                buffer: VecDeque::new(),
                error: None,
                done: false,
                batch: FIRST_BATCH,
            }),
            mode,
            _db: db,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl RangeIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // Buffered items are taken with the GIL held; the lock is only tried then, since a
        // thread reading a batch holds it without the GIL.
        let buffered = match self.state.try_lock() {
            Ok(mut state) => state.buffer.pop_front(),
            Err(_) => None,
        };
        let item = match buffered {
            Some(item) => item,
            None => match py.detach(|| self.lock().next(self.mode)) {
                Some(Ok(item)) => item,
                Some(Err(error)) => return Err(to_py(py, error)),
                None => return Ok(None),
            },
        };
        let (key, value) = item;
        Ok(Some(match self.mode {
            Mode::Items => {
                PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?.into_any()
            }
            Mode::Keys => PyBytes::new(py, &key).into_any(),
            Mode::Values => PyBytes::new(py, &value).into_any(),
        }))
    }
}
