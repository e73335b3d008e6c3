"""``ArticleReader`` against real page servers on loopback: the main text of a page, without its
menus and footer; pages remembered by URL across runs (and forgotten after a while); and every
bound: refused addresses never fetched, a page past the size cap, a page that is not HTML, a
page that drips past the run's budget."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from onthedot.actions.articles import (
    FAILURE_KEPT_SECONDS,
    PAGE_MAX_BYTES,
    TEXT_KEPT_SECONDS,
    ArticleReader,
    excerpt,
    extract_text,
)
from onthedot.actions.egress import EgressGuard, guarded_client
from onthedot.actions.feeds import NewsItem
from tests.actions.newsfeeds import HTML_TYPE, FeedServer, page

NOW = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
STORY = ["The Federal Reserve held its benchmark rate at 4.25% on Monday.",
         "Chair Maria Delgado said a cut in September remains possible."]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server() -> Iterator[FeedServer]:
    pages = FeedServer().start()
    yield pages
    pages.stop()


@pytest.fixture
def other_server() -> Iterator[FeedServer]:
    """On 127.0.0.2: loopback, but not allowlisted by the tests' guard."""
    pages = FeedServer(bind="127.0.0.2").start()
    yield pages
    pages.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with guarded_client(EgressGuard(["127.0.0.1"])) as client:
        yield client


def item(link: str) -> NewsItem:
    return NewsItem(title="t", link=link, source="s", published=NOW, feed_url="f", key=link)


async def test_the_main_text_is_read_and_remembered_across_runs(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    url = server.feed("/fed.html", page("Fed holds", STORY), content_type=HTML_TYPE)
    gone = server.status("/gone.html", 404)
    clock = Clock()
    reader = ArticleReader(EgressGuard(["127.0.0.1"]), clock=clock)

    first = await reader.read(http, [item(url), item(gone), item("")], budget_seconds=5)

    assert set(first) == {url, gone}  # an item without a link has no page
    text = first[url].text
    assert STORY[0] in text
    assert STORY[1] in text
    assert "All rights reserved" not in text  # the footer
    assert "summer trip" not in text  # the related links
    assert first[gone].text == ""
    assert first[gone].problem == "HTTP 404"

    # Another job, the same links, within the time pages are kept: nothing is fetched again.
    again = await reader.read(http, [item(url), item(gone)], budget_seconds=5)
    assert again == first
    assert len(server.requests_to("/fed.html")) == 1
    assert len(server.requests_to("/gone.html")) == 1

    # A failure is tried again sooner than a text is.
    clock.now += FAILURE_KEPT_SECONDS + 1
    await reader.read(http, [item(url), item(gone)], budget_seconds=5)
    assert len(server.requests_to("/fed.html")) == 1
    assert len(server.requests_to("/gone.html")) == 2
    clock.now += TEXT_KEPT_SECONDS
    await reader.read(http, [item(url)], budget_seconds=5)
    assert len(server.requests_to("/fed.html")) == 2


async def test_refused_addresses_are_never_fetched(
        server: FeedServer, other_server: FeedServer, http: httpx.AsyncClient) -> None:
    hidden = other_server.feed("/secret.html", page("Secret", STORY), content_type=HTML_TYPE)
    bounce = server.redirect("/bounce.html", hidden)
    reader = ArticleReader(EgressGuard(["127.0.0.1"]))

    read = await reader.read(http, [item("http://169.254.169.254/latest/meta-data/"),
                                    item(hidden), item(bounce)], budget_seconds=5)

    assert read["http://169.254.169.254/latest/meta-data/"].problem == (
        "169.254.169.254 is a cloud metadata address, which onthedot does not call")
    assert "loopback address" in (read[hidden].problem or "")
    assert "loopback address" in (read[bounce].problem or "")
    assert all(a.text == "" for a in read.values())
    assert other_server.requests == []


async def test_pages_past_the_cap_not_html_or_too_slow_give_no_text(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    huge = server.endless("/huge.html", HTML_TYPE)
    feed = server.feed("/feed.xml", b"<rss/>")  # served as RSS, not a web page
    slow = server.drip("/slow.html", HTML_TYPE)
    good = server.feed("/good.html", page("Fed holds", STORY), content_type=HTML_TYPE)
    reader = ArticleReader(EgressGuard(["127.0.0.1"]))

    started = time.monotonic()
    read = await reader.read(http, [item(huge), item(feed), item(slow), item(good)],
                             budget_seconds=1.0)
    took = time.monotonic() - started

    assert read[huge].problem == f"larger than {PAGE_MAX_BYTES // 1024} KiB"
    assert server.bytes_sent < 16 * PAGE_MAX_BYTES, f"{server.bytes_sent:,} bytes sent"
    assert read[feed].problem == "not a web page (application/rss+xml)"
    # Its own timeout or the run's budget, whichever fires first: both are 1 s here.
    assert read[slow].problem in ("no complete answer within 1s", "not read within the run's 1s")
    assert STORY[0] in read[good].text
    assert took < 5, f"took {took:.1f}s"


def test_extraction_reads_the_charset_of_the_page_itself() -> None:
    sentence = "人民银行宣布下调存款准备金率0.5个百分点，预计释放长期资金约1万亿元。"
    gbk = ("<html><head><meta charset='gbk'></head><body><article><p>"
           f"{sentence}</p></article></body></html>").encode("gbk")
    assert extract_text(gbk) == sentence
    assert extract_text(b"") == ""


def test_an_excerpt_ends_at_a_sentence() -> None:
    text = "First sentence is here. Second sentence follows it. Third one is cut."
    assert excerpt(text, 1000) == text
    assert excerpt(text, 55) == "First sentence is here. Second sentence follows it."
    assert excerpt("甲乙丙丁戊。己庚辛壬癸。子丑寅卯辰。", 14) == "甲乙丙丁戊。己庚辛壬癸。"
    assert excerpt("a" * 50, 10) == "a" * 9 + "…"


async def test_the_least_recently_used_page_is_forgotten_past_the_capacity(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    a = server.feed("/a.html", page("A", STORY), content_type=HTML_TYPE)
    b = server.feed("/b.html", page("B", STORY), content_type=HTML_TYPE)
    reader = ArticleReader(EgressGuard(["127.0.0.1"]), capacity=1)
    for link in (a, b, b, a):
        await reader.read(http, [item(link)], budget_seconds=5)
    assert len(server.requests_to("/a.html")) == 2
    assert len(server.requests_to("/b.html")) == 1
