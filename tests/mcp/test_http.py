"""Streamable HTTP at /mcp on a running API server (uvicorn, real socket), with the SDK's
client, as the same user as the REST API."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import InitializeResult

from onthedot.api.auth import hash_token
from onthedot.config import Settings
from onthedot.runtime import build_store
from tests.api.live import LiveServer, live_server
from tests.mcp.conftest import NEWS, TZ, check_tool_list, error, ok

ALICE, BOB = "otd_alice-secret", "otd_bob-secret"
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/http.db", default_timezone=TZ)
    with live_server(settings) as live:
        yield live


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None = None,
                       path: str = "/mcp") -> AsyncIterator[tuple[ClientSession, InitializeResult]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url + path, http_client=http) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        yield session, await session.initialize()


async def add_tokens(settings: Settings) -> None:
    store = build_store(settings)
    try:
        for token, user in ((ALICE, "alice"), (BOB, "bob")):
            await store.token_add(hash_token(token), user, datetime.now(UTC))
    finally:
        await store.close()


async def test_create_over_http_appears_in_rest(server: LiveServer) -> None:
    async with http_session(server.url) as (session, init):
        assert init.instructions is not None
        assert "create_task" in init.instructions
        assert TZ in init.instructions
        check_tool_list((await session.list_tools()).tools)
        created = ok(await session.call_tool("create_task", {"when": NEWS, "timezone": TZ}))
    async with httpx.AsyncClient(base_url=server.url) as rest:
        jobs = (await rest.get("/v1/jobs")).json()["jobs"]
    assert [j["job_id"] for j in jobs] == [created["task"]["job_id"]]
    job = jobs[0]
    assert job == created["task"] | {"last_run": job["last_run"]}
    assert job["action"] == {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}
    assert job["job_params"]["schedule"] == "0 8 * * *"
    next_run = datetime.fromisoformat(job["next_run_at"])
    assert job["next_run_at"].endswith("T00:00:00Z")
    assert next_run.astimezone(ZoneInfo(TZ)).strftime("%H:%M") == "08:00"
    assert next_run > datetime.now(UTC)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_both_paths_answer_without_redirect(server: LiveServer, path: str) -> None:
    async with httpx.AsyncClient(base_url=server.url, follow_redirects=False) as http:
        response = await http.post(path, json=LIST_TOOLS, headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    assert {t["name"] for t in response.json()["result"]["tools"]} >= {"create_task"}
    async with http_session(server.url, path=path) as (session, _init):
        assert ok(await session.call_tool("list_tasks", {}))["tasks"] == []


async def test_get_and_delete_are_405(server: LiveServer) -> None:
    """Stateless: no GET stream (the spec's 405) and no session to DELETE."""
    async with httpx.AsyncClient(base_url=server.url) as http:
        for method in ("GET", "DELETE"):
            response = await http.request(method, "/mcp", headers=MCP_HEADERS)
            assert response.status_code == 405
            assert response.headers["allow"] == "POST"


async def test_local_mode_refuses_a_rebound_host(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        evil_host = await http.post("/mcp", json=LIST_TOOLS,
                                    headers={**MCP_HEADERS, "Host": "evil.example"})
        evil_origin = await http.post("/mcp", json=LIST_TOOLS,
                                      headers={**MCP_HEADERS, "Origin": "http://evil.example"})
    for response in (evil_host, evil_origin):
        assert response.status_code == 403
        assert response.json()["code"] == "untrusted_origin"


async def test_bearer_tokens_decide_the_user(server: LiveServer) -> None:
    await add_tokens(server.settings)
    async with httpx.AsyncClient(base_url=server.url) as http:
        anonymous = await http.post("/mcp", json=LIST_TOOLS, headers=MCP_HEADERS)
        wrong = await http.post("/mcp", json=LIST_TOOLS,
                                headers={**MCP_HEADERS, "Authorization": "Bearer otd_nope"})
    assert anonymous.status_code == 401
    assert anonymous.headers["content-type"].startswith("application/problem+json")
    assert anonymous.headers["www-authenticate"].startswith("Bearer")
    assert anonymous.json()["code"] == "missing_token"
    assert wrong.status_code == 401
    assert wrong.json()["code"] == "invalid_token"

    async with http_session(server.url, ALICE) as (alice, _init):
        task_id = ok(await alice.call_tool("create_task", {"when": NEWS}))["task"]["job_id"]
        unknown = error(await alice.call_tool("create_task", {
            "when": NEWS, "shedule": "0 8 * * *"}), "unknown_argument", None)
        assert unknown["path"] == "shedule"
        error(await alice.call_tool("create_task", {"task": "x", "schedule": "every morning"}),
              "invalid_schedule", "schedule")
    async with http_session(server.url, BOB) as (bob, _init):
        error(await bob.call_tool("get_task", {"task_id": task_id}), "not_found", "task_id")
        error(await bob.call_tool("delete_task", {"task_id": task_id}), "not_found", "task_id")
        assert ok(await bob.call_tool("list_tasks", {}))["tasks"] == []
    async with httpx.AsyncClient(base_url=server.url,
                                 headers={"Authorization": f"Bearer {ALICE}"}) as rest:
        job = (await rest.get(f"/v1/jobs/{task_id}")).json()
    assert job["status"] == "scheduled"
