"""MCP tests: the SDK's real client, over memory, Streamable HTTP and stdio."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from types import EllipsisType
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import CallToolResult, TextContent, Tool

from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.mcp.registry import ToolRegistry
from onthedot.mcp.server import build_server, fixed_caller
from onthedot.runtime import Runtime

TZ = "Asia/Taipei"
START = datetime(2026, 6, 22, 2, 0, tzinfo=UTC)  # Monday 10:00 in Taipei
TOOLS = {"create_task", "list_tasks", "get_task", "update_task", "pause_task", "resume_task",
         "list_inbox", "mark_inbox_read",
         "delete_task", "run_task_now", "skip_next_run",
         "backfill_task"}
NEWS = "每天早上八點幫我總結財經新聞"


def payload(result: CallToolResult) -> dict[str, Any]:
    """The structured content, checked to be the same JSON as the text content."""
    assert result.structuredContent is not None
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert json.loads(block.text) == result.structuredContent
    return result.structuredContent


def ok(result: CallToolResult) -> dict[str, Any]:
    body = payload(result)
    assert not result.isError, body
    assert body["ok"] is True
    return body


def error(result: CallToolResult, code: str,
          field: str | EllipsisType | None = ...) -> dict[str, Any]:
    """The error object of ``result``, checked to have ``code`` and, unless ``field`` is left
    out, that ``field`` (None: the error names no argument)."""
    body = payload(result)
    assert result.isError, body
    assert body["ok"] is False
    err: dict[str, Any] = body["error"]
    assert {"code", "message", "field", "expected"} <= err.keys()
    assert err["code"] == code, err
    if field is not ...:
        assert err["field"] == field, err
    assert err["message"]
    assert "Traceback" not in err["message"]
    return err


def walk(schema: Any) -> list[dict[str, Any]]:
    """Every object schema inside ``schema``, itself included."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(walk(value))
    return found


# (read-only, destructive, idempotent) of each tool, as docs/mcp.md#tools explains them.
ANNOTATIONS = {
    "create_task": (False, False, False), "list_tasks": (True, None, None),
    "get_task": (True, None, None), "update_task": (False, True, False),
    "pause_task": (False, False, True), "resume_task": (False, False, True),
    "delete_task": (False, True, True), "run_task_now": (False, False, False),
    "list_inbox": (True, None, None), "mark_inbox_read": (False, False, True),
    "skip_next_run": (False, True, False), "backfill_task": (False, False, True),
}


def not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of a published optional property (itself if it is not optional)."""
    if "anyOf" not in schema:
        return schema
    [branch] = [b for b in schema["anyOf"] if b != {"type": "null"}]
    return {**branch, **{k: v for k, v in schema.items() if k != "anyOf"}}


def check_tool_list(tools: list[Tool]) -> dict[str, Tool]:
    """Names, annotations and schemas as the issue asks for (each client family's own rules:
    tests/mcp/test_client_schemas.py)."""
    by_name = {t.name: t for t in tools}
    assert set(by_name) == TOOLS
    for tool in tools:
        schema = tool.inputSchema
        text = json.dumps(schema)
        assert "$ref" not in text
        assert "$defs" not in text
        assert "definitions" not in text
        assert not {"oneOf", "anyOf", "allOf", "not"} & schema.keys()
        assert schema["type"] == "object"
        for obj in walk(schema):
            assert obj["additionalProperties"] is False, (tool.name, obj)
            assert obj["required"] == list(obj["properties"]), (tool.name, obj)
        ann = tool.annotations
        assert ann is not None, tool.name
        assert ann.openWorldHint is False
        read_only, destructive, idempotent = ANNOTATIONS[tool.name]
        assert ann.readOnlyHint is read_only, tool.name
        if not read_only:
            assert (ann.destructiveHint, ann.idempotentHint) == (destructive, idempotent), (
                tool.name)
        assert tool.description
        assert len(tool.description) < 700
        assert tool.outputSchema is not None, tool.name
        assert tool.outputSchema["type"] == "object"
    create = by_name["create_task"].inputSchema
    # Every argument may be null, i.e. omitted: the time may come as any one of four, and the
    # task text from `when`.
    assert all("anyOf" in p for p in create["properties"].values())
    assert {"title", "task", "schedule", "time", "in", "when", "timezone"} <= create[
        "properties"].keys()
    assert f"Default: {TZ}" in create["properties"]["timezone"]["description"]
    assert TZ in (by_name["create_task"].description or "")
    assert not_null(by_name["list_tasks"].inputSchema["properties"]["status"])["enum"]
    for name in ("get_task", "update_task", "pause_task", "resume_task", "delete_task",
                 "run_task_now", "skip_next_run"):
        task_id = by_name[name].inputSchema["properties"]["task_id"]
        assert task_id["type"] == "string"  # the one argument that is not nullable
        nullable = {k for k, v in by_name[name].inputSchema["properties"].items()
                    if "anyOf" in v}
        assert nullable == by_name[name].inputSchema["properties"].keys() - {"task_id"}
    return by_name


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/mcp.db", default_timezone=TZ)


@pytest.fixture
async def rt(settings: Settings, clock: FakeClock) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(settings, clock)
    yield runtime
    await runtime.close()


@contextlib.asynccontextmanager
async def memory_session(rt: Runtime, user: str = "alice",
                         registry: ToolRegistry | None = None) -> AsyncIterator[ClientSession]:
    server = build_server(TZ, fixed_caller(rt.service, user, TZ), registry)
    async with create_connected_server_and_client_session(server, raise_exceptions=True) as s:
        yield s
