"""The API end to end over a real socket: uvicorn on a free port, httpx, the real clock, and the
background roles started by the app's lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from onthedot.api.auth import hash_token
from onthedot.config import Settings
from onthedot.runtime import Runtime
from tests.api.conftest import assert_problem, job_body
from tests.api.live import LiveServer, live_server
from tests.support.waiting import wait_until


@pytest.fixture
def server(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[LiveServer]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/live.db", shutdown_grace=5)
    with caplog.at_level("WARNING", logger="onthedot"), live_server(
            settings, roles=("watcher", "worker", "recurring")) as live:
        yield live


def test_an_immediate_job_fires_and_its_run_is_visible(server: LiveServer,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    warnings = [r.getMessage() for r in caplog.get_records("setup")]
    assert sum("every request acts as the single user 'local'" in w for w in warnings) == 1
    with httpx.Client(base_url=server.url, timeout=10) as http:
        response = http.post("/v1/jobs", json=job_body(
            action={"type": "message", "text": "hello"}, job_params={"type": "immediate"}))
        assert response.status_code == 201, response.text
        job_id = response.json()["job_id"]

        def succeeded() -> bool:
            runs = http.get(f"/v1/jobs/{job_id}/runs").json()["runs"]
            return bool(runs) and runs[0]["status"] == "SUCCEEDED"

        wait_until(succeeded, 15, "the run to succeed")
        run = http.get(f"/v1/jobs/{job_id}/runs").json()["runs"][0]
        assert run["output"]["message"] == "hello"
        assert run["attempt"] == 1
        assert run["started_at"]
        assert run["finished_at"]
        wait_until(lambda: http.get(f"/v1/jobs/{job_id}").json()["status"] == "completed", 15,
                   "the job to complete")
        assert http.get(f"/v1/jobs/{job_id}").json()["last_run"]["run_id"] == run["run_id"]
        assert ('onthedot_runs_finished_total{status="SUCCEEDED"} 1.0'
                in http.get("/metrics").text)
        assert http.get("/readyz").json()["status"] == "ready"


def test_errors_over_the_wire(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        big = http.post("/v1/jobs", content=b"{" + b" " * 70_000 + b"}",
                        headers={"Content-Type": "application/json"})
        assert_problem(big, 413, "body_too_large")
        assert_problem(http.post("/v1/jobs", json=job_body(bogus=1)), 422, "unknown_field",
                       "bogus")
        assert_problem(http.get("/v1/jobs/nope"), 404, "not_found")
        assert_problem(http.get("/v1/jobs?start_time=soon"), 422, "invalid_value", "start_time")
        assert http.get("/healthz").json() == {"status": "ok", "checks": {}}


def test_tokens_over_the_wire(server: LiveServer) -> None:
    async def add() -> None:
        rt = await Runtime.open(server.settings)
        try:
            await rt.store.token_add(hash_token("live-token"), "alice", rt.clock.now())
        finally:
            await rt.close()

    asyncio.run(add())
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert_problem(http.get("/v1/jobs"), 401, "missing_token")
        ok = http.get("/v1/jobs", headers={"Authorization": "Bearer live-token"})
        assert ok.status_code == 200
        assert ok.json() == {"jobs": [], "next_page_token": None}
