"""Reading the article behind a news item: its page, fetched through the egress guard, and the
main text of it, extracted with readability-lxml (chosen over trafilatura on the digest corpus:
``python -m bench.article_extraction``; docs/actions.md, "Article text").

Per run, for the items to be digested (at most ``max_items``)::

    cached for this URL (any job, this process)? ---------------> that text (or that failure)
    literal host refused by the guard, not http(s) -------------> no text
    GET through the guard's client, PAGES_AT_ONCE at a time,
      each within PAGE_TIMEOUT_SECONDS, all within the run's budget;
      not 2xx, not HTML, larger than PAGE_MAX_BYTES, refused ---> no text (remembered a while)
      v
    readability-lxml's main block, in a thread -> paragraphs, at most ARTICLE_MAX_CHARS

A page that cannot be read costs the digest nothing but that item's text: the item is still
summarised from its title and its feed's description. Pages are never fetched twice within
TEXT_KEPT_SECONDS, whichever job asks.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx

from onthedot import __version__
from onthedot.actions.cache import BoundedDict
from onthedot.actions.catalog import feed_host, feed_url_problem
from onthedot.actions.egress import EgressGuard, read_capped
from onthedot.actions.feeds import NewsItem
from onthedot.domain.errors import OnTheDotError

log = logging.getLogger("onthedot.actions.articles")

PAGE_MAX_BYTES = 1024 * 1024  # of one page, after decompression; past it the page is skipped
PAGE_TIMEOUT_SECONDS = 5.0  # one page, connect to last byte
PAGES_AT_ONCE = 4  # pages of one run fetched at the same time
ARTICLE_MAX_CHARS = 20_000  # of the text kept from one page
TEXT_KEPT_SECONDS = 6 * 3600.0  # a page read is not read again for this long
FAILURE_KEPT_SECONDS = 600.0  # nor is a page that could not be read, for this long
PAGES_KEPT = 2000  # texts held by one process
USER_AGENT = f"onthedot/{__version__} (news digest)"
ACCEPT = "text/html, application/xhtml+xml;q=0.9, */*;q=0.1"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_BLOCKS = ("p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "td",
           "br", "tr", "section", "article")


@dataclass(frozen=True)
class Article:
    url: str
    text: str  # the main text, one paragraph a line; "" when none was read
    problem: str | None = None  # why there is no text (one short English line)


@dataclass(frozen=True)
class _Kept:
    article: Article
    until: float  # on the reader's clock


class ArticleReader:
    """Fetches and extracts article pages, remembering them by URL across the jobs of this
    process (``PAGES_KEPT`` at most). ``clock``: seconds, monotonic (tests move it)."""

    def __init__(self, guard: EgressGuard | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 capacity: int = PAGES_KEPT) -> None:
        self.guard = guard
        self.clock = clock
        self._kept: BoundedDict[str, _Kept] = BoundedDict(capacity)

    async def read(self, http: httpx.AsyncClient, items: Sequence[NewsItem], *,
                   budget_seconds: float) -> dict[str, Article]:
        """The article of each item's link (items without one are skipped), by link. Pages
        not read within ``budget_seconds`` have no text; nothing is raised."""
        links = list(dict.fromkeys(i.link for i in items if i.link))
        found: dict[str, Article] = {}
        wanted: list[str] = []
        now = self.clock()
        for link in links:
            kept = self._kept.get(link)
            if kept is not None and kept.until > now:
                found[link] = kept.article
            else:
                wanted.append(link)
        if wanted:
            found.update(await self._fetch_all(http, wanted, budget_seconds))
        return {link: found[link] for link in links if link in found}

    async def _fetch_all(self, http: httpx.AsyncClient, links: list[str],
                         budget_seconds: float) -> dict[str, Article]:
        gate = asyncio.Semaphore(PAGES_AT_ONCE)
        page_timeout = min(PAGE_TIMEOUT_SECONDS, budget_seconds)

        async def one(link: str) -> Article:
            async with gate:
                article = await self._fetch(http, link, page_timeout)
            self._remember(article)
            return article

        tasks = {asyncio.ensure_future(one(link)): link for link in links}
        done, late = await asyncio.wait(tasks, timeout=budget_seconds)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
        out: dict[str, Article] = {}
        for task in done:
            error = task.exception()
            if error is None:
                out[tasks[task]] = task.result()
            else:  # a bug, not a page's fault: that page goes without text
                log.error("reading %s failed: %r", tasks[task], error)
        for task in late:
            link = tasks[task]
            out[link] = Article(link, "", f"not read within the run's {budget_seconds:g}s")
        return out

    def _remember(self, article: Article) -> None:
        kept_for = TEXT_KEPT_SECONDS if article.problem is None else FAILURE_KEPT_SECONDS
        self._kept[article.url] = _Kept(article, self.clock() + kept_for)

    async def _fetch(self, http: httpx.AsyncClient, link: str, seconds: float) -> Article:
        def failed(reason: str) -> Article:
            return Article(link, "", reason)

        shape = feed_url_problem(link)
        if shape is not None:
            return failed(f"the address {shape}")
        host = feed_host(link)
        refusal = self.guard.refusal_without_lookup(host) if self.guard is not None else None
        if refusal is not None:
            return failed(f"{host} is a {refusal} address, which onthedot does not call")
        try:
            async with asyncio.timeout(seconds):
                return await self._get(http, link)
        except (TimeoutError, httpx.TimeoutException):
            return failed(f"no complete answer within {seconds:g}s")
        except OnTheDotError as exc:  # refused on connect or redirect, or did not resolve
            return failed(exc.message)
        except httpx.HTTPError as exc:
            return failed(f"{type(exc).__name__}: {exc}"[:200])

    async def _get(self, http: httpx.AsyncClient, link: str) -> Article:
        headers = {"Accept": ACCEPT, "User-Agent": USER_AGENT}
        async with http.stream("GET", link, headers=headers) as answer:
            if not 200 <= answer.status_code < 300:
                return Article(link, "", f"HTTP {answer.status_code}")
            kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind and kind not in _HTML_TYPES:
                return Article(link, "", f"not a web page ({kind})")
            body = await read_capped(answer, PAGE_MAX_BYTES)
            charset = answer.charset_encoding
        if not body.complete:
            return Article(link, "", f"larger than {PAGE_MAX_BYTES // 1024} KiB")
        try:
            text = await asyncio.to_thread(extract_text, body.data, charset)
        except Exception as exc:  # a parser bug on hostile input costs this page only
            return Article(link, "", f"could not be parsed: {type(exc).__name__}"[:200])
        if not text:
            return Article(link, "", "no article text found")
        return Article(link, text)


def extract_text(page: bytes, charset: str | None = None) -> str:
    """The main text of an HTML page, one paragraph a line (at most ARTICLE_MAX_CHARS).
    Without a charset from the answer's headers, readability reads the page's own
    ``<meta charset>``."""
    source: str | bytes = page
    if charset:
        try:
            source = page.decode(charset, errors="replace")
        except LookupError:
            source = page
    if not source.strip():
        return ""
    # Imported on first use: lxml's HTML parser and readability add about 7 MiB to every
    # worker and API process, most of which never read an article page.
    import lxml.html
    from readability import Document

    summary = Document(source).summary(html_partial=True)
    if not summary.strip():
        return ""
    tree = lxml.html.fromstring(summary)
    for element in tree.iter(*_BLOCKS):  # each block on a line of its own
        element.tail = "\n" + (element.tail or "")
        if element.tag != "br":
            element.text = "\n" + (element.text or "")
    lines = (" ".join(line.split()) for line in str(tree.text_content()).splitlines())
    text = "\n".join(line for line in lines if line)
    return text[:ARTICLE_MAX_CHARS]


_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=[.;])\s+(?=\S)")


def excerpt(text: str, limit: int) -> str:
    """The article's opening, at most ``limit`` characters, ended at a sentence's end when one
    falls in the second half (else cut, with "…")."""
    flat = " ".join(text.split("\n"))
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    best = max((e for e in ends if e >= limit // 2), default=None)
    return cut[:best].rstrip() if best else cut[:limit - 1].rstrip() + "…"


def texts_by_link(articles: Mapping[str, Article]) -> dict[str, str]:
    return {link: a.text for link, a in articles.items() if a.text}
