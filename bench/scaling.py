"""Scaling: the ingest and drain figures with 1, 2 and 4 onthedot processes
(``ONTHEDOT_PROCESSES``) on PostgreSQL + NATS, each printed beside what the capacity model of
docs/scaling.md predicts for it from the one-process measurement of the same run.

    python -m bench.scaling [--processes 1,2,4] [--requests 2000] [--runs 2000]
                            [--config pg+nats] [--reps 1]

For each process count it starts ``onthedot serve`` with that many processes on a fresh schema
and stream prefix, and measures:

* **ingest**: jobs/s of one job per request from 64 callers (the generator of bench/ingest.py);
* **drain**: N message runs due at one whole second, created beforehand with the batch
  endpoint; runs/s = N / (last finished_at - due), and the p99 of finished_at - due, read from
  the database itself (a scrape of /metrics reaches one process of several);

and over each window the CPU time (user + system) of four groups of processes: onthedot
(the supervisor and every child), PostgreSQL (every ``postgres`` process: its backends and its
writers), NATS (``nats-server``) and the generator (this process). Divided by the jobs or runs
of the window, these are the per-operation costs of the model.

The model (docs/scaling.md) is recomputable by hand: with ``c_on`` the onthedot CPU µs per
operation, ``c_all`` the sum over the four groups, ``P`` processes and ``C`` cores,

    predicted ops/s = min(P * 1e6 / c_on,  C * 1e6 / c_all)

each onthedot process is one core of Python at most, and every group shares the machine's C
cores. The costs come from the one-process measurement of the same run, so the P = 1 row is
the model's fit and the others are its predictions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.burst import BATCH_SIZE, due_second
from bench.ingest import BATCH_PATH, HOST, single_request
from bench.procs import PG_DSN, Backend, make_backend, onthedot_serve
from bench.tinyhttp import Connection, load

INGEST_CALLERS = 64
GROUPS = ("onthedot", "postgres", "nats", "generator")
DRAIN_LEAD_SECONDS = 3.0  # after the creates, before the due second
DRAIN_WAIT_SECONDS = 120.0
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Window:
    """One measured window: operations done, wall seconds, CPU seconds per group."""

    ops: int
    seconds: float
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    def per_op_us(self, group: str) -> float:
        return self.cpu.get(group, 0.0) * 1e6 / max(1, self.ops)


Reading = dict[str, dict[tuple[int, float], float]]  # group -> (pid, started) -> CPU s


def _cpu_by_process(names: tuple[str, ...]) -> dict[tuple[int, float], float]:
    """CPU seconds of each living process with one of ``names``, keyed by (pid, start time):
    backends come and go during a window, so a total over whichever exist at each end would
    lose or gain whole processes."""
    import psutil

    out: dict[tuple[int, float], float] = {}
    for proc in psutil.process_iter(["name", "create_time"]):
        if proc.info["name"] in names:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            out[(proc.pid, proc.info["create_time"])] = times.user + times.system
    return out


def cpu_reading(onthedot_pid: int) -> Reading:
    import psutil

    from bench.cost import process_cpu_seconds

    tree: dict[tuple[int, float], float] = {}
    root = psutil.Process(onthedot_pid)
    tree[(root.pid, root.create_time())] = process_cpu_seconds(onthedot_pid)
    return {"onthedot": tree,
            "postgres": _cpu_by_process(("postgres",)),
            "nats": _cpu_by_process(("nats-server",)),
            "generator": {(os.getpid(), 0.0): time.process_time()}}


def _spent(before: Reading, after: Reading) -> dict[str, float]:
    """CPU seconds of each group over the window: a process seen at both ends counts its
    difference, one started during the window all of its time (one that ended during it is
    gone and cannot be read: the figure is then a floor)."""
    return {group: sum(max(0.0, cpu - before[group].get(key, 0.0))
                       for key, cpu in procs.items())
            for group, procs in after.items()}


async def measure_ingest(port: int, pid: int, requests: int) -> Window:
    raw = single_request(port)
    await load(HOST, port, raw, 200, 4)  # warm-up: connections, prepared statements
    before = cpu_reading(pid)
    result = await load(HOST, port, raw, requests, INGEST_CALLERS)
    spent = _spent(before, cpu_reading(pid))
    ok = sum(n for status, n in result.statuses.items() if status == 201)
    return Window(ok, ok / result.per_second if result.per_second else 0.0, spent)


async def _create_due(port: int, runs: int, due: datetime) -> None:
    body = {"action": {"type": "message", "text": "scaling"},
            "job_params": {"type": "one-time", "time": due.isoformat()}}
    conn, left = Connection(HOST, port), runs
    try:
        while left > 0:
            size = min(BATCH_SIZE, left)
            answer = await conn.request("POST", BATCH_PATH,
                                        json.dumps({"jobs": [body] * size}).encode())
            if answer.status >= 300:
                raise RuntimeError(f"batch create answered {answer.status}")
            left -= size
    finally:
        await conn.close()


# The completion poll counts (cheap, an index on the due time); the lateness of each run is
# read once, after the window.
FINISHED_COUNT_SQL = """
SELECT count(*) FROM {runs} WHERE scheduled_at = %s AND status = 'SUCCEEDED'
"""
FINISHED_SQL = """
SELECT extract(epoch FROM finished_at - scheduled_at)
FROM {runs} WHERE scheduled_at = %s AND status = 'SUCCEEDED'
"""


async def _query(schema: str, text: str, due: datetime) -> list[float]:
    import psycopg
    from psycopg import sql

    query = sql.SQL(text).format(runs=sql.Identifier(schema, "job_runs"))
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        cur = await conn.execute(query, (due,))
        return [float(row[0]) for row in await cur.fetchall()]


async def measure_drain(port: int, pid: int, backend: Backend, runs: int
                        ) -> tuple[Window, float]:
    """(window, p99 lateness s): N message runs due at one second, until all are finished."""
    assert backend.schema is not None
    started = time.monotonic()
    # Lead: room for the creates at a modest 1,000 jobs/s, then a margin.
    due = due_second(DRAIN_LEAD_SECONDS + runs / 1000)
    await _create_due(port, runs, due)
    if time.monotonic() - started > DRAIN_LEAD_SECONDS + runs / 1000:
        raise RuntimeError("creating the runs took past their due second; lower --runs")
    await asyncio.sleep(max(0.0, due.timestamp() - time.time() - 0.05))
    before = cpu_reading(pid)
    deadline = due.timestamp() + DRAIN_WAIT_SECONDS
    while time.time() < deadline:
        if (await _query(backend.schema, FINISHED_COUNT_SQL, due))[0] >= runs:
            break
        await asyncio.sleep(POLL_SECONDS)
    spent = _spent(before, cpu_reading(pid))
    late = await _query(backend.schema, FINISHED_SQL, due)
    late.sort()
    last = late[-1] if late else DRAIN_WAIT_SECONDS
    p99 = late[min(len(late) - 1, int(0.99 * len(late)))] if late else float("nan")
    return Window(len(late), last, spent), p99


def predict(costs: Window, processes: int, cores: int) -> float:
    """The model: each process at most one core of its own work; all groups share the cores."""
    c_on = costs.per_op_us("onthedot")
    c_all = sum(costs.per_op_us(g) for g in GROUPS)
    if c_on <= 0 or c_all <= 0:
        return float("nan")
    return min(processes * 1e6 / c_on, cores * 1e6 / c_all)


@dataclass
class Measured:
    processes: int
    ingest: Window
    drain: Window
    drain_p99: float


async def measure(config: str, processes: int, requests: int, runs: int, folder: Path,
                  logs: Path) -> Measured:
    backend = make_backend(config, folder)
    try:
        async with onthedot_serve(backend, logs, processes=processes) as (child, port):
            ingest = await measure_ingest(port, child.pid, requests)
            drain, p99 = await measure_drain(port, child.pid, backend, runs)
            return Measured(processes, ingest, drain, p99)
    finally:
        await backend.cleanup()


def table(results: list[Measured], cores: int) -> str:
    """One row per (figure, process count): measured, predicted, and the costs per operation."""
    base = next((m for m in results if m.processes == 1), results[0])
    lines = ["| figure | processes | measured /s | model /s | onthedot µs/op | PostgreSQL µs/op "
             "| NATS µs/op | generator µs/op | detail |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, pick in (("ingest, 64 callers", lambda m: m.ingest),
                       ("drain, message runs due at once", lambda m: m.drain)):
        for m in results:
            w = pick(m)
            detail = f"{w.ops:,} ops in {w.seconds:.2f} s"
            if name.startswith("drain"):
                detail += f"; p99 lateness {m.drain_p99:.2f} s"
            lines.append(
                f"| {name} | {m.processes} | {w.rate:,.0f} | "
                f"{predict(pick(base), m.processes, cores):,.0f} | "
                + " | ".join(f"{w.per_op_us(g):,.0f}" for g in GROUPS) + f" | {detail} |")
    return "\n".join(lines)


def seed_sizing(base: Measured, creates: float = 10_000, runs: float = 10_000) -> str:
    """Cores each group needs for the seed's load, from the one-process costs of this run."""
    lines = ["| group | per create µs | per run µs | cores for 10,000 creates/s + 10,000 runs/s |",
             "|---|---:|---:|---:|"]
    for g in ("onthedot", "postgres", "nats"):
        a, r = base.ingest.per_op_us(g), base.drain.per_op_us(g)
        lines.append(f"| {g} | {a:,.0f} | {r:,.0f} | {(creates * a + runs * r) / 1e6:.1f} |")
    return "\n".join(lines)


async def scaling_report(config: str, counts: list[int], requests: int, runs: int,
                         folder: Path, logs: Path) -> str:
    """The section of ``python -m bench``: the table, then the seed's sizing."""
    cores = os.cpu_count() or 1
    results = [await measure(config, n, requests, runs, folder, logs) for n in counts]
    return (f"Scaling ({config}, {cores} cores, load average {os.getloadavg()[0]:.1f} at the "
            f"end):\n\n{table(results, cores)}\n\n{seed_sizing(results[0])}")


def main(argv: list[str] | None = None) -> None:
    import tempfile

    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--processes", default="1,2,4")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--config", default="pg+nats", choices=("pg+nats", "pg"))
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    cores = os.cpu_count() or 1
    counts = [int(x) for x in args.processes.split(",") if x.strip()]
    results: list[Measured] = []
    with tempfile.TemporaryDirectory(prefix="onthedot-scaling-") as tmp:
        folder = Path(tmp)
        logs = folder / "logs"
        logs.mkdir()
        for n in counts:
            print(f"[{time.strftime('%H:%M:%S')}] {n} process(es)", flush=True)
            results.append(asyncio.run(measure(args.config, n, args.requests, args.runs,
                                               folder, logs)))
    print(f"\n{cores} cores, load average {os.getloadavg()[0]:.1f} at the end\n")
    print(table(results, cores))
    print()
    print(seed_sizing(results[0]))
    if args.json:
        out: list[dict[str, Any]] = [
            {"processes": m.processes, "drain_p99": m.drain_p99,
             **{f"{k}_{f}": getattr(getattr(m, k), f) for k in ("ingest", "drain")
                for f in ("ops", "seconds", "cpu")}} for m in results]
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
