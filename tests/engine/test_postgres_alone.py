"""PostgreSQL alone is a complete deployment: with no ONTHEDOT_QUEUE_URL the runtime takes the
PostgreSQL table queue, and jobs fire through the roles in real time, split over runtimes the
way separate processes run them (dispatch in one, workers in another: the message reaches the
worker through the database and its NOTIFY, not through a shared object)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest

from onthedot.config import Settings
from onthedot.domain.clock import SystemClock
from onthedot.domain.models import JobParams, RetryPolicy, RunStatus
from onthedot.queue.nats import NatsQueue
from onthedot.queue.postgres import PostgresQueue
from onthedot.queue.table import TableQueue
from onthedot.runtime import Runtime, build_queue
from onthedot.service import JobSpec
from tests.conformance.conftest import (
    PG_DSN,
    PG_TEST_AHEAD_DAYS,
    PG_TEST_FAR_MONTHS,
    drop_pg_schema,
    new_pg_schema,
)
from tests.support.waiting import async_wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

WITHIN = 15.0  # seconds: generous bound for a run that should finish in well under one


@pytest.fixture
def schema() -> str:
    return new_pg_schema()


@pytest.fixture
def settings(schema: str) -> Settings:
    return Settings(database_url=PG_DSN, database_schema=schema,
                    partition_ahead_days=PG_TEST_AHEAD_DAYS,
                    partition_far_months=PG_TEST_FAR_MONTHS, visibility_timeout=5,
                    tick_seconds=0.2, rescue_interval=0.2, shutdown_grace=1,
                    egress_allow=LOOPBACK_ALLOW)


@pytest.fixture
async def runtimes(settings: Settings, schema: str) -> AsyncIterator[list[Runtime]]:
    opened: list[Runtime] = []
    try:
        yield opened
    finally:
        for rt in opened:
            if rt.worker is not None:
                await rt.worker.aclose()
            await rt.close()
        await drop_pg_schema(schema)


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    # The first call for each key fails: a job with one attempt is dead-lettered at once.
    receiver = WebhookReceiver(status_for=lambda _r, nth: 500 if nth == 1 else 200).start()
    yield receiver
    receiver.stop()


async def test_the_queue_defaults_to_the_database_of_the_store(settings: Settings) -> None:
    for queue_url in (None, "table"):
        queue = build_queue(settings.model_copy(update={"queue_url": queue_url}), SystemClock())
        assert isinstance(queue, PostgresQueue)
        assert queue.schema == settings.database_schema
    sqlite = settings.model_copy(update={"database_url": "sqlite:///unused.db"})
    assert isinstance(build_queue(sqlite, SystemClock()), TableQueue)
    nats = settings.model_copy(update={"queue_url": "nats://127.0.0.1:4222"})
    assert isinstance(build_queue(nats, SystemClock()), NatsQueue)


@pytest.mark.postgres
async def test_jobs_fire_on_postgresql_without_nats(settings: Settings,
                                                    runtimes: list[Runtime],
                                                    webhook: WebhookReceiver) -> None:
    dispatch = await Runtime.open(settings)
    runtimes.append(dispatch)
    work = await Runtime.open(settings)
    runtimes.append(work)
    assert isinstance(dispatch.queue, PostgresQueue)
    assert isinstance(work.queue, PostgresQueue)
    await dispatch.start(["watcher", "recurring", "rescuer"])
    await work.start(["worker"])
    service = dispatch.service

    now = dispatch.clock.now()
    soon, _ = await service.create_job("alice", JobSpec(
        action={"type": "message", "text": "on the dot"},
        params=JobParams(type="one-time", time=(now + timedelta(seconds=1)).isoformat())))
    flaky, _ = await service.create_job("alice", JobSpec(
        action={"type": "webhook", "url": webhook.url}, params=JobParams(type="immediate"),
        retry_policy=RetryPolicy(max_attempts=1)))

    async def finished(job_id: str, status: RunStatus) -> bool:
        runs = (await service.list_runs("alice", job_id)).items
        return bool(runs) and runs[0].status is status

    await async_wait_until(lambda: finished(soon.job.job_id, RunStatus.SUCCEEDED), WITHIN,
                           "the one-time job to run")
    run = (await service.list_runs("alice", soon.job.job_id)).items[0]
    assert run.output == {"message": "on the dot", "job": "on the dot"}
    assert run.started_at is not None
    assert run.started_at >= run.scheduled_at

    # Failed on its only attempt: dead-lettered in the PostgreSQL queue, then redriven.
    await async_wait_until(lambda: finished(flaky.job.job_id, RunStatus.FAILED), WITHIN,
                           "the webhook job to fail")
    failed = (await service.list_runs("alice", flaky.job.job_id)).items[0]

    async def dead() -> bool:
        return [d.message_id for d in await work.queue.dead_letters()] == [failed.run_id]

    await async_wait_until(dead, WITHIN, "the dead letter")
    await service.redrive("alice", failed.run_id)
    await async_wait_until(lambda: finished(flaky.job.job_id, RunStatus.SUCCEEDED), WITHIN,
                           "the redriven run to succeed")
    assert webhook.keys[failed.run_id] == 2  # the same idempotency key on both attempts

    async def drained() -> bool:
        return await work.queue.depth() == 0 and await work.queue.dead_letters() == []

    await async_wait_until(drained, WITHIN, "the queue to drain")
