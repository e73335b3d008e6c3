"""Applying the numbered migrations yields the declared schema (``sql/<dialect>/schema.sql``),
and on PostgreSQL the due query reads one partition through the due index."""

from __future__ import annotations

import re
import sqlite3
from datetime import timedelta
from importlib.resources import files
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from onthedot.domain.ids import time_bucket_of
from onthedot.domain.models import RunStatus
from onthedot.store.postgres import PostgresStore
from onthedot.store.sqlite import SqliteStore

from .conftest import PG_DSN, StoreEnv, drop_pg_schema, new_pg_schema
from .factories import make_job, make_run
from .test_store import half_past


def declared_schema(dialect: str) -> str:
    return files("onthedot.store").joinpath(f"sql/{dialect}/schema.sql").read_text("utf-8")


def normalise_sql(text: str | None) -> str | None:
    """Comments and layout are not schema."""
    if text is None:
        return None
    text = re.sub(r"--[^\n]*", "", text)
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\s*([(),])\s*", r"\1", text).strip()


# --- SQLite ----------------------------------------------------------------------------------


def sqlite_master(path: Path) -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE tbl_name <> 'schema_migrations' ORDER BY type, name"
        ).fetchall()
    finally:
        conn.close()
    return [(kind, name, table, normalise_sql(text)) for kind, name, table, text in rows]


async def test_sqlite_migrations_yield_the_declared_schema(tmp_path: Path) -> None:
    migrated = tmp_path / "migrated.db"
    store = SqliteStore(f"sqlite:///{migrated}")
    try:
        await store.migrate()
    finally:
        await store.close()
    declared = tmp_path / "declared.db"
    conn = sqlite3.connect(declared)
    try:
        conn.executescript(declared_schema("sqlite"))
    finally:
        conn.close()

    got = sqlite_master(migrated)

    assert got == sqlite_master(declared)
    assert {name for _, name, _, _ in got} >= {"jobs", "job_runs", "job_runs_due", "run_events"}


# --- PostgreSQL ------------------------------------------------------------------------------

CATALOG: dict[str, str] = {
    "relations": """
        SELECT c.relname, c.relkind::text, pg_get_partkeydef(c.oid),
               pg_get_expr(c.relpartbound, c.oid)
        FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm', 'S')""",
    "columns": """
        SELECT table_name, column_name, ordinal_position, data_type, is_nullable,
               column_default, is_identity
        FROM information_schema.columns WHERE table_schema = %(schema)s""",
    "constraints": """
        SELECT rel.relname, con.conname, con.contype::text, pg_get_constraintdef(con.oid)
        FROM pg_constraint AS con
        JOIN pg_class AS rel ON rel.oid = con.conrelid
        JOIN pg_namespace AS n ON n.oid = rel.relnamespace
        WHERE n.nspname = %(schema)s""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s""",
    "functions": """
        SELECT p.proname, pg_get_functiondef(p.oid)
        FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
        WHERE n.nspname = %(schema)s""",
}
BOOKKEEPING = {"schema_migrations", "schema_migrations_pkey"}


async def pg_catalog(conn: psycopg.AsyncConnection[Any],
                     schema: str) -> dict[str, set[tuple[Any, ...]]]:
    """The schema as the catalogs describe it, with the schema name and the dates of the daily
    partitions written out (two schemas made on different days still compare equal)."""
    # Names are printed schema-qualified unless on the search_path: qualify them all alike.
    await conn.execute("SET search_path TO pg_catalog")

    def norm(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.replace(schema, "<schema>")
        value = re.sub(r"job_runs_p\d{8}", "job_runs_pYYYYMMDD", value)
        return re.sub(r"\d{4}-\d{2}-\d{2}", "YYYY-MM-DD", value)

    snapshot = {}
    for part, query in CATALOG.items():
        cur = await conn.execute(query, {"schema": schema})
        rows = await cur.fetchall()
        snapshot[part] = {tuple(norm(v) for v in row) for row in rows
                          if not BOOKKEEPING & set(row)}
    return snapshot


@pytest.mark.postgres
async def test_pg_migrations_yield_the_declared_schema(pg_store: PostgresStore) -> None:
    now = half_past()
    declared_schema_name = new_pg_schema()
    declared = PostgresStore(PG_DSN, schema=declared_schema_name,
                             partition_far_months=pg_store.partition_far_months)
    try:
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(
                sql.Identifier(declared_schema_name)))
            await conn.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                               (declared_schema_name,))
            await conn.execute(declared_schema("postgres").encode())
            await declared.partitions_maintain(now)
            await pg_store.partitions_maintain(now)

            migrated = await pg_catalog(conn, pg_store.schema)
            expected = await pg_catalog(conn, declared_schema_name)
    finally:
        await declared.close()
        await drop_pg_schema(declared_schema_name)

    for part in CATALOG:
        assert migrated[part] == expected[part], part
    names = {row[0] for row in migrated["relations"]}
    assert {"jobs", "job_runs", "job_runs_default", "job_runs_pYYYYMMDD", "run_events"} <= names


@pytest.mark.postgres
async def test_pg_due_query_reads_one_partition_through_the_due_index(
        pg_env: StoreEnv, pg_store: PostgresStore) -> None:
    now = half_past()
    job = make_job(now=now - timedelta(days=1))
    await pg_store.job_create(job, None)
    # History filling the bucket's whole day (whatever the hour now is) and the days on both
    # sides, mostly finished, so the plan is the one a busy table gets: a day's partition
    # holding only the runs since midnight is small enough for the planner to scan it whole.
    day = now.replace(hour=0, minute=0)
    for minutes in range(-6 * 60, 30 * 60, 2):
        at = day + timedelta(minutes=minutes, seconds=1)
        status = RunStatus.PENDING if minutes % 10 == 0 else RunStatus.SUCCEEDED
        await pg_store.run_insert(make_run(job, status, scheduled_at=at))
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        await conn.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                           (pg_store.schema,))
        await conn.execute("ANALYZE job_runs")
        cur = await conn.execute(
            """SELECT c.relname FROM pg_inherits AS i
               JOIN pg_class AS c ON c.oid = i.inhrelid
               JOIN pg_index AS x ON x.indexrelid = c.oid
               WHERE i.inhparent = 'job_runs_due'::regclass AND x.indrelid = %s::regclass""",
            (f"job_runs_p{now:%Y%m%d}",),
        )
        row = await cur.fetchone()
        assert row is not None
        due_index = row[0]

    plan = "\n".join(await pg_store.explain_due_query(
        make_run(job, RunStatus.PENDING).shard, time_bucket_of(now), now))

    read = set(re.findall(r"\bjob_runs_(?:p\d{8}|default)\b", plan))
    assert read == {f"job_runs_p{now:%Y%m%d}"}, plan  # pruned to the bucket's day
    assert re.search(rf"(Index Scan|Index Only Scan|Bitmap Index Scan) (using|on) {due_index}\b",
                     plan), plan


# --- what migrate reports (both stores) ------------------------------------------------------
def shipped_versions(dialect: str) -> tuple[int, ...]:
    folder = files("onthedot.store").joinpath(f"sql/{dialect}/migrations")
    return tuple(sorted(int(p.name.split("_", 1)[0]) for p in folder.iterdir()
                        if p.name.endswith(".sql")))


async def test_migrate_says_which_versions_it_applied(store_env: StoreEnv) -> None:
    versions = shipped_versions(store_env.kind)
    first = await store_env.open().migrate()
    assert (first.before, first.after, first.applied) == (0, versions[-1], versions)
    again = await store_env.open().migrate()  # another process, later: nothing left to do
    assert (again.before, again.after, again.applied) == (versions[-1], versions[-1], ())
