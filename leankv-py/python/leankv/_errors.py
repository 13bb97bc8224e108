"""The exceptions leankv raises: one class per kind of failure, all under :class:`Error`.

Every variant of the Rust engine's ``leankv::Error`` has its own class here; the native
module looks these classes up by name, so this module must not import the native one.
Failures that are also a familiar Python category subclass it as well: storage I/O errors
are :class:`OSError` (with ``errno`` set), inputs that are too long and options that
cannot work are :class:`ValueError`.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "IoError",
    "CorruptionError",
    "NotADatabaseError",
    "NotClosedCleanlyError",
    "AlreadyOpenError",
    "KeyTooLargeError",
    "ValueTooLargeError",
    "InvalidOptionsError",
    "ClosedError",
    "TreeDroppedError",
    "PoolExhaustedError",
]


class Error(Exception):
    """Base class of every error leankv raises (except ``TypeError`` for arguments of the
    wrong type and ``KeyError`` for absent keys, as a ``dict`` would)."""


class IoError(Error, OSError):
    """The operating system reported an I/O error (a full device is ``errno.ENOSPC``).

    ``errno`` and ``strerror`` are set as for any :class:`OSError` when the system gave an
    error number; ``context`` says what leankv was doing."""

    context: str


class CorruptionError(Error):
    """A page read from disk failed a check (checksum, page id, page type or node structure).

    ``page_id`` is the page that failed, ``reason`` which check. Restore from a backup;
    :meth:`leankv.Db.check` lists everything that is damaged."""

    page_id: int
    reason: str


class NotADatabaseError(Error):
    """The directory holds a file that is not a leankv database, or one of another format
    version. ``path`` is the file, ``reason`` why it was rejected."""

    path: str
    reason: str


class NotClosedCleanlyError(Error):
    """A database opened without its write-ahead log (``write_ahead_log=False``) was not
    closed cleanly by its last process. ``open(..., open_after_crash=True)`` opens it anyway
    to salvage what is there; run :meth:`leankv.Db.check` before trusting it."""

    path: str


class AlreadyOpenError(Error, OSError):
    """Another process, or another open :class:`leankv.Db` in this one, holds the database
    directory (its lock file). ``path`` is the directory."""

    path: str


class KeyTooLargeError(Error, ValueError):
    """The key is longer than this database allows (``Db.max_key_size``: page size / 16,
    1,024 bytes with the default 16 KiB pages). ``size`` is the key's length, ``limit``
    the longest allowed."""

    size: int
    limit: int


class ValueTooLargeError(Error, ValueError):
    """The value is longer than this database allows (4 GiB - 1). ``size`` is the value's
    length, ``limit`` the longest allowed."""

    size: int
    limit: int


class InvalidOptionsError(Error, ValueError):
    """The options given to :func:`leankv.open` cannot work (the message says which and
    why), or a write batch holds a tree of another database."""


class ClosedError(Error):
    """The database was closed (:meth:`leankv.Db.close`) and this handle outlived it, or a
    write batch was used after it was committed or discarded."""


class TreeDroppedError(Error):
    """The tree was dropped (:meth:`leankv.Db.drop_tree`) and this handle outlived it.
    ``db.tree(name)`` creates a new, empty tree of the same name."""


class PoolExhaustedError(Error):
    """No buffer frame could be freed: every frame is pinned by structure changes in flight.
    The pool is too small for this many concurrent threads (``pool_size``). ``frames`` is the
    number of frames in the pool."""

    frames: int


# Shown and pickled as leankv.<name>, where the package exports them.
for _name in __all__:
    globals()[_name].__module__ = "leankv"
del _name
