"""The job guard (issue 18 §1.1): no transition starts or resumes work for a run whose job
stops it. A scheduled run needs its job neither paused nor deleted; a manual ("run now") run
needs it not deleted. Every transition that could start an attempt is checked, on every
backend: ``run_retry``, ``run_claim``, ``runs_retry_due``, ``run_requeue``, ``run_release``,
``run_redrive``. A run the guard stops ends CANCELLED with its reason and emits no RunEvent.

Found on main: a run RUNNING when its job was paused went RETRYING when its attempt failed,
was handed back by the rescuer and executed again, up to max_attempts; nothing on those paths
read the job.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from onthedot.domain.history import AttemptStatus
from onthedot.domain.models import Job, JobRun, JobStatus, RunStatus
from onthedot.store.base import JobSave, RunClaim, RunRetry, Store
from tests.conformance.conftest import PG_DSN, StoreEnv
from tests.conformance.factories import LEASE, make_job, make_run, new_token
from tests.support.waiting import async_wait_until

NOW = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
LEASE_SECONDS = LEASE.total_seconds()
AFTER_LEASE = NOW + LEASE + timedelta(seconds=1)

# (what happens to the job, the run's kind) -> whether the guard stops the run
CASES = [("pause", "scheduled", True), ("pause", "manual", False),
         ("delete", "scheduled", True), ("delete", "manual", True)]
CASE_IDS = [f"{change}-{kind}" for change, kind, _ in CASES]
STOP_WORDS = {"pause": "job was paused", "delete": "job was deleted"}


async def new_job(store: Store) -> Job:
    job = make_job(now=NOW - timedelta(days=1))
    created = await store.job_create(job, None)
    assert created.created
    return created.job


async def change_job(store: Store, job_id: str, change: str) -> None:
    """What the service does on pause / delete: the job's status and its waiting runs, in one
    compare-and-set."""
    job = await store.job_get_any(job_id)
    assert job is not None
    status = JobStatus.PAUSED if change == "pause" else JobStatus.CANCELLED
    saved = await store.job_save(JobSave(job=replace(job, status=status, updated_at=NOW),
                                         cancel_open_runs=True,
                                         cancel_manual_runs=change == "delete"))
    assert saved is not None


async def set_job_status(env: StoreEnv, job_id: str, change: str) -> None:
    """The job's status alone, its runs untouched: the state a pause racing with a transition
    leaves when the guard is missing (the transition must still refuse the run)."""
    status = "paused" if change == "pause" else "cancelled"
    if env.kind == "sqlite":
        await env.sql("UPDATE jobs SET status = :s, version = version + 1 WHERE job_id = :j",
                      {"s": status, "j": job_id})
    else:
        await env.sql("UPDATE jobs SET status = %(s)s, version = version + 1 "
                      "WHERE job_id = %(j)s", {"s": status, "j": job_id})


async def running_run(store: Store, job: Job, kind: str) -> JobRun:
    run = make_run(job, RunStatus.ENQUEUED, now=NOW, kind=kind)
    assert await store.run_insert(run)
    claimed = await store.run_claim(RunClaim(run.run_id, new_token(), NOW, LEASE_SECONDS))
    assert claimed is not None
    assert claimed.status is RunStatus.RUNNING
    return claimed


async def stored(store: Store, run_id: str) -> JobRun:
    run = await store.run_get(run_id)
    assert run is not None
    return run


async def assert_stopped(store: Store, run_id: str, change: str) -> JobRun:
    run = await stored(store, run_id)
    assert run.status is RunStatus.CANCELLED, run
    assert STOP_WORDS[change] in str(run.error), run.error
    assert run.finished_at is not None
    assert run.lease_token is None or run.lease_expires_at is None
    assert await store.events_after(0, 10) == [], "a stopped run emitted a RunEvent"
    return run


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_a_failed_attempt_is_not_retried_once_its_job_stops_it(
        store: Store, change: str, kind: str, stops: bool) -> None:
    job = await new_job(store)
    run = await running_run(store, job, kind)
    await change_job(store, job.job_id, change)  # while the attempt runs
    retry = RunRetry(run.run_id, str(run.lease_token), "HTTP 500", NOW + timedelta(seconds=5),
                     NOW + timedelta(seconds=15))
    moved = await store.run_retry(retry)
    attempts = await store.run_attempts(run.run_id, 10)
    assert [a.status for a in attempts] == [AttemptStatus.FAILED]
    if stops:
        assert moved is RunStatus.CANCELLED
        ended = await assert_stopped(store, run.run_id, change)
        assert "while the attempt ran" in str(ended.error)
        assert "HTTP 500" in str(ended.error)
        assert ended.retry_at is None
        # Nothing hands it back later.
        assert await store.runs_retry_due(NOW + timedelta(days=1), 10) == []
    else:
        assert moved is RunStatus.RETRYING
        assert (await stored(store, run.run_id)).status is RunStatus.RETRYING
    # A stale token is still fenced, whatever the job.
    assert await store.run_retry(retry) is None


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_no_claim_starts_a_run_its_job_stops(store_env: StoreEnv, store: Store,
                                                   change: str, kind: str,
                                                   stops: bool) -> None:
    job = await new_job(store)
    queued = make_run(job, RunStatus.ENQUEUED, now=NOW, kind=kind)
    assert await store.run_insert(queued)
    await set_job_status(store_env, job.job_id, change)  # its runs left as they were
    claimed = await store.run_claim(RunClaim(queued.run_id, new_token(), NOW, LEASE_SECONDS))
    if stops:
        assert claimed is None
        await assert_stopped(store, queued.run_id, change)
        assert await store.run_attempts(queued.run_id, 10) == [], "an attempt started"
    else:
        assert claimed is not None
        assert claimed.status is RunStatus.RUNNING


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_a_dead_workers_run_is_not_taken_over_once_its_job_stops_it(
        store: Store, change: str, kind: str, stops: bool) -> None:
    job = await new_job(store)
    run = await running_run(store, job, kind)
    await change_job(store, job.job_id, change)  # then its worker dies
    claimed = await store.run_claim(RunClaim(run.run_id, new_token(), AFTER_LEASE,
                                             LEASE_SECONDS))
    attempts = await store.run_attempts(run.run_id, 10)
    if stops:
        assert claimed is None
        await assert_stopped(store, run.run_id, change)
        assert [a.status for a in attempts] == [AttemptStatus.LOST]
    else:
        assert claimed is not None
        assert claimed.attempt == 2
        assert [a.status for a in attempts] == [AttemptStatus.LOST, AttemptStatus.RUNNING]


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_the_rescuer_hands_back_no_retry_of_a_run_its_job_stops(
        store_env: StoreEnv, store: Store, change: str, kind: str, stops: bool) -> None:
    job = await new_job(store)
    run = await running_run(store, job, kind)
    retry_at = NOW + timedelta(seconds=10)
    assert await store.run_retry(RunRetry(run.run_id, str(run.lease_token), "HTTP 503", NOW,
                                          retry_at)) is RunStatus.RETRYING
    await set_job_status(store_env, job.job_id, change)  # the RETRYING run left as it was
    due = await store.runs_retry_due(retry_at, 10)
    if stops:
        assert due == []
        await assert_stopped(store, run.run_id, change)
    else:
        assert [r.run_id for r in due] == [run.run_id]
        assert due[0].status is RunStatus.ENQUEUED


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_the_rescuer_requeues_no_run_its_job_stops(
        store_env: StoreEnv, store: Store, change: str, kind: str, stops: bool) -> None:
    job = await new_job(store)
    lost = await running_run(store, job, kind)  # its worker dies: lease and message gone
    waiting = make_run(job, RunStatus.ENQUEUED, scheduled_at=NOW + timedelta(minutes=1),
                       now=NOW, kind=kind)  # its message is lost
    assert await store.run_insert(waiting)
    await set_job_status(store_env, job.job_id, change)
    requeued = [await store.run_requeue(lost, AFTER_LEASE),
                await store.run_requeue(waiting, AFTER_LEASE)]
    if stops:
        assert requeued == [None, None]
        await assert_stopped(store, lost.run_id, change)
        await assert_stopped(store, waiting.run_id, change)
        attempts = await store.run_attempts(lost.run_id, 10)
        assert [a.status for a in attempts] == [AttemptStatus.LOST]
    else:
        assert [r.status if r else None for r in requeued] == [RunStatus.ENQUEUED] * 2


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_a_shutting_down_worker_hands_back_no_run_its_job_stops(
        store: Store, change: str, kind: str, stops: bool) -> None:
    job = await new_job(store)
    run = await running_run(store, job, kind)
    await change_job(store, job.job_id, change)
    moved = await store.run_release(run.run_id, str(run.lease_token), NOW)
    attempts = await store.run_attempts(run.run_id, 10)
    assert [a.status for a in attempts] == [AttemptStatus.RELEASED]
    if stops:
        assert moved is RunStatus.CANCELLED
        await assert_stopped(store, run.run_id, change)
    else:
        assert moved is RunStatus.ENQUEUED
    assert await store.run_release(run.run_id, str(run.lease_token), NOW) is None


@pytest.mark.parametrize(("change", "kind", "stops"), CASES, ids=CASE_IDS)
async def test_no_dead_letter_of_a_run_its_job_stops_is_redriven(
        store: Store, change: str, kind: str, stops: bool) -> None:
    job = await new_job(store)
    dead = make_run(job, RunStatus.FAILED, now=NOW, kind=kind, dead_lettered=True)
    assert await store.run_insert(dead)
    await change_job(store, job.job_id, change)
    redriven = await store.run_redrive(dead.run_id, NOW)
    if stops:
        assert redriven is None
        kept = await stored(store, dead.run_id)
        assert (kept.status, kept.dead_lettered) == (RunStatus.FAILED, True)
    else:
        assert redriven is not None
        assert redriven.status is RunStatus.ENQUEUED


# --- a pause committing while the transition runs ----------------------------------------

class HeldPause:
    """A pause of ``job_id`` (the job's status and its waiting runs, as job_save writes them)
    in a transaction held open on a connection of its own until ``commit``."""

    def __init__(self, env: StoreEnv, job_id: str) -> None:
        self.env = env
        self.job_id = job_id
        self._sqlite: sqlite3.Connection | None = None
        self._pg: psycopg.AsyncConnection[Any] | None = None
        self.pid = 0

    async def begin(self) -> None:
        if self.env.kind == "sqlite":
            self._sqlite = sqlite3.connect(self.env.sqlite_path, isolation_level=None,
                                           check_same_thread=False)
            self._sqlite.execute("BEGIN IMMEDIATE")
            self._sqlite.execute("UPDATE jobs SET status = 'paused', version = version + 1 "
                                 "WHERE job_id = ?", (self.job_id,))
            self._sqlite.execute("UPDATE job_runs SET status = 'CANCELLED' WHERE job_id = ? "
                                 "AND status IN ('PENDING', 'ENQUEUED', 'RETRYING')",
                                 (self.job_id,))
            return
        self._pg = await psycopg.AsyncConnection.connect(PG_DSN)
        await self._pg.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                               (self.env.pg_schema,))
        await self._pg.execute("UPDATE jobs SET status = 'paused', version = version + 1 "
                               "WHERE job_id = %s", (self.job_id,))
        await self._pg.execute("UPDATE job_runs SET status = 'CANCELLED' WHERE job_id = %s "
                               "AND status IN ('PENDING', 'ENQUEUED', 'RETRYING')",
                               (self.job_id,))
        cur = await self._pg.execute("SELECT pg_backend_pid()")
        row = await cur.fetchone()
        assert row is not None
        self.pid = int(row[0])

    async def wait_for_a_waiter(self) -> None:
        """PostgreSQL: until another session waits for this transaction's locks, so the commit
        lands while the transition is in flight. (SQLite serialises writers: the transition
        runs wholly before or after the pause, and either order must end the same.)"""
        if self._pg is None:
            return

        async def blocked() -> bool:
            async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as c:
                cur = await c.execute("SELECT count(*) FROM pg_stat_activity "
                                      "WHERE %s = ANY(pg_blocking_pids(pid))", (self.pid,))
                row = await cur.fetchone()
                return bool(row and row[0])

        await async_wait_until(blocked, 15, "the transition to wait for the pause's locks")

    async def commit(self) -> None:
        if self._sqlite is not None:
            self._sqlite.execute("COMMIT")
            self._sqlite.close()
        if self._pg is not None:
            await self._pg.commit()
            await self._pg.close()


TRANSITIONS = ["retry", "claim_expired", "retry_due", "requeue", "release"]


async def _transition(store: Store, what: str, run: JobRun) -> Any:
    token = str(run.lease_token)
    if what == "retry":
        return await store.run_retry(RunRetry(run.run_id, token, "HTTP 500", NOW, NOW))
    if what == "claim_expired":
        return await store.run_claim(RunClaim(run.run_id, new_token(), AFTER_LEASE,
                                              LEASE_SECONDS))
    if what == "retry_due":
        return await store.runs_retry_due(AFTER_LEASE, 10)
    if what == "requeue":
        return await store.run_requeue(run, AFTER_LEASE)
    return await store.run_release(run.run_id, token, NOW)


@pytest.mark.parametrize("what", TRANSITIONS)
async def test_a_pause_committing_during_a_transition_leaves_no_work_for_the_job(
        store_env: StoreEnv, store: Store, what: str) -> None:
    """On PostgreSQL READ COMMITTED, a guard that only reads the job (EXISTS) does not wait for
    an uncommitted pause: it reads "scheduled", the run goes RETRYING (or ENQUEUED) after the
    pause's cancel passed it, and the paused job executes again. The job's row lock makes the
    transition wait for the pause and read its outcome."""
    job = await new_job(store)
    run = await running_run(store, job, "scheduled")
    # retry_due on PostgreSQL: the run goes RETRYING after the pause's cancel statement passed
    # it (a retry committing just after it), so only the hand-back's guard can stop it.
    # SQLite serialises the two writes; the pause cancels a RETRYING run itself.
    late_retry = what == "retry_due" and store_env.kind == "postgres"
    if what == "retry_due" and not late_retry:
        assert await store.run_retry(RunRetry(run.run_id, str(run.lease_token), "HTTP 503",
                                              NOW, NOW)) is RunStatus.RETRYING
    pause = HeldPause(store_env, job.job_id)
    await pause.begin()
    if late_retry:
        await store_env.sql("UPDATE job_runs SET status = 'RETRYING', retry_at = %(at)s "
                            "WHERE run_id = %(r)s", {"r": run.run_id, "at": NOW})
    transition = asyncio.ensure_future(_transition(store, what, run))
    try:
        await pause.wait_for_a_waiter()
    finally:
        await pause.commit()
    await asyncio.wait_for(transition, 30)
    ended = await stored(store, run.run_id)
    assert ended.status is RunStatus.CANCELLED, ended
    stored_job = await store.job_get_any(job.job_id)
    assert stored_job is not None
    assert stored_job.status is JobStatus.PAUSED


async def test_pauses_and_retries_racing_leave_no_retry_of_a_paused_job(
        store_env: StoreEnv, store: Store) -> None:
    """Many retries, through several store instances (grouped into shared transactions on
    PostgreSQL), race with the pauses of their jobs: no deadlock, no error, and whichever
    commits first, no run of a paused job is left RETRYING."""
    others: list[Store] = [store_env.open() for _ in range(2)]
    stores = [store, *others]
    jobs = [await new_job(store) for _ in range(6)]
    running: list[JobRun] = []
    for job in jobs:
        for i in range(8):
            run = make_run(job, RunStatus.ENQUEUED, scheduled_at=NOW + timedelta(minutes=i))
            assert await store.run_insert(run)
            claimed = await store.run_claim(RunClaim(run.run_id, new_token(), NOW,
                                                     LEASE_SECONDS))
            assert claimed is not None
            running.append(claimed)

    async def retry(i: int, run: JobRun) -> RunStatus | None:
        await asyncio.sleep((i % 7) * 0.002)
        return await stores[i % len(stores)].run_retry(
            RunRetry(run.run_id, str(run.lease_token), "HTTP 500", NOW, NOW))

    async def pause(i: int, job: Job) -> None:
        await asyncio.sleep(i * 0.003)
        await change_job(stores[i % len(stores)], job.job_id, "pause")

    moved = await asyncio.gather(*(retry(i, r) for i, r in enumerate(running)),
                                 *(pause(i, j) for i, j in enumerate(jobs)))
    assert all(m in (RunStatus.RETRYING, RunStatus.CANCELLED) for m in moved[:len(running)])
    for run in running:
        ended = await stored(store, run.run_id)
        assert ended.status is RunStatus.CANCELLED, ended
