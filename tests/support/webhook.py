"""A real HTTP server on loopback that receives webhooks and counts idempotency keys."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The receivers listen on loopback, which the egress guard refuses unless allowlisted: tests that
# call them pass this as ``egress_allow`` (or ONTHEDOT_EGRESS_ALLOW to a child process).
LOOPBACK_ALLOW = "127.0.0.1"


@dataclass
class Received:
    path: str
    method: str
    idempotency_key: str | None
    body: Any
    raw: bytes = b""  # the body as received (a signature covers these bytes)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class WebhookReceiver:
    """``status_for(received, nth_call_for_key)`` decides the answer (default 200); a key in
    ``hold(received, nth)`` blocks that request until ``release()`` (to catch a worker
    mid-action); ``hold_all`` holds every request."""

    status_for: Callable[[Received, int], int] = lambda _r, _n: 200
    received: list[Received] = field(default_factory=list)
    keys: Counter[str] = field(default_factory=Counter)
    hold_all: bool = False
    hold: Callable[[Received, int], bool] = lambda _r, _n: False
    arrived: threading.Event = field(default_factory=threading.Event)
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                item = Received(self.path, self.command, self.headers.get("Idempotency-Key"),
                                json.loads(raw) if raw else None, raw,
                                {k.lower(): v for k, v in self.headers.items()})
                with receiver._lock:
                    receiver.received.append(item)
                    if item.idempotency_key:
                        receiver.keys[item.idempotency_key] += 1
                    nth = receiver.keys[item.idempotency_key or ""]
                receiver.arrived.set()
                if receiver.hold_all or receiver.hold(item, nth):
                    receiver._release.wait(timeout=60)
                status = receiver.status_for(item, nth)
                payload = json.dumps({"ok": 200 <= status < 300}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_PUT = do_GET = do_PATCH = do_DELETE = _answer

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # many workers connect at once; the default backlog is 5

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def release(self) -> None:
        self._release.set()

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def count(self) -> int:
        with self._lock:
            return len(self.received)
