"""Failures are retried with growing, jittered delays, then FAILED and dead-lettered."""

from __future__ import annotations

import contextlib
import math
import random
import sqlite3
from datetime import timedelta

import pytest

from onthedot.domain.ids import new_ulid
from onthedot.domain.models import (
    MAX_BACKOFF_SECONDS,
    Job,
    JobParams,
    JobRun,
    JobStatus,
    RetryPolicy,
    RunStatus,
)
from onthedot.worker.worker import backoff_seconds
from tests.engine.conftest import Engine
from tests.support.webhook import WebhookReceiver


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    policy = RetryPolicy(max_attempts=5, backoff_seconds=10, max_backoff_seconds=60)
    rng = random.Random(7)
    for attempt, step in [(1, 10), (2, 20), (3, 40), (4, 60), (5, 60)]:
        delays = [backoff_seconds(policy, attempt, rng) for _ in range(200)]
        assert min(delays) >= step * 0.5
        assert max(delays) <= step
        assert max(delays) - min(delays) > step * 0.3, "no jitter"


async def _deliveries_visible(engine: Engine) -> int:
    return await engine.worker.run_once(10)


async def test_failing_action_is_retried_then_dead_lettered(engine: Engine,
                                                            webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, _n: 500
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "webhook", "url": webhook.url},
                               retry_policy=RetryPolicy(max_attempts=3, backoff_seconds=10))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    assert await engine.worker.run_once() == 1
    assert webhook.count() == 1
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.RETRYING
    assert run.error == 'webhook answered HTTP 500: {"ok": false}'  # with the answer's start

    # The retry waits in the store, not in the queue: the queue only holds due runs.
    assert run.retry_at is not None
    assert await engine.rt.queue.depth() == 0

    async def rescue_then_work() -> int:
        await engine.rescuer.run_once()
        return await engine.worker.run_once()

    # First retry waits 5–10 s (10 s step with jitter), the second 10–20 s: growing delays.
    engine.clock.advance(4.9)
    assert await rescue_then_work() == 0
    engine.clock.advance(5.2)
    assert await rescue_then_work() == 1
    assert webhook.count() == 2
    engine.clock.advance(9.9)
    assert await rescue_then_work() == 0
    engine.clock.advance(10.2)
    assert await rescue_then_work() == 1
    assert webhook.count() == 3

    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.FAILED
    assert run.attempt == 3
    assert run.dead_lettered
    assert [k for k, n in webhook.keys.items() if n == 3] == [run.run_id]
    letters = await engine.rt.service.list_dead_letters("alice")
    assert [r.run_id for r in letters.items] == [run.run_id]
    assert [d.message_id for d in await engine.rt.queue.dead_letters()] == [run.run_id]
    engine.clock.advance(3600)
    assert await engine.worker.run_once() == 0, "a dead letter must not be delivered again"
    await engine.recurring.run_once()
    assert (await engine.rt.service.get_job("alice", view.job.job_id)).status == "failed"


async def test_redrive_runs_a_dead_letter_again(engine: Engine, webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, n: 500 if n == 1 else 200
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "webhook", "url": webhook.url},
                               retry_policy=RetryPolicy(max_attempts=1))
    await engine.settle()
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.FAILED
    await engine.rt.service.redrive("alice", run.run_id)
    await engine.settle()
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.SUCCEEDED
    assert not run.dead_lettered
    assert (await engine.rt.service.list_dead_letters("alice")).items == []
    assert (await engine.rt.service.get_job("alice", view.job.job_id)).status == "completed"


async def test_action_timeout_counts_as_a_failed_attempt(engine: Engine,
                                                         webhook: WebhookReceiver) -> None:
    webhook.hold_all = True
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "webhook", "url": webhook.url},
                               retry_policy=RetryPolicy(max_attempts=1), timeout_seconds=0.3)
    await engine.settle()
    run = (await engine.rt.service.list_runs("alice", view.job.job_id)).items[0]
    assert run.status is RunStatus.FAILED
    assert "timed out" in (run.error or "")


@pytest.mark.parametrize(("policy", "attempt"), [
    (RetryPolicy(backoff_seconds=1e308, max_backoff_seconds=1e308), 2),
    (RetryPolicy(backoff_seconds=math.nan, max_backoff_seconds=math.nan), 1),
    (RetryPolicy(backoff_seconds=math.inf, max_backoff_seconds=math.inf), 3),
    (RetryPolicy(backoff_seconds=-5, max_backoff_seconds=-1), 1),
    (RetryPolicy(backoff_seconds=10, max_backoff_seconds=3600), 10_000),
])
def test_backoff_is_a_bounded_delay_whatever_the_stored_policy(policy: RetryPolicy,
                                                               attempt: int) -> None:
    # Rows written before the service bounded retry policies may hold anything.
    rng = random.Random(3)
    for _ in range(50):
        delay = backoff_seconds(policy, attempt, rng)
        assert math.isfinite(delay)
        assert 0 <= delay <= MAX_BACKOFF_SECONDS


async def _store_directly(engine: Engine, action: dict[str, object],
                          retry: RetryPolicy) -> str:
    """What an older version could store: the service's validation is bypassed."""
    now = engine.clock.now()
    job_id = new_ulid(now)
    job = Job(job_id=job_id, user_id="alice", name="old", action=action,
              params=JobParams(type="immediate", timezone="UTC"), status=JobStatus.SCHEDULED,
              created_at=now, updated_at=now, retry_policy=retry, next_run_at=now)
    await engine.rt.store.job_create(job, JobRun.pending(job_id, now, engine.rt.settings.shards))
    return job_id


async def test_a_stored_absurd_backoff_still_retries(engine: Engine,
                                                     webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, _n: 500
    job_id = await _store_directly(
        engine, {"type": "webhook", "url": webhook.url},
        RetryPolicy(max_attempts=2, backoff_seconds=1e308, max_backoff_seconds=1e308))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    assert await engine.worker.run_once() == 1
    run = (await engine.rt.service.list_runs("alice", job_id)).items[0]
    assert run.status is RunStatus.RETRYING
    assert run.retry_at is not None
    assert run.retry_at <= engine.clock.now() + timedelta(seconds=MAX_BACKOFF_SECONDS)
    engine.clock.advance(MAX_BACKOFF_SECONDS)  # at most a day later it is tried again
    await engine.rescuer.run_once()
    assert await engine.worker.run_once() == 1
    assert webhook.count() == 2


async def test_an_unreadable_stored_action_fails_the_run(engine: Engine,
                                                         db_url: str) -> None:
    job_id = await _store_directly(engine, {"type": "message", "text": "hi"},
                                   RetryPolicy(max_attempts=1))
    with contextlib.closing(sqlite3.connect(db_url.split("///", 1)[1])) as db:
        db.execute("UPDATE jobs SET action = '[[[' WHERE job_id = ?", (job_id,))
        db.commit()
    await engine.settle()
    run = (await engine.rt.service.list_runs("alice", job_id)).items[0]
    assert run.status is RunStatus.FAILED
    assert "unknown action type 'unreadable'" in (run.error or "")
