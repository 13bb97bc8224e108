//! Keys and values from Python: `bytes` without a copy, `bytearray`, `memoryview` and any
//! other object with the buffer protocol with one; `str` and everything else is a `TypeError`.

use crate::errors::not_bytes;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};
use std::borrow::Cow;

/// The bytes of `obj`, a key or value (`what` names it in the error message).
///
/// `bytes` is borrowed: it is immutable, and the caller holds a reference to it, so the slice
/// stays valid while the GIL is released. A `bytearray` (which another thread could resize
/// meanwhile) and any other buffer are copied.
pub(crate) fn extract<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(array) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(not_bytes(what, obj));
    }
    // memoryview(obj) accepts exactly the objects with the buffer protocol (memoryview,
    // array.array, mmap, NumPy arrays, ...); `tobytes` copies any layout into C order.
    let view = PyMemoryView::from(obj).map_err(|_| not_bytes(what, obj))?;
    let copy = view.call_method0(pyo3::intern!(obj.py(), "tobytes"))?;
    let copy = copy.cast::<PyBytes>()?;
    Ok(Cow::Owned(copy.as_bytes().to_vec()))
}

/// Like [`extract`], `None` passing through (optional range bounds).
pub(crate) fn extract_opt<'a>(
    obj: Option<&'a Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Cow<'a, [u8]>>> {
    match obj {
        Some(obj) if !obj.is_none() => extract(obj, what).map(Some),
        _ => Ok(None),
    }
}
