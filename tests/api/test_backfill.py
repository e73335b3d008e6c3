"""POST /v1/jobs/{job_id}:backfill over HTTP, and the CLI's jobs backfill."""

from __future__ import annotations

import httpx

from onthedot.domain.clock import FakeClock
from tests.api.conftest import assert_problem, job_body


async def test_backfill_over_http(client: httpx.AsyncClient, clock: FakeClock) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]  # 08:00 Taipei
    clock.advance(days=3)
    body = {"start_time": "2026-06-22T00:00:00Z", "end_time": "2026-06-25T00:00:00Z"}

    response = await client.post(f"/v1/jobs/{job_id}:backfill", json=body)

    assert response.status_code == 201, response.text
    runs = response.json()["runs"]
    assert [(r["created"], r["run"]["kind"], r["run"]["scheduled_at"]) for r in runs] == [
        (False, "scheduled", "2026-06-22T00:00:00Z"),  # its first run, still waiting
        (True, "manual", "2026-06-23T00:00:00Z"),
        (True, "manual", "2026-06-24T00:00:00Z")]
    again = await client.post(f"/v1/jobs/{job_id}:backfill", json=body)
    assert [r["created"] for r in again.json()["runs"]] == [False, False, False]


async def test_backfill_refusals_over_http(client: httpx.AsyncClient, clock: FakeClock) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    clock.advance(days=3)
    path = f"/v1/jobs/{job_id}:backfill"
    assert_problem(await client.post(path, json={"start_time": "2026-06-22T00:00:00Z",
                                                 "end_time": "2026-06-24T00:00:00Z",
                                                 "max_runs": 1}), 422, "too_many_runs",
                   "end_time")
    assert_problem(await client.post(path, json={"start_time": "2026-06-22T00:00:00Z",
                                                 "end_time": "2030-01-01T00:00:00Z"}), 422,
                   "invalid_range", "end_time")
    assert_problem(await client.post(path, json={"start_time": "2026-06-22T00:00:00",
                                                 "end_time": "2026-06-24T00:00:00Z"}), 422,
                   "invalid_value", "start_time")
    bad = await client.post(path, json={"start_time": "yesterday",
                                        "end_time": "2026-06-24T00:00:00Z"})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == "start_time"
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["kind"] for r in runs] == ["scheduled"]
