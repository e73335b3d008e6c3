"""The news digest through the real engine (SQLite store and table queue, fake clock, roles
ticked by hand) against real feed servers on loopback: a daily job digests the newest items,
then only what was published since its last successful run, says so when nothing is new, keeps
going when some feeds fail, and never fetches a refused address."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.actions.digest import Digest, DigestRequest, OfflineDigest
from onthedot.actions.egress import EgressGuard
from onthedot.actions.news import NewsDigestAction
from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.errors import ActionError
from onthedot.domain.models import JobParams, JobRun, RetryPolicy, RunStatus
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from tests.actions.newsfeeds import ATOM_TYPE, HTML_TYPE, Entry, FeedServer, atom, page, rss
from tests.engine.conftest import START, Engine

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
FIRST = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)  # 08:00 UTC, START's day
DAILY = JobParams(type="recurring", schedule="0 8 * * *", timezone="UTC")
OUTPUT_KEYS = {"digest", "written_by", "items", "new_items", "more_items", "more", "problems",
               "language", "deliver"}

EngineFactory = Callable[..., Awaitable[Engine]]


@pytest.fixture
async def make_engine(tmp_path: Path) -> AsyncIterator[EngineFactory]:
    """``make_engine(allow, worker_allow=...)``: jobs are validated under ``allow``, the
    worker calls out under ``worker_allow`` (default: the same)."""
    made: list[Engine] = []

    async def make(allow: str = "127.0.0.1", *, worker_allow: str | None = None) -> Engine:
        clock = FakeClock(START)
        settings = Settings(database_url=f"sqlite:///{tmp_path}/news{len(made)}.db",
                            egress_allow=allow)
        rt = await Runtime.open(settings, clock)
        worker_settings = settings.model_copy(
            update={"egress_allow": allow if worker_allow is None else worker_allow})
        engine = Engine.on(rt, clock, settings, worker_settings)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        await engine.worker.aclose()
        await engine.rt.close()


@pytest.fixture
def server() -> Iterator[FeedServer]:
    feeds = FeedServer().start()
    yield feeds
    feeds.stop()


async def daily_digest(engine: Engine, name: str = "Morning finance digest",
                       timeout_seconds: float = 60.0, **action: Any) -> str:
    view, created = await engine.rt.service.create_job("alice", JobSpec(
        action={"type": "news_digest", **action}, params=DAILY, name=name,
        timeout_seconds=timeout_seconds,
        retry_policy=RetryPolicy(max_attempts=3, backoff_seconds=60)))
    assert created
    return view.job.job_id


async def run_on(engine: Engine, job_id: str, day: int) -> JobRun:
    """Move the clock to the day's 08:00 occurrence, let every role work, return that run."""
    engine.clock.set(FIRST + day * DAY + timedelta(seconds=1))
    await engine.settle()
    return await the_run(engine, job_id, day)


async def the_run(engine: Engine, job_id: str, day: int) -> JobRun:
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    return next(r for r in runs if r.scheduled_at == FIRST + day * DAY)


def entries(prefix: str, newest: datetime, count: int, site: str) -> list[Entry]:
    return [Entry(f"{prefix} {i}", f"{site}/{prefix}/{i}", newest - i * HOUR)
            for i in range(count)]


def titles(run: JobRun) -> list[str]:
    return [item["title"] for item in run.output["items"]]


async def test_first_run_digests_the_newest_then_only_what_is_new(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    biz = entries("biz", FIRST - HOUR, 8, "https://biz.example")
    tech = entries("tech", FIRST - 1.5 * HOUR, 3, "https://tech.example")
    a = server.feed("/biz.xml", rss("Daily Biz", biz))
    b = server.feed("/tech.atom", atom("Tech Wire", tech), content_type=ATOM_TYPE)
    job_id = await daily_digest(engine, topic="finance", feeds=[a, b], max_items=5,
                                language="en")

    first = await run_on(engine, job_id, 0)

    assert first.status is RunStatus.SUCCEEDED, first.error
    assert set(first.output) == OUTPUT_KEYS
    assert titles(first) == ["biz 0", "tech 0", "biz 1", "tech 1", "biz 2"]
    assert first.output["items"][0] == {"title": "biz 0", "link": "https://biz.example/biz/0",
                                        "source": "Daily Biz",
                                        "published": "2026-06-22T07:00:00+00:00"}
    assert first.output["new_items"] == 5
    assert first.output["deliver"] is True
    assert first.output["written_by"] == "offline"  # no model configured
    assert first.output["language"] == "en"
    assert first.output["problems"] == []
    # No article page could be read (the links lead nowhere), so each story is its title and
    # its source; single-source stories come newest first.
    assert first.output["digest"] == "\n".join([
        "Finance news: 5 new items from 2 sources.",
        "",
        "1. biz 0",
        "Daily Biz 06-22 07:00 https://biz.example/biz/0",
        "",
        "2. tech 0",
        "Tech Wire 06-22 06:30 https://tech.example/tech/0",
        "",
        "3. biz 1",
        "Daily Biz 06-22 06:00 https://biz.example/biz/1",
        "",
        "4. tech 1",
        "Tech Wire 06-22 05:30 https://tech.example/tech/1",
        "",
        "5. biz 2",
        "Daily Biz 06-22 05:00 https://biz.example/biz/2",
        "",
        "And 6 more: tech 2 (Tech Wire); biz 3 (Daily Biz); biz 4 (Daily Biz); "
        "biz 5 (Daily Biz); biz 6 (Daily Biz); biz 7 (Daily Biz).",
    ])
    assert first.output["more_items"] == 6
    assert [i["title"] for i in first.output["more"]] == [
        "tech 2", "biz 3", "biz 4", "biz 5", "biz 6", "biz 7"]

    # During the day: two stories after the first digest, on one feed.
    fresh = [Entry("rates decision", "https://biz.example/rates", FIRST + 4 * HOUR),
             Entry("closing bell", "https://biz.example/close", FIRST + 9 * HOUR)]
    server.feed("/biz.xml", rss("Daily Biz", [*reversed(fresh), *biz]))

    second = await run_on(engine, job_id, 1)

    assert second.status is RunStatus.SUCCEEDED, second.error
    # The six past max_items are not carried over: they were named, and count as seen.
    assert titles(second) == ["closing bell", "rates decision"]
    assert second.output["new_items"] == 2
    assert second.output["more_items"] == 0
    assert second.output["deliver"] is True
    assert second.output["digest"].startswith("Finance news: 2 new items from 1 source.\n")

    third = await run_on(engine, job_id, 2)

    assert third.status is RunStatus.SUCCEEDED, third.error
    assert third.output == {"digest": "No new finance news since the last digest.",
                            "written_by": "offline", "items": [], "new_items": 0,
                            "more_items": 0, "more": [], "problems": [], "language": "en",
                            "deliver": False}


async def test_a_chinese_task_gets_a_chinese_digest(make_engine: EngineFactory,
                                                    server: FeedServer) -> None:
    engine = await make_engine()
    hant = server.feed("/hant.xml", rss("中央社財經", [
        Entry("台積電法說會釋利多", "https://tw.example/1", FIRST - HOUR),
        Entry("新台幣升值", "https://tw.example/2", FIRST - 2 * HOUR)]))
    hans = server.feed("/hans.atom", atom("财经快讯", [
        Entry("人民币汇率持稳", "https://cn.example/1", FIRST - 3 * HOUR)]),
        content_type=ATOM_TYPE)
    # No language given: the task's own words are Traditional Chinese.
    job_id = await daily_digest(engine, name="每天早上八點幫我總結財經新聞", topic="財經",
                                feeds=[hant, hans])

    first = await run_on(engine, job_id, 0)

    assert first.status is RunStatus.SUCCEEDED, first.error
    assert first.output["language"] == "zh-Hant"
    assert first.output["digest"] == "\n".join([
        "財經新聞：2 個來源共 3 則新消息。",
        "",
        "1. 台積電法說會釋利多",
        "中央社財經 06-22 07:00 https://tw.example/1",
        "",
        "2. 新台幣升值",
        "中央社財經 06-22 06:00 https://tw.example/2",
        "",
        "3. 人民币汇率持稳",
        "财经快讯 06-22 05:00 https://cn.example/1",
    ])

    second = await run_on(engine, job_id, 1)
    assert second.output["digest"] == "自上次摘要以來沒有新的財經新聞。"
    assert second.output["deliver"] is False


async def test_the_offline_digest_summarises_the_articles_and_merges_the_same_story(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    chip = ["晶準半導體今天公布第二季財報，單季營收達新台幣 1,280 億元，較去年同期成長 31%。",
            "董事長陳志遠表示，人工智慧伺服器晶片需求強勁，全年營收成長目標上調至 25%。",
            "晶準半導體股價今天收在 845 元，上漲 2.4%。"]
    wire = ["受惠人工智慧晶片需求，晶準半導體第二季營收新台幣 1,280 億元，年增 31%。",
            "晶準並計畫在高雄設立新的先進封裝廠，預計 2028 年開始量產。"]
    rates = ["中央銀行今天召開理監事會，決議重貼現率維持在 2% 不變，符合市場預期。"]
    for path, title, text in (("/chip.html", "晶準半導體上調全年展望", chip),
                              ("/wire-chip.html", "AI 需求帶動 晶準營收年增三成", wire),
                              ("/rates.html", "央行利率維持不變", rates)):
        server.feed(path, page(title, text, "zh-Hant"), content_type=HTML_TYPE)
    times = server.feed("/times.xml", rss("台灣財經時報", [
        Entry("晶準半導體上調全年展望", server.url("/chip.html"), FIRST - 3 * HOUR),
        Entry("央行利率維持不變", server.url("/rates.html"), FIRST - HOUR)]))
    wire_feed = server.feed("/wire.xml", rss("中央快訊網", [
        Entry("AI 需求帶動 晶準營收年增三成", server.url("/wire-chip.html"), FIRST - 2 * HOUR)]))
    job_id = await daily_digest(engine, name="每天早上八點幫我總結財經新聞", topic="財經",
                                feeds=[times, wire_feed])

    run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.SUCCEEDED, run.error
    head, first, second = run.output["digest"].split("\n\n")
    assert head == "財經新聞：2 個來源共 3 則新消息。"
    # The story two outlets carry comes first, told once, with both outlets and links.
    title, summary, sources = first.split("\n")
    assert title == "1. AI 需求帶動 晶準營收年增三成"
    for fact in ("1,280 億元", "31%", "陳志遠"):
        assert fact in summary
    assert summary.count("1,280 億元") == 1  # the same sentence is not told twice
    assert sources == (f"中央快訊網 06-22 06:00 {server.url('/wire-chip.html')}；"
                       f"台灣財經時報 06-22 05:00 {server.url('/chip.html')}")
    assert second == "\n".join(["2. 央行利率維持不變", rates[0],
                                f"台灣財經時報 06-22 07:00 {server.url('/rates.html')}"])
    # Every page was read once.
    for path in ("/chip.html", "/wire-chip.html", "/rates.html"):
        assert len(server.requests_to(path)) == 1


async def test_a_page_read_for_one_job_is_not_fetched_again_for_another(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    text = ["The Federal Reserve held its benchmark rate at 4.25% on Monday, as expected."]
    server.feed("/fed.html", page("Fed holds", text), content_type=HTML_TYPE)
    url = server.feed("/f.xml", rss("Wire", [Entry("Fed holds", server.url("/fed.html"),
                                                   FIRST - HOUR)]))
    first_job = await daily_digest(engine, topic="finance", feeds=[url], language="en")
    assert text[0] in (await run_on(engine, first_job, 0)).output["digest"]

    second_job = await daily_digest(engine, topic="finance", feeds=[url], language="en")
    later = await run_on(engine, second_job, 1)

    assert text[0] in later.output["digest"]
    assert len(server.requests_to("/fed.html")) == 1


async def test_nothing_new_is_delivered_when_the_job_asks_for_it(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    url = server.feed("/hans.xml", rss("科技日报", [
        Entry("新款手机发布", "https://cn.example/p", FIRST - HOUR)]))
    job_id = await daily_digest(engine, topic="科技", feeds=[url], language="zh-Hans",
                                deliver_empty=True)
    assert titles(await run_on(engine, job_id, 0)) == ["新款手机发布"]

    quiet = await run_on(engine, job_id, 1)

    assert quiet.output["digest"] == "自上次摘要以来没有新的科技新闻。"
    assert quiet.output["new_items"] == 0
    assert quiet.output["deliver"] is True


async def test_validators_are_sent_and_a_304_is_nothing_new(make_engine: EngineFactory,
                                                            server: FeedServer) -> None:
    engine = await make_engine()
    body = rss("Wire", entries("wire", FIRST - HOUR, 3, "https://wire.example"))
    url = server.feed("/wire.xml", body, etag='"v1"',
                      last_modified="Mon, 22 Jun 2026 07:00:00 GMT")
    job_id = await daily_digest(engine, topic="world", feeds=[url], language="en")
    assert (await run_on(engine, job_id, 0)).output["new_items"] == 3

    unchanged = await run_on(engine, job_id, 1)

    sent = server.requests_to("/wire.xml")[-1].headers
    assert sent["If-None-Match"] == '"v1"'
    assert sent["If-Modified-Since"] == "Mon, 22 Jun 2026 07:00:00 GMT"
    assert unchanged.status is RunStatus.SUCCEEDED, unchanged.error
    assert unchanged.output["new_items"] == 0
    assert unchanged.output["problems"] == []
    assert unchanged.output["deliver"] is False

    # The feed changes: a full answer, read against what the last succeeded run saw.
    server.feed("/wire.xml", rss("Wire", [Entry("breaking", "https://wire.example/b",
                                                FIRST + DAY + 2 * HOUR)]), etag='"v2"')
    changed = await run_on(engine, job_id, 2)
    assert server.requests_to("/wire.xml")[-1].headers["If-None-Match"] == '"v1"'
    assert titles(changed) == ["breaking"]


async def test_dead_malformed_slow_and_huge_feeds_are_listed_while_the_others_count(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    good = server.feed("/good.xml", rss("Good", entries("good", FIRST - HOUR, 2,
                                                        "https://good.example")))
    broken = server.feed("/broken.xml", b"<rss version='2.0'><channel><title>x</item>")
    failing = server.status("/down.xml", 503)
    slow = server.drip("/slow.xml")
    huge = server.endless("/huge.xml")
    dead = "http://127.0.0.1:9/feed.xml"
    # A job timeout of 2 s gives each feed 1 s; the huge feed gets its own job, whose feeds
    # have the full 15 s, so only its size can stop it.
    job_id = await daily_digest(engine, topic="finance", language="en", timeout_seconds=2,
                                feeds=[good, broken, failing, slow, dead])
    huge_job = await daily_digest(engine, topic="finance", language="en", feeds=[huge, good])

    run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert titles(run) == ["good 0", "good 1"]
    problems = {p["url"]: p["reason"] for p in run.output["problems"]}
    assert set(problems) == {broken, failing, slow, dead}
    assert problems[failing] == "HTTP 503"
    assert problems[slow] == "no complete answer within 1s"
    assert problems[broken].startswith("not well-formed XML")
    host = server.url("/").split("/")[2]
    # Never read before: each named by its address, path included.
    assert run.output["digest"].endswith(
        f"Could not read 4 feeds: {host}/broken.xml (malformed); {host}/down.xml (HTTP 503); "
        f"{host}/slow.xml (timed out); 127.0.0.1:9/feed.xml (unreachable).")
    cut = await the_run(engine, huge_job, 0)
    assert cut.status is RunStatus.SUCCEEDED, cut.error
    assert titles(cut) == ["good 0", "good 1"]
    assert cut.output["problems"] == [{"url": huge, "reason": "larger than 2048 KiB"}]


async def test_when_every_feed_fails_the_attempt_fails_and_is_retried(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    url = server.status("/down.xml", 503)
    job_id = await daily_digest(engine, topic="finance", feeds=[url], language="en")

    run = await run_on(engine, job_id, 0)

    assert run.status is RunStatus.RETRYING
    assert run.error == f"no feed could be read ({url}: HTTP 503)"
    server.feed("/down.xml", rss("Back", [Entry("back up", "https://b.example/1",
                                                FIRST - HOUR)]))
    engine.clock.advance(3600)
    await engine.settle()
    run = await the_run(engine, job_id, 0)
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.attempt == 2
    assert titles(run) == ["back up"]


@pytest.fixture
def other_server() -> Iterator[FeedServer]:
    feeds = FeedServer(bind="127.0.0.2").start()
    yield feeds
    feeds.stop()


async def test_a_refused_feed_is_a_problem_at_fire_time_and_is_never_fetched(
        make_engine: EngineFactory, server: FeedServer, other_server: FeedServer) -> None:
    # Allowed when the jobs were created; the operator narrowed the allowlist since.
    engine = await make_engine("127.0.0.1,127.0.0.2", worker_allow="127.0.0.1")
    good = server.feed("/good.xml", rss("Good", [Entry("fine", "https://g.example/1",
                                                       FIRST - HOUR)]))
    hidden = other_server.feed("/internal.xml", rss("Internal", [
        Entry("secret", "https://internal.example/1", FIRST - HOUR)]))
    mixed = await daily_digest(engine, topic="finance", feeds=[good, hidden], language="en")
    only_hidden = await daily_digest(engine, topic="finance", feeds=[hidden], language="en")

    run = await run_on(engine, mixed, 0)

    assert run.status is RunStatus.SUCCEEDED, run.error
    assert titles(run) == ["fine"]
    [problem] = run.output["problems"]
    assert problem["url"] == hidden
    assert "loopback address" in problem["reason"]
    refused = await the_run(engine, only_hidden, 0)
    assert refused.status is RunStatus.FAILED, "retrying a refused address cannot help"
    assert refused.attempt == 1
    assert other_server.requests == []


class FailingOnce:
    """A digest writer whose ``fail_on``-th call fails (a model that was down, say)."""

    def __init__(self, fail_on: int) -> None:
        self.calls = 0
        self.fail_on = fail_on

    async def write(self, request: DigestRequest) -> Digest:
        self.calls += 1
        if self.calls == self.fail_on:
            raise ActionError("the summary could not be written")
        return await OfflineDigest().write(request)


async def test_an_attempt_that_read_the_feeds_but_failed_hides_nothing(
        make_engine: EngineFactory, server: FeedServer) -> None:
    engine = await make_engine()
    engine.rt.actions.register(NewsDigestAction(EgressGuard(["127.0.0.1"]),
                                                writer=FailingOnce(fail_on=2)))
    old = entries("old", FIRST - HOUR, 2, "https://o.example")
    url = server.feed("/f.xml", rss("F", old), etag='"v1"')
    job_id = await daily_digest(engine, topic="finance", feeds=[url], language="en")
    assert (await run_on(engine, job_id, 0)).output["new_items"] == 2
    server.feed("/f.xml", rss("F", [Entry("after", "https://o.example/after",
                                          FIRST + 3 * HOUR), *old]), etag='"v2"')

    # Tomorrow's first attempt reads the feed (and remembers it), then fails.
    failed = await run_on(engine, job_id, 1)
    assert failed.status is RunStatus.RETRYING
    assert server.requests_to("/f.xml")[-1].headers["If-None-Match"] == '"v1"'

    engine.clock.advance(3600)
    await engine.settle()

    retried = await the_run(engine, job_id, 1)
    assert retried.status is RunStatus.SUCCEEDED, retried.error
    assert retried.attempt == 2
    # Read again against what the last succeeded run saw, not what the failed attempt saw.
    assert server.requests_to("/f.xml")[-1].headers["If-None-Match"] == '"v1"'
    assert titles(retried) == ["after"]


async def test_the_digest_is_in_the_runs_of_the_rest_api(make_engine: EngineFactory,
                                                         server: FeedServer) -> None:
    engine = await make_engine()
    url = server.feed("/f.xml", rss("F", [Entry("headline", "https://f.example/1",
                                                FIRST - HOUR)]))
    transport = httpx.ASGITransport(app=create_app(engine.rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        created = await api.post("/v1/jobs", json={
            "name": "finance news every morning",
            "action": {"type": "news_digest", "topic": "finance", "feeds": [url]},
            "job_params": {"type": "recurring", "schedule": "0 8 * * *", "timezone": "UTC"}})
        assert created.status_code == 201, created.text
        job_id = created.json()["job_id"]
        engine.clock.set(FIRST + timedelta(seconds=1))
        await engine.settle()
        runs = (await api.get(f"/v1/jobs/{job_id}/runs")).json()["runs"]
    [run] = [r for r in runs if r["status"] == "SUCCEEDED"]
    assert run["output"]["new_items"] == 1
    assert run["output"]["digest"].startswith("Finance news: 1 new item from 1 source.")
