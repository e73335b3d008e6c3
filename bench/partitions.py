"""Daily partition maintenance of the PostgreSQL store with 0 / 100k / 1M far-future runs.

"before" is the layout without monthly partitions (``partition_far_months=0``): every run past
the daily window waits in the default partition, which each new day scans. "after" keeps them in
monthly partitions (the default, 24 months): a new day reads none of them; once a month, the
month the daily window reaches is split into days, at a cost bounded by that month's runs.

    python -m bench.partitions [--sizes 0,100000,1000000] [--dsn postgresql://...]

Each configuration gets a fresh schema (dropped afterwards). Runs are bulk-loaded with SQL,
spread evenly from 10 to 365 days ahead (one-time jobs next year, yearly jobs). Then time moves
day by day through ``partitions_maintain(now)``: 14 ordinary days (median), plus the day the
window reaches the next month (timed on its own). "upgrade" is the first maintenance of a
far_months=24 store over the "before" schema: it moves the default's runs into months, once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import psycopg
from psycopg import sql

from onthedot.store.postgres import PostgresStore

DSN = os.environ.get("ONTHEDOT_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DAY = timedelta(days=1)
FIRST_RUN_DAYS, LAST_RUN_DAYS = 10, 365  # far-future runs are spread over this span ahead
RUNS_PER_JOB = 100
ORDINARY_DAYS = 14
AHEAD_DAYS = 7


@dataclass
class Result:
    daily_ms: float  # median of the ordinary days
    month_day_ms: float  # the day the window reaches the next month
    month_runs: int  # far-future runs in that month
    upgrade_ms: float | None = None  # before only: moving the default's runs into months


def next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


def start_of(day: date) -> datetime:
    return datetime.combine(day, time(), UTC)


async def load(conn: psycopg.AsyncConnection[object], runs: int, now: datetime) -> None:
    """Jobs and their PENDING runs, inserted through job_runs so they land where the layout
    routes them."""
    if runs == 0:
        return
    jobs = max(1, runs // RUNS_PER_JOB)
    await conn.execute(
        "INSERT INTO jobs (job_id, user_id, name, action, job_type, schedule, timezone, status,"
        " retry_policy, misfire_policy, timeout_seconds, created_at, updated_at)"
        " SELECT 'bench' || lpad(j::text, 8, '0'), 'bench', 'b',"
        " '{\"type\": \"message\", \"text\": \"x\"}', 'recurring', '0 8 * * *', 'UTC',"
        " 'scheduled', '{\"max_attempts\": 3, \"backoff_seconds\": 10}', 'run_late', 60,"
        " %(now)s, %(now)s FROM generate_series(1, %(jobs)s) AS j",
        {"now": now, "jobs": jobs})
    start = now + timedelta(days=FIRST_RUN_DAYS)
    step = timedelta(days=LAST_RUN_DAYS - FIRST_RUN_DAYS) / runs
    await conn.execute(
        "INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,"
        " attempt)"
        " SELECT job_id || '-' || to_char(t AT TIME ZONE 'UTC', 'YYYYMMDD\"T\"HH24MISSUS\"Z\"'),"
        " job_id, to_char(t AT TIME ZONE 'UTC', 'YYYYMMDDHH24')::bigint, i %% 32, t,"
        " 'scheduled', 'PENDING', 0"
        " FROM (SELECT i, 'bench' || lpad((i %% %(jobs)s + 1)::text, 8, '0') AS job_id,"
        " date_trunc('milliseconds', %(start)s + i * %(step)s) AS t"
        " FROM generate_series(0, %(runs)s - 1) AS i) AS s",
        {"jobs": jobs, "start": start, "step": step, "runs": runs})
    await conn.execute("VACUUM ANALYZE jobs")
    await conn.execute("VACUUM ANALYZE job_runs")  # hint bits set: later scans read, not write


async def timed(store: PostgresStore, now: datetime) -> float:
    started = time_ms()
    await store.partitions_maintain(now)
    return time_ms() - started


def time_ms() -> float:
    return asyncio.get_running_loop().time() * 1000


async def measure(dsn: str, runs: int, far_months: int, now: datetime) -> Result:
    schema = f"bench_partitions_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(dsn, schema=schema, partition_ahead_days=AHEAD_DAYS,
                          partition_far_months=far_months, retention_days=3650)
    # The second month past the one holding now + ahead days: far enough that every timed day
    # is a new one, and the month before it is split (after) while warming up.
    month = next_month(next_month((now + AHEAD_DAYS * DAY).date()))
    reaches = start_of(month) + timedelta(hours=12) - AHEAD_DAYS * DAY  # window reaches month
    first = reaches - ORDINARY_DAYS // 2 * DAY
    try:
        await store.migrate()
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
            await load(conn, runs, now)
            cur = await conn.execute(
                "SELECT count(*) FROM job_runs WHERE scheduled_at >= %s AND scheduled_at < %s",
                (start_of(month), start_of(next_month(month))))
            row = await cur.fetchone()
            month_runs = int(row[0]) if row else 0
        await store.partitions_maintain(first - DAY)  # untimed: the days up to the first
        daily = [await timed(store, first + n * DAY) for n in range(ORDINARY_DAYS // 2)]
        month_day = await timed(store, reaches)
        daily += [await timed(store, reaches + n * DAY) for n in range(1, ORDINARY_DAYS // 2 + 1)]
        result = Result(daily_ms=statistics.median(daily), month_day_ms=month_day,
                        month_runs=month_runs)
        if far_months == 0:  # then upgrade: the first maintenance that keeps months
            upgraded = PostgresStore(dsn, schema=schema, partition_ahead_days=AHEAD_DAYS,
                                     retention_days=3650)
            try:
                result.upgrade_ms = await timed(upgraded, reaches + ORDINARY_DAYS // 2 * DAY)
            finally:
                await upgraded.close()
        return result
    finally:
        await store.close()
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(schema)))


async def run(dsn: str, sizes: list[int]) -> None:
    now = datetime.now(UTC)
    print("daily partition maintenance (partitions_maintain for one new day), ms; "
          f"far-future runs spread over {FIRST_RUN_DAYS}..{LAST_RUN_DAYS} days ahead")
    print(f"{'far-future runs':>16} | {'before: a day':>14} | {'after: a day':>13} | "
          f"{'before: month day':>18} | {'after: month day (split)':>25} | "
          f"{'runs in that month':>18} | {'upgrade (once)':>15}")
    print("-" * 145)
    for runs in sizes:
        before = await measure(dsn, runs, 0, now)
        after = await measure(dsn, runs, 24, now)
        print(f"{runs:>16,} | {before.daily_ms:>14.1f} | {after.daily_ms:>13.1f} | "
              f"{before.month_day_ms:>18.1f} | {after.month_day_ms:>25.1f} | "
              f"{after.month_runs:>18,} | {before.upgrade_ms or 0:>15.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="0,100000,1000000")
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    asyncio.run(run(args.dsn, [int(s) for s in args.sizes.split(",")]))


if __name__ == "__main__":
    main()
