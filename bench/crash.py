"""Crash -> re-execution: a worker is SIGKILLed in the middle of a webhook call; how long until
another worker calls the webhook again?

A deployment of separate processes on PostgreSQL + NATS with a visibility timeout V
(``--crash-visibility``, default 3 s): ``onthedot api``, one process with the watcher, recurring
watcher and rescuer, and worker A. An immediate webhook job calls the receiver's ``/hang``,
which holds the first request of each key. Once it arrived, worker B is started and, when it is
ready, A is SIGKILLed; the figure is the time from the kill to the second arrival of the same
``Idempotency-Key``. The design bounds it by V plus a tick; the next repetition kills B.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.ingest import HOST
from bench.procs import (
    Child,
    Unavailable,
    free_port,
    make_backend,
    spawn,
    spawn_onthedot,
    tiny_server,
    wait_http,
    wait_log,
)
from bench.stats import Figure, Row
from bench.tinyhttp import Connection

ARRIVAL_TIMEOUT_SECONDS = 60.0
BACKGROUND_ROLES = "watcher,recurring,rescuer"
ROLES_MAIN = ("import asyncio, logging, sys; from onthedot.config import Settings; "
              "from onthedot.runtime import serve_roles; "
              "logging.basicConfig(level=logging.INFO, stream=sys.stderr); "
              "asyncio.run(serve_roles(Settings(), sys.argv[1].split(',')))")


async def _arrivals(rx: Connection) -> list[tuple[float, str]]:
    records = json.loads((await rx.request("GET", "/_records")).body)["records"]
    return [(at, key) for at, key, path in records if path == "/hang"]


async def _wait_arrival(rx: Connection, done: Callable[[list[tuple[float, str]]], bool]
                        ) -> list[tuple[float, str]]:
    """The receiver's /hang arrivals, once ``done(arrivals)`` holds."""
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        got = await _arrivals(rx)
        if done(got):
            return got
        await asyncio.sleep(0.02)
    raise Unavailable("the expected webhook call never arrived")


Arrivals = list[tuple[float, str]]


def _new_key(seen: set[str]) -> Callable[[Arrivals], bool]:
    return lambda got: any(key not in seen for _, key in got)


def _twice(key: str) -> Callable[[Arrivals], bool]:
    return lambda got: [k for _, k in got].count(key) >= 2


async def crash_rows(config: str, visibility: float, reps: int, folder: Path,
                     logs: Path) -> list[Row]:
    system = f"onthedot {make_backend(config, folder).label}"
    case = f"SIGKILL mid-run, V = {visibility:g} s"
    try:
        figure = await _crash(config, visibility, reps, folder, logs)
    except Unavailable as exc:
        return [Row("crash", system, case, "s", note=str(exc))]
    return [Row("crash", system, case, "s", figure, digits=2,
                note="kill -> webhook called again")]


async def _crash(config: str, visibility: float, reps: int, folder: Path, logs: Path) -> Figure:
    backend = make_backend(config, folder)
    receiver, receiver_port = tiny_server("receiver", logs)
    children: list[Child] = []
    # processes=1: the figure is what one worker process's crash costs
    env = backend.settings_env(visibility_timeout=visibility, port=free_port(), processes=1)
    rx, api = Connection(HOST, receiver_port), Connection(HOST, int(env["ONTHEDOT_PORT"]))
    figure = Figure()
    try:
        # the API first: it migrates the store before the other roles open it
        children.append(spawn_onthedot("api", ["api"], logs, env))
        await wait_http(children[-1], int(env["ONTHEDOT_PORT"]))
        children.append(spawn("roles", [sys.executable, "-c", ROLES_MAIN, BACKGROUND_ROLES],
                              logs, env))
        worker = spawn_onthedot("worker", ["worker"], logs, env)
        children.append(worker)
        await wait_log(worker, "running worker as")
        body = {"action": {"type": "webhook", "url": f"http://{HOST}:{receiver_port}/hang"},
                "job_params": {"type": "immediate"}, "timeout_seconds": 600}
        for _ in range(reps):
            seen = {k for _, k in await _arrivals(rx)}
            answer = await api.request("POST", "/v1/jobs", json.dumps(body).encode())
            if answer.status != 201:
                raise Unavailable(f"creating the job answered {answer.status}")
            arrivals = await _wait_arrival(rx, _new_key(seen))
            key = next(k for _, k in arrivals if k not in seen)
            spare = spawn_onthedot("worker", ["worker"], logs, env)
            children.append(spare)
            await wait_log(spare, "running worker as")
            killed_at = time.time()
            worker.kill()
            again = await _wait_arrival(rx, _twice(key))
            figure.values.append([at for at, k in again if k == key][1] - killed_at)
            worker = spare
        return figure
    finally:
        await rx.close()
        await api.close()
        for child in children:
            child.kill()
        receiver.stop()
        await backend.cleanup()
