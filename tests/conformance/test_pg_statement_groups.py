"""PostgreSQL statement groups (db/pggroup.py) on a real server: statements that arrive together
share a transaction, each caller gets its own row, and one refused statement fails one caller."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import psycopg
import pytest

from onthedot.db.pggroup import StatementGroups
from onthedot.db.pgpool import Conn, LazyPool
from onthedot.domain.errors import BackendError, StatementRefusedError

from .conftest import PG_DSN

pytestmark = pytest.mark.postgres

CALLERS = 50


class CountingPool:
    """A LazyPool on a fresh schema with one table, counting the connections it hands out."""

    def __init__(self, schema: str) -> None:
        self.pool = LazyPool(PG_DSN, schema=schema, role="test", pool_min=1, pool_max=4,
                             timeout_seconds=5)
        self.checkouts = 0

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        self.checkouts += 1
        async with self.pool.connection() as conn:
            yield conn


@pytest.fixture
async def pool() -> AsyncIterator[CountingPool]:
    schema = f"g_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.items (k text PRIMARY KEY, n int CHECK (n >= 0))")
    counting = CountingPool(schema)
    try:
        yield counting
    finally:
        await counting.pool.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


INSERT = "INSERT INTO items (k, n) VALUES (%(k)s, %(n)s) ON CONFLICT DO NOTHING RETURNING k, n"


async def test_statements_arriving_together_share_transactions(pool: CountingPool) -> None:
    groups = StatementGroups(pool.connection)
    rows = await asyncio.gather(*(groups.one(f"k{i:03}", INSERT, {"k": f"k{i:03}", "n": i})
                                  for i in range(CALLERS)))
    assert [(r["k"], r["n"]) if r else None for r in rows] == [
        (f"k{i:03}", i) for i in range(CALLERS)]
    # The first statement goes alone; the rest arrived while it ran and go in one group.
    assert pool.checkouts <= 3, pool.checkouts
    again = await asyncio.gather(*(groups.one("k000", INSERT, {"k": "k000", "n": 7})
                                   for _ in range(3)))
    assert again == [None, None, None], "the conflict guard of each statement still holds"


async def test_a_refused_statement_fails_only_its_caller(pool: CountingPool) -> None:
    groups = StatementGroups(pool.connection)
    results = await asyncio.gather(
        *(groups.one(f"k{i:03}", INSERT, {"k": f"k{i:03}", "n": -1 if i == 7 else i})
          for i in range(CALLERS)), return_exceptions=True)
    assert isinstance(results[7], psycopg.errors.CheckViolation)
    assert all(isinstance(r, dict) for i, r in enumerate(results) if i != 7), results
    async with pool.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) AS n FROM items")
        stored = await cur.fetchone()
    assert stored is not None
    assert stored["n"] == CALLERS - 1


async def test_an_unavailable_database_fails_every_caller_with_backend_error() -> None:
    dead = LazyPool("postgresql://postgres@127.0.0.1:1/test", schema="nowhere", role="test",
                    pool_min=1, pool_max=1, timeout_seconds=0.5)
    groups = StatementGroups(dead.connection)
    try:
        results = await asyncio.gather(*(groups.one(str(i), "SELECT 1", {}) for i in range(5)),
                                       return_exceptions=True)
    finally:
        await dead.close()
    assert all(isinstance(r, BackendError) for r in results), results


# --- conflicts are not unavailability (issue 18 §1.5) -------------------------------------------

BUMP = "UPDATE items SET n = n + 1 WHERE k = %(k)s RETURNING k, n"
KEYS = [f"k{i}" for i in range(5)]
SOON = 20.0  # seconds: generous bound for something a healthy server does at once


def session_pool(schema: str, setting: str, value: str) -> LazyPool:
    """A pool on ``schema`` whose sessions all have one setting (lock_timeout, ...)."""

    async def configure(conn: Conn) -> None:
        await conn.execute("SELECT set_config(%s, %s, false)", (setting, value))

    return LazyPool(PG_DSN, schema=schema, role="test", pool_min=1, pool_max=4,
                    timeout_seconds=5, configure=configure)


async def rows_of(pool: CountingPool) -> dict[str, int]:
    async with pool.pool.connection() as conn:
        cur = await conn.execute("SELECT k, n FROM items ORDER BY k")
        return {r["k"]: r["n"] for r in await cur.fetchall()}


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + SOON
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def group_waits_on_a_lock(schema: str) -> bool:
    """Whether a session of the groups' pool is waiting for a row lock right now."""
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock'", (f"onthedot/{schema}/test",))
        row = await cur.fetchone()
    return row is not None and row[0] > 0


async def group_does_not_wait(schema: str) -> bool:
    return not await group_waits_on_a_lock(schema)


@pytest.fixture
async def seeded(pool: CountingPool) -> CountingPool:
    async with pool.pool.connection() as conn:
        for k in KEYS:
            await conn.execute("INSERT INTO items (k, n) VALUES (%s, 0)", (k,))
    return pool


async def test_a_lock_timeout_fails_only_its_statement_not_the_group(
        seeded: CountingPool) -> None:
    """Another session holds one row for ever; the groups' sessions have a lock_timeout
    (55P03). Only the caller of that row fails, with StatementRefusedError (not "unavailable"),
    after its bounded retries; the rest of its group is written."""
    schema = seeded.pool.schema
    timed = session_pool(schema, "lock_timeout", "150ms")
    groups = StatementGroups(timed.connection)
    async with await psycopg.AsyncConnection.connect(PG_DSN) as holder:
        await holder.execute(f"SELECT 1 FROM {schema}.items WHERE k = 'k2' FOR UPDATE")
        try:
            results = await asyncio.gather(*(groups.one(k, BUMP, {"k": k}) for k in KEYS),
                                           return_exceptions=True)
        finally:
            await holder.rollback()
            await timed.close()
    refused = results[2]
    assert isinstance(refused, StatementRefusedError), results
    assert isinstance(refused.__cause__, psycopg.errors.LockNotAvailable)
    assert [r["n"] if isinstance(r, dict) else None for r in results] == [1, 1, None, 1, 1]
    assert await rows_of(seeded) == {"k0": 1, "k1": 1, "k2": 0, "k3": 1, "k4": 1}


async def test_a_statement_that_lost_a_lock_timeout_is_tried_again(seeded: CountingPool) -> None:
    """The row is released after the statement's first wait timed out: its retry succeeds, so
    every caller of the group gets its row."""
    schema = seeded.pool.schema
    timed = session_pool(schema, "lock_timeout", "300ms")
    groups = StatementGroups(timed.connection)
    async with await psycopg.AsyncConnection.connect(PG_DSN) as holder:
        await holder.execute(f"SELECT 1 FROM {schema}.items WHERE k = 'k2' FOR UPDATE")
        calls = asyncio.gather(*(groups.one(k, BUMP, {"k": k}) for k in KEYS),
                               return_exceptions=True)
        try:
            await until(lambda: group_waits_on_a_lock(schema), "the group to wait")
            await until(lambda: group_does_not_wait(schema), "its lock timeout")
            await until(lambda: group_waits_on_a_lock(schema), "the statement's retry")
        finally:
            await holder.rollback()
        try:
            results = await calls
        finally:
            await timed.close()
    assert [r["n"] if isinstance(r, dict) else r for r in results] == [1, 1, 1, 1, 1]
    assert await rows_of(seeded) == dict.fromkeys(KEYS, 1)


async def test_a_deadlock_inside_a_group_fails_no_caller(seeded: CountingPool) -> None:
    """A real deadlock (40P01): another transaction holds k3 and then asks for k1 while the
    group, which runs in key order, holds k1 and waits for k3. The group's session is the one
    PostgreSQL aborts (its deadlock_timeout is the shorter); its statements then run one by
    one and all succeed once the other transaction committed."""
    schema = seeded.pool.schema
    short = session_pool(schema, "deadlock_timeout", "200ms")
    groups = StatementGroups(short.connection)
    async with await psycopg.AsyncConnection.connect(PG_DSN) as other:
        await other.execute("SET deadlock_timeout = '30s'")
        await other.execute(f"UPDATE {schema}.items SET n = n + 10 WHERE k = 'k3'")
        calls = asyncio.gather(*(groups.one(k, BUMP, {"k": k}) for k in KEYS),
                               return_exceptions=True)
        try:
            await until(lambda: group_waits_on_a_lock(schema), "the group to wait for k3")
            # Blocks until the group is aborted by the deadlock detector and rolled back.
            await other.execute(f"UPDATE {schema}.items SET n = n + 10 WHERE k = 'k1'")
            await other.commit()
        finally:
            await other.rollback()
        try:
            results = await calls
        finally:
            await short.close()
    assert all(isinstance(r, dict) for r in results), results
    assert await rows_of(seeded) == {"k0": 1, "k1": 11, "k2": 1, "k3": 11, "k4": 1}
