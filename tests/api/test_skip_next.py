"""POST /v1/jobs/{job_id}:skip-next over HTTP: the skipped run and the job come back, the run
list and the history show the skip, and refusals are problem+json."""

from __future__ import annotations

import httpx

from onthedot.domain.clock import FakeClock
from tests.api.conftest import assert_problem, job_body


async def test_skip_next_over_http(client: httpx.AsyncClient, clock: FakeClock) -> None:
    clock.advance(hours=1)  # 01:00 UTC: the next 08:00 Taipei is tomorrow
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]

    response = await client.post(f"/v1/jobs/{job_id}:skip-next")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["skipped"]["status"] == "SKIPPED"
    assert body["skipped"]["scheduled_at"] == "2026-06-23T00:00:00Z"
    assert body["skipped"]["error"] == "skipped on request"
    assert (body["job"]["status"], body["job"]["next_run_at"]) == (
        "scheduled", "2026-06-24T00:00:00Z")
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [(r["status"], r["scheduled_at"]) for r in runs] == [
        ("PENDING", "2026-06-24T00:00:00Z"), ("SKIPPED", "2026-06-23T00:00:00Z")]
    history = (await client.get(f"/v1/jobs/{job_id}/history")).json()["changes"]
    assert history[0]["action"] == "skip"
    assert history[0]["details"]["run_id"] == body["skipped"]["run_id"]


async def test_skip_next_refusals_over_http(client: httpx.AsyncClient) -> None:
    once = await client.post("/v1/jobs", json=job_body(job_params={
        "type": "one-time", "time": "2026-06-23T09:00:00", "timezone": "Asia/Taipei"}))
    assert once.status_code == 201, once.text
    assert_problem(await client.post(f"/v1/jobs/{once.json()['job_id']}:skip-next"), 409,
                   "not_recurring", "job_params.type")
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    await client.post(f"/v1/jobs/{job_id}:pause")
    assert_problem(await client.post(f"/v1/jobs/{job_id}:skip-next"), 409, "not_skippable",
                   "status")
    assert_problem(await client.post("/v1/jobs/01NOPE:skip-next"), 404, "not_found")
