"""A real HTTP/1.1 server on a loopback address whose answers are scripted per path.

It records every request (path, ``Host`` header, TLS server name) and how many body bytes it
managed to hand to the kernel, so a test can tell how much of an answer a client really took.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHUNK_BYTES = 64 * 1024

Route = Callable[[BaseHTTPRequestHandler, "ScriptedServer"], None]


@dataclass
class Hit:
    method: str
    path: str
    host: str | None
    cookie: str | None


@dataclass
class ScriptedServer:
    routes: dict[str, Route]
    bind: str = "127.0.0.1"
    tls: ssl.SSLContext | None = None
    hits: list[Hit] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)  # TLS SNI per handshake
    bytes_sent: int = 0  # body bytes of streamed answers accepted by the kernel
    stream_ended: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def url(self, path: str = "/", host: str | None = None) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host or self.bind}:{self.port}{path}"

    def paths(self) -> list[str]:
        with self._lock:
            return [h.path for h in self.hits]

    def add_sent(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n

    def start(self) -> ScriptedServer:
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with scripted._lock:
                    scripted.hits.append(Hit(self.command, self.path, self.headers.get("Host"),
                                          self.headers.get("Cookie")))
                route = scripted.routes.get(self.path.split("?")[0])
                if route is None:
                    answer(404, b"no such path")(self, scripted)
                else:
                    route(self, scripted)

            do_POST = do_PUT = do_GET = do_PATCH = do_DELETE = _answer

        if self.tls is not None:
            self.tls.sni_callback = self._record_sni
        self._server = _Server((self.bind, 0), Handler, self.tls)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def _record_sni(self, _sock: Any, name: str | None, _ctx: ssl.SSLContext) -> None:
        with self._lock:
            self.server_names.append(name)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _Server(ThreadingHTTPServer):
    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 tls: ssl.SSLContext | None) -> None:
        self._tls = tls
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self._tls is not None:
            sock = self._tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            if isinstance(request, ssl.SSLSocket):
                request.do_handshake()  # in the handler's thread: a failed one is just closed
            super().finish_request(request, client_address)
        except (ssl.SSLError, OSError):
            pass


# --- routes -------------------------------------------------------------------------------------
def answer(status: int, body: bytes = b"", content_type: str = "text/plain",
           headers: dict[str, str] | None = None) -> Route:
    def route(h: BaseHTTPRequestHandler, _s: ScriptedServer) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(body)
    return route


def redirect(location: str, status: int = 302) -> Route:
    return answer(status, headers={"Location": location})


def endless(total_bytes: int, status: int = 200, content_type: str = "text/plain") -> Route:
    """An answer of ``total_bytes`` (declared up front) sent as fast as the client takes it."""
    def route(h: BaseHTTPRequestHandler, s: ScriptedServer) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(total_bytes))
        h.end_headers()
        chunk = b"x" * CHUNK_BYTES
        sent = 0
        try:
            while sent < total_bytes:
                part = chunk[:total_bytes - sent]
                h.wfile.write(part)
                sent += len(part)
                s.add_sent(len(part))
        except OSError:
            pass  # the client hung up: what we wanted to see
        finally:
            h.close_connection = True
            s.stream_ended.set()
    return route
