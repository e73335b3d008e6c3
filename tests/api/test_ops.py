"""Operator endpoints and the generated API description."""

from __future__ import annotations

import httpx
import pytest

from onthedot.domain.errors import BackendError
from onthedot.runtime import Runtime
from tests.api.conftest import assert_problem, job_body


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert (response.status_code, response.json()["status"]) == (200, "ok")


async def test_readyz(client: httpx.AsyncClient, rt: Runtime,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    response = await client.get("/readyz")
    assert response.json() == {"status": "ready", "checks": {"store": "ok", "queue": "ok"}}

    async def down() -> None:
        raise BackendError("connection refused")

    monkeypatch.setattr(rt.queue, "ping", down)
    body = assert_problem(await client.get("/readyz"), 503, "not_ready", "queue")
    assert body["checks"] == {"store": "ok", "queue": "unavailable"}


async def test_metrics(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "once"}
    await client.post("/v1/jobs", json=job_body(), headers=headers)
    await client.post("/v1/jobs", json=job_body(), headers=headers)  # a replay is not new
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    await client.post(f"/v1/jobs/{job_id}:pause")
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "onthedot_jobs_created_total 2.0" in text
    assert 'onthedot_runs{status="PENDING"} 1.0' in text  # the paused job's run is cancelled
    assert 'onthedot_runs{status="RETRYING"} 0.0' in text
    assert 'status="CANCELLED"' not in text  # history is not counted at scrape time
    assert "onthedot_queue_depth 0.0" in text
    assert "onthedot_dead_letters 0.0" in text
    assert "onthedot_run_event_lag_seconds 0.0" in text
    assert "onthedot_dispatch_lateness_seconds_bucket" in text


async def test_openapi_and_docs(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    paths = spec["paths"]
    for path in ("/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}:pause",
                 "/v1/jobs/{job_id}:resume", "/v1/jobs/{job_id}:run", "/v1/jobs/{job_id}/runs",
                 "/v1/runs/{run_id}", "/v1/dead-letters", "/v1/dead-letters/{run_id}:redrive",
                 "/healthz", "/readyz", "/metrics"):
        assert path in paths, path
    create = paths["/v1/jobs"]["post"]
    assert {"201", "200", "409", "422"} <= create["responses"].keys()
    assert "application/problem+json" in create["responses"]["422"]["content"]
    assert spec["components"]["schemas"]["JobCreate"]["additionalProperties"] is False
    docs = await client.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()
