"""``jobs_insert_many`` on every backend: job_create for many items in ONE transaction.

Each item must end exactly as job_create would leave it (job, first run, idempotency, the
watermark, the watchers' wake-up), the results come back in the order given, and a failure of
any row leaves nothing of any item behind: provoked for real with the schema's own CHECK
constraints and, on PostgreSQL, by killing the session in the middle of the statement.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from onthedot.domain.errors import BackendError
from onthedot.domain.ids import time_bucket_of
from onthedot.domain.models import Job, JobRun, RunStatus
from onthedot.store.base import DueClaim, JobInsert, Store
from onthedot.store.postgres import PostgresStore
from tests.support.waiting import async_wait_until as wait_until

from .conftest import PG_DSN, StoreEnv
from .factories import make_job, make_run
from .test_store import half_past

MARGIN_SECONDS = 300.0


def item(now: datetime, *, key: str | None = None, user: str = "user-1",
         at: datetime | None = None, run: bool = True, **job_fields: object) -> JobInsert:
    job = make_job(now=now, user_id=user, idempotency_key=key, request_hash=f"h-{key}",
                   next_run_at=at or now + timedelta(hours=1), **job_fields)
    first = make_run(job, RunStatus.PENDING, scheduled_at=at or now + timedelta(hours=1))
    return JobInsert(job=job, first_run=first if run else None)


def runs_of(items: list[JobInsert]) -> list[JobRun]:
    return [i.first_run for i in items if i.first_run is not None]


async def assert_nothing_of(store: Store, items: list[JobInsert]) -> None:
    for i in items:
        assert await store.job_get_any(i.job.job_id) is None
    for run in runs_of(items):
        assert await store.run_get(run.run_id) is None


async def test_every_item_is_stored_with_its_first_run_in_order(store: Store) -> None:
    now = half_past()
    items = [item(now + timedelta(milliseconds=n), run=n != 2,
                  at=now + timedelta(minutes=n)) for n in range(5)]

    results = await store.jobs_insert_many(items)

    assert [r.job for r in results] == [i.job for i in items]
    assert all(r.created for r in results)
    for i in items:
        assert await store.job_get(i.job.user_id, i.job.job_id) == i.job
        if i.first_run is not None:
            assert await store.run_get(i.first_run.run_id) == i.first_run
    assert await store.runs_count_by_status() == {RunStatus.PENDING: 4}
    assert await store.jobs_insert_many([]) == []


async def test_keys_held_by_stored_jobs_or_earlier_items_insert_nothing(store: Store) -> None:
    now = half_past()
    stored = item(now, key="k1")
    assert (await store.job_create(stored.job, stored.first_run)).created
    items = [
        item(now, key="k1"),  # held by the stored job (a different request hash)
        item(now),  # no key: always a new job
        item(now, key="k2"),
        item(now, key="k2"),  # held by the item before it
        item(now, key="k1", user="user-2"),  # keys are per user
        item(now, key="k2"),  # held by item 2 again
    ]

    results = await store.jobs_insert_many(items)

    assert [r.created for r in results] == [False, True, True, False, True, False]
    assert results[0].job == stored.job  # the caller compares request_hash itself
    assert results[3].job == results[5].job == items[2].job
    assert [r.job for r in results if r.created] == [items[1].job, items[2].job, items[4].job]
    await assert_nothing_of(store, [items[0], items[3], items[5]])
    assert await store.runs_count_by_status() == {RunStatus.PENDING: 4}

    again = await store.jobs_insert_many([item(now, key="k2"), item(now, key="k1")])
    assert [(r.created, r.job) for r in again] == [(False, items[2].job), (False, stored.job)]


async def test_a_run_behind_the_watermark_pulls_it_back(store: Store) -> None:
    now = half_past()
    shard_probe = item(now)
    shard = make_run(shard_probe.job, RunStatus.PENDING).shard
    await store.runs_claim_due(DueClaim(shard=shard, now=now, limit=10,
                                        misfire_grace_seconds=60.0,
                                        watermark_margin_seconds=MARGIN_SECONDS))
    assert await store.shard_watermark(shard) == time_bucket_of(
        now - timedelta(seconds=MARGIN_SECONDS))
    # Jobs of the same shard (the shard follows the job id's hash) due a day ago: the walk
    # has passed their bucket, so the insert must pull the watermark back.
    late = [i for i in (item(now, at=now - timedelta(days=1, minutes=n)) for n in range(200))
            if i.first_run is not None and i.first_run.shard == shard][:3]
    assert late, "no job id of that shard among 200"

    assert all(r.created for r in await store.jobs_insert_many([*late, item(now)]))

    oldest = min(r.time_bucket for r in runs_of(late))
    assert await store.shard_watermark(shard) == oldest
    got = await store.runs_claim_due(DueClaim(shard=shard, now=now, limit=100,
                                              misfire_grace_seconds=10 * 86400.0))
    assert {r.run_id for r in got.enqueued} == {r.run_id for r in runs_of(late)}


@pytest.mark.parametrize("bad", ["job", "run"])
async def test_a_row_that_fails_its_check_writes_nothing_of_any_item(store: Store,
                                                                     bad: str) -> None:
    """The third item breaks a CHECK of the schema: on its job (timeout_seconds > 0), which
    fails the first statement; or on its run (shard >= 0), which SQLite only meets in its
    second statement, after every job row was written in the transaction."""
    now = half_past()
    items = [item(now + timedelta(milliseconds=n), key=f"k{n}" if n % 2 else None)
             for n in range(5)]
    third = items[2]
    assert third.first_run is not None
    items[2] = (JobInsert(job=replace(third.job, timeout_seconds=-1.0), first_run=third.first_run)
                if bad == "job" else
                JobInsert(job=third.job, first_run=replace(third.first_run, shard=-1)))

    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.CheckViolation)):
        await store.jobs_insert_many(items)

    await assert_nothing_of(store, items)
    assert await store.runs_count_by_status() == {}
    # The keys stayed free: the same items without the bad one are created.
    good = [i for n, i in enumerate(items) if n != 2]
    assert all(r.created for r in await store.jobs_insert_many(good))


async def test_concurrent_calls_sharing_keys_create_each_job_once(store_env: StoreEnv,
                                                                  store: Store) -> None:
    """Four processes insert the same 50 keys, each in another order (PostgreSQL waits on a
    key another transaction holds: a fixed key order is what keeps that from deadlocking)."""
    now = half_past()
    keys = [f"key-{n:02}" for n in range(50)]
    stores: list[Store] = [store, *(store_env.open() for _ in range(3))]
    orders = [keys, keys[::-1], keys[25:] + keys[:25], keys[1::2] + keys[::2]]
    batches = [[item(now + timedelta(seconds=s), key=k, at=now - timedelta(days=1))
                for k in order] for s, order in enumerate(orders)]

    results = await asyncio.gather(*(s.jobs_insert_many(b)
                                     for s, b in zip(stores, batches, strict=True)))

    holder: dict[str, Job] = {}
    for batch, got in zip(batches, results, strict=True):
        for i, r in zip(batch, got, strict=True):
            assert i.job.idempotency_key is not None
            holder.setdefault(i.job.idempotency_key, r.job)
            assert r.job == holder[i.job.idempotency_key]
    assert sum(r.created for got in results for r in got) == len(keys)
    assert await store.runs_count_by_status() == {RunStatus.PENDING: len(keys)}


async def test_a_run_due_now_wakes_the_watchers(store_env: StoreEnv, store: Store) -> None:
    if store_env.kind == "sqlite":
        return  # no cross-process wake-ups: the in-process hook does it (see the service)
    assert await store.due_notice_wait(0) is False  # LISTENing from here on
    other: Store = store_env.open()
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    await other.jobs_insert_many([item(half_past(), at=tomorrow)])
    assert await store.due_notice_wait(0.3) is False

    waiter = asyncio.create_task(store.due_notice_wait(20))
    await other.jobs_insert_many([item(half_past(), at=tomorrow),
                                  item(half_past(), at=datetime.now(UTC))])
    assert await waiter is True


@pytest.mark.postgres
async def test_pg_a_session_killed_mid_statement_writes_nothing(pg_env: StoreEnv,
                                                                pg_store: PostgresStore) -> None:
    """The connection dies while the statement is half way through its rows: a trigger holds
    the insert of the 600th run until the session is terminated from outside."""
    now = half_past()
    items = [item(now + timedelta(microseconds=n)) for n in range(1000)]
    stuck = items[600].job.job_id
    await pg_env.sql(f"""
        CREATE FUNCTION hold_run() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.job_id = '{stuck}' THEN PERFORM pg_sleep(60); END IF;
            RETURN NEW;
        END $$""")
    await pg_env.sql("CREATE TRIGGER hold_run BEFORE INSERT ON job_runs FOR EACH ROW "
                     "EXECUTE FUNCTION hold_run()")
    insert = asyncio.create_task(pg_store.jobs_insert_many(items))

    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        async def sleeping_pid() -> int | None:
            cur = await admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event = 'PgSleep'", (f"onthedot/{pg_store.schema}",))
            row = await cur.fetchone()
            return None if row is None else int(row[0])

        pid = await wait_until(sleeping_pid, within=30, what="the insert to reach row 600")
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    with pytest.raises(BackendError):
        await insert
    await pg_env.sql("DROP TRIGGER hold_run ON job_runs")
    await assert_nothing_of(pg_store, items[:3] + items[598:603] + items[-3:])
    assert await pg_store.runs_count_by_status() == {}
    assert all(r.created for r in await pg_store.jobs_insert_many(items))  # it reconnects
