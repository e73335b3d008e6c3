"""A webhook URL that the URL alone shows to be refused is a 422 at job creation, and nothing is
stored; the allowlist admits it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from tests.actions.conftest import LITERAL_REFUSALS, START
from tests.api.conftest import assert_problem
from tests.mcp.conftest import error, memory_session, ok


def _job(url: str) -> dict[str, object]:
    return {"name": "hook", "action": {"type": "webhook", "url": url},
            "job_params": {"type": "immediate"}}


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/create.db"),
                                 FakeClock(START))
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


@pytest.mark.parametrize(("url", "reason"), LITERAL_REFUSALS)
async def test_a_refused_url_is_a_422_and_nothing_is_stored(client: httpx.AsyncClient, rt: Runtime,
                                                            url: str, reason: str) -> None:
    problem = assert_problem(await client.post("/v1/jobs", json=_job(url)), 422,
                             "egress_refused", "action.url")
    assert f"{reason} address" in problem["detail"]
    assert "ONTHEDOT_EGRESS_ALLOW" in problem["expected"]
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
    assert (await rt.service.list_jobs("alice")).items == []


async def test_changing_a_job_to_a_refused_url_is_a_422(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=_job("https://hooks.example.com/x"))
    assert created.status_code == 201, created.text
    job_id = created.json()["job_id"]
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={
        "action": {"type": "webhook", "url": "http://[::ffff:a9fe:a9fe]/latest/meta-data/"}}),
        422, "egress_refused", "action.url")
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert job["action"]["url"] == "https://hooks.example.com/x"


async def test_a_url_httpx_cannot_parse_is_a_422(client: httpx.AsyncClient) -> None:
    # 0177.0.0.01 looks dotted-decimal but is not: refused as invalid, not passed on to a resolver.
    assert_problem(await client.post("/v1/jobs", json=_job("http://0177.0.0.01/")), 422,
                   "invalid_value", "action.url")


async def test_the_allowlist_admits_a_name_and_a_cidr(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/allow.db",
                        egress_allow="localhost,10.0.0.0/8")
    rt = await Runtime.open(settings, FakeClock(START))
    try:
        transport = httpx.ASGITransport(app=create_app(rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            for url in ("http://localhost:8080/hook", "http://10.1.2.3/hook",
                        "http://0xa.1.2.3/hook"):
                assert (await c.post("/v1/jobs", json=_job(url))).status_code == 201, url
            for url in ("http://127.0.0.1/hook", "http://app.localhost/", "http://192.168.0.1/"):
                assert_problem(await c.post("/v1/jobs", json=_job(url)), 422, "egress_refused",
                               "action.url")
    finally:
        await rt.close()


async def test_mcp_names_the_tool_argument(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        err = error(await session.call_tool("create_task", {
            "task": "x", "when": "now",
            "webhook_url": "http://metadata.google.internal/computeMetadata/v1/"}),
            "egress_refused", "webhook_url")
        assert "cloud metadata" in err["message"]
        assert ok(await session.call_tool("list_tasks", {}))["tasks"] == []
