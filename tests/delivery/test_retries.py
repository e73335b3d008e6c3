"""Issue 20 §2: a channel that failed while the run was executed is retried later on a stored
schedule (1 min, 5 min, 30 min, 2 h, 6 h, then failed for good), by the rescuer's sweep, across
restarts, one sweep per delivery; the run's own status is never touched. A real SMTP server and
a real webhook receiver on loopback; SQLite and PostgreSQL (with NATS JetStream)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from onthedot.delivery.channels import delivery_id
from onthedot.delivery.deliverer import CHANNEL_GONE, SENDING_STALE_SECONDS, TRIES_PER_EXECUTION
from onthedot.delivery.email import build_message
from onthedot.domain.delivery import (
    RETRY_SCHEDULE_SECONDS,
    Delivery,
    DeliveryClaim,
    DeliveryStatus,
)
from onthedot.domain.models import JobParams, JobRun, RunStatus
from onthedot.store.base import JobSave, RunClaim, RunFinish
from onthedot.views import RunOut
from onthedot.watcher import Rescuer
from tests.delivery.conftest import SENDER, backend, engine_open
from tests.engine.conftest import Engine
from tests.support.smtp import Mailbox
from tests.support.waiting import async_wait_until
from tests.support.webhook import LOOPBACK_ALLOW, WebhookReceiver

NOW = JobParams(type="immediate")
NEWS = {"type": "message", "text": "台股收高 1.2%"}
EMAIL = {"channel": "email", "to": "me@example.com"}
MAIL_KEY = "email:me@example.com"
BACKENDS = ["sqlite", pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.nats])]


async def the_run(env: Engine, job_id: str) -> JobRun:
    [run] = (await env.rt.service.list_runs("alice", job_id)).items
    return run


async def the_delivery(env: Engine, job_id: str, key: str) -> Delivery:
    found = {d.channel_key: d for d in (await the_run(env, job_id)).deliveries}
    return found[key]


async def sweep_at(env: Engine, instant: datetime) -> int:
    """The rescuer's sweep at ``instant``; returns how many delivery retries it sent."""
    env.clock.set(instant)
    return (await env.rescuer.run_once()).deliveries


def counted(env: Engine, channel: str, status: str) -> float:
    value = env.rt.metrics.registry.get_sample_value(
        "onthedot_deliveries_total", {"channel": channel, "status": status})
    return value or 0.0


async def test_a_failing_webhook_is_retried_on_the_schedule_then_failed_for_good(
        env: Engine, webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, _n: 503
    view = await env.create(NOW, NEWS, notify=[{"channel": "webhook", "url": webhook.url}])
    await env.settle()
    key = f"webhook:{webhook.url}"
    run = await the_run(env, view.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    finished_at = run.finished_at
    failed_at = env.clock.now()

    hook = await the_delivery(env, view.job.job_id, key)
    assert (hook.status, hook.attempts, hook.retries) == (
        DeliveryStatus.RETRYING, TRIES_PER_EXECUTION, 0)
    assert hook.next_attempt_at == failed_at + timedelta(seconds=RETRY_SCHEDULE_SECONDS[0])
    assert hook.error is not None
    assert hook.error.startswith("the webhook answered HTTP 503")
    shown = RunOut.of(run).model_dump(mode="json")["deliveries"][0]
    assert (shown["status"], shown["attempts"]) == ("retrying", 3)
    assert datetime.fromisoformat(shown["next_attempt_at"]) == hook.next_attempt_at

    due = hook.next_attempt_at
    for step in range(1, len(RETRY_SCHEDULE_SECONDS) + 1):
        assert await sweep_at(env, due - timedelta(seconds=1)) == 0  # not yet
        assert await sweep_at(env, due) == 1
        hook = await the_delivery(env, view.job.job_id, key)
        assert (hook.attempts, hook.retries) == (TRIES_PER_EXECUTION + step, step)
        if step < len(RETRY_SCHEDULE_SECONDS):
            assert hook.status is DeliveryStatus.RETRYING
            assert hook.next_attempt_at == due + timedelta(seconds=RETRY_SCHEDULE_SECONDS[step])
            due = hook.next_attempt_at
    assert (hook.status, hook.next_attempt_at, hook.sent_at) == (DeliveryStatus.FAILED, None,
                                                                 None)
    assert hook.error is not None
    assert "503" in hook.error
    assert due - failed_at == timedelta(seconds=sum(RETRY_SCHEDULE_SECONDS))  # 1 min ... 6 h
    assert await sweep_at(env, due + timedelta(days=2)) == 0  # failed for good: never again

    sends = TRIES_PER_EXECUTION + len(RETRY_SCHEDULE_SECONDS)
    assert webhook.keys == {delivery_id(run.run_id, key): sends}  # one key on every copy
    assert counted(env, "webhook", "retrying") == sends - 1
    assert counted(env, "webhook", "failed") == 1
    after = await the_run(env, view.job.job_id)
    assert (after.status, after.finished_at, after.output) == (RunStatus.SUCCEEDED, finished_at,
                                                               run.output)
    shown = RunOut.of(after).model_dump(mode="json")["deliveries"][0]
    assert (shown["status"], shown["next_attempt_at"]) == ("failed", None)


async def test_a_mail_retried_after_the_run_succeeded_is_delivered_with_its_message_id(
        env: Engine, mailbox: Mailbox) -> None:
    mailbox.answer = lambda _m, nth: "451 4.3.0 try later" if nth <= 3 else "250 OK"
    view = await env.create(NOW, NEWS, name="news", notify=[{"channel": "inbox"}, EMAIL])
    await env.settle()
    mail = await the_delivery(env, view.job.job_id, MAIL_KEY)
    assert (mail.status, mail.attempts) == (DeliveryStatus.RETRYING, 3)
    assert mail.next_attempt_at is not None
    assert mailbox.count() == TRIES_PER_EXECUTION  # each refused
    before = await the_run(env, view.job.job_id)

    assert await sweep_at(env, mail.next_attempt_at) == 1

    mail = await the_delivery(env, view.job.job_id, MAIL_KEY)
    assert (mail.status, mail.attempts, mail.retries, mail.error, mail.next_attempt_at) == (
        DeliveryStatus.DELIVERED, 4, 1, None, None)
    assert mail.sent_at == env.clock.now()
    # Three sends refused while the run was executed, the fourth taken: one Message-ID.
    assert mailbox.message_ids() == [
        f"<{delivery_id(before.run_id, MAIL_KEY)}@example.test>"] * 4
    after = await the_run(env, view.job.job_id)
    assert (after.status, after.attempt, after.finished_at) == (
        RunStatus.SUCCEEDED, before.attempt, before.finished_at)
    assert counted(env, "email", "delivered") == 1


async def test_a_channel_removed_from_the_job_is_not_retried(
        env: Engine, webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, _n: 503
    view = await env.create(NOW, NEWS, notify=[{"channel": "webhook", "url": webhook.url}])
    await env.settle()
    job = await env.rt.store.job_get_any(view.job.job_id)
    assert job is not None
    assert await env.rt.store.job_save(JobSave(job=replace(job, notify=[{"channel": "inbox"}])))
    hook = await the_delivery(env, view.job.job_id, f"webhook:{webhook.url}")
    assert hook.next_attempt_at is not None

    assert await sweep_at(env, hook.next_attempt_at) == 1

    hook = await the_delivery(env, view.job.job_id, f"webhook:{webhook.url}")
    assert (hook.status, hook.error, hook.next_attempt_at) == (
        DeliveryStatus.FAILED, CHANNEL_GONE, None)
    assert webhook.count() == TRIES_PER_EXECUTION  # nothing sent after the change


async def test_two_rescuers_at_once_send_a_due_retry_once(
        env: Engine, webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, nth: 503 if nth <= TRIES_PER_EXECUTION else 200
    view = await env.create(NOW, NEWS, notify=[{"channel": "webhook", "url": webhook.url}])
    await env.settle()
    hook = await the_delivery(env, view.job.job_id, f"webhook:{webhook.url}")
    assert hook.next_attempt_at is not None
    env.clock.set(hook.next_attempt_at)
    other = Rescuer(env.rt.store, env.rt.queue, env.clock, env.rt.settings, env.rt.metrics, "x2")

    sent = await asyncio.gather(env.rescuer.retry_deliveries(), other.retry_deliveries())

    assert sorted(sent) == [0, 1]
    assert webhook.count() == TRIES_PER_EXECUTION + 1
    hook = await the_delivery(env, view.job.job_id, f"webhook:{webhook.url}")
    assert (hook.status, hook.attempts) == (DeliveryStatus.DELIVERED, TRIES_PER_EXECUTION + 1)


async def test_a_stale_claim_of_a_succeeded_run_is_sent_again_by_the_sweep(
        env: Engine, mailbox: Mailbox) -> None:
    """The mail server took the mail, but its recording failed (the store stayed down longer
    than the deliverer retries it) while the run's success was recorded: the claim is left
    SENDING. Once it is stale, the sweep sends again, with the same Message-ID."""
    view = await env.create(NOW, NEWS, name="news", notify=[EMAIL])
    await env.dispatcher.refresh_shards()
    await env.dispatcher.run_once()
    [run] = await env.rt.store.runs_list(view.job.job_id, 10, None)
    held = await env.rt.store.run_claim(RunClaim(run_id=run.run_id, token="worker-1",
                                                 now=env.clock.now(), lease_seconds=30))
    assert held is not None
    claimed = await env.rt.store.delivery_claim(DeliveryClaim(
        run_id=run.run_id, channel_key=MAIL_KEY, channel="email", target="me@example.com",
        claim_token="worker-1", now=env.clock.now(), max_attempts=10,
        stale_at=env.clock.now() + timedelta(seconds=SENDING_STALE_SECONDS)))
    assert claimed is not None
    job = await env.rt.store.job_get_any(view.job.job_id)
    assert job is not None
    await env.worker.deliverer.email.send(build_message(
        job=job, run=held, to="me@example.com", text="hi", sender=SENDER, channel_key=MAIL_KEY,
        now=env.clock.now()))
    assert await env.rt.store.run_finish(RunFinish(
        run_id=run.run_id, token="worker-1", status=RunStatus.SUCCEEDED,
        finished_at=env.clock.now(), output={"message": "hi"}))
    stale_at = claimed.next_attempt_at
    assert stale_at is not None

    assert await sweep_at(env, stale_at - timedelta(seconds=1)) == 0  # it may still be sending
    assert await sweep_at(env, stale_at) == 1

    mail = await the_delivery(env, view.job.job_id, MAIL_KEY)
    assert (mail.status, mail.attempts, mail.retries) == (DeliveryStatus.DELIVERED, 2, 1)
    ids = mailbox.message_ids()
    assert len(ids) == 2
    assert ids[0] == ids[1]  # the receiver can drop the copy
    assert (await the_run(env, view.job.job_id)).status is RunStatus.SUCCEEDED


@pytest.mark.parametrize("name", BACKENDS)
async def test_a_pending_retry_is_sent_after_a_restart(
        name: str, tmp_path: Path, webhook: WebhookReceiver, mailbox: Mailbox) -> None:
    webhook.status_for = lambda _r, nth: 503 if nth <= TRIES_PER_EXECUTION else 200
    async with backend(name, tmp_path, smtp_url=mailbox.url, smtp_from=SENDER,
                       egress_allow=LOOPBACK_ALLOW) as settings:
        async with engine_open(settings) as first:
            view = await first.create(NOW, NEWS, notify=[
                {"channel": "webhook", "url": webhook.url}])
            await first.settle()
            pending = await the_delivery(first, view.job.job_id, f"webhook:{webhook.url}")
            assert pending.status is DeliveryStatus.RETRYING
            assert pending.next_attempt_at is not None
        # Every process stopped; a new one starts on the same database.
        async with engine_open(settings) as second:
            assert await sweep_at(second, pending.next_attempt_at - timedelta(seconds=1)) == 0
            assert await sweep_at(second, pending.next_attempt_at) == 1
            hook = await the_delivery(second, view.job.job_id, f"webhook:{webhook.url}")
            run = await the_run(second, view.job.job_id)
    assert (hook.status, hook.attempts, hook.retries) == (
        DeliveryStatus.DELIVERED, TRIES_PER_EXECUTION + 1, 1)
    assert webhook.keys == {delivery_id(run.run_id, f"webhook:{webhook.url}"):
                            TRIES_PER_EXECUTION + 1}
    assert run.status is RunStatus.SUCCEEDED


async def test_the_rescuer_role_sends_a_due_retry_in_the_background(
        env: Engine, webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, nth: 503 if nth <= TRIES_PER_EXECUTION else 200
    view = await env.create(NOW, NEWS, notify=[{"channel": "webhook", "url": webhook.url}])
    await env.settle()
    key = f"webhook:{webhook.url}"
    hook = await the_delivery(env, view.job.job_id, key)
    assert hook.next_attempt_at is not None
    env.clock.set(hook.next_attempt_at)

    async def delivered() -> bool:
        found = await the_delivery(env, view.job.job_id, key)
        return found.status is DeliveryStatus.DELIVERED

    await env.rt.start(["rescuer"])
    try:
        await async_wait_until(delivered, 30, "the rescuer's retry")
    finally:
        await env.rt.stop()
    assert webhook.count() == TRIES_PER_EXECUTION + 1
