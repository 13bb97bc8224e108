"""The mapping protocol of leankv.Tree and the bytes-like inputs it accepts."""

import array

import pytest

import leankv


def test_set_get_delete(tree):
    tree[b"k"] = b"v"
    assert tree[b"k"] == b"v"
    assert isinstance(tree[b"k"], bytes)
    tree[b"k"] = b"w"  # overwrite
    assert tree[b"k"] == b"w"
    del tree[b"k"]
    assert b"k" not in tree
    with pytest.raises(KeyError):
        tree[b"k"]


def test_missing_key_is_key_error_with_the_key(tree):
    with pytest.raises(KeyError) as info:
        tree[b"absent"]
    assert info.value.args == (b"absent",)
    with pytest.raises(KeyError):
        del tree[b"absent"]


def test_contains_len_get(tree):
    assert len(tree) == 0
    assert not tree
    for i in range(100):
        tree[b"%03d" % i] = b"x" * i
    assert len(tree) == 100
    assert tree
    assert b"042" in tree
    assert b"100" not in tree
    assert tree.get(b"042") == b"x" * 42
    assert tree.get(b"nope") is None
    assert tree.get(b"nope", b"default") == b"default"
    assert tree.get(b"nope", default=7) == 7
    del tree[b"000"]
    assert len(tree) == 99
    keys = [b"042", b"nope", bytearray(b"007"), b"000", memoryview(b"042")]
    assert tree.get_many(keys) == [b"x" * 42, None, b"x" * 7, None, b"x" * 42]
    assert tree.get_many(iter([])) == []
    with pytest.raises(TypeError):
        tree.get_many([b"042", "not bytes"])


def test_insert_and_remove_methods(tree):
    tree.insert(b"a", b"1")
    assert tree[b"a"] == b"1"
    assert tree.remove(b"a") is True
    assert tree.remove(b"a") is False


def test_empty_key_and_empty_value(tree):
    tree[b""] = b""
    assert tree[b""] == b""
    assert b"" in tree
    assert len(tree) == 1


def test_bytes_like_keys_and_values(tree):
    tree[bytearray(b"ba")] = bytearray(b"1")
    tree[memoryview(b"mv")] = memoryview(b"2")
    tree[array.array("B", b"ar")] = array.array("B", b"3")
    tree[memoryview(b"xxsliced")[2:]] = memoryview(b"--4--")[2:3]
    assert tree[b"ba"] == b"1"
    assert tree[bytearray(b"mv")] == b"2"
    assert tree[memoryview(b"ar")] == b"3"
    assert tree[b"sliced"] == b"4"
    assert bytearray(b"ba") in tree
    assert tree.get(memoryview(b"mv")) == b"2"


class BytesSubclass(bytes):
    pass


def test_bytes_subclass_is_accepted(tree):
    tree[BytesSubclass(b"k")] = BytesSubclass(b"v")
    assert tree[b"k"] == b"v"


@pytest.mark.parametrize("bad", ["text", 1, 1.5, None, object(), [1, 2]])
def test_non_bytes_keys_are_type_errors(tree, bad):
    with pytest.raises(TypeError):
        tree[bad] = b"v"
    with pytest.raises(TypeError):
        tree[bad]
    with pytest.raises(TypeError):
        bad in tree


def test_str_type_error_says_to_encode(tree):
    with pytest.raises(TypeError, match=r"bytes, not str.*encode"):
        tree["key"] = b"v"
    with pytest.raises(TypeError, match=r"values are bytes, not str"):
        tree[b"key"] = "value"
    with pytest.raises(TypeError, match="not str"):
        tree.get("key")
    with pytest.raises(TypeError, match="not str"):
        list(tree.range("a", "b"))


def test_mutating_a_bytearray_after_insert_does_not_change_the_value(tree):
    value = bytearray(b"before")
    tree[b"k"] = value
    value[:] = b"after!"
    assert tree[b"k"] == b"before"


def test_first_last_clear(tree):
    assert tree.first() is None and tree.last() is None
    for i in range(10):
        tree[bytes([i])] = bytes([i * 2])
    assert tree.first() == (b"\x00", b"\x00")
    assert tree.last() == (b"\x09", b"\x12")
    assert tree.clear() == 10
    assert len(tree) == 0


def test_compare_and_swap(tree):
    assert tree.compare_and_swap(b"lock", None, b"me") is True
    assert tree.compare_and_swap(b"lock", None, b"you") is False
    assert tree[b"lock"] == b"me"
    assert tree.compare_and_swap(b"lock", b"me", b"you") is True
    assert tree.compare_and_swap(b"lock", b"you", None) is True
    assert b"lock" not in tree


def test_trees_are_separate(db):
    a, b = db.tree("a"), db.tree("b")
    a[b"k"] = b"in a"
    assert b"k" not in b
    assert db.tree("a")[b"k"] == b"in a"  # a second handle to the same tree
    assert sorted(db.tree_names()) == ["a", "b"]


def test_names_and_reprs(db, tree):
    assert tree.name == "t"
    assert tree.db is db
    assert repr(tree) == "<leankv.Tree 't'>"
    assert repr(db).startswith("<leankv.Db ") and repr(db).endswith(" open>")
    assert type(db).__module__ == "leankv"
    assert leankv.MAX_KEY_SIZE == 1024 == db.max_key_size
    assert db.max_value_size == leankv.MAX_VALUE_SIZE == 2**32 - 1
