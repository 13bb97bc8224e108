#!/usr/bin/env python3
"""Point lookups per second from Python: leankv's ``tree[k]`` against py-lmdb's
``txn.get(k)`` and rocksdict's ``db[k]`` on the same data, in the same process.

Each engine is loaded with N records (8-byte big-endian keys 0..N-1, 100-byte values) in a
temporary directory, with memory enough to hold everything (leankv: a buffer pool of
``--pool-mb``; RocksDB: a block cache of the same size; LMDB: the OS page cache). Then the
same sequence of uniformly random existing keys is looked up on every engine, engine after
engine, for ``--rounds`` rounds (the order rotates each round), and each round's rate is
printed; the summary gives each engine's median and the ratios of the medians.

    pip install ./leankv-py lmdb rocksdict
    python leankv-py/bench/lookups.py                  # 1,000,000 records
    python leankv-py/bench/lookups.py --records 100000 --lookups 200000

An engine whose package is missing is skipped with a message. ``--threads T`` runs the
lookups in T Python threads as well (leankv releases the GIL on each lookup; the others'
bindings may not), which shows whether threads read in parallel.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional

VALUE_SIZE = 100


def key_of(i: int) -> bytes:
    return i.to_bytes(8, "big")


def value_of(i: int) -> bytes:
    # Distinct per key (so a wrong answer shows), the same for every engine.
    return (i.to_bytes(8, "big") * (VALUE_SIZE // 8 + 1))[:VALUE_SIZE]


def chunks(n: int, size: int):
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


class Engine:
    name = "?"

    def load(self, n: int) -> None:
        raise NotImplementedError

    def reader(self) -> Callable[[List[bytes]], int]:
        """A function that looks every key of a list up and returns the bytes it read."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class LeanKV(Engine):
    name = "leankv"

    def __init__(self, directory: str, pool_bytes: int):
        import leankv

        self.db = leankv.open(directory, pool_size=pool_bytes, durability="none")
        self.tree = self.db.tree("bench")

    def load(self, n: int) -> None:
        for part in chunks(n, 10_000):
            with self.db.write_batch() as batch:
                for i in part:
                    batch.insert(self.tree, key_of(i), value_of(i))
        self.db.flush()

    def reader(self):
        tree = self.tree

        def read(keys: List[bytes]) -> int:
            total = 0
            for k in keys:
                total += len(tree[k])
            return total

        return read

    def close(self) -> None:
        self.db.close()


class Lmdb(Engine):
    name = "lmdb"

    def __init__(self, directory: str, pool_bytes: int):
        import lmdb

        self.env = lmdb.open(
            directory, map_size=8 << 30, sync=False, metasync=False, readahead=False
        )

    def load(self, n: int) -> None:
        for part in chunks(n, 100_000):
            with self.env.begin(write=True) as txn:
                for i in part:
                    txn.put(key_of(i), value_of(i), append=True)
        self.env.sync(True)

    def reader(self):
        env = self.env

        def read(keys: List[bytes]) -> int:
            total = 0
            # One read transaction per call, as a reader thread would keep one.
            with env.begin(buffers=False) as txn:
                get = txn.get
                for k in keys:
                    total += len(get(k))
            return total

        return read

    def close(self) -> None:
        self.env.close()


class RocksDict(Engine):
    name = "rocksdict"

    def __init__(self, directory: str, pool_bytes: int):
        from rocksdict import BlockBasedOptions, Cache, Options, Rdict

        options = Options(raw_mode=True)  # bytes in, bytes out (no pickling)
        table = BlockBasedOptions()
        table.set_block_cache(Cache(pool_bytes))
        options.set_block_based_table_factory(table)
        self.db = Rdict(directory, options)

    def load(self, n: int) -> None:
        from rocksdict import WriteBatch

        for part in chunks(n, 10_000):
            batch = WriteBatch(raw_mode=True)
            for i in part:
                batch.put(key_of(i), value_of(i))
            self.db.write(batch)
        self.db.flush()
        self.db.compact_range(None, None)

    def reader(self):
        db = self.db

        def read(keys: List[bytes]) -> int:
            total = 0
            for k in keys:
                total += len(db[k])
            return total

        return read

    def close(self) -> None:
        self.db.close()


ENGINES = {"leankv": LeanKV, "lmdb": Lmdb, "rocksdict": RocksDict}
MODULES = {"leankv": "leankv", "lmdb": "lmdb", "rocksdict": "rocksdict"}


def available(name: str) -> bool:
    try:
        __import__(MODULES[name])
        return True
    except ImportError as error:
        print(f"skipping {name}: {error} (pip install {MODULES[name]})", file=sys.stderr)
        return False


def timed(read, keys: List[bytes], threads: int) -> float:
    """Lookups per second over `keys`, split over `threads` threads."""
    if threads == 1:
        start = time.perf_counter()
        read(keys)
        return len(keys) / (time.perf_counter() - start)
    parts = [keys[t::threads] for t in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def run(part):
        barrier.wait()
        read(part)

    workers = [threading.Thread(target=run, args=(part,)) for part in parts]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    return len(keys) / (time.perf_counter() - start)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=1_000_000, help="per engine and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="also measure with T threads")
    parser.add_argument("--pool-mb", type=int, default=512, help="leankv pool, RocksDB cache")
    parser.add_argument("--engines", default="leankv,lmdb,rocksdict")
    parser.add_argument("--dir", default=None, help="where the temporary databases go")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    names = [name for name in args.engines.split(",") if name in ENGINES and available(name)]
    if not names:
        print("no engine to measure", file=sys.stderr)
        return 1
    base = tempfile.mkdtemp(prefix="leankv-bench-", dir=args.dir)
    engines: Dict[str, Engine] = {}
    try:
        print(f"{args.records:,} records (8-byte keys, {VALUE_SIZE}-byte values), "
              f"{args.lookups:,} uniform random lookups per engine and round, "
              f"{args.rounds} rounds, Python {sys.version.split()[0]}")
        for name in names:
            directory = os.path.join(base, name)
            os.makedirs(directory)
            engine = ENGINES[name](directory, args.pool_mb << 20)
            start = time.perf_counter()
            engine.load(args.records)
            print(f"  loaded {name:<10} in {time.perf_counter() - start:6.1f} s")
            engines[name] = engine

        rng = random.Random(args.seed)
        keys = [key_of(rng.randrange(args.records)) for _ in range(args.lookups)]
        # Every engine answers the same, and right, before anything is timed; then one
        # untimed pass warms each (all data in memory).
        sample = keys[:1000]
        expected = sum(len(value_of(int.from_bytes(k, "big"))) for k in sample)
        for name, engine in engines.items():
            assert engine.reader()(sample) == expected, name
            if isinstance(engine, LeanKV):
                assert all(engine.tree[k] == value_of(int.from_bytes(k, "big")) for k in sample)
            engine.reader()(keys)

        thread_counts = [1] + ([args.threads] if args.threads > 1 else [])
        rates: Dict[tuple, List[float]] = {(n, t): [] for n in engines for t in thread_counts}
        order = list(engines)
        for round_no in range(args.rounds):
            line = []
            for name in order:
                for threads in thread_counts:
                    rate = timed(engines[name].reader(), keys, threads)
                    rates[(name, threads)].append(rate)
                    line.append(f"{name}{'' if threads == 1 else f'x{threads}'} {rate / 1e6:.3f}")
            print(f"  round {round_no + 1}: " + ", ".join(line) + " M lookups/s")
            order = order[1:] + order[:1]

        print()
        print(f"{'engine':<12}{'threads':>8}{'median':>14}{'min':>14}{'max':>14}  lookups/s")
        medians = {}
        for (name, threads), values in rates.items():
            medians[(name, threads)] = statistics.median(values)
            print(f"{name:<12}{threads:>8}{statistics.median(values):>14,.0f}"
                  f"{min(values):>14,.0f}{max(values):>14,.0f}")
        if "leankv" in engines:
            print()
            for threads in thread_counts:
                for name in engines:
                    if name != "leankv":
                        ratio = medians[("leankv", threads)] / medians[(name, threads)]
                        print(f"leankv / {name} ({threads} thread{'s' * (threads > 1)}): "
                              f"{ratio:.2f}x")
            if args.threads > 1:
                for name in engines:
                    scale = medians[(name, args.threads)] / medians[(name, 1)]
                    print(f"{name}: {args.threads} threads / 1 thread: {scale:.2f}x")
    finally:
        for engine in engines.values():
            engine.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
