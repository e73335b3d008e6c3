"""Per-user quotas over HTTP, MCP and chat: the active-job limit (held across processes and
concurrent requests, creates and revivals of finished jobs, on SQLite and PostgreSQL; a hard
cap, answered 429 without Retry-After) and the per-process create rate, answered 429 with
Retry-After."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import JobParams, JobStatus, RunStatus
from onthedot.quotas import CreateRate
from onthedot.runtime import Runtime
from tests.api.conftest import START, assert_problem, job_body
from tests.api.test_token_scopes import mcp_call, mcp_client
from tests.conformance.conftest import PG_DSN, drop_pg_schema, new_pg_schema
from tests.conformance.factories import make_job, make_run
from tests.support.webhook import LOOPBACK_ALLOW

BATCH = "/v1/jobs:batch"


@contextlib.asynccontextmanager
async def api(settings: Settings, clock: FakeClock | None = None,
              ) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """One API process: its own runtime (own group commit, own rate limiter) and client."""
    rt = await Runtime.open(settings, clock or FakeClock(START))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(rt)),
                                     base_url="http://127.0.0.1") as client:
            yield rt, client
    finally:
        await rt.close()


def sqlite_settings(tmp_path: Path, name: str = "q", **quotas: Any) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/{name}.db", egress_allow=LOOPBACK_ALLOW,
                    **{"max_active_jobs": 0, "create_rate_per_minute": 0, **quotas})


async def test_the_active_job_limit_is_a_429_until_a_job_is_deleted(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, max_active_jobs=2)) as (_rt, client):
        first = (await client.post("/v1/jobs", json=job_body())).json()
        await client.post(f"/v1/jobs/{first['job_id']}:pause")  # paused still counts
        assert (await client.post("/v1/jobs", json=job_body())).status_code == 201

        refused = await client.post("/v1/jobs", json=job_body())

        body = assert_problem(refused, 429, "quota_exceeded")
        # A hard cap: no wait alone frees it, so no Retry-After suggests one (issue 18 §4).
        assert "Retry-After" not in refused.headers
        assert "retry_after_seconds" not in body
        assert "2" in body["expected"]
        assert (await client.delete(f"/v1/jobs/{first['job_id']}")).status_code == 204
        assert (await client.post("/v1/jobs", json=job_body())).status_code == 201


async def test_a_replay_of_a_create_is_answered_at_the_limit(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, max_active_jobs=1)) as (_rt, client):
        key = {"Idempotency-Key": "once"}
        first = await client.post("/v1/jobs", json=job_body(), headers=key)

        again = await client.post("/v1/jobs", json=job_body(), headers=key)

        assert again.status_code == 200
        assert again.json()["job_id"] == first.json()["job_id"]


async def test_the_create_rate_is_a_429_with_the_seconds_to_wait(tmp_path: Path) -> None:
    clock = FakeClock(START)
    async with api(sqlite_settings(tmp_path, create_rate_per_minute=3), clock) as (_rt, client):
        for _ in range(3):
            assert (await client.post("/v1/jobs", json=job_body())).status_code == 201

        refused = await client.post("/v1/jobs", json=job_body())

        assert_problem(refused, 429, "rate_limited")
        assert refused.headers["Retry-After"] == "20"  # one create every 20 s
        clock.advance(20)
        assert (await client.post("/v1/jobs", json=job_body())).status_code == 201


async def test_a_batch_answers_429_for_the_items_past_the_limits(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, max_active_jobs=3)) as (_rt, client):
        answer = await client.post(BATCH, json={"jobs": [job_body(name=f"n{i}")
                                                         for i in range(5)]})

        results = answer.json()["results"]
        assert [r["status"] for r in results] == [201, 201, 201, 429, 429]
        assert results[3]["problem"]["code"] == "quota_exceeded"
        assert results[3]["problem"]["field"] == "jobs[3]"
        assert "retry_after_seconds" not in results[3]["problem"]

    async with api(sqlite_settings(tmp_path, "rate", create_rate_per_minute=2)) as (_, client):
        answer = await client.post(BATCH, json={"jobs": [
            job_body(), {"action": {"type": "nope"}}, job_body(), job_body()]})

        results = answer.json()["results"]
        assert [r["status"] for r in results] == [201, 422, 201, 429]
        assert results[3]["problem"]["code"] == "rate_limited"


async def concurrent_creates(settings: Settings, processes: int, creates: int) -> Counter[int]:
    async with contextlib.AsyncExitStack() as stack:
        apis = [await stack.enter_async_context(api(settings)) for _ in range(processes)]
        answers = await asyncio.gather(*(
            apis[n % processes][1].post("/v1/jobs", json=job_body(name=f"n{n}"))
            for n in range(creates)))
        count = await apis[0][0].store.jobs_count_active("local", 1000)
    assert count == settings.max_active_jobs
    return Counter(a.status_code for a in answers)


async def test_concurrent_creates_on_sqlite_never_pass_the_limit(tmp_path: Path) -> None:
    statuses = await concurrent_creates(sqlite_settings(tmp_path, max_active_jobs=7), 3, 40)

    assert statuses == {201: 7, 429: 33}


@pytest.mark.postgres
async def test_concurrent_creates_on_postgres_never_pass_the_limit() -> None:
    schema = new_pg_schema()
    settings = Settings(database_url=PG_DSN, database_schema=schema, max_active_jobs=7,
                        create_rate_per_minute=0, database_pool_size=4)
    try:
        statuses = await concurrent_creates(settings, 3, 40)
    finally:
        await drop_pg_schema(schema)

    assert statuses == {201: 7, 429: 33}


async def concurrent_revivals(settings: Settings, processes: int, active: int,
                              finished: int) -> Counter[int]:
    """``finished`` completed one-time jobs given a new time by concurrent PATCHes through
    ``processes`` API processes, with ``active`` jobs active already (issue 18 §2.5: twenty
    such PATCHes left 20 active jobs under a quota of 5)."""
    async with contextlib.AsyncExitStack() as stack:
        apis = [await stack.enter_async_context(api(settings)) for _ in range(processes)]
        store = apis[0][0].store
        for n in range(active):
            assert (await apis[0][1].post("/v1/jobs", json=job_body(name=f"a{n}"))).is_success
        past = JobParams(type="one-time", time=(START - timedelta(days=1)).isoformat())
        jobs = [make_job(now=START - timedelta(days=1, seconds=n), user_id="local",
                         params=past, status=JobStatus.COMPLETED,
                         action={"type": "message", "text": "hi"}) for n in range(finished)]
        for job in jobs:
            assert (await store.job_create(job, None)).created
        later = {"job_params": {"type": "one-time",
                                "time": (START + timedelta(hours=1)).isoformat()}}
        answers = await asyncio.gather(*(
            apis[n % processes][1].patch(f"/v1/jobs/{job.job_id}", json=later)
            for n, job in enumerate(jobs)))
        count = await store.jobs_count_active("local", 1000)
    assert count == settings.max_active_jobs
    for answer in answers:
        if answer.status_code == 429:
            assert_problem(answer, 429, "quota_exceeded")
            assert "Retry-After" not in answer.headers
    return Counter(a.status_code for a in answers)


async def test_concurrent_revivals_on_sqlite_never_pass_the_limit(tmp_path: Path) -> None:
    statuses = await concurrent_revivals(sqlite_settings(tmp_path, max_active_jobs=5), 3, 2, 20)

    assert statuses == {200: 3, 429: 17}


@pytest.mark.postgres
async def test_concurrent_revivals_on_postgres_never_pass_the_limit() -> None:
    schema = new_pg_schema()
    settings = Settings(database_url=PG_DSN, database_schema=schema, max_active_jobs=5,
                        create_rate_per_minute=0, database_pool_size=4)
    try:
        statuses = await concurrent_revivals(settings, 3, 2, 20)
    finally:
        await drop_pg_schema(schema)

    assert statuses == {200: 3, 429: 17}


async def test_a_redrive_reviving_a_failed_job_is_within_the_limit(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, max_active_jobs=1)) as (rt, client):
        active = (await client.post("/v1/jobs", json=job_body())).json()
        past = JobParams(type="one-time", time=(START - timedelta(days=1)).isoformat())
        failed = make_job(now=START - timedelta(days=1), user_id="local", params=past,
                          status=JobStatus.FAILED, action={"type": "message", "text": "hi"})
        assert (await rt.store.job_create(failed, None)).created
        dead = make_run(failed, RunStatus.FAILED, scheduled_at=START - timedelta(days=1),
                        dead_lettered=True)
        assert await rt.store.run_insert(dead)

        refused = await client.post(f"/v1/dead-letters/{dead.run_id}:redrive")

        assert_problem(refused, 429, "quota_exceeded")
        assert "Retry-After" not in refused.headers
        letters = (await client.get("/v1/dead-letters")).json()["dead_letters"]
        assert [r["run_id"] for r in letters] == [dead.run_id]  # nothing changed
        assert (await client.get(f"/v1/jobs/{failed.job_id}")).json()["status"] == "failed"
        assert (await client.delete(f"/v1/jobs/{active['job_id']}")).status_code == 204

        redriven = await client.post(f"/v1/dead-letters/{dead.run_id}:redrive")

        assert redriven.status_code == 200, redriven.text
        assert (await client.get(f"/v1/jobs/{failed.job_id}")).json()["status"] == "scheduled"


async def test_mcp_and_chat_answer_the_same_limits(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, max_active_jobs=1)) as (rt, client):
        assert (await client.post("/v1/jobs", json=job_body())).status_code == 201

        async with mcp_client(rt) as mcp:
            result = await mcp_call(mcp, {}, "create_task",
                                    {"task": "stretch", "when": "every day at 9am"})
        chat = await client.post("/v1/chat", json={"message": "remind me to stretch every "
                                                              "day at 9am"})

        assert result["isError"] is True
        error = result["structuredContent"]["error"]
        assert error["code"] == "quota_exceeded"
        assert "retry_after_seconds" not in error
        assert_problem(chat, 429, "quota_exceeded")
        assert "Retry-After" not in chat.headers


def test_each_user_has_a_bucket_of_its_own_that_refills_evenly() -> None:
    rate = CreateRate(per_minute=6)  # one create every 10 s
    now = START

    assert rate.take("alice", 10, now) == 6
    assert rate.take("alice", 1, now) == 0
    assert rate.retry_after("alice", now) == 10
    assert rate.take("bob", 2, now) == 2
    assert rate.take("alice", 2, now + timedelta(seconds=15)) == 1  # 1.5 creates refilled
    assert rate.retry_after("alice", now + timedelta(seconds=15)) == 5
    assert CreateRate(per_minute=0).take("alice", 10_000, now) == 10_000
