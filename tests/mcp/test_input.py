"""Bad input to the MCP server: a JSON-RPC parse error for a body that is not acceptable JSON,
a correctable tool error for an argument that cannot be stored, never a 500."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.config import Settings
from onthedot.mcp.registry import Caller
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from tests.api.live import LiveServer, live_server
from tests.mcp.conftest import TZ

MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/http.db", default_timezone=TZ)
    with live_server(settings) as live:
        yield live


def _call(name: str, arguments_json: str) -> str:
    """A tools/call request as raw text, so that it can hold what an encoder would not write."""
    return ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": '
            f'"{name}", "arguments": {arguments_json}}}}}')


@pytest.mark.parametrize("raw", [
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "\xff"}}',
    ("[" * 5000 + "]" * 5000).encode(),
    ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + "[" * 100 + "]" * 100
     + "}").encode(),
    _call("create_task", '{"in": {"minutes": NaN}, "task": "x"}').encode(),
    b'{"jsonrpc": "2.0", "id": 1, ',
])
async def test_unacceptable_json_is_a_json_rpc_parse_error(server: LiveServer,
                                                           raw: bytes) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post("/mcp", content=raw, headers=MCP_HEADERS)
        assert response.status_code == 400, response.text
        body = response.json()
        assert body["jsonrpc"] == "2.0"
        assert body["id"] is None
        assert body["error"]["code"] == -32700
        assert body["error"]["message"].startswith("Parse error")
        assert body["error"]["data"]["code"] == "invalid_json"
        assert body["error"]["data"]["field"] == "body"
        # The server is fine afterwards, and a body it read first still reaches the SDK whole.
        listed = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                               "params": {}}, headers=MCP_HEADERS)
        assert listed.status_code == 200, listed.text
        assert listed.json()["result"]["tools"]


@pytest.mark.parametrize(("arguments", "field"), [
    ('{"when": "now", "task": "call \\ud800 mom"}', "task"),
    ('{"when": "now", "task": "x", "title": "\\udc00"}', "title"),
    ('{"when": "tomorrow \\ud800 at 9"}', "when"),
    ('{"schedule": "0 8 * * *", "task": "x", "timezone": "Asia/\\ud800"}', "timezone"),
    ('{"when": "now", "task": "nul \\u0000 inside"}', "task"),
])
async def test_unstorable_text_in_a_tool_call_is_a_tool_error(server: LiveServer,
                                                              arguments: str,
                                                              field: str) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post("/mcp", content=_call("create_task", arguments),
                                   headers=MCP_HEADERS)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is True
        err = result["structuredContent"]["error"]
        assert err["code"] == "invalid_text", err
        assert err["field"] == field
        listed = await http.post("/mcp", content=_call("list_tasks", "{}"), headers=MCP_HEADERS)
        assert listed.json()["result"]["structuredContent"]["tasks"] == []


async def test_an_argument_name_that_is_not_text_is_refused_by_the_sdk(
        server: LiveServer) -> None:
    # The SDK validates the call's parameters before our registry sees them.
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post("/mcp", content=_call("create_task", '{"\\ud800": 1}'),
                                   headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize(("tool", "arguments", "code", "field"), [
    ("create_task", {"in": {"minutes": math.nan}, "task": "x"}, "invalid_argument", "in"),
    ("create_task", {"in": {"hours": math.inf}, "task": "x"}, "invalid_argument", "in"),
    ("list_tasks", {"page_size": -math.inf}, "invalid_argument", "page_size"),
    ("create_task", {"when": "now", "task": "x", "\ud800": 1}, "invalid_text", None),
    ("create_task", {"when": "now", "task": "x\x00"}, "invalid_text", "task"),
])
async def test_the_registry_refuses_what_json_over_stdio_can_carry(
        rt: Runtime, tool: str, arguments: dict[str, Any], code: str, field: str | None) -> None:
    # Over stdio the SDK reads JSON with pydantic, which accepts NaN and Infinity; in memory the
    # client turns them into null. So the registry is called directly, on the real service.
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    result = await registry.call(tool, arguments, caller)
    assert result.is_error
    err = result.payload["error"]
    assert (err["code"], err["field"]) == (code, field), err
    assert ("finite" if code == "invalid_argument" else "surrogate") in err["expected"]
    json.loads(result.text)  # the answer itself can be encoded
    listed = await registry.call("list_tasks", {}, caller)
    assert listed.payload["tasks"] == []
