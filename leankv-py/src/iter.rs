//! Iterators over key ranges: a `leankv::Range` read ahead in batches with the GIL released,
//! handed out one item at a time with it held.

use crate::db::Db;
use crate::drop_detached;
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
    /// `None` once read to its end (or an error): dropped then, without the GIL.
    range: Option<leankv::Range>,
    reverse: bool,
    /// Read ahead, not yet yielded.
    buffer: VecDeque<Item>,
    /// The error that ended the read-ahead, raised once `buffer` is drained.
    error: Option<leankv::Error>,
    batch: usize,
}

impl State {
    /// The next item, reading a batch if none is buffered (the GIL released by the caller).
    fn next(&mut self, mode: Mode) -> Option<leankv::Result<Item>> {
        if self.buffer.is_empty() {
            self.fill(mode);
        }
        if let Some(item) = self.buffer.pop_front() {
            return Some(Ok(item));
        }
        self.error.take().map(Err)
    }

    /// Read to its end and every item handed out (or its error raised).
    fn finished(&self) -> bool {
        self.range.is_none() && self.buffer.is_empty() && self.error.is_none()
    }

    fn fill(&mut self, mode: Mode) {
        let Some(range) = self.range.as_mut() else {
            return;
        };
        let mut bytes = 0;
        while self.buffer.len() < self.batch && bytes < MAX_BATCH_BYTES {
            let item = if self.reverse {
                range.next_back()
            } else {
                range.next()
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
                    self.range = None;
                    break;
                }
                None => {
                    self.range = None;
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
/// keeps its database open; once the database is closed every step raises ``ClosedError``,
/// even where items were read ahead (an iterator that had ended still raises
/// ``StopIteration``).
#[pyclass(frozen, module = "leankv", name = "RangeIterator")]
pub struct RangeIter {
    state: Mutex<State>,
    mode: Mode,
    db: Py<Db>,
}

impl RangeIter {
    pub(crate) fn new(range: leankv::Range, reverse: bool, mode: Mode, db: Py<Db>) -> RangeIter {
        RangeIter {
            state: Mutex::new(State {
                range: Some(range),
                reverse,
                buffer: VecDeque::new(),
                error: None,
                batch: FIRST_BATCH,
            }),
            mode,
            db,
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
        // Once `close` was called no item is handed out, read ahead or not; an iterator that
        // ended stays ended (StopIteration), closed database or not.
        let db = self.db.get();
        // Buffered items are taken with the GIL held; the lock is only tried then, since a
        // thread reading a batch holds it without the GIL.
        let mut buffered = None;
        if let Ok(mut state) = self.state.try_lock() {
            if state.finished() {
                return Ok(None);
            }
            db.check_open(py)?;
            buffered = state.buffer.pop_front();
        }
        let item = match buffered {
            Some(item) => item,
            None => {
                db.check_open(py)?;
                let next = py.detach(|| {
                    let mut state = self.lock();
                    let next = state.next(self.mode);
                    // `close` may have begun while the batch was read: what was read stays
                    // where it was, and `ClosedError` it is.
                    if db.is_closed() {
                        match next {
                            Some(Ok(item)) => state.buffer.push_front(item),
                            Some(Err(error)) => state.error = Some(error),
                            None => return None,
                        }
                        return Some(Err(leankv::Error::Closed));
                    }
                    next
                });
                match next {
                    Some(Ok(item)) => item,
                    Some(Err(error)) => return Err(to_py(py, error)),
                    None => return Ok(None),
                }
            }
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

impl Drop for RangeIter {
    /// An iterator not read to its end still holds its range (a handle of the tree).
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(range) = state.range.take() {
            drop_detached(range);
        }
    }
}
