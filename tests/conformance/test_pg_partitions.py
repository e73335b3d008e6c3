"""PostgreSQL job_runs partitions: days near now, months further ahead, the default beyond.

Far-future runs wait in monthly partitions, so the daily maintenance never reads them; a month
is split into days, with its runs, once the daily window reaches it. Time moves by passing
``now`` to ``partitions_maintain``; the partitions a run sits in are read from ``tableoid``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pytest
from psycopg import sql

from onthedot.domain.models import JobRun, RunStatus
from onthedot.store.pg_partitions import parse_layout
from onthedot.store.postgres import PostgresStore

from .conftest import StoreEnv, drop_pg_schema
from .factories import make_run
from .test_store import claim, connect, half_past, partition_of, run_in, with_job

pytestmark = pytest.mark.postgres

DAY = timedelta(days=1)
MAX_WRITES = 2_000  # runs the concurrent writer inserts at most
STORE_LOG = "onthedot.store.postgres"


# --- calendar, written out independently of the store's own ------------------------------


def add_months(month: date, count: int) -> date:
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def month_days(month: date) -> list[date]:
    return [month + timedelta(days=n) for n in range((add_months(month, 1) - month).days)]


def at(day: date, hour: int = 12, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), UTC)


def expected_months(store: PostgresStore, now: datetime) -> list[date]:
    """The months after the one holding the daily window's last day, up to now + far months."""
    last_day = (now + timedelta(days=store.partition_ahead_days)).date()
    first = add_months(last_day.replace(day=1), 1)
    horizon = add_months(now.date().replace(day=1), store.partition_far_months)
    count = (horizon.year - first.year) * 12 + horizon.month - first.month + 1
    return [add_months(first, n) for n in range(max(0, count))]


def reaching(store: PostgresStore, month: date) -> datetime:
    """The instant whose daily window first reaches ``month``'s first day."""
    return at(month, hour=12) - timedelta(days=store.partition_ahead_days)


def mname(month: date) -> str:
    return f"job_runs_m{month:%Y%m}"


def dname(day: date) -> str:
    return f"job_runs_p{day:%Y%m%d}"


# --- reading the layout --------------------------------------------------------------------


async def tree(store: PostgresStore) -> dict[str, str]:
    """Every partition below job_runs -> its parent."""
    async with await connect(store) as conn:
        cur = await conn.execute(
            """SELECT inhrelid::regclass::text, 'job_runs' FROM pg_inherits
               WHERE inhparent = 'job_runs'::regclass
               UNION ALL
               SELECT j.inhrelid::regclass::text, j.inhparent::regclass::text
               FROM pg_inherits AS i JOIN pg_inherits AS j ON j.inhparent = i.inhrelid
               WHERE i.inhparent = 'job_runs'::regclass""")
        return {str(name): str(parent) for name, parent in await cur.fetchall()}


def children(layout: dict[str, str], parent: str) -> set[str]:
    return {name for name, p in layout.items() if p == parent}


async def shape(store: PostgresStore, table: str) -> set[str]:
    """A partition's constraints and indexes, with its own name written out."""
    async with await connect(store) as conn:
        cur = await conn.execute(
            """SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
               WHERE conrelid = %(t)s::text::regclass
               UNION ALL
               SELECT indexdef FROM pg_indexes
               WHERE schemaname = %(schema)s AND tablename = %(t)s::text""",
            {"t": table, "schema": store.schema})
        return {str(r[0]).replace(table, "<self>").replace(store.schema, "<schema>")
                for r in await cur.fetchall()}


@asynccontextmanager
async def held_exclusively(store: PostgresStore, tables: list[str]) -> AsyncIterator[None]:
    """Another session holds ACCESS EXCLUSIVE locks on these tables: nothing can read them
    until it lets go. The structural proof that a maintenance does not touch them: it
    finishes its work anyway (a read would wait and then give up on the lock timeout)."""
    async with await connect(store) as conn:
        await conn.execute("BEGIN")
        for table in tables:
            await conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                sql.Identifier(table)))
        try:
            yield
        finally:
            await conn.execute("ROLLBACK")


def lock_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == STORE_LOG and "locks not granted" in r.getMessage()]


async def store_with(pg_env: StoreEnv, **options: Any) -> PostgresStore:
    """A store with the production window of days (the shared fixtures shorten it)."""
    store: PostgresStore = pg_env.open(**{"partition_ahead_days": 7, **options})
    await store.migrate()
    return store


async def runs_on(store: PostgresStore, days: list[date], status: RunStatus = RunStatus.PENDING,
                  hour: int = 12) -> list[JobRun]:
    """One run on each day, each of a job of its own (so they spread over shards)."""
    now = half_past()
    runs = []
    for n, day in enumerate(days):
        job = await with_job(store, now=now - timedelta(days=1, seconds=n))
        runs.append(await run_in(store, job, status, scheduled_at=at(day, hour, n % 60)))
    return runs


# --- far-future runs land in months --------------------------------------------------------


async def test_far_future_runs_land_in_monthly_partitions_not_the_default(
        pg_env: StoreEnv) -> None:
    # An older deployment (or far_months = 0) left far-future runs in the default partition.
    before: PostgresStore = await store_with(pg_env, partition_far_months=0)
    now = half_past()
    store: PostgresStore = pg_env.open(partition_far_months=4)
    months = expected_months(store, now)
    assert len(months) >= 3
    beyond = add_months(months[-1], 2)
    left_over = await runs_on(before, [m + timedelta(days=14) for m in months])
    assert {await partition_of(before, r) for r in left_over} == {"job_runs_default"}

    await store.partitions_maintain(now)

    layout = await tree(store)
    assert {name for name in layout if re.fullmatch(r"job_runs_m\d{6}", name)} == {
        mname(m) for m in months}
    for month in months:
        assert layout[mname(month)] == "job_runs"
        assert children(layout, mname(month)) == {f"{mname(month)}_unsplit"}
    for run, month in zip(left_over, months, strict=True):  # moved out of the default
        assert await partition_of(store, run) == f"{mname(month)}_unsplit"
        assert await store.run_get(run.run_id) == run

    new = await runs_on(store, [months[0], months[-1] + timedelta(days=27), beyond])
    assert await partition_of(store, new[0]) == f"{mname(months[0])}_unsplit"
    assert await partition_of(store, new[1]) == f"{mname(months[-1])}_unsplit"
    assert await partition_of(store, new[2]) == "job_runs_default"  # past the far horizon
    for run in new:
        assert await store.run_get(run.run_id) == run


# --- reaching a month splits it --------------------------------------------------------------


async def test_reaching_a_month_splits_it_into_days_with_its_runs(pg_env: StoreEnv) -> None:
    store = await store_with(pg_env, partition_far_months=3)
    month = expected_months(store, half_past())[0]
    days = month_days(month)
    pending = await runs_on(store, [days[0], days[1], days[14], days[20], days[-1]])
    done = (await runs_on(store, [days[14]], RunStatus.SUCCEEDED, hour=9))[0]

    await store.partitions_maintain(reaching(store, month))

    layout = await tree(store)
    assert children(layout, mname(month)) == {dname(d) for d in days}  # no unsplit leaf left
    for run in [*pending, done]:
        assert await partition_of(store, run) == dname(run.scheduled_at.date())
        assert await store.run_get(run.run_id) == run
    # The due query finds each run at its time, in the day partition it now reads.
    for run in sorted(pending, key=lambda r: r.scheduled_at):
        got = await claim(store, run.shard, run.scheduled_at + timedelta(minutes=1))
        assert [r.run_id for r in got.enqueued] == [run.run_id]
    # A split day is a day like any other: same constraints, same indexes.
    top_level = next(name for name, parent in layout.items()
                     if parent == "job_runs" and name.startswith("job_runs_p"))
    assert await shape(store, dname(days[14])) == await shape(store, top_level)


async def test_a_split_reads_only_its_month_and_a_new_day_reads_no_far_future_run(
        pg_env: StoreEnv, caplog: pytest.LogCaptureFixture) -> None:
    """Structural, not timed: the default partition and the other months are locked by another
    session while the maintenance runs, so it cannot have read them.

    (pg_stat_user_tables counters would say the same, but PostgreSQL 15 publishes a session's
    table statistics up to seconds after the fact, so "unchanged" could not be relied on.)"""
    store = await store_with(pg_env, partition_far_months=3, retention_days=365)
    months = expected_months(store, half_past())
    for month in months:
        await runs_on(store, [month + timedelta(days=n) for n in (0, 9, 19)])
    await runs_on(store, [add_months(months[-1], 3)])  # past the far horizon: the default
    first = months[0]
    # The days up to the month, and any month the horizon gained meanwhile.
    await store.partitions_maintain(reaching(store, first) - DAY)
    # Locking a month locks its leaf too.
    others = sorted(name for name in await tree(store)
                    if re.fullmatch(r"job_runs_m\d{6}", name) and name != mname(first))
    caplog.set_level(logging.INFO, logger=STORE_LOG)

    async with held_exclusively(store, ["job_runs_default", *others]):
        await store.partitions_maintain(reaching(store, first))  # the month is split
        split = await tree(store)
        await store.partitions_maintain(reaching(store, first) + DAY)  # a day like most
        after = await tree(store)

    assert lock_warnings(caplog) == []
    assert children(split, mname(first)) == {dname(d) for d in month_days(first)}
    assert after == split  # its new day already exists; nothing else to do

    # Control: without months the same day moves its runs out of the default partition, so it
    # needs that partition, and cannot proceed while another session holds it.
    control_env = StoreEnv(kind="postgres", pg_schema=f"{pg_env.pg_schema}_c")
    try:
        control: PostgresStore = await store_with(control_env, partition_far_months=0)
        await runs_on(control, month_days(first))
        await control.partitions_maintain(reaching(control, first))
        async with held_exclusively(control, ["job_runs_default"]):
            await control.partitions_maintain(reaching(control, first) + DAY)
        assert dname(first + DAY) not in await tree(control)
        assert lock_warnings(caplog) == [
            f"partition {dname(first + DAY)}: locks not granted (LockNotAvailable), "
            "retrying at the next maintenance"]
    finally:
        await control_env.close_all()
        await drop_pg_schema(f"{pg_env.pg_schema}_c")


# --- retention ------------------------------------------------------------------------------


async def test_retention_drops_old_days_and_months_but_keeps_open_runs(pg_env: StoreEnv) -> None:
    store = await store_with(pg_env, partition_far_months=4)
    now = half_past()
    months = expected_months(store, now)
    split_month, never_split_done, never_split_open = months[0], months[1], months[2]
    today_done = (await runs_on(store, [now.date()], RunStatus.SUCCEEDED))[0]
    split_done = (await runs_on(store, [split_month + DAY], RunStatus.SUCCEEDED))[0]
    split_open = (await runs_on(store, [split_month + 9 * DAY]))[0]
    far_done = (await runs_on(store, [never_split_done + DAY], RunStatus.SUCCEEDED))[0]
    far_open = (await runs_on(store, [never_split_open + DAY]))[0]
    await store.partitions_maintain(reaching(store, split_month))
    # A long outage: the next maintenance finds every month above past the retention.
    later = at(add_months(never_split_open, 1)) + timedelta(days=store.retention_days + 2)

    await store.partitions_maintain(later)

    layout = await tree(store)
    for gone in (today_done, split_done, far_done):
        assert await store.run_get(gone.run_id) is None
    for kept in (split_open, far_open):
        assert await store.run_get(kept.run_id) == kept
    assert dname(now.date()) not in layout
    assert children(layout, mname(split_month)) == {dname(split_open.scheduled_at.date())}
    assert mname(never_split_done) not in layout  # its leaf, then the month
    assert children(layout, mname(never_split_open)) == {f"{mname(never_split_open)}_unsplit"}
    cutoff = later - timedelta(days=store.retention_days)
    assert not [name for name in layout if re.fullmatch(r"job_runs_p\d{8}", name)
                and at(datetime.strptime(name[10:], "%Y%m%d").date()) + DAY <= cutoff
                and name != dname(split_open.scheduled_at.date())]


# --- concurrency ----------------------------------------------------------------------------


async def test_concurrent_maintainers_and_writers_do_not_conflict(
        pg_env: StoreEnv, caplog: pytest.LogCaptureFixture) -> None:
    options: dict[str, Any] = {"partition_far_months": 3, "retention_days": 365}
    store = await store_with(pg_env, **options)
    other: PostgresStore = pg_env.open(**options)
    writer: PostgresStore = pg_env.open(**options)
    month = expected_months(store, half_past())[0]
    job = await with_job(store, now=half_past() - DAY)
    stop = asyncio.Event()
    written: list[JobRun] = []

    async def write_into_the_month() -> None:
        # Runs keep arriving in the month being split; each waits for the split or precedes it.
        n = 0
        while not stop.is_set() and n < MAX_WRITES:
            run = make_run(job, RunStatus.PENDING,
                           scheduled_at=at(month + (n % 28) * DAY, 6, 0) + timedelta(seconds=n))
            assert await writer.run_insert(run)
            written.append(run)
            n += 1

    caplog.set_level(logging.WARNING, logger=STORE_LOG)
    writing = asyncio.create_task(write_into_the_month())
    try:
        instant = reaching(store, month) + timedelta(days=10)  # a split and a new month
        for _ in range(10):  # a split that lost a lock race to a writer is retried
            await asyncio.gather(store.partitions_maintain(instant),
                                 other.partitions_maintain(instant))
            if f"{mname(month)}_unsplit" not in await tree(store):
                break
    finally:
        stop.set()
        await writing

    layout = await tree(store)
    assert children(layout, mname(month)) == {dname(d) for d in month_days(month)}
    assert [m for m in expected_months(store, instant) if mname(m) not in layout] == []
    assert not [w for w in caplog.records if w.levelno >= logging.ERROR]
    assert written
    async with await connect(store) as conn:
        cur = await conn.execute("SELECT run_id, tableoid::regclass::text FROM job_runs "
                                 "WHERE job_id = %s", (job.job_id,))
        stored = dict(await cur.fetchall())
    assert stored == {run.run_id: dname(run.scheduled_at.date()) for run in written}
    for run in written[::max(1, len(written) // 20)]:
        assert await store.run_get(run.run_id) == run


# --- names ----------------------------------------------------------------------------------


def test_only_exact_names_under_the_right_parent_are_ours() -> None:
    layout = parse_layout([
        ("job_runs_default", "job_runs"),
        ("job_runs_p20261130", "job_runs"),
        ("job_runs_m202701", "job_runs"),
        ("job_runs_p20270101", "job_runs_m202701"),
        ("job_runs_m202702", "job_runs"),
        ("job_runs_m202702_unsplit", "job_runs_m202702"),
        # Not ours: impossible dates, other spellings, wrong parents.
        ("job_runs_p20261131", "job_runs"),
        ("job_runs_p2026113", "job_runs"),
        ("job_runs_p20261201x", "job_runs"),
        ("job_runs_m202613", "job_runs"),
        ("job_runs_p20270215", "job_runs_m202701"),
        ("job_runs_m202703_unsplit", "job_runs"),
        ("job_runs_m202704", "job_runs_m202702"),
        ("job_runs_archive", "job_runs"),
    ])

    assert layout.days == {date(2026, 11, 30): "job_runs", date(2027, 1, 1): "job_runs_m202701"}
    assert sorted(layout.months) == [date(2027, 1, 1), date(2027, 2, 1)]
    assert layout.months[date(2027, 1, 1)].days == {date(2027, 1, 1)}
    assert not layout.months[date(2027, 1, 1)].unsplit
    assert layout.months[date(2027, 2, 1)].unsplit
    assert set(layout.foreign) == {
        "job_runs_p20261131", "job_runs_p2026113", "job_runs_p20261201x", "job_runs_m202613",
        "job_runs_p20270215", "job_runs_m202703_unsplit", "job_runs_m202704",
        "job_runs_archive"}
    assert not layout.is_free(date(2027, 1, 15), date(2027, 1, 16))
    assert layout.is_free(date(2027, 3, 1), date(2027, 4, 1))

