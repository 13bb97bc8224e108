//! `leankv::Error` as Python exceptions: one class per variant, defined in Python
//! (`leankv/_errors.py`, where they can subclass `OSError`/`ValueError` too) and looked up
//! here once.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The exception classes of `leankv._errors`, by the name that module gives them.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Error,
    Io,
    Corruption,
    NotADatabase,
    NotClosedCleanly,
    AlreadyOpen,
    KeyTooLarge,
    ValueTooLarge,
    InvalidOptions,
    Closed,
    TreeDropped,
    PoolExhausted,
}

const KINDS: usize = 12;

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Error => "Error",
            Kind::Io => "IoError",
            Kind::Corruption => "CorruptionError",
            Kind::NotADatabase => "NotADatabaseError",
            Kind::NotClosedCleanly => "NotClosedCleanlyError",
            Kind::AlreadyOpen => "AlreadyOpenError",
            Kind::KeyTooLarge => "KeyTooLargeError",
            Kind::ValueTooLarge => "ValueTooLargeError",
            Kind::InvalidOptions => "InvalidOptionsError",
            Kind::Closed => "ClosedError",
            Kind::TreeDropped => "TreeDroppedError",
            Kind::PoolExhausted => "PoolExhaustedError",
        }
    }
}

static CLASSES: [PyOnceLock<Py<PyType>>; KINDS] = [const { PyOnceLock::new() }; KINDS];

fn class(py: Python<'_>, kind: Kind) -> PyResult<&Bound<'_, PyType>> {
    CLASSES[kind as usize].import(py, "leankv._errors", kind.class_name())
}

/// An exception of class `kind` with message `message` and the attributes `attrs`.
fn raise<'py>(
    py: Python<'py>,
    kind: Kind,
    args: impl pyo3::call::PyCallArgs<'py>,
    attrs: &[(&str, Bound<'py, PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let exception = class(py, kind)?.call1(args)?;
        for (name, value) in attrs {
            exception.setattr(*name, value)?;
        }
        Ok(PyErr::from_value(exception))
    };
    build().unwrap_or_else(|error| error)
}

/// A `leankv.<kind>` with just a message (errors of the binding itself, such as a batch
/// used after its commit).
pub(crate) fn new_error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    raise(py, kind, (message.into(),), &[])
}

/// `error` as the Python exception of its variant.
pub(crate) fn to_py(py: Python<'_>, error: leankv::Error) -> PyErr {
    let message = error.to_string();
    let int = |n: u64| n.into_pyobject(py).unwrap().into_any();
    let text = |s: String| s.into_pyobject(py).unwrap().into_any();
    let path = |p: &std::path::Path| text(p.to_string_lossy().into_owned());
    match error {
        leankv::Error::Io { context, source } => {
            let attrs = [("context", text(context.to_string()))];
            match source.raw_os_error() {
                // OSError(errno, strerror) sets `errno` and `strerror`; the message keeps the
                // context.
                Some(errno) => raise(py, Kind::Io, (errno, message), &attrs),
                None => raise(py, Kind::Io, (message,), &attrs),
            }
        }
        leankv::Error::Corruption { page_id, reason } => raise(
            py,
            Kind::Corruption,
            (message,),
            &[("page_id", int(page_id)), ("reason", text(reason))],
        ),
        leankv::Error::NotADatabase { path: file, reason } => raise(
            py,
            Kind::NotADatabase,
            (message,),
            &[("path", path(&file)), ("reason", text(reason))],
        ),
        leankv::Error::KeyTooLarge { len, max } => raise(
            py,
            Kind::KeyTooLarge,
            (message,),
            &[("size", int(len as u64)), ("limit", int(max as u64))],
        ),
        leankv::Error::ValueTooLarge { len, max } => raise(
            py,
            Kind::ValueTooLarge,
            (message,),
            &[("size", int(len as u64)), ("limit", int(max as u64))],
        ),
        leankv::Error::InvalidOptions(_) => raise(py, Kind::InvalidOptions, (message,), &[]),
        leankv::Error::AlreadyOpen { path: dir } => {
            raise(py, Kind::AlreadyOpen, (message,), &[("path", path(&dir))])
        }
        leankv::Error::NotClosedCleanly { path: dir } => raise(
            py,
            Kind::NotClosedCleanly,
            (message,),
            &[("path", path(&dir))],
        ),
        leankv::Error::Closed => raise(py, Kind::Closed, (message,), &[]),
        leankv::Error::TreeDropped => raise(py, Kind::TreeDropped, (message,), &[]),
        leankv::Error::PoolExhausted { frames } => raise(
            py,
            Kind::PoolExhausted,
            (message,),
            &[("frames", int(frames as u64))],
        ),
        // `leankv::Error` is non-exhaustive: a variant added later is at least a leankv.Error.
        _ => raise(py, Kind::Error, (message,), &[]),
    }
}

/// `Result<T, leankv::Error>` to `PyResult<T>`.
pub(crate) trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for leankv::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|error| to_py(py, error))
    }
}

/// The `TypeError` for an argument that should have been bytes.
pub(crate) fn not_bytes(what: &str, found: &Bound<'_, PyAny>) -> PyErr {
    let type_name = found
        .get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "?".into());
    if found.is_instance_of::<pyo3::types::PyString>() {
        PyTypeError::new_err(format!(
            "leankv {what}s are bytes, not str: encode the text first (e.g. {what}.encode())"
        ))
    } else {
        PyTypeError::new_err(format!(
            "leankv {what}s are bytes (bytes, bytearray, memoryview or another buffer), \
             not {type_name}"
        ))
    }
}
