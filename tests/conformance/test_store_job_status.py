"""Store conformance: a job's status follows its open runs, and every way a finished job becomes
active again holds the active-job quota (issue 18 §1.2, §1.6, §2.5). Every backend.

* ``event_apply`` ends a job (completed, failed) only when the applying transaction finds none
  of its runs open: a run inserted by a schedule change, reopened by a redrive, or (for a
  one-time job) a run-now keeps the job as it is, status and next_run_at.
* ``run_redrive`` schedules a finished one-time job again in its own transaction.
* ``job_save`` with ``max_active`` and ``run_redrive`` with ``max_active`` count the user's
  active jobs under the per-user lock creates take: concurrent revivals from several store
  instances (processes) never pass the quota together; a refusal is QuotaError with nothing
  written, distinct from a lost compare-and-set (None).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from onthedot.domain.errors import QuotaError
from onthedot.domain.history import ChangeAction, JobChange
from onthedot.domain.models import Job, JobParams, JobStatus, RunStatus
from onthedot.store.base import ApplyResult, EventApply, JobSave, RunFinish, Store

from .conftest import StoreEnv
from .factories import make_job, make_run
from .test_store import half_past, run_in, visible_events, with_job

QUOTA = 5
FINISHED = 12
INSTANCES = 3
ONE_TIME = JobParams(type="one-time", time="2026-06-22T08:00:00+00:00")


async def _ended(store: Store, job: Job, at: datetime, status: RunStatus) -> EventApply:
    """A run of ``job`` at ``at`` that ended with ``status``, and the decision ending the job
    with it (what the recurring watcher decides for a one-time job)."""
    run = await run_in(store, job, RunStatus.RUNNING, scheduled_at=at, now=at)
    assert run.lease_token is not None
    event = await store.run_finish(RunFinish(run.run_id, run.lease_token, status, at,
                                             dead_lettered=status is RunStatus.FAILED))
    assert event is not None
    await visible_events(store, 0, 1)
    outcome = JobStatus.FAILED if status is RunStatus.FAILED else JobStatus.COMPLETED
    return EventApply(consumer="recurring", previous_event_id=0, event=event,
                      job_version=job.version, insert_run=None, job_status=outcome,
                      next_run_at=None, set_next_run_at=True, wait_for_manual_runs=True)


@pytest.mark.parametrize("kind", ["scheduled", "manual"])
async def test_a_one_time_job_is_not_ended_while_a_run_of_it_is_open(store: Store,
                                                                      kind: str) -> None:
    now = half_past()
    later = now + timedelta(hours=1)
    job = await with_job(store, now=now - timedelta(days=1), params=ONE_TIME, next_run_at=later)
    apply = await _ended(store, job, now - timedelta(minutes=5), RunStatus.SUCCEEDED)
    # Opened while the event's run was running: a new time (PATCH) or a run-now.
    await run_in(store, job, RunStatus.PENDING, scheduled_at=later, kind=kind)

    assert await store.event_apply(apply) is ApplyResult.APPLIED

    kept = await store.job_get_any(job.job_id)
    assert kept is not None
    assert kept.status is JobStatus.SCHEDULED, "ended while a run of it is open"
    assert kept.next_run_at == later
    assert kept.last_run_id == apply.event.run_id


async def test_a_run_now_does_not_hold_a_recurring_job_that_ends(store: Store) -> None:
    # A recurring job's end (its schedule has no occurrence left) waits only for its scheduled
    # runs: a run-now's event decides nothing for it.
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    apply = replace(await _ended(store, job, now - timedelta(minutes=5), RunStatus.SUCCEEDED),
                    wait_for_manual_runs=False)
    await run_in(store, job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1),
                 kind="manual")

    assert await store.event_apply(apply) is ApplyResult.APPLIED

    ended = await store.job_get_any(job.job_id)
    assert ended is not None
    assert ended.status is JobStatus.COMPLETED
    assert ended.next_run_at is None


async def test_a_redriven_run_keeps_its_job_from_failing(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1), params=ONE_TIME, next_run_at=now)
    apply = await _ended(store, job, now - timedelta(minutes=5), RunStatus.FAILED)
    redriven = await store.run_redrive(apply.event.run_id, now)  # before the event is applied
    assert redriven is not None

    assert await store.event_apply(apply) is ApplyResult.APPLIED

    kept = await store.job_get_any(job.job_id)
    assert kept is not None
    assert kept.status is JobStatus.SCHEDULED, "failed while its redriven run is open"


@pytest.mark.parametrize("ended", [JobStatus.FAILED, JobStatus.COMPLETED])
async def test_a_redrive_schedules_a_finished_one_time_job_again(store: Store,
                                                                 ended: JobStatus) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1), params=ONE_TIME, status=ended)
    run = await run_in(store, job, RunStatus.FAILED, scheduled_at=now - timedelta(hours=1),
                       dead_lettered=True)

    assert await store.run_redrive(run.run_id, now, max_active=QUOTA) is not None

    revived = await store.job_get_any(job.job_id)
    assert revived is not None
    assert revived.status is JobStatus.SCHEDULED
    assert revived.next_run_at == now
    assert revived.version == job.version + 1


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.PAUSED, JobStatus.CANCELLED])
async def test_a_redrive_leaves_a_recurring_or_stopped_job_as_it_is(store: Store,
                                                                    status: JobStatus) -> None:
    now = half_past()
    params = None if status is JobStatus.COMPLETED else ONE_TIME  # recurring / one-time
    job = await with_job(store, now=now - timedelta(days=1), status=status,
                         **({"params": params} if params else {}))
    run = await run_in(store, job, RunStatus.FAILED, scheduled_at=now - timedelta(hours=1),
                       dead_lettered=True)

    redriven = await store.run_redrive(run.run_id, now, max_active=QUOTA)

    # A completed recurring job's dead letter is redriven; a paused or deleted job's scheduled
    # run is held back by the job guard (store/job_guard.py). Either way the job is unchanged.
    assert (redriven is not None) == (status is JobStatus.COMPLETED)
    assert await store.job_get_any(job.job_id) == job


async def _finished_jobs(store: Store, count: int, now: datetime) -> list[Job]:
    jobs = [make_job(now=now - timedelta(days=1, seconds=n), params=ONE_TIME,
                     status=JobStatus.COMPLETED) for n in range(count)]
    for job in jobs:
        assert (await store.job_create(job, None)).created
    return jobs


async def _active_jobs(store: Store, count: int, now: datetime) -> None:
    for n in range(count):
        await with_job(store, now=now - timedelta(hours=2, seconds=n))


def _revival(job: Job, now: datetime, max_active: int | None = QUOTA) -> JobSave:
    """What a PATCH giving a finished one-time job a new time saves."""
    later = now + timedelta(hours=1)
    return JobSave(job=replace(job, status=JobStatus.SCHEDULED, next_run_at=later,
                               updated_at=now),
                   cancel_open_runs=True,
                   insert_run=make_run(job, RunStatus.PENDING, scheduled_at=later),
                   change=JobChange(change_id=f"c-{job.job_id}", job_id=job.job_id,
                                    actor="user-1", channel="api", action=ChangeAction.UPDATE,
                                    details={}, changed_at=now),
                   max_active=max_active)


async def test_concurrent_revivals_by_change_never_pass_the_quota(
        store_env: StoreEnv, store: Store) -> None:
    now = half_past()
    await _active_jobs(store, 2, now)
    finished = await _finished_jobs(store, FINISHED, now)
    stores = [store_env.open() for _ in range(INSTANCES)]

    results = await asyncio.gather(*(
        stores[n % INSTANCES].job_save(_revival(job, now)) for n, job in enumerate(finished)),
        return_exceptions=True)

    refused = [r for r in results if isinstance(r, QuotaError)]
    saved = [r for r in results if isinstance(r, Job)]
    assert len(saved) == QUOTA - 2, results
    assert len(refused) == FINISHED - (QUOTA - 2), results
    assert all(e.code == "quota_exceeded" for e in refused)
    assert await store.jobs_count_active("user-1", 100) == QUOTA


async def test_a_refused_revival_writes_nothing_and_a_lost_race_is_none(store: Store) -> None:
    now = half_past()
    await _active_jobs(store, QUOTA, now)
    [job] = await _finished_jobs(store, 1, now)
    save = _revival(job, now)

    with pytest.raises(QuotaError):
        await store.job_save(save)

    assert await store.job_get_any(job.job_id) == job
    assert save.insert_run is not None
    assert await store.run_get(save.insert_run.run_id) is None
    assert await store.job_changes(job.job_id, 10, None) == []
    stale = replace(save, job=replace(save.job, version=job.version + 7))
    assert await store.job_save(stale) is None, "a lost compare-and-set is not a quota answer"
    assert await store.job_save(_revival(job, now, max_active=None)) is not None


async def test_concurrent_revivals_by_redrive_never_pass_the_quota(
        store_env: StoreEnv, store: Store) -> None:
    now = half_past()
    await _active_jobs(store, 2, now)
    finished = await _finished_jobs(store, FINISHED, now)
    dead = [await run_in(store, job, RunStatus.FAILED, scheduled_at=now - timedelta(hours=1),
                         dead_lettered=True) for job in finished]
    stores = [store_env.open() for _ in range(INSTANCES)]

    results = await asyncio.gather(*(
        stores[n % INSTANCES].run_redrive(run.run_id, now, max_active=QUOTA)
        for n, run in enumerate(dead)), return_exceptions=True)

    refused = [r for r in results if isinstance(r, QuotaError)]
    assert len(refused) == FINISHED - (QUOTA - 2), results
    assert await store.jobs_count_active("user-1", 100) == QUOTA
    for run, result in zip(dead, results, strict=True):
        stored = await store.run_get(run.run_id)
        assert stored is not None
        if isinstance(result, QuotaError):  # nothing written: still a dead letter
            assert stored.status is RunStatus.FAILED
            assert stored.dead_lettered
        else:
            assert stored.status is RunStatus.ENQUEUED
