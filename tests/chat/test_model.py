"""POST /v1/chat with a model: a local server speaking the OpenAI chat-completions
tool-calling protocol calls the MCP tools. A new task is confirmed in the server's words (when,
what each run does, where results go); otherwise the model's last message is the answer.

The action is chosen as without a model (tests/chat/test_choice_table.py): a news request
stays a digest, a reminder a reminder."""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.api.conftest import assert_problem
from tests.chat.conftest import NEWS, TZ, chat_client, jobs_of
from tests.support.fake_openai import fake_openai, say, tool_call, tool_results

TOOLS = {"create_task", "list_tasks", "get_task", "update_task", "pause_task", "resume_task",
         "list_inbox", "mark_inbox_read",
         "delete_task", "run_task_now", "skip_next_run",
         "backfill_task"}


def model_settings(url: str) -> dict[str, Any]:
    return {"llm_base_url": url, "llm_model": "test-model", "llm_api_key": "sk-test",
            "default_timezone": TZ}


def schedules_news(body: dict[str, Any]) -> dict[str, Any]:
    """Turn 1: call create_task. Turn 2: read the result and answer."""
    results = tool_results(body)
    if not results:
        return tool_call("call_1", "create_task", {"when": "每天早上八點", "task": "總結財經新聞",
                                                   "timezone": TZ})
    content = results[-1]["content"]
    if content.get("dry_run"):
        return say(f"（試算）會在 {content['would_create']['next_runs'][0]} 第一次執行。")
    return say(f"好的，每天早上八點幫你總結財經新聞，下次執行 {content['task']['next_run_at']}。")


async def test_model_calls_create_task(db_url: str) -> None:
    with fake_openai(schedules_news) as fake:
        async with chat_client(db_url, **model_settings(fake.url)) as client:
            response = await client.post("/v1/chat", json={"message": NEWS})
            assert response.status_code == 200, response.text
            body = response.json()
            assert [j["job_id"] for j in await jobs_of(client)] == [body["jobs"][0]["job_id"]]
    assert body["decided_by"] == "model"
    # The server's confirmation, not the model's sentence (which names no channel).
    assert body["reply"] == ("好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，"
                             "寄到收件匣，下次執行 2026-06-23 08:00。")
    [job] = body["jobs"]
    assert job["job_params"]["schedule"] == "0 8 * * *"
    assert job["action"] == {"type": "news_digest", "topic": "finance", "language": "zh-Hant"}
    assert body["tool_calls"][0]["result"]["kind"] == "news_digest"
    assert [c["name"] for c in body["tool_calls"]] == ["create_task"]
    assert body["tool_calls"][0]["ok"] is True
    # What the model saw: the tools, the key, the system prompt, then the tool result.
    first, second = fake.requests
    assert first["model"] == "test-model"
    assert fake.headers[0]["Authorization"] == "Bearer sk-test"
    assert {t["function"]["name"] for t in first["tools"]} == TOOLS
    for tool in first["tools"]:
        assert tool["type"] == "function"
        assert tool["function"]["parameters"]["additionalProperties"] is False
    assert first["messages"][0]["role"] == "system"
    assert TZ in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": NEWS}
    assert second["messages"][2]["tool_calls"][0]["id"] == "call_1"
    [result] = tool_results(second)
    assert result["tool_call_id"] == "call_1"
    assert result["content"]["ok"] is True


async def test_model_corrects_itself_after_an_error(db_url: str) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        results = tool_results(body)
        if not results:
            return tool_call("c1", "create_task", {"task": "stretch", "schedual": "0 * * * *"})
        last = results[-1]["content"]
        if not last["ok"]:
            assert last["error"]["path"] == "schedual"  # field names only real arguments
            # The model may still pick a plain reminder explicitly.
            return tool_call("c2", "create_task", {"task": "stretch", "in": {"minutes": 20},
                                                   "kind": "message"})
        return say("OK, I will remind you to stretch in 20 minutes.")

    with fake_openai(script) as fake:
        async with chat_client(db_url, **model_settings(fake.url)) as client:
            body = (await client.post("/v1/chat", json={
                "message": "remind me to stretch in 20 minutes"})).json()
            assert len(await jobs_of(client)) == 1
    assert [c["ok"] for c in body["tool_calls"]] == [False, True]
    assert body["tool_calls"][0]["result"]["error"]["code"] == "unknown_argument"
    assert body["jobs"][0]["next_run_at"] == "2026-06-22T02:20:00Z"
    assert body["jobs"][0]["action"] == {"type": "message", "text": "stretch"}
    assert body["reply"] == ("OK, scheduled a reminder “stretch” for 2026-06-22 10:20 "
                             "(Asia/Taipei), delivered to your inbox.")


async def test_model_dry_run_creates_nothing(db_url: str) -> None:
    with fake_openai(schedules_news) as fake:
        async with chat_client(db_url, **model_settings(fake.url)) as client:
            body = (await client.post("/v1/chat", json={"message": NEWS,
                                                        "dry_run": True})).json()
            assert await jobs_of(client) == []
    call = body["tool_calls"][0]["result"]
    assert call["dry_run"] is True
    assert call["created"] is False
    assert call["would_create"]["next_runs"][0] == "2026-06-23T00:00:00Z"
    assert call["would_create"]["action"] == {"type": "news_digest", "topic": "finance",
                                              "language": "zh-Hant"}
    assert body["jobs"] == []
    assert body["dry_run"] is True
    assert body["reply"] == ("好的，已排定：每天 08:00（Asia/Taipei）會為你整理財經新聞摘要，"
                             "寄到收件匣，下次執行 2026-06-23 08:00。（試算：尚未建立）")
    assert "dry run" in fake.requests[0]["messages"][0]["content"]


async def test_arguments_that_are_not_json_are_fed_back(db_url: str) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        results = tool_results(body)
        if not results:
            message = tool_call("c1", "create_task", {})
            message["tool_calls"][0]["function"]["arguments"] = "{when: now"
            return message
        return say(json.dumps(results[-1]["content"]["error"]["code"]))

    with fake_openai(script) as fake:
        async with chat_client(db_url, **model_settings(fake.url)) as client:
            body = (await client.post("/v1/chat", json={"message": "ping now"})).json()
    assert body["reply"] == '"invalid_json"'


async def test_unreachable_model_is_503(db_url: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    async with chat_client(db_url, **model_settings(url)) as client:
        response = await client.post("/v1/chat", json={"message": NEWS})
        assert_problem(response, 503, "llm_unavailable", "llm_base_url")
        assert await jobs_of(client) == []


async def test_an_address_the_model_passes_is_used_and_said(db_url: str) -> None:
    """The user's address is in the sentence; the model passes it itself as notify_email. The
    task e-mails it, and the reply says so instead of saying the address is unknown."""
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if tool_results(body):
            return say("Done.")
        return tool_call("c1", "create_task", {"when": "every day at 8am",
                                               "task": "write me a haiku",
                                               "notify_email": "ann@example.com"})

    with fake_openai(script) as fake:
        async with chat_client(db_url, **model_settings(fake.url),
                               smtp_url="smtp://127.0.0.1:2525",
                               smtp_from="onthedot@example.com") as client:
            body = (await client.post("/v1/chat", json={
                "message": "every day at 8am write me a haiku, email me at ann@example.com"}
            )).json()
    [job] = body["jobs"]
    assert job["action"] == {"type": "prompt", "prompt": "write me a haiku"}
    assert job["notify"] == [{"channel": "inbox"}, {"channel": "email", "to": "ann@example.com"}]
    assert body["reply"] == ("OK, I will carry out “write me a haiku” every day at 08:00 "
                             "(Asia/Taipei), delivered to your inbox and e-mail to "
                             "ann@example.com; next run 2026-06-23 08:00.")


async def test_a_kind_the_model_names_wins_and_a_failed_create_is_not_confirmed(
        db_url: str) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        results = tool_results(body)
        if not results:  # a time that cannot be read: nothing to confirm
            return tool_call("c1", "create_task", {"when": "every blue moon", "task": "x"})
        if len(results) == 1:
            return tool_call("c2", "create_task", {"when": "in 10 minutes", "task": "call mom",
                                                   "kind": "prompt"})
        return say("Done.")

    with fake_openai(script) as fake:
        async with chat_client(db_url, **model_settings(fake.url)) as client:
            body = (await client.post("/v1/chat", json={
                "message": "remind me to call mom in 10 minutes"})).json()
    assert [c["ok"] for c in body["tool_calls"]] == [False, True]
    [job] = body["jobs"]
    assert job["action"] == {"type": "prompt", "prompt": "call mom"}
    assert body["reply"] == ("OK, I will carry out “call mom” at 2026-06-22 10:10 "
                             "(Asia/Taipei), delivered to your inbox.")
