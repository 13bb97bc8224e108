"""leankv: an embedded, ordered key-value store (Python bindings of the Rust engine).

>>> import leankv, tempfile
>>> with leankv.open(tempfile.mkdtemp(), pool_size=64 << 20) as db:
...     users = db.tree("users")
...     users[b"ada"] = b"lovelace"
...     users[b"ada"]
b'lovelace'

Keys and values are ``bytes`` (``bytearray``, ``memoryview`` and other buffers are accepted
as input). Every method runs the engine with the GIL released, so threads can share a
database. Errors are subclasses of :class:`leankv.Error`.
"""

from __future__ import annotations

from . import _errors
from ._errors import (
    AlreadyOpenError,
    ClosedError,
    CorruptionError,
    Error,
    InvalidOptionsError,
    IoError,
    KeyTooLargeError,
    NotADatabaseError,
    NotClosedCleanlyError,
    PoolExhaustedError,
    TreeDroppedError,
    ValueTooLargeError,
)
from ._leankv import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POOL_SIZE,
    MAX_KEY_SIZE,
    MAX_VALUE_SIZE,
    BatchTree,
    Db,
    RangeIterator,
    Tree,
    WriteBatch,
    open,
)

__version__ = "0.1.0"

__all__ = [
    "open",
    "Db",
    "Tree",
    "RangeIterator",
    "WriteBatch",
    "BatchTree",
    "MAX_KEY_SIZE",
    "MAX_VALUE_SIZE",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_POOL_SIZE",
    *_errors.__all__,
]
