"""``POST /v1/jobs:batch`` answers each item the same on SQLite and on PostgreSQL, whose
insert takes the batch as one array per column: new jobs, idempotency duplicates inside the
batch and across batches, keys reused for another job, invalid items and items past the
active-job limit, mixed in one request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from onthedot.config import Settings
from onthedot.domain.models import RunStatus
from tests.api.conftest import job_body
from tests.api.test_quotas import BATCH, api
from tests.conformance.conftest import PG_DSN, drop_pg_schema, new_pg_schema
from tests.support.webhook import LOOPBACK_ALLOW

LIMIT = 5  # active jobs per user


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    common: dict[str, Any] = {"egress_allow": LOOPBACK_ALLOW, "max_active_jobs": LIMIT,
                              "create_rate_per_minute": 0}
    if request.param == "sqlite":
        yield Settings(database_url=f"sqlite:///{tmp_path}/b.db", **common)
        return
    schema = new_pg_schema()
    try:
        yield Settings(database_url=PG_DSN, database_schema=schema, **common)
    finally:
        await drop_pg_schema(schema)


def tea(name: str = "tea", key: str | None = None) -> dict[str, Any]:
    body = job_body(name=name, action={"type": "message", "text": name},
                    job_params={"type": "one-time", "time": "2026-06-22T16:00:00+08:00",
                                "timezone": "Asia/Taipei"})
    return body if key is None else {**body, "idempotency_key": key}


def outcome(result: dict[str, Any]) -> tuple[int, str | None]:
    problem = result.get("problem")
    return result["status"], None if problem is None else problem["code"]


async def test_every_item_gets_its_own_answer_on_both_backends(settings: Settings) -> None:
    first_batch = [
        tea("a", "k-a"),                       # new, keyed
        job_body(name="b"),                    # new, unkeyed (recurring)
        tea("a", "k-a"),                       # the item before holds the key: a replay
        tea("other", "k-a"),                   # the same key for another job: 409
        job_body(name="d", job_params={"type": "recurring", "schedule": "99 8 * * *"}),
        {"action": {"type": "message"}, "job_params": {"type": "weekly"}},  # invalid: 422
        tea("c", "k-c"),                       # new, keyed
    ]
    # 3 active jobs after the first batch: room for 2 more. Items take that room in order
    # before they are validated; a keyed item may be a replay, so only the insert, which
    # counts under the user's lock, can refuse it.
    second_batch = [
        tea("c", "k-c"),                       # held since the first batch: a replay
        tea("not c", "k-c"),                   # ... with another job: 409
        tea("e", "k-e"),                       # new (4 active)
        job_body(name="f"),                    # no room left before validation: 429
        job_body(name="g"),                    # 429
        tea("a", "k-a"),                       # a replay is answered at the limit
        tea("i", "k-i"),                       # new (5 active, the limit)
        tea("j", "k-j"),                       # refused by the insert: 429
    ]
    async with api(settings) as (rt, client):
        first = (await client.post(BATCH, json={"jobs": first_batch})).json()["results"]
        second = (await client.post(BATCH, json={"jobs": second_batch})).json()["results"]
        active = await rt.store.jobs_count_active("local", 100)
        listed = (await client.get("/v1/jobs", params={"page_size": 100})).json()["jobs"]
        runs = [await rt.store.runs_list(j["job_id"], 5, None) for j in listed]

    assert [outcome(r) for r in first] == [
        (201, None), (201, None), (200, None), (409, "idempotency_key_reused"),
        (422, "invalid_schedule"), (422, "invalid_value"), (201, None)]
    assert first[5]["problem"]["field"].startswith("jobs[5].")
    assert first[2]["job"] == first[0]["job"]
    assert [outcome(r) for r in second] == [
        (200, None), (409, "idempotency_key_reused"), (201, None), (429, "quota_exceeded"),
        (429, "quota_exceeded"), (200, None), (201, None), (429, "quota_exceeded")]
    assert second[0]["job"]["job_id"] == first[6]["job"]["job_id"]
    assert second[5]["job"]["job_id"] == first[0]["job"]["job_id"]
    assert active == LIMIT
    created = [r["job"] for r in first + second if r["status"] == 201]
    assert sorted(j["job_id"] for j in listed) == sorted(j["job_id"] for j in created)
    assert {j["name"] for j in listed} == {"a", "b", "c", "e", "i"}
    # Each created job has its one first run, PENDING at the job's next_run_at.
    by_id = {j["job_id"]: j for j in listed}
    for job_runs in runs:
        assert len(job_runs) == 1
        run = job_runs[0]
        assert run.status is RunStatus.PENDING
        assert run.scheduled_at.isoformat().replace("+00:00", "Z") == (
            by_id[run.job_id]["next_run_at"].replace("+00:00", "Z"))
