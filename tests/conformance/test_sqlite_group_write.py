"""Group commit of SQLite write transactions (db/sqlite_conn.py): concurrent writes share
one commit, each caller gets its own result or its own error, and a failed write leaves
nothing behind while its neighbours land."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from onthedot.db.sqlite_conn import SqliteConnection
from onthedot.domain.errors import BackendError

Write = Callable[[sqlite3.Connection], int]


class Refused(Exception):
    pass


async def _open(path: Path) -> SqliteConnection:
    db = SqliteConnection(str(path))
    await db.write(lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)"))
    return db


def _insert(k: int) -> Write:
    def tx(c: sqlite3.Connection) -> int:
        c.execute("INSERT INTO t (k, v) VALUES (?, 'x')", (k,))
        return k

    return tx


def _insert_then_fail(k: int) -> Write:
    def tx(c: sqlite3.Connection) -> int:
        c.execute("INSERT INTO t (k, v) VALUES (?, 'x')", (k,))
        raise Refused(str(k))

    return tx


def _rows(path: Path) -> set[int]:
    with sqlite3.connect(path) as other:  # another connection: only committed rows show
        return {k for (k,) in other.execute("SELECT k FROM t")}


async def test_concurrent_writes_land_with_their_own_results(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    db = await _open(path)
    try:
        results = await asyncio.gather(*(db.write(_insert(k)) for k in range(300)))
        assert results == list(range(300))
        assert _rows(path) == set(range(300))
    finally:
        await db.close()


async def test_a_failing_write_rolls_back_alone(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    db = await _open(path)
    try:
        # One group (all four are queued before the writer runs); the last: a duplicate key.
        fns = [_insert(1), _insert_then_fail(2), _insert(3), _insert(1)]
        results = await asyncio.gather(*(db.write(f) for f in fns),
                                       return_exceptions=True)
        assert results[0] == 1
        assert results[2] == 3
        assert isinstance(results[1], Refused)
        assert isinstance(results[3], sqlite3.IntegrityError | BackendError)
        assert _rows(path) == {1, 3}
    finally:
        await db.close()


async def test_a_lone_failing_write_raises_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    db = await _open(path)
    try:
        with pytest.raises(Refused):
            await db.write(_insert_then_fail(7))
        assert await db.write(_insert(8)) == 8
        assert _rows(path) == {8}
    finally:
        await db.close()


async def test_close_waits_for_writes_already_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    db = await _open(path)
    pending = [asyncio.ensure_future(db.write(_insert(k))) for k in range(50)]
    await asyncio.sleep(0)  # the writes are queued, the first group is on its way
    await db.close()
    assert [p.result() for p in pending] == list(range(50))
    assert _rows(path) == set(range(50))
