"""The tools through the SDK's client over the in-memory transport (a fake clock)."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs installed

from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from tests.mcp.conftest import NEWS, TZ, check_tool_list, error, memory_session, ok


async def test_tool_list_names_annotations_and_schemas(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        listed = await session.list_tools()
    tools = check_tool_list(listed.tools)
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool.inputSchema)


async def test_create_from_chinese_sentence(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        body = ok(await session.call_tool("create_task", {"when": NEWS, "timezone": TZ}))
    task = body["task"]
    assert body["created"] is True
    assert task["job_params"] == {"type": "recurring", "time": None, "schedule": "0 8 * * *",
                                  "timezone": TZ, "flexible_window_seconds": 0}
    # No model configured: a news request becomes a digest (tests/mcp/test_choice.py).
    assert task["action"] == {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}
    assert task["name"] == "總結財經新聞"
    assert body["kind"] == "news_digest"
    assert task["next_run_at"] == "2026-06-23T00:00:00Z"  # 08:00 in Taipei
    assert body["understood"]["matched"] == "每天早上八點"
    assert body["confirmation"].startswith(
        "好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要")
    view = await rt.service.get_job("alice", task["job_id"])
    assert view.job.user_id == "alice"


async def test_every_way_to_give_the_time(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        cron = ok(await session.call_tool("create_task", {
            "task": "stand up", "schedule": "30 9 * * 1-5"}))["task"]
        rrule = ok(await session.call_tool("create_task", {
            "task": "review", "schedule": "FREQ=WEEKLY;BYDAY=FR;BYHOUR=17;BYMINUTE=0",
            "timezone": "Europe/London"}))["task"]
        once = ok(await session.call_tool("create_task", {
            "task": "call mom", "time": "2026-06-23T15:00:00", "title": "mom"}))["task"]
        soon = ok(await session.call_tool("create_task", {
            "task": "stretch", "in": {"minutes": 15}}))["task"]
        english = ok(await session.call_tool("create_task", {
            "when": "every weekday at 9am", "task": "standup notes"}))["task"]
        now = ok(await session.call_tool("create_task", {"when": "now", "task": "ping"}))["task"]
        hook = ok(await session.call_tool("create_task", {
            "task": "build", "when": "tomorrow at 3pm",
            "webhook_url": "https://example.com/hook"}))["task"]
    assert cron["next_run_at"] == "2026-06-23T01:30:00Z"  # default timezone: Taipei
    assert cron["job_params"]["timezone"] == TZ
    assert rrule["job_params"]["timezone"] == "Europe/London"
    assert rrule["next_run_at"] == "2026-06-26T16:00:00Z"
    assert once["name"] == "mom"
    assert once["next_run_at"] == "2026-06-23T07:00:00Z"
    assert soon["job_params"]["type"] == "one-time"
    assert soon["next_run_at"] == "2026-06-22T02:15:00Z"
    assert english["job_params"]["schedule"] == "0 9 * * 1-5"
    assert english["action"]["text"] == "standup notes"
    assert now["job_params"]["type"] == "immediate"
    assert now["next_run_at"] == "2026-06-22T02:00:00Z"
    assert hook["action"] == {"type": "webhook", "url": "https://example.com/hook",
                              "body": {"task": "build"}}


async def test_errors_are_correctable(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        # field names an argument of the tool or is None; path says what was wrong exactly.
        unknown = error(await session.call_tool("create_task", {
            "task": "x", "schedual": "0 8 * * *"}), "unknown_argument", None)
        assert unknown["path"] == "schedual"
        assert "schedule" in unknown["message"]
        assert "schedule" in unknown["expected"]
        error(await session.call_tool("create_task", {"task": "x", "schedule": "0 25 * * *"}),
              "invalid_schedule", "schedule")
        error(await session.call_tool("create_task", {"task": "x", "time": "tomorrow"}),
              "invalid_time", "time")
        error(await session.call_tool("create_task", {"task": "x", "schedule": "0 8 * * *",
                                                      "timezone": "Mars/Base"}),
              "unknown_timezone", "timezone")
        parse = error(await session.call_tool("create_task", {"when": "每週八提醒我喝水"}),
                      "could_not_understand", "when")
        assert parse["fragment"] == "每週八"
        error(await session.call_tool("create_task", {"task": "x"}), "missing_argument", "when")
        error(await session.call_tool("create_task", {"when": "every day at 8am"}),
              "missing_argument", "task")
        error(await session.call_tool("create_task", {
            "task": "x", "when": "now", "schedule": "0 8 * * *"}),
            "conflicting_arguments", "schedule")
        error(await session.call_tool("create_task", {"task": "x", "in": {"minutes": 0}}),
              "invalid_argument", "in")
        nested = error(await session.call_tool("create_task", {"task": "x", "in": {"weeks": 1}}),
                       "unknown_argument", "in")
        assert nested["path"] == "in.weeks"
        error(await session.call_tool("create_task", {"task": 5, "when": "now"}),
              "invalid_argument", "task")
        error(await session.call_tool("list_tasks", {"page_size": "ten"}),
              "invalid_argument", "page_size")
        error(await session.call_tool("list_tasks", {"page_size": 500}),
              "invalid_argument", "page_size")
        error(await session.call_tool("list_tasks", {"status": "done"}),
              "invalid_argument", "status")
        error(await session.call_tool("get_task", {}), "missing_argument", "task_id")
        error(await session.call_tool("get_task", {"task_id": "01NOPE"}), "not_found", "task_id")
        error(await session.call_tool("frobnicate_task", {}), "unknown_tool", None)
        error(await session.call_tool("create_task", {
            "task": "x", "when": "now", "webhook_url": "ftp://example.com"}),
            "invalid_value", "webhook_url")


async def test_nulls_count_as_omitted(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        body = ok(await session.call_tool("create_task", {
            "task": "x", "schedule": "0 8 * * *", "time": None, "in": None, "when": None,
            "title": None}))
    assert body["task"]["job_params"]["schedule"] == "0 8 * * *"


async def test_another_users_task_is_not_found(rt: Runtime) -> None:
    async with memory_session(rt, "alice") as alice:
        task_id = ok(await alice.call_tool("create_task", {"when": NEWS}))["task"]["job_id"]
    async with memory_session(rt, "bob") as bob:
        for tool in ("get_task", "pause_task", "resume_task", "delete_task", "run_task_now"):
            error(await bob.call_tool(tool, {"task_id": task_id}), "not_found", "task_id")
        error(await bob.call_tool("update_task", {"task_id": task_id, "title": "mine"}),
              "not_found", "task_id")
        assert ok(await bob.call_tool("list_tasks", {}))["tasks"] == []
    assert (await rt.service.get_job("alice", task_id)).job.name == "總結財經新聞"


async def test_lifecycle(rt: Runtime, clock: FakeClock) -> None:
    async with memory_session(rt) as session:
        task: dict[str, Any] = ok(await session.call_tool("create_task", {"when": NEWS}))["task"]
        task_id = task["job_id"]
        moved = ok(await session.call_tool("update_task", {
            "task_id": task_id, "when": "every day at 9am", "title": "news"}))["task"]
        assert moved["job_params"]["schedule"] == "0 9 * * *"
        assert moved["name"] == "news"
        assert moved["action"] == task["action"]  # a new time leaves the action alone
        assert moved["next_run_at"] == "2026-06-23T01:00:00Z"
        retold = ok(await session.call_tool("update_task", {
            "task_id": task_id, "task": "summarize tech news", "timezone": "Asia/Tokyo"}))["task"]
        assert retold["action"] == {"type": "news_digest", "topic": "technology",
                                    "language": "en"}
        assert retold["job_params"]["timezone"] == "Asia/Tokyo"
        assert retold["next_run_at"] == "2026-06-23T00:00:00Z"  # 09:00 in Tokyo
        error(await session.call_tool("update_task", {"task_id": task_id}),
              "missing_argument", None)
        paused = ok(await session.call_tool("pause_task", {"task_id": task_id}))["task"]
        assert paused["status"] == "paused"
        assert paused["next_run_at"] is None
        listed = ok(await session.call_tool("list_tasks", {"status": "paused"}))["tasks"]
        assert [t["job_id"] for t in listed] == [task_id]
        resumed = ok(await session.call_tool("resume_task", {"task_id": task_id}))["task"]
        assert resumed["status"] == "scheduled"
        run = ok(await session.call_tool("run_task_now", {"task_id": task_id}))["run"]
        assert run["kind"] == "manual"
        assert run["status"] == "PENDING"
        got = ok(await session.call_tool("get_task", {"task_id": task_id}))
        assert got["task"]["job_id"] == task_id
        assert run["run_id"] in [r["run_id"] for r in got["recent_runs"]]
        deleted = ok(await session.call_tool("delete_task", {"task_id": task_id}))
        assert deleted["deleted"] is True
        assert deleted["task"]["status"] == "cancelled"
        again = ok(await session.call_tool("delete_task", {"task_id": task_id}))
        assert again["task"]["status"] == "cancelled"  # idempotent, as annotated
        error(await session.call_tool("pause_task", {"task_id": task_id}), "not_pausable")


async def test_idempotency_key_returns_the_first_task(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        args = {"when": NEWS, "idempotency_key": "conversation-7-call-1"}
        first = ok(await session.call_tool("create_task", args))
        second = ok(await session.call_tool("create_task", args))
        assert first["created"] is True
        assert second["created"] is False
        assert first["task"]["job_id"] == second["task"]["job_id"]
        error(await session.call_tool("create_task", {**args, "when": "every day at 9am",
                                                      "task": "x"}),
              "idempotency_key_reused", "idempotency_key")
