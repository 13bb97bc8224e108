"""Threads: the engine runs without the GIL, so Python threads share databases freely.
(Correctness only; bench/lookups.py measures.)"""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import leankv
from conftest import key

N = 20_000


@pytest.fixture
def loaded(db):
    tree = db.tree("t")
    with db.write_batch(durability="none") as batch:
        for i in range(N):
            batch.insert(tree, key(i), b"value-%d" % i)
    return tree


def test_parallel_reads(loaded):
    def read(worker):
        wrong = 0
        for i in range(worker, N, 4):
            if loaded[key(i)] != b"value-%d" % i:
                wrong += 1
        misses = sum(loaded.get(key(N + i)) is not None for i in range(1000))
        return wrong + misses

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(read, range(4))) == [0, 0, 0, 0]


def test_parallel_scans(loaded):
    def scan(reverse):
        return [k for k, _ in loaded.range(key(100), key(N - 100), reverse=reverse)]

    expected = [key(i) for i in range(100, N - 100)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(scan, [False, True, False, True]))
    assert results[0] == results[2] == expected
    assert results[1] == results[3] == expected[::-1]


def test_parallel_writers_and_readers(db):
    tree = db.tree("t")

    def write(worker):
        for i in range(2000):
            tree[key(worker * 1_000_000 + i)] = b"w%d" % worker
        return worker

    def read(_):
        for _ in range(5):
            for k, v in tree.items():
                assert v == b"w%d" % (int.from_bytes(k, "big") // 1_000_000)
        return True

    with ThreadPoolExecutor(max_workers=4) as pool:
        writers = [pool.submit(write, w) for w in range(3)]
        reader = pool.submit(read, None)
        assert sorted(f.result() for f in writers) == [0, 1, 2]
        assert reader.result()
    assert len(tree) == 6000


def test_one_iterator_shared_by_threads_yields_each_key_once(loaded):
    it = loaded.keys()

    def drain(_):
        return list(it)

    with ThreadPoolExecutor(max_workers=4) as pool:
        parts = list(pool.map(drain, range(4)))
    keys = [k for part in parts for k in part]
    assert sorted(keys) == [key(i) for i in range(N)]
    for part in parts:
        assert part == sorted(part)


def test_batches_from_many_threads(db):
    tree = db.tree("t")
    batch = db.write_batch()

    def add(worker):
        for i in range(1000):
            batch.insert(tree, key(worker * 1000 + i), b"v")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(add, range(4)))
    assert len(batch) == 4000
    batch.commit()
    assert len(tree) == 4000


def test_close_while_threads_read(tmp_path):
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    tree = db.tree("t")
    for i in range(1000):
        tree[key(i)] = b"v"
    started = threading.Barrier(5)

    def read(_):
        started.wait()
        outcomes = set()
        for _ in range(200):
            for i in range(0, 1000, 50):
                try:
                    tree[key(i)]
                    outcomes.add("ok")
                except leankv.ClosedError:
                    outcomes.add("closed")
        return outcomes

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(read, w) for w in range(4)]
        started.wait()
        db.close()
        results = [f.result() for f in futures]
    assert all(outcome <= {"ok", "closed"} for outcome in results)
    with pytest.raises(leankv.ClosedError):
        tree[key(0)]
