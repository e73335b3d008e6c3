"""At-least-once delivery, exactly-once effects where the design promises them."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from onthedot.domain.models import JobParams, RunStatus
from onthedot.queue.base import Delivery, run_message
from onthedot.store.base import ApplyResult, RunClaim, RunFinish
from onthedot.watcher import RecurringWatcher
from tests.engine.conftest import Engine


async def _runs(engine: Engine, job_id: str) -> list[RunStatus]:
    return [r.status for r in (await engine.rt.service.list_runs("alice", job_id)).items]


async def test_event_processed_twice_yields_one_next_run(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="*/5 * * * *"))
    engine.clock.set(view.job.next_run_at + timedelta(seconds=1))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    await engine.worker.run_once()
    # Two recurring watchers decide on the same event from the same cursor, concurrently.
    other = RecurringWatcher(engine.rt.store, engine.clock, engine.rt.settings, "r2")
    applied = await asyncio.gather(engine.recurring.run_once(), other.run_once())
    assert sorted(applied) == [0, 1]
    assert await _runs(engine, view.job.job_id) == [RunStatus.PENDING, RunStatus.SUCCEEDED]
    # Replaying the already applied event changes nothing either.
    event = (await engine.rt.store.events_after(0, 10))[0]
    replay = await engine.recurring.decide(event, 0)
    assert await engine.rt.store.event_apply(replay) is ApplyResult.CURSOR_MOVED
    assert await _runs(engine, view.job.job_id) == [RunStatus.PENDING, RunStatus.SUCCEEDED]


async def test_watcher_dying_between_insert_and_cursor_advance(engine: Engine) -> None:
    """The next run is already there (as if inserted just before a crash); applying the event
    again inserts nothing new and moves the cursor."""
    view = await engine.create(JobParams(type="recurring", schedule="*/5 * * * *"))
    engine.clock.set(view.job.next_run_at + timedelta(seconds=1))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    await engine.worker.run_once()
    event = (await engine.rt.store.events_after(0, 10))[0]
    decision = await engine.recurring.decide(event, 0)
    assert decision.insert_run is not None
    assert await engine.rt.store.run_insert(decision.insert_run)  # the half that "committed"
    assert await engine.rt.store.cursor_get("recurring") == 0
    assert await engine.recurring.run_once() == 1
    assert await engine.rt.store.cursor_get("recurring") == event.event_id
    assert await _runs(engine, view.job.job_id) == [RunStatus.PENDING, RunStatus.SUCCEEDED]


async def test_duplicate_delivery_of_a_finished_run_is_acked_not_rerun(engine: Engine) -> None:
    view = await engine.create(JobParams(type="immediate"))
    await engine.settle()
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.SUCCEEDED
    await engine.rt.queue.send(run.run_id, run_message(run))  # a duplicate publish
    assert await engine.worker.run_once() == 1
    again = await engine.rt.store.run_get(run.run_id)
    assert again is not None
    assert again.attempt == 1
    assert again.finished_at == run.finished_at
    assert await engine.rt.queue.depth() == 0, "the duplicate must be acked"


async def test_zombie_completion_is_fenced(engine: Engine) -> None:
    view = await engine.create(JobParams(type="immediate"))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    run_id = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0].run_id
    now = engine.clock.now()
    zombie = await engine.rt.store.run_claim(RunClaim(run_id, "zombie", now, 30))
    assert zombie is not None
    engine.clock.advance(31)  # the zombie stopped heartbeating; its lease lapsed
    taken = await engine.rt.store.run_claim(RunClaim(run_id, "alive", engine.clock.now(), 30))
    assert taken is not None
    assert taken.attempt == 2
    assert await engine.rt.store.run_finish(RunFinish(run_id, "zombie", RunStatus.SUCCEEDED,
                                                      engine.clock.now(), output="late")) is None
    assert await engine.rt.store.run_finish(RunFinish(run_id, "alive", RunStatus.SUCCEEDED,
                                                      engine.clock.now(), output="ok"))
    final = await engine.rt.store.run_get(run_id)
    assert final is not None
    assert final.output == "ok"
    assert len(await engine.rt.store.events_after(0, 10)) == 1


async def test_lost_publish_is_republished(engine: Engine) -> None:
    """A watcher that claimed runs (ENQUEUED) but died before publishing them."""
    view = await engine.create(JobParams(type="immediate"))
    await engine.dispatcher.refresh_shards()
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    from onthedot.store.base import DueClaim

    claimed = await engine.rt.store.runs_claim_due(DueClaim(run.shard, engine.clock.now(), 10,
                                                            60))
    assert [r.run_id for r in claimed.enqueued] == [run.run_id]
    assert await engine.rt.queue.depth() == 0  # never published
    await engine.settle()
    assert await _runs(engine, view.job.job_id) == [RunStatus.ENQUEUED]
    engine.clock.advance(engine.rt.settings.republish_after + 1)
    await engine.settle()
    assert await _runs(engine, view.job.job_id) == [RunStatus.SUCCEEDED]


async def test_stale_delivery_cannot_ack_after_redelivery(engine: Engine) -> None:
    await engine.rt.queue.send("m1", b'{"run_id": "m1"}')
    first = await engine.rt.queue.receive(1, 30)
    engine.clock.advance(31)
    second = await engine.rt.queue.receive(1, 30)
    assert [d.delivery_count for d in first + second] == [1, 2]
    stale: Delivery = first[0]
    assert not await engine.rt.queue.ack(stale)
    assert await engine.rt.queue.ack(second[0])


async def test_shutdown_hands_unfinished_runs_back_at_once(engine: Engine) -> None:
    from onthedot.worker import Worker
    from tests.support.webhook import WebhookReceiver

    receiver = WebhookReceiver(hold=lambda _r, nth: nth == 1).start()
    try:
        view = await engine.create(JobParams(type="immediate"),
                                   {"type": "webhook", "url": receiver.url})
        await engine.dispatcher.refresh_shards()
        await engine.dispatcher.run_once()
        leaving = Worker(engine.rt.store, engine.rt.queue, engine.clock, engine.rt.settings,
                         engine.rt.actions, engine.rt.metrics)
        stop = asyncio.Event()
        loop_task = asyncio.create_task(leaving.run(stop))
        await asyncio.to_thread(receiver.arrived.wait, 10)
        stop.set()
        await loop_task
        await leaving.drain(grace_seconds=0.1)  # the held action cannot finish in time
        run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
        assert run.status is RunStatus.ENQUEUED
        assert run.attempt == 0
        # No visibility timeout to wait out: another worker takes it on the same clock.
        assert await engine.worker.run_once() == 1
        run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
        assert run.status is RunStatus.SUCCEEDED
        assert run.attempt == 1
    finally:
        receiver.stop()
