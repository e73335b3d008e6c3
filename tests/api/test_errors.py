"""Every error path answers RFC 9457 problem+json with the right status, code and field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from onthedot.domain.errors import BackendError
from onthedot.runtime import Runtime
from tests.api.conftest import START, assert_problem, job_body


@pytest.mark.parametrize(("body", "code", "field"), [
    (job_body(colour="red"), "unknown_field", "colour"),
    (job_body(job_params={"type": "recurring", "schedul": "0 8 * * *"}), "unknown_field",
     "job_params.schedul"),
    (job_body(retry_policy={"max_attempt": 3}), "unknown_field", "retry_policy.max_attempt"),
    ({"job_params": {"type": "immediate"}}, "missing_field", "action"),
    (job_body(job_params={"type": "weekly"}), "invalid_value", "job_params.type"),
    (job_body(misfire_policy="later"), "invalid_value", "misfire_policy"),
    (job_body(timeout_seconds="soon"), "invalid_value", "timeout_seconds"),
    (job_body(job_params={"type": "recurring", "schedule": "61 8 * * *"}), "invalid_schedule",
     "job_params.schedule"),
    (job_body(job_params={"type": "recurring", "schedule": "0 8 * * *",
                          "timezone": "Mars/Olympus"}), "unknown_timezone",
     "job_params.timezone"),
    (job_body(job_params={"type": "one-time", "time": "2020-01-01T00:00:00Z"}), "time_in_past",
     "job_params.time"),
    (job_body(job_params={"type": "one-time", "time": "next tuesday"}), "invalid_time",
     "job_params.time"),
    (job_body(job_params={"type": "recurring", "schedule": "*/10 * * * * *"}),
     "schedule_too_frequent", "job_params.schedule"),
    (job_body(action={"type": "teleport"}), "unknown_action", "action.type"),
    (job_body(action={"type": "webhook", "url": "ftp://x"}), "invalid_value", "action.url"),
    (job_body(retry_policy={"max_attempts": 0}), "invalid_value", "retry_policy.max_attempts"),
    (job_body(timeout_seconds=0), "invalid_value", "timeout_seconds"),
])
async def test_create_validation_is_422_naming_the_field(
        client: httpx.AsyncClient, body: dict[str, object], code: str, field: str) -> None:
    assert_problem(await client.post("/v1/jobs", json=body), 422, code, field)


async def test_malformed_json_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", content=b'{"name": ',
                                 headers={"Content-Type": "application/json"})
    assert_problem(response, 422, "invalid_json", "body")


async def test_validation_lists_every_error(client: httpx.AsyncClient) -> None:
    body = assert_problem(await client.post("/v1/jobs", json={"a": 1, "b": 2}), 422,
                          "missing_field")
    assert {e["field"] for e in body["errors"]} >= {"action", "job_params", "a", "b"}


@pytest.mark.parametrize(("query", "code", "field"), [
    ("start_time=yesterday", "invalid_value", "start_time"),
    ("end_time=2026-13-01T00:00:00Z", "invalid_value", "end_time"),
    ("start_time=2026-06-01T00:00:00", "invalid_value", "start_time"),  # no offset
    ("page_size=0", "invalid_value", "page_size"),
    ("page_size=101", "invalid_value", "page_size"),
    ("page_size=ten", "invalid_value", "page_size"),
    ("page_token=garbage", "invalid_page_token", "page_token"),
    ("status=sleeping", "invalid_value", "status"),
])
async def test_bad_list_query_is_422(client: httpx.AsyncClient, query: str, code: str,
                                     field: str) -> None:
    assert_problem(await client.get(f"/v1/jobs?{query}"), 422, code, field)


async def test_unknown_job_run_and_path_are_404(client: httpx.AsyncClient) -> None:
    missing = "01KDVDNA002NWG9HD4ZCQRTWMY"
    assert_problem(await client.get(f"/v1/jobs/{missing}"), 404, "not_found", "job_id")
    assert_problem(await client.patch(f"/v1/jobs/{missing}", json={"name": "x"}), 404,
                   "not_found", "job_id")
    assert_problem(await client.delete(f"/v1/jobs/{missing}"), 404, "not_found")
    for action in ("pause", "resume", "run"):
        assert_problem(await client.post(f"/v1/jobs/{missing}:{action}"), 404, "not_found")
    assert_problem(await client.get(f"/v1/jobs/{missing}/runs"), 404, "not_found")
    assert_problem(await client.get("/v1/runs/nope"), 404, "not_found", "run_id")
    assert_problem(await client.post("/v1/dead-letters/nope:redrive"), 404, "not_found")
    assert_problem(await client.get("/v1/no-such-thing"), 404, "not_found")


async def test_wrong_method_is_405(client: httpx.AsyncClient) -> None:
    assert_problem(await client.put("/v1/jobs"), 405, "method_not_allowed")


async def test_idempotency_key_reused_with_another_body_is_409(
        client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "k-1"}
    assert (await client.post("/v1/jobs", json=job_body(), headers=headers)).status_code == 201
    response = await client.post("/v1/jobs", json=job_body(name="other"), headers=headers)
    assert_problem(response, 409, "idempotency_key_reused", "Idempotency-Key")


async def test_idempotency_key_too_long_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(),
                                 headers={"Idempotency-Key": "k" * 300})
    assert_problem(response, 422, "invalid_value", "Idempotency-Key")


async def test_pausing_a_cancelled_job_is_409(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 204
    assert_problem(await client.post(f"/v1/jobs/{job_id}:pause"), 409, "not_pausable", "status")
    assert_problem(await client.post(f"/v1/jobs/{job_id}:resume"), 409, "not_resumable")
    assert_problem(await client.post(f"/v1/jobs/{job_id}:run"), 409, "job_cancelled")
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={"name": "x"}), 409,
                   "job_cancelled")


async def test_redriving_a_run_that_is_not_dead_is_409(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    run_id = (await client.post(f"/v1/jobs/{job_id}:run")).json()["run_id"]
    assert_problem(await client.post(f"/v1/dead-letters/{run_id}:redrive"), 409,
                   "not_dead_letter", "run_id")


async def test_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    big = job_body(name="x" * 70_000)
    body = assert_problem(await client.post("/v1/jobs", json=big), 413, "body_too_large", "body")
    assert "65536" in body["expected"]


async def test_streamed_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked upload
        yield b'{"name": "'
        for _ in range(20):
            yield b"x" * 4096
        yield b'"}'

    response = await client.post("/v1/jobs", content=chunks(),
                                 headers={"Content-Type": "application/json"})
    assert "content-length" not in response.request.headers
    assert_problem(response, 413, "body_too_large")


async def test_body_just_under_the_limit_is_parsed(client: httpx.AsyncClient) -> None:
    # ~60 KiB of action text: accepted by the size limit, refused by the action's own limit.
    body = job_body(action={"type": "message", "text": "x" * 60_000})
    assert_problem(await client.post("/v1/jobs", json=body), 422, "invalid_value", "action.text")


async def test_unexpected_error_is_500_without_a_stack_trace(
        client: httpx.AsyncClient, rt: Runtime, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(rt.service, "get_job", broken)
    response = await client.get("/v1/jobs/anything")
    body = assert_problem(response, 500, "internal_error")
    assert "secret internals" not in response.text
    assert body["field"] is None
    assert "secret internals" in caplog.text  # logged on the server, with its traceback


async def test_backend_failure_is_503(client: httpx.AsyncClient, rt: Runtime,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    async def down(*_args: object, **_kwargs: object) -> None:
        raise BackendError("SQLite error: disk I/O error")

    monkeypatch.setattr(rt.store, "jobs_list", down)
    assert_problem(await client.get("/v1/jobs"), 503, "backend_unavailable")


async def test_one_time_just_in_the_future_is_accepted(client: httpx.AsyncClient) -> None:
    at = (START + timedelta(seconds=10)).isoformat()
    response = await client.post("/v1/jobs", json=job_body(
        job_params={"type": "one-time", "time": at}))
    assert response.status_code == 201, response.text


async def test_missing_or_non_object_body_is_422_on_body(client: httpx.AsyncClient) -> None:
    assert_problem(await client.post("/v1/jobs"), 422, "missing_field", "body")
    assert_problem(await client.post("/v1/jobs", json=[1]), 422, "invalid_value", "body")
    assert_problem(await client.post("/v1/jobs", json=job_body(action=[])), 422,
                   "invalid_value", "action")


async def test_patch_validates_like_create(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={"timeout_seconds": 0}), 422,
                   "invalid_value", "timeout_seconds")
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={
        "retry_policy": {"max_attempts": 0}}), 422, "invalid_value", "retry_policy.max_attempts")
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={
        "action": {"type": "webhook"}}), 422, "invalid_value", "action.url")
