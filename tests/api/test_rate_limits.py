"""Per-user rates of the requests that cost CPU or call out without creating a job: reading a
sentence (``/v1/parse``, ``/v1/chat``, MCP tools given ``when``) and running a job now
(``:run``, MCP ``run_task_now``), answered 429 ``rate_limited`` with Retry-After (a structured
error over MCP), per user, refilled over the minute. And a batch looks at the quotas before it
validates an item, so a user at a limit costs the server no compiling."""

from __future__ import annotations

from pathlib import Path

from onthedot.domain.clock import FakeClock
from tests.api.conftest import START, add_token, assert_problem, job_body
from tests.api.test_quotas import BATCH, api, sqlite_settings
from tests.api.test_token_scopes import mcp_call, mcp_client

SENTENCE = "remind me to stretch every day at 9am"
INVALID = {"type": "recurring", "schedule": "99 8 * * *", "timezone": "UTC"}


async def test_parse_chat_and_mcp_when_share_one_parse_rate_per_user(tmp_path: Path) -> None:
    clock = FakeClock(START)
    async with api(sqlite_settings(tmp_path, parse_rate_per_minute=3), clock) as (rt, client):
        alice = await add_token(rt, "alice", "alice-token-1234567890")
        bob = await add_token(rt, "bob", "bob-token-1234567890123")
        assert (await client.post("/v1/parse", json={"text": SENTENCE},
                                  headers=alice)).status_code == 200
        assert (await client.post("/v1/chat", json={"message": SENTENCE, "dry_run": True},
                                  headers=alice)).status_code == 200
        async with mcp_client(rt) as mcp:
            first = await mcp_call(mcp, alice, "create_task", {"when": SENTENCE})
            assert first["isError"] is False, first

            refused = await mcp_call(mcp, alice, "create_task", {"when": SENTENCE})
            error = refused["structuredContent"]["error"]
            assert (error["code"], error["retry_after_seconds"]) == ("rate_limited", 20)

        for path, body in (("/v1/parse", {"text": SENTENCE}),
                           ("/v1/chat", {"message": SENTENCE, "dry_run": True})):
            answer = await client.post(path, json=body, headers=alice)
            assert_problem(answer, 429, "rate_limited")
            assert answer.headers["Retry-After"] == "20"  # one sentence every 20 s
        # Another user has a bucket of their own; a structured time costs no parsing.
        assert (await client.post("/v1/parse", json={"text": SENTENCE},
                                  headers=bob)).status_code == 200
        assert (await client.post("/v1/jobs", json=job_body(), headers=alice)).status_code == 201

        clock.advance(20)
        assert (await client.post("/v1/parse", json={"text": SENTENCE},
                                  headers=alice)).status_code == 200


async def test_run_now_has_a_rate_per_user(tmp_path: Path) -> None:
    clock = FakeClock(START)
    async with api(sqlite_settings(tmp_path, run_rate_per_minute=2), clock) as (rt, client):
        alice = await add_token(rt, "alice", "alice-token-1234567890")
        job_id = (await client.post("/v1/jobs", json=job_body(), headers=alice)).json()["job_id"]
        for _ in range(2):
            clock.advance(1)  # a run now at a new instant is a new run (not the 08:00 one)
            assert (await client.post(f"/v1/jobs/{job_id}:run",
                                      headers=alice)).status_code == 201

        refused = await client.post(f"/v1/jobs/{job_id}:run", headers=alice)
        assert_problem(refused, 429, "rate_limited")
        assert refused.headers["Retry-After"] == "29"  # one every 30 s, 1 s refilled
        async with mcp_client(rt) as mcp:
            result = await mcp_call(mcp, alice, "run_task_now", {"task_id": job_id})
        assert result["structuredContent"]["error"]["code"] == "rate_limited"
        runs = (await client.get(f"/v1/jobs/{job_id}/runs", headers=alice)).json()["runs"]
        assert len([r for r in runs if r["kind"] == "manual"]) == 2

        clock.advance(30)
        assert (await client.post(f"/v1/jobs/{job_id}:run", headers=alice)).status_code == 201


async def test_a_batch_at_the_active_limit_validates_nothing(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, max_active_jobs=2)) as (_rt, client):
        answer = await client.post(BATCH, json={"jobs": [
            job_body(), job_body(job_params=INVALID), job_body(), job_body(),
            job_body(job_params=INVALID)]})

        results = answer.json()["results"]
        # The invalid item within the limit is judged; past the limit nothing is.
        assert [r["status"] for r in results] == [201, 422, 201, 429, 429]
        assert results[4]["problem"]["code"] == "quota_exceeded"
        assert results[4]["problem"]["field"] == "jobs[4]"

        again = await client.post(BATCH, json={"jobs": [job_body(job_params=INVALID)] * 300})
        assert {r["problem"]["code"] for r in again.json()["results"]} == {"quota_exceeded"}


async def test_a_batch_past_the_create_rate_validates_nothing(tmp_path: Path) -> None:
    async with api(sqlite_settings(tmp_path, create_rate_per_minute=2)) as (_rt, client):
        answer = await client.post(BATCH, json={"jobs": [
            job_body(), job_body(job_params=INVALID), job_body(),
            job_body(job_params=INVALID), job_body()]})

        results = answer.json()["results"]
        assert [r["status"] for r in results] == [201, 422, 201, 429, 429]
        assert {r["problem"]["code"] for r in results[3:]} == {"rate_limited"}


async def test_a_create_at_the_active_limit_skips_a_costly_compile(tmp_path: Path) -> None:
    # Ten sparse rules whose check needs far more than the inline budget (and the full one).
    costly = "\n".join(["BEGIN:VEVENT", "DTSTART:20260622T000000Z",
                        *[f"RRULE:FREQ=YEARLY;BYMONTH={m};COUNT=10000" for m in range(1, 11)],
                        "END:VEVENT"])
    body = job_body(job_params={"type": "recurring", "schedule": costly, "timezone": "UTC"})
    async with api(sqlite_settings(tmp_path, max_active_jobs=1)) as (_rt, client):
        assert_problem(await client.post("/v1/jobs", json=body), 422, "schedule_too_complex")
        assert (await client.post("/v1/jobs", json=job_body())).status_code == 201

        refused = await client.post("/v1/jobs", json=body)
        assert_problem(refused, 429, "quota_exceeded")  # not compiled: no 422 this time
        # A cheap schedule is still judged inline, as before.
        assert_problem(await client.post("/v1/jobs", json=job_body(job_params=INVALID)), 422,
                       "invalid_schedule")
