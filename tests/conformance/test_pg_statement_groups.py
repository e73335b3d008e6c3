"""PostgreSQL statement groups (db/pggroup.py) on a real server: statements that arrive together
share a transaction, each caller gets its own row, and one refused statement fails one caller."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest

from onthedot.db.pggroup import StatementGroups
from onthedot.db.pgpool import Conn, LazyPool
from onthedot.domain.errors import BackendError

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
