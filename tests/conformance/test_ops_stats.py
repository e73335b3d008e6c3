"""Store conformance: what a metrics scrape reads from shared state (runs_oldest_due).

Every backend, the same assertions: which runs count as due and not started, and from which
instant each kind counts.
"""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.ids import DEFAULT_SHARDS, shard_of
from onthedot.domain.models import RunStatus
from onthedot.store.base import Store

from .test_store import half_past, run_in, with_job


async def test_nothing_due_is_none(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    await run_in(store, job, RunStatus.PENDING, scheduled_at=now + timedelta(minutes=5))
    await run_in(store, job, RunStatus.RUNNING, scheduled_at=now - timedelta(minutes=20))
    await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=now - timedelta(minutes=25))
    await run_in(store, job, RunStatus.RETRYING, scheduled_at=now - timedelta(minutes=15),
                 now=now)  # its retry_at is ahead of now
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) is None


async def test_oldest_pending_across_shards(store: Store) -> None:
    now = half_past()
    # Jobs in several shards, so the per-shard probes must all be looked at.
    jobs = [await with_job(store) for _ in range(6)]
    assert len({shard_of(j.job_id) for j in jobs}) > 1
    oldest = now - timedelta(minutes=17, seconds=3)
    for i, job in enumerate(jobs):
        await run_in(store, job, RunStatus.PENDING, scheduled_at=now - timedelta(minutes=i))
    await run_in(store, jobs[-1], RunStatus.PENDING, scheduled_at=oldest)
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) == oldest
    # Seen from before any of them was due, nothing is.
    assert await store.runs_oldest_due(oldest - timedelta(seconds=1), DEFAULT_SHARDS) is None


async def test_retry_counts_from_retry_at(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    failed_at = now - timedelta(minutes=10)
    run = await run_in(store, job, RunStatus.RETRYING, scheduled_at=now - timedelta(minutes=20),
                       now=failed_at)
    assert run.retry_at is not None
    assert run.retry_at < now
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) == run.retry_at


async def test_queued_first_attempt_from_schedule_later_ones_from_enqueue(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    first = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(minutes=3),
                         now=now - timedelta(minutes=1))
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) == first.scheduled_at
    # A run handed back after an attempt (a retry, an expired lease) waits since it was queued
    # again, not since its original schedule.
    other = await with_job(store)
    await run_in(store, other, RunStatus.ENQUEUED, attempt=1,
                 scheduled_at=now - timedelta(hours=2, minutes=3),
                 now=now - timedelta(minutes=2))
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) == first.scheduled_at
    await run_in(store, other, RunStatus.ENQUEUED, attempt=2,
                 scheduled_at=now - timedelta(hours=3), now=now - timedelta(minutes=5))
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) == now - timedelta(minutes=5)


async def test_the_oldest_kind_wins(store: Store) -> None:
    now = half_past()
    job = await with_job(store)
    await run_in(store, job, RunStatus.PENDING, scheduled_at=now - timedelta(minutes=2))
    await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now - timedelta(minutes=4))
    retry = await run_in(store, job, RunStatus.RETRYING, scheduled_at=now - timedelta(minutes=9),
                         now=now - timedelta(seconds=5))
    assert retry.retry_at is not None
    assert retry.retry_at > now
    assert await store.runs_oldest_due(now, DEFAULT_SHARDS) == now - timedelta(minutes=4)
    later = retry.retry_at + timedelta(minutes=10)
    assert await store.runs_oldest_due(later, DEFAULT_SHARDS) == now - timedelta(minutes=4)
