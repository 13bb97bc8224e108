"""Every leankv::Error variant maps to its own leankv.Error subclass."""

import errno
import os
import pickle
import subprocess
import sys

import pytest

import leankv
from conftest import key

ERROR_CLASSES = [
    leankv.IoError,
    leankv.CorruptionError,
    leankv.NotADatabaseError,
    leankv.NotClosedCleanlyError,
    leankv.AlreadyOpenError,
    leankv.KeyTooLargeError,
    leankv.ValueTooLargeError,
    leankv.InvalidOptionsError,
    leankv.ClosedError,
    leankv.TreeDroppedError,
    leankv.PoolExhaustedError,
]


def test_hierarchy():
    for cls in ERROR_CLASSES:
        assert issubclass(cls, leankv.Error)
        assert cls.__module__ == "leankv"
        assert cls.__doc__
    assert issubclass(leankv.Error, Exception)
    assert issubclass(leankv.IoError, OSError)
    assert issubclass(leankv.AlreadyOpenError, OSError)
    for cls in (leankv.KeyTooLargeError, leankv.ValueTooLargeError, leankv.InvalidOptionsError):
        assert issubclass(cls, ValueError)


def test_key_too_large(tree, db):
    limit = db.max_key_size
    tree[b"k" * limit] = b"at the limit"
    with pytest.raises(leankv.KeyTooLargeError) as info:
        tree[b"k" * (limit + 1)] = b"v"
    assert info.value.size == limit + 1
    assert info.value.limit == limit
    assert "exceeds the limit" in str(info.value)
    # Reading a key that cannot exist is a plain miss, as for a dict.
    with pytest.raises(KeyError):
        tree[b"k" * (limit + 1)]
    assert tree.get(b"k" * (limit + 1)) is None
    with pytest.raises(leankv.KeyTooLargeError):
        db.tree("n" * (limit + 1))


def test_errors_pickle_with_their_attributes(tree):
    with pytest.raises(leankv.KeyTooLargeError) as info:
        tree[b"k" * 5000] = b"v"
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is leankv.KeyTooLargeError
    assert (copy.size, copy.limit, str(copy)) == (5000, 1024, str(info.value))


def test_already_open(tmp_path):
    path = tmp_path / "db"
    with leankv.open(path, pool_size=16 << 20):
        with pytest.raises(leankv.AlreadyOpenError) as info:
            leankv.open(path, pool_size=16 << 20)
        assert info.value.path == str(path)
        assert isinstance(info.value, OSError)
    # Released by close.
    leankv.open(path, pool_size=16 << 20).close()


def test_already_open_in_another_process(tmp_path):
    path = tmp_path / "db"
    with leankv.open(path, pool_size=16 << 20):
        code = (
            "import leankv, sys\n"
            "try:\n"
            f"    leankv.open({str(path)!r}, pool_size=16 << 20)\n"
            "except leankv.AlreadyOpenError:\n"
            "    sys.exit(3)\n"
        )
        assert subprocess.run([sys.executable, "-c", code]).returncode == 3


def test_invalid_options(tmp_path):
    with pytest.raises(leankv.InvalidOptionsError, match="power of two"):
        leankv.open(tmp_path / "a", page_size=5000)
    with pytest.raises(leankv.InvalidOptionsError, match="at least"):
        leankv.open(tmp_path / "b", pool_size=1 << 16)
    with pytest.raises(leankv.InvalidOptionsError, match="cooling"):
        leankv.open(tmp_path / "c", cooling_fraction=0.9)
    with pytest.raises(ValueError, match="durability"):
        leankv.open(tmp_path / "d", durability="sometimes")
    with pytest.raises(ValueError):
        leankv.open(tmp_path / "e", eventual_sync_delay=-1.0)
    with pytest.raises(TypeError):
        leankv.open(tmp_path / "f", pool_size="big")
    with pytest.raises(ValueError, match="log buffer"):
        leankv.open(tmp_path / "g", log_buffer_size=1 << 20)


@pytest.mark.parametrize("option", ["pool_size", "page_size", "scan_prefetch", "checkpoint_every", "log_buffer_size"])
def test_negative_or_huge_counts_are_invalid_options(tmp_path, option):
    # Not the OverflowError of the int conversion: a ValueError that names the option.
    with pytest.raises(leankv.InvalidOptionsError, match=f"{option} must be >= 0, not -1"):
        leankv.open(tmp_path / "db", **{option: -1})
    with pytest.raises(ValueError, match=f"{option} is too large, not {2**64}"):
        leankv.open(tmp_path / "db", **{option: 2**64})
    with pytest.raises(TypeError):
        leankv.open(tmp_path / "db", **{option: 1.5})
    assert not (tmp_path / "db").exists()  # refused before anything was created


def test_io_error_is_an_os_error_with_errno(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_bytes(b"")
    with pytest.raises(leankv.IoError) as info:
        leankv.open(not_a_dir / "db")
    assert isinstance(info.value, OSError)
    assert info.value.errno == errno.ENOTDIR
    assert info.value.context == "creating the database directory"
    assert "creating the database directory" in str(info.value)


def corrupt_pages(path, first_page, page_size=16384):
    pages = path / "leankv.pages"
    size = pages.stat().st_size
    with open(pages, "r+b") as f:
        for offset in range(first_page * page_size, size, page_size):
            f.seek(offset + 100)
            f.write(os.urandom(64))


def test_corrupt_page_file(tmp_path):
    path = tmp_path / "db"
    with leankv.open(path, pool_size=16 << 20, durability="none") as db:
        tree = db.tree("t")
        with db.write_batch() as batch:
            for i in range(20_000):
                batch.insert(tree, key(i), b"v" * 100)
    corrupt_pages(path, first_page=1)  # everything but the superblock
    with pytest.raises(leankv.CorruptionError) as info:
        with leankv.open(path, pool_size=16 << 20) as db:
            sum(1 for _ in db.tree("t").items())
    assert info.value.page_id >= 1
    assert "checksum" in info.value.reason


def test_check_reports_damaged_pages(tmp_path):
    path = tmp_path / "db"
    with leankv.open(path, pool_size=16 << 20, durability="none") as db:
        tree = db.tree("t")
        with db.write_batch() as batch:
            for i in range(20_000):
                batch.insert(tree, key(i), b"v" * 100)
        root_pages = 3  # superblock, catalog root, "t" root
    corrupt_pages(path, first_page=root_pages)
    with leankv.open(path, pool_size=16 << 20) as db:
        report = db.check()
        assert report["ok"] is False
        assert any("checksum" in problem for problem in report["problems"])


def test_not_a_database(tmp_path):
    path = tmp_path / "db"
    path.mkdir()
    (path / "leankv.pages").write_bytes(b"hello, world\n" * 5000)
    with pytest.raises(leankv.NotADatabaseError) as info:
        leankv.open(path)
    assert info.value.path.endswith("leankv.pages")
    assert info.value.reason


def test_not_closed_cleanly_without_the_log(tmp_path):
    path = tmp_path / "db"
    code = (
        "import leankv, os\n"
        f"db = leankv.open({str(path)!r}, pool_size=16 << 20, write_ahead_log=False)\n"
        "db.tree('t')[b'k'] = b'v'\n"
        "db.flush()\n"
        "os._exit(0)  # no close: a crash\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(leankv.NotClosedCleanlyError) as info:
        leankv.open(path, pool_size=16 << 20, write_ahead_log=False)
    assert info.value.path == str(path)
    with leankv.open(
        path, pool_size=16 << 20, write_ahead_log=False, open_after_crash=True
    ) as db:
        assert db.tree("t")[b"k"] == b"v"
        assert db.check()["ok"]


def test_crash_with_the_log_is_recovered(tmp_path):
    path = tmp_path / "db"
    code = (
        "import leankv, os\n"
        f"db = leankv.open({str(path)!r}, pool_size=16 << 20, durability='immediate')\n"
        "t = db.tree('t')\n"
        "for i in range(1000):\n"
        "    t[b'%04d' % i] = b'v'\n"
        "os._exit(0)  # no close: a crash\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    with leankv.open(path, pool_size=16 << 20) as db:
        assert len(db.tree("t")) == 1000
        assert db.stats()["recovery"]["records"] > 0
        assert db.check()["ok"]


def test_tree_dropped(db):
    tree = db.tree("gone")
    db.drop_tree("gone")
    with pytest.raises(leankv.TreeDroppedError):
        tree[b"k"] = b"v"
    with pytest.raises(leankv.TreeDroppedError):
        len(tree)


def test_closed(db, tree):
    db.close()
    with pytest.raises(leankv.ClosedError) as info:
        tree[b"k"]
    assert str(info.value) == "the database is closed"
    assert isinstance(info.value, leankv.Error)
