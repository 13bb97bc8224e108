import pytest

import leankv


@pytest.fixture
def db(tmp_path):
    """An open database in a fresh directory, closed after the test."""
    db = leankv.open(tmp_path / "db", pool_size=16 << 20)
    yield db
    db.close()


@pytest.fixture
def tree(db):
    return db.tree("t")


def key(i: int) -> bytes:
    """8-byte big-endian keys, so byte order is numeric order."""
    return i.to_bytes(8, "big")
