"""HTTP/1.1 on bare asyncio streams: the load generator's client and two tiny servers.

httpx tops out near 1,500 requests/s on this machine, below what the servers under test should
reach, so the ingest figures would measure the client. This client keeps one connection per
caller, sends a pre-encoded request and parses only what it needs (status line,
``Content-Length`` or chunked body); it reaches well over 10,000 requests/s here.

The servers run in their own process (``python -m bench.tinyhttp MODE``) and print
``listening PORT`` as their first line:

* ``fixed`` answers every request with the same 201 and a small JSON body: the generator's own
  ceiling, measured with the same requests and concurrency as each ingest figure;
* ``receiver`` is the webhook receiver of the lateness and crash benchmarks: it records the
  arrival time (wall clock) and ``Idempotency-Key`` of every request, answers 200, and serves
  the records at ``GET /_records`` (their count at ``/_count``; ``/_reset`` forgets them); a
  request to ``/hang`` is not answered the first time its key arrives (a worker that is
  SIGKILLed mid-request), and answered normally afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_HEADER_BYTES = 64 * 1024
HANG_SECONDS = 3600.0  # a held /hang request waits this long (its worker is killed long before)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


def encode_request(method: str, host: str, port: int, path: str, body: bytes | None = None,
                   headers: Mapping[str, str] | None = None) -> bytes:
    """One request as bytes, built once and sent many times."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
    head = await reader.readuntil(b"\r\n\r\n")
    first, *rest = head[:-4].decode("latin-1").split("\r\n")
    headers = {}
    for line in rest:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return first, headers


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)  # the chunk and its CRLF
            if size == 0:
                return b"".join(parts)
            parts.append(chunk[:-2])
    return await reader.readexactly(int(headers.get("content-length", "0")))


class Connection:
    """One keep-alive connection; requests on it are sequential (no pipelining)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, limit=MAX_HEADER_BYTES)

    async def send(self, raw: bytes) -> Response:
        reused = self._writer is not None
        try:
            return await self._send(raw)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            # A server closes a keep-alive connection that sat idle (uvicorn after 5 s): that
            # request was never read, so sending it again on a new connection is safe.
            partial = isinstance(exc, asyncio.IncompleteReadError) and exc.partial
            if not reused or partial:
                raise
            await self.close()
            return await self._send(raw)

    async def _send(self, raw: bytes) -> Response:
        await self.connect()
        assert self._reader is not None
        assert self._writer is not None
        self._writer.write(raw)
        await self._writer.drain()
        first, headers = await _read_head(self._reader)
        body = await _read_body(self._reader, headers)
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return Response(int(first.split(" ", 2)[1]), body)

    async def request(self, method: str, path: str, body: bytes | None = None,
                      headers: Mapping[str, str] | None = None) -> Response:
        return await self.send(encode_request(method, self.host, self.port, path, body,
                                              headers))

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


@dataclass
class LoadResult:
    requests: int
    seconds: float
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


async def load(host: str, port: int, raw: bytes, total: int, concurrency: int) -> LoadResult:
    """Send the same request ``total`` times from ``concurrency`` connections, each sending
    its next request as soon as the previous answer arrived."""
    remaining = total
    statuses: Counter[int] = Counter()

    async def caller(conn: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            statuses[(await conn.send(raw)).status] += 1

    conns = [Connection(host, port) for _ in range(min(concurrency, total))]
    try:
        # Connected first: connection set-up is not part of the timed window.
        await asyncio.gather(*(c.connect() for c in conns))
        started = time.perf_counter()
        await asyncio.gather(*(caller(c) for c in conns))
        return LoadResult(total, time.perf_counter() - started, statuses)
    finally:
        await asyncio.gather(*(c.close() for c in conns))


# --- servers ---------------------------------------------------------------------------------
FIXED_BODY = b'{"job_id":"01JY5S1J7QX5V3T8C4M2N6P9RA","status":"scheduled"}'
FIXED_ANSWER = (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(FIXED_BODY)).encode() + b"\r\n\r\n" + FIXED_BODY)


def _answer(status: int, body: bytes = b"") -> bytes:
    return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class Receiver:
    def __init__(self) -> None:
        self.records: list[tuple[float, str, str]] = []  # (arrival, key, path)
        self.seen: Counter[str] = Counter()

    async def handle(self, path: str, headers: Mapping[str, str]) -> bytes:
        if path == "/_records":
            return _answer(200, json.dumps({"records": self.records}).encode())
        if path == "/_count":
            return _answer(200, json.dumps({"records": len(self.records),
                                            "keys": len(self.seen)}).encode())
        if path == "/_reset":
            self.records, self.seen = [], Counter()
            return _answer(200)
        key = headers.get("idempotency-key", "")
        self.records.append((time.time(), key, path))
        self.seen[key] += 1
        if path == "/hang" and self.seen[key] == 1:
            await asyncio.sleep(HANG_SECONDS)
        return _answer(200, b"{}")


async def serve(mode: str, port: int) -> None:
    receiver = Receiver()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                first, headers = await _read_head(reader)
                await _read_body(reader, headers)
                if mode == "fixed":
                    writer.write(FIXED_ANSWER)
                else:
                    writer.write(await receiver.handle(first.split(" ")[1], headers))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, limit=MAX_HEADER_BYTES,
                                        backlog=2048)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description="tiny HTTP servers of the benchmarks")
    parser.add_argument("mode", choices=["fixed", "receiver"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.mode, args.port))
    sys.exit(0)


if __name__ == "__main__":
    main()
