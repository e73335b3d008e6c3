"""Reading RSS and Atom feeds, and telling which of their items are new.

``fetch_news`` is the one entry point, used by the ``news_digest`` action and meant as a model's
tool: it reads every feed of a topic (or the given feeds) at once, each through the egress
guard's HTTP client, with a per-feed timeout and size cap, parses it with feedparser, and keeps
the items that are new, newest first, deduplicated across feeds.

Per feed::

    literal host refused by the guard? -------------------------> problem (nothing sent)
    GET (If-None-Match / If-Modified-Since from the last state)
      |-- 304 ----------------------------------------------------> unchanged: nothing new
      |-- refused on connect or redirect, DNS failure, timeout,
      |   HTTP error, larger than the cap, not a feed -------------> problem (state kept)
      v
    parse (feedparser, in a thread) -> items
      v
    new = not among the keys seen last time, and published after the last read
          (less LATE_ALLOWANCE: feeds often list an item hours after its date);
          undated items are new the first time their key is seen;
          no state for the feed: published after ``since`` (all, on a first run)

A feed that is not well-formed XML but still yields items is read and also reported.
"""

from __future__ import annotations

import asyncio
import calendar
import hashlib
import html
import io
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import feedparser
import httpx

from onthedot import __version__
from onthedot.actions.catalog import FeedCatalog, Topic, feed_host, feed_url_problem
from onthedot.actions.egress import EgressGuard, read_capped
from onthedot.domain.errors import EgressRefusedError, OnTheDotError
from onthedot.nl.parts import Language
from onthedot.store.base import FeedState

# A feed may be much larger than a webhook answer: full-text feeds of busy outlets run to a few
# hundred KiB. Past this (after decompression) the feed is reported and not parsed.
FEED_MAX_BYTES = 2 * 1024 * 1024
FEED_TIMEOUT_SECONDS = 15.0  # per feed, the whole exchange: connect, answer, body
DEFAULT_MAX_ITEMS = 10
MAX_ITEMS = 50  # in one digest
MAX_ENTRIES_PER_FEED = 200  # read from one document, in document order
SEEN_KEYS_PER_FEED = 500  # remembered between runs; a feed lists far fewer items than this
LATE_ALLOWANCE = timedelta(hours=24)
MAX_TITLE_CHARS = 300
MAX_SOURCE_CHARS = 100
SIMILAR_TITLES = 0.8  # Jaccard similarity of character bigrams: the same story, re-titled
USER_AGENT = f"onthedot/{__version__} (news digest)"
ACCEPT = ("application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.9, "
          "*/*;q=0.1")
_TRACKING_PARAMS = re.compile(r"^(utm_\w+|fbclid|gclid|mc_cid|mc_eid)$")
_TAG = re.compile(r"<[^>]*>")


@dataclass(frozen=True)
class NewsItem:
    title: str
    link: str  # http(s), or "" when the entry had none
    source: str  # the feed's title, or its host
    published: datetime | None
    feed_url: str
    key: str  # stable across runs: a hash of the entry's id, link or title

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "link": self.link, "source": self.source,
                "published": None if self.published is None else self.published.isoformat()}


@dataclass(frozen=True)
class FeedProblem:
    url: str
    kind: str  # http | timeout | too_large | malformed | not_a_feed | refused | unreachable
    reason: str  # one short English line
    fatal: bool = True  # False: the feed was read anyway (malformed XML that still had items)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "reason": self.reason}


@dataclass(frozen=True)
class FeedLimits:
    max_items: int = DEFAULT_MAX_ITEMS
    timeout_seconds: float = FEED_TIMEOUT_SECONDS
    max_bytes: int = FEED_MAX_BYTES


@dataclass(frozen=True)
class NewsResult:
    items: list[NewsItem]  # new, newest first, deduplicated, at most max_items
    problems: list[FeedProblem]
    feeds: tuple[str, ...]  # every feed asked
    # What to remember of each feed for the next run: a fresh state for each feed that
    # answered, the previous one for each that did not.
    states: dict[str, FeedState] = field(default_factory=dict)

    @property
    def all_failed(self) -> bool:
        failed = {p.url for p in self.problems if p.fatal}
        return bool(self.feeds) and failed >= set(self.feeds)


async def fetch_news(http: httpx.AsyncClient, *, topic: Topic | None = None,
                     language: Language = "en", feeds: Sequence[str] | None = None,
                     since: datetime | None = None, limits: FeedLimits | None = None,
                     states: Mapping[str, FeedState] | None = None,
                     now: datetime | None = None, guard: EgressGuard | None = None,
                     catalog: FeedCatalog | None = None) -> NewsResult:
    """The new items of ``feeds`` (or of the topic's feeds in ``language``) and the problems.

    ``http`` must be the egress guard's client (``guarded_client``); ``guard`` (optional)
    refuses literal hosts before anything is sent. ``states`` are what the previous run
    remembered per feed (validators, keys seen); without one, items published after
    ``since`` are new, and without ``since`` every item is (the newest ``max_items`` kept).
    Raises nothing for a feed that fails: see ``NewsResult.all_failed``."""
    limits = limits or FeedLimits()
    now = now or datetime.now(UTC)
    states = states or {}
    urls = _feed_list(topic, language, feeds, catalog)
    reads = await asyncio.gather(*(
        _read_feed(http, url, states.get(url), limits, guard) for url in urls))
    new: list[NewsItem] = []
    problems: list[FeedProblem] = []
    remembered: dict[str, FeedState] = {}
    for url, read in zip(urls, reads, strict=True):
        prior = states.get(url)
        problems.extend(read.problems)
        if read.unchanged:
            if prior is not None:
                remembered[url] = replace(prior, fetched_at=now)
            continue
        if read.items is None:
            if prior is not None:
                remembered[url] = prior
            continue
        new.extend(i for i in read.items if _is_new(i, prior, since))
        remembered[url] = FeedState(
            feed_url=url, fetched_at=now, etag=read.etag, last_modified=read.last_modified,
            seen=_seen_keys(read.items, prior))
    items = _newest_distinct(new, now, limits.max_items)
    return NewsResult(items=items, problems=problems, feeds=urls, states=remembered)


def _feed_list(topic: Topic | None, language: Language, feeds: Sequence[str] | None,
               catalog: FeedCatalog | None) -> tuple[str, ...]:
    if feeds:
        return tuple(dict.fromkeys(feeds))
    if topic is None:
        return ()
    return (catalog or FeedCatalog.shipped()).feeds_for(topic, language)


# --- one feed ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _FeedRead:
    items: list[NewsItem] | None = None  # None: nothing usable was read
    unchanged: bool = False  # answered 304 Not Modified
    etag: str | None = None
    last_modified: str | None = None
    problems: tuple[FeedProblem, ...] = ()


async def _read_feed(http: httpx.AsyncClient, url: str, prior: FeedState | None,
                     limits: FeedLimits, guard: EgressGuard | None) -> _FeedRead:
    def failed(kind: str, reason: str) -> _FeedRead:
        return _FeedRead(problems=(FeedProblem(url, kind, reason),))

    shape = feed_url_problem(url)
    if shape is not None:
        return failed("unreachable", f"the address {shape}")
    host = feed_host(url)
    refusal = guard.refusal_without_lookup(host) if guard is not None else None
    if refusal is not None:
        return failed("refused", f"{host} is a {refusal} address, which onthedot does not call")
    try:
        async with asyncio.timeout(limits.timeout_seconds):
            return await _get(http, url, prior, limits)
    except (TimeoutError, httpx.TimeoutException):
        return failed("timeout", f"no complete answer within {limits.timeout_seconds:g}s")
    except EgressRefusedError as exc:
        return failed("refused", exc.message)
    except OnTheDotError as exc:  # the name did not resolve
        return failed("unreachable", exc.message)
    except httpx.HTTPError as exc:
        return failed("unreachable", _short(f"{type(exc).__name__}: {exc}"))


async def _get(http: httpx.AsyncClient, url: str, prior: FeedState | None,
               limits: FeedLimits) -> _FeedRead:
    headers = {"Accept": ACCEPT, "User-Agent": USER_AGENT}
    if prior is not None and prior.etag:
        headers["If-None-Match"] = prior.etag
    if prior is not None and prior.last_modified:
        headers["If-Modified-Since"] = prior.last_modified
    async with http.stream("GET", url, headers=headers, timeout=limits.timeout_seconds) as answer:
        if answer.status_code == 304:
            return _FeedRead(unchanged=True)
        if not 200 <= answer.status_code < 300:
            return _FeedRead(problems=(FeedProblem(url, "http", f"HTTP {answer.status_code}"),))
        # Leaving the block closes the connection without reading past the cap.
        body = await read_capped(answer, limits.max_bytes)
    if not body.complete:
        return _FeedRead(problems=(FeedProblem(
            url, "too_large", f"larger than {limits.max_bytes // 1024} KiB"),))
    try:
        items, problem = await asyncio.to_thread(_parse, body.data, answer.headers, url)
    except Exception as exc:  # a parser bug on hostile input must not sink the other feeds
        return _FeedRead(problems=(FeedProblem(
            url, "malformed", _short(f"could not be parsed: {type(exc).__name__}: {exc}")),))
    return _FeedRead(items=items, etag=answer.headers.get("etag"),
                     last_modified=answer.headers.get("last-modified"),
                     problems=() if problem is None else (problem,))


def _parse(data: bytes, headers: httpx.Headers, url: str
           ) -> tuple[list[NewsItem] | None, FeedProblem | None]:
    """The items of a feed document, and what was wrong with it. The bytes are handed over as a
    stream: feedparser treats a bytes or str argument as a URL or file name to open first."""
    parsed = feedparser.parse(io.BytesIO(data), response_headers={
        "content-type": headers.get("content-type", "application/xml"),
        "content-location": url,  # relative links resolve against the feed's address
    })
    source = _clean(str(parsed.feed.get("title") or ""), MAX_SOURCE_CHARS) or feed_host(url)
    items = [item for entry in parsed.entries[:MAX_ENTRIES_PER_FEED]
             if (item := _item(entry, source, url)) is not None]
    error = parsed.get("bozo_exception") if parsed.get("bozo") else None
    broken = error is not None and _is_xml_error(error)
    if not items:
        if broken:
            return None, FeedProblem(url, "malformed", _short(f"not well-formed XML: {error}"))
        if not parsed.get("version"):
            return None, FeedProblem(url, "not_a_feed", "not an RSS or Atom feed")
        return [], None  # a feed with nothing in it today
    if broken:
        return items, FeedProblem(url, "malformed", _short(
            f"not well-formed XML ({error}); {len(items)} items read anyway"), fatal=False)
    return items, None


def _is_xml_error(exc: object) -> bool:
    # Encoding overrides (a charset the server got wrong) are feedparser's bozo too, but the
    # document itself was fine.
    return not isinstance(exc, feedparser.CharacterEncodingOverride)


def _item(entry: Any, source: str, feed_url: str) -> NewsItem | None:
    title = _entry_title(entry)
    link = str(entry.get("link") or "")
    if feed_url_problem(link) is not None:
        link = ""  # javascript:, relative garbage, too long: never shown as a link
    identity = str(entry.get("id") or "") or link or title
    if not identity or not (title or link):
        return None
    key = hashlib.sha256(identity.encode("utf-8", "replace")).hexdigest()[:16]
    return NewsItem(title=title or link, link=link, source=source,
                    published=_entry_time(entry), feed_url=feed_url, key=key)


def _entry_title(entry: Any) -> str:
    title = str(entry.get("title") or "")
    detail = entry.get("title_detail") or {}
    if "html" in str(detail.get("type", "")):
        title = html.unescape(_TAG.sub(" ", title))
    return _clean(title, MAX_TITLE_CHARS)


def _entry_time(entry: Any) -> datetime | None:
    stamp = entry.get("published_parsed") or entry.get("updated_parsed")
    if not isinstance(stamp, time.struct_time):
        return None
    try:  # feedparser gives UTC
        return datetime.fromtimestamp(calendar.timegm(stamp), UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _clean(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _short(text: str) -> str:
    return _clean(text, 200)


# --- what is new ---------------------------------------------------------------------------------
def _is_new(item: NewsItem, prior: FeedState | None, since: datetime | None) -> bool:
    if prior is not None:
        if item.key in prior.seen:
            return False
        return item.published is None or item.published > prior.fetched_at - LATE_ALLOWANCE
    if since is not None:
        return item.published is None or item.published > since
    return True


def _seen_keys(items: Iterable[NewsItem], prior: FeedState | None) -> tuple[str, ...]:
    keys = dict.fromkeys(i.key for i in items)
    if prior is not None:
        keys.update(dict.fromkeys(prior.seen))
    return tuple(keys)[:SEEN_KEYS_PER_FEED]


def _newest_distinct(items: Iterable[NewsItem], now: datetime, limit: int) -> list[NewsItem]:
    """Newest first (undated items count as published now: they are new today), skipping an
    item whose link or title repeats one already kept, until ``limit`` are kept."""
    ordered = sorted(items, key=lambda i: i.published or now, reverse=True)
    kept: list[NewsItem] = []
    links: set[str] = set()
    titles: list[tuple[str, frozenset[str]]] = []
    for item in ordered:
        if len(kept) >= limit:
            break
        link = _link_key(item.link)
        title = _title_key(item.title)
        grams = _bigrams(title)
        if link and link in links:
            continue
        if title and any(title == t or _similar(grams, g) for t, g in titles):
            continue
        kept.append(item)
        if link:
            links.add(link)
        titles.append((title, grams))
    return kept


def _link_key(link: str) -> str:
    """The same article behind different spellings of its link: case of the host, a trailing
    slash, a fragment, tracking parameters."""
    if not link:
        return ""
    parts = urlsplit(link)
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if not _TRACKING_PARAMS.match(k)])
    return urlunsplit(("", parts.netloc.lower().removeprefix("www."),
                       parts.path.rstrip("/"), query, ""))


def _title_key(title: str) -> str:
    folded = unicodedata.normalize("NFKC", title).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def _bigrams(text: str) -> frozenset[str]:
    return frozenset(text[i:i + 2] for i in range(len(text) - 1))


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    if len(a) < 4 or len(b) < 4:  # too short to judge: only an exact match counts
        return False
    return len(a & b) / len(a | b) >= SIMILAR_TITLES
