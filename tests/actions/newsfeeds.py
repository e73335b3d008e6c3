"""Fixture feeds for the news digest tests, served by a real HTTP server on loopback.

``rss(...)`` and ``atom(...)`` build documents from ``Entry`` records (dates relative to the
test's fake clock); ``FeedServer`` serves them per path, honours conditional GETs like a real
feed host, and records every request's headers. It also has the bad hosts: an error status, a
feed that drips (past any per-feed timeout), one that never ends (past any size cap), and raw
bytes (malformed XML, HTML).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape

RSS_TYPE = "application/rss+xml; charset=utf-8"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
HTML_TYPE = "text/html; charset=utf-8"
CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Entry:
    title: str
    link: str
    published: datetime | None = None
    guid: str | None = None
    summary: str | None = None  # the entry's description


def rss(title: str, entries: list[Entry], language: str = "en") -> bytes:
    items = "".join(
        "<item>"
        f"<title>{escape(e.title)}</title><link>{escape(e.link)}</link>"
        + (f"<guid>{escape(e.guid)}</guid>" if e.guid else "")
        + (f"<description>{escape(e.summary)}</description>" if e.summary else "")
        + (f"<pubDate>{format_datetime(e.published)}</pubDate>" if e.published else "")
        + "</item>" for e in entries)
    return ('<?xml version="1.0" encoding="utf-8"?>'
            f'<rss version="2.0"><channel><title>{escape(title)}</title>'
            f"<link>https://example.org/</link><language>{language}</language>"
            f"{items}</channel></rss>").encode()


def page(title: str, paragraphs: list[str], lang: str = "en") -> bytes:
    """An article page with the clutter around the text that real ones have."""
    body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
    return (f"<!DOCTYPE html><html lang='{lang}'><head><meta charset='utf-8'>"
            f"<title>{escape(title)}</title></head><body>"
            "<nav><a href='/'>Home</a> <a href='/business'>Business</a></nav>"
            f"<article><h1>{escape(title)}</h1>{body}</article>"
            "<aside><ul><li><a href='/x'>Ten gadgets for your summer trip</a></li></ul></aside>"
            "<footer><p>All rights reserved. Reproduction without permission is prohibited."
            "</p></footer></body></html>").encode()


def atom(title: str, entries: list[Entry]) -> bytes:
    items = "".join(
        "<entry>"
        f"<title>{escape(e.title)}</title><link href=\"{escape(e.link)}\"/>"
        f"<id>{escape(e.guid or e.link)}</id>"
        + (f"<updated>{e.published.isoformat()}</updated>" if e.published else "")
        + "</entry>" for e in entries)
    return ('<?xml version="1.0" encoding="utf-8"?>'
            '<feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>{escape(title)}</title><id>urn:test</id>{items}</feed>").encode()


@dataclass
class Request:
    path: str
    headers: dict[str, str]


@dataclass
class _Route:
    kind: str  # feed | status | redirect | drip | endless
    body: bytes = b""
    location: str = ""
    content_type: str = RSS_TYPE
    status: int = 200
    etag: str | None = None
    last_modified: str | None = None


@dataclass
class FeedServer:
    bind: str = "127.0.0.1"
    requests: list[Request] = field(default_factory=list)
    bytes_sent: int = 0  # of endless answers, accepted by the kernel
    _routes: dict[str, _Route] = field(default_factory=dict)
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # --- what is served ----------------------------------------------------------------------
    def feed(self, path: str, body: bytes, *, content_type: str = RSS_TYPE,
             etag: str | None = None, last_modified: str | None = None) -> str:
        """Serve ``body``; with validators, answer 304 to a request that sends them back."""
        self._routes[path] = _Route("feed", body, content_type=content_type, etag=etag,
                                    last_modified=last_modified)
        return self.url(path)

    def status(self, path: str, status: int) -> str:
        self._routes[path] = _Route("status", f"status {status}".encode(), "text/plain",
                                    status=status)
        return self.url(path)

    def redirect(self, path: str, location: str) -> str:
        self._routes[path] = _Route("redirect", status=302, location=location)
        return self.url(path)

    def drip(self, path: str, content_type: str = RSS_TYPE) -> str:
        """Headers at once, then a byte every 0.1 s until the client leaves (or the end of the
        test): each read is quick, the whole answer never ends."""
        self._routes[path] = _Route("drip", content_type=content_type)
        return self.url(path)

    def endless(self, path: str, content_type: str = RSS_TYPE) -> str:
        """A feed (or page) that never ends, sent as fast as the client reads it."""
        self._routes[path] = _Route("endless", content_type=content_type)
        return self.url(path)

    def url(self, path: str) -> str:
        assert self._server is not None
        return f"http://{self.bind}:{self._server.server_address[1]}{path}"

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # --- the server ------------------------------------------------------------------------
    def start(self) -> FeedServer:
        served = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def do_GET(self) -> None:
                with served._lock:
                    served.requests.append(Request(self.path, dict(self.headers.items())))
                route = served._routes.get(self.path)
                if route is None:
                    self._send(404, b"no such feed", "text/plain")
                elif route.kind == "feed":
                    self._feed(route)
                elif route.kind == "status":
                    self._send(route.status, route.body, route.content_type)
                elif route.kind == "redirect":
                    self._send(route.status, b"", "text/plain", {"Location": route.location})
                elif route.kind == "drip":
                    self._drip(route.content_type)
                else:
                    self._endless(route.content_type)

            def _send(self, status: int, body: bytes, content_type: str,
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _feed(self, route: _Route) -> None:
                validators = {k: v for k, v in (("ETag", route.etag),
                                                ("Last-Modified", route.last_modified)) if v}
                if (route.etag and self.headers.get("If-None-Match") == route.etag) or (
                        route.last_modified
                        and self.headers.get("If-Modified-Since") == route.last_modified):
                    self.send_response(304)
                    for name, value in validators.items():
                        self.send_header(name, value)
                    self.end_headers()
                    return
                self._send(200, route.body, route.content_type, validators)

            def _drip(self, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", "1000000")
                self.end_headers()
                try:
                    while not served._release.wait(0.1):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True

            def _endless(self, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.end_headers()  # no length: until the connection closes
                self.close_connection = True
                item = b"<item><title>more</title><link>https://example.org/x</link></item>"
                chunk = b'<?xml version="1.0"?><rss version="2.0"><channel>' + \
                    item * (CHUNK_BYTES // len(item))
                try:
                    while not served._release.is_set():
                        self.wfile.write(chunk)
                        with served._lock:
                            served.bytes_sent += len(chunk)
                        chunk = item * (CHUNK_BYTES // len(item))
                except OSError:
                    pass  # the client hung up, as it should

        self._server = ThreadingHTTPServer((self.bind, 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
