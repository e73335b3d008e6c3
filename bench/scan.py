"""Scan cost: one dispatcher pass over all 32 shards that claims the due runs, with 10 K, 1 M
(and optionally 10 M) future runs stored; the design's promise is that it stays flat.

PostgreSQL (the production store): one schema, filled step by step with SQL (the service would
take hours for ten million) — future runs spread over the next year from one minute ahead, so
the current hour's partition holds future runs too — plus ``--scan-due`` runs one second overdue.
Each repetition claims them (PENDING -> ENQUEUED, as the watcher does) and, untimed, puts them
back. SQLite uses ``bench.due_query`` (a file per size, filled from Python; slow past 1 M).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

from bench.procs import PG_DSN
from bench.stats import Figure, Row
from onthedot.store.base import DueClaim
from onthedot.store.postgres import PostgresStore

RUNS_PER_JOB = 100
YEAR_SECONDS = 365 * 86_400
SPREAD_PRIME = 104_729  # scatters consecutive runs over the year (and keeps them distinct)
SHARDS = 32
CLAIM_LIMIT = 1_000
PASSES_PER_REP = 5  # a repetition's figure is the median of this many passes


async def load_future(conn: psycopg.AsyncConnection[object], first: int, count: int,
                       now: datetime) -> None:
    """Runs ``first .. first+count-1``: PENDING, one minute to one year ahead, 100 per job."""
    params = {"first": first, "last": first + count - 1, "now": now,
              "start": now + timedelta(minutes=1), "per_job": RUNS_PER_JOB,
              "prime": SPREAD_PRIME, "year": YEAR_SECONDS}
    await conn.execute(
        "INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, timezone, status,"
        " retry_policy, misfire_policy, timeout_seconds, created_at, updated_at)"
        " SELECT 'scan' || lpad(j::text, 9, '0'), 'bench', 'b',"
        " '{\"type\": \"message\", \"text\": \"x\"}', 'recurring', '0 8 * * *', 'UTC',"
        " 'scheduled', '{\"max_attempts\": 3, \"backoff_seconds\": 10,"
        " \"max_backoff_seconds\": 3600}', 'run_late', 60,"
        " %(now)s, %(now)s"
        " FROM generate_series(%(first)s::bigint / %(per_job)s,"
        " %(last)s::bigint / %(per_job)s) AS j"
        " ON CONFLICT DO NOTHING", params)
    await conn.execute(
        "INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,"
        " attempt)"
        " SELECT job_id || '-' || to_char(t AT TIME ZONE 'UTC', 'YYYYMMDD\"T\"HH24MISSUS\"Z\"'),"
        " job_id, to_char(t AT TIME ZONE 'UTC', 'YYYYMMDDHH24')::bigint, i %% 32, t,"
        " 'scheduled', 'PENDING', 0"
        " FROM (SELECT i, 'scan' || lpad((i / %(per_job)s)::text, 9, '0') AS job_id,"
        " date_trunc('milliseconds', %(start)s"
        " + make_interval(secs => (i * %(prime)s::bigint) %% %(year)s + (i %% 1000) / 1000.0))"
        " AS t FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i) AS s", params)


async def load_due(conn: psycopg.AsyncConnection[object], due: int, now: datetime) -> None:
    at = (now - timedelta(seconds=1)).replace(microsecond=0)
    params = {"due": due, "now": now, "at": at, "at_text": at.isoformat()}
    await conn.execute(
        "INSERT INTO jobs (job_id, user_id, name, action, job_type, run_time, timezone, status,"
        " retry_policy, misfire_policy, timeout_seconds, created_at, updated_at)"
        " SELECT 'due' || lpad(j::text, 6, '0'), 'bench', 'b',"
        " '{\"type\": \"message\", \"text\": \"x\"}', 'one-time', %(at_text)s, 'UTC', 'scheduled',"
        " '{\"max_attempts\": 3, \"backoff_seconds\": 10,"
        " \"max_backoff_seconds\": 3600}', 'run_late', 60, %(now)s, %(now)s"
        " FROM generate_series(1, %(due)s::int) AS j", params)
    await conn.execute(
        "INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,"
        " attempt)"
        " SELECT 'due' || lpad(j::text, 6, '0') || '-'"
        " || to_char(%(at)s AT TIME ZONE 'UTC', 'YYYYMMDD\"T\"HH24MISSUS\"Z\"'),"
        " 'due' || lpad(j::text, 6, '0'),"
        " to_char(%(at)s AT TIME ZONE 'UTC', 'YYYYMMDDHH24')::bigint, j %% 32, %(at)s,"
        " 'scheduled', 'PENDING', 0 FROM generate_series(1, %(due)s::int) AS j", params)


async def _pass_ms(store: PostgresStore, now: datetime, due: int) -> float:
    started = time.perf_counter()
    claimed = 0
    for shard in range(SHARDS):
        got = await store.runs_claim_due(DueClaim(shard=shard, now=now, limit=CLAIM_LIMIT,
                                                  misfire_grace_seconds=60))
        claimed += len(got.enqueued)
    elapsed = (time.perf_counter() - started) * 1000
    if claimed != due:
        raise RuntimeError(f"claimed {claimed} of {due} due runs")
    return elapsed


async def postgres_scan(sizes: list[int], due: int, reps: int) -> list[Row]:
    schema = f"bench_scan_{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    store = PostgresStore(PG_DSN, schema=schema, retention_days=3650)
    rows = []
    try:
        await store.migrate()
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
            await load_due(conn, due, now)
            loaded = 0
            for size in sorted(sizes):
                began = time.perf_counter()
                await load_future(conn, loaded, size - loaded, now)
                await conn.execute("VACUUM ANALYZE jobs")
                await conn.execute("VACUUM ANALYZE job_runs")
                load_s = time.perf_counter() - began
                loaded = size
                figure = Figure()
                for _ in range(reps):
                    passes = []
                    for _ in range(PASSES_PER_REP):
                        passes.append(await _pass_ms(store, now, due))
                        await conn.execute("UPDATE job_runs SET status = 'PENDING',"
                                           " enqueued_at = NULL WHERE status = 'ENQUEUED'")
                    figure.values.append(statistics.median(passes))
                rows.append(Row("scan", "onthedot PostgreSQL", f"{size:,} stored", "ms",
                                figure, digits=1, note=f"{due} due; loaded in {load_s:.0f} s"))
    finally:
        await store.close()
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(schema)))
    return rows


async def sqlite_scan(sizes: list[int], due: int, reps: int) -> list[Row]:
    from bench.due_query import onthedot_due_ms

    rows = []
    for size in sizes:
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            # one fill per size; its figure is already the median of many passes
            figure = Figure([await onthedot_due_ms(Path(tmp), size, due)])
        rows.append(Row("scan", "onthedot SQLite", f"{size:,} stored", "ms", figure,
                        digits=1, note=f"{due} due; filled and timed in "
                                       f"{time.perf_counter() - began:.0f} s"))
    del reps  # SQLite files are not refilled per repetition: too slow to be worth it
    return rows


if __name__ == "__main__":
    for row in asyncio.run(postgres_scan([10_000, 100_000], 100, 2)):
        print(row.case, row.value_text(), row.note)
