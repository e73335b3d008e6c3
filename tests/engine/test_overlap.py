"""Overlap policy of a recurring job whose previous run is still running when its next
occurrence comes: skip (the default), buffer_one, allow_all; on SQLite and on PostgreSQL with
NATS. The run is held inside its webhook call by a real loopback receiver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from onthedot.domain.models import JobParams, OverlapPolicy, RunStatus
from onthedot.service import JobPatch
from tests.engine.conftest import Engine, open_engine
from tests.support.waiting import async_wait_until
from tests.support.webhook import WebhookReceiver

EVERY_10_MINUTES = JobParams(type="recurring", schedule="*/10 * * * *")
# A held run stays RUNNING while the clock moves on by minutes: its lease must outlast that, or
# the engine rightly takes the run over as lost.
LONG_LEASE_SECONDS = 7200


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres,
                                                                   pytest.mark.nats])])
async def both(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    async with open_engine(request.param, tmp_path, LONG_LEASE_SECONDS) as engine:
        yield engine


async def statuses(engine: Engine, job_id: str) -> list[tuple[RunStatus, datetime]]:
    """The job's runs, oldest first: (status, scheduled_at)."""
    runs = (await engine.rt.service.list_runs("alice", job_id, page_size=50)).items
    return [(r.status, r.scheduled_at) for r in reversed(runs)]


async def settled(engine: Engine, job_id: str, runs: int) -> list[tuple[RunStatus, datetime]]:
    """Tick every role until the job has ``runs`` runs and the newest is waiting. On
    PostgreSQL a run event becomes readable only once every older transaction of the server
    has ended, so one quiet tick does not mean the recurring watcher has seen it."""
    async def done() -> list[tuple[RunStatus, datetime]]:
        await engine.tick()
        found = await statuses(engine, job_id)
        return found if len(found) == runs and found[-1][0] is RunStatus.PENDING else []

    return await async_wait_until(done, 30, f"{runs} runs, the newest one waiting")


async def _dispatch(engine: Engine) -> int:
    await engine.dispatcher.refresh_shards()
    return await engine.dispatcher.run_once()


async def hold_first_run(engine: Engine, webhook: WebhookReceiver,
                         policy: OverlapPolicy) -> tuple[str, datetime, asyncio.Task[int]]:
    """A job of ``policy`` whose first run is RUNNING, held in its webhook call, and the
    worker's task doing it."""
    webhook.hold_all = True
    view = await engine.create(EVERY_10_MINUTES, {"type": "webhook", "url": webhook.url},
                               overlap_policy=policy)
    first = view.job.next_run_at
    assert first is not None
    engine.clock.set(first)
    assert await _dispatch(engine) == 1

    async def received() -> bool:
        return await engine.worker.run_once(1, wait_seconds=0.5) > 0

    working = asyncio.ensure_future(async_wait_until(received, 30, "the first run"))
    await asyncio.to_thread(webhook.arrived.wait, 30)
    return view.job.job_id, first, working


@pytest.mark.parametrize("policy", ["skip", "buffer_one"])
async def test_an_occurrence_during_a_run_is_skipped_or_buffered(
        both: Engine, webhook: WebhookReceiver, policy: OverlapPolicy) -> None:
    job_id, first, working = await hold_first_run(both, webhook, policy)
    try:
        # Two occurrences come while the first run runs; nothing is there to start.
        both.clock.set(first + timedelta(minutes=25))
        assert await _dispatch(both) == 0
        assert await statuses(both, job_id) == [(RunStatus.RUNNING, first)]
    finally:
        webhook.release()
        await working
    runs = await settled(both, job_id, 2 if policy == "skip" else 3)
    if policy == "skip":  # the occurrences of 10 and 20 minutes past are not run
        assert runs == [(RunStatus.SUCCEEDED, first),
                        (RunStatus.PENDING, first + timedelta(minutes=30))]
    else:  # the latest of them (20 past) runs at once, late; the schedule goes on after it
        assert runs == [(RunStatus.SUCCEEDED, first),
                        (RunStatus.SUCCEEDED, first + timedelta(minutes=20)),
                        (RunStatus.PENDING, first + timedelta(minutes=30))]
    assert webhook.count() == len(runs) - 1


async def test_allow_all_starts_the_next_run_while_the_previous_runs(
        both: Engine, webhook: WebhookReceiver) -> None:
    job_id, first, working = await hold_first_run(both, webhook, "allow_all")
    second: asyncio.Future[bool] | None = None
    try:
        # Starting the first run scheduled the second.
        assert await statuses(both, job_id) == [
            (RunStatus.RUNNING, first), (RunStatus.PENDING, first + timedelta(minutes=10))]
        both.clock.set(first + timedelta(minutes=10))
        assert await _dispatch(both) == 1
        webhook.arrived.clear()

        async def received() -> bool:
            return await both.worker.run_once(1, wait_seconds=0.5) > 0

        second = asyncio.ensure_future(async_wait_until(received, 30, "the second run"))
        await asyncio.to_thread(webhook.arrived.wait, 30)
        # Both runs are in their webhook call at once, and the third is scheduled.
        assert await statuses(both, job_id) == [
            (RunStatus.RUNNING, first), (RunStatus.RUNNING, first + timedelta(minutes=10)),
            (RunStatus.PENDING, first + timedelta(minutes=20))]
    finally:
        webhook.release()
        await working
        if second is not None:
            await second
    assert await settled(both, job_id, 3) == [
        (RunStatus.SUCCEEDED, first), (RunStatus.SUCCEEDED, first + timedelta(minutes=10)),
        (RunStatus.PENDING, first + timedelta(minutes=20))]
    assert webhook.count() == 2


async def test_allow_all_pause_while_running_leaves_no_run(both: Engine,
                                                           webhook: WebhookReceiver) -> None:
    """A pause after the next run was scheduled cancels it like any waiting run."""
    job_id, first, working = await hold_first_run(both, webhook, "allow_all")
    try:
        await both.rt.service.pause_job("alice", job_id)
    finally:
        webhook.release()
        await working
    await both.settle()
    runs = await statuses(both, job_id)
    assert runs == [(RunStatus.SUCCEEDED, first),
                    (RunStatus.CANCELLED, first + timedelta(minutes=10))]
    job = await both.rt.service.get_job("alice", job_id)
    assert (job.status, job.job.next_run_at) == ("paused", None)


async def test_overlap_policy_is_kept_and_changed(both: Engine) -> None:
    view = await both.create(EVERY_10_MINUTES, overlap_policy="buffer_one")
    assert view.job.overlap_policy == "buffer_one"
    got = await both.rt.service.get_job("alice", view.job.job_id)
    assert got.job.overlap_policy == "buffer_one"
    changed = await both.rt.service.update_job("alice", view.job.job_id,
                                               JobPatch(overlap_policy="allow_all"))
    assert changed.job.overlap_policy == "allow_all"
    history = (await both.rt.service.job_history("alice", view.job.job_id)).items
    assert history[0].details["overlap_policy"] == {"old": "buffer_one", "new": "allow_all"}
