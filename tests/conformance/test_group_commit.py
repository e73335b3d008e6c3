"""Group commit on every backend: concurrent creates share transactions, each caller hears of
its own job only once it is committed, and errors stay with their item."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import psycopg
import pytest

from onthedot.domain.errors import BackendError
from onthedot.domain.models import Job, JobRun, RunStatus
from onthedot.store.base import JobCreated, JobInsert, Store
from onthedot.store.group_commit import GroupCommit
from onthedot.store.postgres import PostgresStore
from tests.support.waiting import async_wait_until as wait_until

from .conftest import PG_DSN, StoreEnv
from .factories import make_job, make_run
from .test_store import half_past


class Recording:
    """The real store, noting the size of every jobs_insert_many call."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batches: list[int] = []

    async def jobs_insert_many(self, items: Sequence[JobInsert]) -> list[JobCreated]:
        self.batches.append(len(items))
        return await self.store.jobs_insert_many(items)

    async def job_create(self, job: Job, first_run: JobRun | None) -> JobCreated:
        return await self.store.job_create(job, first_run)


def new_item(n: int, key: str | None = None) -> JobInsert:
    now = half_past()
    job = make_job(now=now + timedelta(microseconds=n), idempotency_key=key,
                   request_hash="same", next_run_at=now + timedelta(hours=1))
    return JobInsert(job, make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1)))


async def test_concurrent_creates_share_transactions_and_see_their_commit(
        store_env: StoreEnv, store: Store) -> None:
    recording = Recording(store)
    commit = GroupCommit(recording)  # type: ignore[arg-type]
    observer: Store = store_env.open()  # another process, in effect
    lone = new_item(0)
    items = [new_item(n) for n in range(1, 301)]

    async def create(item: JobInsert) -> bool:
        result = await commit.job_create(item.job, item.first_run)
        assert result == JobCreated(job=item.job, created=True)
        # Answered only after its commit: another connection already sees the job.
        return await observer.job_get_any(item.job.job_id) == item.job

    assert await create(lone)
    assert recording.batches == [1]  # alone: it waited for nothing but its own commit

    async def arrivals() -> list[bool]:
        """Callers arriving a few at a time, as requests do, while flushes are running."""
        started = []
        for chunk in range(0, len(items), 10):
            started += [asyncio.create_task(create(i)) for i in items[chunk:chunk + 10]]
            await asyncio.sleep(0)
        return list(await asyncio.gather(*started))

    assert all(await arrivals())
    assert sum(recording.batches) == 301
    assert len(recording.batches) < 100, recording.batches  # callers went together
    assert max(recording.batches) > 10, recording.batches  # ... beyond one arrival's worth
    assert await store.runs_count_by_status() == {RunStatus.PENDING: 301}


async def test_one_key_in_concurrent_creates_creates_one_job(store: Store) -> None:
    commit = GroupCommit(store)
    items = [new_item(n, key="same-key") for n in range(30)]

    results = await asyncio.gather(*(commit.job_create(i.job, i.first_run) for i in items))

    winners = [r.job for r in results if r.created]
    assert len(winners) == 1
    assert all(r.job == winners[0] for r in results)
    assert await store.runs_count_by_status() == {RunStatus.PENDING: 1}


async def test_a_row_the_database_refuses_fails_only_its_own_create(store: Store) -> None:
    commit = GroupCommit(store)
    items = [new_item(n) for n in range(40)]
    bad = items[17]
    assert bad.first_run is not None
    items[17] = JobInsert(bad.job, replace(bad.first_run, shard=-1))  # CHECK (shard >= 0)

    results = await asyncio.gather(*(commit.job_create(i.job, i.first_run) for i in items),
                                   return_exceptions=True)

    assert isinstance(results[17], (sqlite3.IntegrityError, psycopg.errors.CheckViolation))
    others = [r for n, r in enumerate(results) if n != 17]
    assert all(isinstance(r, JobCreated) and r.created for r in others), others
    assert await store.job_get_any(bad.job.job_id) is None
    assert await store.runs_count_by_status() == {RunStatus.PENDING: 39}


@pytest.mark.postgres
async def test_pg_an_unavailable_database_fails_its_flush_and_writes_none_of_it(
        pg_env: StoreEnv, pg_store: PostgresStore) -> None:
    """The session dies while a shared statement is half way: every create of that flush gets
    the BackendError and none is written (none is tried again alone); creates that arrived
    meanwhile waited, and go in the next flush on a fresh connection."""
    recording = Recording(pg_store)
    commit = GroupCommit(recording)  # type: ignore[arg-type]
    doomed = [new_item(n) for n in range(5)]
    later = [new_item(n) for n in range(5, 65)]
    await pg_env.sql(f"""
        CREATE FUNCTION hold_run() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.job_id = '{doomed[2].job.job_id}' THEN PERFORM pg_sleep(60); END IF;
            RETURN NEW;
        END $$""")
    await pg_env.sql("CREATE TRIGGER hold_run BEFORE INSERT ON job_runs FOR EACH ROW "
                     "EXECUTE FUNCTION hold_run()")
    held = [asyncio.create_task(commit.job_create(i.job, i.first_run)) for i in doomed]

    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        async def sleeping_pid() -> int | None:
            cur = await admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
                "AND wait_event = 'PgSleep'", (f"onthedot/{pg_store.schema}",))
            row = await cur.fetchone()
            return None if row is None else int(row[0])

        pid = await wait_until(sleeping_pid, within=30, what="the first flush to be held")
        waiting = [asyncio.create_task(commit.job_create(i.job, i.first_run)) for i in later]
        await asyncio.sleep(0)
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    failed = await asyncio.gather(*held, return_exceptions=True)
    assert all(isinstance(f, BackendError) for f in failed), failed
    assert all(r.created for r in await asyncio.gather(*waiting))
    assert recording.batches == [5, 60]
    for item in doomed:
        assert await pg_store.job_get_any(item.job.job_id) is None
    assert await pg_store.runs_count_by_status() == {RunStatus.PENDING: len(later)}
