"""Reading RSS and Atom feeds, and telling which of their items are new.

``fetch_news`` is the one entry point, used by the ``news_digest`` action and meant as a model's
tool: it reads every feed of a topic (or the given feeds) at once, each through the egress
guard's HTTP client, with a per-feed timeout and size cap, parses it with feedparser, and keeps
the items that are new, newest first (undated ones after every dated one), the same story
in several feeds kept once with the other feeds' sightings attached (``NewsItem.also``).

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
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
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
MAX_SUMMARY_CHARS = 2000  # of an entry's own description, as plain text
SIMILAR_TITLES = 0.8  # Jaccard similarity of character bigrams: the same story, re-titled
USER_AGENT = f"onthedot/{__version__} (news digest)"
ACCEPT = ("application/rss+xml, application/atom+xml, application/xml;q=0.9, text/xml;q=0.9, "
          "*/*;q=0.1")
_TRACKING_PARAMS = re.compile(r"^(utm_\w+|fbclid|gclid|mc_cid|mc_eid)$")
_TAG = re.compile(r"<[^>]*>")
_NEVER = datetime.min.replace(tzinfo=UTC)
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class NewsItem:
    title: str
    link: str  # http(s), or "" when the entry had none
    source: str  # the feed's title, or its host
    published: datetime | None
    feed_url: str
    key: str  # stable across runs: a hash of the entry's id, link or title
    summary: str = ""  # the entry's own description, plain text ("" if none)
    # The same story in other feeds (the same link, or a nearly identical title), newest first.
    also: tuple[NewsItem, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "title": self.title, "link": self.link, "source": self.source,
            "published": None if self.published is None else self.published.isoformat()}
        if self.also:
            out["also"] = [{"source": i.source, "link": i.link} for i in self.also]
        return out


@dataclass(frozen=True)
class FeedProblem:
    url: str
    kind: str  # http | timeout | too_large | malformed | not_a_feed | refused | unreachable
    reason: str  # one short English line
    fatal: bool = True  # False: the feed was read anyway (malformed XML that still had items)
    name: str = ""  # the feed's title, when one was ever read from it ("" if not)

    @property
    def label(self) -> str:
        """How a person is shown the feed: its title, else its address without the scheme
        (a host alone cannot tell two feeds of one site apart)."""
        return self.name or self.url.split("://", 1)[-1]

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
    # New and distinct, but past max_items: not digested, and not carried to the next run
    # (they count as seen); the digest names them ("and N more").
    more: list[NewsItem] = field(default_factory=list)
    problems: list[FeedProblem] = field(default_factory=list)
    feeds: tuple[str, ...] = ()  # every feed asked
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
                     catalog: FeedCatalog | None = None,
                     titles: MutableMapping[str, str] | None = None) -> NewsResult:
    """The new items of ``feeds`` (or of the topic's feeds in ``language``) and the problems.

    ``http`` must be the egress guard's client (``guarded_client``); ``guard`` (optional)
    refuses literal hosts before anything is sent. ``states`` are what the previous run
    remembered per feed (validators, keys seen); without one, items published after
    ``since`` are new, and without ``since`` every item is (the newest ``max_items`` kept).
    ``titles`` (optional) remembers each feed's title by URL, across calls: read feeds update
    it, and a feed that fails is named by the title it had before.
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
    titles = titles if titles is not None else {}
    for url, read in zip(urls, reads, strict=True):
        prior = states.get(url)
        if read.title:
            titles[url] = read.title
        problems.extend(replace(p, name=titles.get(url, "")) for p in read.problems)
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
    items, more = _newest_distinct(new, limits.max_items)
    return NewsResult(items=items, more=more, problems=problems, feeds=urls, states=remembered)


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
    title: str = ""  # the feed's own title, when it has one


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
        items, problem, title = await asyncio.to_thread(_parse, body.data, answer.headers, url)
    except Exception as exc:  # a parser bug on hostile input must not sink the other feeds
        return _FeedRead(problems=(FeedProblem(
            url, "malformed", _short(f"could not be parsed: {type(exc).__name__}: {exc}")),))
    return _FeedRead(items=items, etag=answer.headers.get("etag"),
                     last_modified=answer.headers.get("last-modified"),
                     problems=() if problem is None else (problem,), title=title)


def _parse(data: bytes, headers: httpx.Headers, url: str
           ) -> tuple[list[NewsItem] | None, FeedProblem | None, str]:
    """The items of a feed document, what was wrong with it, and its title ("" if none). The
    bytes are handed over as a stream: feedparser treats a bytes or str argument as a URL or
    file name to open first."""
    parsed = feedparser.parse(io.BytesIO(data), response_headers={
        "content-type": headers.get("content-type", "application/xml"),
        "content-location": url,  # relative links resolve against the feed's address
    })
    title = _clean(html.unescape(_TAG.sub(" ", str(parsed.feed.get("title") or ""))),
                   MAX_SOURCE_CHARS)
    source = title or _site_name(parsed.feed.get("link"), url)
    items = [item for entry in parsed.entries[:MAX_ENTRIES_PER_FEED]
             if (item := _item(entry, source, url)) is not None]
    error = parsed.get("bozo_exception") if parsed.get("bozo") else None
    broken = error is not None and _is_xml_error(error)
    if not items:
        if broken:
            return None, FeedProblem(url, "malformed", _short(
                f"not well-formed XML: {error}")), title
        if not parsed.get("version"):
            return None, FeedProblem(url, "not_a_feed", "not an RSS or Atom feed"), title
        return [], None, title  # a feed with nothing in it today
    if broken:
        return items, FeedProblem(url, "malformed", _short(
            f"not well-formed XML ({error}); {len(items)} items read anyway"),
            fatal=False), title
    return items, None, title


def _site_name(link: object, url: str) -> str:
    """An untitled feed's name: the host of the site it links to, else of its own address
    (without a port, ``www.`` dropped)."""
    host = feed_host(str(link)) if isinstance(link, str) and link else ""
    return (host or feed_host(url) or url).removeprefix("www.")


def _is_xml_error(exc: object) -> bool:
    # Encoding overrides (a charset the server got wrong) and a content type that is not XML
    # (a web page at the feed's address: judged "not a feed" instead) are feedparser's bozo
    # too, but say nothing about the document's XML.
    return not isinstance(exc, (feedparser.CharacterEncodingOverride,
                                feedparser.NonXMLContentType))


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
                    published=_entry_time(entry), feed_url=feed_url, key=key,
                    summary=_entry_summary(entry))


def _entry_summary(entry: Any) -> str:
    """The entry's description as plain text: feeds put HTML in it, escaped or not."""
    text = str(entry.get("summary") or "")
    return _clean(html.unescape(_TAG.sub(" ", text)), MAX_SUMMARY_CHARS)


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


def _newest_distinct(items: Iterable[NewsItem], limit: int
                     ) -> tuple[list[NewsItem], list[NewsItem]]:
    """The distinct items, newest first, split at ``limit``: those kept and those past it.

    Undated items come after every dated one (in feed order): a date that cannot be read says
    nothing about an item being recent, and a broken feed's item must not top the digest. An
    item whose link or title repeats a kept one is attached to it (``also``), so the story is
    told once with every source; one that repeats an item past the limit is dropped."""
    items = list(items)
    dated = sorted((i for i in items if i.published is not None),
                   key=lambda i: i.published or _NEVER, reverse=True)
    ordered = dated + [i for i in items if i.published is None]
    kept: list[NewsItem] = []
    also: list[list[NewsItem]] = []
    more: list[NewsItem] = []
    links: dict[str, int] = {}  # link key -> index in kept, or -1 for an item past the limit
    titles: dict[str, int] = {}
    grams: list[tuple[frozenset[str], tuple[str, ...]]] = []  # of kept titles: bigrams, numbers
    for item in ordered:
        link = _link_key(item.link)
        title = _title_key(item.title)
        gram = (_bigrams(title), tuple(_NUMBER.findall(title)))
        seen = links.get(link) if link else None
        if seen is None and title:
            seen = titles.get(title)
        if seen is None and title:
            seen = next((i for i, g in enumerate(grams) if _similar(gram, g)), None)
        if seen is not None:
            if seen >= 0 and item.source not in {kept[seen].source, *(a.source
                                                                     for a in also[seen])}:
                also[seen].append(item)
            continue
        index = len(kept) if len(kept) < limit else -1
        if index >= 0:
            kept.append(item)
            also.append([])
            grams.append(gram)
        else:
            more.append(item)
        if link:
            links[link] = index
        if title:
            titles[title] = index
    return [replace(item, also=tuple(extra)) if extra else item
            for item, extra in zip(kept, also, strict=True)], more


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


def _similar(a: tuple[frozenset[str], tuple[str, ...]],
             b: tuple[frozenset[str], tuple[str, ...]]) -> bool:
    """Nearly the same letters, and the same numbers: "item 1" is not "item 10", nor a 5 %
    rise a 6 % one."""
    (a_grams, a_numbers), (b_grams, b_numbers) = a, b
    if len(a_grams) < 4 or len(b_grams) < 4:  # too short to judge: only an exact match counts
        return False
    return a_numbers == b_numbers and \
        len(a_grams & b_grams) / len(a_grams | b_grams) >= SIMILAR_TITLES
