"""POST /v1/chat without a model: the offline parser decides, and the task's words choose the
action (a news digest when they ask for news, else a reminder)."""

from __future__ import annotations

import pytest

from tests.api.conftest import assert_problem
from tests.chat.conftest import NEWS, TZ, chat_client, jobs_of


async def test_chinese_sentence_becomes_a_recurring_job(db_url: str) -> None:
    async with chat_client(db_url) as client:
        response = await client.post("/v1/chat", json={"message": NEWS, "timezone": TZ})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["reply"] == ("好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，"
                                 "寄到收件匣，下次執行 2026-06-23 08:00。")
        assert body["decided_by"] == "parser"
        assert body["language"] == "zh-Hant"
        assert body["dry_run"] is False
        assert body["tool_calls"] == []
        assert body["understood"]["job_params"]["schedule"] == "0 8 * * *"
        assert body["understood"]["next_runs"][0] == "2026-06-23T00:00:00Z"
        [job] = body["jobs"]
        digest = {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}
        assert job["action"] == digest
        assert body["action"] == digest
        assert job["name"] == "總結財經新聞"
        assert job["next_run_at"] == "2026-06-23T00:00:00Z"
        assert [j["job_id"] for j in await jobs_of(client)] == [job["job_id"]]


@pytest.mark.parametrize(("message", "timezone", "reply", "action"), [
    ("remind me to call mom tomorrow at 3pm", "America/New_York",
     "OK, scheduled a reminder “call mom” for 2026-06-22 15:00 (America/New_York), delivered "
     "to your inbox.",
     {"type": "message", "text": "call mom"}),
    ("every weekday at 9am send the standup notes", TZ,
     "OK, scheduled a reminder “send the standup notes” every weekday at 09:00 (Asia/Taipei), "
     "delivered to your inbox; next run 2026-06-23 09:00.",
     {"type": "message", "text": "send the standup notes"}),
    ("every weekday at 7am send me the tech headlines", TZ,
     "OK, scheduled a technology news digest every weekday at 07:00 (Asia/Taipei), delivered to "
     "your inbox; next run 2026-06-23 07:00.",
     {"type": "news_digest", "topic": "technology", "language": "en"}),
    ("tomorrow at 9am email the news team", TZ,
     "OK, scheduled a reminder “email the news team” for 2026-06-23 09:00 (Asia/Taipei), "
     "delivered to your inbox.",
     {"type": "message", "text": "email the news team"}),
    ("每周一三五晚上九点半去健身房", "Asia/Shanghai",
     "好的，已安排：每周一、三、五 21:30（Asia/Shanghai）会提醒你「去健身房」，"
     "发到收件箱，下次执行 2026-06-22 21:30。", {"type": "message", "text": "去健身房"}),
    ("每天早上七点给我国际新闻", "Asia/Shanghai",
     "好的，已安排：每天 07:00（Asia/Shanghai）会为你整理国际新闻摘要，发到收件箱，"
     "下次执行 2026-06-23 07:00。",
     {"type": "news_digest", "topic": "world", "language": "zh-Hans"}),
])
async def test_english_and_simplified(db_url: str, message: str, timezone: str,
                                      reply: str, action: dict[str, object]) -> None:
    async with chat_client(db_url) as client:
        response = await client.post("/v1/chat", json={"message": message,
                                                       "timezone": timezone})
        assert response.status_code == 200, response.text
        assert response.json()["reply"] == reply
        assert response.json()["action"] == action
        [job] = await jobs_of(client)
        assert job["action"] == action


async def test_default_timezone_is_the_servers(db_url: str) -> None:
    async with chat_client(db_url, default_timezone=TZ) as client:
        body = (await client.post("/v1/chat", json={"message": NEWS})).json()
    assert body["jobs"][0]["job_params"]["timezone"] == TZ


async def test_dry_run_creates_nothing(db_url: str) -> None:
    async with chat_client(db_url) as client:
        response = await client.post("/v1/chat", json={"message": NEWS, "timezone": TZ,
                                                       "dry_run": True})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["dry_run"] is True
        assert body["jobs"] == []
        assert body["reply"].endswith("（試算：尚未建立）")
        assert body["understood"]["task"] == "總結財經新聞"
        assert body["reply"].startswith("好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經")
        assert body["action"] == {"type": "news_digest", "topic": "finance",
                                  "language": "zh-Hant"}
        english = (await client.post("/v1/chat", json={
            "message": "in 20 minutes remind me to stretch", "dry_run": True})).json()
        assert english["reply"] == ("OK, scheduled a reminder “stretch” for 2026-06-22 02:20 "
                                    "(UTC), delivered to your inbox. (dry run: nothing was "
                                    "created)")
        assert english["action"] == {"type": "message", "text": "stretch"}
        assert await jobs_of(client) == []


@pytest.mark.parametrize(("message", "field"), [
    ("總結財經新聞", "總結財經新聞"),
    ("每週八提醒我喝水", "每週八"),
    ("summarize the news sometime soon", "sometime soon"),
])
async def test_unreadable_sentence_is_422_naming_the_fragment(db_url: str, message: str,
                                                             field: str) -> None:
    async with chat_client(db_url) as client:
        response = await client.post("/v1/chat", json={"message": message})
        body = assert_problem(response, 422, "could_not_understand", field)
        assert body["expected"]
        assert await jobs_of(client) == []


async def test_other_refusals(db_url: str) -> None:
    async with chat_client(db_url) as client:
        no_task = await client.post("/v1/chat", json={"message": "every day at 8am"})
        assert_problem(no_task, 422, "missing_task", "message")
        assert_problem(await client.post("/v1/chat", json={"message": NEWS, "tz": TZ}),
                       422, "unknown_field", "tz")
        assert_problem(await client.post("/v1/chat", json={"message": ""}), 422,
                       "invalid_value", "message")
        assert_problem(await client.post("/v1/chat", json={"message": NEWS,
                                                           "timezone": "Mars/Base"}),
                       422, "unknown_timezone", "timezone")


async def test_idempotency_key_replays(db_url: str) -> None:
    async with chat_client(db_url) as client:
        headers = {"Idempotency-Key": "msg-1"}
        first = (await client.post("/v1/chat", json={"message": NEWS}, headers=headers)).json()
        again = (await client.post("/v1/chat", json={"message": NEWS}, headers=headers)).json()
        assert first["jobs"][0]["job_id"] == again["jobs"][0]["job_id"]
        assert len(await jobs_of(client)) == 1
