"""range, prefix, reverse, items/keys/values and iterator behaviour."""

import pytest

import leankv
from conftest import key


@pytest.fixture
def numbers(tree):
    with tree.db.write_batch() as batch:
        for i in range(0, 5000, 2):  # even numbers only
            batch.insert(tree, key(i), b"v%d" % i)
    return tree


def test_full_iteration_in_order(numbers):
    keys = list(numbers)
    assert keys == [key(i) for i in range(0, 5000, 2)]
    assert list(numbers.keys()) == keys
    assert list(numbers.values()) == [b"v%d" % i for i in range(0, 5000, 2)]
    assert list(numbers.items()) == [(key(i), b"v%d" % i) for i in range(0, 5000, 2)]
    assert list(numbers.keys(reverse=True)) == keys[::-1]
    assert list(numbers.items(reverse=True))[0] == (key(4998), b"v4998")


def test_range_is_start_inclusive_end_exclusive(numbers):
    got = [k for k, _ in numbers.range(key(10), key(20))]
    assert got == [key(i) for i in (10, 12, 14, 16, 18)]
    got = [k for k, _ in numbers.range(key(11), key(21))]
    assert got == [key(i) for i in (12, 14, 16, 18, 20)]


def test_open_ended_ranges(numbers):
    assert [k for k, _ in numbers.range(end=key(6))] == [key(0), key(2), key(4)]
    assert [k for k, _ in numbers.range(start=key(4994))] == [key(4994), key(4996), key(4998)]
    assert len(list(numbers.range())) == 2500


def test_reverse_ranges(numbers):
    got = [k for k, _ in numbers.range(key(10), key(20), reverse=True)]
    assert got == [key(i) for i in (18, 16, 14, 12, 10)]
    got = [k for k, _ in numbers.range(reverse=True)]
    assert got == [key(i) for i in range(4998, -1, -2)]


def test_empty_and_inverted_ranges(numbers):
    assert list(numbers.range(key(11), key(12))) == []
    assert list(numbers.range(key(20), key(10))) == []
    assert list(numbers.range(key(10), key(10))) == []


def test_prefix(tree):
    for k in [b"a", b"ab", b"abc", b"abd", b"ac", b"b", b"ab\xff", b"ab\xff\xff"]:
        tree[k] = k.upper()
    assert [k for k, _ in tree.prefix(b"ab")] == [b"ab", b"abc", b"abd", b"ab\xff", b"ab\xff\xff"]
    assert [k for k, _ in tree.prefix(b"ab", reverse=True)][0] == b"ab\xff\xff"
    assert [k for k, _ in tree.prefix(b"ab\xff")] == [b"ab\xff", b"ab\xff\xff"]
    assert list(tree.prefix(b"zz")) == []
    assert len(list(tree.prefix(b""))) == 8
    assert dict(tree.prefix(bytearray(b"abc"))) == {b"abc": b"ABC"}


def test_iterators_are_lazy_and_resumable(numbers):
    it = numbers.keys()
    assert iter(it) is it
    assert next(it) == key(0)
    assert next(it) == key(2)
    rest = list(it)
    assert len(rest) == 2498
    with pytest.raises(StopIteration):
        next(it)


def test_iterator_keeps_the_database_open(tmp_path):
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    tree = db.tree("t")
    tree[b"a"] = b"1"
    it = tree.items()
    del db, tree  # the iterator holds the database
    assert list(it) == [(b"a", b"1")]


def test_iterator_after_close_raises(tmp_path):
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    tree = db.tree("t")
    for i in range(3000):
        tree.insert(key(i), b"x" * 100)
    it = tree.keys()
    next(it)
    db.close()
    with pytest.raises(leankv.ClosedError):
        for _ in it:
            pass


def test_no_read_ahead_item_is_yielded_after_close(tmp_path):
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    tree = db.tree("t")
    with db.write_batch() as batch:
        for i in range(100):
            batch.insert(tree, key(i), b"v")
    started = tree.items()
    assert next(started) == (key(0), b"v")  # the next 15 are read ahead
    keys, unstarted, ended = tree.keys(reverse=True), tree.values(), tree.prefix(b"x")
    assert next(keys) == key(99)
    assert list(ended) == []
    db.close()
    for it in (started, keys, unstarted):
        for _ in range(3):  # and it stays so
            with pytest.raises(leankv.ClosedError):
                next(it)
    with pytest.raises(StopIteration):  # an iterator that had ended stays ended
        next(ended)
    with pytest.raises(leankv.ClosedError):
        next(tree.items())


def test_writes_during_iteration_never_repeat_keys(tree):
    for i in range(2000):
        tree[key(i)] = b"x"
    seen = []
    for k, _ in tree.items():
        seen.append(k)
        if len(k) == 8:
            tree[k + b"!"] = b"y"  # lands just after k: seen or not, never twice
            del tree[key(1999 - int.from_bytes(k, "big"))]  # ahead or behind
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen)
