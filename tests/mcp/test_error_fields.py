"""Errors a model can act on: every error path we can provoke names, in ``field``, one of the
tool's own arguments (or nothing), and every code a tool can answer is explained in
docs/mcp.md#errors.

The paths are provoked on a real service over SQLite; the codes the source can raise are found
by reading it, so a new code that is not documented fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from onthedot.domain.clock import FakeClock
from onthedot.mcp.registry import Caller, ToolRegistry
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from tests.mcp.conftest import NEWS, TZ

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "onthedot"
# What a tool call reaches: the tools, the service, schedules, the parser, action and channel
# validation, the store, and the error classes' own codes.
REACHED = ["mcp", "service.py", "quotas.py", "schedule", "nl", "actions", "delivery", "store",
           "domain/errors.py"]
# Codes in that source that a tool call cannot answer, and why.
NOT_FROM_TOOLS = {
    "action_failed": "an attempt of a run failed: recorded on the run, not a tool error",
    "llm_empty_answer": "the model gave no answer while a run executed",
    "delivery_failed": "sending a run's result failed: recorded on its delivery",
    "not_dead_letter": "redriving a dead letter is a REST operation",
    "job_paused": "redriving a paused job's dead letter is a REST operation",
    "bad_configuration": "a process refuses to start",
    "forbidden": "answered at the HTTP edge, before any tool",
    "error": "the root class's placeholder; every raise names its code",
    "conflict": "the conflict class's placeholder; every raise names its code",
    "too_many_jobs": "a batch over its limit: POST /v1/jobs:batch only",
    "idempotency_key_clash": "`onthedot jobs reassign` only (a store-direct CLI command)",
    "version_mismatch": "a confirmed chat change whose job changed: /v1/chat only (no tool "
                        "passes an expected version)",
}
CODE = re.compile(r'\bcode\s*=\s*"([a-z_]+)"')

# (tool, arguments) -> the code expected; the field is checked for every one of them.
Call = tuple[str, dict[str, Any], str]


def documented_codes() -> set[str]:
    text = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {code for row in rows for code in re.findall(r"`([a-z_]+)`", row)}


def raised_codes() -> set[str]:
    files: list[Path] = []
    for part in REACHED:
        path = SOURCE / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return {code for f in files for code in CODE.findall(f.read_text(encoding="utf-8"))}


def test_every_code_a_tool_can_answer_is_documented() -> None:
    raised = raised_codes()
    assert {"time_passed", "ambiguous_timezone", "confirmation_required"} <= raised
    assert NOT_FROM_TOOLS.keys() <= raised, "an exemption for a code no longer raised"
    missing = raised - NOT_FROM_TOOLS.keys() - documented_codes()
    assert not missing, f"codes missing from docs/mcp.md#errors: {sorted(missing)}"


def test_the_documented_codes_exist() -> None:
    extra = documented_codes() - raised_codes() - {
        "unauthorized", "invalid_token",  # detected at the HTTP edge (api/auth.py)
        "invalid_json",  # a body that is not JSON (api/mcp_http.py reports it, in data)
        "internal_error",  # a bug, answered without its traceback (registry)
    }
    assert not extra, f"docs/mcp.md#errors lists codes nothing raises: {sorted(extra)}"


async def provoke(registry: ToolRegistry, caller: Caller, clock: FakeClock) -> list[Call]:
    """Make every error we can; returns (tool, arguments, code) of each."""
    async def value(name: str, **arguments: Any) -> dict[str, Any]:
        result = await registry.call(name, arguments, caller)
        assert not result.is_error, result.payload
        return result.payload

    task_id = (await value("create_task", when=NEWS))["task"]["job_id"]
    deleted = (await value("create_task", when="every day at 7am", task="x"))["task"]["job_id"]
    await value("delete_task", task_id=deleted)
    missed = (await value("create_task", when="in 10 minutes", task="tea"))["task"]["job_id"]
    await value("pause_task", task_id=missed)
    clock.advance(minutes=15)
    await value("create_task", when="now", task="x", idempotency_key="k1")

    calls: list[Call] = [
        ("create_task", {"task": "x", "schedual": "0 8 * * *"}, "unknown_argument"),
        ("create_task", {"task": "x", "in": {"weeks": 1}}, "unknown_argument"),
        ("create_task", {"task": "x", "in": {"minutes": -1}}, "invalid_argument"),
        ("create_task", {"task": "x", "in": {"minutes": 0}}, "invalid_argument"),
        ("create_task", {"task": "x", "in": {"minutes": 1.5}}, "invalid_argument"),
        ("create_task", {"task": 5, "when": "now"}, "invalid_argument"),
        ("create_task", {"task": "x", "when": "now", "title": "t" * 201}, "invalid_argument"),
        ("create_task", {"task": "   ", "when": "now"}, "invalid_argument"),
        ("create_task", {"task": "x", "when": "now", "kind": "sms"}, "invalid_argument"),
        ("create_task", {"task": "x\x00", "when": "now"}, "invalid_text"),
        ("create_task", {"task": "x", "when": "now", "\ud800": 1}, "invalid_text"),
        ("create_task", ["not", "an", "object"], "invalid_argument"),  # type: ignore[list-item]
        ("create_task", {"task": "x"}, "missing_argument"),
        ("create_task", {"when": "every day at 8am"}, "missing_argument"),
        ("create_task", {"task": "x", "when": "now", "schedule": "0 8 * * *"},
         "conflicting_arguments"),
        ("create_task", {"task": "x", "when": "now", "kind": "message",
                         "webhook_url": "https://example.com/h"}, "conflicting_arguments"),
        ("create_task", {"when": "每週八提醒我喝水"}, "could_not_understand"),
        ("create_task", {"task": "x", "schedule": "0 25 * * *"}, "invalid_schedule"),
        ("create_task", {"task": "x", "schedule": "FREQ=SECONDLY;INTERVAL=5"},
         "schedule_too_frequent"),
        ("create_task", {"task": "x", "schedule": "FREQ=DAILY;UNTIL=20200101T000000Z"},
         "no_future_occurrence"),
        ("create_task", {"task": "x", "time": "tomorrow"}, "invalid_time"),
        ("create_task", {"task": "x", "time": "2020-01-01T08:00:00"}, "time_in_past"),
        ("create_task", {"task": "x", "schedule": "0 8 * * *", "timezone": "Mars/Base"},
         "unknown_timezone"),
        ("create_task", {"task": "x", "schedule": "0 8 * * *", "timezone": "EST"},
         "ambiguous_timezone"),
        ("create_task", {"task": "call mom", "when": "now", "kind": "news_digest"},
         "unknown_topic"),
        ("create_task", {"task": "x", "when": "now", "kind": "prompt"}, "llm_not_configured"),
        ("create_task", {"task": "x", "when": "now", "webhook_url": "ftp://example.com"},
         "invalid_value"),
        ("create_task", {"task": "x", "when": "now", "webhook_url": "http://127.0.0.1/h"},
         "egress_refused"),
        ("create_task", {"task": "x", "when": "now", "notify_webhook": "http://10.0.0.1/h"},
         "egress_refused"),
        ("create_task", {"task": "x", "when": "now", "notify_email": "not an address"},
         "invalid_email"),
        ("create_task", {"task": "x", "when": "now", "notify_email": "me@example.com"},
         "email_not_configured"),
        ("create_task", {"task": "y", "when": "now", "idempotency_key": "k1"},
         "idempotency_key_reused"),
        ("list_tasks", {"status": "done"}, "invalid_argument"),
        ("list_tasks", {"page_size": 500}, "invalid_argument"),
        ("list_tasks", {"page_token": "not-a-token"}, "invalid_page_token"),
        ("list_inbox", {"page_token": "not-a-token"}, "invalid_page_token"),
        ("list_inbox", {"unread_only": "yes"}, "invalid_argument"),
        ("get_task", {}, "missing_argument"),
        ("get_task", {"task_id": None}, "missing_argument"),
        ("get_task", {"task_id": "01NOPE"}, "not_found"),
        ("get_task", {"task_id": "x\x00"}, "invalid_text"),
        ("update_task", {"task_id": task_id}, "missing_argument"),
        ("update_task", {"task_id": "01NOPE", "title": "x"}, "not_found"),
        ("update_task", {"task_id": deleted, "title": "x"}, "job_cancelled"),
        ("update_task", {"task_id": task_id, "when": "now"}, "confirmation_required"),
        ("update_task", {"task_id": task_id, "timezone": "GMT+8"}, "ambiguous_timezone"),
        ("update_task", {"task_id": task_id, "task": "call mom"}, "unknown_topic"),
        ("update_task", {"task_id": task_id, "schedule": "0 25 * * *"}, "invalid_schedule"),
        ("update_task", {"task_id": task_id, "notify_webhook": "http://169.254.169.254/"},
         "egress_refused"),
        ("pause_task", {"task_id": deleted}, "not_pausable"),
        ("pause_task", {"task_id": "01NOPE"}, "not_found"),
        ("resume_task", {"task_id": deleted}, "not_resumable"),
        ("resume_task", {"task_id": missed}, "time_passed"),
        ("delete_task", {"task_id": "01NOPE"}, "not_found"),
        ("run_task_now", {"task_id": deleted}, "job_cancelled"),
        ("run_task_now", {"task_id": "01NOPE"}, "not_found"),
        ("skip_next_run", {"task_id": deleted}, "not_skippable"),
        ("skip_next_run", {"task_id": missed}, "not_recurring"),
        ("skip_next_run", {"task_id": "01NOPE"}, "not_found"),
        ("backfill_task", {"task_id": task_id, "start_time": "yesterday",
                           "end_time": "2026-06-22T00:00:00Z"}, "invalid_time"),
        ("backfill_task", {"task_id": task_id, "start_time": "2026-06-20T00:00:00Z",
                           "end_time": "2099-01-01T00:00:00Z"}, "invalid_range"),
        ("backfill_task", {"task_id": missed, "start_time": "2026-06-20T00:00:00Z",
                           "end_time": "2026-06-21T00:00:00Z"}, "not_recurring"),
        ("mark_inbox_read", {"item_id": "01NOPE"}, "not_found"),
        ("mark_inbox_read", {}, "missing_argument"),
        ("frobnicate_task", {}, "unknown_tool"),
    ]
    return calls


async def test_every_error_names_an_argument_of_its_tool_or_none(
        rt: Runtime, clock: FakeClock) -> None:
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    seen: set[str] = set()
    for name, arguments, code in await provoke(registry, caller, clock):
        result = await registry.call(name, arguments, caller)
        assert result.is_error, (name, arguments, result.payload)
        err = result.payload["error"]
        assert err["code"] == code, (name, arguments, err)
        tool = registry.get(name)
        arguments_of_tool = set(tool.input_schema["properties"]) if tool else set()
        assert err["field"] is None or err["field"] in arguments_of_tool, (name, err)
        assert err["message"]
        assert "Traceback" not in err["message"]
        seen.add(code)
    assert not seen - documented_codes(), sorted(seen - documented_codes())


@pytest.mark.parametrize(("name", "arguments", "field", "path"), [
    ("create_task", {"task": "x", "in": {"weeks": 1}}, "in", "in.weeks"),
    ("create_task", {"task": "x", "in": {"minutes": -1}}, "in", "in.minutes"),
    ("create_task", {"task": "x", "schedual": "0 8 * * *"}, None, "schedual"),
    ("create_task", {"task": "x", "schedule": "0 25 * * *"}, "schedule", None),
    ("create_task", {"task": "x", "when": "now", "webhook_url": "http://127.0.0.1/h"},
     "webhook_url", None),
    ("create_task", {"task": "x", "when": "now", "notify_webhook": "http://10.0.0.1/h"},
     "notify_webhook", None),
    ("create_task", {"task": "x", "when": "now", "notify_email": "me@example.com"},
     "notify_email", None),
    ("create_task", {"task": "call mom", "when": "now", "kind": "news_digest"}, "task", None),
    ("create_task", {"task": "x", "when": "now", "kind": "prompt"}, "kind", None),
    ("create_task", {"task": "x", "time": "2020-01-01T08:00:00"}, "time", None),
    ("list_tasks", {"page_token": "not-a-token"}, "page_token", None),
    ("get_task", {"task_id": "01NOPE"}, "task_id", None),
    ("mark_inbox_read", {"item_id": "01NOPE"}, "item_id", None),
])
async def test_the_field_is_the_argument_to_fix(rt: Runtime, name: str,
                                                arguments: dict[str, Any],
                                                field: str | None, path: str | None) -> None:
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    err = (await registry.call(name, arguments, caller)).payload["error"]
    assert (err["field"], err.get("path")) == (field, path), err


async def test_a_state_conflict_names_no_argument(rt: Runtime, clock: FakeClock) -> None:
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    task = (await registry.call("create_task", {"when": "in 10 minutes", "task": "tea"},
                                caller)).payload["task"]
    await registry.call("pause_task", {"task_id": task["job_id"]}, caller)
    clock.advance(minutes=12)
    err = (await registry.call("resume_task", {"task_id": task["job_id"]},
                               caller)).payload["error"]
    assert (err["code"], err["field"]) == ("time_passed", None)
    assert "not made up" in err["message"]
    assert err["expected"]
