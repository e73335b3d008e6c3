"""News digest quality on a fixed corpus: how much of each story's key facts survive, whether the
same story from two outlets is told once, and how long the digest is.

``python -m bench.digest_quality``. The corpus (``bench/corpus/digest``: invented news, see
``stories.json``) has feeds and article pages in English, Traditional and Simplified Chinese:
8 stories, 4 of them carried by two outlets under different headlines, each with the facts
(numbers, names, dates) a summary of it should keep. A loopback server serves the feeds and
pages; the digest's own code reads them (``fetch_news`` and ``ArticleReader`` through the egress
guard's client) and writes one digest per language with each writer:

* ``headlines``: the digest as it was before the articles were read (one line per item, grouped
  by source), for comparison;
* ``offline``: ``OfflineDigest``, the extractive summary;
* ``model``: ``ModelDigest`` talking to a fake model, a loopback server speaking the
  chat-completions protocol, which answers with each story's title, the first sentence of the
  excerpt it was sent, its sources and links. Its figures measure what the model is given,
  not how well a real model writes.

Per digest: ``facts`` is the share of the stories' key facts found in the text (white space
ignored), ``whole`` the share of stories with every fact found, ``merged`` the share of the
two-outlet stories told as one (both links in one paragraph, no other paragraph with either,
both outlets named there), ``chars`` the digest's length. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from onthedot.actions.articles import ArticleReader, texts_by_link
from onthedot.actions.digest import DigestRequest, OfflineDigest, zone_of
from onthedot.actions.egress import EgressGuard, guarded_client
from onthedot.actions.feeds import FeedLimits, NewsItem, fetch_news
from onthedot.actions.model import ModelEndpoint
from onthedot.actions.model_digest import ModelDigest
from onthedot.nl.parts import Language

CORPUS = Path(__file__).parent / "corpus" / "digest"
PLACEHOLDER = "http://corpus.test"
NOW = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
TIMEZONE = "Asia/Taipei"
LANGUAGES: tuple[Language, ...] = ("en", "zh-Hant", "zh-Hans")
SITE_LANGUAGE = {"en": "en", "zh-TW": "zh-Hant", "zh-CN": "zh-Hans"}
WRITERS = ("headlines", "offline", "model")
_SENTENCE = re.compile(r".+?(?:[。！？]|[.!?](?=\s|$))", re.S)


# --- the corpus on loopback ---------------------------------------------------------------------
@contextmanager
def corpus_server() -> Iterator[str]:
    """Serves the feeds at /feeds/<site>.xml and the pages at their own paths; yields the base
    URL, which replaces the feeds' placeholder host."""
    holder: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path.startswith("/feeds/"):
                file = CORPUS / "feeds" / path.removeprefix("/feeds/")
                kind = "application/rss+xml; charset=utf-8"
            else:
                file = CORPUS / "pages" / path.lstrip("/")
                kind = "text/html; charset=utf-8"
            if ".." in path or not file.is_file():
                self._send(404, b"not found", "text/plain")
                return
            body = file.read_text("utf-8").replace(PLACEHOLDER, holder["base"]).encode()
            self._send(200, body, kind)

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with _serving(Handler) as base:
        holder["base"] = base
        yield base


@contextmanager
def fake_model() -> Iterator[str]:
    """A chat-completions server that repeats each story's title, the first sentence of its
    excerpt, its sources and links; yields its base URL (…/v1)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            user = body["messages"][1]["content"]
            stories = json.loads(user[user.index("["):])
            text = "\n\n".join(_fake_paragraph(story) for story in stories)
            answer = json.dumps({
                "id": "chatcmpl-bench", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}]},
                ensure_ascii=False).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    with _serving(Handler) as base:
        yield f"{base}/v1"


def _fake_paragraph(story: dict[str, Any]) -> str:
    first = _SENTENCE.match(story.get("excerpt") or "")
    sources = ", ".join(s["source"] for s in story["sources"])
    links = " ".join(s["link"] for s in story["sources"] if s["link"])
    sentence = first.group().strip() if first else ""
    return f"{story['title']}: {sentence} ({sources}) {links}"


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# --- writing the digests ------------------------------------------------------------------------
async def digests(base: str, model_url: str) -> dict[tuple[str, Language], str]:
    """Every (writer, language) digest of the corpus."""
    corpus = json.loads((CORPUS / "stories.json").read_text("utf-8"))
    guard = EgressGuard(["127.0.0.1"])
    endpoint = ModelEndpoint(model_url, "bench-model", "sk-bench", EgressGuard(["127.0.0.1"]))
    out: dict[tuple[str, Language], str] = {}
    async with guarded_client(guard) as http:
        reader = ArticleReader(guard)
        for language in LANGUAGES:
            feeds = [f"{base}/feeds/{name}.xml" for name, site in corpus["sites"].items()
                     if SITE_LANGUAGE[site["language"]] == language]
            news = await fetch_news(http, feeds=feeds, language=language, now=NOW,
                                    limits=FeedLimits(max_items=10), guard=guard)
            articles = await reader.read(http, news.items, budget_seconds=20)
            request = DigestRequest(
                topic="finance", language=language, items=news.items, problems=news.problems,
                timezone=TIMEZONE, first=True, more=news.more,
                articles=texts_by_link(articles), time_budget_seconds=20)
            out["headlines", language] = _headlines(news.items)
            out["offline", language] = (await OfflineDigest().write(request)).text
            written = await ModelDigest(endpoint).write(request)
            if written.written_by != "model":
                raise RuntimeError(f"the fake model did not write the digest: "
                                   f"{written.model_error}")
            out["model", language] = written.text
    return out


def _headlines(items: list[NewsItem]) -> str:
    """The digest as it was: a line per item, grouped by source, newest group first."""
    zone = zone_of(TIMEZONE)
    groups: dict[str, list[str]] = {}
    for item in items:
        when = "" if item.published is None else \
            item.published.astimezone(zone).strftime("%m-%d %H:%M ")
        groups.setdefault(item.source, []).append(
            f"- {when}{item.title} ({item.source}) {item.link}")
    return "\n\n".join(f"{source}\n" + "\n".join(lines) for source, lines in groups.items())


# --- scoring -------------------------------------------------------------------------------------
@dataclass
class Score:
    stories: int = 0
    facts: int = 0
    facts_kept: int = 0
    whole: int = 0
    shared: int = 0  # stories carried by two outlets
    merged: int = 0
    chars: int = 0

    def add(self, other: Score) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def score(text: str, stories: list[dict[str, Any]], sites: dict[str, Any], base: str) -> Score:
    flat = "".join(text.split())
    paragraphs = text.split("\n\n")
    result = Score(stories=len(stories), chars=len(text))
    for story in stories:
        kept = [f for f in story["facts"] if "".join(f.split()) in flat]
        result.facts += len(story["facts"])
        result.facts_kept += len(kept)
        result.whole += len(kept) == len(story["facts"])
        if len(story["articles"]) < 2:
            continue
        result.shared += 1
        links = [base + a["path"] for a in story["articles"]]
        names = [sites[a["site"]]["title"] for a in story["articles"]]
        holding = [p for p in paragraphs if any(link in p for link in links)]
        result.merged += len(holding) == 1 and all(link in holding[0] for link in links) \
            and all(name in holding[0] for name in names)
    return result


def _row(label: str, s: Score) -> str:
    facts = s.facts_kept / s.facts if s.facts else 0.0
    whole = s.whole / s.stories if s.stories else 0.0
    merged = f"{s.merged}/{s.shared}" if s.shared else "-"
    return (f"{label:<22}{s.stories:>8}{facts:>8.0%}{whole:>8.0%}{merged:>8}{s.chars:>8}"
            f"{s.chars / max(1, s.stories):>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print every digest, and the "
                        "facts each one lost")
    args = parser.parse_args()
    corpus = json.loads((CORPUS / "stories.json").read_text("utf-8"))
    with corpus_server() as base, fake_model() as model_url:
        texts = asyncio.run(digests(base, model_url))
        if args.show:
            _show(texts, corpus)
    pages = sum(len(s["articles"]) for s in corpus["stories"])
    print(f"digest quality on bench/corpus/digest: {len(corpus['stories'])} stories, "
          f"{pages} pages")
    print(f"{'digest':<22}{'stories':>8}{'facts':>8}{'whole':>8}{'merged':>8}{'chars':>8}"
          f"{'/story':>8}")
    for writer in WRITERS:
        total = Score()
        for language in LANGUAGES:
            stories = [s for s in corpus["stories"] if s["language"] == language]
            figures = score(texts[writer, language], stories, corpus["sites"], base)
            total.add(figures)
            print(_row(f"{writer} {language}", figures))
        print(_row(f"{writer} all", total))


def _show(texts: dict[tuple[str, Language], str], corpus: dict[str, Any]) -> None:
    for (writer, language), text in texts.items():
        flat = "".join(text.split())
        lost = [f for s in corpus["stories"] if s["language"] == language for f in s["facts"]
                if "".join(f.split()) not in flat]
        print(f"=== {writer} {language} (lost: {', '.join(lost) or 'nothing'})\n{text}\n")


if __name__ == "__main__":
    main()
