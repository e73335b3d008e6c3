"""POST /v1/parse: the parser's reading of a sentence and the next runs, creating nothing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.runtime import Runtime
from tests.api.conftest import START, add_token, assert_problem


async def test_recurring_sentence_in_chinese(client: httpx.AsyncClient) -> None:
    # START is Monday 2026-06-22 00:00 UTC = 08:00 in Taipei: today's 08:00 has just passed.
    r = await client.post("/v1/parse", json={"text": "每天早上八點幫我總結財經新聞",
                                             "timezone": "Asia/Taipei"})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "language": "zh-Hant",
        "job_params": {"type": "recurring", "time": None, "schedule": "0 8 * * *",
                       "timezone": "Asia/Taipei", "flexible_window_seconds": 0},
        "schedule_words": {"en": "every day at 08:00", "zh-Hant": "每天 08:00",
                           "zh-Hans": "每天 08:00"},
        "task": "總結財經新聞",
        "matched": "每天早上八點",
        # Chosen from the words as /v1/chat and MCP create_task choose it (no model here).
        "action": {"type": "news_digest", "topic": "finance", "language": "zh-Hant"},
        "next_runs": ["2026-06-23T00:00:00Z", "2026-06-24T00:00:00Z", "2026-06-25T00:00:00Z"],
    }
    assert (await client.get("/v1/jobs")).json()["jobs"] == []  # nothing was created


async def test_one_time_and_immediate_have_one_run(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/parse", json={"text": "in 20 minutes remind me to stretch"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["job_params"]["type"] == "one-time"
    assert body["job_params"]["timezone"] == "UTC"  # the server's default timezone
    assert body["task"] == "stretch"
    assert body["action"] == {"type": "message", "text": "stretch"}
    assert body["next_runs"] == ["2026-06-22T00:20:00Z"]

    r = await client.post("/v1/parse", json={"text": "马上提醒我喝水", "timezone": "Asia/Shanghai"})
    assert r.status_code == 200, r.text
    assert r.json()["job_params"]["type"] == "immediate"
    assert r.json()["language"] == "zh-Hans"
    assert r.json()["next_runs"] == ["2026-06-22T00:00:00Z"]


async def test_the_parsed_params_create_the_previewed_job(client: httpx.AsyncClient) -> None:
    """What the Tasks page does: preview, then POST /v1/jobs with the previewed job_params."""
    preview = (await client.post("/v1/parse", json={
        "text": "every weekday at 9am stand up", "timezone": "Europe/London"})).json()
    params = {k: v for k, v in preview["job_params"].items() if v is not None}
    r = await client.post("/v1/jobs", json={"action": preview["action"], "job_params": params})
    assert r.status_code == 201, r.text
    assert r.json()["next_run_at"] == preview["next_runs"][0]


async def test_a_sentence_without_a_task_is_still_read(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/parse", json={"text": "every day at 8am"})
    assert r.status_code == 200, r.text
    assert r.json()["task"] == ""
    assert len(r.json()["next_runs"]) == 3


async def test_unreadable_sentence_names_the_fragment(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/parse", json={"text": "每週八提醒我", "timezone": "Asia/Taipei"})
    assert_problem(r, 422, "could_not_understand", field="每週八")


async def test_bad_timezone_and_bad_body(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/parse", json={"text": "every day at 8am", "timezone": "Mars/Base"})
    assert_problem(r, 422, "unknown_timezone", field="timezone")
    r = await client.post("/v1/parse", json={"text": ""})
    assert_problem(r, 422, "invalid_value", field="text")
    r = await client.post("/v1/parse", json={"text": "every day at 8am", "tz": "UTC"})
    assert_problem(r, 422, "unknown_field", field="tz")


async def test_refused_as_creating_would_refuse(tmp_path: Path) -> None:
    """The preview compiles the schedule with the server's limits: a schedule too frequent to
    create is refused here too, not previewed."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/p.db", min_interval=3600)
    runtime = await Runtime.open(settings, FakeClock(START))
    try:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            r = await c.post("/v1/parse", json={"text": "every 5 minutes check the oven"})
            assert_problem(r, 422, "schedule_too_frequent")
    finally:
        await runtime.close()


@pytest.mark.parametrize("header", [None, "Bearer nope"])
async def test_needs_a_token_when_tokens_exist(rt: Runtime, client: httpx.AsyncClient,
                                               header: str | None) -> None:
    good = await add_token(rt, "alice", "otd_parse-secret")
    headers = {"Authorization": header} if header else {}
    r = await client.post("/v1/parse", json={"text": "every day at 8am"}, headers=headers)
    assert r.status_code == 401
    r = await client.post("/v1/parse", json={"text": "every day at 8am"}, headers=good)
    assert r.status_code == 200, r.text
