"""The API process bounds its connections: idle, silent and slow-header connections cannot hold
its file descriptors, a fresh client is still answered, and a flood writes no log line per
connection. A real ``onthedot api`` process on loopback, real sockets."""

from __future__ import annotations

import logging
import os
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from onthedot.logs import RepeatFilter
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow
LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
LIMIT = 50
HEADER_TIMEOUT = 1.5
KEEP_ALIVE = 1.0


@dataclass
class Api:
    proc: subprocess.Popen[bytes]
    log_path: Path
    port: int = 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _command() -> list[str]:
    return [sys.executable, "-c", "from onthedot.cli import cli; cli()"]


@contextmanager
def running_api(tmp_path: Path, **settings: str) -> Iterator[Api]:
    """``onthedot api`` on a free loopback port, with ``ONTHEDOT_<NAME>`` settings."""
    # One process: the connection bounds under test are per process.
    env = {**os.environ, "ONTHEDOT_LOG_LEVEL": "INFO", "ONTHEDOT_PROCESSES": "1",
           **{f"ONTHEDOT_{k.upper()}": v for k, v in settings.items()}}
    env.pop("ONTHEDOT_TOKEN", None)
    log_path = tmp_path / "api.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*_command(), "api", "--port", "0", "--database-url",
                                 f"sqlite:///{tmp_path}/api.db"],
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    served = Api(proc=proc, log_path=log_path)
    try:
        wait_until(lambda: bool(LISTENING.search(served.log())) or proc.poll() is not None, 30,
                   "onthedot api to listen")
        match = LISTENING.search(served.log())
        assert match, served.log()
        served.port = int(match.group(1))
        yield served
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with running_api(tmp_path, max_connections=str(LIMIT),
                     header_timeout_seconds=str(HEADER_TIMEOUT),
                     keep_alive_seconds=str(KEEP_ALIVE)) as served:
        yield served


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _closed_by_server(sock: socket.socket, wait_seconds: float = 0.0) -> bool:
    """True when the server closed (FIN or RST) the connection, waiting up to
    ``wait_seconds`` for it to happen (0: never blocks)."""
    readable, _, _ = select.select([sock], [], [], wait_seconds)
    if not readable:
        return False
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def _healthz_seconds(port: int) -> float:
    started = time.monotonic()
    answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    assert answer.status_code == 200, answer.text
    return time.monotonic() - started


def test_idle_connections_beyond_the_bound_make_room_for_a_fresh_client(api: Api) -> None:
    idle = [_connect(api.port) for _ in range(3 * LIMIT)]
    try:
        # Each connection beyond the bound closes the one idle longest: at most LIMIT of ours
        # stay open, and a fresh client is answered at once.
        assert min(_healthz_seconds(api.port) for _ in range(3)) < 0.5
        wait_until(lambda: sum(not _closed_by_server(s) for s in idle) <= LIMIT, 10,
                   f"at most {LIMIT} idle connections left open")
        # Silent connections never complete their headers: all are closed after the timeout.
        wait_until(lambda: all(_closed_by_server(s) for s in idle), HEADER_TIMEOUT + 10,
                   "silent connections closed after the header timeout")
        assert _healthz_seconds(api.port) < 5
    finally:
        for sock in idle:
            sock.close()
    lines = api.log().splitlines()
    assert len(lines) < 20, lines  # no line per refused or closed connection


def test_a_slow_header_client_is_disconnected(api: Api) -> None:
    sock = _connect(api.port)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        # A header byte every 0.2 s: the connection is never idle, but its headers never end.
        while time.monotonic() - started < HEADER_TIMEOUT + 10:
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            # Up to 0.2 s for the server's close: also the pace of the client's bytes.
            if _closed_by_server(sock, wait_seconds=0.2):
                closed = True
                break
        assert closed, "a request whose headers never complete kept its connection"
        assert time.monotonic() - started >= HEADER_TIMEOUT - 0.5
    finally:
        sock.close()


def test_an_idle_keep_alive_connection_is_closed(api: Api) -> None:
    sock = _connect(api.port)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        wait_until(lambda: _closed_by_server(sock), KEEP_ALIVE + 10,
                   "the idle keep-alive connection closed")
    finally:
        sock.close()


def test_a_connection_with_a_request_in_progress_is_never_evicted(api: Api) -> None:
    """At the bound, only idle connections make room; a request being sent keeps its own."""
    busy = _connect(api.port)
    try:
        # Headers complete, body still coming: a request in progress. The server's
        # "100 Continue" says the app is reading the body.
        busy.sendall(b"POST /v1/parse HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n")
        assert busy.recv(65536).startswith(b"HTTP/1.1 100")
        busy.sendall(b"{")
        others = [_connect(api.port) for _ in range(2 * LIMIT)]
        try:
            assert not _closed_by_server(busy)
            assert min(_healthz_seconds(api.port) for _ in range(3)) < 0.5
        finally:
            for sock in others:
                sock.close()
    finally:
        busy.close()


def test_repeated_lines_are_written_once_per_interval_with_a_count() -> None:
    now = [0.0]
    repeat = RepeatFilter(10.0, clock=lambda: now[0])

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, args, None)

    written = [r for r in (record("accept() out of system resource") for _ in range(10_000))
               if repeat.filter(r)]
    assert len(written) == 1
    # Lines about different things are never merged (the arguments are part of identity).
    assert repeat.filter(record("run %s failed", "a"))
    assert repeat.filter(record("run %s failed", "b"))
    now[0] = 10.5
    again = record("accept() out of system resource")
    assert repeat.filter(again)
    assert again.getMessage().endswith("(9999 identical lines suppressed)")
    every = RepeatFilter(0)
    assert every.filter(record("x"))
    assert every.filter(record("x"))
