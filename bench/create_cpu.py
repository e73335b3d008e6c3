"""CPU per created job inside one API process, and where it goes.

``python -m bench.create_cpu sqlite|pg single64|batch [JOBS] [--profile FILE]`` opens a
runtime (a fresh SQLite file, or a fresh schema in the bench PostgreSQL) and calls the ASGI app
itself, with no HTTP server and no client in between: ``single64`` sends ``POST /v1/jobs`` from
64 concurrent tasks, ``batch`` sends ``POST /v1/jobs:batch`` with 500 jobs at a time (the
one-time job of ``bench/ingest.py``). It prints the process's CPU time per job (every thread
included, so SQLite's writer thread too) and, with ``--profile``, writes a cProfile of the
measured part (the profiler roughly doubles the CPU time; read its shares, not its totals).
The HTTP parsing of uvicorn is not in these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench.ingest import job_body
from bench.procs import PG_DSN
from onthedot.api.app import create_app
from onthedot.config import Settings
from onthedot.domain.clock import SystemClock
from onthedot.runtime import Runtime

CALLERS = 64
BATCH = 500
WARMUP = 50  # single creates before measuring (imports, caches, the pool)


async def call(app: Any, path: str, raw: bytes) -> tuple[int, bytes]:
    """One POST through the ASGI app; (status, body)."""
    received = False

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    status: list[int] = []
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(raw)).encode())],
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000)}
    await app(scope, receive, send)
    return status[0], b"".join(chunks)


async def measure(backend: str, mode: str, jobs: int, profile: Path | None) -> str:
    folder = Path(tempfile.mkdtemp(prefix="onthedot-create-cpu-"))
    schema = f"create_cpu_{uuid.uuid4().hex[:8]}"
    quotas: dict[str, Any] = {"max_active_jobs": 0, "create_rate_per_minute": 0}
    settings = (Settings(database_url=f"sqlite:///{folder}/cpu.db", **quotas)
                if backend == "sqlite" else
                Settings(database_url=PG_DSN, database_schema=schema, **quotas))
    runtime = await Runtime.open(settings, SystemClock())
    app = create_app(runtime)
    single = json.dumps(job_body()).encode()
    batch = json.dumps({"jobs": [job_body(i) for i in range(BATCH)]}).encode()
    try:
        for _ in range(WARMUP):
            await expect(app, "/v1/jobs", single, 201)
        await expect(app, "/v1/jobs:batch", batch, 200)
        profiler = cProfile.Profile() if profile else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        done = await (creates(app, single, jobs) if mode == "single64"
                      else batches(app, batch, jobs))
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await runtime.close()
        if backend != "sqlite":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")  # our own name, not input
    return (f"{backend} {mode}: {done} jobs, {1e6 * cpu / done:.0f} us CPU per job, "
            f"{done / wall:.0f} jobs/s")


async def expect(app: Any, path: str, raw: bytes, status: int) -> None:
    got, body = await call(app, path, raw)
    if got != status:
        raise SystemExit(f"{path} answered {got}: {body[:300]!r}")


async def creates(app: Any, raw: bytes, jobs: int) -> int:
    gate = asyncio.Semaphore(CALLERS)

    async def one() -> None:
        async with gate:
            await expect(app, "/v1/jobs", raw, 201)

    await asyncio.gather(*(one() for _ in range(jobs)))
    return jobs


async def batches(app: Any, raw: bytes, jobs: int) -> int:
    for _ in range(max(1, jobs // BATCH)):
        await expect(app, "/v1/jobs:batch", raw, 200)
    return max(1, jobs // BATCH) * BATCH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", choices=["sqlite", "pg"])
    parser.add_argument("mode", choices=["single64", "batch"])
    parser.add_argument("jobs", type=int, nargs="?", default=3000)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the measured part")
    args = parser.parse_args()
    print(asyncio.run(measure(args.backend, args.mode, args.jobs, args.profile)))


if __name__ == "__main__":
    main()
