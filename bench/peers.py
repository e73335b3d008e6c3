"""The peers, measured like onthedot on the same PostgreSQL and Redis in the same run.

* Procrastinate (PostgreSQL task queue): ``defer_async`` at each concurrency and
  ``batch_defer_async`` in batches, into a database of its own created for the run; its worker
  runs in its own process (``python -m bench.peers procrastinate-worker``).
* Celery with a Redis broker: ``apply_async(eta=...)`` from threads (it is a synchronous client);
  its worker is ``celery worker`` with the prefork pool, one child per core.

Both execute a no-op task in the burst benchmark. Lateness is measured as close as each allows
to where onthedot's is (the moment the work is done): Procrastinate's own ``succeeded`` event
time; for Celery the task appends its job id and wall-clock time to a Redis list.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.procs import PG_DSN, REDIS_URL, Unavailable, spawn, wait_log
from bench.stats import Figure, Row, pct

PROCRASTINATE_DB = "onthedot_bench_procrastinate"
PROCRASTINATE_POOL = 10  # connections, as onthedot's default database_pool_size
PROCRASTINATE_CONCURRENCY = 16  # jobs one worker runs at once, as onthedot's default workers
PROCRASTINATE_POLL_SECONDS = 1.0  # default 5: scheduled jobs are found by polling only
CELERY_REDIS_DB = 7  # a database of its own, flushed before and after
CELERY_CHILDREN = 2  # prefork pool: one per core
ENV_CELERY_BROKER = "BENCH_CELERY_BROKER"
ENV_CELERY_RESULTS = "BENCH_CELERY_RESULTS"  # Redis list the no-op task appends to
ENV_PROCRASTINATE_DSN = "BENCH_PROCRASTINATE_DSN"


def procrastinate_dsn() -> str:
    base = PG_DSN.rsplit("/", 1)[0]
    return os.environ.get(ENV_PROCRASTINATE_DSN, f"{base}/{PROCRASTINATE_DB}")


def celery_broker() -> str:
    return os.environ.get(ENV_CELERY_BROKER, f"{REDIS_URL.rsplit('/', 1)[0]}/{CELERY_REDIS_DB}")


# --- Celery ----------------------------------------------------------------------------------
@functools.cache
def make_celery() -> Any:
    """One app per process, built on first use (``celery -A bench.peers:celery_app`` too)."""
    from celery import Celery

    app = Celery("onthedot_bench", broker=celery_broker())
    app.conf.update(task_ignore_result=True, broker_connection_retry_on_startup=True,
                    worker_hijack_root_logger=False, enable_utc=True)

    @app.task(name="bench.noop", bind=True)  # type: ignore[untyped-decorator]
    def noop(self: Any) -> None:
        import redis

        redis.Redis.from_url(celery_broker()).rpush(
            os.environ[ENV_CELERY_RESULTS], f"{self.request.id} {time.time()}")

    return app


def __getattr__(name: str) -> Any:
    # `celery -A bench.peers:celery_app` looks the app up as an attribute: built only then, so
    # importing this module needs neither Celery nor Redis.
    if name == "celery_app":
        return make_celery()
    raise AttributeError(name)


def _celery_send(app: Any, total: int, callers: int, eta: datetime, queue: str,
                 warm: bool = True) -> float:
    """``total`` apply_async calls from ``callers`` threads; returns calls per second. ``warm``
    sends one more, untimed, first (it connects the producer pool)."""
    task = app.tasks["bench.noop"]
    lock, left = threading.Lock(), [total]

    def caller() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            task.apply_async(eta=eta, queue=queue)

    with ThreadPoolExecutor(callers) as pool:
        if warm:
            task.apply_async(eta=eta, queue=queue)
        started = time.perf_counter()
        for future in [pool.submit(caller) for _ in range(callers)]:
            future.result()
        return total / (time.perf_counter() - started)


def _flush_celery() -> None:
    import redis

    redis.Redis.from_url(celery_broker()).flushdb()


def celery_ingest(concurrencies: list[int], total: int, reps: int) -> list[Row]:
    try:
        app = make_celery()
        _flush_celery()
    except Exception as exc:  # a missing package or a stopped Redis: the row says which
        return [Row("ingest", "Celery (Redis)", f"{c} callers", "jobs/s", note=str(exc))
                for c in concurrencies]
    rows = []
    eta = datetime.now(UTC) + timedelta(days=1)
    queue = f"bench-{secrets.token_hex(3)}"
    try:
        for callers in concurrencies:
            figure = Figure([_celery_send(app, total, callers, eta, queue) for _ in range(reps)])
            rows.append(Row("ingest", "Celery (Redis)", _callers(callers),
                            "jobs/s", figure, note="apply_async(eta=...)"))
    finally:
        _flush_celery()
    return rows


def _callers(n: int) -> str:
    return f"{n} caller{'s' if n > 1 else ''}"


# --- Procrastinate ---------------------------------------------------------------------------
def make_procrastinate(pool: int = PROCRASTINATE_POOL) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=procrastinate_dsn(), min_size=1, max_size=pool))

    @app.task(name="bench.noop")
    async def noop() -> None:
        return None

    return app


async def _recreate_procrastinate_db() -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        name = sql.Identifier(PROCRASTINATE_DB)
        await conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    app = make_procrastinate()
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def drop_procrastinate_db() -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(PROCRASTINATE_DB)))


async def _defer_rate(app: Any, total: int, callers: int, at: datetime) -> float:
    task = app.tasks["bench.noop"].configure(schedule_at=at)
    left = total

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await task.defer_async()

    await task.defer_async()  # opens a pool connection, untimed
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return total / (time.perf_counter() - started)


async def _batch_rate(app: Any, total: int, size: int, at: datetime) -> float:
    task = app.tasks["bench.noop"].configure(schedule_at=at)
    started = time.perf_counter()
    for _ in range(max(1, total // size)):
        await task.batch_defer_async(*([{}] * size))
    return max(1, total // size) * size / (time.perf_counter() - started)


async def procrastinate_ingest(concurrencies: list[int], total: int, batch_jobs: int,
                               batch_size: int, reps: int) -> list[Row]:
    system = "Procrastinate (PostgreSQL)"
    cases = [_callers(c) for c in concurrencies] + [f"batch of {batch_size}"]
    try:
        await _recreate_procrastinate_db()
    except Exception as exc:  # a missing package: the row says which
        return [Row("ingest", system, case, "jobs/s", note=str(exc)) for case in cases]
    rows = []
    at = datetime.now(UTC) + timedelta(days=1)
    try:
        app = make_procrastinate()
        async with app.open_async():
            for callers, case in zip(concurrencies, cases, strict=False):
                figure = Figure([await _defer_rate(app, total, callers, at)
                                 for _ in range(reps)])
                rows.append(Row("ingest", system, case, "jobs/s", figure, note="defer_async"))
            figure = Figure([await _batch_rate(app, batch_jobs, batch_size, at)
                             for _ in range(reps)])
            rows.append(Row("ingest", system, cases[-1], "jobs/s", figure,
                            note="batch_defer_async"))
    finally:
        await drop_procrastinate_db()
    return rows


# --- burst: N no-op tasks due at one instant -------------------------------------------------
@dataclass
class Lateness:
    """One burst repetition: lateness of each executed job, plus what was missed or doubled."""

    late: list[float]
    missed: int
    duplicated: int


def lateness_rows(system: str, case: str, reps: list[Lateness], note: str = "") -> list[Row]:
    if not reps:
        return [Row("burst", system, case, "p99 s", note=note or "not run")]
    extra = {
        "p50 s": Figure([pct(r.late, 50) if r.late else float("nan") for r in reps]),
        "max s": Figure([max(r.late) if r.late else float("nan") for r in reps]),
        "missed": Figure([float(r.missed) for r in reps]),
        "duplicated": Figure([float(r.duplicated) for r in reps]),
    }
    p99 = Figure([pct(r.late, 99) if r.late else float("nan") for r in reps])
    return [Row("burst", system, case, "p99 s", p99, digits=2, note=note, extra=extra)]


async def _until(done: Callable[[], bool], deadline: float) -> None:
    while time.time() < deadline:
        if done():
            return
        await asyncio.sleep(0.2)


async def celery_burst(runs: int, reps: int, lead: float, wait: float, logs: Path) -> list[Row]:
    import redis

    system, case = "Celery (Redis, prefork 2)", f"{runs:,} no-op tasks"
    try:
        app = make_celery()
        _flush_celery()
    except Exception as exc:
        return lateness_rows(system, case, [], note=str(exc))
    queue, results = f"bench-{secrets.token_hex(3)}", f"bench-results-{secrets.token_hex(3)}"
    worker = spawn("celery-worker", [
        sys.executable, "-m", "celery", "-A", "bench.peers:celery_app", "worker", "-P",
        "prefork", "-c", str(CELERY_CHILDREN), "-Q", queue, "-l", "INFO", "--without-gossip",
        "--without-mingle", "--without-heartbeat"], logs, {ENV_CELERY_RESULTS: results})
    store = redis.Redis.from_url(celery_broker())
    out = []
    try:
        await wait_log(worker, "ready.")
        for _ in range(reps):
            store.delete(results)
            due = datetime.now(UTC) + timedelta(seconds=lead)
            await asyncio.to_thread(_celery_send, app, runs, 16, due, queue, False)
            await _until(lambda: store.llen(results) >= runs, due.timestamp() + wait)
            seen: Counter[str] = Counter()
            first: dict[str, float] = {}
            for item in store.lrange(results, 0, -1):
                task_id, at = (item.decode() if isinstance(item, bytes) else item).split()
                seen[task_id] += 1
                first.setdefault(task_id, float(at))
            out.append(Lateness([t - due.timestamp() for t in first.values()],
                                runs - len(first), sum(seen.values()) - len(seen)))
    except Unavailable as exc:
        return lateness_rows(system, case, [], note=f"worker did not start: {exc}")
    finally:
        worker.stop()
        _flush_celery()
    return lateness_rows(system, case, out, note="eta; task records its own start")


async def procrastinate_burst(runs: int, reps: int, lead: float, wait: float,
                              logs: Path) -> list[Row]:
    system = f"Procrastinate (worker ×{PROCRASTINATE_CONCURRENCY}, poll "\
             f"{PROCRASTINATE_POLL_SECONDS:g} s)"
    case = f"{runs:,} no-op tasks"
    try:
        await _recreate_procrastinate_db()
    except Exception as exc:
        return lateness_rows(system, case, [], note=str(exc))
    worker = spawn("procrastinate-worker", [sys.executable, "-m", "bench.peers",
                                            "procrastinate-worker"], logs)
    out = []
    try:
        await wait_log(worker, "worker ready")
        app = make_procrastinate()
        async with app.open_async():
            for _ in range(reps):
                due = datetime.now(UTC) + timedelta(seconds=lead)
                ids = await app.tasks["bench.noop"].configure(schedule_at=due).batch_defer_async(
                    *([{}] * runs))
                out.append(await _procrastinate_lateness(app, ids, due, wait))
    except Unavailable as exc:
        return lateness_rows(system, case, [], note=f"worker did not start: {exc}")
    finally:
        worker.stop()
        await drop_procrastinate_db()
    return lateness_rows(system, case, out, note="schedule_at; its succeeded event")


async def _procrastinate_lateness(app: Any, ids: list[int], due: datetime,
                                  wait: float) -> Lateness:
    connector = app.connector
    query = ("SELECT count(*) AS n FROM procrastinate_jobs WHERE id = ANY(%(ids)s) "
             "AND status = 'succeeded'")
    deadline = due.timestamp() + wait
    while time.time() < deadline:
        row = await connector.execute_query_one_async(query, ids=ids)
        if row["n"] >= len(ids):
            break
        await asyncio.sleep(0.2)
    rows = await connector.execute_query_all_async(
        "SELECT job_id, type::text AS type, at FROM procrastinate_events "
        "WHERE job_id = ANY(%(ids)s) AND type IN ('started', 'succeeded')", ids=ids)
    starts = Counter(r["job_id"] for r in rows if r["type"] == "started")
    done = {r["job_id"]: r["at"] for r in rows if r["type"] == "succeeded"}
    return Lateness([(at - due).total_seconds() for at in done.values()],
                    len(ids) - len(done), sum(n - 1 for n in starts.values() if n > 1))


async def _procrastinate_worker() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)
    app = make_procrastinate(pool=PROCRASTINATE_CONCURRENCY + 2)
    async with app.open_async():
        print("worker ready", flush=True)
        await app.run_worker_async(concurrency=PROCRASTINATE_CONCURRENCY,
                                   fetch_job_polling_interval=PROCRASTINATE_POLL_SECONDS,
                                   install_signal_handlers=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="peer workers of the benchmarks")
    parser.add_argument("role", choices=["procrastinate-worker"])
    parser.parse_args()
    asyncio.run(_procrastinate_worker())


if __name__ == "__main__":
    main()
