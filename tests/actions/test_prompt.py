"""The ``prompt`` action: refused at creation without a model, validated strictly, and carried out
at fire time by a model (a loopback server speaking the chat-completions protocol) that reads real
feeds from a loopback feed server through ``fetch_news``, through the real engine (SQLite store,
table queue, fake clock)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.actions.egress import EgressGuard
from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.errors import ConfigError, EgressRefusedError
from onthedot.domain.models import JobParams, JobRun, RetryPolicy, RunStatus
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from tests.actions.conftest import START, ModelEngineFactory, closed_port
from tests.actions.newsfeeds import Entry, FeedServer, rss
from tests.api.conftest import assert_problem
from tests.engine.conftest import Engine
from tests.support.fake_openai import Fail, fake_openai, say, tool_call, tool_results
from tests.support.webhook import LOOPBACK_ALLOW

TZ = "Asia/Taipei"
FIRST = datetime(2026, 6, 22, 1, 0, tzinfo=UTC)  # Monday 09:00 in Taipei, after START
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
DAILY = JobParams(type="recurring", schedule="0 9 * * *", timezone=TZ)
PROMPT = "總結今天的財經新聞，三句話以內"
HEADLINES = ["台積電法說會釋出樂觀展望", "央行維持利率不變"]


# --- fixtures ----------------------------------------------------------------------------------
@pytest.fixture
def feeds() -> Iterator[FeedServer]:
    server = FeedServer().start()
    server.feed("/zh.xml", rss("經濟日報", [
        Entry(HEADLINES[0], "https://money.example/tsmc", FIRST - HOUR),
        Entry(HEADLINES[1], "https://money.example/rates", FIRST - 2 * HOUR)], "zh-TW"))
    server.feed("/en.xml", rss("Daily Biz", [
        Entry("Chip maker upbeat", "https://biz.example/chips", FIRST - HOUR)]))
    yield server
    server.stop()


def catalog(server: FeedServer) -> dict[str, Any]:
    """The deployment's feeds file: finance news from the loopback feed server."""
    return {"finance": {"zh-Hant": [server.url("/zh.xml")], "en": [server.url("/en.xml")]}}


async def prompt_job(engine: Engine, max_attempts: int = 3, **action: Any) -> str:
    view, created = await engine.rt.service.create_job("alice", JobSpec(
        action={"type": "prompt", "prompt": PROMPT, **action}, params=DAILY,
        name="每天早上九點總結財經新聞",
        retry_policy=RetryPolicy(max_attempts=max_attempts, backoff_seconds=60)))
    assert created
    return view.job.job_id


async def run_on(engine: Engine, job_id: str, day: int) -> JobRun:
    """Move the clock to the day's 09:00 occurrence, let every role work, return that run."""
    engine.clock.set(FIRST + day * DAY + timedelta(seconds=1))
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    return next(r for r in runs if r.scheduled_at == FIRST + day * DAY)


def reads_the_news(body: dict[str, Any]) -> dict[str, Any]:
    """Turn 1: ask for the finance news. Turn 2: answer from the items, with their links."""
    results = tool_results(body)
    if not results:
        return tool_call("call_1", "fetch_news", {"topic": "財經", "language": "zh-Hant"})
    items = results[-1]["content"]["items"]
    return say("今日財經：" + "；".join(f"{i['title']} {i['link']}" for i in items))


def system_of(request: dict[str, Any]) -> str:
    system = request["messages"][0]
    assert system["role"] == "system"
    return str(system["content"])


# --- creation ------------------------------------------------------------------------------------
ApiFactory = Callable[[str | None], Awaitable[tuple[httpx.AsyncClient, Runtime]]]
UNCALLED_MODEL = "http://127.0.0.1:9/v1"  # validation never calls the model


@pytest.fixture
async def open_api(tmp_path: Path) -> AsyncIterator[ApiFactory]:
    """``open_api(llm_url)``: the REST API in process, with the model at ``llm_url`` (None:
    no model configured)."""
    async with contextlib.AsyncExitStack() as stack:
        async def open_(llm_url: str | None) -> tuple[httpx.AsyncClient, Runtime]:
            rt = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/prompt.db",
                                             llm_base_url=llm_url), FakeClock(START))
            stack.push_async_callback(rt.close)
            client = await stack.enter_async_context(httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(rt)),
                base_url="http://127.0.0.1"))
            return client, rt

        yield open_


def job_body(**action: Any) -> dict[str, Any]:
    return {"name": "news", "action": {"type": "prompt", **action},
            "job_params": {"type": "recurring", "schedule": "0 8 * * *", "timezone": TZ}}


async def test_without_a_model_a_prompt_job_is_a_422_naming_the_setting(
        open_api: ApiFactory) -> None:
    client, rt = await open_api(None)
    problem = assert_problem(await client.post("/v1/jobs", json=job_body(prompt=PROMPT)),
                             422, "llm_not_configured", "action.type")
    assert "ONTHEDOT_LLM_BASE_URL" in problem["detail"]
    assert "ONTHEDOT_LLM_BASE_URL" in problem["expected"]
    assert (await rt.service.list_jobs("alice")).items == []


@pytest.mark.parametrize(("action", "code", "field"), [
    ({}, "missing_field", "action.prompt"),
    ({"prompt": ""}, "invalid_value", "action.prompt"),
    ({"prompt": " \n "}, "invalid_value", "action.prompt"),
    ({"prompt": 42}, "invalid_value", "action.prompt"),
    ({"prompt": ["summarise"]}, "invalid_value", "action.prompt"),
    ({"prompt": "x" * 10_001}, "invalid_value", "action.prompt"),
    ({"prompt": PROMPT, "model": ""}, "invalid_value", "action.model"),
    ({"prompt": PROMPT, "model": "gpt 4o"}, "invalid_value", "action.model"),
    ({"prompt": PROMPT, "model": 4}, "invalid_value", "action.model"),
    ({"prompt": PROMPT, "model": "m" * 201}, "invalid_value", "action.model"),
    ({"prompt": PROMPT, "max_tokens": 0}, "invalid_value", "action.max_tokens"),
    ({"prompt": PROMPT, "max_tokens": 32_001}, "invalid_value", "action.max_tokens"),
    ({"prompt": PROMPT, "max_tokens": True}, "invalid_value", "action.max_tokens"),
    ({"prompt": PROMPT, "max_tokens": 100.5}, "invalid_value", "action.max_tokens"),
    ({"prompt": PROMPT, "max_tokens": "100"}, "invalid_value", "action.max_tokens"),
    ({"prompt": PROMPT, "temperature": -0.1}, "invalid_value", "action.temperature"),
    ({"prompt": PROMPT, "temperature": 2.01}, "invalid_value", "action.temperature"),
    ({"prompt": PROMPT, "temperature": False}, "invalid_value", "action.temperature"),
    ({"prompt": PROMPT, "temperature": "0.5"}, "invalid_value", "action.temperature"),
    ({"prompt": PROMPT, "tools": ["fetch_news"]}, "unknown_field", "action.tools"),
])
async def test_a_bad_prompt_action_is_a_422_and_nothing_is_stored(
        open_api: ApiFactory, action: dict[str, Any], code: str, field: str) -> None:
    client, rt = await open_api(UNCALLED_MODEL)
    assert_problem(await client.post("/v1/jobs", json=job_body(**action)), 422, code, field)
    assert (await rt.service.list_jobs("alice")).items == []


@pytest.mark.parametrize("action", [
    {"prompt": "x" * 10_000},
    {"prompt": "x", "model": "llama3.1:8b", "max_tokens": 1, "temperature": 0},
    {"prompt": "x", "model": "org/model-v2", "max_tokens": 32_000, "temperature": 2},
    {"prompt": "x", "temperature": 0.7},
])
async def test_the_limits_of_each_parameter_are_accepted(
        open_api: ApiFactory, action: dict[str, Any]) -> None:
    client, _ = await open_api(UNCALLED_MODEL)
    response = await client.post("/v1/jobs", json=job_body(**action))
    assert response.status_code == 201, response.text
    assert response.json()["action"] == {"type": "prompt", **action}


async def test_an_unusable_model_url_stops_the_process(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ONTHEDOT_LLM_BASE_URL"):
        await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/bad.db",
                                    llm_base_url="ftp://models.example/v1"), FakeClock(START))


# --- at fire time ------------------------------------------------------------------------------
async def test_the_model_reads_the_news_and_its_answer_is_delivered(
        model_engine: ModelEngineFactory, feeds: FeedServer) -> None:
    with fake_openai(reads_the_news) as fake:
        engine = await model_engine(fake.url, feeds=catalog(feeds), egress_allow=LOOPBACK_ALLOW)
        job_id = await prompt_job(engine, model="finance-model", max_tokens=500,
                                  temperature=0.2)

        first = await run_on(engine, job_id, 0)

        assert first.status is RunStatus.SUCCEEDED, first.error
        answer = ("今日財經：台積電法說會釋出樂觀展望 https://money.example/tsmc；"
                  "央行維持利率不變 https://money.example/rates")
        assert first.output == {
            "text": answer, "model": "finance-model", "language": "zh-Hant",
            "tool_calls": [{"name": "fetch_news", "topic": "finance", "language": "zh-Hant",
                            "items": 2}],
            "deliver": True}
        ask, grounded = fake.requests
        # What the model was asked: the prompt, the run's context, the knobs of the job.
        assert (ask["model"], ask["max_tokens"], ask["temperature"]) == ("finance-model", 500,
                                                                        0.2)
        assert [t["function"]["name"] for t in ask["tools"]] == ["fetch_news"]
        assert ask["messages"][1] == {"role": "user", "content": PROMPT}
        system = system_of(ask)
        assert "2026-06-22 09:00 (Monday) in Asia/Taipei" in system
        assert "The person's timezone: Asia/Taipei." in system
        assert "Answer in Traditional Chinese" in system
        assert "previous run" not in system
        # What fetch_news gave back: the fixture's headlines, grounded in the real feed.
        [result] = tool_results(grounded)
        assert result["tool_call_id"] == "call_1"
        assert result["content"] == {"topic": "finance", "language": "zh-Hant", "items": [
            {"title": HEADLINES[0], "link": "https://money.example/tsmc", "source": "經濟日報",
             "published": "2026-06-22T08:00+08:00"},
            {"title": HEADLINES[1], "link": "https://money.example/rates", "source": "經濟日報",
             "published": "2026-06-22T07:00+08:00"}]}
        assert [r.path for r in feeds.requests] == ["/zh.xml"]
        assert [h["Authorization"] for h in fake.headers] == ["Bearer sk-test"] * 2
        assert [h["Idempotency-Key"] for h in fake.headers] == [f"{first.run_id}-0",
                                                                 f"{first.run_id}-1"]
        # Delivered to the inbox as the answer's text.
        [item] = (await engine.rt.service.list_inbox("alice")).items
        assert (item.run_id, item.text) == (first.run_id, answer)

        feeds.feed("/zh.xml", rss("經濟日報", [
            Entry("外資連三買", "https://money.example/flows", FIRST + DAY - HOUR)], "zh-TW"))
        second = await run_on(engine, job_id, 1)

    assert second.status is RunStatus.SUCCEEDED, second.error
    assert second.output["text"] == "今日財經：外資連三買 https://money.example/flows"
    system = system_of(fake.requests[2])
    assert "2026-06-23 09:00 (Tuesday) in Asia/Taipei" in system
    assert "previous run (scheduled for 2026-06-22 09:00 (Monday))" in system
    assert f'"""\n{answer}\n"""' in system
    assert len((await engine.rt.service.list_inbox("alice")).items) == 2


async def test_the_model_default_comes_from_the_settings_and_english_gets_english(
        model_engine: ModelEngineFactory, feeds: FeedServer) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        if not tool_results(body):
            return tool_call("c1", "fetch_news", {"topic": "business"})  # no language given
        return say(tool_results(body)[-1]["content"]["items"][0]["title"])

    with fake_openai(script) as fake:
        engine = await model_engine(fake.url, feeds=catalog(feeds), egress_allow=LOOPBACK_ALLOW)
        job_id = await prompt_job(engine, prompt="Summarise the business news")
        run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output["text"] == "Chip maker upbeat"
    assert run.output["model"] == "test-model"
    assert run.output["language"] == "en"
    [request, _] = fake.requests
    assert "max_tokens" not in request
    assert "temperature" not in request
    assert "Answer in English" in system_of(request)
    assert [r.path for r in feeds.requests] == ["/en.xml"]


async def test_an_unknown_topic_is_an_error_the_model_reads_not_a_failed_run(
        model_engine: ModelEngineFactory, feeds: FeedServer) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        results = tool_results(body)
        if not results:
            return tool_call("c1", "fetch_news", {"topic": "sports", "language": "en"})
        return say(f"Sorry: {results[-1]['content']['error']}")

    with fake_openai(script) as fake:
        engine = await model_engine(fake.url, feeds=catalog(feeds), egress_allow=LOOPBACK_ALLOW)
        job_id = await prompt_job(engine, prompt="sports news please")
        run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.SUCCEEDED, run.error
    error = "unknown news topic 'sports'; the topics are finance, technology, world"
    assert run.output["text"] == f"Sorry: {error}"
    assert run.output["tool_calls"] == [{"name": "fetch_news", "topic": "sports",
                                         "error": "unknown topic"}]
    assert tool_results(fake.requests[1])[0]["content"] == {"error": error}
    assert feeds.requests == []


async def test_a_model_that_is_down_is_retried_then_the_run_fails_with_the_reason(
        model_engine: ModelEngineFactory) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    engine = await model_engine(url)
    job_id = await prompt_job(engine, max_attempts=2)

    first = await run_on(engine, job_id, 0)

    assert first.status is RunStatus.RETRYING
    assert first.error == "the model (ONTHEDOT_LLM_BASE_URL) did not answer: ConnectError"
    engine.clock.advance(120)
    await engine.settle()
    [last, *_] = [r for r in (await engine.rt.service.list_runs("alice", job_id)).items
                  if r.run_id == first.run_id]
    assert last.status is RunStatus.FAILED
    assert last.attempt == 2
    assert last.dead_lettered
    assert last.error == first.error
    assert (await engine.rt.service.list_inbox("alice")).items == []


@pytest.mark.parametrize(("status", "retried"), [(500, True), (503, True), (429, True),
                                                 (400, False), (401, False), (404, False)])
async def test_a_refused_request_is_not_retried_an_overloaded_model_is(
        model_engine: ModelEngineFactory, status: int, retried: bool) -> None:
    with fake_openai(lambda _body: Fail(status, "no can do")) as fake:
        engine = await model_engine(fake.url)
        job_id = await prompt_job(engine)
        run = await run_on(engine, job_id, 0)

    assert run.status is (RunStatus.RETRYING if retried else RunStatus.FAILED)
    assert run.attempt == 1
    assert run.error == (f"the model (ONTHEDOT_LLM_BASE_URL) answered HTTP {status}: "
                         '{"error": {"message": "no can do"}}')


async def test_an_answer_without_text_is_a_retried_failure(
        model_engine: ModelEngineFactory) -> None:
    with fake_openai(lambda _body: say("  ")) as fake:
        engine = await model_engine(fake.url)
        job_id = await prompt_job(engine)
        run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.RETRYING
    assert run.error == "the model test-model answered with no text"


# --- egress ------------------------------------------------------------------------------------
async def test_fetch_news_from_a_private_feed_is_refused_while_the_model_on_loopback_is_reached(
        model_engine: ModelEngineFactory, feeds: FeedServer) -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        results = tool_results(body)
        if not results:
            return tool_call("c1", "fetch_news", {"topic": "finance", "language": "zh-Hant"})
        return say("無法取得新聞：" + results[-1]["content"]["error"])

    with fake_openai(script) as fake:
        engine = await model_engine(fake.url, feeds=catalog(feeds))  # nothing allowlisted
        job_id = await prompt_job(engine)
        run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert len(fake.requests) == 2  # the model, on 127.0.0.1, was reached: it is trusted
    content = tool_results(fake.requests[1])[0]["content"]
    assert content["items"] == []
    [unread] = content["unreadable_feeds"]
    assert unread["feed"] == "127.0.0.1"
    assert "loopback address" in unread["reason"]
    assert "no feed of this topic could be read" in content["error"]
    assert feeds.requests == []  # nothing was sent to the private feed


async def test_trusting_the_model_does_not_open_its_host_to_users(
        model_engine: ModelEngineFactory) -> None:
    with fake_openai(lambda _body: say("hi")) as fake:
        engine = await model_engine(fake.url)
        transport = httpx.ASGITransport(app=create_app(engine.rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
            response = await api.post("/v1/jobs", json={
                "name": "poke the model", "action": {
                    "type": "webhook", "url": f"{fake.url}/chat/completions",
                    "body": {"model": "test-model", "messages": []}},
                "job_params": {"type": "immediate"}})
    assert_problem(response, 422, "egress_refused", "action.url")
    assert fake.requests == []


async def test_the_trusted_endpoint_is_one_host_and_one_port() -> None:
    guard = EgressGuard(trusted=[("127.0.0.1", 11434), ("models.internal", 443)],
                        resolve=_resolver({"models.internal": ["10.0.0.7"]}))
    assert await guard.check_host("127.0.0.1", 11434) == ["127.0.0.1"]
    assert await guard.check_host("MODELS.internal.", 443) == ["10.0.0.7"]
    with pytest.raises(EgressRefusedError, match="loopback"):
        await guard.check_host("127.0.0.1", 8080)
    with pytest.raises(EgressRefusedError, match="private"):
        await guard.check_host("models.internal", 80)


def _resolver(answers: dict[str, list[str]]) -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        return answers[host]
    return resolve
