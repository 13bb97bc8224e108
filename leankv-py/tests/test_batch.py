"""Write batches: atomic commit, discard on exception, misuse."""

import pytest

import leankv


def test_with_block_commits_on_clean_exit(db):
    accounts, log = db.tree("accounts"), db.tree("log")
    accounts[b"alice"] = b"100"
    with db.write_batch() as batch:
        batch.insert(accounts, b"alice", b"70")
        batch.insert(accounts, b"bob", b"30")
        batch[log][b"0001"] = b"alice -> bob: 30"
        batch.remove(accounts, b"carol")
        assert len(batch) == 4
        # Nothing is visible before the commit.
        assert accounts[b"alice"] == b"100"
        assert b"bob" not in accounts
    assert batch.closed
    assert accounts[b"alice"] == b"70"
    assert accounts[b"bob"] == b"30"
    assert log[b"0001"] == b"alice -> bob: 30"


def test_exception_in_block_discards(db):
    tree = db.tree("t")
    tree[b"keep"] = b"1"

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with db.write_batch() as batch:
            batch.insert(tree, b"new", b"x")
            batch.remove(tree, b"keep")
            raise Boom()
    assert batch.closed
    assert b"new" not in tree
    assert tree[b"keep"] == b"1"


def test_explicit_commit_and_discard(db):
    tree = db.tree("t")
    batch = db.write_batch()
    batch.insert(tree, b"a", b"1")
    batch[tree][b"b"] = b"2"
    del batch[tree][b"a"]
    batch.commit()
    assert list(tree.items()) == [(b"b", b"2")]
    with pytest.raises(leankv.ClosedError):
        batch.commit()
    with pytest.raises(leankv.ClosedError):
        batch.insert(tree, b"c", b"3")

    other = db.write_batch()
    other.insert(tree, b"c", b"3")
    other.discard()
    other.discard()  # idempotent
    assert b"c" not in tree
    with pytest.raises(leankv.ClosedError):
        len(other)


def test_later_change_to_same_key_wins(db):
    tree = db.tree("t")
    with db.write_batch() as batch:
        batch.insert(tree, b"k", b"1")
        batch.insert(tree, b"k", b"2")
        batch.remove(tree, b"j")
        batch.insert(tree, b"j", b"3")
    assert tree[b"k"] == b"2" and tree[b"j"] == b"3"


def test_empty_batch_commits(db):
    with db.write_batch():
        pass


def test_batch_with_many_changes_and_durability_override(db):
    tree = db.tree("t")
    with db.write_batch(durability="none") as batch:
        for i in range(10_000):
            batch.insert(tree, i.to_bytes(4, "big"), b"v" * 50)
    assert len(tree) == 10_000
    with pytest.raises(ValueError):
        db.write_batch(durability="sometimes")


def test_failing_batch_changes_nothing(db):
    tree = db.tree("t")
    tree[b"a"] = b"old"
    batch = db.write_batch()
    batch.insert(tree, b"a", b"new")
    batch.insert(tree, b"k" * 2000, b"too long a key")
    with pytest.raises(leankv.KeyTooLargeError):
        batch.commit()
    assert tree[b"a"] == b"old"


def test_tree_of_another_database_is_refused(db, tmp_path):
    with leankv.open(tmp_path / "other", pool_size=16 << 20) as other:
        foreign = other.tree("t")
        batch = db.write_batch()
        with pytest.raises(leankv.InvalidOptionsError):
            batch.insert(foreign, b"k", b"v")
        with pytest.raises(leankv.InvalidOptionsError):
            batch[foreign]


def test_batch_type_errors(db):
    tree = db.tree("t")
    batch = db.write_batch()
    with pytest.raises(TypeError):
        batch.insert(tree, "k", b"v")
    with pytest.raises(TypeError):
        batch.insert("not a tree", b"k", b"v")


def test_commit_after_close_raises(db):
    tree = db.tree("t")
    batch = db.write_batch()
    batch.insert(tree, b"k", b"v")
    db.close()
    with pytest.raises(leankv.ClosedError):
        batch.insert(tree, b"k2", b"v")
    with pytest.raises(leankv.ClosedError):
        batch[tree][b"k2"] = b"v"
    with pytest.raises(leankv.ClosedError):
        batch.commit()
    with pytest.raises(leankv.ClosedError):
        db.write_batch()


def test_commit_inside_the_with_block_is_not_repeated(db):
    tree = db.tree("t")
    with db.write_batch() as batch:
        batch.insert(tree, b"k", b"1")
        batch.commit()
        assert tree[b"k"] == b"1"
        tree[b"k"] = b"2"  # a second commit of the batch at the end would undo this
    # The end of the block did nothing: no ClosedError (which would invite a retry).
    assert batch.closed
    assert tree[b"k"] == b"2"


def test_discard_inside_the_with_block(db):
    tree = db.tree("t")
    with db.write_batch() as batch:
        batch.insert(tree, b"k", b"1")
        batch.discard()
    assert batch.closed
    assert b"k" not in tree


def test_failed_commit_inside_the_with_block_is_not_retried(db):
    tree = db.tree("t")
    with db.write_batch() as batch:
        batch.insert(tree, b"a", b"1")
        batch.insert(tree, b"k" * 2000, b"too long a key")
        with pytest.raises(leankv.KeyTooLargeError):
            batch.commit()
    assert b"a" not in tree


def test_exception_after_a_commit_inside_the_block_keeps_the_commit(db):
    tree = db.tree("t")
    with pytest.raises(ZeroDivisionError):
        with db.write_batch() as batch:
            batch.insert(tree, b"k", b"1")
            batch.commit()
            1 / 0
    assert tree[b"k"] == b"1"
