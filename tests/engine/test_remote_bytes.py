"""Answers a store cannot hold as they are: a webhook's JSON with a lone surrogate, an error
answer or a feed with NUL characters. Each run is recorded after ONE attempt with the status it
deserves (nothing lost, nothing run again), on every backend pair, against real loopback
servers; what could not be stored is replaced by U+FFFD."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from onthedot.domain.delivery import DeliveryStatus
from onthedot.domain.history import AttemptStatus
from onthedot.domain.jsonvalue import REPLACEMENT, storable
from onthedot.domain.models import JobParams, JobRun, RetryPolicy, RunStatus
from tests.actions.newsfeeds import Entry, FeedServer, rss
from tests.actions.servers import ScriptedServer, answer
from tests.engine.conftest import START, Engine

NOW = JobParams(type="immediate")
# A lone surrogate as JSON writes it: valid JSON, unencodable UTF-8 once decoded.
SURROGATE_JSON = b'{"text": "a\\ud800b", "\\udfffkey": ["\\u0000", {"deep": "x\\ud83d"}]}'


@pytest.fixture
def hooks() -> Iterator[ScriptedServer]:
    server = ScriptedServer({
        "/surrogate": answer(200, SURROGATE_JSON, "application/json"),
        "/nul-error": answer(500, b"upstream \x00 broke \x00\x00 here"),
        "/surrogate-error": answer(502, b'{"error": "\\ud800"}', "application/json"),
        "/nul-text": answer(200, b"plain \x00 text", "text/plain"),
        "/nul-notify": answer(400, b"refused \x00 here", "text/plain"),
    }).start()
    yield server
    server.stop()


async def fire(engine: Engine, url: str, max_attempts: int = 1) -> JobRun:
    view = await engine.create(NOW, {"type": "webhook", "url": url},
                               retry_policy=RetryPolicy(max_attempts=max_attempts,
                                                        backoff_seconds=60))
    await engine.settle()
    [run] = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    return run


async def assert_one_attempt(engine: Engine, run: JobRun, status: AttemptStatus) -> None:
    _, attempts = await engine.rt.service.get_run_attempts("alice", run.run_id)
    assert [(a.attempt, a.status) for a in attempts] == [(1, status)], attempts


def assert_storable(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False, default=str)
    text.encode("utf-8")  # raises on a lone surrogate
    assert "\x00" not in text


async def test_a_json_answer_with_lone_surrogates_succeeds_once(shape: Engine,
                                                                hooks: ScriptedServer) -> None:
    run = await fire(shape, hooks.url("/surrogate"), max_attempts=3)
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.attempt == 1
    assert run.output == {"status_code": 200, "body": {
        "text": f"a{REPLACEMENT}b",
        f"{REPLACEMENT}key": [REPLACEMENT, {"deep": f"x{REPLACEMENT}"}]}}
    await assert_one_attempt(shape, run, AttemptStatus.SUCCEEDED)
    inbox = (await shape.rt.service.list_inbox("alice")).items
    assert len(inbox) == 1
    assert_storable([item.__dict__ for item in inbox])


async def test_a_text_answer_with_nul_succeeds_once(shape: Engine, hooks: ScriptedServer) -> None:
    run = await fire(shape, hooks.url("/nul-text"), max_attempts=3)
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.output == {"status_code": 200, "body": f"plain {REPLACEMENT} text"}
    await assert_one_attempt(shape, run, AttemptStatus.SUCCEEDED)


@pytest.mark.parametrize("path", ["/nul-error", "/surrogate-error"])
async def test_an_error_answer_that_cannot_be_stored_fails_once(
        shape: Engine, hooks: ScriptedServer, path: str) -> None:
    run = await fire(shape, hooks.url(path))
    assert run.status is RunStatus.FAILED, run
    assert run.attempt == 1
    assert run.dead_lettered
    assert (run.error or "").startswith("webhook answered HTTP 5")
    assert_storable(run.error)
    await assert_one_attempt(shape, run, AttemptStatus.FAILED)
    letters = (await shape.rt.service.list_dead_letters("alice")).items
    assert [r.run_id for r in letters] == [run.run_id]


async def test_an_error_that_cannot_be_stored_is_retried_as_recorded(
        shape: Engine, hooks: ScriptedServer) -> None:
    run = await fire(shape, hooks.url("/nul-error"), max_attempts=2)
    assert run.status is RunStatus.RETRYING, run
    assert run.attempt == 1
    assert REPLACEMENT in (run.error or "")
    await assert_one_attempt(shape, run, AttemptStatus.FAILED)


async def test_a_feed_with_nul_in_its_titles_digests_once(shape: Engine) -> None:
    feeds = FeedServer().start()
    try:
        published = START - timedelta(hours=1)
        doc = rss("Daily \x00 Biz", [Entry("rates \x00 up", "https://biz.example/1", published),
                                    Entry("bonds", "https://biz.example/2\x00", published)])
        doc = doc.replace(b"</title><link>https://biz.example/1",
                          b"</title><description>sum \x00 mary</description>"
                          b"<link>https://biz.example/1")
        url = feeds.feed("/biz.xml", doc)
        view = await shape.create(NOW, {"type": "news_digest", "topic": "finance",
                                        "feeds": [url], "language": "en"},
                                  retry_policy=RetryPolicy(max_attempts=3, backoff_seconds=60))
        await shape.settle()
        [run] = (await shape.rt.service.list_runs("alice", view.job.job_id)).items
    finally:
        feeds.stop()
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.attempt == 1
    assert_storable(run.output)
    titles = [item["title"] for item in run.output["items"]]
    assert f"rates {REPLACEMENT} up" in titles
    await assert_one_attempt(shape, run, AttemptStatus.SUCCEEDED)


async def test_a_notify_webhook_error_that_cannot_be_stored_is_recorded(
        shape: Engine, hooks: ScriptedServer) -> None:
    view = await shape.create(NOW, {"type": "message", "text": "hi"},
                              notify=[{"channel": "webhook", "url": hooks.url("/nul-notify")}])
    await shape.settle()
    [run] = (await shape.rt.service.list_runs("alice", view.job.job_id)).items
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.attempt == 1
    [delivery] = run.deliveries
    assert delivery.status is DeliveryStatus.FAILED
    assert (delivery.error or "").startswith("the webhook answered HTTP 400")
    assert REPLACEMENT in (delivery.error or "")
    await assert_one_attempt(shape, run, AttemptStatus.SUCCEEDED)


def test_storable_replaces_only_what_cannot_be_stored() -> None:
    clean = {"a": [1, 2.5, None, True, "ok"], "b": {"c": "d"}}
    assert storable(clean) is clean  # nothing copied when nothing changes
    deep: object = "\x00"
    for _ in range(10_000):  # deeper than any recursion limit
        deep = [deep]
    walked = storable(deep)
    for _ in range(10_000):
        assert isinstance(walked, list)
        walked = walked[0]
    assert walked == REPLACEMENT
    assert storable(("\ud800", 1)) == [REPLACEMENT, 1]
