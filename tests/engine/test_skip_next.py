"""Skip next: the next occurrence of a recurring job is marked SKIPPED (with its run event) and
the following ones run as scheduled, on SQLite and on PostgreSQL with NATS."""

from __future__ import annotations

from datetime import timedelta

import pytest

from onthedot.domain.errors import ConflictError
from onthedot.domain.history import ChangeAction
from onthedot.domain.models import JobParams, JobRun, JobStatus, RunStatus
from onthedot.store.base import SKIP_ERROR
from tests.engine.conftest import Engine
from tests.support.waiting import async_wait_until

HOURLY = JobParams(type="recurring", schedule="0 * * * *")


async def test_skip_next_skips_one_occurrence_and_keeps_the_rest(both: Engine) -> None:
    view = await both.create(HOURLY)
    first = view.job.next_run_at
    assert first is not None

    skipped = await both.rt.service.skip_next("alice", view.job.job_id)

    assert skipped.run.status is RunStatus.SKIPPED
    assert skipped.run.scheduled_at == first
    assert skipped.view.job.next_run_at == first + timedelta(hours=1)
    runs = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    assert [(r.status, r.scheduled_at) for r in runs] == [
        (RunStatus.PENDING, first + timedelta(hours=1)), (RunStatus.SKIPPED, first)]
    assert runs[1].error == SKIP_ERROR
    # The skip's run event reaches the recurring watcher, which adds no second open run.
    both.clock.set(first + timedelta(minutes=1))
    await both.settle()
    runs = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.status for r in runs] == [RunStatus.PENDING, RunStatus.SKIPPED]
    # The occurrence after the skipped one runs, and the schedule goes on.
    both.clock.set(first + timedelta(hours=1, seconds=5))

    async def ran() -> list[JobRun]:
        # On PostgreSQL a run event is read once every older transaction of the server ended.
        await both.tick()
        found = (await both.rt.service.list_runs("alice", view.job.job_id)).items
        return found if len(found) == 3 else []

    runs = await async_wait_until(ran, 30, "the occurrence after the skipped one to run")
    assert [(r.status, r.scheduled_at) for r in runs] == [
        (RunStatus.PENDING, first + timedelta(hours=2)),
        (RunStatus.SUCCEEDED, first + timedelta(hours=1)), (RunStatus.SKIPPED, first)]
    history = (await both.rt.service.job_history("alice", view.job.job_id)).items
    assert [c.action for c in history] == [ChangeAction.SKIP, ChangeAction.CREATE]
    assert history[0].details["run_id"] == skipped.run.run_id


async def test_skip_next_twice_skips_two_occurrences(both: Engine) -> None:
    view = await both.create(HOURLY)
    first = view.job.next_run_at
    assert first is not None
    await both.rt.service.skip_next("alice", view.job.job_id)
    again = await both.rt.service.skip_next("alice", view.job.job_id)
    assert again.run.scheduled_at == first + timedelta(hours=1)
    assert again.view.job.next_run_at == first + timedelta(hours=2)


async def test_skip_next_is_refused_once_the_run_is_dispatched(both: Engine) -> None:
    view = await both.create(HOURLY)
    assert view.job.next_run_at is not None
    both.clock.set(view.job.next_run_at)
    await both.dispatcher.refresh_shards()
    assert await both.dispatcher.run_once() == 1  # the run is ENQUEUED now
    with pytest.raises(ConflictError) as refused:
        await both.rt.service.skip_next("alice", view.job.job_id)
    assert refused.value.code == "run_started"
    runs = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.status for r in runs] == [RunStatus.ENQUEUED]


@pytest.mark.parametrize(("params", "pause", "code"), [
    (JobParams(type="one-time", time="2026-06-23T09:00:00", timezone="Asia/Taipei"), False,
     "not_recurring"),
    (HOURLY, True, "not_skippable"),
])
async def test_skip_next_refusals(engine: Engine, params: JobParams, pause: bool,
                                  code: str) -> None:
    view = await engine.create(params)
    if pause:
        await engine.rt.service.pause_job("alice", view.job.job_id)
    with pytest.raises(ConflictError) as refused:
        await engine.rt.service.skip_next("alice", view.job.job_id)
    assert refused.value.code == code
    after = await engine.rt.service.get_job("alice", view.job.job_id)
    assert after.job.status is (JobStatus.PAUSED if pause else JobStatus.SCHEDULED)
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert RunStatus.SKIPPED not in {r.status for r in runs}
