"""A job's status follows its open runs (issue 18 §1.2, §1.6), on both stores.

* A one-time job whose time is changed while its run is RUNNING stays scheduled when that run
  ends: its new run is still open. It completes (or fails) only once no run of it is open, with
  the outcome of the last run to end, and it can still be paused in between.
* A finished one-time or immediate job whose dead-lettered run is redriven is scheduled again
  (in the redrive's transaction) until that run ends, then completed or failed by its outcome,
  whether or not the run's FAILED event was applied before the redrive.
* A run-now of a finished one-time job decides its status the same way when it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from onthedot.domain.models import JobParams, JobStatus, RetryPolicy, RunStatus
from onthedot.service import JobPatch
from tests.engine.conftest import Engine
from tests.engine.test_races import services
from tests.support.waiting import async_wait_until
from tests.support.webhook import WebhookReceiver

OPEN = {RunStatus.PENDING, RunStatus.ENQUEUED, RunStatus.RUNNING, RunStatus.RETRYING}
TRIALS = 10


async def _stored_status(engine: Engine, job_id: str) -> JobStatus:
    job = await engine.rt.store.job_get_any(job_id)
    assert job is not None
    return job.status


async def _open_runs(engine: Engine, job_id: str) -> list[RunStatus]:
    runs = await engine.rt.store.runs_list(job_id, 100, None)
    return [r.status for r in runs if r.status in OPEN]


async def _one_time_run_held(engine: Engine, webhook: WebhookReceiver,
                             action: dict[str, object]) -> tuple[str, datetime, asyncio.Task[None]]:
    """A one-time webhook job (one attempt) whose run is dispatched and RUNNING inside its
    webhook call, held there by ``webhook``'s hold settings: the job id, its time, and the
    worker task that records the run once the webhook is released."""
    at = engine.clock.now() + timedelta(minutes=10)
    view = await engine.create(JobParams(type="one-time", time=at.isoformat()),
                               {"type": "webhook", "url": webhook.url, **action},
                               retry_policy=RetryPolicy(max_attempts=1))
    engine.clock.set(at)
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    working = asyncio.create_task(_work_one(engine))
    try:
        await async_wait_until(lambda: _true(webhook.count() == 1), 15, "the run to be RUNNING")
    except BaseException:
        webhook.release()
        working.cancel()
        raise
    return view.job.job_id, at, working


async def _changed_while_running(engine: Engine, webhook: WebhookReceiver,
                                 outcome: int) -> tuple[str, str]:
    """A one-time job whose run is held RUNNING inside its webhook call while its time is
    changed; the call then answers ``outcome`` and the worker records it. Returns the job id
    and the new time."""
    webhook.hold_all = True
    webhook.status_for = lambda _r, n: outcome if n == 1 else 200
    job_id, at, working = await _one_time_run_held(engine, webhook, {})
    try:
        later = at + timedelta(hours=1)
        await engine.rt.service.update_job("alice", job_id, JobPatch(
            params=JobParams(type="one-time", time=later.isoformat())))
    finally:
        webhook.release()
        await working
    await _apply_events(engine)  # the old run's event
    return job_id, later.isoformat()


async def _true(value: bool) -> bool:
    return value


async def _tick_until(engine: Engine, probe: Callable[[], Awaitable[bool]], what: str) -> None:
    """Tick every role until ``probe`` holds: on NATS a message may take a moment to be
    received, so one quiet tick does not mean that nothing is left to do."""
    async def ticked() -> bool:
        await engine.tick()
        return await probe() and await _caught_up(engine)

    await async_wait_until(ticked, 30, what)


async def _apply_events(engine: Engine) -> None:
    """Only the recurring watcher, until every event so far is applied."""
    async def applied() -> bool:
        await engine.recurring.run_once()
        return await _caught_up(engine)

    await async_wait_until(applied, 30, "the recurring watcher to apply every event")


async def _work_one(engine: Engine) -> None:
    """Only the worker, until it handled a message (on NATS one may take a moment to arrive)."""
    async def handled() -> bool:
        return await engine.worker.run_once() > 0

    await async_wait_until(handled, 30, "the worker to receive a run")


async def _caught_up(engine: Engine) -> bool:
    later = engine.clock.now() + timedelta(seconds=1)  # any event not applied yet shows as lag
    return await engine.rt.store.events_lag("recurring", later) == 0


async def _ends_as(engine: Engine, job_id: str, status: JobStatus) -> None:
    async def ended() -> bool:
        return (await _stored_status(engine, job_id) is status
                and await _open_runs(engine, job_id) == [])

    await _tick_until(engine, ended, f"the job to end {status.value} with no open run")


async def test_a_one_time_job_changed_while_running_completes_after_its_new_run(
        both: Engine, webhook: WebhookReceiver) -> None:
    job_id, later = await _changed_while_running(both, webhook, 200)

    assert await _stored_status(both, job_id) is JobStatus.SCHEDULED, \
        "completed while its new run is still open"
    assert await _open_runs(both, job_id) == [RunStatus.PENDING]
    assert (await both.rt.store.job_get_any(job_id)).next_run_at.isoformat() == later  # type: ignore[union-attr]
    both.clock.advance(3600)
    await _ends_as(both, job_id, JobStatus.COMPLETED)
    assert webhook.count() == 2


async def test_a_one_time_job_changed_while_running_can_be_paused_after_the_old_run(
        both: Engine, webhook: WebhookReceiver) -> None:
    job_id, _later = await _changed_while_running(both, webhook, 500)

    assert await _stored_status(both, job_id) is JobStatus.SCHEDULED, \
        "failed while its new run is still open"
    paused = await both.rt.service.pause_job("alice", job_id)  # not 409 not_pausable
    assert paused.status == "paused"
    both.clock.advance(7200)
    await both.settle()
    assert webhook.count() == 1, "a paused job executed its new run"
    assert await _open_runs(both, job_id) == []


async def test_the_new_run_ending_first_leaves_the_job_to_the_last_run(
        both: Engine, webhook: WebhookReceiver) -> None:
    # The old run is still RUNNING when the new one (due at once) has ended: the job waits
    # for the old one and takes the outcome of the last run to end.
    webhook.hold = lambda r, _n: r.body == {"old": True}
    job_id, at, working = await _one_time_run_held(both, webhook, {"body": {"old": True}})
    try:
        soon = at + timedelta(seconds=5)
        await both.rt.service.update_job("alice", job_id, JobPatch(
            params=JobParams(type="one-time", time=soon.isoformat()),
            action={"type": "webhook", "url": webhook.url, "body": {"new": True}}))
        both.clock.set(soon)

        async def new_run_done() -> bool:
            runs = await both.rt.store.runs_list(job_id, 10, None)
            return [r.status for r in runs if r.scheduled_at == soon] == [RunStatus.SUCCEEDED]

        await _tick_until(both, new_run_done, "the new run to succeed and its event applied")
        assert await _stored_status(both, job_id) is JobStatus.SCHEDULED, \
            "completed while the old run is still RUNNING"
        webhook.status_for = lambda r, _n: 500 if r.body == {"old": True} else 200
    finally:
        webhook.release()
        await working
    await _ends_as(both, job_id, JobStatus.FAILED)  # the old run ended last


async def _dead_lettered_immediate(engine: Engine, webhook: WebhookReceiver) -> tuple[str, str]:
    webhook.status_for = lambda _r, n: 500 if n == 1 else 200
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "webhook", "url": webhook.url},
                               retry_policy=RetryPolicy(max_attempts=1))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    await _work_one(engine)
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.FAILED
    assert run.dead_lettered
    return view.job.job_id, run.run_id


async def test_a_redriven_run_of_a_failed_job_schedules_it_until_the_run_ends(
        both: Engine, webhook: WebhookReceiver) -> None:
    job_id, run_id = await _dead_lettered_immediate(both, webhook)
    await _apply_events(both)
    assert await _stored_status(both, job_id) is JobStatus.FAILED

    await both.rt.service.redrive("alice", run_id)

    assert await _stored_status(both, job_id) is JobStatus.SCHEDULED
    assert (await both.rt.service.get_job("alice", job_id)).status == "scheduled"
    await _ends_as(both, job_id, JobStatus.COMPLETED)
    assert webhook.count() == 2
    assert (await both.rt.service.get_job("alice", job_id)).job.next_run_at is None


async def test_a_run_redriven_before_its_failure_was_applied_does_not_fail_the_job(
        both: Engine, webhook: WebhookReceiver) -> None:
    job_id, run_id = await _dead_lettered_immediate(both, webhook)

    await both.rt.service.redrive("alice", run_id)  # its FAILED event is not applied yet
    await _apply_events(both)

    assert await _stored_status(both, job_id) is JobStatus.SCHEDULED, \
        "failed while its redriven run is open"
    await _ends_as(both, job_id, JobStatus.COMPLETED)


async def test_a_redriven_run_now_of_a_failed_job_completes_it(
        both: Engine, webhook: WebhookReceiver) -> None:
    job_id, _run_id = await _dead_lettered_immediate(both, webhook)
    await _apply_events(both)
    webhook.status_for = lambda _r, _n: 500  # the run-now fails too, and is dead-lettered
    both.clock.advance(60)  # a run-now at the job's own instant would be its scheduled run
    manual = await both.rt.service.run_job_now("alice", job_id)
    await _ends_as(both, job_id, JobStatus.FAILED)
    stored = await both.rt.store.run_get(manual.run_id)
    assert stored is not None
    assert stored.kind == "manual"
    assert stored.dead_lettered

    webhook.status_for = lambda _r, _n: 200
    await both.rt.service.redrive("alice", manual.run_id)

    await _ends_as(both, job_id, JobStatus.COMPLETED)


async def test_a_new_time_racing_the_event_of_the_old_run_keeps_one_time_invariants(
        both: Engine) -> None:
    # The change lands before, during or after the event of the run it replaces is applied;
    # whatever the order, a scheduled one-time job has its one open run at next_run_at and an
    # ended one has none.
    apis, stores = await services(both)
    try:
        for trial in range(TRIALS):
            both.clock.advance(600)
            at = both.clock.now() + timedelta(seconds=30)
            view = await both.create(JobParams(type="one-time", time=at.isoformat()))
            job_id = view.job.job_id
            both.clock.set(at)
            await both.dispatcher.refresh_shards()
            await both.dispatcher.run_once()
            await _work_one(both)  # its run ended: its event waits for the recurring watcher
            later = JobParams(type="one-time", time=(at + timedelta(hours=1)).isoformat())
            change = apis[trial % len(apis)].update_job("alice", job_id, JobPatch(params=later))
            if trial % 3 == 0:  # the change first, then the old run's event
                await change
                await _apply_events(both)
            elif trial % 3 == 1:  # the event first (the job ended), then the change revives it
                await _apply_events(both)
                await change
            else:  # at the same moment
                await asyncio.gather(change, both.recurring.run_once())
                await _apply_events(both)

            job = await both.rt.store.job_get_any(job_id)
            assert job is not None
            runs = await both.rt.store.runs_list(job_id, 100, None)
            open_runs = [r for r in runs if r.status in OPEN]
            if job.status is JobStatus.SCHEDULED:
                assert [r.scheduled_at for r in open_runs] == [job.next_run_at], runs
            else:
                assert open_runs == [], f"{job.status.value} job with open runs {open_runs}"
    finally:
        for store in stores:
            await store.close()
