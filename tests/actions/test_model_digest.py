"""A news digest written by the configured model (a loopback server speaking the chat-completions
protocol), through the real engine, from real feeds and article pages on loopback: the stories
go to the model with excerpts of their articles and its summary is the digest; a model that
fails or says nothing leaves the offline digest, and the output says which one the person got;
no new items means no model call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest

from onthedot.domain.models import JobParams, JobRun, RetryPolicy, RunStatus
from onthedot.service import JobSpec
from tests.actions.conftest import ModelEngineFactory, closed_port
from tests.actions.newsfeeds import HTML_TYPE, Entry, FeedServer, page, rss
from tests.engine.conftest import Engine
from tests.support.fake_openai import Fail, fake_openai, say
from tests.support.webhook import LOOPBACK_ALLOW

FIRST = datetime(2026, 6, 22, 0, 0, tzinfo=UTC)  # 08:00 in Taipei, the day after START's
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
DAILY = JobParams(type="recurring", schedule="0 8 * * *", timezone="Asia/Taipei")
SUMMARY = "台積電上調展望（經濟日報）https://money.example/tsmc；央行按兵不動 https://money.example/rates"
ARTICLE = ["台積電今天召開法說會，預估第三季營收將達新台幣 7,500 億元，季增 10%。",
           "董事長魏哲家表示，人工智慧相關需求強勁，全年美元營收成長率上調至 30%。"]
RATES_TEASER = "央行理監事會決議重貼現率維持 2% 不變。"


@pytest.fixture
def feeds() -> Iterator[FeedServer]:
    server = FeedServer().start()
    server.feed("/tsmc.html", page("台積電法說會釋出樂觀展望", ARTICLE, "zh-Hant"),
                content_type=HTML_TYPE)
    # The rates story's page is gone: its feed's description stands in.
    server.feed("/zh.xml", rss("經濟日報", [
        Entry("台積電法說會釋出樂觀展望", server.url("/tsmc.html"), FIRST - HOUR),
        Entry("央行維持利率不變", server.url("/rates.html"), FIRST - 2 * HOUR,
              summary=RATES_TEASER)], "zh-TW"))
    yield server
    server.stop()


async def digest_job(engine: Engine, feeds: list[str], **action: Any) -> str:
    view, created = await engine.rt.service.create_job("alice", JobSpec(
        action={"type": "news_digest", "topic": "財經", "feeds": feeds, **action}, params=DAILY,
        name="每天早上八點幫我總結財經新聞",
        retry_policy=RetryPolicy(max_attempts=3, backoff_seconds=60)))
    assert created
    return view.job.job_id


async def run_on(engine: Engine, job_id: str, day: int) -> JobRun:
    """The day's 08:00 (Taipei) occurrence; START is past the first day's, so day 1 is first."""
    engine.clock.set(FIRST + day * DAY + timedelta(seconds=1))
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    return next(r for r in runs if r.scheduled_at == FIRST + day * DAY)


def stories_sent(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The stories of a digest request, as the model received them."""
    user = request["messages"][1]["content"]
    stories: list[dict[str, Any]] = json.loads(user[user.index("["):])
    return stories


async def test_the_model_writes_the_digest_from_the_new_items(
        model_engine: ModelEngineFactory, feeds: FeedServer) -> None:
    with fake_openai(lambda _body: say(SUMMARY)) as fake:
        engine = await model_engine(fake.url, egress_allow=LOOPBACK_ALLOW)
        job_id = await digest_job(engine, [feeds.url("/zh.xml"), feeds.status("/gone", 404)])
        run = await run_on(engine, job_id, 1)

    assert run.status is RunStatus.SUCCEEDED, run.error
    # The model's text, then the unreadable feed in the offline digest's own words.
    host = urlsplit(feeds.url("/")).netloc
    assert run.output["digest"] == f"{SUMMARY}\n\n有 1 個來源無法讀取：{host}/gone（HTTP 404）。"
    assert run.output["written_by"] == "model"
    assert run.output["model"] == "test-model"
    assert "model_error" not in run.output
    assert run.output["new_items"] == 2
    assert run.output["deliver"] is True
    [request] = fake.requests
    assert request["model"] == "test-model"
    assert "tools" not in request
    assert "Traditional Chinese" in request["messages"][0]["content"]
    assert "finance news" in request["messages"][0]["content"]
    assert request["messages"][1]["content"].startswith(
        "2 new items in 2 stories, most important first (times in Asia/Taipei):\n")
    # Each story with its article's text (its page's main text, without the page's menus and
    # footer), or its feed's description when the page could not be read.
    assert stories_sent(request) == [
        {"title": "台積電法說會釋出樂觀展望",
         "sources": [{"source": "經濟日報", "published": "2026-06-22 07:00",
                      "link": feeds.url("/tsmc.html")}],
         "excerpt": "".join(ARTICLE)},
        {"title": "央行維持利率不變",
         "sources": [{"source": "經濟日報", "published": "2026-06-22 06:00",
                      "link": feeds.url("/rates.html")}],
         "excerpt": RATES_TEASER}]
    assert len(feeds.requests_to("/tsmc.html")) == 1
    assert fake.headers[0]["Idempotency-Key"] == run.run_id
    [item] = (await engine.rt.service.list_inbox("alice")).items
    assert item.text == run.output["digest"]


async def test_items_past_max_items_are_named_after_the_models_text(
        model_engine: ModelEngineFactory, feeds: FeedServer) -> None:
    with fake_openai(lambda _body: say(SUMMARY)) as fake:
        engine = await model_engine(fake.url, egress_allow=LOOPBACK_ALLOW)
        job_id = await digest_job(engine, [feeds.url("/zh.xml")], max_items=1)
        run = await run_on(engine, job_id, 1)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output["digest"] == f"{SUMMARY}\n\n另有 1 則：央行維持利率不變（經濟日報）。"
    [request] = fake.requests
    assert [s["title"] for s in stories_sent(request)] == ["台積電法說會釋出樂觀展望"]
    assert run.output["more_items"] == 1


@pytest.mark.parametrize(("answer", "why"), [
    (Fail(500, "internal error"), "answered HTTP 500"),
    (Fail(400, "context too long"), "answered HTTP 400"),
    (say(""), "the model answered with no text"),
])
async def test_a_model_that_fails_leaves_the_offline_digest_and_says_so(
        model_engine: ModelEngineFactory, feeds: FeedServer, answer: Any, why: str) -> None:
    with fake_openai(lambda _body: answer) as fake:
        engine = await model_engine(fake.url, egress_allow=LOOPBACK_ALLOW)
        job_id = await digest_job(engine, [feeds.url("/zh.xml")])
        run = await run_on(engine, job_id, 1)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert len(fake.requests) == 1
    assert run.output["written_by"] == "offline"
    assert "model" not in run.output
    assert why in run.output["model_error"]
    assert run.output["digest"] == "\n".join([
        "財經新聞：1 個來源共 2 則新消息。",
        "",
        "1. 台積電法說會釋出樂觀展望",
        "".join(ARTICLE),
        f"經濟日報 06-22 07:00 {feeds.url('/tsmc.html')}",
        "",
        "2. 央行維持利率不變",
        RATES_TEASER,
        f"經濟日報 06-22 06:00 {feeds.url('/rates.html')}"])


@pytest.mark.parametrize("where", ["closed port", "unknown name"])
async def test_a_model_that_is_down_leaves_the_offline_digest(
        model_engine: ModelEngineFactory, feeds: FeedServer, where: str) -> None:
    # .invalid never resolves (RFC 6761): the lookup fails in the model's guard.
    url = f"http://127.0.0.1:{closed_port()}/v1" if where == "closed port" \
        else "http://models.invalid:8000/v1"
    engine = await model_engine(url, egress_allow=LOOPBACK_ALLOW)
    job_id = await digest_job(engine, [feeds.url("/zh.xml")])
    run = await run_on(engine, job_id, 1)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output["written_by"] == "offline"
    assert run.output["model_error"].startswith(
        "the model (ONTHEDOT_LLM_BASE_URL) did not answer: ConnectError"
        if where == "closed port"
        else "the model (ONTHEDOT_LLM_BASE_URL) could not be reached: could not resolve ***")
    assert url not in run.output["model_error"]
    assert run.output["new_items"] == 2


async def test_nothing_new_means_no_model_call(model_engine: ModelEngineFactory,
                                               feeds: FeedServer) -> None:
    with fake_openai(lambda _body: say(SUMMARY)) as fake:
        engine = await model_engine(fake.url, egress_allow=LOOPBACK_ALLOW)
        job_id = await digest_job(engine, [feeds.url("/zh.xml")])
        assert (await run_on(engine, job_id, 1)).output["written_by"] == "model"
        quiet = await run_on(engine, job_id, 2)

    assert quiet.status is RunStatus.SUCCEEDED, quiet.error
    assert len(fake.requests) == 1
    assert quiet.output["digest"] == "自上次摘要以來沒有新的財經新聞。"
    assert quiet.output["written_by"] == "offline"
    assert quiet.output["deliver"] is False
