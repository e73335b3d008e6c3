"""Store fixtures: every conformance test runs once per backend, each on an isolated database.

* sqlite: a fresh file under tmp_path.
* postgres: a fresh schema ``t_<random>`` in the ``test`` database, dropped after the test.

``store_env.open()`` gives another store on the same database (another process, in effect):
the concurrency tests claim through several of them at once.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from onthedot.store.base import Store
from onthedot.store.postgres import PostgresStore
from onthedot.store.sqlite import SqliteStore

PG_DSN = os.environ.get("ONTHEDOT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
# Every job_runs partition is a dozen relations of DDL (~0.3 s each here); the production defaults
# (7 days, 24 months) would add seconds to each test's migrate. These still put runs a few days
# ahead in days and a month ahead in a monthly partition; test_pg_partitions.py covers the
# layout itself.
PG_TEST_AHEAD_DAYS = 2
PG_TEST_FAR_MONTHS = 1


@dataclass
class StoreEnv:
    kind: str  # "sqlite" or "postgres"
    sqlite_path: Path | None = None
    pg_schema: str | None = None
    stores: list[Any] = field(default_factory=list)

    def open(self, **pg_options: Any) -> Any:
        """Another (unmigrated) store instance on the same database, closed at teardown;
        ``pg_options`` override PostgresStore's constructor arguments."""
        store: Any
        if self.kind == "sqlite":
            store = SqliteStore(f"sqlite:///{self.sqlite_path}")
        else:
            assert self.pg_schema is not None
            options = {"pool_max": 4, "partition_far_months": PG_TEST_FAR_MONTHS,
                       "partition_ahead_days": PG_TEST_AHEAD_DAYS, **pg_options}
            store = PostgresStore(PG_DSN, schema=self.pg_schema, **options)
        self.stores.append(store)
        return store

    async def sql(self, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Run raw SQL on the backend's database, as an operator (or a bug) would, bypassing
        the store; ``:name`` placeholders on SQLite, ``%(name)s`` on PostgreSQL."""
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.sqlite_path, isolation_level=None)
            try:
                return conn.execute(statement, params or {}).fetchall()
            finally:
                conn.close()
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as pg:
            await pg.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                             (self.pg_schema,))
            cur = await pg.execute(statement.encode(), params or {})  # type: ignore[arg-type]
            return await cur.fetchall() if cur.description else []

    async def close_all(self) -> None:
        for store in reversed(self.stores):
            await store.close()
        self.stores.clear()


def new_pg_schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


async def drop_pg_schema(schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def assert_no_stray_tasks() -> None:
    """Teardown check: closing a store must stop its background tasks (pool workers,
    listeners)."""
    current = asyncio.current_task()
    stray = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert not stray, f"tasks left running after the stores closed: {stray}"


@pytest.fixture(params=BACKENDS)
async def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreEnv]:
    if request.param == "sqlite":
        env = StoreEnv(kind="sqlite", sqlite_path=tmp_path / "t.db")
    else:
        env = StoreEnv(kind="postgres", pg_schema=new_pg_schema())
    try:
        yield env
        await env.close_all()
        assert_no_stray_tasks()
    finally:
        await env.close_all()
        if env.pg_schema is not None:
            await drop_pg_schema(env.pg_schema)


@pytest.fixture
async def store(store_env: StoreEnv) -> Store:
    """The backend under test, migrated."""
    s: Store = store_env.open()
    await s.migrate()
    return s


@pytest.fixture
async def pg_env() -> AsyncIterator[StoreEnv]:
    """PostgreSQL only, for its own behaviour (partitions, event visibility, reconnects)."""
    env = StoreEnv(kind="postgres", pg_schema=new_pg_schema())
    try:
        yield env
        await env.close_all()
        assert_no_stray_tasks()
    finally:
        await env.close_all()
        assert env.pg_schema is not None
        await drop_pg_schema(env.pg_schema)


@pytest.fixture
async def pg_store(pg_env: StoreEnv) -> PostgresStore:
    s: PostgresStore = pg_env.open()
    await s.migrate()
    return s
