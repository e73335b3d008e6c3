"""Bad input always gets a clear 4xx problem, never a 500, and never stores anything.

Bodies are sent as raw bytes where the finding is something a JSON encoder would not produce
(lone surrogates, NaN, non-UTF-8, absurd nesting).
"""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.actions import default_registry
from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.errors import NotFoundError, ValidationError
from onthedot.domain.models import Job, JobParams, JobRun, JobStatus, RetryPolicy
from onthedot.queue.table import TableQueue
from onthedot.runtime import Runtime
from onthedot.service import JobService
from onthedot.store.postgres import PostgresStore
from tests.api.conftest import START, assert_problem, job_body
from tests.conformance.conftest import PG_DSN, drop_pg_schema, new_pg_schema

JSON = {"Content-Type": "application/json"}
WEBHOOK = {"type": "webhook", "url": "https://example.com/hook"}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def post_raw(client: httpx.AsyncClient, raw: str | bytes,
                   path: str = "/v1/jobs") -> httpx.Response:
    return await client.post(path, content=raw, headers=JSON)


async def assert_nothing_stored(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/jobs")
    assert response.status_code == 200, response.text
    assert response.json()["jobs"] == []


# --- text that cannot be stored ------------------------------------------------------------
@pytest.mark.parametrize(("raw", "field"), [
    ('{"name": "\\ud800", "action": {"type": "message", "text": "hi"}, '
     '"job_params": {"type": "immediate"}}', "name"),
    ('{"action": {"type": "message", "text": "a\\udc00b"}, "job_params": {"type": "immediate"}}',
     "action.text"),
    ('{"action": {"type": "webhook", "url": "https://example.com/", '
     '"headers": {"X-Token": "\\ud83d"}}, "job_params": {"type": "immediate"}}',
     "action.headers.X-Token"),
    ('{"action": {"type": "webhook", "url": "https://example.com/", '
     '"body": {"\\udfff": 1}}, "job_params": {"type": "immediate"}}', "action.body"),
    ('{"action": {"type": "message", "text": "a\\u0000b"}, "job_params": {"type": "immediate"}}',
     "action.text"),
    ('{"action": {"type": "message", "text": "hi"}, "job_params": {"type": "recurring", '
     '"schedule": "0 8 * * *", "timezone": "Asia/\\ud800"}}', "job_params.timezone"),
])
async def test_unstorable_text_is_422_naming_the_field(client: httpx.AsyncClient, raw: str,
                                                       field: str) -> None:
    body = assert_problem(await post_raw(client, raw), 422, "invalid_text", field)
    assert "surrogate" in body["expected"]
    await assert_nothing_stored(client)


async def test_unstorable_text_in_a_patch_is_422(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    response = await client.patch(f"/v1/jobs/{job_id}", content='{"name": "x\\ud800"}',
                                  headers=JSON)
    assert_problem(response, 422, "invalid_text", "name")
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["name"] == "news"


# --- page tokens of the runs listing ---------------------------------------------------------
def _token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("token", [
    "garbage", _token("r:garbage"), _token("r:2026-01-01T00:00:00"),
    _token("r:0001-01-01T00:00:00+14:00"), _token("r:9999-12-31T23:59:59-14:00"),
    _token("j:01KDVDNA002NWG9HD4ZCQRTWMY"), "%%%", _token("r:") + "\u00e9",
])
async def test_bad_runs_page_token_is_422(client: httpx.AsyncClient, token: str) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    response = await client.get(f"/v1/jobs/{job_id}/runs", params={"page_token": token})
    assert_problem(response, 422, "invalid_page_token", "page_token")


async def test_runs_page_token_still_pages(client: httpx.AsyncClient, clock: FakeClock) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    for _ in range(3):
        clock.advance(seconds=1)
        assert (await client.post(f"/v1/jobs/{job_id}:run")).status_code == 201
    first = (await client.get(f"/v1/jobs/{job_id}/runs", params={"page_size": 1})).json()
    assert first["next_page_token"]
    second = await client.get(f"/v1/jobs/{job_id}/runs",
                              params={"page_size": 1, "page_token": first["next_page_token"]})
    assert second.status_code == 200, second.text
    assert second.json()["runs"][0]["run_id"] != first["runs"][0]["run_id"]


# --- action bodies: depth and size ----------------------------------------------------------
async def test_too_deep_webhook_body_is_422_and_not_stored(client: httpx.AsyncClient) -> None:
    body = job_body(action={**WEBHOOK, "body": nested(256)})
    response = await post_raw(client, json.dumps(body))
    assert_problem(response, 422, "invalid_json", "body")
    await assert_nothing_stored(client)


async def test_deep_but_parseable_body_is_422_naming_the_action(
        client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(
        action={**WEBHOOK, "body": {"a": nested(40)}}))
    body = assert_problem(response, 422, "action_too_deep", "action.body")
    assert "32" in body["expected"]
    await assert_nothing_stored(client)


async def test_a_webhook_body_at_the_depth_limit_is_accepted(client: httpx.AsyncClient) -> None:
    # The action object and 31 nested lists in its body: 32 levels of containers.
    response = await client.post("/v1/jobs", json=job_body(
        action={**WEBHOOK, "body": nested(31)}))
    assert response.status_code == 201, response.text
    assert response.json()["action"]["body"] == nested(31)
    too_deep = await client.post("/v1/jobs", json=job_body(
        action={**WEBHOOK, "body": nested(32)}))
    assert_problem(too_deep, 422, "action_too_deep", "action.body")


async def test_too_large_action_is_422(tmp_path: Path, clock: FakeClock) -> None:
    # A deployment that raised max_body_bytes still stores actions of at most 64 KiB.
    settings = Settings(database_url=f"sqlite:///{tmp_path}/big.db", max_body_bytes=1 << 20)
    rt = await Runtime.open(settings, clock)
    try:
        transport = httpx.ASGITransport(app=create_app(rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            big = {**WEBHOOK, "body": {"blob": "x" * 70_000}}
            response = await client.post("/v1/jobs", json=job_body(action=big))
            body = assert_problem(response, 422, "action_too_large", "action")
            assert "65536" in body["expected"]
            await assert_nothing_stored(client)
    finally:
        await rt.close()


# --- rows stored before these limits must not take the user's listing down ------------------
async def _store_job_directly(rt: Runtime, action: dict[str, Any],
                              retry: RetryPolicy | None = None) -> str:
    """What an older version could store: the service is bypassed, the store is real."""
    job_id = "01KDVDNA002NWG9HD4ZCQRTWMY"
    job = Job(job_id=job_id, user_id="local", name="old", action=action,
              params=JobParams(type="recurring", schedule="0 8 * * *", timezone="UTC"),
              status=JobStatus.SCHEDULED, created_at=START, updated_at=START,
              retry_policy=retry or RetryPolicy(), next_run_at=START.replace(hour=8))
    run = JobRun.pending(job_id, START.replace(hour=8), rt.settings.shards)
    await rt.store.job_create(job, run)
    return job_id


async def test_a_stored_job_that_cannot_be_shown_does_not_break_listing(
        client: httpx.AsyncClient, rt: Runtime) -> None:
    fine = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    old = await _store_job_directly(rt, {**WEBHOOK, "body": nested(256)})
    listing = await client.get("/v1/jobs")
    assert listing.status_code == 200, listing.text
    shown = {j["job_id"]: j for j in listing.json()["jobs"]}
    assert set(shown) == {fine, old}
    assert shown[old]["action"]["type"] == "unreadable"
    assert "32 levels" in shown[old]["action"]["reason"]
    got = await client.get(f"/v1/jobs/{old}")
    assert got.status_code == 200, got.text
    assert got.json() == shown[old]
    # It can be deleted, and a PATCH that gives a readable action repairs it.
    assert (await client.patch(f"/v1/jobs/{old}", json={"name": "x"})).status_code == 422
    repaired = await client.patch(f"/v1/jobs/{old}", json={
        "action": {"type": "message", "text": "hi"}})
    assert repaired.status_code == 200, repaired.text
    assert (await client.delete(f"/v1/jobs/{old}")).status_code == 204
    assert (await client.get(f"/v1/jobs/{old}")).json()["status"] == "cancelled"


async def test_a_stored_job_with_an_undecodable_action_is_listed_and_deletable(
        client: httpx.AsyncClient, rt: Runtime, settings: Settings) -> None:
    old = await _store_job_directly(rt, {"type": "message", "text": "hi"})
    with contextlib.closing(sqlite3.connect(str(settings.database_url).split("///", 1)[1])) as db:
        db.execute("UPDATE jobs SET action = '{not json', retry_policy = '{\"max_attempts\": NaN}'"
                   " WHERE job_id = ?", (old,))
        db.commit()
    listing = await client.get("/v1/jobs")
    assert listing.status_code == 200, listing.text
    job = listing.json()["jobs"][0]
    assert job["action"]["type"] == "unreadable"
    assert job["retry_policy"] == {"max_attempts": 3, "backoff_seconds": 10.0,
                                   "max_backoff_seconds": 3600.0}
    assert (await client.delete(f"/v1/jobs/{old}")).status_code == 204


# --- numbers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", [
    '{"retry_policy": {"backoff_seconds": NaN}}',
    '{"retry_policy": {"max_backoff_seconds": Infinity}}',
    '{"timeout_seconds": -Infinity}',
    '{"timeout_seconds": 1e400}',
    '{"action": {"type": "webhook", "url": "https://example.com/", "body": [NaN]}}',
])
async def test_non_finite_numbers_are_invalid_json(client: httpx.AsyncClient, raw: str) -> None:
    merged = {**job_body(), **json.loads(raw)}
    text = json.dumps(merged)  # Python writes NaN / Infinity, which JSON does not have
    body = assert_problem(await post_raw(client, text), 422, "invalid_json", "body")
    assert "finite" in body["detail"]
    await assert_nothing_stored(client)


@pytest.mark.parametrize(("method", "body", "field"), [
    ("PATCH", {"retry_policy": {"max_backoff_seconds": False}}, "retry_policy.max_backoff_seconds"),
    ("PATCH", {"timeout_seconds": "60"}, "timeout_seconds"),
    ("PATCH", {"retry_policy": {"max_attempts": 2.0}}, "retry_policy.max_attempts"),
    ("POST", {"name": 7}, "name"),
])
async def test_a_value_of_the_wrong_json_type_is_not_converted(
        client: httpx.AsyncClient, method: str, body: dict[str, Any], field: str) -> None:
    """Found by schemathesis: false was read as 0.0, "60" as 60 (pydantic's lax mode)."""
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    if method == "POST":
        response = await client.post("/v1/jobs", json={**job_body(), **body})
    else:
        response = await client.patch(f"/v1/jobs/{job_id}", json=body)
    assert_problem(response, 422, "invalid_value", field)


@pytest.mark.parametrize(("retry", "field"), [
    ({"backoff_seconds": 1e308, "max_backoff_seconds": 1e308}, "retry_policy.backoff_seconds"),
    ({"max_backoff_seconds": 86_401}, "retry_policy.max_backoff_seconds"),
    ({"backoff_seconds": 90_000}, "retry_policy.backoff_seconds"),
    ({"backoff_seconds": -1}, "retry_policy.backoff_seconds"),
])
async def test_backoff_has_sane_bounds(client: httpx.AsyncClient, retry: dict[str, Any],
                                       field: str) -> None:
    response = await client.post("/v1/jobs", json=job_body(retry_policy=retry))
    assert_problem(response, 422, "invalid_value", field)


async def test_the_largest_backoff_is_accepted(client: httpx.AsyncClient) -> None:
    retry = {"backoff_seconds": 86_400, "max_backoff_seconds": 86_400}
    response = await client.post("/v1/jobs", json=job_body(retry_policy=retry))
    assert response.status_code == 201, response.text


# --- bodies that are not JSON at all ---------------------------------------------------------
@pytest.mark.parametrize("raw", [
    b'{"name": "\xff\xfe"}',
    b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark: RFC 8259 says a sender must not add one
    ("[" * 5000 + "]" * 5000).encode(),
    ('{"a":' * 3000 + "1" + "}" * 3000).encode(),
])
async def test_undecodable_body_is_422_invalid_json(client: httpx.AsyncClient,
                                                    raw: bytes) -> None:
    for path in ("/v1/jobs", "/v1/chat"):
        assert_problem(await post_raw(client, raw, path), 422, "invalid_json", "body")
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    response = await client.patch(f"/v1/jobs/{job_id}", content=raw, headers=JSON)
    assert_problem(response, 422, "invalid_json", "body")


# --- fields the action or the job type does not have -----------------------------------------
@pytest.mark.parametrize(("action", "field"), [
    ({**WEBHOOK, "heders": {"X-A": "1"}}, "action.heders"),
    ({"type": "message", "text": "hi", "txt": "hi"}, "action.txt"),
    ({"type": "message", "text": "hi", "url": "https://example.com/"}, "action.url"),
])
async def test_unknown_action_parameter_is_422(client: httpx.AsyncClient,
                                               action: dict[str, Any], field: str) -> None:
    body = assert_problem(await client.post("/v1/jobs", json=job_body(action=action)), 422,
                          "unknown_field", field)
    assert "type" in body["expected"]
    await assert_nothing_stored(client)


@pytest.mark.parametrize(("params", "field"), [
    ({"type": "one-time", "time": "2026-07-01T00:00:00Z", "schedule": "0 8 * * *"},
     "job_params.schedule"),
    ({"type": "recurring", "schedule": "0 8 * * *", "time": "2026-07-01T00:00:00Z"},
     "job_params.time"),
    ({"type": "immediate", "schedule": "0 8 * * *"}, "job_params.schedule"),
    ({"type": "immediate", "time": "2026-07-01T00:00:00Z"}, "job_params.time"),
])
async def test_fields_that_contradict_the_job_type_are_422(
        client: httpx.AsyncClient, params: dict[str, Any], field: str) -> None:
    response = await client.post("/v1/jobs", json=job_body(job_params=params))
    body = assert_problem(response, 422, "conflicting_field", field)
    assert params["type"] in body["detail"]
    await assert_nothing_stored(client)
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={"job_params": params}), 422,
                   "conflicting_field", field)


# --- methods ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "allowed"), [
    ("/v1/jobs", {"GET", "POST", "OPTIONS"}),
    ("/v1/jobs/some-id", {"GET", "PATCH", "DELETE", "OPTIONS"}),
    ("/v1/jobs/some-id:pause", {"POST", "OPTIONS"}),
    ("/v1/dead-letters", {"GET", "OPTIONS"}),
])
async def test_405_and_options_list_every_allowed_method(
        client: httpx.AsyncClient, path: str, allowed: set[str]) -> None:
    response = await client.put(path)
    assert_problem(response, 405, "method_not_allowed")
    assert set(response.headers["allow"].split(", ")) == allowed
    options = await client.options(path)
    assert options.status_code == 204, options.text
    assert set(options.headers["allow"].split(", ")) == allowed
    assert options.content == b""


async def test_options_on_an_unknown_path_is_404(client: httpx.AsyncClient) -> None:
    assert_problem(await client.options("/v1/nothing-here"), 404, "not_found")


# --- ids that no row can have -------------------------------------------------------------
@pytest.fixture
async def pg_service(tmp_path: Path, clock: FakeClock) -> AsyncIterator[JobService]:
    """The service on a real PostgreSQL store (whose text cannot hold NUL); these calls never
    touch the queue, so the table queue on a SQLite file stands in for NATS."""
    schema = new_pg_schema()
    store = PostgresStore(PG_DSN, schema=schema, pool_max=2)
    queue = TableQueue(f"sqlite:///{tmp_path}/queue.db", clock)
    try:
        await store.migrate()
        await queue.open()
        yield JobService(store, queue, clock, Settings(), default_registry(Settings()))
    finally:
        await queue.close()
        await store.close()
        await drop_pg_schema(schema)


@pytest.mark.postgres
async def test_an_id_holding_nul_is_not_found_on_postgres(pg_service: JobService) -> None:
    with pytest.raises(NotFoundError):
        await pg_service.get_job("alice", "01KDVDNA00\x00")
    with pytest.raises(NotFoundError):
        await pg_service.list_runs("alice", "\x00")
    with pytest.raises(NotFoundError):
        await pg_service.delete_job("alice", "\x00")
    with pytest.raises(NotFoundError):
        await pg_service.get_run("alice", "run\x00")
    with pytest.raises(ValidationError) as caught:
        await pg_service.list_jobs("alice", page_token=_token("j:0\x00"))
    assert caught.value.code == "invalid_page_token"
