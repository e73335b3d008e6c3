"""Ingest: jobs created per second over HTTP, black-box, against a real ``onthedot serve``.

One job per request at each concurrency (every caller its own keep-alive connection), and the
batch endpoint ``POST /v1/jobs:batch`` where the server has it. Each repetition is followed by
the same load against the generator's ceiling server (``tinyhttp fixed``, its own process), so
every figure is printed beside what the client itself could send at that moment.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.procs import Backend, Unavailable, make_backend, onthedot_serve, tiny_server
from bench.stats import Figure, Row
from bench.tinyhttp import Connection, encode_request, load

HOST = "127.0.0.1"
BATCH_PATH = "/v1/jobs:batch"
WARMUP_REQUESTS = 200
CEILING_MIN_REQUESTS = 5_000  # the ceiling run is short anyway; fewer would be noise


@dataclass(frozen=True)
class IngestPlan:
    configs: list[str]
    concurrencies: list[int]
    requests: int  # per repetition and concurrency
    batch_jobs: int  # jobs per repetition through the batch endpoint
    batch_size: int
    batch_callers: int
    reps: int


def job_body(i: int = 0) -> dict[str, object]:
    """A one-time job due tomorrow: ingest is measured alone, nothing falls due meanwhile."""
    due = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    return {"name": f"bench {i}", "action": {"type": "message", "text": "hello"},
            "job_params": {"type": "one-time", "time": due.isoformat()}}


def single_request(port: int) -> bytes:
    return encode_request("POST", HOST, port, "/v1/jobs", json.dumps(job_body()).encode())


def batch_request(port: int, size: int) -> bytes:
    body = json.dumps({"jobs": [job_body(i) for i in range(size)]}).encode()
    return encode_request("POST", HOST, port, BATCH_PATH, body)


async def batch_supported(port: int) -> str | None:
    """None if the server answers the batch endpoint, else why not (e.g. "404")."""
    conn = Connection(HOST, port)
    try:
        answer = await conn.send(batch_request(port, 1))
    finally:
        await conn.close()
    return None if answer.status in (200, 201, 207) else f"{BATCH_PATH} answered {answer.status}"


async def _measure(port: int, ceiling_port: int, raw_for: Callable[[int], bytes], total: int,
                   callers: int, reps: int, per_request: int) -> tuple[Figure, Figure, str]:
    """``raw_for(port)`` builds the request; returns (jobs/s, ceiling jobs/s, error note)."""
    ours, ceiling, bad = Figure(), Figure(), 0
    raw, raw_ceiling = raw_for(port), raw_for(ceiling_port)
    for _ in range(reps):
        result = await load(HOST, port, raw, total, callers)
        bad += sum(n for status, n in result.statuses.items() if status not in (200, 201))
        ours.values.append(result.per_second * per_request)
        top = await load(HOST, ceiling_port, raw_ceiling, max(total, CEILING_MIN_REQUESTS),
                         callers)
        ceiling.values.append(top.per_second * per_request)
    return ours, ceiling, (f"{bad} requests failed" if bad else "")


async def onthedot_ingest(plan: IngestPlan, folder: Path, logs: Path) -> list[Row]:
    rows: list[Row] = []
    ceiling_server, ceiling_port = tiny_server("fixed", logs)
    try:
        for name in plan.configs:
            backend = make_backend(name, folder)
            try:
                rows += await _one_config(plan, backend, ceiling_port, logs)
            finally:
                await backend.cleanup()
    finally:
        ceiling_server.stop()
    return rows


async def _one_config(plan: IngestPlan, backend: Backend, ceiling_port: int,
                      logs: Path) -> list[Row]:
    system = f"onthedot {backend.label}"
    cases = [f"{c} caller{'s' if c > 1 else ''}" for c in plan.concurrencies]
    cases.append(f"batch of {plan.batch_size}")
    try:
        async with onthedot_serve(backend, logs) as (_child, port):
            await load(HOST, port, single_request(port), WARMUP_REQUESTS, 4)
            rows = []
            for callers, case in zip(plan.concurrencies, cases, strict=False):
                ours, top, note = await _measure(port, ceiling_port, single_request,
                                                 plan.requests, callers, plan.reps, 1)
                rows.append(Row("ingest", system, case, "jobs/s", ours, ceiling=top, note=note))
            missing = await batch_supported(port)
            if missing:
                rows.append(Row("ingest", system, cases[-1], "jobs/s", note=missing))
            else:
                size = plan.batch_size
                ours, top, note = await _measure(
                    port, ceiling_port, lambda p: batch_request(p, size),
                    max(1, plan.batch_jobs // size), plan.batch_callers, plan.reps, size)
                rows.append(Row("ingest", system, cases[-1], "jobs/s", ours, ceiling=top,
                                note=note))
            return rows
    except Unavailable as exc:
        return [Row("ingest", system, case, "jobs/s", note=f"server did not start: {exc}")
                for case in cases]
