"""Ingest over HTTP: one job per request (1 and 64 keep-alive callers) and POST /v1/jobs:batch.

A quick measurement, not the full harness: it starts ``onthedot api`` in a subprocess (SQLite,
or PostgreSQL + NATS), drives it with a raw asyncio HTTP/1.1 keep-alive client (httpx tops out
near 1,500 requests/s here and would measure itself), and prints jobs/s per scenario.

    python -m bench.batch_ingest [--backends sqlite,postgres] [--src PATH ...] [--repeat 3]

Each ``--src`` is a source tree the server runs from (default: this one); give an export of an
older commit too (``git archive COMMIT src | tar -x -C /tmp/old``) for a before/after table.
The trees take turns, repetition by repetition, so load from elsewhere on the machine hits
them alike. Scenarios a server does not offer (a batch endpoint before it existed) print "-".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
NATS_URL = "nats://127.0.0.1:4222"
JOB = {"action": {"type": "message", "text": "stand up"},
       "job_params": {"type": "recurring", "schedule": "0 9 * * 1-5", "timezone": "Asia/Taipei"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(backend: str, src: Path) -> Iterator[int]:
    port = free_port()
    tag = secrets.token_hex(4)
    env = {**os.environ, "PYTHONPATH": str(src), "ONTHEDOT_LOG_LEVEL": "WARNING"}
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "sqlite":
            env["ONTHEDOT_DATABASE_URL"] = f"sqlite:///{tmp}/bench.db"
        else:
            env.update(ONTHEDOT_DATABASE_URL=PG_DSN, ONTHEDOT_DATABASE_SCHEMA=f"bench_{tag}",
                       ONTHEDOT_QUEUE_URL=NATS_URL, ONTHEDOT_QUEUE_PREFIX=f"bench-{tag}")
        proc = subprocess.Popen([sys.executable, "-m", "onthedot.cli", "api", "--port",
                                 str(port)], env=env)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit("the server did not start") from None
                    time.sleep(0.1)
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            if backend == "postgres":
                subprocess.run(["psql", PG_DSN, "-qc", f"DROP SCHEMA bench_{tag} CASCADE"],
                               check=False, capture_output=True)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return status, await reader.readexactly(length)


def request(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def drive(port: int, path: str, body: bytes, requests: int, callers: int) -> list[int]:
    """``requests`` POSTs spread over ``callers`` keep-alive connections; their statuses."""
    payload = request(path, body)
    left = requests
    statuses: list[int] = []

    async def caller() -> None:
        nonlocal left
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while left > 0:
                left -= 1
                writer.write(payload)
                status, answer = await read_response(reader)
                if path.endswith(":batch") and status == 200:
                    statuses.extend(r["status"] for r in json.loads(answer)["results"])
                else:
                    statuses.append(status)
        finally:
            writer.close()

    await asyncio.gather(*(caller() for _ in range(callers)))
    return statuses


async def scenario(port: int, kind: str, callers: int, jobs: int) -> float | None:
    """Jobs created per second, or None when the server does not offer the endpoint."""
    if kind == "single":
        path, body, requests = "/v1/jobs", json.dumps(JOB).encode(), jobs
    else:
        path, body = "/v1/jobs:batch", json.dumps({"jobs": [JOB] * 1000}).encode()
        requests = jobs // 1000
    await drive(port, path, body, min(callers, requests), min(callers, requests))  # warm up
    started = time.perf_counter()
    statuses = await drive(port, path, body, requests, callers)
    elapsed = time.perf_counter() - started
    if kind == "batch" and statuses[0] >= 400:
        return None  # no batch endpoint here
    created = sum(1 for s in statuses if s in (200, 201))
    if created < len(statuses):
        raise SystemExit(f"{kind}: {len(statuses) - created} of {len(statuses)} not created")
    return created / elapsed


SCENARIOS = [("single", 1, 1_000), ("single", 16, 5_000), ("single", 64, 10_000),
             ("batch", 1, 20_000), ("batch", 4, 40_000)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--src", type=Path, action="append",
                        help="a source tree to run the server from (repeatable)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trees: list[Path] = args.src or [Path(__file__).parents[1] / "src"]
    for n, tree in enumerate(trees):
        print(f"[{n}] server from {tree}")
    print(f"jobs/s, median of {args.repeat} (min-max)")
    print(f"{'backend':9} {'scenario':27}" + "".join(f" {f'[{n}]':>22}" for n in range(len(trees))))
    for backend in args.backends.split(","):
        for kind, callers, jobs in SCENARIOS:
            figures: list[list[float]] = [[] for _ in trees]
            for _ in range(args.repeat):
                for n, tree in enumerate(trees):
                    with server(backend, tree) as port:  # a fresh database each time
                        got = asyncio.run(scenario(port, kind, callers, jobs))
                    if got is not None:
                        figures[n].append(got)
            label = (f"one per request, {callers:2} callers" if kind == "single"
                     else f"batch of 1000, {callers} callers")
            cells = []
            for runs in figures:
                if not runs:
                    cells.append(f" {'-':>22}")
                    continue
                cells.append(f" {statistics.median(runs):7,.0f} ({min(runs):,.0f}-{max(runs):,.0f})"
                             .rjust(23))
            print(f"{backend:9} {label:27}" + "".join(cells), flush=True)


if __name__ == "__main__":
    main()
