"""``POST /v1/jobs:batch``: many jobs in one request, one transaction, one result per job."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import RunStatus
from onthedot.runtime import Runtime
from tests.api.conftest import START, assert_problem, job_body

BATCH = "/v1/jobs:batch"
VOLATILE = {"job_id", "created_at", "updated_at"}


def results(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    found: list[dict[str, Any]] = response.json()["results"]
    for result in found:
        assert set(result) == {"status", "job" if result["status"] < 300 else "problem"}
    return found


def statuses(found: list[dict[str, Any]]) -> list[int]:
    return [r["status"] for r in found]


def tea(**overrides: Any) -> dict[str, Any]:
    return job_body(**{"name": "tea", "action": {"type": "message", "text": "tea"},
                       "job_params": {"type": "one-time", "time": "2026-06-22T16:00:00+08:00"},
                       **overrides})


async def stored_job_ids(client: httpx.AsyncClient) -> set[str]:
    page = (await client.get("/v1/jobs", params={"page_size": 100})).json()
    return {j["job_id"] for j in page["jobs"]}


async def test_results_come_in_request_order_each_judged_alone(client: httpx.AsyncClient) -> None:
    body = {"jobs": [
        job_body(),
        {"action": {"type": "message", "text": "x"}, "job_params": {"type": "weekly"}},
        tea(),
        "not a job",
        job_body(job_params={"type": "recurring", "schedule": "99 8 * * *"}),
        job_body(action={"type": "webhook", "url": "http://10.0.0.1/hook"}),
        job_body(schedual="0 8 * * *"),
        tea(name="second tea"),
    ]}

    found = results(await client.post(BATCH, json=body))

    assert statuses(found) == [201, 422, 201, 422, 422, 422, 422, 201]
    problems = {i: r["problem"] for i, r in enumerate(found) if r["status"] == 422}
    assert {i: (p["code"], p["field"]) for i, p in problems.items()} == {
        1: ("invalid_value", "jobs[1].job_params.type"),
        3: ("invalid_value", "jobs[3]"),
        4: ("invalid_schedule", "jobs[4].job_params.schedule"),
        5: ("egress_refused", "jobs[5].action.url"),
        6: ("unknown_field", "jobs[6].schedual"),
    }
    for p in problems.values():
        assert p["status"] == 422
        assert p["type"] == f"urn:onthedot:problem:{p['code']}"
        assert p["detail"]
        assert p["expected"]
    created = [r["job"] for r in found if r["status"] == 201]
    assert [j["name"] for j in created] == ["news", "tea", "second tea"]
    assert await stored_job_ids(client) == {j["job_id"] for j in created}
    for job in created:  # what the batch answered is what is stored
        assert (await client.get(f"/v1/jobs/{job['job_id']}")).json() == job


async def test_a_batch_job_is_the_job_post_jobs_creates(client: httpx.AsyncClient,
                                                        clock: FakeClock) -> None:
    clock.advance(hours=1)
    single = (await client.post("/v1/jobs", json=job_body())).json()
    [batched] = [r["job"] for r in results(await client.post(BATCH, json={"jobs": [job_body()]}))]

    assert {k: v for k, v in batched.items() if k not in VOLATILE} == {
        k: v for k, v in single.items() if k not in VOLATILE}
    assert batched["next_run_at"] == "2026-06-23T00:00:00Z"
    runs = (await client.get(f"/v1/jobs/{batched['job_id']}/runs")).json()["runs"]
    assert [(r["status"], r["scheduled_at"]) for r in runs] == [
        ("PENDING", "2026-06-23T00:00:00Z")]


async def test_keys_replay_identical_jobs_and_refuse_different_ones(
        client: httpx.AsyncClient) -> None:
    single = await client.post("/v1/jobs", json=tea(), headers={"Idempotency-Key": "tea"})
    assert single.status_code == 201
    body = {"jobs": [
        {**tea(), "idempotency_key": "tea"},  # the key POST /v1/jobs used: same key space
        {**job_body(), "idempotency_key": "news"},
        {**job_body(), "idempotency_key": "news"},  # the item before holds it: a replay
        {**job_body(name="other"), "idempotency_key": "news"},  # ... with another job: 409
        job_body(),
    ]}

    first = results(await client.post(BATCH, json=body))

    assert statuses(first) == [200, 201, 200, 409, 201]
    assert first[0]["job"]["job_id"] == single.json()["job_id"]
    assert first[2]["job"] == first[1]["job"]
    assert (first[3]["problem"]["code"], first[3]["problem"]["field"]) == (
        "idempotency_key_reused", "jobs[3].idempotency_key")

    again = results(await client.post(BATCH, json=body))

    assert statuses(again) == [200, 200, 200, 409, 201]  # the unkeyed job is created again
    assert [r["job"]["job_id"] for r in again[:3]] == [r["job"]["job_id"] for r in first[:3]]
    assert len(await stored_job_ids(client)) == 4


async def test_the_batch_key_makes_the_same_batch_safe_to_send_again(
        client: httpx.AsyncClient) -> None:
    body = {"jobs": [job_body(), tea(), {**tea(name="own"), "idempotency_key": "own"}]}
    headers = {"Idempotency-Key": "import-7"}

    first = results(await client.post(BATCH, json=body, headers=headers))
    again = results(await client.post(BATCH, json=body, headers=headers))

    assert statuses(first) == [201, 201, 201]
    assert statuses(again) == [200, 200, 200]
    assert [r["job"] for r in again] == [r["job"] for r in first]
    # Job i took the key "import-7#i"; the third kept its own.
    replay = await client.post("/v1/jobs", json=tea(), headers={"Idempotency-Key": "import-7#1"})
    assert (replay.status_code, replay.json()["job_id"]) == (200, first[1]["job"]["job_id"])
    swapped = results(await client.post(BATCH, json={"jobs": [tea(), job_body()]},
                                        headers=headers))
    assert statuses(swapped) == [409, 409]
    assert swapped[0]["problem"]["field"] == "Idempotency-Key"
    assert len(await stored_job_ids(client)) == 3


async def test_a_failing_row_mid_batch_writes_nothing(client: httpx.AsyncClient,
                                                      settings: Settings) -> None:
    """A trigger refuses the first run of the job named "poison", the third of four: SQLite
    has then written the four job rows, and must take every one of them back."""
    db = sqlite3.connect(settings.database_url.removeprefix("sqlite:///"), isolation_level=None)
    db.execute("CREATE TRIGGER poison BEFORE INSERT ON job_runs "
               "WHEN (SELECT name FROM jobs WHERE job_id = NEW.job_id) = 'poison' "
               "BEGIN SELECT RAISE(ABORT, 'poisoned run'); END")
    body = {"jobs": [{**tea(), "idempotency_key": "k0"}, job_body(),
                     {**tea(name="poison"), "idempotency_key": "k2"}, tea(name="after")]}

    failed = await client.post(BATCH, json=body)

    assert_problem(failed, 500, "internal_error")
    assert await stored_job_ids(client) == set()
    assert db.execute("SELECT count(*) FROM job_runs").fetchone() == (0,)
    db.execute("DROP TRIGGER poison")
    db.close()
    assert statuses(results(await client.post(BATCH, json=body))) == [201] * 4  # keys free


async def test_a_thousand_jobs_in_one_request(client: httpx.AsyncClient, rt: Runtime) -> None:
    body = {"jobs": [tea(name=f"tea {n}") for n in range(1000)]}

    found = results(await client.post(BATCH, json=body))

    assert statuses(found) == [201] * 1000
    assert [r["job"]["name"] for r in found] == [f"tea {n}" for n in range(1000)]
    assert len({r["job"]["job_id"] for r in found}) == 1000
    assert await rt.store.runs_count_by_status() == {RunStatus.PENDING: 1000}


async def test_bodies_that_are_not_a_batch(client: httpx.AsyncClient) -> None:
    too_many = await client.post(BATCH, json={"jobs": [tea()] * 1001})
    body = assert_problem(too_many, 422, "invalid_value", "jobs")
    assert body["expected"] == "at most 1000 items"
    assert_problem(await client.post(BATCH, json={"jobs": []}), 422, "invalid_value", "jobs")
    assert_problem(await client.post(BATCH, json=[tea()]), 422, "invalid_value", "body")
    assert_problem(await client.post(BATCH, json={"jobs": tea()}), 422, "invalid_value", "jobs")
    assert_problem(await client.post(BATCH, json={"jobs": [tea()], "dry_run": True}), 422,
                   "unknown_field", "dry_run")
    assert_problem(await client.post(BATCH, content=b"{\"jobs\": [", headers={
        "content-type": "application/json"}), 422, "invalid_json", "body")
    assert_problem(await client.post(BATCH, json={"jobs": [tea()]},
                                     headers={"Idempotency-Key": ""}),
                   422, "invalid_value", "Idempotency-Key")
    assert await stored_job_ids(client) == set()


async def test_the_batch_has_its_own_body_limit(tmp_path: Path, clock: FakeClock) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/limit.db", max_body_bytes=4096,
                        max_batch_body_bytes=65_536)
    rt = await Runtime.open(settings, clock)
    try:
        transport = httpx.ASGITransport(app=create_app(rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            fits = {"jobs": [tea(name=f"tea {n:03}") for n in range(100)]}  # ~20 KB
            assert statuses(results(await client.post(BATCH, json=fits))) == [201] * 100
            single = await client.post("/v1/jobs", json=tea(name="x" * 5000))
            assert_problem(single, 413, "body_too_large", "body")

            over = await client.post(BATCH, json={"jobs": [tea(name="x" * 190)] * 400})
            body = assert_problem(over, 413, "body_too_large", "body")
            assert body["expected"] == "a body of at most 65536 bytes"
    finally:
        await rt.close()


async def test_jobs_due_now_wake_the_watcher_once(client: httpx.AsyncClient,
                                                  rt: Runtime) -> None:
    woken: list[datetime] = []
    rt.service.set_due_soon_hook(woken.append)
    later = job_body()
    now = job_body(job_params={"type": "immediate"})

    results(await client.post(BATCH, json={"jobs": [later, now, now]}))

    assert woken == [START]
