"""The set-based lifecycle writes (store/run_batches.py): a worker's claims, finishes and retries
that arrive together are written as one statement (PostgreSQL) or one transaction of a few
set-based statements (SQLite) per kind, and still each caller gets its own answer: a refused
guard (a stale token, a job that stops the run) fails that one item, never its batch."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from onthedot.domain.delivery import InboxItem
from onthedot.domain.errors import BackendError, StatementRefusedError
from onthedot.domain.history import AttemptStatus
from onthedot.domain.ids import ulid_floor
from onthedot.domain.models import JobStatus, RunEvent, RunStatus
from onthedot.store.base import RunClaim, RunFinish, RunRetry, Store
from onthedot.store.postgres import PostgresStore
from tests.support.waiting import async_wait_until

from .conftest import PG_DSN, PG_TEST_AHEAD_DAYS, PG_TEST_FAR_MONTHS, StoreEnv
from .factories import new_token
from .test_job_guard import set_job_status
from .test_statement_counts import Delta
from .test_store import LEASE_SECONDS, half_past, run_in, visible_events, with_job

BATCH = 50
STALE = {7, 21, 44}  # the finishes of the batch whose token another attempt replaced


def _dialect(env: StoreEnv) -> str:
    return "sqlite" if env.kind == "sqlite" else "postgresql"


async def test_a_batch_of_finishes_records_each_but_the_stale_ones(
        store: Store, store_env: StoreEnv) -> None:
    now = half_past()
    job = await with_job(store)
    runs = [await run_in(store, job, RunStatus.RUNNING, now=now - timedelta(minutes=1),
                         scheduled_at=now - timedelta(seconds=i + 1)) for i in range(BATCH)]
    at = now + timedelta(seconds=5)
    after = max((e.event_id for e in await store.events_after(0, 1000)), default=0)

    def finish(i: int) -> RunFinish:
        run = runs[i]
        token = new_token() if i in STALE else str(run.lease_token)
        if i % 2:  # half with their inbox item, written with the result
            return RunFinish(run_id=run.run_id, token=token, status=RunStatus.FAILED,
                             finished_at=at, error=f"failed {i}", dead_lettered=True)
        item = InboxItem(item_id=ulid_floor(at)[:-4] + f"{i:04d}", user_id=job.user_id,
                         job_id=job.job_id, run_id=run.run_id, title=job.name,
                         text=f"output {i}", output={"i": i}, scheduled_at=run.scheduled_at,
                         created_at=at)
        return RunFinish(run_id=run.run_id, token=token, status=RunStatus.SUCCEEDED,
                         finished_at=at, output={"i": i}, inbox=item)

    finishes = [finish(i) for i in range(BATCH)]
    delta = Delta(_dialect(store_env), "store")
    events = await asyncio.gather(*(store.run_finish(f) for f in finishes))
    statements, _commits = delta()

    recorded = [i for i, e in enumerate(events) if e is not None]
    assert [i for i, e in enumerate(events) if e is None] == sorted(STALE)
    assert len(recorded) == BATCH - len(STALE)
    for i in recorded:
        event = events[i]
        assert event is not None
        assert (event.run_id, event.job_id, event.status) == (
            runs[i].run_id, job.job_id, finishes[i].status)
    assert len({e.event_id for e in events if e is not None}) == len(recorded)
    # Grouped, not one statement (or five) per finish: at most a few batches of a few each.
    assert statements <= 12, statements

    stored = await store.runs_get_many([r.run_id for r in runs])
    for i, run in enumerate(runs):
        got = stored[run.run_id]
        if i in STALE:
            assert (got.status, got.lease_token) == (RunStatus.RUNNING, run.lease_token)
        elif i % 2:
            assert (got.status, got.error, got.dead_lettered) == (
                RunStatus.FAILED, f"failed {i}", True)
        else:
            assert (got.status, got.output) == (RunStatus.SUCCEEDED, {"i": i})
    inboxed = {d.run_id for d in await store.deliveries_of([r.run_id for r in runs])}
    assert inboxed == {runs[i].run_id for i in recorded if i % 2 == 0}
    seen = await visible_events(store, after, len(recorded))
    assert sorted(e.run_id for e in seen) == sorted(runs[i].run_id for i in recorded)


async def test_a_batch_of_claims_and_retries_with_a_paused_jobs_run(
        store: Store, store_env: StoreEnv) -> None:
    now = half_past()
    kept, paused = await with_job(store), await with_job(store, name="paused")
    queued = {job.job_id: [await run_in(store, job, RunStatus.ENQUEUED,
                                        scheduled_at=now - timedelta(seconds=i + 1))
                           for i in range(5)] for job in (kept, paused)}
    running = {job.job_id: await run_in(store, job, RunStatus.RUNNING,
                                        scheduled_at=now - timedelta(minutes=10),
                                        now=now - timedelta(minutes=1))
               for job in (kept, paused)}
    await set_job_status(store_env, paused.job_id, "pause")

    claims = [RunClaim(r.run_id, new_token(), now, LEASE_SECONDS)
              for runs in queued.values() for r in runs]
    retries = [RunRetry(run_id=r.run_id, token=str(r.lease_token), error="HTTP 500", now=now,
                        retry_at=now + timedelta(minutes=1)) for r in running.values()]
    answers: list[Any] = await asyncio.gather(*(store.run_claim_job(c) for c in claims),
                                              *(store.run_retry(r) for r in retries))
    claimed, retried = answers[:len(claims)], answers[len(claims):]

    for c, got in zip(claims, claimed, strict=True):
        if c.run_id in {r.run_id for r in queued[paused.job_id]}:
            assert got is None, "a scheduled run of a paused job started"
            continue
        assert got is not None
        assert (got.run.run_id, got.run.lease_token, got.run.attempt) == (c.run_id, c.token, 1)
        # The job comes with the claim, read under the job guard in the same statement.
        assert got.job is not None
        assert (got.job.job_id, got.job.status, got.job.name) == (
            kept.job_id, JobStatus.SCHEDULED, kept.name)
        assert got.job.retry_policy == kept.retry_policy
    assert retried == [RunStatus.RETRYING, RunStatus.CANCELLED]

    stopped = await store.runs_get_many([r.run_id for r in queued[paused.job_id]]
                                        + [running[paused.job_id].run_id])
    assert {r.status for r in stopped.values()} == {RunStatus.CANCELLED}
    assert all("job was paused" in (r.error or "") for r in stopped.values())
    for c in claims[:5]:
        started = await store.run_attempts(c.run_id, 10)
        assert [(a.status, a.attempt) for a in started] == [(AttemptStatus.RUNNING, 1)]


async def test_two_workers_finish_the_same_runs_at_once(
        store: Store, store_env: StoreEnv) -> None:
    """Two worker processes (two stores on one database) each send a batch of finishes at
    once; for half the runs the other one has taken the run over (its lease had ended). Each
    run ends with exactly one result: its current holder's."""
    first, second = store, store_env.open()
    now = half_past()
    job = await with_job(store)
    runs = [await run_in(store, job, RunStatus.ENQUEUED,
                         scheduled_at=now - timedelta(seconds=i + 1)) for i in range(20)]
    old = [await first.run_claim(RunClaim(r.run_id, new_token(), now, 1.0)) for r in runs]
    later = now + timedelta(seconds=2)  # the first worker's leases have ended
    taken = await asyncio.gather(*(second.run_claim(RunClaim(r.run_id, new_token(), later,
                                                             LEASE_SECONDS))
                                   for r in runs[:10]))
    assert all(t is not None and t.attempt == 2 for t in taken)

    def done(run_id: str, token: str | None, who: str) -> RunFinish:
        return RunFinish(run_id=run_id, token=str(token), status=RunStatus.SUCCEEDED,
                         finished_at=later + timedelta(seconds=1), output=who)

    results = await asyncio.gather(
        asyncio.gather(*(first.run_finish(done(o.run_id, o.lease_token, "first"))
                         for o in old if o is not None)),
        asyncio.gather(*(second.run_finish(done(t.run_id, t.lease_token, "second"))
                         for t in taken if t is not None)))
    by_first, by_second = results
    assert [e is None for e in by_first] == [True] * 10 + [False] * 10
    assert all(e is not None for e in by_second)
    stored = await store.runs_get_many([r.run_id for r in runs])
    assert [stored[r.run_id].output for r in runs] == ["second"] * 10 + ["first"] * 10
    assert {r.status for r in stored.values()} == {RunStatus.SUCCEEDED}
    for r in runs[:10]:
        attempts = await store.run_attempts(r.run_id, 10)
        assert [a.status for a in attempts] == [AttemptStatus.LOST, AttemptStatus.SUCCEEDED]


@pytest.mark.postgres
async def test_a_batch_cut_off_by_a_lost_session_fails_each_caller_and_lands_once_later(
        pg_store: PostgresStore, pg_env: StoreEnv) -> None:
    """What a PostgreSQL outage does to a batch in flight: its session is cut mid-statement.
    Every caller of that batch must get BackendError (which the worker retries, keeping the
    message), never another error (the worker would let the message go and the action would
    run again); written again, each result lands once."""
    store = pg_store
    now = half_past()
    job = await with_job(store)
    runs = [await run_in(store, job, RunStatus.RUNNING, now=now - timedelta(minutes=1),
                         scheduled_at=now - timedelta(seconds=i + 1)) for i in range(21)]
    finishes = [RunFinish(run_id=r.run_id, token=str(r.lease_token), status=RunStatus.SUCCEEDED,
                          finished_at=now, output={"n": i}) for i, r in enumerate(runs)]
    app = f"onthedot/{store.schema}"
    async with await psycopg.AsyncConnection.connect(PG_DSN) as blocker, \
            await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        await blocker.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                              (store.schema,))
        await blocker.execute("SELECT 1 FROM job_runs WHERE run_id = ANY(%s) FOR UPDATE",
                              ([runs[0].run_id, runs[1].run_id],))

        async def waiting_pid() -> int | None:
            cur = await admin.execute("SELECT pid FROM pg_stat_activity WHERE "
                                      "application_name = %s AND wait_event_type = 'Lock'",
                                      (app,))
            row = await cur.fetchone()
            return None if row is None else int(row[0])

        lone = asyncio.create_task(store.run_finish(finishes[0]))
        pid = await async_wait_until(waiting_pid, 30, "the lone finish to wait for the lock")
        batch = [asyncio.create_task(store.run_finish(f)) for f in finishes[1:]]
        await asyncio.sleep(0)  # queued behind the lone one: they go together next
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert isinstance((await asyncio.gather(lone, return_exceptions=True))[0], BackendError)
        pid = await async_wait_until(waiting_pid, 30, "the batch to wait for the lock")
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        failed = await asyncio.gather(*batch, return_exceptions=True)
        await blocker.rollback()
    assert all(isinstance(f, BackendError) for f in failed), failed
    assert await store.runs_count_by_status() == {RunStatus.RUNNING: len(runs)}

    again = await asyncio.gather(*(store.run_finish(f) for f in finishes))  # the worker's retry
    assert all(e is not None for e in again)
    twice = await asyncio.gather(*(store.run_finish(f) for f in finishes))
    assert twice == [None] * len(runs), "a result recorded twice"
    events = await visible_events(store, 0, len(runs))
    assert sorted(e.run_id for e in events) == sorted(r.run_id for r in runs)


# --- conflicts inside a batch (PostgreSQL): a lock timeout, a deadlock --------------------------
def _store_with_session_setting(pg_env: StoreEnv, setting: str, value: str) -> PostgresStore:
    """Another store on the test schema whose sessions all have ``setting`` (libpq options)."""
    assert pg_env.pg_schema is not None
    dsn = f"{PG_DSN}?options=" + quote(f"-c {setting}={value}")
    store = PostgresStore(dsn, schema=pg_env.pg_schema, pool_max=4,
                          partition_far_months=PG_TEST_FAR_MONTHS,
                          partition_ahead_days=PG_TEST_AHEAD_DAYS)
    pg_env.stores.append(store)
    return store


async def _running_runs(store: Store, count: int) -> tuple[list[RunFinish], list[str]]:
    now = half_past()
    job = await with_job(store)
    runs = [await run_in(store, job, RunStatus.RUNNING, now=now - timedelta(minutes=1),
                         scheduled_at=now - timedelta(seconds=i + 1)) for i in range(count)]
    runs.sort(key=lambda r: r.run_id)  # the order a batch locks them in
    return ([RunFinish(run_id=r.run_id, token=str(r.lease_token), status=RunStatus.SUCCEEDED,
                       finished_at=now, output={"n": i}) for i, r in enumerate(runs)],
            [r.run_id for r in runs])


async def _store_waits_on_a_lock(schema: str) -> bool:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        cur = await admin.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                  "application_name = %s AND wait_event_type = 'Lock'",
                                  (f"onthedot/{schema}",))
        row = await cur.fetchone()
    return row is not None and row[0] > 0


async def _deadlocks_so_far() -> int:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:
        cur = await admin.execute("SELECT deadlocks FROM pg_stat_database "
                                  "WHERE datname = current_database()")
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.postgres
async def test_a_lock_timeout_fails_only_its_finish_not_the_batch(pg_store: PostgresStore,
                                                                  pg_env: StoreEnv) -> None:
    """Another session holds one run's row for ever; the store's sessions have a lock_timeout
    (55P03). Only that run's caller fails, with StatementRefusedError (not "unavailable"),
    after its bounded retries; the rest of its batch is recorded."""
    finishes, run_ids = await _running_runs(pg_store, 5)
    timed = _store_with_session_setting(pg_env, "lock_timeout", "150ms")
    async with await psycopg.AsyncConnection.connect(PG_DSN) as holder:
        await holder.execute(f"SELECT 1 FROM {pg_store.schema}.job_runs WHERE run_id = %s "
                             "FOR UPDATE", (run_ids[2],))
        try:
            results = await asyncio.gather(*(timed.run_finish(f) for f in finishes),
                                           return_exceptions=True)
        finally:
            await holder.rollback()
    refused = results[2]
    assert isinstance(refused, StatementRefusedError), results
    assert isinstance(refused.__cause__, psycopg.errors.LockNotAvailable)
    assert [isinstance(r, RunEvent) for r in results] == [True, True, False, True, True]
    stored = await pg_store.runs_get_many(run_ids)
    assert [stored[i].status for i in run_ids] == [
        RunStatus.SUCCEEDED, RunStatus.SUCCEEDED, RunStatus.RUNNING, RunStatus.SUCCEEDED,
        RunStatus.SUCCEEDED]


@pytest.mark.postgres
async def test_a_deadlock_inside_a_batch_fails_no_caller(pg_store: PostgresStore,
                                                         pg_env: StoreEnv) -> None:
    """A real deadlock (40P01): another transaction holds the fourth run and then asks for the
    second while the batch (or the batch after a lone first finish), which locks in run id
    order, holds the second and waits for the fourth. The batch's session is the one
    PostgreSQL aborts (its deadlock_timeout is the shorter); its finishes are then written one
    by one and all succeed once the other transaction committed."""
    finishes, run_ids = await _running_runs(pg_store, 5)
    short = _store_with_session_setting(pg_env, "deadlock_timeout", "200ms")
    before = await _deadlocks_so_far()
    schema = pg_store.schema
    async with await psycopg.AsyncConnection.connect(PG_DSN) as other:
        await other.execute("SET deadlock_timeout = '30s'")
        await other.execute(f"UPDATE {schema}.job_runs SET attempt = attempt "
                            "WHERE run_id = %s", (run_ids[3],))
        batch = asyncio.gather(*(short.run_finish(f) for f in finishes),
                               return_exceptions=True)
        try:
            await async_wait_until(lambda: _store_waits_on_a_lock(schema), 30,
                                   "the batch to wait for the fourth run")
            # Blocks until the deadlock detector aborted the batch's transaction.
            await other.execute(f"UPDATE {schema}.job_runs SET attempt = attempt "
                                "WHERE run_id = %s", (run_ids[1],))
            await other.commit()
        finally:
            await other.rollback()
        results = await batch
    assert all(isinstance(r, RunEvent) for r in results), results

    async def deadlock_counted() -> bool:
        return await _deadlocks_so_far() > before

    await async_wait_until(deadlock_counted, 10, "PostgreSQL to count the deadlock")
    stored = await pg_store.runs_get_many(run_ids)
    assert {stored[i].status for i in run_ids} == {RunStatus.SUCCEEDED}
