"""Jobs through the REST API: create, read, change, pause/resume/run/delete, list, dead letters."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from onthedot.watcher import RecurringWatcher, Watcher
from onthedot.worker import Worker
from tests.api.conftest import assert_problem, job_body

LATER = datetime(2030, 1, 1, tzinfo=UTC)

JOB_FIELDS = {"job_id", "name", "status", "action", "job_params", "retry_policy",
              "misfire_policy", "timeout_seconds", "next_run_at", "last_run", "created_at",
              "updated_at"}
RUN_FIELDS = {"run_id", "job_id", "scheduled_at", "status", "attempt", "started_at",
              "finished_at", "output", "error"}


async def test_create_returns_the_job(client: httpx.AsyncClient, clock: FakeClock) -> None:
    clock.advance(hours=1)  # 01:00 UTC: the next 08:00 Taipei is tomorrow
    response = await client.post("/v1/jobs", json=job_body())
    assert response.status_code == 201
    job = response.json()
    assert job.keys() >= JOB_FIELDS
    assert response.headers["location"] == f"/v1/jobs/{job['job_id']}"
    assert job["status"] == "scheduled"
    assert job["job_params"] == {"type": "recurring", "schedule": "0 8 * * *", "time": None,
                                 "timezone": "Asia/Taipei", "flexible_window_seconds": 0}
    assert job["next_run_at"] == "2026-06-23T00:00:00Z"  # 08:00 in Taipei is 00:00 UTC
    assert job["retry_policy"]["max_attempts"] == 3
    assert job["misfire_policy"] == "run_late"
    assert job["last_run"] is None
    assert job["created_at"] == job["updated_at"] == "2026-06-22T01:00:00Z"
    assert (await client.get(f"/v1/jobs/{job['job_id']}")).json() == job


async def test_missing_timezone_takes_the_default(tmp_path: Path, clock: FakeClock) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/tz.db",
                        default_timezone="Asia/Taipei")
    rt = await Runtime.open(settings, clock)
    try:
        transport = httpx.ASGITransport(app=create_app(rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/v1/jobs", json=job_body(
                job_params={"type": "one-time", "time": "2026-06-23T08:00:00"}))
        job = response.json()
        assert job["job_params"]["timezone"] == "Asia/Taipei"
        assert job["next_run_at"] == "2026-06-23T00:00:00Z"
    finally:
        await rt.close()


async def test_idempotent_create(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "morning-news"}
    first = await client.post("/v1/jobs", json=job_body(), headers=headers)
    again = await client.post("/v1/jobs", json=job_body(), headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["job_id"] == first.json()["job_id"]
    other = await client.post("/v1/jobs", json=job_body(), headers={"Idempotency-Key": "x"})
    assert other.status_code == 201
    assert other.json()["job_id"] != first.json()["job_id"]
    assert len((await client.get("/v1/jobs")).json()["jobs"]) == 2


async def test_pause_resume_run_delete(client: httpx.AsyncClient, clock: FakeClock) -> None:
    clock.advance(hours=1)  # 01:00 UTC: the next 08:00 Taipei is tomorrow
    job = (await client.post("/v1/jobs", json=job_body())).json()
    job_id = job["job_id"]
    assert job["next_run_at"] == "2026-06-23T00:00:00Z"

    paused = (await client.post(f"/v1/jobs/{job_id}:pause")).json()
    assert (paused["status"], paused["next_run_at"]) == ("paused", None)
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["status"] for r in runs] == ["CANCELLED"]
    assert (await client.post(f"/v1/jobs/{job_id}:pause")).json()["status"] == "paused"

    resumed = (await client.post(f"/v1/jobs/{job_id}:resume")).json()
    assert (resumed["status"], resumed["next_run_at"]) == ("scheduled", "2026-06-23T00:00:00Z")
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["status"] for r in runs] == ["PENDING"]

    response = await client.post(f"/v1/jobs/{job_id}:run")
    assert response.status_code == 201
    run = response.json()
    assert run.keys() >= RUN_FIELDS
    assert (run["job_id"], run["kind"], run["status"], run["attempt"]) == (
        job_id, "manual", "PENDING", 0)
    assert run["scheduled_at"] == "2026-06-22T01:00:00Z"
    assert response.headers["location"] == f"/v1/runs/{run['run_id']}"
    read = (await client.get(f"/v1/runs/{run['run_id']}")).json()
    assert read.pop("attempts") == []  # GET of one run adds its attempts (none yet)
    assert read == run
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["run_id"] for r in runs][1] == run["run_id"]  # newest scheduled first

    response = await client.delete(f"/v1/jobs/{job_id}")
    assert (response.status_code, response.content) == (204, b"")
    cancelled = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert (cancelled["status"], cancelled["next_run_at"]) == ("cancelled", None)
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["status"] for r in runs if r["kind"] == "scheduled"] == ["CANCELLED"]
    assert (await client.delete(f"/v1/jobs/{job_id}")).status_code == 204  # idempotent


async def test_resume_does_not_make_up_a_missed_one_time_run(client: httpx.AsyncClient,
                                                              clock: FakeClock) -> None:
    at = (clock.now() + timedelta(minutes=10)).isoformat()
    job_id = (await client.post("/v1/jobs", json=job_body(job_params={
        "type": "one-time", "time": at, "timezone": "Asia/Taipei"}))).json()["job_id"]
    await client.post(f"/v1/jobs/{job_id}:pause")
    clock.advance(minutes=20)  # its time passes while it is paused
    problem = assert_problem(await client.post(f"/v1/jobs/{job_id}:resume"), 409,
                             "time_passed", "job_params.time")
    assert "2026-06-22T08:10+08:00" in problem["detail"]  # its time, in its timezone
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert (job["status"], job["next_run_at"]) == ("paused", None)


async def test_delete_cancels_pending_manual_runs(client: httpx.AsyncClient,
                                                  clock: FakeClock) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    clock.advance(seconds=1)
    await client.post(f"/v1/jobs/{job_id}:run")
    await client.delete(f"/v1/jobs/{job_id}")
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert {r["status"] for r in runs} == {"CANCELLED"}


async def test_patch(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=job_body(retry_policy={"backoff_seconds": 5})))
    job_id = job.json()["job_id"]
    response = await client.patch(f"/v1/jobs/{job_id}", json={
        "name": "evening news", "retry_policy": {"max_attempts": 5}})
    changed = response.json()
    assert changed["name"] == "evening news"
    assert changed["retry_policy"] == {"max_attempts": 5, "backoff_seconds": 5.0,
                                       "max_backoff_seconds": 3600.0}
    assert changed["next_run_at"] == "2026-06-22T00:00:00Z"

    response = await client.patch(f"/v1/jobs/{job_id}", json={"job_params": {
        "type": "recurring", "schedule": "0 20 * * *", "timezone": "Asia/Taipei"}})
    assert response.json()["next_run_at"] == "2026-06-22T12:00:00Z"
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [(r["scheduled_at"], r["status"]) for r in runs] == [
        ("2026-06-22T12:00:00Z", "PENDING"), ("2026-06-22T00:00:00Z", "CANCELLED")]

    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={"job_id": "x"}), 422,
                   "unknown_field", "job_id")
    assert_problem(await client.patch(f"/v1/jobs/{job_id}", json={"job_params": {
        "type": "recurring", "schedule": "nonsense"}}), 422, "invalid_schedule")


async def test_list_filters(client: httpx.AsyncClient, clock: FakeClock) -> None:
    # Created-time filters read the time inside the ULID, which never goes backwards within a
    # process; a date later than any other test's keeps this test independent of their order.
    clock.set(LATER)
    first = (await client.post("/v1/jobs", json=job_body(name="first"))).json()
    clock.advance(hours=2)
    second = (await client.post("/v1/jobs", json=job_body(name="second"))).json()
    await client.post(f"/v1/jobs/{first['job_id']}:pause")

    async def names(query: str) -> list[str]:
        response = await client.get(f"/v1/jobs?{query}")
        assert response.status_code == 200, response.text
        return [j["name"] for j in response.json()["jobs"]]

    assert await names("") == ["second", "first"]
    assert await names("status=paused") == ["first"]
    assert await names("status=scheduled") == ["second"]
    one_hour = (LATER + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert await names(f"start_time={one_hour}") == ["second"]
    assert await names(f"end_time={one_hour}") == ["first"]
    taipei = "2030-01-01T09:00:00%2B08:00"  # 01:00 UTC
    assert await names(f"start_time={taipei}") == ["second"]
    assert second["job_id"] > first["job_id"]


async def test_pagination_sees_every_job_once_while_jobs_are_created(
        client: httpx.AsyncClient, clock: FakeClock) -> None:
    existing = set()
    for i in range(45):
        clock.advance(seconds=1)
        existing.add((await client.post("/v1/jobs", json=job_body(name=f"j{i}"))).json()["job_id"])
    created_meanwhile: set[str] = set()
    paging_done = asyncio.Event()

    async def keep_creating() -> None:
        while not paging_done.is_set():
            clock.advance(seconds=1)
            response = await client.post("/v1/jobs", json=job_body(name="late"))
            created_meanwhile.add(response.json()["job_id"])
            await asyncio.sleep(0)

    creator = asyncio.create_task(keep_creating())
    seen: list[str] = []
    token = None
    while True:
        query = {"page_size": 7, **({"page_token": token} if token else {})}
        page = (await client.get("/v1/jobs", params=query)).json()
        seen.extend(j["job_id"] for j in page["jobs"])
        token = page["next_page_token"]
        if token is None:
            break
        await asyncio.sleep(0)  # let the creator interleave between pages
    paging_done.set()
    await creator

    assert created_meanwhile, "jobs should have been created during paging"
    assert len(seen) == len(set(seen)), "a job was returned twice"
    assert existing <= set(seen), "a job was skipped"
    assert set(seen) - existing <= created_meanwhile
    assert seen == sorted(seen, reverse=True)  # newest first


async def test_runs_pagination(client: httpx.AsyncClient, clock: FakeClock) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    for _ in range(5):
        clock.advance(seconds=1)
        assert (await client.post(f"/v1/jobs/{job_id}:run")).status_code == 201
    seen: list[str] = []
    token = None
    while True:
        query = {"page_size": 2, **({"page_token": token} if token else {})}
        page = (await client.get(f"/v1/jobs/{job_id}/runs", params=query)).json()
        seen.extend(r["scheduled_at"] for r in page["runs"])
        token = page["next_page_token"]
        if token is None:
            break
    assert len(seen) == 6
    assert seen == sorted(seen, reverse=True)


async def test_dead_letters_listed_and_redriven(client: httpx.AsyncClient, rt: Runtime,
                                                clock: FakeClock) -> None:
    # Port 9 (discard) on loopback is closed: every attempt fails at once.
    body = job_body(action={"type": "webhook", "url": "http://127.0.0.1:9/hook"},
                    job_params={"type": "immediate"}, retry_policy={"max_attempts": 1})
    job_id = (await client.post("/v1/jobs", json=body)).json()["job_id"]
    dispatcher = Watcher(rt.store, rt.queue, clock, rt.settings, rt.metrics, "test")
    worker = Worker(rt.store, rt.queue, clock, rt.settings, rt.actions, rt.metrics)
    try:
        await dispatcher.refresh_shards()
        await dispatcher.run_once()
        await worker.run_once()
        await RecurringWatcher(rt.store, clock, rt.settings, "test").run_once()
    finally:
        await worker.aclose()

    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert job["status"] == "failed"
    assert job["last_run"]["status"] == "FAILED"
    dead = (await client.get("/v1/dead-letters")).json()
    assert [d["job_id"] for d in dead["dead_letters"]] == [job_id]
    assert dead["dead_letters"][0]["error"]
    assert dead["next_page_token"] is None
    metrics = (await client.get("/metrics")).text
    assert "onthedot_dead_letters 1.0" in metrics

    run_id = dead["dead_letters"][0]["run_id"]
    redriven = (await client.post(f"/v1/dead-letters/{run_id}:redrive")).json()
    assert (redriven["run_id"], redriven["status"], redriven["attempt"]) == (
        run_id, "ENQUEUED", 0)
    assert (await client.get("/v1/dead-letters")).json()["dead_letters"] == []
    assert_problem(await client.post(f"/v1/dead-letters/{run_id}:redrive"), 409,
                   "not_dead_letter")


async def test_run_now_at_the_instant_of_a_scheduled_run_returns_that_run(
        client: httpx.AsyncClient) -> None:
    # START is 08:00 in Taipei: the first scheduled run is due right now, and "run now" at the
    # same instant has the same deterministic run id.
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    run = (await client.post(f"/v1/jobs/{job_id}:run")).json()
    assert run["kind"] == "scheduled"
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    assert [r["run_id"] for r in runs] == [run["run_id"]]


async def test_colon_methods_only_answer_post(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["job_id"]
    response = await client.get(f"/v1/jobs/{job_id}:pause")
    assert_problem(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "OPTIONS, POST"
    assert_problem(await client.post(f"/v1/jobs/{job_id}:explode"), 404, "not_found")
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["status"] == "scheduled"
