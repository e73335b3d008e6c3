"""Migration 0009 on a database that has deliveries: every row is kept, a claim left SENDING
gets a time at which it counts as lost (so the retry sweep can take it over once its run
succeeded), and nothing else becomes due. SQLite (a rebuilt table) and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from onthedot.db.sqlfile import load_migrations
from onthedot.domain.delivery import Delivery, DeliveryStatus
from onthedot.store.postgres import PostgresStore
from onthedot.store.sqlite import SqliteStore

from .conftest import PG_DSN, PG_TEST_AHEAD_DAYS, PG_TEST_FAR_MONTHS, drop_pg_schema, new_pg_schema

BEFORE = 8
UPDATED = "2026-06-22T00:00:31.000000Z"
ROWS = [  # run_id, channel_key, channel, target, status, attempts, sent_at, error
    ("r1", "email:a@example.com", "email", "a@example.com", "sending", 1, None, None),
    ("r2", "inbox", "inbox", "inbox", "delivered", 1, UPDATED, None),
    ("r3", "webhook:https://h.example/x", "webhook", "https://h.example/x", "failed", 3, None,
     "the webhook answered HTTP 503"),
]
INSERT = ("INSERT INTO deliveries (run_id, channel_key, channel, target, status, attempts, "
          "claim_token, sent_at, error, updated_at) VALUES ({})")


def assert_kept(rows: list[Delivery]) -> None:
    got = {d.run_id: d for d in rows}
    assert {k: (d.channel_key, d.status, d.attempts, d.error, d.retries)
            for k, d in got.items()} == {
        "r1": ("email:a@example.com", DeliveryStatus.SENDING, 1, None, 0),
        "r2": ("inbox", DeliveryStatus.DELIVERED, 1, None, 0),
        "r3": ("webhook:https://h.example/x", DeliveryStatus.FAILED, 3,
               "the webhook answered HTTP 503", 0)}
    assert got["r1"].next_attempt_at == got["r1"].updated_at  # lost since its last change
    assert got["r2"].next_attempt_at is None
    assert got["r3"].next_attempt_at is None
    assert got["r2"].sent_at is not None


async def test_sqlite_0009_keeps_every_delivery(tmp_path: Path) -> None:
    path = tmp_path / "v8.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("CREATE TABLE schema_migrations "
                     "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        for version, text in load_migrations("onthedot.store", "sql/sqlite/migrations"):
            if version <= BEFORE:
                conn.executescript(text)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, UPDATED))
        for row in ROWS:
            conn.execute(INSERT.format(", ".join("?" * 10)),
                         (*row[:6], "attempt-1", *row[6:], UPDATED))
    finally:
        conn.close()
    store = SqliteStore(f"sqlite:///{path}")
    try:
        migrated = await store.migrate()
        assert migrated.applied[0] == BEFORE + 1
        assert_kept(await store.deliveries_of(["r1", "r2", "r3"]))
    finally:
        await store.close()


@pytest.mark.postgres
async def test_pg_0009_keeps_every_delivery() -> None:
    schema = new_pg_schema()
    try:
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            await conn.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                               (schema,))
            await conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
                               "applied_at timestamptz NOT NULL DEFAULT now())")
            for version, text in load_migrations("onthedot.store", "sql/postgres/migrations"):
                if version <= BEFORE:
                    await conn.execute(text.encode())
                    await conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)",
                                       (version,))
            for row in ROWS:
                params: tuple[Any, ...] = (*row[:6], "attempt-1", *row[6:], UPDATED)
                await conn.execute(INSERT.format(", ".join(["%s"] * 10)).encode(), params)
        store = PostgresStore(PG_DSN, schema=schema, pool_max=2,
                              partition_far_months=PG_TEST_FAR_MONTHS,
                              partition_ahead_days=PG_TEST_AHEAD_DAYS)
        try:
            migrated = await store.migrate()
            assert migrated.applied[0] == BEFORE + 1
            assert_kept(await store.deliveries_of(["r1", "r2", "r3"]))
        finally:
            await store.close()
    finally:
        await drop_pg_schema(schema)
