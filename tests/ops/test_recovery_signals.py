"""What an operator sees when a run is executed again (issue 18 §4): one WARNING line naming
the run and the cause, and ``onthedot_runs_recovered_total{cause}`` on ``/metrics``, counted
once, by the one process that knows the cause; and ``onthedot_retention_removed_total{kind}``
after a prune.

Each test runs on SQLite with its table queue and on PostgreSQL with NATS JetStream, driven
tick by tick with a fake clock; the metrics are read as ``/metrics`` renders them.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from onthedot.domain.models import JobParams, RetryPolicy, RunStatus
from onthedot.logs import JsonFormatter
from onthedot.metrics import RECOVERED_CAUSES, RETENTION_KINDS
from onthedot.store.base import DueClaim, RunClaim
from onthedot.watcher import Rescuer
from tests.engine.conftest import Engine
from tests.engine.test_rescue import lose_every_message, settled_status
from tests.support.waiting import async_wait_until
from tests.support.webhook import WebhookReceiver


def scrape(engine: Engine, name: str, label: str) -> dict[str, float]:
    """One counter's samples by label value, from the text ``/metrics`` answers."""
    text = generate_latest(engine.rt.metrics.registry).decode()
    return {s.labels[label]: s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def recovered(engine: Engine) -> dict[str, float]:
    return scrape(engine, "onthedot_runs_recovered_total", "cause")


def only(cause: str, count: float = 1.0) -> dict[str, float]:
    return {c: (count if c == cause else 0.0) for c in RECOVERED_CAUSES}


def lines_about(caplog: pytest.LogCaptureFixture, run_id: str) -> list[dict[str, object]]:
    """The records about ``run_id`` as the JSON log format writes them."""
    fmt = JsonFormatter()
    return [json.loads(fmt.format(r)) for r in caplog.records
            if getattr(r, "run_id", None) == run_id]


def warnings_about(caplog: pytest.LogCaptureFixture, run_id: str) -> list[dict[str, object]]:
    return [line for line in lines_about(caplog, run_id) if line["level"] == "WARNING"]


async def dispatched_run_id(engine: Engine, job_id: str) -> str:
    await engine.dispatcher.refresh_shards()
    assert await engine.dispatcher.run_once() == 1
    [run] = (await engine.rt.service.list_runs("alice", job_id)).items
    return run.run_id


async def test_every_cause_starts_at_zero(both: Engine) -> None:
    """Every label is on /metrics from the start, so an alert on the first increase fires."""
    assert recovered(both) == dict.fromkeys(RECOVERED_CAUSES, 0.0)
    assert scrape(both, "onthedot_retention_removed_total", "kind") == dict.fromkeys(
        RETENTION_KINDS, 0.0)


async def test_a_claim_that_replaces_a_dead_worker_says_so(
        both: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """kill -9 mid-run: the worker held the message and the lease, then nothing. The queue
    hands the message out again once its invisibility ends; the claim that takes over the
    expired lease is the one place that knows the first attempt's worker is gone."""
    caplog.set_level(logging.INFO, logger="onthedot")
    view = await both.create(JobParams(type="immediate"))
    run_id = await dispatched_run_id(both, view.job.job_id)
    [held] = await both.rt.queue.receive(1, both.rt.settings.visibility_timeout)
    dead = await both.rt.store.run_claim(RunClaim(run_id, "killed-worker", both.clock.now(),
                                                  both.rt.settings.visibility_timeout))
    assert dead is not None
    assert recovered(both) == only("lease_expired", 0.0)
    # Its lease runs out and its message's invisibility ends (the queue's own rule, proven by
    # the queue conformance suite).
    both.clock.advance(both.rt.settings.visibility_timeout + 1)
    await both.rt.queue.nack(held, 0)

    async def taken_over() -> bool:
        await both.worker.run_once()
        [run] = (await both.rt.service.list_runs("alice", view.job.job_id)).items
        return run.status is RunStatus.SUCCEEDED

    await async_wait_until(taken_over, 30, "a live worker to take the run over")
    assert recovered(both) == only("lease_expired")
    [line] = warnings_about(caplog, run_id)
    assert (line["logger"], line["cause"], line["attempt"], line["job_id"]) == (
        "onthedot.worker", "lease_expired", 2, view.job.job_id)
    assert "attempt 1 lost its worker" in str(line["message"])
    # The rescuer left it to the queue, which still held its message: nothing counted twice.
    assert (await both.rescuer.run_once()).total == 0
    assert recovered(both) == only("lease_expired")


async def test_a_run_whose_worker_and_message_are_gone_is_counted_once(
        both: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """The rescuer hands it back (its line and count); the worker that then claims the run
    starts from ENQUEUED and adds neither, even at the same instant of the clock."""
    caplog.set_level(logging.INFO, logger="onthedot")
    view = await both.create(JobParams(type="immediate"))
    [run] = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    await both.rt.store.runs_claim_due(DueClaim(run.shard, both.clock.now(), 10, 60))
    assert await both.rt.store.run_claim(RunClaim(run.run_id, "dead-worker", both.clock.now(),
                                                  30)) is not None
    both.clock.advance(31)
    assert (await both.rescuer.run_once()).expired_leases == 1
    await both.settle()

    assert recovered(both) == only("worker_and_message_lost")
    [line] = warnings_about(caplog, run.run_id)
    assert (line["logger"], line["cause"], line["attempt"]) == (
        "onthedot.rescuer", "worker_and_message_lost", 1)
    [done] = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    assert (done.status, done.attempt) == (RunStatus.SUCCEEDED, 2)


async def test_runs_whose_messages_were_lost_are_counted(
        both: Engine, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="onthedot")
    views = [await both.create(JobParams(type="immediate")) for _ in range(3)]
    await both.dispatcher.refresh_shards()
    assert await both.dispatcher.run_once() == 3
    await lose_every_message(both)
    both.clock.advance(both.rt.settings.republish_after + 1)
    assert (await both.rescuer.run_once()).lost_messages == 3
    await both.settle()

    assert recovered(both) == only("message_lost", 3)
    for view in views:
        [run] = (await both.rt.service.list_runs("alice", view.job.job_id)).items
        [line] = warnings_about(caplog, run.run_id)
        assert line["cause"] == "message_lost"


async def test_a_run_handed_back_on_shutdown_is_counted_by_its_worker(
        both: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """A worker stopping mid-action releases the run (not counted as an attempt); the next
    claim starts it from ENQUEUED, so the release is the one count."""
    caplog.set_level(logging.INFO, logger="onthedot")
    receiver = WebhookReceiver(hold=lambda _r, nth: nth == 1).start()
    try:
        view = await both.create(JobParams(type="immediate"),
                                 {"type": "webhook", "url": receiver.url})
        run_id = await dispatched_run_id(both, view.job.job_id)
        [delivery] = await both.rt.queue.receive(1, both.rt.settings.visibility_timeout)
        handling = asyncio.create_task(both.worker.handle(delivery))
        await asyncio.to_thread(receiver.arrived.wait, 10)
        handling.cancel()  # what drain() does to a run still going after the grace
        with pytest.raises(asyncio.CancelledError):
            await handling
        receiver.release()
        await both.settle()
    finally:
        receiver.stop()

    [run] = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 1)
    assert recovered(both) == only("worker_shutdown")
    [line] = warnings_about(caplog, run_id)
    assert (line["logger"], line["cause"], line["attempt"]) == (
        "onthedot.worker", "worker_shutdown", 1)
    assert "interrupted by shutdown" in str(line["message"])


async def test_retries_are_not_recoveries(both: Engine, caplog: pytest.LogCaptureFixture) -> None:
    """A failed attempt retried after its backoff is the retry policy at work, not a crash."""
    caplog.set_level(logging.INFO, logger="onthedot")
    receiver = WebhookReceiver(status_for=lambda _r, nth: 500 if nth == 1 else 200).start()
    try:
        view = await both.create(JobParams(type="immediate"),
                                 {"type": "webhook", "url": receiver.url},
                                 retry_policy=RetryPolicy(max_attempts=2, backoff_seconds=1,
                                                          max_backoff_seconds=1))
        await dispatched_run_id(both, view.job.job_id)
        assert await both.worker.run_once() == 1
        both.clock.advance(1.1)
        await both.settle()
    finally:
        receiver.stop()
    [run] = (await both.rt.service.list_runs("alice", view.job.job_id)).items
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert recovered(both) == only("lease_expired", 0.0)
    assert not any("cause" in line for line in lines_about(caplog, run.run_id))


async def test_retention_counts_what_it_removed_by_kind(both: Engine) -> None:
    done = await both.create(JobParams(type="immediate"))
    failing = await both.create(JobParams(type="immediate"),
                                {"type": "webhook", "url": "http://127.0.0.1:9/unreachable"},
                                retry_policy=RetryPolicy(max_attempts=1))
    await both.settle()
    await settled_status(both, done.job.job_id, "completed")
    await settled_status(both, failing.job.job_id, "failed")
    settings = both.rt.settings.model_copy(update={"retention_days": 1})
    rescuer = Rescuer(both.rt.store, both.rt.queue, both.clock, settings, both.rt.metrics, "x2")
    assert await rescuer.prune() == 0
    assert set(scrape(both, "onthedot_retention_removed_total", "kind").values()) == {0.0}

    both.clock.advance(hours=49)
    removed = await rescuer.prune()

    counted = scrape(both, "onthedot_retention_removed_total", "kind")
    assert removed > 0
    assert sum(counted.values()) == removed
    assert counted["runs"] >= 2
    assert counted["jobs"] == 2
    assert counted["attempts"] >= 2
    assert counted["events"] >= 2
