"""job_params.flexible_window_seconds over REST: accepted for one-time and recurring jobs,
shown back, moving next_run_at to the job's own slot in the window; refused (problem+json
naming the field) when out of range, of the wrong type, or given to an immediate job."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from onthedot.domain.ids import flexible_offset
from tests.api.conftest import assert_problem, job_body

FIELD = "job_params.flexible_window_seconds"
EIGHT_TAIPEI = datetime.fromisoformat("2026-06-22T08:00:00+08:00")


def recurring(**params: Any) -> dict[str, Any]:
    return job_body(job_params={"type": "recurring", "schedule": "0 8 * * *",
                                "timezone": "Asia/Taipei", **params})


async def test_a_window_moves_the_first_run_to_the_jobs_offset(
        client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=recurring(flexible_window_seconds=600))
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["job_params"]["flexible_window_seconds"] == 600
    offset = flexible_offset(job["job_id"], 600)
    assert datetime.fromisoformat(job["next_run_at"]) == EIGHT_TAIPEI + offset
    runs = (await client.get(f"/v1/jobs/{job['job_id']}/runs")).json()["runs"]
    assert datetime.fromisoformat(runs[0]["scheduled_at"]) == EIGHT_TAIPEI + offset


async def test_without_a_window_the_job_is_exact(client: httpx.AsyncClient) -> None:
    for params in ({}, {"flexible_window_seconds": 0}, {"flexible_window_seconds": None}):
        job = (await client.post("/v1/jobs", json=recurring(**params))).json()
        assert job["job_params"]["flexible_window_seconds"] == 0
        assert datetime.fromisoformat(job["next_run_at"]) == EIGHT_TAIPEI


async def test_a_one_time_job_takes_a_window(client: httpx.AsyncClient) -> None:
    body = job_body(job_params={"type": "one-time", "time": "2026-06-22T08:00:00+08:00",
                                "flexible_window_seconds": 3600})
    job = (await client.post("/v1/jobs", json=body)).json()
    offset = flexible_offset(job["job_id"], 3600)
    assert datetime.fromisoformat(job["next_run_at"]) == EIGHT_TAIPEI + offset


@pytest.mark.parametrize("window", [-1, 3601, 86_400])
async def test_a_window_out_of_range_is_422(client: httpx.AsyncClient, window: int) -> None:
    body = assert_problem(await client.post("/v1/jobs", json=recurring(
        flexible_window_seconds=window)), 422, "invalid_value", FIELD)
    assert "3600" in body["expected"]
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


@pytest.mark.parametrize("window", ["600", 1.5, True, [600]])
async def test_a_window_of_the_wrong_type_is_422(client: httpx.AsyncClient,
                                                  window: object) -> None:
    response = await client.post("/v1/jobs", json=recurring(flexible_window_seconds=window))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == FIELD
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_an_immediate_job_with_a_window_is_a_conflict(client: httpx.AsyncClient) -> None:
    body = job_body(job_params={"type": "immediate", "flexible_window_seconds": 60})
    assert_problem(await client.post("/v1/jobs", json=body), 422, "conflicting_field", FIELD)
    body = job_body(job_params={"type": "immediate", "flexible_window_seconds": 0})
    assert (await client.post("/v1/jobs", json=body)).status_code == 201


async def test_patch_adds_and_removes_the_window(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=recurring())).json()["job_id"]
    changed = await client.patch(f"/v1/jobs/{job_id}", json={"job_params": {
        "type": "recurring", "schedule": "0 8 * * *", "timezone": "Asia/Taipei",
        "flexible_window_seconds": 900}})
    assert changed.status_code == 200, changed.text
    offset = flexible_offset(job_id, 900)
    assert datetime.fromisoformat(changed.json()["next_run_at"]) == EIGHT_TAIPEI + offset
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    pending = [r for r in runs if r["status"] == "PENDING"]
    assert [datetime.fromisoformat(r["scheduled_at"]) for r in pending] == [
        EIGHT_TAIPEI + offset]
    # job_params is replaced as a whole: leaving the window out makes the job exact again.
    exact = await client.patch(f"/v1/jobs/{job_id}", json={"job_params": {
        "type": "recurring", "schedule": "0 8 * * *", "timezone": "Asia/Taipei"}})
    assert datetime.fromisoformat(exact.json()["next_run_at"]) == EIGHT_TAIPEI
    bad = await client.patch(f"/v1/jobs/{job_id}", json={"job_params": {
        "type": "recurring", "schedule": "0 8 * * *", "flexible_window_seconds": 3601}})
    assert_problem(bad, 422, "invalid_value", FIELD)


async def test_the_batch_endpoint_judges_each_window(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs:batch", json={"jobs": [
        recurring(flexible_window_seconds=600), recurring(flexible_window_seconds=7200)]})
    assert response.status_code == 200, response.text
    first, second = response.json()["results"]
    assert first["status"] == 201
    assert first["job"]["job_params"]["flexible_window_seconds"] == 600
    assert second["status"] == 422
    assert second["problem"]["field"] == f"jobs[1].{FIELD}"
    assert timedelta(0) <= (datetime.fromisoformat(first["job"]["next_run_at"])
                            - EIGHT_TAIPEI) < timedelta(seconds=600)
