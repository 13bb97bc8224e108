"""Reopening, large values, closing, dropping trees, stats and check."""

import os

import pytest

import leankv
from conftest import key


def test_reopen_keeps_everything(tmp_path):
    path = tmp_path / "db"
    with leankv.open(path, pool_size=16 << 20) as db:
        a, b = db.tree("a"), db.tree("b")
        for i in range(3000):
            a[key(i)] = b"a%d" % i
        b[b"only"] = b"one"
        del a[key(7)]
    assert db.closed
    with leankv.open(str(path), pool_size=16 << 20) as db:
        a = db.tree("a")
        assert len(a) == 2999
        assert a[key(2999)] == b"a2999"
        assert key(7) not in a
        assert dict(db.tree("b").items()) == {b"only": b"one"}
        assert db.tree_names() == ["a", "b"]


def test_reopen_with_a_small_pool_reads_from_disk(tmp_path):
    path = tmp_path / "db"
    with leankv.open(path, durability="none", pool_size=16 << 20) as db:
        tree = db.tree("t")
        with db.write_batch() as batch:
            for i in range(50_000):
                batch.insert(tree, key(i), os.urandom(8) + b"x" * 92)
    with leankv.open(path, pool_size=1 << 20) as db:  # 60 frames for ~400 pages
        tree = db.tree("t")
        assert sum(1 for _ in tree.keys()) == 50_000
        assert all(len(tree[key(i)]) == 100 for i in range(0, 50_000, 97))
        assert db.stats()["page_reads"] > 0


def test_large_values(tmp_path):
    path = tmp_path / "db"
    big = os.urandom(5 << 20)  # 5 MiB, far beyond a page: stored in pages of its own
    with leankv.open(path, pool_size=16 << 20) as db:
        tree = db.tree("files")
        tree[b"big"] = big
        tree[b"small"] = b"s"
        assert tree[b"big"] == big
        assert dict(tree.items())[b"big"] == big
        assert list(tree.values(reverse=True))[1] == big
        assert db.stats()["large_value_bytes_written"] >= len(big)
        tree[b"big2"] = memoryview(big)[: 3 << 20]
    with leankv.open(path, pool_size=16 << 20) as db:
        tree = db.tree("files")
        assert tree[b"big"] == big
        assert tree[b"big2"] == big[: 3 << 20]
        del tree[b"big"]
        assert b"big" not in tree
        assert db.check()["ok"]


def test_close_is_idempotent_and_handles_raise_after_it(tmp_path):
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    tree = db.tree("t")
    tree[b"k"] = b"v"
    batch = db.write_batch()
    batch.insert(tree, b"b", b"v")
    db.close()
    db.close()
    assert db.closed
    assert repr(db).endswith(" closed>")
    for use in (
        lambda: batch.commit(),
        lambda: db.write_batch(),
        lambda: tree.first(),
        lambda: tree.remove(b"k"),
        lambda: tree.compare_and_swap(b"k", b"v", b"w"),
        lambda: tree.clear(),
        lambda: db.tree_names(),
        lambda: db.drop_tree("t"),
        lambda: db.max_key_size,
        lambda: tree[b"k"],
        lambda: tree.__setitem__(b"k", b"v"),
        lambda: len(tree),
        lambda: b"k" in tree,
        lambda: list(tree.items()),
        lambda: db.tree("t"),
        lambda: db.flush(),
        lambda: db.stats(),
        lambda: db.check(),
    ):
        with pytest.raises(leankv.ClosedError, match="closed"):
            use()


def test_context_manager_closes_even_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        with leankv.open(tmp_path / "db", pool_size=16 << 20) as db:
            db.tree("t")[b"k"] = b"v"
            raise RuntimeError()
    assert db.closed
    with leankv.open(tmp_path / "db", pool_size=16 << 20) as db:
        assert db.tree("t")[b"k"] == b"v"


def test_tree_handle_keeps_the_database_open(tmp_path):
    tree = leankv.open(tmp_path / "db", pool_size=16 << 20).tree("t")
    tree[b"k"] = b"v"
    assert tree[b"k"] == b"v"
    tree.db.close()


def test_dropping_the_last_reference_closes_the_database(tmp_path):
    path = tmp_path / "db"
    db = leankv.open(path, pool_size=16 << 20)
    tree = db.tree("t")
    tree[b"k"] = b"v"
    it = tree.items()
    next(tree.keys())  # an iterator dropped before its end
    batch = db.write_batch()
    batch.insert(tree, b"abandoned", b"x")  # neither committed nor discarded
    del db, tree, batch
    next(it)
    del it  # the last reference: the database closes here
    with leankv.open(path, pool_size=16 << 20) as db:  # the directory was released
        tree = db.tree("t")
        assert dict(tree.items()) == {b"k": b"v"}


def test_drop_tree(db):
    tree = db.tree("scratch")
    tree[b"k"] = b"v"
    assert db.drop_tree("scratch") is True
    assert db.drop_tree("scratch") is False
    with pytest.raises(leankv.TreeDroppedError):
        tree[b"k"]
    assert len(db.tree("scratch")) == 0


def test_flush_stats_and_check(db):
    tree = db.tree("t")
    for i in range(500):
        tree[key(i)] = b"v"
    db.flush()
    stats = db.stats()
    for name in (
        "page_reads", "page_writes", "background_writes", "evictions", "unswizzles",
        "cooling_hits", "restarts", "pessimistic_fallbacks", "read_waits", "prefetch_reads",
        "scan_cooled", "large_value_bytes_written", "large_value_bytes_read", "io_mode",
        "page_size", "pool_frames", "frames_in_use", "page_count", "free_pages",
        "format_version", "log_bytes_written",
        "log_syncs", "log_padding_bytes", "trees_counted_by_scan", "recovery",
    ):
        assert name in stats, name
    assert stats["page_size"] == leankv.DEFAULT_PAGE_SIZE
    assert stats["io_mode"] in ("direct", "buffered")
    assert stats["log_bytes_written"] > 0
    assert set(stats["recovery"]) == {
        "log_bytes", "records", "pages", "pages_written_early", "batches_rolled_back",
        "range_removals_finished", "seconds",
    }
    report = db.check()
    assert report["ok"] is True
    assert report["problems"] == []
    assert report["trees"] == 2  # "t" and the catalog
    assert report["entries"] >= 500
    spaces = {space["name"]: space for space in report["spaces"]}
    assert set(spaces) == {"<catalog>", "t"}
    assert spaces["t"]["entries"] == report["entries"] - 1  # the catalog holds "t"
    assert spaces["t"]["leaf_pages"] >= 1 and spaces["t"]["height"] >= 1
    assert 0.0 < spaces["t"]["leaf_fill"] <= 1.0


@pytest.mark.parametrize("durability", ["immediate", "eventual", "none"])
def test_durability_levels_and_options(tmp_path, durability):
    with leankv.open(
        tmp_path / "db",
        pool_size=8 << 20,
        durability=durability,
        page_size=4096,
        cooling_fraction=0.2,
        direct_io=False,
        background_writer=False,
        scan_prefetch=4,
        eventual_sync_delay=0.005,
        checkpoint_every=8 << 20,
        log_buffer_size=4 << 20,
    ) as db:
        tree = db.tree("t")
        tree[b"k"] = b"v"
        assert db.stats()["page_size"] == 4096
        assert db.max_key_size == 256
    with leankv.open(tmp_path / "db", pool_size=8 << 20) as db:
        assert db.tree("t")[b"k"] == b"v"
        assert db.stats()["page_size"] == 4096  # kept from creation
