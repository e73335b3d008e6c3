"""HTTP client cost: one process keeping 64 / 256 / 1,024 webhook POSTs in flight over reused
connections, on loopback; requests/s and the client's CPU µs per request, client beside client
in the same run (issue 19: "measure the HTTP client and pick by the figure").

    python -m bench.http_client [--inflight 64,256,1024] [--seconds 3] [--reps 2]
    python -m bench --sections http --quick

Clients, each in this process, each POSTing the same small JSON body with the webhook action's
headers and reading the answer as the action does (streamed, capped):

* ``aiohttp (worker)``: the worker's own set-up -- ``guarded_client`` (httpx's client over the
  egress guard's aiohttp transport: every connection opened through the guard), one client
  whose pool holds a connection per call in flight (worker/worker.py, ``Worker.http``). Until
  the switch this case was ``httpx (worker)``: clients of 32 connections over httpcore's pool,
  taken in turn (docs/performance.md keeps its figures);
* ``httpx (one pool)``: one plain ``httpx.AsyncClient`` (httpcore's pool) sized to the calls in
  flight;
* ``aiohttp``: one plain ``ClientSession`` whose connector holds as many connections.

The receiver is ``tinyhttp fixed`` in its own process (a 201 with a small JSON body, as a
webhook receiver answers). Each figure: connections opened first (one request per caller, not
timed), then every caller sends its next request as soon as its answer is read, for
``--seconds``; requests/s = answers / wall time, CPU µs/request = this process's user + system
time (every thread) / answers. The generator ceiling beside it is bench/tinyhttp's bare client
on the same load: what the receiver and the machine allow at all. Both processes share the
machine's cores, so requests/s falls as the client's CPU per request rises; CPU µs/request is
the figure that carries over to another machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from bench.stats import Figure, Row

HOST = "127.0.0.1"
BODY = json.dumps({"run": "01JY5S1J7QX5V3T8C4M2N6P9RA", "text": "the webhook's payload"}).encode()
TIMEOUT_SECONDS = 30.0  # per request, as a run's action timeout would bound it
READ_CAP_BYTES = 64 * 1024
CLIENTS = ("aiohttp (worker)", "httpx (one pool)", "aiohttp")

Post = Callable[[int], Awaitable[int]]  # (caller's request number) -> status


def _headers(key: int) -> dict[str, str]:
    return {"User-Agent": "onthedot-bench", "Content-Type": "application/json",
            "Idempotency-Key": f"bench-{key}"}


@contextlib.asynccontextmanager
async def worker_clients(url: str, inflight: int) -> AsyncIterator[Post]:
    """The worker's client: guarded, one pool of a connection per call in flight."""
    import httpx

    from onthedot.actions.egress import EgressGuard, guarded_client, read_capped

    limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
    client = guarded_client(EgressGuard(allow=[HOST]), limits=limits)

    async def post(key: int) -> int:
        async with client.stream("POST", url, headers=_headers(key), content=BODY,
                                 timeout=TIMEOUT_SECONDS) as response:
            await read_capped(response, READ_CAP_BYTES)
            return response.status_code

    try:
        yield post
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def httpx_one_pool(url: str, inflight: int) -> AsyncIterator[Post]:
    import httpx

    limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
    client = httpx.AsyncClient(limits=limits, trust_env=False)

    async def post(key: int) -> int:
        async with client.stream("POST", url, headers=_headers(key), content=BODY,
                                 timeout=TIMEOUT_SECONDS) as response:
            async for _chunk in response.aiter_raw():
                pass
            return response.status_code

    try:
        yield post
    finally:
        await client.aclose()


@contextlib.asynccontextmanager
async def aiohttp_session(url: str, inflight: int) -> AsyncIterator[Post]:
    import aiohttp

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=inflight, limit_per_host=inflight),
        timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS), trust_env=False,
        auto_decompress=False)

    async def post(key: int) -> int:
        async with session.post(url, headers=_headers(key), data=BODY) as response:
            await response.content.read(READ_CAP_BYTES)
            return response.status

    try:
        yield post
    finally:
        await session.close()


FACTORIES: dict[str, Callable[[str, int], contextlib.AbstractAsyncContextManager[Post]]] = {
    "aiohttp (worker)": worker_clients, "httpx (one pool)": httpx_one_pool,
    "aiohttp": aiohttp_session}


async def drive(post: Post, inflight: int, seconds: float) -> tuple[float, float, int]:
    """(requests/s, CPU µs per request, failures): ``inflight`` callers, each sending its
    next request when the last was answered, for ``seconds`` after a warm-up round."""
    failures = 0

    async def caller(i: int, until: float | None) -> int:
        nonlocal failures
        done = 0
        while True:
            try:
                if await post(i * 1_000_000 + done) >= 300:
                    failures += 1
            except Exception:
                failures += 1
            done += 1
            if until is None or time.perf_counter() >= until:
                return done

    await asyncio.gather(*(caller(i, None) for i in range(inflight)))  # connections opened
    failures = 0
    cpu, began = time.process_time(), time.perf_counter()
    done = sum(await asyncio.gather(*(caller(i, began + seconds) for i in range(inflight))))
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    return done / wall, cpu * 1e6 / done, failures


async def ceiling(port: int, inflight: int, seconds: float, rate_hint: float) -> float:
    """bench/tinyhttp's bare client on the same POSTs: requests/s the receiver allows."""
    from bench.tinyhttp import encode_request, load

    raw = encode_request("POST", HOST, port, "/hook", BODY, _headers(0))
    total = max(inflight * 4, int(rate_hint * seconds))
    return (await load(HOST, port, raw, total, inflight)).per_second


async def measure(port: int, inflights: list[int], seconds: float, reps: int,
                  clients: list[str]) -> list[Row]:
    url = f"http://{HOST}:{port}/hook"
    rates: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    failed: dict[tuple[str, int], int] = {}
    ceilings: dict[int, list[float]] = {}
    for rep in range(reps):
        for inflight in inflights:
            # Each repetition takes the clients in another order, so a drift in the machine's
            # load does not always fall on the same one.
            order = clients[rep % len(clients):] + clients[:rep % len(clients)]
            for name in order:
                async with FACTORIES[name](url, inflight) as post:
                    rate, cpu, bad = await drive(post, inflight, seconds)
                rates.setdefault((name, inflight), []).append(rate)
                cpus.setdefault((name, inflight), []).append(cpu)
                failed[name, inflight] = failed.get((name, inflight), 0) + bad
            best = max(rates[name, inflight][-1] for name in clients)
            ceilings.setdefault(inflight, []).append(
                await ceiling(port, inflight, seconds, best))
    rows = []
    for inflight in inflights:
        for name in clients:
            key = (name, inflight)
            note = f"{failed[key]} failed" if failed[key] else ""
            rows.append(Row("http", name, f"{inflight:,} POSTs in flight", "requests/s",
                            Figure(rates[key]), ceiling=Figure(ceilings[inflight]), note=note,
                            extra={"CPU µs/request": Figure(cpus[key])}))
    return rows


async def http_rows(inflights: list[int], seconds: float, reps: int, logs: Path,
                    clients: list[str] | None = None) -> list[Row]:
    """For ``bench.run``: one row per client and calls in flight."""
    from bench.procs import tiny_server

    receiver, port = tiny_server("fixed", logs)
    try:
        return await measure(port, inflights, seconds, reps, list(clients or CLIENTS))
    finally:
        receiver.stop()


def render(rows: list[Row]) -> str:
    lines = ["| client | in flight | requests/s | CPU µs/request | tinyhttp ceiling req/s | note |",
             "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        cpu = r.extra["CPU µs/request"].text()
        ceil = r.ceiling.text() if r.ceiling is not None else ""
        lines.append(f"| {r.system} | {r.case.split(' ')[0]} | {r.value_text()} | {cpu} | "
                     f"{ceil} | {r.note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import os
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inflight", default="64,256,1024")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args(argv)
    inflights = [int(x) for x in args.inflight.split(",") if x.strip()]
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(http_rows(inflights, args.seconds, args.reps, Path(tmp), clients))
    print(f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; "
          f"{args.reps} repetitions of {args.seconds:g} s, median (min-max)")
    print(render(rows))


if __name__ == "__main__":
    main()
