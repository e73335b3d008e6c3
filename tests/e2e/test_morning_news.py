"""Issue 9 end to end: "每天早上八點幫我總結財經新聞" said to the MCP tool becomes a daily finance
digest that fires at 08:00 Taipei (injected clock), reads real feeds on loopback, is written
offline or by the model (a loopback server speaking the chat-completions protocol; a news
request stays a digest with a model too, issue 20, and the model writes it), and reaches
the inbox and a real SMTP server exactly once although the worker that sent it died before
recording the run and the run was executed again. On SQLite and on PostgreSQL + NATS."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from onthedot.delivery.channels import delivery_id
from onthedot.domain.delivery import DeliveryStatus
from onthedot.domain.models import JobRun, RunStatus
from onthedot.mcp.server import build_server, fixed_caller
from onthedot.store.base import InboxQuery, RunClaim
from tests.actions.newsfeeds import Entry, FeedServer, rss
from tests.delivery.conftest import SENDER, engine_on
from tests.engine.conftest import Engine
from tests.mcp.conftest import ok
from tests.support.fake_openai import FakeOpenAI, fake_openai, say
from tests.support.smtp import Mailbox
from tests.support.waiting import async_wait_until
from tests.support.webhook import LOOPBACK_ALLOW

TAIPEI = "Asia/Taipei"
SENTENCE = "每天早上八點幫我總結財經新聞"
EIGHT_AM = datetime(2026, 6, 23, 0, 0, tzinfo=UTC)  # the first 08:00 in Taipei after START
HEADLINES = ("台積電法說會釋出樂觀展望", "央行維持利率不變")
TO = "me@example.com"
LEASE_SECONDS = 30


@pytest.fixture
def feeds() -> Iterator[FeedServer]:
    server = FeedServer().start()
    server.feed("/finance.xml", rss("經濟日報", [
        Entry(HEADLINES[0], "https://money.example/tsmc", EIGHT_AM - timedelta(hours=3)),
        Entry(HEADLINES[1], "https://money.example/rates", EIGHT_AM - timedelta(hours=5))],
        "zh-TW"))
    yield server
    server.stop()


def items_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The new items a digest request hands the model (a JSON list ending its user message)."""
    user = body["messages"][1]["content"]
    items: list[dict[str, Any]] = json.loads(user[user.index("["):])
    return items


def summarise_the_items(body: dict[str, Any]) -> dict[str, Any]:
    """The model: writes the digest from the items it was given."""
    return say("今日財經重點：" + "；".join(item["title"] for item in items_sent(body)))


@contextlib.asynccontextmanager
async def deployment(backend: str, tmp_path: Path, feeds: FeedServer, mailbox: Mailbox,
                     model: FakeOpenAI | None) -> AsyncIterator[Engine]:
    """The deployment's feeds file points the finance topic at the loopback feed."""
    feeds_file = tmp_path / "feeds.json"
    feeds_file.write_text(json.dumps(
        {"finance": {"zh-Hant": [feeds.url("/finance.xml")]}}), "utf-8")
    settings: dict[str, Any] = {
        "smtp_url": mailbox.url, "smtp_from": SENDER, "egress_allow": LOOPBACK_ALLOW,
        "news_feeds_file": str(feeds_file)}
    if model is not None:
        settings |= {"llm_base_url": model.url, "llm_model": "test-model", "llm_api_key": "sk-test"}
    async with engine_on(backend, tmp_path, **settings) as engine:
        yield engine


async def say_it_to_the_chatbot(engine: Engine) -> dict[str, Any]:
    server = build_server(TAIPEI, fixed_caller(engine.rt.service, "alice", TAIPEI))
    async with create_connected_server_and_client_session(server, raise_exceptions=True) as s:
        return ok(await s.call_tool("create_task", {"when": SENTENCE, "notify_email": TO}))


async def both_mornings(engine: Engine, job_id: str) -> list[JobRun]:
    """The job's runs once the next morning's is there too (empty before): one tick each."""
    await engine.tick()
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    return runs if len(runs) >= 2 else []


async def fire_and_die_after_sending(engine: Engine, job_id: str) -> JobRun:
    """08:00 comes; a worker claims the run, does the work, delivers it and dies before it
    records the run (the window docs/delivery.md describes)."""
    engine.clock.set(EIGHT_AM + timedelta(seconds=1))
    await engine.dispatcher.refresh_shards()
    assert await engine.dispatcher.run_once() == 1
    [run] = await engine.rt.store.runs_list(job_id, 10, None)
    assert run.scheduled_at == EIGHT_AM
    claimed = await engine.rt.store.run_claim(RunClaim(
        run_id=run.run_id, token="dying-worker", now=engine.clock.now(),
        lease_seconds=LEASE_SECONDS))
    assert claimed is not None
    job = await engine.rt.store.job_get_any(job_id)
    assert job is not None
    done, output, error, _retryable = await engine.worker._execute(job, claimed)
    assert done, error
    await engine.worker.deliverer.deliver(job, claimed, output)
    return claimed


@pytest.mark.parametrize("with_model", [False, True], ids=["offline", "model"])
@pytest.mark.parametrize("backend", ["sqlite", pytest.param(
    "postgres", marks=[pytest.mark.postgres, pytest.mark.nats])])
async def test_the_morning_finance_digest_is_delivered_once(
        backend: str, with_model: bool, tmp_path: Path, feeds: FeedServer,
        mailbox: Mailbox) -> None:
    with contextlib.ExitStack() as stack:
        model = stack.enter_context(fake_openai(summarise_the_items)) if with_model \
            else None
        async with deployment(backend, tmp_path, feeds, mailbox, model) as engine:
            created = await say_it_to_the_chatbot(engine)
            task = created["task"]
            assert task["job_params"]["schedule"] == "0 8 * * *"
            assert task["job_params"]["timezone"] == TAIPEI
            assert task["action"]["type"] == "news_digest"
            assert task["action"]["language"] == "zh-Hant"
            assert "財經新聞摘要" in created["confirmation"]
            assert f"寄到收件匣和 e-mail（{TO}）" in created["confirmation"]
            assert task["notify"] == [{"channel": "inbox"}, {"channel": "email", "to": TO}]

            first = await fire_and_die_after_sending(engine, task["job_id"])
            assert mailbox.count() == 1

            # The dead worker's lease ends; the rescuer hands the run back and it runs again.
            engine.clock.advance(seconds=LEASE_SECONDS + 1)
            await engine.settle()
            # The recurring watcher may see the finished run's event a tick later (on
            # PostgreSQL, events become visible once every older transaction has ended).
            runs = await async_wait_until(
                lambda: both_mornings(engine, task["job_id"]), what="the next morning's run")
            inbox = await engine.rt.store.inbox_list(InboxQuery(user_id="alice", limit=10))
            model_requests = [] if model is None else list(model.requests)

    [run] = [r for r in runs if r.scheduled_at == EIGHT_AM]
    # The next morning's run waits, as a daily job's should.
    assert [r.scheduled_at for r in runs if r is not run] == [EIGHT_AM + timedelta(days=1)]
    assert (run.run_id, run.status, run.attempt) == (first.run_id, RunStatus.SUCCEEDED, 2)
    text = run.output["digest"]
    for headline in HEADLINES:
        assert headline in text
    if with_model:
        assert text.startswith("今日財經重點：")
        assert run.output["written_by"] == "model"
        # Both attempts asked the model and handed it the real feed items.
        assert len(model_requests) == 2
        assert {i["title"] for i in items_sent(model_requests[0])} == set(HEADLINES)
    else:
        assert run.output["new_items"] == 2
        assert run.output["written_by"] == "offline"
        assert "https://money.example/tsmc" in text

    # Exactly once per channel: one mail (sent by the worker that died), one inbox item.
    assert mailbox.count() == 1
    mail = mailbox.messages[0]
    assert mail["To"] == TO
    assert mail["Message-ID"] == f"<{delivery_id(run.run_id, f'email:{TO}')}@example.test>"
    plain = mail.get_body(("plain",))
    assert plain is not None
    for headline in HEADLINES:
        assert headline in plain.get_content()
    assert len(inbox) == 1
    assert inbox[0].run_id == run.run_id
    assert inbox[0].text == text
    assert {k: (d.status, d.attempts) for k, d in
            ((d.channel_key, d) for d in run.deliveries)} == {
        "inbox": (DeliveryStatus.DELIVERED, 1),
        f"email:{TO}": (DeliveryStatus.DELIVERED, 1)}
