"""Instants near the ends of the calendar (years 1 and 9999) on every way in: a job is either
accepted or refused with a 422 naming its field, one item at a time in a batch; never a 500 or
an ``internal_error``. Every combination of the families below is tried: one-time times, RRULE
DTSTART and UNTIL, cron, with and without a flexible window, in zones far east and far west."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from onthedot.config import Settings
from onthedot.runtime import Runtime
from tests.api.conftest import job_body
from tests.api.test_quotas import api
from tests.conformance.conftest import PG_DSN, drop_pg_schema, new_pg_schema
from tests.mcp.conftest import memory_session, payload

BATCH = "/v1/jobs:batch"
ZONES = ("UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago")  # UTC+14 and UTC-11
WINDOWS = (0, 1, 3600)
ONE_TIME = (
    "9999-12-31T23:59:00Z", "9999-12-31T23:59:59.999999+00:00", "9999-12-31T23:00:00",
    "9999-12-31T00:00:00-12:00", "9999-06-01T00:00:00Z", "9998-12-31T23:30:00Z",
    "9998-12-31T23:30:00", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00",
)
RECURRING = (
    "DTSTART:99991231T235900Z\nRRULE:FREQ=DAILY",
    "DTSTART:99991231T235959\nRRULE:FREQ=MINUTELY;INTERVAL=5",
    "DTSTART:99981231T233000Z\nRRULE:FREQ=HOURLY",
    "DTSTART:99980101T000000Z\nRRULE:FREQ=YEARLY",
    "DTSTART:00010101T000000Z\nRRULE:FREQ=YEARLY;UNTIL=99991231T235959Z",
    "DTSTART:00010101T000000\nRRULE:FREQ=DAILY;UNTIL=00010102T000000",
    "RRULE:FREQ=MONTHLY;UNTIL=99991231T235959Z",
    "FREQ=WEEKLY;UNTIL=99991231",
    "BEGIN:VEVENT\nDTSTART:99991231T000000Z\nRDATE:99991231T235959Z\n"
    "RRULE:FREQ=DAILY;COUNT=1\nEND:VEVENT",
    "59 23 31 12 *",
)


def cases() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for zone, window in itertools.product(ZONES, WINDOWS):
        found += [{"type": "one-time", "time": t, "timezone": zone,
                   "flexible_window_seconds": window} for t in ONE_TIME]
        found += [{"type": "recurring", "schedule": s, "timezone": zone,
                   "flexible_window_seconds": window} for s in RECURRING]
    return found


def assert_judged(status: int, body: dict[str, Any], params: dict[str, Any],
                  field_prefix: str = "") -> None:
    assert status in (200, 201, 422), (params, body)
    if status == 422:
        assert body["field"].startswith(f"{field_prefix}job_params."), (params, body)
        assert body["code"] != "internal_error"


async def test_post_and_patch_accept_or_refuse_each_far_instant(
        client: httpx.AsyncClient) -> None:
    base = await client.post("/v1/jobs", json=job_body())
    assert base.status_code == 201
    job_id = base.json()["job_id"]
    refused = 0
    for params in cases():
        created = await client.post("/v1/jobs", json=job_body(job_params=params))
        assert_judged(created.status_code, created.json(), params)
        if created.status_code == 201:  # what was accepted can be read back
            got = await client.get(f"/v1/jobs/{created.json()['job_id']}")
            assert got.status_code == 200, got.text
        else:
            refused += 1
        patched = await client.patch(f"/v1/jobs/{job_id}", json={"job_params": params})
        assert_judged(patched.status_code, patched.json(), params)
        if not params["flexible_window_seconds"]:  # else the offset is the job's own
            assert (patched.status_code == 200) == (created.status_code == 201), (
                params, patched.text)
    assert refused  # the family holds instants past the supported range


async def test_a_far_instant_fails_its_batch_item_only(client: httpx.AsyncClient) -> None:
    all_cases = cases()
    for chunk in (all_cases[i:i + 50] for i in range(0, len(all_cases), 50)):
        items = [job_body(), *(job_body(job_params=p) for p in chunk), job_body()]
        answer = await client.post(BATCH, json={"jobs": items})
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        assert results[0]["status"] == results[-1]["status"] == 201
        for index, (params, result) in enumerate(zip(chunk, results[1:-1], strict=True), 1):
            body = result.get("problem") or {}
            assert_judged(result["status"], body, params, f"jobs[{index}].")


@pytest.mark.parametrize("params", [p for p in cases() if p["flexible_window_seconds"] == 3600])
async def test_mcp_answers_a_far_instant_with_its_argument(rt: Runtime,
                                                           params: dict[str, Any]) -> None:
    args: dict[str, Any] = {"task": "far", "timezone": params["timezone"],
                            "flexible_window_seconds": params["flexible_window_seconds"]}
    if params["type"] == "one-time":
        args["time"] = params["time"]
    else:
        args["schedule"] = params["schedule"]
    async with memory_session(rt) as session:
        body = payload(await session.call_tool("create_task", args))
    if not body["ok"]:
        assert body["error"]["code"] != "internal_error", body
        assert body["error"]["field"] in ("time", "schedule"), body


@pytest.mark.postgres
async def test_postgres_stores_or_refuses_each_far_instant() -> None:
    # Partitions by day and month: the last accepted instants must find a home there too.
    schema = new_pg_schema()
    settings = Settings(database_url=PG_DSN, database_schema=schema, max_active_jobs=0,
                        create_rate_per_minute=0, database_pool_size=2)
    try:
        async with api(settings) as (_rt, client):
            all_cases = cases()
            answer = await client.post(BATCH, json={"jobs": [job_body(job_params=p)
                                                             for p in all_cases[:100]]})
            assert answer.status_code == 200, answer.text
            for index, (params, result) in enumerate(
                    zip(all_cases, answer.json()["results"], strict=False)):
                assert_judged(result["status"], result.get("problem") or {}, params,
                              f"jobs[{index}].")
            for params in all_cases[100:]:
                created = await client.post("/v1/jobs", json=job_body(job_params=params))
                assert_judged(created.status_code, created.json(), params)
    finally:
        await drop_pg_schema(schema)
