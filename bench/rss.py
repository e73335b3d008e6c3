"""Peak resident memory of ``onthedot worker`` and ``onthedot watcher`` processes with 1 M
future runs stored (PostgreSQL + NATS), beside the same processes over an empty store.

The stored runs are loaded with SQL (as in ``bench.scan``); a thousand more are due at once so
that the watcher dispatches and the worker executes while being watched. Each process runs for
``--rss-seconds``; its peak is the kernel's high-water mark (``VmHWM`` in /proc/PID/status), so
no short spike between two samples is missed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.procs import PG_DSN, Child, Unavailable, make_backend, spawn_onthedot, wait_log
from bench.scan import load_due, load_future
from bench.stats import Figure, Row

DUE_RUNS = 1_000
ROLES = ("worker", "watcher")


def peak_rss_mb(pid: int) -> float:
    """The process's high-water resident set size, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


async def _fill(schema: str, stored: int) -> None:
    from onthedot.store.postgres import PostgresStore

    store = PostgresStore(PG_DSN, schema=schema, retention_days=3650)
    try:
        await store.migrate()
    finally:
        await store.close()
    now = datetime.now(UTC)
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        await conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        if stored:
            await load_future(conn, 0, stored, now)
        await load_due(conn, DUE_RUNS, now)
        await conn.execute("VACUUM ANALYZE job_runs")


async def _one(stored: int, seconds: float, folder: Path, logs: Path) -> dict[str, float]:
    backend = make_backend("pg+nats", folder)
    children: list[Child] = []
    try:
        assert backend.schema is not None
        await _fill(backend.schema, stored)
        env = backend.settings_env()
        for role in ROLES:
            children.append(spawn_onthedot(role, [role], logs, env))
        for child in children:
            await wait_log(child, f"running {child.name} as")
        deadline = time.monotonic() + seconds
        peaks = dict.fromkeys(ROLES, 0.0)
        while time.monotonic() < deadline:
            for child in children:
                if not child.alive():
                    raise Unavailable(f"{child.name} exited: {child.last_line()}")
                peaks[child.name] = peak_rss_mb(child.pid)
            await asyncio.sleep(0.5)
        return peaks
    finally:
        for child in children:
            child.stop()
        await backend.cleanup()


async def rss_rows(stored: int, seconds: float, reps: int, folder: Path,
                   logs: Path) -> list[Row]:
    rows = []
    for count in (0, stored):
        figures = {role: Figure() for role in ROLES}
        note = ""
        try:
            for _ in range(reps):
                for role, peak in (await _one(count, seconds, folder, logs)).items():
                    figures[role].values.append(peak)
        except Unavailable as exc:
            note = str(exc)
        for role in ROLES:
            rows.append(Row("rss", f"onthedot {role} (PostgreSQL + NATS)",
                            f"{count:,} future runs stored", "peak MiB",
                            figures[role] if figures[role].values else None, digits=0,
                            note=note))
    return rows
