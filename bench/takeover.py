"""Watcher takeover: a watcher is SIGKILLed with runs of its shards falling due; how long until
the survivor dispatches them?

A deployment of separate processes on PostgreSQL + NATS with the default lease settings:
``onthedot api``, two ``onthedot watcher`` processes (they split the shards) and a worker.
``TAKEOVER_RUNS`` one-time message jobs fall due evenly over ``WINDOW_SECONDS``; one second into
that window the watcher holding some of the shards is SIGKILLed. The figure is the time from
the kill to the first run of its shards dispatched (ENQUEUED) by the survivor; beside it, how
late the worst run of its shards was dispatched. The design bounds the takeover by the lease
plus a quarter of it (1.9 s by default). The next repetition starts a fresh watcher and kills
one of the two again.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.ingest import HOST
from bench.procs import (
    Backend,
    Child,
    Unavailable,
    free_port,
    make_backend,
    spawn_onthedot,
    wait_http,
    wait_log,
)
from bench.stats import Figure, Row
from bench.tinyhttp import Connection

TAKEOVER_RUNS = 200
WINDOW_SECONDS = 6.0
LEAD_SECONDS = 4.0  # the jobs are created before the first falls due
KILL_AFTER_SECONDS = 1.0  # into the window
SPLIT_TIMEOUT_SECONDS = 30.0
DISPATCH_TIMEOUT_SECONDS = 60.0


async def takeover_rows(config: str, reps: int, folder: Path, logs: Path) -> list[Row]:
    system = f"onthedot {make_backend(config, folder).label}"
    case = f"SIGKILL a watcher, {TAKEOVER_RUNS} runs due over {WINDOW_SECONDS:g} s"
    try:
        takeover, lateness = await _takeover(config, reps, folder, logs)
    except Unavailable as exc:
        return [Row("crash", system, case, "s", note=str(exc))]
    return [Row("crash", system, case, "s", takeover, digits=2,
                extra={"its runs' worst dispatch lateness s": lateness},
                note="kill -> first run of its shards dispatched")]


async def _takeover(config: str, reps: int, folder: Path,
                    logs: Path) -> tuple[Figure, Figure]:
    backend = make_backend(config, folder)
    if backend.schema is None:
        raise Unavailable("the takeover figure needs PostgreSQL (a shared store)")
    # No per-user quotas: a repetition creates TAKEOVER_RUNS jobs at once.
    # processes=1: the figure is one watcher taking over from another, process by process
    env = backend.settings_env(port=free_port(), max_active_jobs=0, create_rate_per_minute=0,
                               processes=1)
    api = Connection(HOST, int(env["ONTHEDOT_PORT"]))
    children: list[Child] = []
    takeover, lateness = Figure(), Figure()
    try:
        children.append(spawn_onthedot("api", ["api"], logs, env))  # it migrates the store
        await wait_http(children[-1], int(env["ONTHEDOT_PORT"]))
        worker = spawn_onthedot("worker", ["worker"], logs, env)
        children.append(worker)
        watchers = []
        for _ in range(2):
            watchers.append(spawn_onthedot("watcher", ["watcher"], logs, env))
            children.append(watchers[-1])
        for child in [worker, *watchers]:
            await wait_log(child, "running ")
        for rep in range(reps):
            owners = await _wait_split(backend, watchers)
            doomed = next(w for w in watchers if any(f"-{w.pid}-" in o for o in owners.values()))
            its_shards = {s for s, o in owners.items() if f"-{doomed.pid}-" in o}
            first_due = await _create_jobs(api, rep)
            await _until(first_due + timedelta(seconds=KILL_AFTER_SECONDS))
            doomed.kill()
            killed_at = datetime.now(UTC)
            runs = await _dispatched(backend, its_shards)
            after = [enq for _, enq in runs if enq > killed_at]
            if not after:
                raise Unavailable("no run of the killed watcher's shards fell due after the kill")
            takeover.values.append((min(after) - killed_at).total_seconds())
            lateness.values.append(max((enq - at).total_seconds() for at, enq in runs))
            watchers.remove(doomed)
            watchers.append(spawn_onthedot("watcher", ["watcher"], logs, env))
            children.append(watchers[-1])
            await wait_log(watchers[-1], "running ")
        return takeover, lateness
    finally:
        await api.close()
        for child in children:
            child.kill()
        await backend.cleanup()


async def _create_jobs(api: Connection, rep: int) -> datetime:
    """One ``POST /v1/jobs:batch``; returns when the first job falls due."""
    first_due = datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS)
    jobs = [{"name": f"takeover {rep}-{i}", "action": {"type": "message", "text": "hi"},
             "job_params": {"type": "one-time", "time": (
                 first_due + timedelta(seconds=WINDOW_SECONDS * i / TAKEOVER_RUNS)).isoformat()}}
            for i in range(TAKEOVER_RUNS)]
    answer = await api.request("POST", "/v1/jobs:batch", json.dumps({"jobs": jobs}).encode())
    statuses = {item.get("status") for item in json.loads(answer.body).get("results", [])}
    if answer.status != 200 or statuses - {201}:
        raise Unavailable(f"creating the jobs answered {answer.status} {sorted(statuses)}")
    if datetime.now(UTC) >= first_due:
        raise Unavailable("creating the jobs took longer than their lead")
    return first_due


async def _until(at: datetime) -> None:
    await asyncio.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()))


async def _query(backend: Backend, statement: str) -> list[tuple[object, ...]]:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(backend.env["ONTHEDOT_DATABASE_URL"],
                                                     autocommit=True) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(
            sql.Identifier(backend.schema or "")))
        cur = await conn.execute(statement.encode())
        return list(await cur.fetchall())


async def _wait_split(backend: Backend, watchers: list[Child]) -> dict[int, str]:
    """The live shard owners, once both watchers hold some."""
    deadline = time.monotonic() + SPLIT_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        rows = await _query(backend, "SELECT shard, owner FROM shard_leases "
                                     "WHERE expires_at > now()")
        owners = {int(str(s)): str(o) for s, o in rows}
        if all(any(f"-{w.pid}-" in o for o in owners.values()) for w in watchers):
            return owners
        await asyncio.sleep(0.1)
    raise Unavailable("the two watchers did not split the shards")


async def _dispatched(backend: Backend, shards: set[int]) -> list[tuple[datetime, datetime]]:
    """(scheduled_at, enqueued_at) of every run of ``shards``, once none is PENDING."""
    wanted = ",".join(str(s) for s in sorted(shards))
    deadline = time.monotonic() + DISPATCH_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        rows = await _query(backend, "SELECT scheduled_at, enqueued_at, status FROM job_runs "
                                     f"WHERE shard IN ({wanted})")  # our own integers
        if rows and all(status != "PENDING" for _, _, status in rows):
            return [(at, enq) for at, enq, _ in rows  # type: ignore[misc]
                    if isinstance(at, datetime) and isinstance(enq, datetime)]
        await asyncio.sleep(0.1)
    raise Unavailable("the runs of the killed watcher's shards were not dispatched in time")
