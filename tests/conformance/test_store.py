"""The Store conformance suite: every backend, against the real server, same assertions.

A store change starts here. Tests build rows in the state they need with the factories and pass
``now`` explicitly; nothing sleeps. The last section covers what only PostgreSQL has
(event visibility across concurrent transactions, partitions, reconnects).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from onthedot.domain.errors import BackendError
from onthedot.domain.ids import run_id_for, shard_of, time_bucket_of
from onthedot.domain.models import Job, JobRun, JobStatus, RunEvent, RunStatus
from onthedot.store.base import (
    ApplyResult,
    DueClaim,
    DueClaimed,
    EventApply,
    JobListQuery,
    JobSave,
    RunClaim,
    RunFinish,
    RunRetry,
    ShardLease,
    Store,
)
from onthedot.store.postgres import PostgresStore
from tests.support.waiting import async_wait_until as wait_until
from tests.support.waiting import wait_for_count

from .conftest import PG_DSN, StoreEnv
from .factories import make_job, make_run, new_token

LEASE_SECONDS = 30.0
GRACE_SECONDS = 60.0
MARGIN_SECONDS = 300.0


def half_past() -> datetime:
    """Half past the current hour: far from bucket edges, near the real clock (PostgreSQL's
    daily partitions exist around it)."""
    return datetime.now(UTC).replace(minute=30, second=0, microsecond=0)


async def claim(store: Store, shard: int, now: datetime, limit: int = 100,
                grace: float = GRACE_SECONDS, margin: float = MARGIN_SECONDS) -> DueClaimed:
    return await store.runs_claim_due(DueClaim(
        shard=shard, now=now, limit=limit, misfire_grace_seconds=grace,
        watermark_margin_seconds=margin,
    ))


async def claim_all(store: Store, shard: int, now: datetime, limit: int = 100) -> list[JobRun]:
    """Claim until a call finds nothing; everything claimed, in order."""
    taken: list[JobRun] = []
    while True:
        got = await claim(store, shard, now, limit)
        if not got.enqueued and not got.skipped:
            return taken
        taken += got.enqueued + got.skipped


async def with_job(store: Store, **overrides: Any) -> Job:
    job = make_job(**overrides)
    assert (await store.job_create(job, None)).created
    return job


async def run_in(store: Store, job: Job, status: RunStatus, **kw: Any) -> JobRun:
    run = make_run(job, status, **kw)
    assert await store.run_insert(run)
    return run


async def visible_events(store: Store, after: int, count: int) -> list[RunEvent]:
    """Events after ``after`` once ``count`` of them are visible (PostgreSQL shows an event
    only when every older transaction in the cluster has ended)."""
    return await wait_for_count(lambda: store.events_after(after, 1000), count,
                                what=f"{count} run events after {after}")


# --- jobs ----------------------------------------------------------------------------------


async def test_job_create_stores_job_and_first_run(store: Store) -> None:
    now = half_past()
    job = make_job(now=now, next_run_at=now + timedelta(hours=1), idempotency_key=None)
    first = make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1))

    created = await store.job_create(job, first)

    assert created.created
    assert created.job == job
    assert await store.job_get(job.user_id, job.job_id) == job
    assert await store.run_get(first.run_id) == first


async def test_idempotency_key_returns_the_original_job(store: Store) -> None:
    now = half_past()
    original = make_job(now=now, idempotency_key="req-1", request_hash="h1")
    first = make_run(original, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1))
    assert (await store.job_create(original, first)).created

    retry = make_job(now=now + timedelta(seconds=1), idempotency_key="req-1", request_hash="h2")
    retry_run = make_run(retry, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1))
    again = await store.job_create(retry, retry_run)

    assert not again.created
    assert again.job == original  # the caller compares request_hash itself
    assert await store.job_get_any(retry.job_id) is None
    assert await store.run_get(retry_run.run_id) is None  # nothing of the retry was written

    other_user = make_job(now=now, user_id="user-2", idempotency_key="req-1")
    assert (await store.job_create(other_user, None)).created  # keys are per user


async def test_job_get_is_scoped_by_user(store: Store) -> None:
    job = await with_job(store, user_id="alice")

    assert await store.job_get("alice", job.job_id) == job
    assert await store.job_get("bob", job.job_id) is None
    assert await store.job_get_any(job.job_id) == job
    assert await store.job_get("alice", "01NOSUCHJOB0000000000000000") is None


async def test_jobs_list_newest_first_with_keyset_pages_and_filters(store: Store) -> None:
    t0 = half_past() - timedelta(days=1)
    jobs = [await with_job(store, now=t0 + timedelta(minutes=i), user_id="alice")
            for i in range(5)]
    paused = await with_job(store, now=t0 + timedelta(minutes=10), user_id="alice",
                            status=JobStatus.PAUSED)
    await with_job(store, now=t0 + timedelta(minutes=11), user_id="bob")
    newest_first = [paused, *reversed(jobs)]

    pages: list[list[Job]] = []
    before: str | None = None
    while True:
        page = await store.jobs_list(JobListQuery(user_id="alice", limit=2, before_job_id=before))
        if not page:
            break
        pages.append(page)
        before = page[-1].job_id
    assert [len(p) for p in pages] == [2, 2, 2]
    assert [j for p in pages for j in p] == newest_first

    assert await store.jobs_list(JobListQuery(user_id="alice", status=JobStatus.PAUSED)) == [
        paused
    ]
    scheduled = await store.jobs_list(JobListQuery(user_id="alice", status=JobStatus.SCHEDULED))
    assert scheduled == list(reversed(jobs))
    window = await store.jobs_list(JobListQuery(
        user_id="alice", created_from=t0 + timedelta(minutes=1),
        created_to=t0 + timedelta(minutes=3),
    ))
    assert window == [jobs[2], jobs[1]]  # from inclusive, to exclusive
    assert await store.jobs_list(JobListQuery(user_id="carol")) == []


async def test_job_save_cancels_open_runs_and_revives_a_cancelled_run(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    runs = {
        status: await run_in(store, job, status, scheduled_at=now - timedelta(minutes=i))
        for i, status in enumerate([RunStatus.PENDING, RunStatus.ENQUEUED, RunStatus.RETRYING,
                                    RunStatus.RUNNING, RunStatus.SUCCEEDED])
    }
    manual = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(hours=2),
                          kind="manual")

    paused = replace(job, status=JobStatus.PAUSED, updated_at=now, next_run_at=None)
    saved = await store.job_save(JobSave(job=paused, cancel_open_runs=True))

    assert saved == replace(paused, version=job.version + 1)
    assert await store.job_get(job.user_id, job.job_id) == saved
    for status in (RunStatus.PENDING, RunStatus.ENQUEUED, RunStatus.RETRYING):
        cancelled = await store.run_get(runs[status].run_id)
        assert cancelled is not None
        assert cancelled.status is RunStatus.CANCELLED
        assert cancelled.finished_at == now
    assert await store.run_get(runs[RunStatus.RUNNING].run_id) == runs[RunStatus.RUNNING]
    assert await store.run_get(runs[RunStatus.SUCCEEDED].run_id) == runs[RunStatus.SUCCEEDED]
    assert await store.run_get(manual.run_id) == manual  # a manual run is not "the schedule"

    # Resume before the occurrence: the same run id comes back, as PENDING.
    resumed = replace(saved, status=JobStatus.SCHEDULED, updated_at=now + timedelta(seconds=1))
    again = make_run(job, RunStatus.PENDING, scheduled_at=runs[RunStatus.PENDING].scheduled_at)
    resumed = await store.job_save(JobSave(job=resumed, insert_run=again))
    assert resumed is not None
    revived = await store.run_get(again.run_id)
    assert revived is not None
    assert revived.status is RunStatus.PENDING
    assert (revived.attempt, revived.finished_at, revived.error) == (0, None, None)

    # A run id never seen before is inserted.
    later = make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(days=1))
    resumed = await store.job_save(JobSave(job=resumed, insert_run=later))
    assert resumed is not None
    assert await store.run_get(later.run_id) == later

    # Reviving touches only CANCELLED runs: a finished run keeps its result.
    done = runs[RunStatus.SUCCEEDED]
    assert await store.job_save(JobSave(job=resumed, insert_run=replace(
        done, status=RunStatus.PENDING, finished_at=None))) is not None
    assert await store.run_get(done.run_id) == done


async def test_job_save_is_a_compare_and_set_on_the_version(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    pending = await run_in(store, job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1))
    first = await store.job_save(JobSave(job=replace(job, name="renamed", updated_at=now)))
    assert first is not None
    assert first.version == job.version + 1

    # A change planned from the version before that one loses: nothing of it is written.
    stale = replace(job, status=JobStatus.PAUSED, next_run_at=None, updated_at=now)
    assert await store.job_save(JobSave(job=stale, cancel_open_runs=True)) is None
    assert await store.job_get_any(job.job_id) == first
    assert await store.run_get(pending.run_id) == pending  # not cancelled
    # A job of another user, or one that does not exist, is not written either.
    assert await store.job_save(JobSave(job=replace(first, user_id="mallory"))) is None
    assert await store.job_save(JobSave(job=replace(first, job_id="nope"))) is None


# --- runs ----------------------------------------------------------------------------------


async def test_run_insert_is_insert_if_absent(store: Store) -> None:
    job = await with_job(store)
    run = make_run(job, RunStatus.PENDING, scheduled_at=half_past() + timedelta(hours=2))

    assert await store.run_insert(run)
    assert not await store.run_insert(replace(run, status=RunStatus.ENQUEUED))
    assert await store.run_get(run.run_id) == run
    assert await store.run_get(run_id_for(job.job_id, run.scheduled_at + timedelta(1))) is None
    assert await store.run_get("not-a-run-id") is None


async def test_runs_list_newest_first_and_counts(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    other = await with_job(store)
    runs = [await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - timedelta(hours=i))
            for i in range(3)]
    await run_in(store, other, RunStatus.PENDING, scheduled_at=now)

    assert await store.runs_list(job.job_id, 2, None) == runs[:2]
    assert await store.runs_list(job.job_id, 2, runs[1].scheduled_at) == runs[2:]
    assert await store.runs_count_by_status() == {RunStatus.SUCCEEDED: 3, RunStatus.PENDING: 1}


async def test_runs_count_capped_counts_open_and_dead_runs_up_to_the_cap(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    for i in range(5):
        await run_in(store, job, RunStatus.PENDING, scheduled_at=now + timedelta(minutes=i))
    await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(minutes=1))
    for i in range(3):
        await run_in(store, job, RunStatus.FAILED, dead_lettered=True,
                     scheduled_at=now - timedelta(hours=i + 1))
    await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - timedelta(days=1))

    counts = await store.runs_count_capped(4)

    assert counts.open == {RunStatus.PENDING: 4, RunStatus.ENQUEUED: 0, RunStatus.RUNNING: 1,
                           RunStatus.RETRYING: 0}
    assert counts.dead_lettered == 3
    assert (await store.runs_count_capped(100)).open[RunStatus.PENDING] == 5


async def test_claim_due_enqueues_due_pending_runs_of_the_shard_only(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    due = [await run_in(store, job, RunStatus.PENDING, scheduled_at=now - timedelta(minutes=m))
           for m in (20, 10, 0)]
    future = await run_in(store, job, RunStatus.PENDING, scheduled_at=now + timedelta(seconds=1))
    elsewhere = make_job()
    while shard_of(elsewhere.job_id) == due[0].shard:
        elsewhere = make_job()
    await store.job_create(elsewhere, None)
    await run_in(store, elsewhere, RunStatus.PENDING, scheduled_at=now - timedelta(minutes=5))

    got = await claim(store, due[0].shard, now)

    assert got.skipped == []
    assert [r.run_id for r in got.enqueued] == [r.run_id for r in due]  # schedule order
    for run in got.enqueued:
        assert run.status is RunStatus.ENQUEUED
        assert run.enqueued_at == now
        assert await store.run_get(run.run_id) == run
    assert (await store.run_get(future.run_id)) == future
    assert (await claim(store, due[0].shard, now)).enqueued == []
    counts = await store.runs_count_by_status()
    assert counts[RunStatus.ENQUEUED] == 3
    assert counts[RunStatus.PENDING] >= 2  # the future run and the other shard's run


async def test_claim_due_respects_the_limit(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    runs = [await run_in(store, job, RunStatus.PENDING, scheduled_at=now - timedelta(seconds=s))
            for s in range(10)]
    shard = runs[0].shard

    first = await claim(store, shard, now, limit=4)
    rest = await claim(store, shard, now, limit=100)

    assert len(first.enqueued) == 4
    assert len(rest.enqueued) == 6
    expected = sorted(r.run_id for r in runs)
    assert sorted(r.run_id for r in first.enqueued + rest.enqueued) == expected


async def test_misfire_skip_versus_run_late(store: Store) -> None:
    now = half_past()
    skip_job = await with_job(store, misfire_policy="skip")
    late_job = await with_job(store, misfire_policy="run_late")
    late_skip = await run_in(store, skip_job, RunStatus.PENDING,
                             scheduled_at=now - timedelta(minutes=10))
    fresh_skip = await run_in(store, skip_job, RunStatus.PENDING,
                              scheduled_at=now - timedelta(seconds=GRACE_SECONDS - 5))
    manual_skip = await run_in(store, skip_job, RunStatus.PENDING, kind="manual",
                               scheduled_at=now - timedelta(minutes=9))
    late_run_late = await run_in(store, late_job, RunStatus.PENDING,
                                 scheduled_at=now - timedelta(minutes=10))

    skip_claim = await claim(store, late_skip.shard, now)
    late_claim = (DueClaimed([], []) if late_run_late.shard == late_skip.shard
                  else await claim(store, late_run_late.shard, now))
    enqueued = {r.run_id for r in skip_claim.enqueued + late_claim.enqueued}
    skipped = skip_claim.skipped + late_claim.skipped

    assert [r.run_id for r in skipped] == [late_skip.run_id]
    assert enqueued == {fresh_skip.run_id, manual_skip.run_id, late_run_late.run_id}
    stored = await store.run_get(late_skip.run_id)
    assert stored is not None
    assert stored.status is RunStatus.SKIPPED
    assert stored.finished_at == now
    assert skipped[0] == stored
    events = await visible_events(store, 0, 1)
    assert [(e.run_id, e.status, e.emitted_at) for e in events] == [
        (late_skip.run_id, RunStatus.SKIPPED, now)
    ]


async def test_run_claim_takes_enqueued_runs(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    enqueued = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(1))
    token = new_token()

    got = await store.run_claim(RunClaim(enqueued.run_id, token, now, LEASE_SECONDS))

    assert got is not None
    assert got.status is RunStatus.RUNNING
    assert (got.attempt, got.lease_token, got.started_at) == (1, token, now)
    assert got.lease_expires_at == now + timedelta(seconds=LEASE_SECONDS)
    assert await store.run_get(enqueued.run_id) == got
    # A second worker with the message gets nothing while the lease holds.
    assert await store.run_claim(RunClaim(enqueued.run_id, new_token(), now, 30)) is None


@pytest.mark.parametrize("status", [RunStatus.PENDING, RunStatus.RETRYING, RunStatus.SUCCEEDED,
                                    RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.CANCELLED])
async def test_run_claim_refuses_other_statuses(store: Store, status: RunStatus) -> None:
    now = half_past()
    run = await run_in(store, await with_job(store), status, scheduled_at=now - timedelta(1))

    assert await store.run_claim(RunClaim(run.run_id, new_token(), now, LEASE_SECONDS)) is None
    assert await store.run_get(run.run_id) == run
    assert await store.run_claim(RunClaim("no-such-run", new_token(), now, 30)) is None


async def test_running_run_is_claimable_only_after_its_lease_expired(store: Store) -> None:
    now = half_past()
    zombie = await run_in(store, await with_job(store), RunStatus.RUNNING,
                          scheduled_at=now - timedelta(minutes=1), now=now)
    assert zombie.lease_expires_at is not None
    expiry = zombie.lease_expires_at

    before = expiry - timedelta(microseconds=1)
    assert await store.run_claim(RunClaim(zombie.run_id, new_token(), before, 30)) is None
    token = new_token()
    taken = await store.run_claim(RunClaim(zombie.run_id, token, expiry, LEASE_SECONDS))
    assert taken is not None
    assert (taken.attempt, taken.lease_token) == (2, token)


async def test_a_stale_token_changes_nothing(store: Store) -> None:
    now = half_past()
    old = await run_in(store, await with_job(store), RunStatus.RUNNING,
                       scheduled_at=now - timedelta(minutes=1), now=now - timedelta(minutes=1))
    assert old.lease_token is not None
    assert old.lease_expires_at is not None
    new = await store.run_claim(RunClaim(old.run_id, new_token(), now, LEASE_SECONDS))
    assert new is not None
    stale = old.lease_token

    assert not await store.run_extend_lease(old.run_id, stale, now + timedelta(hours=1))
    assert not await store.run_retry(RunRetry(old.run_id, stale, "late", now, now))
    assert await store.run_finish(RunFinish(old.run_id, stale, RunStatus.SUCCEEDED, now,
                                            output={"zombie": True})) is None
    assert await store.run_get(old.run_id) == new
    assert await store.events_after(0, 10) == []

    assert new.lease_token is not None
    extended = now + timedelta(minutes=5)
    assert await store.run_extend_lease(old.run_id, new.lease_token, extended)
    after = await store.run_get(old.run_id)
    assert after is not None
    assert after.lease_expires_at == extended


async def test_run_release_hands_the_run_back_uncounted(store: Store) -> None:
    now = half_past()
    run = await run_in(store, await with_job(store), RunStatus.RUNNING,
                       scheduled_at=now - timedelta(minutes=1), now=now - timedelta(minutes=1))
    assert run.lease_token is not None
    assert not await store.run_release(run.run_id, "someone-else", now)
    assert await store.run_release(run.run_id, run.lease_token, now)
    released = await store.run_get(run.run_id)
    assert released is not None
    assert released.status is RunStatus.ENQUEUED
    assert released.attempt == run.attempt - 1
    assert released.lease_token is None
    assert not await store.run_release(run.run_id, run.lease_token, now), "only once"
    again = await store.run_claim(RunClaim(run.run_id, new_token(), now, LEASE_SECONDS))
    assert again is not None
    assert again.attempt == run.attempt


async def test_run_retry_waits_in_the_store_until_its_retry_time(store: Store) -> None:
    now = half_past()
    run = await run_in(store, await with_job(store), RunStatus.RUNNING, now=now)
    assert run.lease_token is not None
    retry_at = now + timedelta(seconds=20)

    assert await store.run_retry(RunRetry(run.run_id, run.lease_token, "HTTP 503", now,
                                          retry_at))
    retrying = await store.run_get(run.run_id)
    assert retrying is not None
    assert (retrying.status, retrying.error, retrying.lease_expires_at, retrying.retry_at) == (
        RunStatus.RETRYING, "HTTP 503", None, retry_at)
    assert not await store.run_retry(RunRetry(run.run_id, run.lease_token, "again", now, now))
    # Not claimable from a stray message, and not handed back before its time.
    assert await store.run_claim(RunClaim(run.run_id, new_token(), retry_at, 30)) is None
    early = retry_at - timedelta(microseconds=1)
    assert await store.runs_retry_due(early, 10) == []

    due = await store.runs_retry_due(retry_at, 10)

    assert [(r.run_id, r.status, r.enqueued_at, r.retry_at, r.error) for r in due] == [
        (run.run_id, RunStatus.ENQUEUED, retry_at, None, "HTTP 503")]
    assert await store.runs_retry_due(retry_at, 10) == []  # handed back once
    second = await store.run_claim(RunClaim(run.run_id, new_token(), retry_at, LEASE_SECONDS))
    assert second is not None
    assert (second.status, second.attempt, second.error) == (RunStatus.RUNNING, 2, None)


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED])
async def test_run_finish_writes_the_result_and_exactly_one_event(store: Store,
                                                                 status: RunStatus) -> None:
    now = half_past()
    run = await run_in(store, await with_job(store), RunStatus.RUNNING, now=now)
    assert run.lease_token is not None
    output = "台股今日收高 1.2%" if status is RunStatus.SUCCEEDED else None  # a JSON string
    error = None if status is RunStatus.SUCCEEDED else "HTTP 500"

    event = await store.run_finish(RunFinish(run.run_id, run.lease_token, status, now,
                                             output=output, error=error))

    assert event is not None
    assert (event.job_id, event.run_id, event.status, event.emitted_at) == (
        run.job_id, run.run_id, status, now)
    finished = await store.run_get(run.run_id)
    assert finished is not None
    assert (finished.status, finished.finished_at, finished.output, finished.error) == (
        status, now, output, error)
    assert finished.lease_expires_at is None
    assert await store.run_finish(RunFinish(run.run_id, run.lease_token, status, now)) is None
    assert await visible_events(store, 0, 1) == [event]


async def test_dead_letter_listing_and_redrive(store: Store) -> None:
    now = half_past()
    job = await with_job(store, user_id="alice")
    dead = [await run_in(store, job, RunStatus.FAILED, dead_lettered=True,
                         scheduled_at=now - timedelta(minutes=i)) for i in range(3)]
    failed_not_dead = await run_in(store, job, RunStatus.FAILED,
                                   scheduled_at=now - timedelta(hours=1))
    bobs = await run_in(store, await with_job(store, user_id="bob"), RunStatus.FAILED,
                        dead_lettered=True, scheduled_at=now)

    listed = await store.runs_dead_lettered("alice", 2, None)
    rest = await store.runs_dead_lettered("alice", 2, listed[-1].run_id)
    assert [r.run_id for r in listed + rest] == sorted((r.run_id for r in dead), reverse=True)
    assert [r.run_id for r in await store.runs_dead_lettered("bob", 10, None)] == [bobs.run_id]

    redriven = await store.run_redrive(dead[0].run_id, now)
    assert redriven is not None
    assert (redriven.status, redriven.attempt, redriven.dead_lettered) == (
        RunStatus.ENQUEUED, 0, False)
    assert (redriven.enqueued_at, redriven.finished_at, redriven.error) == (now, None, None)
    assert await store.run_get(dead[0].run_id) == redriven
    assert await store.run_redrive(dead[0].run_id, now) is None
    assert await store.run_redrive(failed_not_dead.run_id, now) is None
    assert await store.run_redrive("no-such-run", now) is None
    assert dead[0].run_id not in {r.run_id for r in await store.runs_dead_lettered("alice", 9,
                                                                                   None)}
    # Redriven, it runs again like any enqueued run.
    assert await store.run_claim(RunClaim(dead[0].run_id, new_token(), now, 30)) is not None


# --- concurrency ---------------------------------------------------------------------------


async def test_concurrent_watchers_claim_each_run_exactly_once(store_env: StoreEnv,
                                                                 store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    total = 500
    # Due over the last three hours: several buckets, some behind now - margin.
    runs = [make_run(job, RunStatus.PENDING,
                     scheduled_at=now - timedelta(hours=3) + timedelta(seconds=21 * i))
            for i in range(total)]
    for run in runs:
        await store.run_insert(run)
    shard = runs[0].shard
    watchers: list[Store] = [store_env.open() for _ in range(4)]

    async def watch(w: Store) -> list[str]:
        return [r.run_id for r in await claim_all(w, shard, now, limit=17)]

    claimed = await asyncio.gather(*(watch(w) for w in watchers))

    every = [run_id for got in claimed for run_id in got]
    assert len(every) == total
    assert set(every) == {r.run_id for r in runs}
    assert (await store.runs_count_by_status()) == {RunStatus.ENQUEUED: total}


async def test_concurrent_requests_with_one_idempotency_key_create_one_job(
        store_env: StoreEnv, store: Store) -> None:
    now = half_past()
    attempts = [make_job(now=now + timedelta(milliseconds=i), idempotency_key="req-9")
                for i in range(4)]
    stores: list[Store] = [store, *(store_env.open() for _ in range(3))]

    results = await asyncio.gather(*(s.job_create(job, make_run(job, RunStatus.PENDING,
                                                                 scheduled_at=now))
                                     for s, job in zip(stores, attempts, strict=True)))

    winners = [r.job for r in results if r.created]
    assert len(winners) == 1
    assert all(r.job == winners[0] for r in results)
    assert await store.runs_count_by_status() == {RunStatus.PENDING: 1}


async def test_concurrent_event_apply_has_its_effect_once(store_env: StoreEnv,
                                                          store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    event = await finished_event(store, job, now)
    nxt = make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(days=1))
    apply = EventApply(consumer="recurring", previous_event_id=0, event=event,
                       job_version=job.version, insert_run=nxt, job_status=None,
                       next_run_at=nxt.scheduled_at, set_next_run_at=True)
    others: list[Store] = [store_env.open() for _ in range(3)]

    results = await asyncio.gather(store.event_apply(apply),
                                   *(o.event_apply(apply) for o in others))

    assert sorted(r.value for r in results) == ["applied", *["cursor_moved"] * 3]
    assert await store.cursor_get("recurring") == event.event_id


async def test_concurrent_shard_lease_owners_never_share_a_shard(store_env: StoreEnv,
                                                                 store: Store) -> None:
    now = half_past()
    shards = list(range(16))
    owners: list[Store] = [store, *(store_env.open() for _ in range(3))]

    got = await asyncio.gather(*(o.shard_leases_acquire(f"w{i}", shards, now, 10.0)
                                 for i, o in enumerate(owners)))

    taken = [lease.shard for g in got for lease in g]
    assert sorted(taken) == shards  # every shard has exactly one owner
    assert await store.shard_owners(now) == {lease.shard: f"w{i}" for i, g in enumerate(got)
                                             for lease in g}


# --- watermark -----------------------------------------------------------------------------


async def test_watermark_starts_at_the_oldest_pending_bucket_and_advances(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    hour = timedelta(hours=1)
    runs = [await run_in(store, job, RunStatus.PENDING, scheduled_at=now - h * hour)
            for h in (3, 1, 0)]
    shard = runs[0].shard
    assert await store.shard_watermark(shard) is None

    first = await claim(store, shard, now, limit=1)
    assert [r.run_id for r in first.enqueued] == [runs[0].run_id]
    assert await store.shard_watermark(shard) == runs[0].time_bucket  # may hold more: stays

    rest = await claim(store, shard, now, limit=100)
    assert [r.run_id for r in rest.enqueued] == [runs[1].run_id, runs[2].run_id]
    assert await store.shard_watermark(shard) == time_bucket_of(now - timedelta(
        seconds=MARGIN_SECONDS))


async def test_watermark_never_passes_now_minus_margin(store: Store) -> None:
    top = half_past().replace(minute=0)
    now = top + timedelta(minutes=2)  # now - margin lies in the previous hour
    job = await with_job(store, now=now - timedelta(days=1))
    shard = make_run(job, RunStatus.PENDING).shard

    await claim(store, shard, now)
    watermark = await store.shard_watermark(shard)
    assert watermark == time_bucket_of(top - timedelta(hours=1))

    # A run inserted late, due just before now but within the margin, is still found.
    late = await run_in(store, job, RunStatus.PENDING, scheduled_at=top - timedelta(minutes=1))
    got = await claim(store, shard, now)
    assert [r.run_id for r in got.enqueued] == [late.run_id]
    assert await store.shard_watermark(shard) == watermark


async def test_runs_due_during_a_long_downtime_are_all_found(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=4))
    # Never dispatched: the first visit starts at the oldest pending run, three days back.
    runs = [await run_in(store, job, RunStatus.PENDING,
                         scheduled_at=now - timedelta(days=3) + timedelta(hours=h, minutes=h))
            for h in range(0, 70, 7)]
    shard = runs[0].shard

    found = await claim_all(store, shard, now, limit=3)

    assert [r.run_id for r in found] == [r.run_id for r in runs]


async def test_runs_due_during_a_long_downtime_after_dispatching_are_found(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=4))
    shard = make_run(job, RunStatus.PENDING).shard
    went_down = now - timedelta(days=3)
    await claim(store, shard, went_down)  # the last tick before the outage
    assert await store.shard_watermark(shard) == time_bucket_of(
        went_down - timedelta(seconds=MARGIN_SECONDS))
    runs = [await run_in(store, job, RunStatus.PENDING,
                         scheduled_at=went_down + timedelta(hours=h, seconds=1))
            for h in range(0, 72, 5)]

    found = await claim_all(store, shard, now, limit=4)

    assert [r.run_id for r in found] == [r.run_id for r in runs]


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("output", [
    {"title": "unpaired \ud800 surrogate"},
    {"text": "a NUL \x00 inside"},
    {"deep": _nested(200)},
])
async def test_an_output_that_cannot_be_stored_is_stored_as_unreadable(store: Store,
                                                                       output: Any) -> None:
    # Outputs come from endpoints we do not control; finishing the run must not fail on them.
    now = half_past()
    run = await run_in(store, await with_job(store), RunStatus.RUNNING, now=now)
    assert run.lease_token is not None
    event = await store.run_finish(RunFinish(run.run_id, run.lease_token, RunStatus.SUCCEEDED,
                                             now, output=output))
    assert event is not None
    finished = await store.run_get(run.run_id)
    assert finished is not None
    assert finished.status is RunStatus.SUCCEEDED
    assert set(finished.output) == {"unreadable"}


async def test_a_stored_action_past_the_limits_reads_as_unreadable(store: Store) -> None:
    # Rows an older version could write: the service's checks are bypassed, the store is real.
    deep = make_job(action={"type": "webhook", "url": "https://hooks.example.test/",
                            "body": _nested(40)})
    await store.job_create(deep, make_run(deep, RunStatus.PENDING))
    job = await store.job_get(deep.user_id, deep.job_id)
    assert job is not None
    assert job.action["type"] == "unreadable"
    assert "32 levels" in job.action["reason"]
    listed = await store.jobs_list(JobListQuery(user_id=deep.user_id, limit=10))
    assert [j.action for j in listed] == [job.action]


# --- events and the recurring watcher's cursor ---------------------------------------------


async def finished_event(store: Store, job: Job, at: datetime) -> RunEvent:
    run = await run_in(store, job, RunStatus.RUNNING, scheduled_at=at, now=at)
    assert run.lease_token is not None
    event = await store.run_finish(RunFinish(run.run_id, run.lease_token, RunStatus.SUCCEEDED,
                                             at, output={"ok": True}))
    assert event is not None
    return event


async def test_events_after_returns_events_in_order_from_the_cursor(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    made = [await finished_event(store, job, now - timedelta(minutes=10 - i)) for i in range(4)]

    events = await visible_events(store, 0, 4)

    assert events == made
    assert [e.event_id for e in events] == sorted(e.event_id for e in events)
    assert await store.events_after(made[1].event_id, 10) == made[2:]
    assert await store.events_after(0, 2) == made[:2]
    assert await store.events_after(made[-1].event_id, 10) == []


async def test_event_apply_advances_the_cursor_once(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    first = await finished_event(store, job, now - timedelta(hours=1))
    second = await finished_event(store, job, now)
    await visible_events(store, 0, 2)
    nxt = make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(days=1))
    apply = EventApply(consumer="recurring", previous_event_id=0, event=first,
                       job_version=job.version, insert_run=nxt, job_status=None,
                       next_run_at=nxt.scheduled_at, set_next_run_at=True)
    assert await store.cursor_get("recurring") == 0

    assert await store.event_apply(apply) is ApplyResult.APPLIED
    # Applied twice: the second is a no-op.
    assert await store.event_apply(apply) is ApplyResult.CURSOR_MOVED

    assert await store.cursor_get("recurring") == first.event_id
    assert await store.runs_list(job.job_id, 10, None) == [
        nxt, *(await store.runs_list(job.job_id, 10, nxt.scheduled_at))]
    assert len(await store.runs_list(job.job_id, 10, None)) == 3  # two finished + one next
    projected = await store.job_get_any(job.job_id)
    assert projected is not None
    assert (projected.next_run_at, projected.last_run_id, projected.updated_at) == (
        nxt.scheduled_at, first.run_id, first.emitted_at)
    assert projected.status is JobStatus.SCHEDULED
    assert projected.version == job.version + 1

    # The last occurrence: the job completes and next_run_at is cleared (once no run of it is
    # open: the schedule's end is decided with the next run gone, as a schedule change would).
    emptied = await store.job_save(JobSave(job=projected, cancel_open_runs=True))
    assert emptied is not None
    done = EventApply(consumer="recurring", previous_event_id=first.event_id, event=second,
                      job_version=emptied.version, insert_run=None,
                      job_status=JobStatus.COMPLETED, next_run_at=None, set_next_run_at=True)
    stale = replace(done, previous_event_id=0)
    assert await store.event_apply(stale) is ApplyResult.CURSOR_MOVED
    assert await store.event_apply(done) is ApplyResult.APPLIED
    completed = await store.job_get_any(job.job_id)
    assert completed is not None
    assert (completed.status, completed.next_run_at, completed.last_run_id) == (
        JobStatus.COMPLETED, None, second.run_id)
    # Consumers are independent.
    assert await store.cursor_get("audit") == 0


async def test_event_apply_revives_a_cancelled_next_run(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    event = await finished_event(store, job, now)
    cancelled = await run_in(store, job, RunStatus.CANCELLED,
                             scheduled_at=now + timedelta(days=1))
    apply = EventApply(consumer="recurring", previous_event_id=0, event=event,
                       job_version=job.version,
                       insert_run=replace(cancelled, status=RunStatus.PENDING, finished_at=None),
                       job_status=None, next_run_at=None, set_next_run_at=False)

    assert await store.event_apply(apply) is ApplyResult.APPLIED

    revived = await store.run_get(cancelled.run_id)
    assert revived is not None
    assert revived.status is RunStatus.PENDING
    projected = await store.job_get_any(job.job_id)
    assert projected is not None
    assert projected.next_run_at == job.next_run_at  # left alone


# --- shard leases and tokens ---------------------------------------------------------------


def shards_of(leases: list[ShardLease]) -> list[int]:
    return [lease.shard for lease in leases]


async def test_shard_leases_single_owner_takeover_and_release(store: Store) -> None:
    now = half_past()
    ttl = 10.0

    assert shards_of(await store.shard_leases_acquire("a", [0, 1, 2], now, ttl)) == [0, 1, 2]
    assert shards_of(await store.shard_leases_acquire("b", [1, 2, 3], now, ttl)) == [3]
    assert await store.shard_owners(now) == {0: "a", 1: "a", 2: "a", 3: "b"}

    renewed_at = now + timedelta(seconds=5)
    renewed = await store.shard_leases_acquire("a", [0, 1, 2], renewed_at, ttl)
    assert shards_of(renewed) == [0, 1, 2]
    still = now + timedelta(seconds=ttl + 1)  # past the first lease, inside the renewed one
    assert shards_of(await store.shard_leases_acquire("b", [1, 2, 3], still, ttl)) == [3]

    expired = renewed_at + timedelta(seconds=ttl)
    assert shards_of(await store.shard_leases_acquire("b", [1, 2, 3], expired, ttl)) == [1, 2, 3]
    assert await store.shard_owners(expired) == {1: "b", 2: "b", 3: "b"}
    assert shards_of(await store.shard_leases_acquire("a", [0, 1, 2], expired, ttl)) == [0]

    await store.shard_leases_release("b")
    assert await store.shard_owners(expired) == {0: "a"}
    # a shard no longer asked for is handed over at once, not left to lapse
    assert shards_of(await store.shard_leases_acquire("a", [], expired, ttl)) == []
    assert await store.shard_owners(expired) == {}


async def test_members_heartbeat_lists_the_living_in_order(store: Store) -> None:
    now = half_past()
    ttl = 10.0

    assert await store.members_heartbeat("watchers", "w-b", now, ttl) == ["w-b"]
    assert await store.members_heartbeat("watchers", "w-a", now, ttl) == ["w-a", "w-b"]
    assert await store.members_heartbeat("recurring", "w-c", now, ttl) == ["w-c"]

    later = now + timedelta(seconds=ttl)  # w-a and w-b stopped beating: both expired
    assert await store.members_heartbeat("watchers", "w-b", later, ttl) == ["w-b"]
    assert await store.members_heartbeat("watchers", "W-z", later, ttl) == ["W-z", "w-b"]

    await store.members_leave("watchers", "w-b")
    assert await store.members_heartbeat("watchers", "W-z", later, ttl) == ["W-z"]
    await store.members_leave("watchers", "nobody")  # leaving twice is harmless


async def test_tokens(store: Store) -> None:
    now = half_past()
    assert not await store.tokens_exist()
    assert await store.token_user("sha256:abc") is None

    await store.token_add("sha256:abc", "alice", now)

    assert await store.tokens_exist()
    assert await store.token_user("sha256:abc") == "alice"
    assert await store.token_user("sha256:other") is None


async def test_ping(store: Store) -> None:
    await store.ping()


async def test_migrate_is_idempotent(store_env: StoreEnv, store: Store) -> None:
    job = await with_job(store)
    await store.migrate()
    await asyncio.gather(*(store_env.open().migrate() for _ in range(3)))
    assert await store.job_get_any(job.job_id) == job


# --- due notices ---------------------------------------------------------------------------


async def test_due_notice_wait(store_env: StoreEnv, store: Store) -> None:
    job = await with_job(store)
    if store_env.kind == "sqlite":
        assert await store.due_notice_wait(0.05) is False
        return
    assert await store.due_notice_wait(0) is False  # LISTENing from here on
    other: Store = store_env.open()

    waiter = asyncio.create_task(store.due_notice_wait(20))
    await other.run_insert(make_run(job, RunStatus.PENDING, scheduled_at=datetime.now(UTC)))
    assert await waiter is True

    # A run due tomorrow is no reason to wake anyone.
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    await other.run_insert(make_run(job, RunStatus.PENDING, scheduled_at=tomorrow))
    assert await store.due_notice_wait(0.3) is False

    # The dispatcher cancels the wait whenever something else wakes it first; the LISTEN
    # connection must stay usable, wherever the cancellation lands.
    for steps in range(8):
        waiters = [asyncio.create_task(store.due_notice_wait(20)) for _ in range(2)]
        for _ in range(steps):
            await asyncio.sleep(0)  # let the waiters get a little further each round
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert all(w.cancelled() for w in waiters)
    waiter = asyncio.create_task(store.due_notice_wait(20))
    await other.run_insert(make_run(job, RunStatus.PENDING,
                                    scheduled_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert await waiter is True

    # Creating a job whose first run is due now wakes the watchers too.
    created = make_job()
    waiter = asyncio.create_task(store.due_notice_wait(20))
    await other.job_create(created, make_run(created, RunStatus.PENDING,
                                             scheduled_at=datetime.now(UTC)))
    assert await waiter is True


# --- PostgreSQL only -------------------------------------------------------------------------


@pytest.mark.postgres
async def test_pg_events_of_transactions_committing_out_of_order_are_not_skipped(
        pg_store: PostgresStore) -> None:
    """Two transactions append events; the one holding the lower position commits last. A
    consumer that moves its cursor past an event visible early must still get the late one."""
    job = await with_job(pg_store)
    insert = sql.SQL("INSERT INTO run_events (job_id, run_id, status, emitted_at) "
                     "VALUES (%s, %s, 'SUCCEEDED', now()) RETURNING event_id")
    async with await connect(pg_store) as early, await connect(pg_store) as late:
        await early.execute("BEGIN")
        await late.execute("BEGIN")
        # `early` gets its transaction id first, `late` appends its event first.
        await early.execute("SELECT pg_current_xact_id()")
        await late.execute(insert, (job.job_id, "late-run"))
        await early.execute(insert, (job.job_id, "early-run"))
        await early.execute("COMMIT")

        # `late` is still open: nothing it wrote is visible, and nothing after it is handed out
        # as final before it ends.
        seen = await visible_events(pg_store, 0, 1)
        assert [e.run_id for e in seen] == ["early-run"]
        cursor = seen[-1].event_id

        await late.execute("COMMIT")
        after = await visible_events(pg_store, cursor, 1)
        assert [e.run_id for e in after] == ["late-run"]

        # And the mirror case: the later transaction commits first; its event waits.
        await early.execute("BEGIN")
        await early.execute(insert, (job.job_id, "first-begun"))
        await late.execute("BEGIN")
        await late.execute(insert, (job.job_id, "second-begun"))
        await late.execute("COMMIT")
        assert await pg_store.events_after(after[-1].event_id, 10) == []
        await early.execute("COMMIT")
        tail = await visible_events(pg_store, after[-1].event_id, 2)
        assert [e.run_id for e in tail] == ["first-begun", "second-begun"]


async def connect(store: PostgresStore) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True)
    await conn.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                       (store.schema,))
    return conn


@pytest.mark.postgres
async def test_pg_partitions_move_rows_out_of_default_and_expire(pg_env: StoreEnv) -> None:
    # Without monthly partitions (test_pg_partitions.py has them), runs past the daily window
    # wait in the default partition.
    pg_store: PostgresStore = pg_env.open(partition_far_months=0, partition_ahead_days=7)
    await pg_store.migrate()
    now = half_past()
    job = await with_job(pg_store, now=now - timedelta(days=1))
    far = await run_in(pg_store, job, RunStatus.PENDING, scheduled_at=now + timedelta(days=20))
    done = await run_in(pg_store, job, RunStatus.SUCCEEDED, scheduled_at=now)
    still_open = await run_in(pg_store, job, RunStatus.PENDING,
                              scheduled_at=now + timedelta(days=1))
    assert await partition_of(pg_store, far) == "job_runs_default"

    await pg_store.partitions_maintain(now + timedelta(days=15))  # now reaches day + 20

    assert await partition_of(pg_store, far) == f"job_runs_p{far.scheduled_at:%Y%m%d}"
    assert await pg_store.run_get(far.run_id) == far
    assert await pg_store.run_get(done.run_id) == done  # retention not reached yet

    await pg_store.partitions_maintain(now + timedelta(days=pg_store.retention_days + 3))

    assert await pg_store.run_get(done.run_id) is None  # its day was dropped
    assert f"job_runs_p{now:%Y%m%d}" not in await partitions(pg_store)
    assert await pg_store.run_get(still_open.run_id) == still_open  # open runs are kept
    assert f"job_runs_p{still_open.scheduled_at:%Y%m%d}" in await partitions(pg_store)


async def partition_of(store: PostgresStore, run: JobRun) -> str:
    async with await connect(store) as conn:
        cur = await conn.execute("SELECT tableoid::regclass::text FROM job_runs WHERE run_id = %s",
                                 (run.run_id,))
        row = await cur.fetchone()
        assert row is not None
        return str(row[0])


async def partitions(store: PostgresStore) -> set[str]:
    async with await connect(store) as conn:
        cur = await conn.execute("SELECT inhrelid::regclass::text FROM pg_inherits "
                                 "WHERE inhparent = 'job_runs'::regclass")
        return {str(r[0]) for r in await cur.fetchall()}


@pytest.mark.postgres
async def test_pg_survives_its_connections_being_killed(pg_env: StoreEnv,
                                                        pg_store: PostgresStore) -> None:
    """What a PostgreSQL restart does to the pool and the listener, on this store's sessions
    only."""
    job = await with_job(pg_store)
    assert await pg_store.due_notice_wait(0) is False  # opens the LISTEN connection
    killed = await terminate_sessions(pg_store)
    assert killed >= 2  # at least one pooled connection and the listener

    await pg_store.ping()  # the pool noticed and reconnected
    assert await pg_store.job_get_any(job.job_id) == job
    assert await pg_store.due_notice_wait(0.05) is False  # a broken listener degrades to a wait
    assert await pg_store.due_notice_wait(0) is False  # ... and LISTENs again
    other: PostgresStore = pg_env.open()
    waiter = asyncio.create_task(pg_store.due_notice_wait(20))
    await other.run_insert(make_run(job, RunStatus.PENDING, scheduled_at=datetime.now(UTC)))
    assert await waiter is True


async def terminate_sessions(store: PostgresStore) -> int:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name LIKE %s AND pid <> pg_backend_pid()",
            (f"onthedot/{store.schema}%",),
        )
        row = await cur.fetchone()
        assert row is not None
        count = int(row[0])

        async def gone() -> bool:
            cur = await conn.execute("SELECT count(*) FROM pg_stat_activity "
                                     "WHERE application_name LIKE %s",
                                     (f"onthedot/{store.schema}%",))
            left = await cur.fetchone()
            return left is not None and left[0] == 0

        await wait_until(gone, within=30, what="the terminated sessions to end")
        return count


@pytest.mark.postgres
async def test_pg_unreachable_server_is_a_backend_error() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1",
                          schema="t_unreachable", pool_timeout_seconds=0.5)
    try:
        with pytest.raises(BackendError) as caught:
            await store.ping()
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_pg_run_ids_must_encode_scheduled_at(pg_store: PostgresStore) -> None:
    job = await with_job(pg_store)
    run = make_run(job, RunStatus.PENDING, scheduled_at=half_past())
    with pytest.raises(psycopg.errors.CheckViolation):
        await pg_store.run_insert(replace(run, run_id=f"{job.job_id}-manual"))


@pytest.mark.postgres
async def test_pg_watermark_waits_for_runs_another_transaction_holds(
        pg_store: PostgresStore) -> None:
    """SKIP LOCKED passes over a row another transaction holds. If that transaction rolls back
    the row is still PENDING, so the bucket was not drained and the watermark must stay."""
    now = half_past()
    job = await with_job(pg_store, now=now - timedelta(days=1))
    held = await run_in(pg_store, job, RunStatus.PENDING, scheduled_at=now - timedelta(hours=2))
    free = await run_in(pg_store, job, RunStatus.PENDING, scheduled_at=now - timedelta(hours=1))

    async with await connect(pg_store) as other:
        await other.execute("BEGIN")
        await other.execute("SELECT 1 FROM job_runs WHERE run_id = %s FOR UPDATE",
                            (held.run_id,))
        got = await claim(pg_store, held.shard, now)
        assert [r.run_id for r in got.enqueued] == [free.run_id]
        assert await pg_store.shard_watermark(held.shard) == held.time_bucket
        await other.execute("ROLLBACK")

    got = await claim(pg_store, held.shard, now)
    assert [r.run_id for r in got.enqueued] == [held.run_id]
    assert await pg_store.shard_watermark(held.shard) == time_bucket_of(
        now - timedelta(seconds=MARGIN_SECONDS))
