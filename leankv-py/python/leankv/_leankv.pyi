"""Type stubs of the native module ``leankv._leankv`` (re-exported by ``leankv``)."""

import os
import pathlib
import sys
from types import TracebackType
from typing import (
    Any,
    Iterable,
    Iterator,
    List,
    Literal,
    Optional,
    Tuple,
    TypeVar,
    Union,
    final,
    overload,
)

if sys.version_info >= (3, 12):
    from collections.abc import Buffer as _Buffer
else:
    from typing_extensions import Buffer as _Buffer

_BytesLike = Union[bytes, bytearray, memoryview, _Buffer]
"""What leankv accepts as a key or value: ``bytes`` or any object with the buffer
protocol. ``str`` is a ``TypeError``."""

_Durability = Literal["immediate", "eventual", "none"]

_T = TypeVar("_T")

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
]

MAX_KEY_SIZE: int
"""Longest key with the default 16 KiB pages (1,024 bytes; page size / 16)."""
MAX_VALUE_SIZE: int
"""Longest value with any page size (4 GiB - 1)."""
DEFAULT_PAGE_SIZE: int
"""Page size of a new database unless ``page_size`` says otherwise (16 KiB)."""
DEFAULT_POOL_SIZE: int
"""Buffer pool size :func:`open` uses unless ``pool_size`` says otherwise (64 MiB)."""

def open(
    path: Union[str, "os.PathLike[str]"],
    *,
    pool_size: int = ...,
    durability: _Durability = "immediate",
    page_size: Optional[int] = None,
    cooling_fraction: Optional[float] = None,
    direct_io: bool = True,
    prefault: bool = False,
    background_writer: bool = True,
    scan_prefetch: Optional[int] = None,
    write_ahead_log: bool = True,
    open_after_crash: bool = False,
    eventual_sync_delay: Optional[float] = None,
    checkpoint_every: Optional[int] = None,
    log_buffer_size: Optional[int] = None,
) -> Db:
    """Opens (creating if missing) the leankv database in directory ``path``.

    ``pool_size``: the buffer pool's memory in bytes (64 MiB by default). ``durability``:
    when a commit is durable: ``"immediate"`` (synced before it returns), ``"eventual"``
    (within ``eventual_sync_delay`` seconds, 0.01 by default) or ``"none"`` (at ``flush``,
    ``close`` and checkpoints). ``page_size``: for a new database, a power of two from 4 KiB
    to 64 KiB. The rest are the engine's ``leankv::Options``.

    Raises ``AlreadyOpenError`` if the directory is open elsewhere, ``InvalidOptionsError``
    for options that cannot work (a negative count among them), ``NotADatabaseError``,
    ``CorruptionError`` or ``IoError``.
    """

@final
class Db:
    """An open leankv database: a directory of named, ordered trees. A context manager
    that closes it on exit."""

    def tree(self, name: str) -> Tree:
        """The tree ``name``, created if missing."""
    def tree_names(self) -> list[str]:
        """Names of all trees, in byte order."""
    def drop_tree(self, name: str) -> bool:
        """Drops the tree ``name`` (keys, name and pages) atomically; whether it existed."""
    def write_batch(self, durability: Optional[_Durability] = None) -> WriteBatch:
        """A new, empty batch of changes applied atomically by its ``commit``."""
    def flush(self) -> None:
        """Makes every commit so far durable and writes a checkpoint."""
    def stats(self) -> dict[str, Any]:
        """The engine's counters and facts (``page_reads``, ``page_writes``, ``evictions``,
        ``pool_frames``, ``page_count``, ``free_pages``, ``io_mode``, ``log_syncs``,
        ``recovery``, ...)."""
    def check(self) -> dict[str, Any]:
        """Flushes and checks every tree on disk: ``{"ok", "trees", "pages", "entries",
        "problems", "spaces"}``; ``spaces`` holds one ``dict`` per tree (``name``, ``height``,
        ``leaf_pages``, ``inner_pages``, ``large_value_pages``, ``entries``, ``leaf_fill``)."""
    def close(self) -> None:
        """Writes everything and releases the directory. From the moment it is called every
        handle raises ``ClosedError``; it waits for the calls in flight to end."""
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
    @property
    def path(self) -> pathlib.Path:
        """The database directory."""
    @property
    def max_key_size(self) -> int: ...
    @property
    def max_value_size(self) -> int: ...
    def __enter__(self) -> Db: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
        /,
    ) -> Literal[False]: ...

@final
class Tree:
    """A named, ordered map of ``bytes`` keys to ``bytes`` values; every write is one atomic
    commit."""

    def __getitem__(self, key: _BytesLike, /) -> bytes:
        """The value of ``key``; ``KeyError`` if absent."""
    def __setitem__(self, key: _BytesLike, value: _BytesLike, /) -> None: ...
    def __delitem__(self, key: _BytesLike, /) -> None:
        """Removes ``key``; ``KeyError`` if absent."""
    def __contains__(self, key: _BytesLike, /) -> bool: ...
    def __len__(self) -> int:
        """The exact number of keys, in O(1)."""
    def __iter__(self) -> RangeIterator[bytes]:
        """The keys in ascending order."""
    @overload
    def get(self, key: _BytesLike) -> Optional[bytes]: ...
    @overload
    def get(self, key: _BytesLike, default: _T) -> Union[bytes, _T]: ...
    def get_many(self, keys: Iterable[_BytesLike]) -> List[Optional[bytes]]:
        """The values of ``keys`` in their order, ``None`` for each key absent; the pages not
        in memory are read together."""
    def insert(self, key: _BytesLike, value: _BytesLike) -> None:
        """``tree[key] = value``."""
    def remove(self, key: _BytesLike) -> bool:
        """Removes ``key``; whether it was there."""
    def range(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
    ) -> RangeIterator[Tuple[bytes, bytes]]:
        """``(key, value)`` pairs with ``start <= key < end`` in key order (descending with
        ``reverse=True``)."""
    def prefix(
        self, prefix: _BytesLike, reverse: bool = False
    ) -> RangeIterator[Tuple[bytes, bytes]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, in key order."""
    def items(self, reverse: bool = False) -> RangeIterator[Tuple[bytes, bytes]]: ...
    def keys(self, reverse: bool = False) -> RangeIterator[bytes]: ...
    def values(self, reverse: bool = False) -> RangeIterator[bytes]: ...
    def first(self) -> Optional[Tuple[bytes, bytes]]:
        """The pair with the smallest key, or ``None``."""
    def last(self) -> Optional[Tuple[bytes, bytes]]:
        """The pair with the largest key, or ``None``."""
    def compare_and_swap(
        self, key: _BytesLike, expected: Optional[_BytesLike], new: Optional[_BytesLike]
    ) -> bool:
        """Sets ``key`` to ``new`` (``None``: removes) if its value is ``expected``
        (``None``: absent), atomically; whether it did."""
    def clear(self) -> int:
        """Removes every key atomically; how many there were."""
    @property
    def name(self) -> str: ...
    @property
    def db(self) -> Db: ...

@final
class RangeIterator(Iterator[_T]):
    """An iterator over a key range, read ahead in batches without the GIL. Once the
    database is closed every step raises ``ClosedError`` (an ended one stays ended)."""

    def __iter__(self) -> RangeIterator[_T]: ...
    def __next__(self) -> _T: ...

@final
class WriteBatch:
    """Changes to trees of one database, applied atomically by :meth:`commit`; as a context
    manager it commits on a clean exit and discards on an exception (nothing if it was
    committed or discarded in the block)."""

    def insert(self, tree: Tree, key: _BytesLike, value: _BytesLike) -> None: ...
    def remove(self, tree: Tree, key: _BytesLike) -> None: ...
    def __getitem__(self, tree: Tree, /) -> BatchTree:
        """``batch[tree][key] = value`` and ``del batch[tree][key]``."""
    def commit(self) -> None: ...
    def discard(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def closed(self) -> bool:
        """Whether the batch was committed or discarded."""
    def __enter__(self) -> WriteBatch: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
        /,
    ) -> Literal[False]: ...

@final
class BatchTree:
    """``batch[tree]``: a write-only view of a batch's changes to one tree."""

    def __setitem__(self, key: _BytesLike, value: _BytesLike, /) -> None: ...
    def __delitem__(self, key: _BytesLike, /) -> None: ...
