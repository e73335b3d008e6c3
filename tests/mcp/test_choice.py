"""create_task and update_task choose what a task does from its words, or from ``kind``.

The tests marked NEEDS_PROMPT create a ``prompt`` job (or expect its validation); they pass once
the prompt action is registered (actions/prompt.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import JobParams
from onthedot.mcp.registry import Caller
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from tests.mcp.conftest import NEWS, TZ, error, memory_session, ok

DIGEST = {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}


@pytest.fixture
async def model_rt(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Runtime]:
    """A server with a model configured (nothing calls it while tasks are created)."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/model.db", default_timezone=TZ,
                        llm_base_url="http://127.0.0.1:9/v1", llm_model="test-model")
    runtime = await Runtime.open(settings, clock)
    yield runtime
    await runtime.close()


async def test_schema_offers_kind() -> None:
    registry = build_registry(TZ)
    for name in ("create_task", "update_task"):
        tool = registry.get(name)
        assert tool is not None
        kind = tool.input_schema["properties"]["kind"]
        assert kind["enum"] == ["auto", "prompt", "news_digest", "message"]
    create = registry.get("create_task")
    assert create is not None
    # No `default` keyword (OpenAI's strict mode refuses it): the description says it.
    assert "Default auto" in create.input_schema["properties"]["kind"]["description"]


async def test_offline_news_request_becomes_a_digest(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        body = ok(await session.call_tool("create_task", {"when": NEWS}))
    assert body["kind"] == "news_digest"
    assert body["task"]["action"] == DIGEST
    assert body["task"]["name"] == "總結財經新聞"
    assert body["confirmation"] == (
        "好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，"
        "寄到收件匣，下次執行 2026-06-23 08:00。")
    view = await rt.service.get_job("alice", body["task"]["job_id"])
    assert view.job.action == DIGEST


@pytest.mark.parametrize(("args", "action", "confirmation"), [
    ({"when": "remind me to call mom at 5pm"}, {"type": "message", "text": "call mom"},
     "OK, scheduled a reminder “call mom” for 2026-06-22 17:00 (Asia/Taipei), delivered to "
     "your inbox."),
    ({"when": "every day at 7am", "task": "send me the tech headlines"},
     {"type": "news_digest", "topic": "technology", "language": "en"},
     "OK, scheduled a technology news digest every day at 07:00 (Asia/Taipei), delivered to "
     "your inbox; next run 2026-06-23 07:00."),
    # The digest is in the task's language, the sentence in the language of `when`.
    ({"when": "every day at 8am", "task": "總結財經新聞"}, DIGEST,
     "OK, scheduled a finance news digest every day at 08:00 (Asia/Taipei), delivered to your "
     "inbox; next run 2026-06-23 08:00."),
    ({"when": "每天早上八点提醒我给新闻部打电话"}, {"type": "message", "text": "给新闻部打电话"},
     "好的，已安排：每天 08:00（Asia/Taipei）会提醒你「给新闻部打电话」，"
     "发到收件箱，下次执行 2026-06-23 08:00。"),
    # Without `when` the sentence is in the task's language; a webhook names its host.
    ({"schedule": "0 9 * * 1-5", "task": "stretch", "notify_inbox": False,
      "notify_webhook": "https://hooks.example.com/x"}, {"type": "message", "text": "stretch"},
     "OK, scheduled a reminder “stretch” every weekday at 09:00 (Asia/Taipei), delivered to "
     "the webhook at hooks.example.com; next run 2026-06-23 09:00."),
])
async def test_offline_choices(rt: Runtime, args: dict[str, Any], action: dict[str, Any],
                               confirmation: str) -> None:
    async with memory_session(rt) as session:
        body = ok(await session.call_tool("create_task", args))
    assert body["task"]["action"] == action
    assert body["kind"] == action["type"]
    assert body["confirmation"] == confirmation


async def test_explicit_kind_overrides_the_words(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        plain = ok(await session.call_tool("create_task", {"when": NEWS, "kind": "message"}))
        assert plain["task"]["action"] == {"type": "message", "text": "總結財經新聞"}
        assert plain["confirmation"].startswith(
            "好的，已排定：每天 08:00（Asia/Taipei）會提醒你「總結財經新聞」")
        market = ok(await session.call_tool("create_task", {
            "task": "what moved the stock market", "schedule": "0 18 * * 1-5",
            "kind": "news_digest"}))
        assert market["task"]["action"] == {"type": "news_digest", "topic": "finance",
                                            "language": "en"}
        assert market["confirmation"] == (
            "OK, scheduled a finance news digest every weekday at 18:00 (Asia/Taipei), "
            "delivered to your inbox; next run 2026-06-22 18:00.")
        auto = ok(await session.call_tool("create_task", {
            "task": "water the plants", "schedule": "0 18 * * *", "kind": "auto"}))
        assert auto["task"]["action"] == {"type": "message", "text": "water the plants"}
        nothing = error(await session.call_tool("create_task", {
            "task": "call mom", "when": "now", "kind": "news_digest"}), "unknown_topic", "task")
        assert "finance" in nothing["expected"]
        error(await session.call_tool("create_task", {
            "task": "build", "when": "now", "kind": "message",
            "webhook_url": "https://example.com/hook"}), "conflicting_arguments", "kind")
        error(await session.call_tool("create_task", {
            "task": "x", "when": "now", "kind": "webhook"}), "invalid_argument", "kind")
        hook = ok(await session.call_tool("create_task", {
            "task": "build", "when": "now", "kind": "auto",
            "webhook_url": "https://example.com/hook"}))
        assert hook["kind"] == "webhook"
        assert hook["task"]["action"]["type"] == "webhook"
    assert len((await rt.service.list_jobs("alice")).items) == 4


async def test_dry_run_reports_the_choice(rt: Runtime) -> None:
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ, dry_run=True)
    result = await build_registry(TZ).call("create_task", {"when": NEWS}, caller)
    assert not result.is_error, result.payload
    assert result.payload["kind"] == "news_digest"
    assert result.payload["would_create"]["action"] == DIGEST
    assert result.payload["would_create"]["name"] == "總結財經新聞"
    assert (await rt.service.list_jobs("alice")).items == []


async def test_update_keeps_the_kind_and_changes_its_words(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        reminder = ok(await session.call_tool("create_task", {
            "task": "call mom", "schedule": "0 17 * * *"}))["task"]
        digest = ok(await session.call_tool("create_task", {"when": NEWS}))["task"]

        async def update(task_id: str, **args: Any) -> dict[str, Any]:
            result = ok(await session.call_tool("update_task", {"task_id": task_id, **args}))
            task: dict[str, Any] = result["task"]
            return task

        # New words for a reminder stay a reminder, even words that ask for news.
        told = await update(reminder["job_id"], task="summarize the tech news")
        assert told["action"] == {"type": "message", "text": "summarize the tech news"}
        # A digest re-reads its topic (and language) from new words.
        tech = await update(digest["job_id"], task="總結科技新聞")
        assert tech["action"] == {"type": "news_digest", "topic": "technology",
                                  "language": "zh-Hant"}
        error(await session.call_tool("update_task", {"task_id": digest["job_id"],
                                                      "task": "call mom"}),
              "unknown_topic", "task")
        # kind switches: to a reminder of the digest's name, back to a digest of its words.
        switched = await update(digest["job_id"], kind="message")
        assert switched["action"] == {"type": "message", "text": "總結財經新聞"}
        back = await update(digest["job_id"], kind="news_digest", task="world headlines")
        assert back["action"] == {"type": "news_digest", "topic": "world", "language": "en"}
        error(await session.call_tool("update_task", {"task_id": digest["job_id"],
                                                      "kind": "auto"}),
              "missing_argument", None)
        error(await session.call_tool("update_task", {
            "task_id": reminder["job_id"], "kind": "message",
            "webhook_url": "https://example.com/hook"}), "conflicting_arguments", "kind")


async def test_update_of_a_digest_with_its_own_feeds(rt: Runtime) -> None:
    spec = JobSpec(action={"type": "news_digest", "feeds": ["https://example.com/rss.xml"],
                           "topic": "finance", "max_items": 5},
                   params=JobParams("recurring", schedule="0 8 * * *", timezone=TZ),
                   name="my feeds")
    view, _ = await rt.service.create_job("alice", spec)
    async with memory_session(rt) as session:
        kept = ok(await session.call_tool("update_task", {
            "task_id": view.job.job_id, "task": "read what my feeds say"}))["task"]
        retopic = ok(await session.call_tool("update_task", {
            "task_id": view.job.job_id, "task": "tech news"}))["task"]
    # Feeds and limits stay; words without a topic drop the topic instead of failing.
    assert kept["action"] == {"type": "news_digest", "feeds": ["https://example.com/rss.xml"],
                              "max_items": 5, "language": "en"}
    assert retopic["action"] == {"type": "news_digest",
                                 "feeds": ["https://example.com/rss.xml"], "max_items": 5,
                                 "topic": "technology", "language": "en"}


# --- NEEDS_PROMPT: pass once the prompt action is registered ------------------------------
async def test_prompt_without_a_model_is_llm_not_configured(rt: Runtime) -> None:
    """NEEDS_PROMPT"""
    async with memory_session(rt) as session:
        err = error(await session.call_tool("create_task", {"when": NEWS, "kind": "prompt"}),
                    "llm_not_configured")
    assert "ONTHEDOT_LLM_BASE_URL" in err["message"] + (err["expected"] or "")
    assert (await rt.service.list_jobs("alice")).items == []


async def test_with_a_model_news_stays_a_digest_and_writing_is_a_prompt(
        model_rt: Runtime) -> None:
    """NEEDS_PROMPT"""
    async with memory_session(model_rt) as session:
        digest = ok(await session.call_tool("create_task", {"when": NEWS}))
        assert digest["task"]["action"] == DIGEST
        reminder = ok(await session.call_tool("create_task", {
            "when": "remind me to call mom in 10 minutes"}))
        assert reminder["task"]["action"] == {"type": "message", "text": "call mom"}
        body = ok(await session.call_tool("create_task", {"when": "每天早上八點寫一首詩"}))
        assert body["kind"] == "prompt"
        assert body["task"]["action"] == {"type": "prompt", "prompt": "寫一首詩"}
        assert body["confirmation"] == (
            "好的，已排定：每天 08:00（Asia/Taipei）會為你執行「寫一首詩」，"
            "寄到收件匣，下次執行 2026-06-23 08:00。")
        # The caller can still ask for a kind.
        prompt = ok(await session.call_tool("create_task", {"when": NEWS, "kind": "prompt"}))
        assert prompt["task"]["action"] == {"type": "prompt", "prompt": "總結財經新聞"}
        # New words for a prompt change the prompt and keep the kind.
        retold = ok(await session.call_tool("update_task", {
            "task_id": body["task"]["job_id"], "task": "summarize the tech news"}))["task"]
        assert retold["action"] == {"type": "prompt", "prompt": "summarize the tech news"}
