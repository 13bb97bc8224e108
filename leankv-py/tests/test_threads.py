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
    """While the database is closed, two threads read keys, one iterates, one calls the
    database's own methods (flush, check, stats, write_batch, repr, len) and a fifth holds
    an iterator with items read ahead: each thread sees ClosedError, no operation begun after
    close() returned succeeds (a read-ahead item included), and every use of the handles
    after that raises ClosedError. Bounded by counts of operations: a thread that never sees
    ClosedError gives up after LIMIT of them."""
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    tree = db.tree("t")
    with db.write_batch() as batch:
        for i in range(1000):
            batch.insert(tree, key(i), b"v")
    WARMUP = 200  # operations each thread has made before the close
    LIMIT = 1_000_000
    warmed = [threading.Event() for _ in range(5)]
    closed = threading.Event()  # set once db.close() returned

    def uses_after_close():
        uses = {
            "tree[k]": lambda: tree[key(1)],
            "tree.get": lambda: tree.get(key(1)),
            "tree[k] = v": lambda: tree.__setitem__(key(1), b"w"),
            "k in tree": lambda: key(1) in tree,
            "len(tree)": lambda: len(tree),
            "tree.first": tree.first,
            "next(tree.items())": lambda: next(tree.items()),
            "db.write_batch": db.write_batch,
            "db.tree": lambda: db.tree("t"),
        }
        problems = []
        for name, use in uses.items():
            try:
                use()
                problems.append(f"{name} did not raise ClosedError")
            except leankv.ClosedError:
                pass
        return problems

    def point_reads(worker):
        for done in range(LIMIT):
            after_close = closed.is_set()  # read before the operation begins
            try:
                tree[key(done % 1000)]
            except leankv.ClosedError:
                return done, uses_after_close()
            if after_close:
                return done, ["a read begun after close() returned succeeded"]
            if done + 1 == WARMUP:
                warmed[worker].set()
        return LIMIT, ["never saw ClosedError"]

    def scans(worker):
        done = 0
        while done < LIMIT:
            it = tree.items()
            while True:
                after_close = closed.is_set()
                try:
                    item = next(it, None)
                except leankv.ClosedError:
                    return done, uses_after_close()
                if item is None:
                    break  # the end of the tree: the next round starts a new iterator
                if after_close:
                    return done, ["an iterator yielded an item after close() returned"]
                done += 1
                if done == WARMUP:
                    warmed[worker].set()
        return done, ["never saw ClosedError"]

    def db_calls(worker):
        calls = [db.flush, db.check, db.stats, db.write_batch, lambda: len(tree)]
        for done in range(LIMIT // 100):  # a flush syncs
            after_close = closed.is_set()
            if after_close and not (db.closed and repr(db).endswith(" closed>")):
                return done, ["db.closed or repr(db) says open after close() returned"]
            try:
                calls[done % len(calls)]()
            except leankv.ClosedError:
                if not db.closed:
                    return done, ["ClosedError while db.closed is False"]
                return done, uses_after_close()
            if after_close:
                return done, ["a call begun after close() returned succeeded"]
            if done + 1 == WARMUP // 10:
                warmed[worker].set()
        return LIMIT // 100, ["never saw ClosedError"]

    def parked_scan(worker):
        it = tree.items()
        for _ in range(WARMUP):
            next(it)  # batches of 16, 32, 64 and 128: 40 items are read ahead
        warmed[worker].set()
        closed.wait()
        try:
            next(it)
        except leankv.ClosedError:
            return WARMUP, uses_after_close()
        return WARMUP, ["an iterator yielded a read-ahead item after close() returned"]

    workers = [point_reads, point_reads, scans, db_calls, parked_scan]
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(work, w) for w, work in enumerate(workers)]
        try:
            for event, future in zip(warmed, futures):
                while not event.wait(0.01):  # a poll, not a deadline
                    assert not future.done(), future.result()
            db.close()
        finally:
            closed.set()
        results = [f.result() for f in futures]
    for done, problems in results:
        assert done >= WARMUP // 10
        assert problems == []
    assert db.closed and repr(db).endswith(" closed>")
