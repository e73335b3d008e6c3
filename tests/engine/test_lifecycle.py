"""Immediate, one-time and recurring jobs fire on time and keep their outputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from onthedot.domain.errors import ConflictError
from onthedot.domain.models import JobParams, JobStatus, RunStatus
from onthedot.service import JobPatch
from tests.engine.conftest import Engine
from tests.support.webhook import WebhookReceiver


async def test_immediate_job_fires_at_once_and_keeps_output(engine: Engine) -> None:
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "message", "text": "hello there"})
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED]
    assert runs[0].output == {"message": "hello there", "job": "hello there"}
    assert runs[0].attempt == 1
    job = await engine.rt.service.get_job("alice", view.job.job_id)
    assert job.status == "completed"
    assert job.job.next_run_at is None


async def test_one_time_job_waits_for_its_time(engine: Engine, webhook: WebhookReceiver) -> None:
    at = engine.clock.now() + timedelta(minutes=10)
    view = await engine.create(JobParams(type="one-time", time=at.isoformat()),
                               {"type": "webhook", "url": webhook.url, "body": {"x": 1}})
    await engine.settle()
    assert webhook.count() == 0, "fired before its time"
    engine.clock.set(at)
    await engine.settle()
    assert webhook.count() == 1
    got = webhook.received[0]
    assert got.body == {"x": 1}
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert got.idempotency_key == run.run_id
    assert run.status is RunStatus.SUCCEEDED
    assert run.output["status_code"] == 200
    assert (await engine.rt.store.job_get("alice", view.job.job_id)).status is JobStatus.COMPLETED


async def test_recurring_job_fires_each_occurrence_and_schedules_the_next(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="0 8 * * *",
                                         timezone="Asia/Taipei"))
    # START is 08:00:30 in Taipei, so the first occurrence is tomorrow 08:00 Taipei.
    first = datetime(2026, 6, 23, 0, 0, tzinfo=UTC)
    assert view.job.next_run_at == first
    for day in range(3):
        engine.clock.set(first + timedelta(days=day, seconds=1))
        await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    finished = [r for r in runs if r.status is RunStatus.SUCCEEDED]
    pending = [r for r in runs if r.status is RunStatus.PENDING]
    assert [r.scheduled_at for r in finished] == [first + timedelta(days=d) for d in (2, 1, 0)]
    assert [r.scheduled_at for r in pending] == [first + timedelta(days=3)]
    job = await engine.rt.service.get_job("alice", view.job.job_id)
    assert job.job.next_run_at == first + timedelta(days=3)
    assert job.status == "scheduled"
    assert job.last_run is not None
    assert job.last_run.scheduled_at == first + timedelta(days=2)


async def test_paused_job_does_not_fire_and_resumes_after_now(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="*/5 * * * *"))
    job_id = view.job.job_id
    await engine.rt.service.pause_job("alice", job_id)
    engine.clock.advance(minutes=30)
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    assert all(r.status is RunStatus.CANCELLED for r in runs)
    resumed = await engine.rt.service.resume_job("alice", job_id)
    assert resumed.job.next_run_at is not None
    assert resumed.job.next_run_at > engine.clock.now()
    engine.clock.set(resumed.job.next_run_at)
    await engine.settle()
    statuses = [r.status for r in (await engine.rt.service.list_runs("alice", job_id)).items]
    assert statuses.count(RunStatus.SUCCEEDED) == 1


async def test_a_one_time_time_missed_while_paused_is_not_made_up(engine: Engine) -> None:
    """resume_task's rule, also POST :resume's: missed runs are not made up. A one-time job
    whose time passed (by more than the misfire grace, 60 s here) is not resumed; it stays
    paused, without an open run, until it gets a new time."""
    at = engine.clock.now() + timedelta(minutes=10)
    view = await engine.create(JobParams(type="one-time", time=at.isoformat()))
    job_id = view.job.job_id
    await engine.rt.service.pause_job("alice", job_id)
    engine.clock.set(at + timedelta(seconds=61))
    await engine.settle()
    with pytest.raises(ConflictError) as refused:
        await engine.rt.service.resume_job("alice", job_id)
    assert (refused.value.code, refused.value.field) == ("time_passed", "job_params.time")
    assert "00:10+00:00" in refused.value.message  # the time, in the job's timezone
    job = await engine.rt.service.get_job("alice", job_id)
    assert (job.status, job.job.next_run_at) == ("paused", None)
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    assert [r.status for r in runs] == [RunStatus.CANCELLED]

    new = engine.clock.now() + timedelta(minutes=5)
    await engine.rt.service.update_job("alice", job_id, JobPatch(
        params=JobParams(type="one-time", time=new.isoformat())))
    resumed = await engine.rt.service.resume_job("alice", job_id)
    assert resumed.job.next_run_at == new


async def test_a_one_time_job_resumed_within_the_grace_runs(engine: Engine) -> None:
    at = engine.clock.now() + timedelta(minutes=10)
    view = await engine.create(JobParams(type="one-time", time=at.isoformat()))
    await engine.rt.service.pause_job("alice", view.job.job_id)
    engine.clock.set(at + timedelta(seconds=59))  # late, but not missed
    resumed = await engine.rt.service.resume_job("alice", view.job.job_id)
    assert resumed.job.next_run_at == at
    await engine.settle()
    job = await engine.rt.service.get_job("alice", view.job.job_id)
    assert job.status == "completed"


async def test_an_immediate_job_paused_before_it_ran_follows_the_same_rule(
        engine: Engine) -> None:
    view = await engine.create(JobParams(type="immediate"))
    await engine.rt.service.pause_job("alice", view.job.job_id)  # before any tick
    engine.clock.advance(minutes=5)
    with pytest.raises(ConflictError, match="missed runs are not made up"):
        await engine.rt.service.resume_job("alice", view.job.job_id)
    # One run now is the way to still do it, and it leaves the job paused.
    run = await engine.rt.service.run_job_now("alice", view.job.job_id)
    await engine.settle()
    done = await engine.rt.store.run_get(run.run_id)
    assert done is not None
    assert done.status is RunStatus.SUCCEEDED


async def test_deleted_job_gets_no_next_run(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="*/5 * * * *"))
    await engine.rt.service.delete_job("alice", view.job.job_id)
    engine.clock.advance(hours=1)
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.status for r in runs] == [RunStatus.CANCELLED]
    assert (await engine.rt.service.get_job("alice", view.job.job_id)).status == "cancelled"


async def test_run_now_adds_a_run_without_moving_the_schedule(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="0 8 * * *"))
    run = await engine.rt.service.run_job_now("alice", view.job.job_id)
    await engine.settle()
    got = await engine.rt.store.run_get(run.run_id)
    assert got is not None
    assert got.status is RunStatus.SUCCEEDED
    assert got.kind == "manual"
    job = await engine.rt.service.get_job("alice", view.job.job_id)
    assert job.job.next_run_at == view.job.next_run_at


async def test_one_time_job_rescheduled_while_paused_fires_at_the_new_time(engine: Engine) -> None:
    old = engine.clock.now() + timedelta(minutes=10)
    new = engine.clock.now() + timedelta(minutes=30)
    view = await engine.create(JobParams(type="one-time", time=old.isoformat()))
    job_id = view.job.job_id
    await engine.rt.service.pause_job("alice", job_id)
    await engine.rt.service.update_job("alice", job_id, JobPatch(
        params=JobParams(type="one-time", time=new.isoformat())))
    resumed = await engine.rt.service.resume_job("alice", job_id)
    assert resumed.job.next_run_at == new
    engine.clock.set(old + timedelta(seconds=1))
    await engine.settle()
    assert (await engine.rt.service.get_job("alice", job_id)).status == "scheduled"
    engine.clock.set(new)
    await engine.settle()
    assert (await engine.rt.service.get_job("alice", job_id)).status == "completed"
