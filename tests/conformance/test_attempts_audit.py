"""Store conformance: every attempt of a run is kept, and every change of a job is recorded, each
in the transaction of the transition or change that causes it. Every backend, the same
assertions."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from onthedot.domain.history import (
    LOST_ERROR,
    PREVIEW_MAX_CHARS,
    AttemptStatus,
    ChangeAction,
    JobChange,
)
from onthedot.domain.ids import new_ulid
from onthedot.domain.models import Job, JobRun, JobStatus, RunStatus
from onthedot.store.base import JobSave, Prune, RunClaim, RunFinish, RunRetry, Store

from .factories import new_token
from .test_store import half_past, run_in, with_job

LEASE_SECONDS = 30.0


async def enqueued_run(store: Store, now: datetime) -> tuple[Job, JobRun]:
    job = await with_job(store, now=now - timedelta(hours=1))
    run = await run_in(store, job, RunStatus.ENQUEUED, scheduled_at=now, now=now)
    return job, run


async def claimed(store: Store, run_id: str, now: datetime) -> tuple[JobRun, str]:
    token = new_token()
    run = await store.run_claim(RunClaim(run_id, token, now, LEASE_SECONDS))
    assert run is not None
    return run, token


async def test_each_attempt_is_kept_with_its_error_and_the_last_with_a_bounded_preview(
        store: Store) -> None:
    now = half_past()
    _, run = await enqueued_run(store, now)
    for n in range(2):
        at = now + timedelta(minutes=n)
        _, token = await claimed(store, run.run_id, at)
        assert await store.run_retry(RunRetry(run.run_id, token, f"HTTP 503 (try {n + 1})",
                                              at + timedelta(seconds=5),
                                              retry_at=at + timedelta(seconds=10)))
        assert await store.runs_retry_due(at + timedelta(seconds=10), 10)
    at = now + timedelta(minutes=5)
    _, token = await claimed(store, run.run_id, at)
    assert await store.run_finish(RunFinish(run.run_id, token, RunStatus.SUCCEEDED,
                                            at + timedelta(seconds=2),
                                            output={"body": "x" * 5000})) is not None

    attempts = await store.run_attempts(run.run_id, 100)
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, AttemptStatus.FAILED), (2, AttemptStatus.FAILED), (3, AttemptStatus.SUCCEEDED)]
    assert [a.error for a in attempts] == ["HTTP 503 (try 1)", "HTTP 503 (try 2)", None]
    assert attempts[0].started_at == now
    assert attempts[0].finished_at == now + timedelta(seconds=5)
    assert attempts[2].finished_at == at + timedelta(seconds=2)
    preview = attempts[2].preview
    assert preview is not None
    assert preview.startswith('{"body": "xxx')
    assert len(preview) == PREVIEW_MAX_CHARS
    # The run itself keeps the whole output.
    stored = await store.run_get(run.run_id)
    assert stored is not None
    assert stored.output == {"body": "x" * 5000}


async def test_a_crashed_attempt_shows_as_lost_when_the_run_is_claimed_again(
        store: Store) -> None:
    now = half_past()
    _, run = await enqueued_run(store, now)
    _, crashed = await claimed(store, run.run_id, now)
    later = now + timedelta(seconds=LEASE_SECONDS + 1)  # its lease ran out
    _, token = await claimed(store, run.run_id, later)
    # The crashed worker's late result is fenced: its attempt stays lost.
    assert await store.run_finish(RunFinish(run.run_id, crashed, RunStatus.SUCCEEDED,
                                            later, output="late")) is None
    assert await store.run_finish(RunFinish(run.run_id, token, RunStatus.FAILED, later,
                                            error="boom", dead_lettered=True)) is not None
    attempts = await store.run_attempts(run.run_id, 100)
    assert [(a.attempt, a.status, a.error) for a in attempts] == [
        (1, AttemptStatus.LOST, LOST_ERROR), (2, AttemptStatus.FAILED, "boom")]
    assert attempts[0].finished_at == later
    assert attempts[0].preview is None


async def test_the_rescuer_marks_the_expired_attempt_lost_and_a_release_is_kept_apart(
        store: Store) -> None:
    now = half_past()
    _, run = await enqueued_run(store, now)
    _, token = await claimed(store, run.run_id, now)
    assert await store.run_release(run.run_id, token, now + timedelta(seconds=1))
    running, _ = await claimed(store, run.run_id, now + timedelta(seconds=2))
    assert running.attempt == 1  # the released attempt was not counted
    expired = now + timedelta(seconds=LEASE_SECONDS + 5)
    assert await store.run_requeue(running, expired) is not None
    attempts = await store.run_attempts(run.run_id, 100)
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, AttemptStatus.RELEASED), (1, AttemptStatus.LOST)]
    assert attempts[1].finished_at == expired


async def test_attempts_survive_a_redrive_and_old_ones_are_pruned(store: Store) -> None:
    now = half_past()
    job, run = await enqueued_run(store, now)
    _, token = await claimed(store, run.run_id, now)
    assert await store.run_finish(RunFinish(run.run_id, token, RunStatus.FAILED, now,
                                            error="gone", dead_lettered=True))
    redrive = JobChange(change_id=new_ulid(now), job_id=job.job_id, actor="user-1",
                        action=ChangeAction.REDRIVE, changed_at=now, channel="api",
                        details={"run_id": run.run_id})
    assert await store.run_redrive(run.run_id, now, redrive) is not None
    assert await store.run_redrive(run.run_id, now, replace(
        redrive, change_id=new_ulid(now))) is None  # not dead-lettered any more: no entry
    _, token = await claimed(store, run.run_id, now + timedelta(minutes=1))
    attempts = await store.run_attempts(run.run_id, 100)
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, AttemptStatus.FAILED), (1, AttemptStatus.RUNNING)]
    assert [c.action for c in await store.job_changes(job.job_id, 10, None)] == [
        ChangeAction.REDRIVE]

    pruned = await store.prune(Prune(before=now + timedelta(seconds=30)))
    assert pruned.attempts == 1  # the ended one; the running attempt stays
    assert [a.status for a in await store.run_attempts(run.run_id, 100)] == [
        AttemptStatus.RUNNING]


async def test_job_changes_land_only_with_the_change_and_page_newest_first(
        store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now)
    saved: Job | None = job
    for n, action in enumerate([ChangeAction.UPDATE, ChangeAction.PAUSE, ChangeAction.RESUME]):
        at = now + timedelta(seconds=n + 1)
        assert saved is not None
        change = JobChange(change_id=new_ulid(at), job_id=job.job_id, actor="user-1",
                           action=action, changed_at=at, channel="mcp",
                           details={"name": {"old": "a", "new": "b"}} if n == 0 else {})
        saved = await store.job_save(JobSave(job=replace(saved, updated_at=at), change=change))
    # A save that lost the race (stale version) writes no history either.
    lost = JobChange(change_id=new_ulid(now + timedelta(seconds=9)), job_id=job.job_id,
                     actor="user-1", action=ChangeAction.DELETE, changed_at=now)
    stale = replace(job, status=JobStatus.CANCELLED)
    assert await store.job_save(JobSave(job=stale, change=lost)) is None

    first = await store.job_changes(job.job_id, 2, None)
    assert [c.action for c in first] == [ChangeAction.RESUME, ChangeAction.PAUSE]
    rest = await store.job_changes(job.job_id, 2, first[-1].change_id)
    assert [c.action for c in rest] == [ChangeAction.UPDATE]
    assert rest[0].details == {"name": {"old": "a", "new": "b"}}
    assert rest[0].channel == "mcp"
    assert rest[0].actor == "user-1"
    assert rest[0].changed_at == now + timedelta(seconds=1)
    assert await store.job_changes("no-such-job", 10, None) == []
