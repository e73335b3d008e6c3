"""``fetch_news`` against real feed servers on loopback: RSS and Atom in three languages, what
counts as new, conditional GETs, duplicates across feeds, and every way a feed can fail."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from onthedot.actions.catalog import FeedCatalog
from onthedot.actions.egress import EgressGuard, guarded_client
from onthedot.actions.feeds import (
    FEED_MAX_BYTES,
    LATE_ALLOWANCE,
    FeedLimits,
    NewsResult,
    fetch_news,
)
from onthedot.store.base import FeedState
from tests.actions.conftest import FakeDns
from tests.actions.newsfeeds import ATOM_TYPE, Entry, FeedServer, atom, rss

NOW = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture
def server() -> Iterator[FeedServer]:
    feeds = FeedServer().start()
    yield feeds
    feeds.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with guarded_client(EgressGuard(["127.0.0.1"])) as client:
        yield client


def hourly(prefix: str, count: int, site: str = "https://news.example") -> list[Entry]:
    """``count`` entries, the first published an hour before NOW, each an hour older."""
    return [Entry(f"{prefix} {i}", f"{site}/{prefix}/{i}", NOW - (i + 1) * HOUR)
            for i in range(count)]


def titles(result: NewsResult) -> list[str]:
    return [item.title for item in result.items]


async def test_rss_and_atom_in_three_languages_newest_first(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    biz = server.feed("/biz.xml", rss("Daily Biz", [
        Entry("Stocks <b>rally</b> &amp; bonds slip", "https://biz.example/a", NOW - 3 * HOUR),
        Entry("Oil steady", "https://biz.example/b", NOW - 1 * HOUR),
    ]))
    hant = server.feed("/hant.xml", atom("財經快訊", [
        Entry("台股收高 電子股領漲", "/news/1", NOW - 2 * HOUR, guid="urn:tw:1"),
    ]), content_type=ATOM_TYPE)
    hans = server.feed("/hans.xml", rss("财经新闻", [
        Entry("央行维持利率不变", "https://cn.example/1", NOW - 30 * timedelta(minutes=1)),
    ], language="zh-CN"))

    result = await fetch_news(http, feeds=[biz, hant, hans], now=NOW)

    assert result.problems == []
    assert [(i.title, i.source, i.link, i.published) for i in result.items] == [
        ("央行维持利率不变", "财经新闻", "https://cn.example/1", NOW - 30 * timedelta(minutes=1)),
        ("Oil steady", "Daily Biz", "https://biz.example/b", NOW - HOUR),
        # A relative Atom link resolves against the feed's address.
        ("台股收高 電子股領漲", "財經快訊", server.url("/news/1"), NOW - 2 * HOUR),
        # HTML in an RSS title is text for people, without its tags.
        ("Stocks rally & bonds slip", "Daily Biz", "https://biz.example/a", NOW - 3 * HOUR),
    ]
    assert result.items[0].to_dict() == {"title": "央行维持利率不变", "source": "财经新闻",
                                         "link": "https://cn.example/1",
                                         "published": "2026-06-22T07:30:00+00:00"}
    assert set(result.states) == {biz, hant, hans}


async def test_a_first_read_keeps_the_newest_max_items(server: FeedServer,
                                                       http: httpx.AsyncClient) -> None:
    url = server.feed("/f.xml", rss("F", list(reversed(hourly("item", 12)))))
    result = await fetch_news(http, feeds=[url], limits=FeedLimits(max_items=5), now=NOW)
    assert titles(result) == [f"item {i}" for i in range(5)]
    # The rest is new too: handed back to be named, not digested.
    assert [i.title for i in result.more] == [f"item {i}" for i in range(5, 12)]
    # Every item of the document is remembered, not only those shown.
    assert len(result.states[url].seen) == 12


async def test_without_state_items_since_the_given_instant_are_new(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    url = server.feed("/f.xml", rss("F", [*hourly("dated", 4),
                                          Entry("undated", "https://news.example/u")]))
    result = await fetch_news(http, feeds=[url], since=NOW - 2.5 * HOUR, now=NOW)
    # An undated item is new, but after every dated one: its date could not be read.
    assert titles(result) == ["dated 0", "dated 1", "undated"]


async def test_with_state_only_unseen_items_count_late_listed_ones_included(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    first = [*hourly("old", 3), Entry("undated old", "https://news.example/uo")]
    url = server.feed("/f.xml", rss("F", first))
    before = await fetch_news(http, feeds=[url], now=NOW)
    state = before.states[url]

    later = NOW + 24 * HOUR
    server.feed("/f.xml", rss("F", [
        Entry("fresh", "https://news.example/fresh", later - HOUR),
        # Dated before the last read, but listed only now: feeds do that.
        Entry("listed late", "https://news.example/late", NOW - 2 * HOUR),
        Entry("too old to be news", "https://news.example/ancient",
              NOW - LATE_ALLOWANCE - HOUR),
        Entry("undated new", "https://news.example/un"),
        *first,
    ]))
    result = await fetch_news(http, feeds=[url], states={url: state}, since=NOW, now=later)

    assert titles(result) == ["fresh", "listed late", "undated new"]
    assert result.states[url].fetched_at == later
    assert set(state.seen) < set(result.states[url].seen)


async def test_validators_are_sent_back_and_304_means_nothing_new(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    etag, modified = '"v1"', "Mon, 22 Jun 2026 07:00:00 GMT"
    tagged = server.feed("/etag.xml", rss("E", hourly("e", 2)), etag=etag)
    dated = server.feed("/modified.xml", rss("M", hourly("m", 2)), last_modified=modified)
    first = await fetch_news(http, feeds=[tagged, dated], now=NOW)
    assert first.states[tagged].etag == etag
    assert first.states[dated].last_modified == modified
    for path in ("/etag.xml", "/modified.xml"):
        sent = server.requests_to(path)[0].headers
        assert "If-None-Match" not in sent
        assert "If-Modified-Since" not in sent

    later = NOW + HOUR
    again = await fetch_news(http, feeds=[tagged, dated], states=first.states, now=later)

    assert server.requests_to("/etag.xml")[1].headers["If-None-Match"] == etag
    assert server.requests_to("/modified.xml")[1].headers["If-Modified-Since"] == modified
    assert again.items == []
    assert again.problems == []
    # Unchanged feeds keep what they remembered, confirmed as of this read.
    assert again.states[tagged] == replace(first.states[tagged], fetched_at=later)
    assert again.states[dated] == replace(first.states[dated], fetched_at=later)


async def test_the_same_story_in_two_feeds_is_listed_once(server: FeedServer,
                                                          http: httpx.AsyncClient) -> None:
    one = server.feed("/one.xml", rss("One", [
        Entry("Central bank holds rates steady", "https://www.wire.example/story/1/",
              NOW - HOUR),
        Entry("Markets close higher on tech rally", "https://one.example/m", NOW - 3 * HOUR),
        Entry("央行宣布維持利率不變", "https://one.example/zh", NOW - 4 * HOUR),
    ]))
    two = server.feed("/two.xml", rss("Two", [
        # The same link, spelled with tracking parameters and without the trailing slash.
        Entry("Rates unchanged at the central bank",
              "https://wire.example/story/1?utm_source=rss&utm_medium=feed", NOW - 2 * HOUR),
        # The same headline, re-titled a little, on another site.
        Entry("Markets close higher on tech rally!", "https://two.example/m",
              NOW - 2.5 * HOUR),
        Entry("央行宣布維持利率不變。", "https://two.example/zh", NOW - 5 * HOUR),
        Entry("An unrelated story", "https://two.example/other", NOW - 6 * HOUR),
    ]))
    result = await fetch_news(http, feeds=[one, two], now=NOW)
    assert titles(result) == ["Central bank holds rates steady",
                              "Markets close higher on tech rally!",
                              "央行宣布維持利率不變", "An unrelated story"]
    # Told once, with the other feed's sighting attached.
    assert [[(a.source, a.link) for a in i.also] for i in result.items] == [
        [("Two", "https://wire.example/story/1?utm_source=rss&utm_medium=feed")],
        [("One", "https://one.example/m")],
        [("Two", "https://two.example/zh")],
        []]
    assert result.items[0].to_dict()["also"] == [
        {"source": "Two", "link": "https://wire.example/story/1?utm_source=rss&utm_medium=feed"}]
    assert "also" not in result.items[3].to_dict()


async def test_undated_items_come_after_dated_ones_across_feeds(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    broken = server.feed("/broken.xml", rss("Broken", [
        Entry("no date 1", "https://b.example/1"), Entry("no date 2", "https://b.example/2")]))
    dated = server.feed("/dated.xml", rss("Dated", hourly("dated", 3)))
    result = await fetch_news(http, feeds=[broken, dated], now=NOW,
                              limits=FeedLimits(max_items=4))
    assert titles(result) == ["dated 0", "dated 1", "dated 2", "no date 1"]
    assert [i.title for i in result.more] == ["no date 2"]


async def test_a_failed_feed_is_named_by_the_title_it_had(server: FeedServer,
                                                          http: httpx.AsyncClient) -> None:
    url = server.feed("/wire.xml", rss("Evening Wire", hourly("w", 1)))
    untitled = server.feed("/untitled.xml", rss("", hourly("u", 1)))
    known: dict[str, str] = {}
    first = await fetch_news(http, feeds=[url, untitled], now=NOW, titles=known)
    # An untitled feed's items are named after the site it links to.
    assert {i.source for i in first.items} == {"Evening Wire", "example.org"}
    assert known == {url: "Evening Wire"}

    server.status("/wire.xml", 503)
    server.status("/never.xml", 503)
    later = await fetch_news(http, feeds=[url, server.url("/never.xml")], now=NOW,
                             titles=known)
    assert [(p.label, p.reason) for p in later.problems] == [
        ("Evening Wire", "HTTP 503"),
        # Never read: its address, path included, not only the host.
        (server.url("/never.xml").removeprefix("http://"), "HTTP 503")]


async def test_bad_feeds_are_problems_and_the_good_one_still_counts(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    good = server.feed("/good.xml", rss("Good", hourly("good", 2)))
    broken = server.feed("/broken.xml", b'<?xml version="1.0"?><rss version="2.0"><channel>'
                                        b"<title>Broken</channel></rss>")
    page = server.feed("/page.html", b"<html><body><h1>Hello</h1></body></html>",
                       content_type="text/html")
    failing = server.status("/500.xml", 500)
    gone = server.status("/gone.xml", 404)
    slow = server.drip("/slow.xml")
    dead = "http://127.0.0.1:9/feed.xml"  # the discard port: nothing listens there
    feeds = [good, broken, page, failing, gone, slow, dead]

    started = time.monotonic()
    result = await fetch_news(http, feeds=feeds, limits=FeedLimits(timeout_seconds=1.0),
                              now=NOW)
    took = time.monotonic() - started

    assert titles(result) == ["good 0", "good 1"]
    assert not result.all_failed
    problems = {p.url: (p.kind, p.fatal) for p in result.problems}
    assert problems == {broken: ("malformed", True), page: ("not_a_feed", True),
                        failing: ("http", True), gone: ("http", True), slow: ("timeout", True),
                        dead: ("unreachable", True)}
    reasons = {p.url: p.reason for p in result.problems}
    assert reasons[failing] == "HTTP 500"
    assert reasons[slow] == "no complete answer within 1s"
    # All at once: the slow feed's timeout is the whole wait, not one of several.
    assert took < 5, f"took {took:.1f}s"
    # A failed feed keeps the state it had: nothing is forgotten because of one bad morning.
    assert set(result.states) == {good}
    kept = FeedState(feed_url=failing, fetched_at=NOW - HOUR, etag='"x"', seen=("k",))
    again = await fetch_news(http, feeds=[failing], states={failing: kept}, now=NOW)
    assert again.states == {failing: kept}


async def test_a_feed_past_the_size_cap_is_cut_off_and_reported(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    huge = server.endless("/huge.xml")
    good = server.feed("/good.xml", rss("Good", hourly("good", 1)))
    result = await fetch_news(http, feeds=[huge, good], now=NOW)
    assert titles(result) == ["good 0"]
    assert [(p.url, p.kind, p.reason) for p in result.problems] == [
        (huge, "too_large", f"larger than {FEED_MAX_BYTES // 1024} KiB")]
    # The connection was closed near the cap, not read to the end.
    assert server.bytes_sent < 16 * FEED_MAX_BYTES, f"{server.bytes_sent:,} bytes sent"


async def test_malformed_xml_that_still_has_items_is_read_and_reported(
        server: FeedServer, http: httpx.AsyncClient) -> None:
    url = server.feed("/sloppy.xml", b'<?xml version="1.0"?><rss version="2.0"><channel>'
                                     b"<title>Sloppy</title><item><title>Still here</title>"
                                     b"<link>https://sloppy.example/1</link></channel></rss>")
    result = await fetch_news(http, feeds=[url], now=NOW)
    assert titles(result) == ["Still here"]
    assert [(p.kind, p.fatal) for p in result.problems] == [("malformed", False)]
    assert not result.all_failed


async def test_every_feed_failing_is_all_failed(server: FeedServer,
                                                http: httpx.AsyncClient) -> None:
    result = await fetch_news(http, feeds=[server.status("/a", 503), server.status("/b", 500)],
                              now=NOW)
    assert result.all_failed
    assert result.items == []
    assert len(result.problems) == 2


async def test_unsafe_links_are_not_kept(server: FeedServer, http: httpx.AsyncClient) -> None:
    url = server.feed("/f.xml", rss("F", [Entry("click me", "javascript:alert(1)", NOW - HOUR,
                                                guid="g-1")]))
    result = await fetch_news(http, feeds=[url], now=NOW)
    assert [(i.title, i.link) for i in result.items] == [("click me", "")]


# --- refused destinations --------------------------------------------------------------------
async def test_a_literal_refused_host_is_a_problem_and_nothing_is_sent(
        http: httpx.AsyncClient) -> None:
    guard = EgressGuard(["127.0.0.1"])
    result = await fetch_news(http, feeds=["http://10.1.2.3/feed", "http://[::1]:9/feed"],
                              guard=guard, now=NOW)
    assert [(p.kind, p.reason) for p in result.problems] == [
        ("refused", "10.1.2.3 is a private address, which onthedot does not call"),
        ("refused", "::1 is a loopback address, which onthedot does not call"),
    ]
    assert result.all_failed


@pytest.fixture
def other_server() -> Iterator[FeedServer]:
    """On 127.0.0.2: loopback, but not allowlisted by the tests' guard."""
    feeds = FeedServer(bind="127.0.0.2").start()
    yield feeds
    feeds.stop()


async def test_a_name_resolving_to_a_refused_address_is_not_fetched(
        other_server: FeedServer) -> None:
    hidden = other_server.feed("/secret.xml", rss("Secret", hourly("secret", 1)))
    dns = FakeDns({"feeds.test": ["127.0.0.2"]})
    async with guarded_client(EgressGuard(["127.0.0.1"], resolve=dns)) as client:
        result = await fetch_news(client, feeds=[hidden.replace("127.0.0.2", "feeds.test")],
                                  now=NOW)
    assert [p.kind for p in result.problems] == ["refused"]
    assert dns.asked == ["feeds.test"]
    assert other_server.requests == []


async def test_a_redirect_to_a_refused_address_is_refused(
        server: FeedServer, other_server: FeedServer, http: httpx.AsyncClient) -> None:
    hidden = other_server.feed("/secret.xml", rss("Secret", hourly("secret", 1)))
    bounce = server.redirect("/bounce.xml", hidden)
    result = await fetch_news(http, feeds=[bounce], now=NOW)
    assert [p.kind for p in result.problems] == ["refused"]
    assert len(server.requests_to("/bounce.xml")) == 1
    assert other_server.requests == []


# --- topics ----------------------------------------------------------------------------------
async def test_a_topic_reads_its_feeds_in_the_language_asked(server: FeedServer,
                                                             http: httpx.AsyncClient) -> None:
    urls = {lang: server.feed(f"/finance-{lang}.xml", rss(lang, hourly(lang, 1)))
            for lang in ("en", "zh-Hant", "zh-Hans")}
    catalog = FeedCatalog({"finance": {lang: (url,) for lang, url in urls.items()},
                           "world": {"en": (urls["en"],)}})

    hant = await fetch_news(http, topic="finance", language="zh-Hant", catalog=catalog, now=NOW)
    world = await fetch_news(http, topic="world", language="zh-Hans", catalog=catalog, now=NOW)

    assert hant.feeds == (urls["zh-Hant"],)
    assert titles(hant) == ["zh-Hant 0"]
    # No world feeds in Simplified Chinese: English ones rather than none.
    assert world.feeds == (urls["en"],)
