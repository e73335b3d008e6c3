"""Burst lateness: N one-time jobs due at the same whole second, against ``onthedot serve``
with its defaults.

* webhook action: the receiver (``tinyhttp receiver``, its own process) records when each
  ``Idempotency-Key`` (the run id) arrived; lateness = first arrival - due time, a key seen
  twice is a duplicate, a key never seen is missed;
* message action: lateness = ``finished_at - scheduled_at`` of each run, read back through
  ``GET /v1/jobs`` (``last_run``); a run with ``attempt > 1`` was executed again.

Jobs are created through the API (the batch endpoint if the server has it, else 64 concurrent
single creates); the due second is far enough ahead that creating them all ends before it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.cost import Cost, Counts, cost_extras, db_counts, process_cpu_seconds
from bench.ingest import BATCH_PATH, HOST, batch_supported
from bench.peers import Lateness, lateness_rows
from bench.procs import Child, Unavailable, make_backend, onthedot_serve, tiny_server
from bench.stats import Row
from bench.tinyhttp import Connection, encode_request, load

CREATE_CALLERS = 64
BATCH_SIZE = 500
POLL_SECONDS = 0.2
WINDOW_OPENS_SECONDS = 0.05  # the cost window opens this long before the due second (cost.py)
CALIBRATION_SCRAPES = 10  # back-to-back scrapes that measure what one costs


def _body(action: dict[str, Any], due: datetime) -> dict[str, Any]:
    return {"action": action, "job_params": {"type": "one-time", "time": due.isoformat()}}


async def _create(port: int, action: dict[str, Any], due: datetime, runs: int,
                  batch: bool) -> int:
    """Create ``runs`` jobs; returns how many requests/items failed."""
    body = _body(action, due)
    if not batch:
        raw = encode_request("POST", HOST, port, "/v1/jobs", json.dumps(body).encode())
        result = await load(HOST, port, raw, runs, CREATE_CALLERS)
        return sum(n for status, n in result.statuses.items() if status != 201)
    conn, failed, left = Connection(HOST, port), 0, runs
    try:
        while left > 0:
            size = min(BATCH_SIZE, left)
            answer = await conn.request("POST", BATCH_PATH,
                                        json.dumps({"jobs": [body] * size}).encode())
            items = json.loads(answer.body).get("results", []) if answer.status < 300 else []
            failed += size - sum(1 for item in items if item.get("status") == 201)
            left -= size
    finally:
        await conn.close()
    return failed


async def _get_json(conn: Connection, path: str) -> Any:
    answer = await conn.request("GET", path)
    return json.loads(answer.body)


def _finished(text: str) -> float:
    """Runs the server has finished so far (its Prometheus counter), from a scrape."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("onthedot_runs_finished_total{"))


def _events_applied(text: str) -> bool:
    """Whether the recurring watcher has applied every run event (its lag gauge is 0): it ends
    each one-time job, work of the run's lifecycle that goes on after the run is done."""
    return any(line.startswith("onthedot_run_event_lag_seconds ")
               and float(line.rsplit(" ", 1)[1]) == 0.0 for line in text.splitlines())


class Meter:
    """Reads the server's statement counts (a scrape) and CPU time (psutil); a scrape reads
    the store too, so what one costs is measured on the idle server and taken off (cost.py)."""

    def __init__(self, conn: Connection, pid: int, metrics_ports: list[int]) -> None:
        # One process: its /metrics on the API port. Several (a supervisor's children): each
        # one's own metrics port, their texts read together (the counters add up).
        self.conns = [Connection(HOST, p) for p in metrics_ports] or [conn]
        self.owned = bool(metrics_ports)
        self.pid = pid
        self.scrape = Counts(0.0, 0.0, 0.0)
        self.scrapes = 0  # taken since the window opened

    async def read(self) -> tuple[str, Counts]:
        texts = [(await c.request("GET", "/metrics")).body.decode() for c in self.conns]
        text = "\n".join(texts)
        self.scrapes += 1
        return text, Counts(*db_counts(text), process_cpu_seconds(self.pid))

    async def close(self) -> None:
        if self.owned:
            for conn in self.conns:
                await conn.close()

    async def calibrate(self) -> None:
        """What one scrape costs: its statements, the least of the back-to-back deltas (a
        background statement may fall between two); its CPU, the mean (psutil counts in
        clock ticks of 10 ms, longer than a scrape)."""
        readings = [(await self.read())[1] for _ in range(CALIBRATION_SCRAPES + 1)]
        least = min((b - a for a, b in itertools.pairwise(readings)),
                    key=lambda c: c.statements)
        cpu = (readings[-1].cpu_seconds - readings[0].cpu_seconds) / CALIBRATION_SCRAPES
        self.scrape = Counts(least.statements, least.transactions, cpu)

    async def open_window(self, due: datetime) -> Counts:
        await asyncio.sleep(max(0.0, due.timestamp() - time.time() - WINDOW_OPENS_SECONDS))
        _text, counts = await self.read()
        self.scrapes = 0
        return counts

    def cost(self, runs: int, before: Counts, after: Counts) -> Cost:
        return Cost.of(runs, after - before, self.scrapes, self.scrape)


async def _webhook_burst(port: int, child: Child, receiver_port: int, runs: int,
                         due: datetime, wait: float, batch: bool) -> tuple[Lateness, int, Cost]:
    rx, conn = Connection(HOST, receiver_port), Connection(HOST, port)
    meter = Meter(conn, child.pid, child.metrics_ports)
    try:
        await rx.request("GET", "/_reset")
        await meter.calibrate()
        action = {"type": "webhook", "url": f"http://{HOST}:{receiver_port}/hook"}
        failed = await _create(port, action, due, runs, batch)
        window = await meter.open_window(due)
        deadline = due.timestamp() + wait
        while time.time() < deadline:
            if (await _get_json(rx, "/_count"))["keys"] >= runs - failed:
                break
            await asyncio.sleep(POLL_SECONDS)
        while True:  # the cost window closes once the runs' events are applied too
            text, end = await meter.read()
            if _events_applied(text) or time.time() >= deadline:
                break
            await asyncio.sleep(POLL_SECONDS)
        records = (await _get_json(rx, "/_records"))["records"]
    finally:
        await rx.close()
        await conn.close()
        await meter.close()
    first: dict[str, float] = {}
    for at, key, _path in records:
        first.setdefault(key, at)
    return (Lateness([at - due.timestamp() for at in first.values()], runs - len(first),
                     len(records) - len(first)), failed, meter.cost(len(first), window, end))


async def _message_burst(port: int, child: Child, runs: int, due: datetime, wait: float,
                         batch: bool) -> tuple[Lateness, int, Cost]:
    conn = Connection(HOST, port)
    meter = Meter(conn, child.pid, child.metrics_ports)
    try:
        await meter.calibrate()
        before = _finished((await meter.read())[0])
        created_from = datetime.now(UTC) - timedelta(seconds=1)
        failed = await _create(port, {"type": "message", "text": "burst"}, due, runs, batch)
        end = window = await meter.open_window(due)
        deadline = due.timestamp() + wait
        while time.time() < deadline:
            text, end = await meter.read()
            if _finished(text) - before >= runs - failed and _events_applied(text):
                break
            await asyncio.sleep(POLL_SECONDS)
        cost = meter.cost(runs - failed, window, end)
        late, again, done = [], 0, 0
        token: str | None = None
        start = quote(created_from.isoformat())
        while True:
            path = f"/v1/jobs?page_size=100&start_time={start}"
            page = await _get_json(conn, path + (f"&page_token={token}" if token else ""))
            for job in page["jobs"]:
                run = job.get("last_run") or {}
                if run.get("status") == "SUCCEEDED" and run.get("finished_at"):
                    done += 1
                    late.append((_parse(run["finished_at"]) - due).total_seconds())
                    again += run["attempt"] > 1
            token = page.get("next_page_token")
            if not token:
                break
    finally:
        await conn.close()
        await meter.close()
    return Lateness(late, runs - done, again), failed, cost


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def due_second(lead: float) -> datetime:
    """A whole second at least ``lead`` seconds ahead (schedules fall on whole seconds)."""
    return datetime.fromtimestamp(math.ceil(time.time() + lead), UTC)


async def onthedot_burst(configs: list[str], actions: list[str], runs: int, reps: int,
                         leads: dict[str, float], wait: float, folder: Path,
                         logs: Path) -> list[Row]:
    rows: list[Row] = []
    receiver, receiver_port = tiny_server("receiver", logs)
    try:
        for name in configs:
            backend = make_backend(name, folder)
            system = f"onthedot {backend.label}"
            cases = {a: f"{runs:,} {a} runs" for a in actions}
            try:
                async with onthedot_serve(backend, logs) as (child, port):
                    batch = await batch_supported(port) is None
                    for action in actions:
                        out, failed, costs = [], 0, []
                        for _ in range(reps):
                            due = due_second(leads.get(name, 10.0))
                            if action == "webhook":
                                late, bad, cost = await _webhook_burst(
                                    port, child, receiver_port, runs, due, wait, batch)
                            else:
                                late, bad, cost = await _message_burst(port, child, runs,
                                                                       due, wait, batch)
                            out.append(late)
                            failed += bad
                            costs.append(cost)
                        note = "created by " + ("batch" if batch else f"{CREATE_CALLERS} callers")
                        if failed:
                            note += f"; {failed} creates failed"
                        got = lateness_rows(system, cases[action], out, note=note)
                        got[0].extra.update(cost_extras(costs))
                        rows += got
            except Unavailable as exc:
                for action in actions:
                    rows += lateness_rows(system, cases[action], [],
                                          note=f"server did not start: {exc}")
            finally:
                await backend.cleanup()
    finally:
        receiver.stop()
    return rows
