"""Every attempt of a run is kept: a webhook that fails twice and then answers shows three
attempts, the first two with their errors, the last with the start of its answer."""

from __future__ import annotations

import itertools

from onthedot.domain.history import LOST_ERROR, AttemptStatus
from onthedot.domain.models import JobParams, RetryPolicy, RunStatus
from onthedot.store.base import DueClaim, RunClaim
from tests.engine.conftest import Engine
from tests.support.webhook import WebhookReceiver


async def test_a_run_that_fails_twice_then_succeeds_shows_three_attempts(
        both: Engine, webhook: WebhookReceiver) -> None:
    engine = both
    webhook.status_for = lambda _r, nth: 500 if nth <= 2 else 200
    view = await engine.create(JobParams(type="immediate"),
                               {"type": "webhook", "url": webhook.url},
                               retry_policy=RetryPolicy(max_attempts=3, backoff_seconds=1,
                                                        max_backoff_seconds=1))
    await engine.dispatcher.refresh_shards()
    await engine.dispatcher.run_once()
    assert await engine.worker.run_once() == 1
    for _ in range(2):  # each retry is due within a second; the rescuer hands it back
        engine.clock.advance(1.1)
        await engine.rescuer.run_once()
        assert await engine.worker.run_once() == 1
    assert webhook.count() == 3

    [listed] = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    run, attempts = await engine.rt.service.get_run_attempts("alice", listed.run_id)
    assert run.status is RunStatus.SUCCEEDED
    assert [(a.attempt, a.status) for a in attempts] == [
        (1, AttemptStatus.FAILED), (2, AttemptStatus.FAILED), (3, AttemptStatus.SUCCEEDED)]
    assert [a.error for a in attempts] == ['webhook answered HTTP 500: {"ok": false}'] * 2 + [
        None]
    assert attempts[2].preview is not None
    assert "ok" in attempts[2].preview
    assert attempts[2].finished_at == run.finished_at
    assert attempts[2].started_at == run.started_at
    for earlier, later in itertools.pairwise(attempts):
        assert earlier.finished_at is not None
        assert earlier.finished_at <= later.started_at


async def test_an_attempt_cut_off_by_a_crash_shows_as_lost(both: Engine) -> None:
    engine = both
    view = await engine.create(JobParams(type="immediate"))
    [run] = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    await engine.rt.store.runs_claim_due(DueClaim(run.shard, engine.clock.now(), 10, 60))
    # A worker claimed it and died (no heartbeat, no result); its message is gone too.
    assert await engine.rt.store.run_claim(RunClaim(run.run_id, "dead-worker",
                                                    engine.clock.now(), 30)) is not None
    _, attempts = await engine.rt.service.get_run_attempts("alice", run.run_id)
    assert [(a.attempt, a.status) for a in attempts] == [(1, AttemptStatus.RUNNING)]

    engine.clock.advance(31)
    assert (await engine.rescuer.run_once()).expired_leases == 1
    await engine.settle()

    done, attempts = await engine.rt.service.get_run_attempts("alice", run.run_id)
    assert done.status is RunStatus.SUCCEEDED
    assert [(a.attempt, a.status, a.error) for a in attempts] == [
        (1, AttemptStatus.LOST, LOST_ERROR), (2, AttemptStatus.SUCCEEDED, None)]
