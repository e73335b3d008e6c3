"""Runs that a crash, a lost message or a race left behind are found again (issue 8 §1).

Each test runs on both production shapes: SQLite with its table queue, and PostgreSQL with
NATS JetStream; those about the queue's part (``shape``) also on PostgreSQL with its own table
queue. The roles are driven tick by tick with a fake clock; the queues are real.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from onthedot.domain.errors import ConfigError
from onthedot.domain.models import JobParams, RetryPolicy, RunStatus
from onthedot.queue.nats import NatsQueue
from onthedot.queue.postgres import PostgresQueue
from onthedot.queue.table import TableQueue
from onthedot.runtime import Runtime
from onthedot.service import Page
from onthedot.store.base import DueClaim, RunClaim
from onthedot.watcher import Rescuer
from tests.engine.conftest import START, Engine
from tests.support.waiting import async_wait_until


async def statuses(engine: Engine, job_id: str) -> list[tuple[RunStatus, int]]:
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    return [(r.status, r.attempt) for r in runs]


async def settled_status(engine: Engine, job_id: str, status: str) -> None:
    """Tick until the job shows ``status``: on PostgreSQL a run event becomes visible only once
    every older transaction in the cluster has ended, which other tests' may delay."""
    async def reached() -> bool:
        await engine.tick()
        return (await engine.rt.service.get_job("alice", job_id)).status == status

    await async_wait_until(reached, 30, f"job {job_id} to be {status}")


async def lose_every_message(engine: Engine) -> None:
    """What a purged stream, a NATS server that lost its only replica, or a deleted table-queue
    row does: the messages are gone, the store still says ENQUEUED."""
    queue = engine.rt.queue
    if isinstance(queue, NatsQueue):
        js = queue._need_js()
        await js.purge_stream(queue.runs_stream)
    elif isinstance(queue, PostgresQueue):
        async with queue._conn() as conn:
            await conn.execute("DELETE FROM queue_messages")
    else:
        assert isinstance(queue, TableQueue)
        await queue._db.write(lambda c: c.execute("DELETE FROM queue_messages"))
    assert await queue.depth() == 0


async def test_resuming_a_one_time_job_within_the_grace_runs_it(both: Engine) -> None:
    """Found on main: the revived run sat behind the shard's watermark, PENDING for ever, while
    the job said "scheduled". A resumed run is late by less than the misfire grace (a time
    missed by more is refused: tests/engine/test_lifecycle.py); with a grace longer than the
    watermark's margin, such a run is behind the watermark."""
    service = both.rt.service
    service.settings = service.settings.model_copy(update={"misfire_grace": 7 * 3600.0})
    at = START + timedelta(hours=1)
    view = await both.create(JobParams(type="one-time", time=at.isoformat()))
    await service.pause_job("alice", view.job.job_id)
    both.clock.set(at + timedelta(hours=6))  # the time passes while paused
    await both.settle()  # the watcher's watermark moves on past the run's bucket

    resumed = await service.resume_job("alice", view.job.job_id)
    await both.settle()

    assert resumed.status == "scheduled"
    assert await statuses(both, view.job.job_id) == [(RunStatus.SUCCEEDED, 1)]
    await settled_status(both, view.job.job_id, "completed")


async def test_runs_whose_messages_were_lost_are_published_again(shape: Engine) -> None:
    views = [await shape.create(JobParams(type="immediate")) for _ in range(5)]
    await shape.dispatcher.refresh_shards()
    assert await shape.dispatcher.run_once() == 5
    await lose_every_message(shape)

    assert await shape.worker.run_once() == 0
    assert (await shape.rescuer.run_once()).lost_messages == 0  # not yet: they may be on the way
    shape.clock.advance(shape.rt.settings.republish_after + 1)
    assert (await shape.rescuer.run_once()).lost_messages == 5
    await shape.settle()

    for view in views:
        assert await statuses(shape, view.job.job_id) == [(RunStatus.SUCCEEDED, 1)]


async def test_runs_waiting_behind_a_backlog_are_not_published_twice(shape: Engine) -> None:
    """Found on main: every ENQUEUED run older than 60 s was republished while it merely
    waited behind a backlog, gaining a copy every minute."""
    views = [await shape.create(JobParams(type="immediate")) for _ in range(20)]
    await shape.dispatcher.refresh_shards()
    await shape.dispatcher.run_once()
    depth = await shape.rt.queue.depth()

    for _ in range(5):
        shape.clock.advance(shape.rt.settings.republish_after + 1)
        assert (await shape.rescuer.run_once()).total == 0

    assert await shape.rt.queue.depth() == depth == 20
    await shape.settle()
    for view in views:
        assert await statuses(shape, view.job.job_id) == [(RunStatus.SUCCEEDED, 1)]


async def test_a_run_whose_worker_and_message_are_both_gone_is_handed_back(shape: Engine) -> None:
    view = await shape.create(JobParams(type="immediate"))
    run = (await shape.rt.service.list_runs("alice", view.job.job_id)).items[0]
    await shape.rt.store.runs_claim_due(DueClaim(run.shard, shape.clock.now(), 10, 60))
    # A worker claimed it and died; its message went with the server that held it.
    claimed = await shape.rt.store.run_claim(RunClaim(run.run_id, "dead-worker",
                                                     shape.clock.now(), 30))
    assert claimed is not None
    assert await shape.rt.queue.depth() == 0

    shape.clock.advance(29)
    assert (await shape.rescuer.run_once()).expired_leases == 0  # its lease still holds
    shape.clock.advance(2)
    assert (await shape.rescuer.run_once()).expired_leases == 1
    await shape.settle()

    assert await statuses(shape, view.job.job_id) == [(RunStatus.SUCCEEDED, 2)]


async def test_a_held_message_is_left_to_the_queue(shape: Engine) -> None:
    """A RUNNING run whose lease ran out but whose message is still in the queue is not
    handed back twice: the queue redelivers it when its visibility ends."""
    view = await shape.create(JobParams(type="immediate"))
    await shape.dispatcher.refresh_shards()
    await shape.dispatcher.run_once()
    held = await shape.rt.queue.receive(1, shape.rt.settings.visibility_timeout)
    run = (await shape.rt.service.list_runs("alice", view.job.job_id)).items[0]
    claimed = await shape.rt.store.run_claim(RunClaim(run.run_id, "slow-worker",
                                                     shape.clock.now(), 30))
    assert claimed is not None
    assert len(held) == 1

    shape.clock.advance(45)
    assert (await shape.rescuer.run_once()).total == 0
    assert await shape.rt.queue.live([run.run_id]) == {run.run_id}


async def test_a_process_with_another_shard_count_refuses_to_start(both: Engine) -> None:
    settings = both.rt.settings.model_copy(update={"shards": 64})
    with pytest.raises(ConfigError) as refused:
        await Runtime.open(settings, both.clock)
    assert refused.value.field == "shards"
    assert "set up with 32 shards" in refused.value.message
    assert "ONTHEDOT_SHARDS=64" in refused.value.message


async def test_history_past_retention_is_pruned(both: Engine) -> None:
    """Issue 8 §6: nothing pruned run events, jobs or SQLite history, and dead letters piled up.
    The rescuer prunes hourly; here its prune is called once the clock is past retention."""
    done = await both.create(JobParams(type="immediate"))
    failing = await both.create(JobParams(type="immediate"),
                                {"type": "webhook", "url": "http://127.0.0.1:9/unreachable"},
                                retry_policy=RetryPolicy(max_attempts=1))
    recurring = await both.create(JobParams(type="recurring", schedule="0 8 * * *"))
    await both.settle()
    await settled_status(both, done.job.job_id, "completed")
    await settled_status(both, failing.job.job_id, "failed")
    assert [d.message_id for d in await both.rt.queue.dead_letters()] != []

    settings = both.rt.settings.model_copy(update={"retention_days": 1})
    rescuer = Rescuer(both.rt.store, both.rt.queue, both.clock, settings, both.rt.metrics, "x2")
    both.clock.advance(hours=23)
    assert await rescuer.prune() == 0  # nothing is old enough yet
    both.clock.advance(hours=26)
    await both.settle()  # the recurring job ran meanwhile
    pruned = await rescuer.prune()

    assert pruned > 0
    for gone in (done, failing):
        assert await both.rt.store.job_get_any(gone.job.job_id) is None
    assert await both.rt.service.list_dead_letters("alice") == Page(items=[],
                                                                   next_page_token=None)
    if isinstance(both.rt.queue, TableQueue):  # NATS expires them by the stream's MaxAge
        assert await both.rt.queue.dead_letters() == []
    kept = await both.rt.store.job_get_any(recurring.job.job_id)
    assert kept is not None
    assert kept.status.value == "scheduled"
    runs = await both.rt.store.runs_list(recurring.job.job_id, 100, None)
    # The open run is never pruned.
    assert any(r.status is RunStatus.PENDING for r in runs), [
        (r.scheduled_at.isoformat(), r.status.value) for r in runs]
    cutoff = both.clock.now() - timedelta(days=1)
    assert all(r.finished_at is None or r.finished_at >= cutoff for r in runs)
