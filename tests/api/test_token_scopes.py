"""Tokens with scopes and an expiry over HTTP and MCP: a revoked or expired token is refused by
the very next request, a read-only token cannot write, an admin reads other users' dead
letters."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx

from onthedot.api.app import create_app
from onthedot.api.auth import hash_token
from onthedot.domain.models import RunStatus
from onthedot.runtime import Runtime
from onthedot.store.base import ApiToken, DueClaim, RunClaim, RunFinish
from tests.api.conftest import assert_problem, job_body

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def make_token(rt: Runtime, user: str, secret: str, *scopes: str,
                     expires_in: timedelta | None = None) -> dict[str, str]:
    now = rt.clock.now()
    await rt.store.token_create(ApiToken(
        token_id=f"tok_{secret}", user_id=user, scopes=scopes or ("write",), created_at=now,
        expires_at=None if expires_in is None else now + expires_in), hash_token(secret))
    return {"Authorization": f"Bearer {secret}"}


async def test_a_revoked_token_is_refused_by_the_next_request(client: httpx.AsyncClient,
                                                               rt: Runtime) -> None:
    alice = await make_token(rt, "alice", "s1")
    assert (await client.get("/v1/jobs", headers=alice)).status_code == 200

    assert await rt.store.token_revoke("tok_s1", rt.clock.now())

    assert_problem(await client.get("/v1/jobs", headers=alice), 401, "invalid_token")
    # and the server does not fall back to token-less mode: a token existed
    assert_problem(await client.get("/v1/jobs"), 401, "missing_token")


async def test_an_expired_token_is_refused(client: httpx.AsyncClient, rt: Runtime) -> None:
    alice = await make_token(rt, "alice", "s1", expires_in=timedelta(hours=1))
    assert (await client.get("/v1/jobs", headers=alice)).status_code == 200

    rt.clock.advance(3600)  # type: ignore[attr-defined]

    assert_problem(await client.get("/v1/jobs", headers=alice), 401, "invalid_token")


async def test_a_rotated_token_answers_to_its_new_secret_only(client: httpx.AsyncClient,
                                                              rt: Runtime) -> None:
    old = await make_token(rt, "alice", "s1")
    created = await client.post("/v1/jobs", json=job_body(), headers=old)
    assert created.status_code == 201

    await rt.store.token_rotate("tok_s1", hash_token("s2"))

    assert_problem(await client.get("/v1/jobs", headers=old), 401, "invalid_token")
    page = await client.get("/v1/jobs", headers={"Authorization": "Bearer s2"})
    assert [j["job_id"] for j in page.json()["jobs"]] == [created.json()["job_id"]]


async def test_a_use_is_recorded_at_most_once_a_minute(client: httpx.AsyncClient,
                                                       rt: Runtime) -> None:
    alice = await make_token(rt, "alice", "s1")
    first = rt.clock.now()
    await client.get("/v1/jobs", headers=alice)
    rt.clock.advance(30)  # type: ignore[attr-defined]
    await client.get("/v1/jobs", headers=alice)

    assert (await rt.store.tokens_list())[0].last_used_at == first


async def test_a_read_only_token_reads_but_never_writes(client: httpx.AsyncClient,
                                                        rt: Runtime) -> None:
    writer = await make_token(rt, "alice", "w", "write")
    reader = await make_token(rt, "alice", "r", "read")
    job = (await client.post("/v1/jobs", json=job_body(), headers=writer)).json()

    assert (await client.get(f"/v1/jobs/{job['job_id']}", headers=reader)).status_code == 200
    assert (await client.get("/v1/jobs", headers=reader)).status_code == 200
    parsed = await client.post("/v1/parse", json={"text": "every day at 8am"}, headers=reader)
    assert parsed.status_code == 200  # a POST that stores nothing
    for method, path, body in [
        ("POST", "/v1/jobs", job_body()),
        ("POST", "/v1/jobs:batch", {"jobs": [job_body()]}),
        ("PATCH", f"/v1/jobs/{job['job_id']}", {"name": "renamed"}),
        ("POST", f"/v1/jobs/{job['job_id']}:pause", None),
        ("DELETE", f"/v1/jobs/{job['job_id']}", None),
        ("POST", "/v1/chat", {"message": "remind me to stretch every day at 9am"}),
    ]:
        answer = await client.request(method, path, json=body, headers=reader)
        assert_problem(answer, 403, "insufficient_scope", "Authorization")
    assert (await rt.service.get_job("alice", job["job_id"])).job.name == "news"


async def dead_letter(rt: Runtime, user: str, headers: dict[str, str],
                      client: httpx.AsyncClient) -> str:
    job = (await client.post("/v1/jobs", json=job_body(job_params={"type": "immediate"}),
                             headers=headers)).json()
    [run] = (await rt.service.list_runs(user, job["job_id"])).items
    now = rt.clock.now()
    await rt.store.runs_claim_due(DueClaim(shard=run.shard, now=now, limit=10,
                                           misfire_grace_seconds=60))
    await rt.store.run_claim(RunClaim(run_id=run.run_id, token="t", now=now, lease_seconds=30))
    await rt.store.run_finish(RunFinish(run_id=run.run_id, token="t", status=RunStatus.FAILED,
                                        finished_at=now, error="boom", dead_lettered=True))
    return run.run_id


async def test_only_an_admin_reads_another_users_dead_letters(client: httpx.AsyncClient,
                                                              rt: Runtime) -> None:
    alice = await make_token(rt, "alice", "a", "write")
    admin = await make_token(rt, "root", "adm", "admin")
    run_id = await dead_letter(rt, "alice", alice, client)

    own = await client.get("/v1/dead-letters", headers=alice)
    assert [r["run_id"] for r in own.json()["dead_letters"]] == [run_id]
    assert_problem(await client.get("/v1/dead-letters", params={"user": "alice"},
                                    headers=await make_token(rt, "bob", "b", "write")),
                   403, "insufficient_scope")
    as_admin = await client.get("/v1/dead-letters", params={"user": "alice"}, headers=admin)
    assert [r["run_id"] for r in as_admin.json()["dead_letters"]] == [run_id]
    assert (await client.get("/v1/dead-letters", headers=admin)).json()["dead_letters"] == []
    redriven = await client.post(f"/v1/dead-letters/{run_id}:redrive",
                                 params={"user": "alice"}, headers=admin)
    assert redriven.status_code == 200, redriven.text
    assert redriven.json()["status"] == "ENQUEUED"


@contextlib.asynccontextmanager
async def mcp_client(rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running (in the test's own task): the MCP transport's task
    group lives there."""
    app = create_app(rt)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        yield c


async def mcp_call(client: httpx.AsyncClient, headers: dict[str, str], tool: str,
                   arguments: dict[str, Any]) -> dict[str, Any]:
    answer = await client.post("/mcp", headers={**headers, **MCP_HEADERS}, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


async def test_mcp_write_tools_refuse_a_read_only_token(rt: Runtime) -> None:
    reader = await make_token(rt, "alice", "r", "read")

    async with mcp_client(rt) as client:
        listed = await mcp_call(client, reader, "list_tasks", {})
        created = await mcp_call(client, reader, "create_task",
                                 {"task": "stretch", "when": "every day at 9am"})

    assert listed["isError"] is False
    assert created["isError"] is True
    assert created["structuredContent"]["error"]["code"] == "insufficient_scope"
    assert await rt.store.jobs_count_of_user("alice") == 0


async def test_mcp_refuses_a_revoked_token_at_once(rt: Runtime) -> None:
    alice = await make_token(rt, "alice", "a")
    async with mcp_client(rt) as client:
        assert (await mcp_call(client, alice, "list_tasks", {}))["isError"] is False

        await rt.store.token_revoke("tok_a", rt.clock.now())

        answer = await client.post("/mcp", headers={**alice, **MCP_HEADERS}, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_tasks", "arguments": {}}})
    assert_problem(answer, 401, "invalid_token")
