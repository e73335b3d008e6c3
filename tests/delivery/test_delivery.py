"""Issue 9 §3: each run's result is delivered to its job's channels, once per (run, channel),
through the real engine, a real SMTP server and a real webhook receiver on loopback."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import replace
from datetime import timedelta
from typing import Any

from onthedot.actions.base import ActionContext
from onthedot.actions.signing import create_secret
from onthedot.delivery.channels import delivery_id
from onthedot.delivery.email import build_message
from onthedot.domain.delivery import Delivery, DeliveryClaim, DeliveryStatus
from onthedot.domain.models import JobParams, JobRun, RunStatus
from onthedot.store.base import InboxQuery, JobSave, RunClaim
from tests.delivery.conftest import SENDER
from tests.engine.conftest import Engine
from tests.support.smtp import Mailbox
from tests.support.waiting import async_wait_until
from tests.support.webhook import WebhookReceiver

NOW = JobParams(type="immediate")
NEWS = {"type": "message", "text": "台股收高 1.2%\n\nTSMC & peers <up>"}
EMAIL = {"channel": "email", "to": "me@example.com"}
INBOX = {"channel": "inbox"}


async def only_run(env: Engine, job_id: str) -> JobRun:
    runs = (await env.rt.service.list_runs("alice", job_id)).items
    assert len(runs) == 1, runs
    return runs[0]


def by_channel(run: JobRun) -> dict[str, Delivery]:
    return {d.channel_key: d for d in run.deliveries}


async def inbox_of(env: Engine, user: str = "alice") -> list[Any]:
    return await env.rt.store.inbox_list(InboxQuery(user_id=user, limit=100))


# --- e-mail ----------------------------------------------------------------------------------


async def test_email_carries_the_result_as_text_and_html_with_a_message_id_of_the_run(
        env: Engine, mailbox: Mailbox) -> None:
    view = await env.create(NOW, NEWS, name="Morning\nnews", notify=[INBOX, EMAIL])
    await env.settle()

    run = await only_run(env, view.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    assert mailbox.count() == 1
    message = mailbox.messages[0]
    assert mailbox.envelopes == [(SENDER, ["me@example.com"])]
    assert (message["From"], message["To"], message["Subject"]) == (
        SENDER, "me@example.com", "Morning news")
    assert message["Message-ID"] == (
        f"<{delivery_id(run.run_id, 'email:me@example.com')}@example.test>")
    assert run.run_id in message["Message-ID"]
    assert message["Auto-Submitted"] == "auto-generated"
    assert message["X-Onthedot-Run-Id"] == run.run_id
    assert message.get_content_type() == "multipart/alternative"
    plain = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert plain is not None
    assert html is not None
    assert plain.get_content().replace("\r\n", "\n").strip() == NEWS["text"]
    assert "<h2>Morning news</h2>" in html.get_content()
    assert "TSMC &amp; peers &lt;up&gt;" in html.get_content()
    delivered = by_channel(run)
    assert delivered["email:me@example.com"].status is DeliveryStatus.DELIVERED
    assert delivered["email:me@example.com"].attempts == 1
    assert delivered["email:me@example.com"].sent_at is not None
    assert delivered["inbox"].status is DeliveryStatus.DELIVERED
    [item] = await inbox_of(env)
    assert (item.run_id, item.title, item.text) == (run.run_id, "Morning news", NEWS["text"])


async def test_urls_in_the_html_part_are_links(env: Engine, mailbox: Mailbox) -> None:
    text = ("讀全文：https://news.example.tw/a?id=1&lang=zh。\n\n"
            "Source (https://example.com/q?x=\"1\"), <b>not bold</b>")
    await env.create(NOW, {"type": "message", "text": text}, notify=[EMAIL])
    await env.settle()
    [message] = mailbox.messages
    html = message.get_body(("html",))
    assert html is not None
    body = html.get_content()
    assert ('讀全文：<a href="https://news.example.tw/a?id=1&amp;lang=zh">'
            'https://news.example.tw/a?id=1&amp;lang=zh</a>。') in body
    # The quote ends the URL and is escaped: nothing in the text can end the attribute.
    assert ('Source (<a href="https://example.com/q?x=">https://example.com/q?x=</a>'
            '&quot;1&quot;), &lt;b&gt;not bold&lt;/b&gt;') in body
    assert body.count("<a ") == 2
    plain = message.get_body(("plain",))
    assert plain is not None
    assert "https://news.example.tw/a?id=1&lang=zh" in plain.get_content()


# --- exactly once ----------------------------------------------------------------------------


async def dispatch_and_crash_after_delivering(env: Engine, job_id: str) -> JobRun:
    """A worker claims the run, runs the action, delivers, and dies before recording success."""
    await env.dispatcher.refresh_shards()
    assert await env.dispatcher.run_once() == 1
    [run] = await env.rt.store.runs_list(job_id, 10, None)
    claimed = await env.rt.store.run_claim(RunClaim(run_id=run.run_id, token="dead-worker",
                                                    now=env.clock.now(), lease_seconds=30))
    assert claimed is not None
    job = await env.rt.store.job_get_any(job_id)
    assert job is not None
    await env.worker.deliverer.deliver(job, claimed, {"message": "hi"})
    return claimed


async def test_a_run_executed_again_notifies_inbox_and_email_once(
        env: Engine, mailbox: Mailbox) -> None:
    view = await env.create(NOW, NEWS, notify=[INBOX, EMAIL])
    await dispatch_and_crash_after_delivering(env, view.job.job_id)
    assert mailbox.count() == 1
    assert await inbox_of(env) == []  # the inbox item is recorded with the run's success

    env.clock.advance(seconds=31)  # the dead worker's lease ends; the run is executed again
    await env.settle()

    run = await only_run(env, view.job.job_id)
    assert (run.status, run.attempt) == (RunStatus.SUCCEEDED, 2)
    assert mailbox.count() == 1
    assert len(await inbox_of(env)) == 1
    assert {k: (d.status, d.attempts) for k, d in by_channel(run).items()} == {
        "inbox": (DeliveryStatus.DELIVERED, 1),
        "email:me@example.com": (DeliveryStatus.DELIVERED, 1)}


async def test_a_mail_sent_but_not_recorded_is_sent_again_with_the_same_message_id(
        env: Engine, mailbox: Mailbox) -> None:
    """The documented window (docs/delivery.md): the server took the mail, the worker died
    before recording it. The next execution sends again; the duplicate is recognisable."""
    view = await env.create(NOW, NEWS, name="news", notify=[EMAIL])
    await env.dispatcher.refresh_shards()
    await env.dispatcher.run_once()
    [run] = await env.rt.store.runs_list(view.job.job_id, 10, None)
    dead = await env.rt.store.run_claim(RunClaim(run_id=run.run_id, token="dead-worker",
                                                 now=env.clock.now(), lease_seconds=30))
    assert dead is not None
    key = "email:me@example.com"
    assert await env.rt.store.delivery_claim(DeliveryClaim(
        run_id=run.run_id, channel_key=key, channel="email", target="me@example.com",
        claim_token="dead-worker", now=env.clock.now(), max_attempts=10,
        stale_at=env.clock.now() + timedelta(minutes=10)))
    job = await env.rt.store.job_get_any(view.job.job_id)
    assert job is not None
    await env.worker.deliverer.email.send(build_message(
        job=job, run=dead, to="me@example.com", text="hi", sender=SENDER, channel_key=key,
        now=env.clock.now()))

    env.clock.advance(seconds=31)
    await env.settle()

    ids = mailbox.message_ids()
    assert len(ids) == 2
    assert ids[0] == ids[1]  # what lets a mail system drop the second
    delivered = by_channel(await only_run(env, view.job.job_id))[key]
    assert (delivered.status, delivered.attempts) == (DeliveryStatus.DELIVERED, 2)


async def test_a_mail_is_recorded_delivered_before_the_session_ends(
        env: Engine, mailbox: Mailbox) -> None:
    """The window in which a crash repeats a mail is one write long: the delivery is recorded
    on the server's answer to DATA, not after QUIT's round trip (docs/delivery.md)."""
    mailbox.hold_quit = True
    view = await env.create(NOW, NEWS, notify=[EMAIL])
    settling = asyncio.ensure_future(env.settle())
    try:
        await asyncio.get_running_loop().run_in_executor(None, mailbox.quit_arrived.wait, 30)
        assert mailbox.quit_arrived.is_set()
        [run] = await env.rt.store.runs_list(view.job.job_id, 10, None)
        [mail] = await env.rt.store.deliveries_of([run.run_id])
        assert (mail.status, mail.attempts) == (DeliveryStatus.DELIVERED, 1)  # QUIT unanswered
    finally:
        mailbox.release_quit()
        await settling
    assert (await only_run(env, view.job.job_id)).status is RunStatus.SUCCEEDED


async def test_a_fenced_attempt_delivers_nothing(env: Engine, mailbox: Mailbox) -> None:
    view = await env.create(NOW, NEWS, notify=[EMAIL])
    await env.dispatcher.refresh_shards()
    await env.dispatcher.run_once()
    [run] = await env.rt.store.runs_list(view.job.job_id, 10, None)
    zombie = await env.rt.store.run_claim(RunClaim(run_id=run.run_id, token="zombie",
                                                   now=env.clock.now(), lease_seconds=30))
    assert zombie is not None
    env.clock.advance(seconds=31)
    await env.settle()  # another worker took the run over and delivered
    assert mailbox.count() == 1

    job = await env.rt.store.job_get_any(view.job.job_id)
    assert job is not None
    await env.worker.deliverer.deliver(job, zombie, {"message": "late"})  # the zombie wakes up
    assert mailbox.count() == 1


# --- webhooks ---------------------------------------------------------------------------------


def verify(secret: str, header: str, raw: bytes) -> bool:
    """What a receiver does (docs/delivery.md): recompute v1 over "t.body"."""
    parts = [p.split("=", 1) for p in header.split(",")]
    timestamp = next(v for k, v in parts if k == "t")
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + raw,
                        hashlib.sha256).hexdigest()
    return any(k == "v1" and hmac.compare_digest(v, expected) for k, v in parts)


async def test_webhook_channels_post_signed_json_and_slack(env: Engine,
                                                           webhook: WebhookReceiver) -> None:
    secret = await create_secret(env.rt.store, "alice", env.clock.now())
    plain, slack = f"{webhook.url}?as=json", f"{webhook.url}?as=slack"
    view = await env.create(NOW, NEWS, name="Markets", notify=[
        {"channel": "webhook", "url": plain},
        {"channel": "webhook", "url": slack, "format": "slack"}])
    await env.settle()

    run = await only_run(env, view.job.job_id)
    got = {r.path: r for r in webhook.received}
    assert set(got) == {"/hook?as=json", "/hook?as=slack"}
    for path, url in (("/hook?as=json", plain), ("/hook?as=slack", slack)):
        received = got[path]
        assert received.method == "POST"
        assert received.idempotency_key == delivery_id(run.run_id, f"webhook:{url}")
        assert received.headers["user-agent"].startswith("onthedot/")
        assert received.headers["content-type"] == "application/json"
        assert verify(secret, received.headers["x-onthedot-signature"], received.raw)
        assert not verify("whsec_wrong", received.headers["x-onthedot-signature"], received.raw)
    assert got["/hook?as=slack"].body == {
        "text": "*Markets*\n台股收高 1.2%\n\nTSMC &amp; peers &lt;up&gt;"}
    body = got["/hook?as=json"].body
    assert (body["run_id"], body["job_id"], body["job_name"], body["text"]) == (
        run.run_id, view.job.job_id, "Markets", NEWS["text"])
    assert body["output"] == run.output
    assert all(d.status is DeliveryStatus.DELIVERED for d in run.deliveries)


async def test_without_a_secret_a_webhook_is_not_signed(env: Engine,
                                                        webhook: WebhookReceiver) -> None:
    await env.create(NOW, NEWS, notify=[{"channel": "webhook", "url": webhook.url}])
    await env.settle()
    [received] = webhook.received
    assert "x-onthedot-signature" not in received.headers


async def test_a_failing_channel_is_recorded_and_the_run_still_succeeds(
        env: Engine, mailbox: Mailbox, webhook: WebhookReceiver) -> None:
    webhook.status_for = lambda _r, _n: 503
    mailbox.answer = lambda _m, _n: "550 5.1.1 no such user"
    view = await env.create(NOW, NEWS, notify=[
        INBOX, EMAIL, {"channel": "webhook", "url": webhook.url}])
    await env.settle()

    run = await only_run(env, view.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    assert run.error is None
    deliveries = by_channel(run)
    hook = deliveries[f"webhook:{webhook.url}"]
    # 503 is worth retrying: three sends now, then the schedule (tests/delivery/test_retries.py)
    assert (hook.status, hook.attempts, hook.sent_at) == (DeliveryStatus.RETRYING, 3, None)
    assert hook.next_attempt_at == env.clock.now() + timedelta(minutes=1)
    assert hook.error is not None
    assert hook.error.startswith("the webhook answered HTTP 503")
    # Every try of one delivery carries the same key: the receiver can tell them apart.
    assert webhook.keys == {delivery_id(run.run_id, f"webhook:{webhook.url}"): 3}
    mail = deliveries["email:me@example.com"]
    assert (mail.status, mail.attempts) == (DeliveryStatus.FAILED, 1)  # 5xx: failed for good
    assert mail.next_attempt_at is None
    assert mail.error is not None
    assert "550" in mail.error
    assert deliveries["inbox"].status is DeliveryStatus.DELIVERED


async def test_a_webhook_channel_to_loopback_is_refused_unless_allowlisted(
        guarded: Engine, webhook: WebhookReceiver) -> None:
    """Creation refuses an IP literal (tests/delivery/test_edges.py); a job stored while the
    operator allowed loopback, run after they stopped, is refused at send time."""
    view = await guarded.create(NOW, NEWS)
    job = await guarded.rt.store.job_get_any(view.job.job_id)
    assert job is not None
    saved = await guarded.rt.store.job_save(JobSave(job=replace(
        job, notify=[{"channel": "webhook", "url": webhook.url}])))
    assert saved is not None
    await guarded.settle()

    run = await only_run(guarded, view.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    [refused] = run.deliveries
    assert (refused.status, refused.attempts) == (DeliveryStatus.FAILED, 1)
    assert refused.error is not None
    assert "loopback" in refused.error
    assert "ONTHEDOT_EGRESS_ALLOW" in refused.error
    assert webhook.count() == 0


# --- what is not delivered ------------------------------------------------------------------


class QuietDigest:
    """An action with nothing new to tell (issue 9 §3)."""

    name = "quiet"
    uses_previous = False
    param_names: tuple[str, ...] = ()

    def validate(self, params: dict[str, Any]) -> None:
        pass

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        return {"deliver": False, "items": []}


async def test_an_output_that_says_deliver_false_goes_nowhere(
        env: Engine, mailbox: Mailbox) -> None:
    env.rt.actions.register(QuietDigest())
    view = await env.create(NOW, {"type": "quiet"}, notify=[INBOX, EMAIL])
    await env.settle()
    run = await only_run(env, view.job.job_id)
    assert run.status is RunStatus.SUCCEEDED
    assert run.deliveries == ()
    assert mailbox.count() == 0
    assert await inbox_of(env) == []


async def test_a_job_with_no_channels_keeps_its_result_in_the_run_only(env: Engine) -> None:
    view = await env.create(NOW, NEWS, notify=[])
    await env.settle()
    run = await only_run(env, view.job.job_id)
    assert run.output == {"message": NEWS["text"], "job": view.job.name}
    assert run.deliveries == ()
    assert await inbox_of(env) == []


async def test_each_run_of_a_recurring_job_is_delivered(env: Engine, mailbox: Mailbox) -> None:
    view = await env.create(JobParams(type="recurring", schedule="0 8 * * *"), NEWS,
                            notify=[INBOX, EMAIL])

    async def ran(days: int) -> list[JobRun]:
        """The succeeded runs once ``days`` ran and the next one is scheduled (PostgreSQL shows
        a run event, which schedules the next run, only after older transactions ended)."""
        await env.settle()
        runs = (await env.rt.service.list_runs("alice", view.job.job_id)).items
        done = [r for r in runs if r.status is RunStatus.SUCCEEDED]
        pending = any(r.status is RunStatus.PENDING for r in runs)
        return done if len(done) == days and pending else []

    for days in (1, 2):
        env.clock.advance(timedelta(days=1).total_seconds())
        done = await async_wait_until(lambda d=days: ran(d), 30, f"run {days} delivered")
    assert mailbox.count() == 2
    assert len(set(mailbox.message_ids())) == 2
    assert {i.run_id for i in await inbox_of(env)} == {r.run_id for r in done}
