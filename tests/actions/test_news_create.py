"""A news_digest action is validated strictly at creation (422 problem+json, nothing stored);
topic words in English and Chinese name the three topics; the default feeds ship with the
package and a deployment's feeds file replaces them or stops the process with one line."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from onthedot.actions.catalog import LANGUAGES, TOPICS, FeedCatalog, normalise_topic
from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.errors import ConfigError
from onthedot.runtime import Runtime
from tests.actions.conftest import START
from tests.api.conftest import assert_problem
from tests.cli.test_cli import assert_one_line_error, run_cli

FEED = "https://news.example.com/rss.xml"


def _job(**action: Any) -> dict[str, Any]:
    return {"name": "digest", "action": {"type": "news_digest", **action},
            "job_params": {"type": "recurring", "schedule": "0 8 * * *"}}


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(Settings(database_url=f"sqlite:///{tmp_path}/news.db"),
                                 FakeClock(START))
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(rt: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(rt))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        yield c


@pytest.mark.parametrize(("action", "code", "field"), [
    ({}, "missing_field", "action.topic"),
    ({"topic": "sports"}, "unknown_topic", "action.topic"),
    ({"topic": 42}, "invalid_value", "action.topic"),
    ({"topic": "finance" * 20}, "invalid_value", "action.topic"),
    ({"feeds": []}, "invalid_value", "action.feeds"),
    ({"feeds": FEED}, "invalid_value", "action.feeds"),
    ({"feeds": [FEED] * 21}, "invalid_value", "action.feeds"),
    ({"feeds": ["ftp://news.example.com/rss"]}, "invalid_value", "action.feeds[0]"),
    ({"feeds": [FEED, "file:///etc/passwd"]}, "invalid_value", "action.feeds[1]"),
    ({"feeds": [FEED, None]}, "invalid_value", "action.feeds[1]"),
    ({"feeds": ["https://" + "a" * 2048 + ".example/"]}, "invalid_value", "action.feeds[0]"),
    ({"feeds": ["http://169.254.169.254/latest/meta-data/"]}, "egress_refused",
     "action.feeds[0]"),
    ({"feeds": [FEED, "http://localhost:8080/rss"]}, "egress_refused", "action.feeds[1]"),
    ({"feeds": ["http://[::ffff:10.0.0.1]/rss"]}, "egress_refused", "action.feeds[0]"),
    ({"topic": "finance", "language": "fr"}, "invalid_value", "action.language"),
    ({"topic": "finance", "language": "zh-TW"}, "invalid_value", "action.language"),
    ({"topic": "finance", "max_items": 0}, "invalid_value", "action.max_items"),
    ({"topic": "finance", "max_items": 51}, "invalid_value", "action.max_items"),
    ({"topic": "finance", "max_items": True}, "invalid_value", "action.max_items"),
    ({"topic": "finance", "max_items": 2.5}, "invalid_value", "action.max_items"),
    ({"topic": "finance", "max_items": "5"}, "invalid_value", "action.max_items"),
    ({"topic": "finance", "deliver_empty": "yes"}, "invalid_value", "action.deliver_empty"),
    ({"topic": "finance", "summary": "short"}, "unknown_field", "action.summary"),
])
async def test_a_bad_news_action_is_a_422_and_nothing_is_stored(
        client: httpx.AsyncClient, rt: Runtime, action: dict[str, Any], code: str,
        field: str) -> None:
    assert_problem(await client.post("/v1/jobs", json=_job(**action)), 422, code, field)
    assert (await rt.service.list_jobs("alice")).items == []


async def test_a_refused_feed_names_the_allowlist(client: httpx.AsyncClient) -> None:
    problem = assert_problem(await client.post("/v1/jobs", json=_job(
        feeds=["http://10.1.2.3/rss"])), 422, "egress_refused", "action.feeds[0]")
    assert "private address" in problem["detail"]
    assert "ONTHEDOT_EGRESS_ALLOW" in problem["expected"]


@pytest.mark.parametrize("action", [
    {"topic": "finance"},
    {"topic": "財經", "language": "zh-Hant", "max_items": 50, "deliver_empty": True},
    {"topic": "科技", "language": "zh-Hans", "max_items": 1},
    {"feeds": [FEED, "http://feeds.example.org/atom"]},
    {"topic": "world news", "feeds": [FEED], "language": "en"},
])
async def test_a_good_news_action_is_stored_as_given(client: httpx.AsyncClient,
                                                     action: dict[str, Any]) -> None:
    created = await client.post("/v1/jobs", json=_job(**action))
    assert created.status_code == 201, created.text
    assert created.json()["action"] == {"type": "news_digest", **action}


@pytest.mark.parametrize(("words", "topic"), [
    ("finance", "finance"), ("Finance News", "finance"), ("business", "finance"),
    ("財經", "finance"), ("财经", "finance"), ("金融", "finance"), ("財經新聞", "finance"),
    ("经济新闻", "finance"), ("tech", "technology"), ("Technology", "technology"),
    ("科技", "technology"), ("科技新聞", "technology"), ("world", "world"),
    ("international news", "world"), ("國際", "world"), ("国际新闻", "world"),
    ("ＷＯＲＬＤ", "world"), ("sports", None), ("", None), ("新聞", None),
])
def test_topic_words_name_the_three_topics(words: str, topic: str | None) -> None:
    assert normalise_topic(words) == topic


def test_the_shipped_feeds_cover_every_topic_and_language() -> None:
    catalog = FeedCatalog.shipped()
    for topic in TOPICS:
        for language in LANGUAGES:
            feeds = catalog.feeds_for(topic, language)
            assert feeds, (topic, language)
            assert all(url.startswith("https://") for url in feeds), feeds


def test_a_feeds_file_replaces_the_lists_it_names(tmp_path: Path) -> None:
    path = tmp_path / "feeds.json"
    path.write_text(json.dumps({"finance": {"zh-Hant": ["https://tw.example/rss"]}}))
    catalog = FeedCatalog.from_settings(Settings(news_feeds_file=str(path)))
    shipped = FeedCatalog.shipped()
    assert catalog.feeds_for("finance", "zh-Hant") == ("https://tw.example/rss",)
    assert catalog.feeds_for("finance", "en") == shipped.feeds_for("finance", "en")
    assert catalog.feeds_for("world", "zh-Hant") == shipped.feeds_for("world", "zh-Hant")


@pytest.mark.parametrize(("content", "fragment"), [
    ("not json", "cannot read"),
    ("[]", "not a JSON object"),
    ('{"sports": {"en": []}}', "unknown topic 'sports'"),
    ('{"finance": {"fr": []}}', "unknown language 'fr'"),
    ('{"finance": {"en": "https://x.example/rss"}}', "not a list"),
    ('{"finance": {"en": ["gopher://x.example/"]}}', "not an absolute http"),
])
def test_an_unusable_feeds_file_stops_the_process(tmp_path: Path, content: str,
                                                  fragment: str) -> None:
    path = tmp_path / "feeds.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        FeedCatalog.from_settings(Settings(news_feeds_file=str(path)))
    assert fragment in caught.value.message
    assert caught.value.field == "news_feeds_file"


def test_a_worker_with_an_unusable_feeds_file_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTHEDOT_NEWS_FEEDS_FILE", str(tmp_path / "missing.json"))
    code, _out, err = run_cli(capsys, "worker", "--database-url",
                              f"sqlite:///{tmp_path}/cli.db")
    assert_one_line_error(code, err, "cannot read the news feeds file", "missing.json")
