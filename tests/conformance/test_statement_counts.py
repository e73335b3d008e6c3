"""The statement and transaction counts of db/counting.py (the benchmark's statements per run):
a store call, a transaction block, a pipelined group, ``executemany`` and a rolled back block
each count exactly what they send, on real SQLite and PostgreSQL, and /metrics shows them."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client import generate_latest

from onthedot.db.pgpool import LazyPool
from onthedot.db.sqlite_conn import SqliteConnection
from onthedot.metrics import DB_STATEMENTS, DB_TRANSACTIONS, Metrics
from onthedot.store.base import Store

from .conftest import PG_DSN, StoreEnv


class Delta:
    """Statements and transactions counted for one (dialect, role) since it was made."""

    def __init__(self, dialect: str, role: str) -> None:
        self.key = (dialect, role)
        self.s0, self.t0 = DB_STATEMENTS[self.key], DB_TRANSACTIONS[self.key]

    def __call__(self) -> tuple[int, int]:
        return DB_STATEMENTS[self.key] - self.s0, DB_TRANSACTIONS[self.key] - self.t0


async def test_one_store_call_counts_its_one_statement(store: Store,
                                                       store_env: StoreEnv) -> None:
    delta = Delta("sqlite" if store_env.kind == "sqlite" else "postgresql", "store")
    await store.ping()  # SELECT 1, on its own (autocommit)
    assert delta() == (1, 1)


async def test_sqlite_counts_statements_and_commits(tmp_path: Path) -> None:
    db = SqliteConnection(str(tmp_path / "c.db"), role="queue")
    await db.write(lambda c: c.execute("CREATE TABLE t (k INTEGER PRIMARY KEY)"))
    delta = Delta("sqlite", "queue")

    def two(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (1)")
        c.execute("INSERT INTO t VALUES (2)")

    await db.write(two)  # BEGIN IMMEDIATE, 2 statements, COMMIT
    assert delta() == (2, 1)
    await db.write(lambda c: c.executemany("INSERT INTO t VALUES (?)", ([k] for k in (3, 4, 5))))
    assert delta() == (5, 2)

    def refused(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO t VALUES (1)")  # a duplicate key: rolled back, no commit

    with pytest.raises(sqlite3.IntegrityError):
        await db.write(refused)
    assert delta() == (6, 2)
    await db.run(lambda c: c.execute("SELECT count(*) FROM t").fetchone())  # autocommit read
    assert delta() == (7, 3)
    await db.close()


async def test_sqlite_counts_stay_exact_across_connection_threads(tmp_path: Path) -> None:
    """Every SQLite connection counts in its own thread: two of one role at once add up
    exactly, with the interpreter switching threads as often as it can. (CPython 3.11 did not
    lose an increment here even without the lock; the lock is for an interpreter that may
    switch threads inside ``+=``.)"""
    dbs = [SqliteConnection(str(tmp_path / f"{i}.db"), role="threads") for i in range(2)]
    each = 5000

    def many(c: sqlite3.Connection) -> None:
        for _ in range(each):
            c.execute("SELECT 1")

    for db in dbs:
        await db.open()  # its PRAGMAs count too, before the measured part
    delta = Delta("sqlite", "threads")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        await asyncio.gather(*(db.run(many) for db in dbs))
    finally:
        sys.setswitchinterval(interval)
    assert delta() == (2 * each, 2 * each)
    for db in dbs:
        await db.close()


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"c_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
        conn.execute(f"CREATE TABLE {name}.t (k int PRIMARY KEY)")
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.mark.postgres
async def test_postgres_counts_statements_and_commits(schema: str) -> None:
    pool = LazyPool(PG_DSN, schema=schema, role="counted", pool_min=1, pool_max=1,
                    timeout_seconds=5)
    try:
        async with pool.connection() as conn:
            delta = Delta("postgresql", "counted")  # after the checkout (and its ping, if any)
            await conn.execute("INSERT INTO t VALUES (1)")
            await conn.execute("SELECT 1")
            assert delta() == (2, 2)  # autocommit: each is a transaction
            async with conn.transaction():
                await conn.execute("INSERT INTO t VALUES (2)")
                async with conn.transaction():  # a savepoint, not a commit
                    await conn.execute("INSERT INTO t VALUES (3)")
            assert delta() == (4, 3)
            async with conn.transaction(), conn.cursor() as cur:
                await cur.executemany("INSERT INTO t VALUES (%s)", [(4,), (5,), (6,)])
            assert delta() == (7, 4)
            with pytest.raises(psycopg.errors.UniqueViolation):
                async with conn.transaction():  # rolled back: no commit
                    await conn.execute("INSERT INTO t VALUES (1)")
            assert delta() == (8, 4)
            async with conn.pipeline(), conn.transaction():
                # Pipelined: three statements sent at once, still three, and one commit.
                for k in (7, 8, 9):
                    await conn.execute(INSERT, {"k": k})
            assert delta() == (11, 5)
    finally:
        await pool.close()


INSERT = "INSERT INTO t VALUES (%(k)s) RETURNING k"


def test_metrics_show_the_counts() -> None:
    DB_STATEMENTS["sqlite", "probe"] += 3
    DB_TRANSACTIONS["sqlite", "probe"] += 1
    text = generate_latest(Metrics().registry).decode()
    assert 'onthedot_db_statements_total{dialect="sqlite",role="probe"} 3.0' in text.splitlines()
    assert 'onthedot_db_transactions_total{dialect="sqlite",role="probe"} 1.0' in text.splitlines()
