"""Ingest, dispatch lateness and execution throughput for N runs due in the same second.

onthedot (all roles in one process, SQLite + table queue, ``message`` action) side by side with
APScheduler 3 (SQLAlchemyJobStore on SQLite, thread pool), the peer a Python user would
otherwise pick for "run this at that time".

    python -m bench.dispatch [--runs 10000] [--configs sqlite,postgres,postgres+nats] [--skip-peer]

Dispatch lateness = enqueue time - scheduled time (onthedot) / start of the job function -
scheduled time (APScheduler, which has no queue between finding and running a job).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import secrets
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.cost import Cost, Counts
from bench.stats import Figure, Row
from onthedot.config import Settings, load_settings
from onthedot.domain.models import JobParams, JobRun, RunStatus
from onthedot.metrics import DB_STATEMENTS, db_totals
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from onthedot.watcher.recurring import CONSUMER as RECURRING_CONSUMER

LEAD_SECONDS = 5.0  # the runs fall due this long after ingest ends
WINDOW_OPENS_SECONDS = 0.05  # the cost window opens this long before the due second
POLL_SECONDS = 0.2
INGEST_FLOOR_PER_S = 1000  # the due second leaves room for ingest at least this fast


class IngestTooSlow(Exception):
    """Creating the jobs took longer than the lead time, so the burst would be smeared."""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def onthedot_run(n: int, settings: Settings, webhook_url: str | None = None,
                       ingest_floor: float = INGEST_FLOOR_PER_S) -> dict[str, float]:
    rt = await Runtime.open(settings)
    started = time.perf_counter()
    specs = []
    # Jobs are created through the service, as the API would, with one shared due second.
    due_at = (datetime.now(UTC) + timedelta(
        seconds=LEAD_SECONDS + n / ingest_floor)).replace(microsecond=0)
    for i in range(n):
        action = ({"type": "message", "text": f"m{i}"} if webhook_url is None
                  else {"type": "webhook", "url": webhook_url})
        specs.append(JobSpec(action=action,
                             params=JobParams(type="one-time", time=due_at.isoformat())))
    sem = asyncio.Semaphore(64)

    async def create(spec: JobSpec) -> None:
        async with sem:
            await rt.service.create_job("bench", spec)

    await asyncio.gather(*(create(s) for s in specs))
    ingest_seconds = time.perf_counter() - started
    if datetime.now(UTC) >= due_at:
        await rt.close()
        raise IngestTooSlow("ingest took longer than the lead time; lower --runs")
    await rt.start(["watcher", "worker", "recurring"])
    poll = await _poll_cost(rt)
    # Nothing is claimed before it is due: the window from just before the due second until
    # every run is done and its event applied holds the whole drain (cost.py).
    await asyncio.sleep(max(0.0, (due_at - datetime.now(UTC)).total_seconds()
                            - WINDOW_OPENS_SECONDS))
    before, polls, by_role = _counts(), 0, DB_STATEMENTS.copy()
    while True:
        polls += 1
        if await _drained(rt, n):
            break
        await asyncio.sleep(POLL_SECONDS)
    cost = Cost.of(n, _counts() - before, polls, poll)
    by_role = DB_STATEMENTS - by_role  # the completion polls are the store's
    runs = await _all_runs(rt)
    await rt.close()
    lateness = [(r.enqueued_at - r.scheduled_at).total_seconds() for r in runs if r.enqueued_at]
    done = max(r.finished_at for r in runs if r.finished_at)
    return {
        "ingest_per_s": n / ingest_seconds,
        "p50": pct(lateness, 50), "p99": pct(lateness, 99),
        "runs_per_s": n / max(1e-9, (done - due_at).total_seconds()),
        "done_s": (done - due_at).total_seconds(),
        **dict(zip(("statements_per_run", "commits_per_run", "cpu_us_per_run"), cost.per_run,
                   strict=True)),
        **{f"statements_per_run {role}": count / n for (_d, role), count in by_role.items()},
    }


def _counts() -> Counts:
    """This process's statements, transactions and CPU time so far (every thread)."""
    statements, transactions = db_totals()
    return Counts(statements, transactions, time.process_time())


async def _drained(rt: Runtime, n: int) -> bool:
    """Whether all ``n`` runs succeeded and the recurring watcher applied their events (it
    ends each one-time job: work of the run's lifecycle that goes on after the run is done).
    Both reads every time, so each poll costs the same (``_poll_cost``)."""
    counts = await rt.store.runs_count_by_status()
    lag = await rt.store.events_lag(RECURRING_CONSUMER, datetime.now(UTC))
    return counts.get(RunStatus.SUCCEEDED, 0) >= n and lag == 0


async def _poll_cost(rt: Runtime) -> Counts:
    """What one completion poll costs in statements (the least of three, taken while idle: a
    background statement may fall inside one)."""
    costs = []
    for _ in range(3):
        before = _counts()
        await _drained(rt, 0)
        costs.append(_counts() - before)
    return min(costs, key=lambda c: c.statements)


async def _all_runs(rt: Runtime) -> list[JobRun]:
    from onthedot.store.base import JobListQuery

    runs: list[JobRun] = []
    before = None
    while True:
        jobs = await rt.store.jobs_list(JobListQuery(user_id="bench", before_job_id=before,
                                                     limit=1000))
        if not jobs:
            return runs
        for job in jobs:
            runs.extend(await rt.store.runs_list(job.job_id, 5, None))
        before = jobs[-1].job_id


# APScheduler's SQL store pickles jobs, so the job function must be importable by name.
_APS: dict[str, int] = {"n": 0}
_APS_STARTED: list[float] = []
_APS_LOCK = threading.Lock()
_APS_FINISHED = threading.Event()


def aps_job() -> None:
    with _APS_LOCK:
        _APS_STARTED.append(time.time())
        if len(_APS_STARTED) >= _APS["n"]:
            _APS_FINISHED.set()


def apscheduler_run(n: int, folder: Path) -> dict[str, float] | None:
    try:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError:
        return None
    # Run as ``python -m``, this file is __main__; the pickled job reference imports it again
    # as bench.dispatch, so share that module's state.
    import bench.dispatch as me

    me._APS["n"] = n
    started_at, finished = me._APS_STARTED, me._APS_FINISHED
    started_at.clear()
    finished.clear()
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{folder}/aps.db")},
        executors={"default": ThreadPoolExecutor(16)}, timezone=UTC,
        job_defaults={"misfire_grace_time": 3600, "coalesce": True})
    scheduler.start(paused=True)
    t0 = time.perf_counter()
    due_at = (datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS + n / 500)).replace(
        microsecond=0)
    for i in range(n):
        scheduler.add_job("bench.dispatch:aps_job", "date", run_date=due_at, id=f"j{i}")
    ingest_seconds = time.perf_counter() - t0
    scheduler.resume()
    finished.wait(timeout=600)
    scheduler.shutdown(wait=True)
    lateness = [t - due_at.timestamp() for t in started_at]
    return {"ingest_per_s": n / ingest_seconds, "p50": pct(lateness, 50),
            "p99": pct(lateness, 99),
            "runs_per_s": len(started_at) / max(1e-9, max(started_at) - due_at.timestamp())}


PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
NATS_URL = "nats://127.0.0.1:4222"


async def _drop_postgres_and_nats(schema: str, prefix: str) -> None:
    import psycopg

    from onthedot.queue.nats import delete_streams

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # our own generated name
    if prefix:
        await delete_streams(NATS_URL, prefix)


def configs(names: list[str], folder: Path) -> list[tuple[str, Settings, str | None]]:
    out: list[tuple[str, Settings, str | None]] = []
    tag = secrets.token_hex(3)
    for name in names:
        if name == "sqlite":
            out.append(("onthedot SQLite + table queue",
                        load_settings(database_url=f"sqlite:///{folder}/bench.db",
                                      min_interval=0), None))
        elif name in ("postgres", "pg"):
            schema = f"bench_{tag}"
            out.append(("onthedot PostgreSQL + table queue",
                        load_settings(database_url=PG_URL, database_schema=schema,
                                      min_interval=0, database_pool_size=20), f"{schema}:"))
        elif name in ("postgres+nats", "pg+nats"):
            schema, prefix = f"bench_{tag}", f"bench{tag}"
            out.append(("onthedot PostgreSQL + NATS",
                        load_settings(database_url=PG_URL, database_schema=schema,
                                      queue_url=NATS_URL, queue_prefix=prefix,
                                      min_interval=0, database_pool_size=20),
                        f"{schema}:{prefix}"))
        else:
            raise SystemExit(f"unknown config {name!r}: sqlite | postgres | postgres+nats")
    return out


def dispatch_rows(names: list[str], n: int, reps: int) -> list[Row]:
    """For ``bench.run``: all-done time (last finished run - due second) per configuration,
    with dispatch lateness and runs/s beside it."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            results, note = [], ""
            for rep in range(reps):
                folder = Path(tmp) / f"{name}-{rep}"  # a fresh SQLite file per repetition
                folder.mkdir()
                [(label, settings, cleanup)] = configs([name], folder)
                try:
                    results.append(asyncio.run(onthedot_run(n, settings)))
                except IngestTooSlow as exc:
                    note = str(exc)
                finally:
                    if cleanup:
                        schema, prefix = cleanup.split(":")
                        asyncio.run(_drop_postgres_and_nats(schema, prefix))
            label = label.replace("onthedot ", "onthedot in-process ")
            done = Figure([r["done_s"] for r in results]) if results else None
            rows.append(Row("dispatch", label, f"{n:,} message runs due in one second",
                            "all done s", done, digits=2, note=note, extra={
                                title: Figure([r[key] for r in results]) for title, key in (
                                    ("dispatch lateness p50 s", "p50"), ("p99 s", "p99"),
                                    ("runs/s", "runs_per_s"),
                                    ("statements/run", "statements_per_run"),
                                    ("commits/run", "commits_per_run"),
                                    ("CPU µs/run", "cpu_us_per_run"))} if results else {}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--configs", default="sqlite,postgres,postgres+nats",
                        help="comma-separated: sqlite, postgres (its table queue), "
                             "postgres+nats")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--ingest-floor", type=float, default=INGEST_FLOOR_PER_S,
                        help="jobs/s ingest is assumed to reach at least; the due second is "
                             "that far ahead (lower it on a loaded machine: ingest slower than "
                             "this is an error)")
    parser.add_argument("--action", choices=["message", "webhook"], default="message",
                        help="webhook: each run calls a loopback receiver in its own process")
    parser.add_argument("--profile", metavar="FILE",
                        help="write a cProfile of the onthedot runs (event-loop thread) to "
                             "FILE and print its top entries by own time")
    args = parser.parse_args()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        receiver, url = None, None
        if args.action == "webhook":
            from bench.procs import tiny_server

            receiver, port = tiny_server("receiver", folder)
            url = f"http://127.0.0.1:{port}/hook"
        for label, settings, cleanup in configs(args.configs.split(","), folder):
            if url is not None:
                settings = settings.model_copy(update={"egress_allow": "127.0.0.1"})
            try:
                if profiler is not None:
                    profiler.enable()
                rows.append((label, asyncio.run(onthedot_run(args.runs, settings, url,
                                                             args.ingest_floor))))
            finally:
                if profiler is not None:
                    profiler.disable()
                if cleanup:
                    schema, prefix = cleanup.split(":")
                    asyncio.run(_drop_postgres_and_nats(schema, prefix))
        if receiver is not None:
            receiver.stop()
        if not args.skip_peer:
            peer = apscheduler_run(args.runs, folder)
            if peer is not None:
                rows.append(("APScheduler 3 (SQLAlchemy/SQLite)", peer))
    if profiler is not None:
        import pstats

        profiler.dump_stats(args.profile)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    print(f"{args.runs:,} runs due in the same second; one process per system, 2 cores")
    print(f"{'system':<36} | {'ingest jobs/s':>13} | {'lateness p50 s':>14} | "
          f"{'lateness p99 s':>14} | {'runs/s':>8} | {'stmts/run':>9} | {'commits/run':>11} | "
          f"{'CPU µs/run':>10}")
    print("-" * 138)
    for name, r in rows:
        print(f"{name:<36} | {r['ingest_per_s']:>13,.0f} | {r['p50']:>14.3f} | "
              f"{r['p99']:>14.3f} | {r['runs_per_s']:>8,.0f} | "
              f"{r.get('statements_per_run', math.nan):>9.2f} | "
              f"{r.get('commits_per_run', math.nan):>11.2f} | "
              f"{r.get('cpu_us_per_run', math.nan):>10,.0f}")
    for name, r in rows:
        roles = ", ".join(f"{key.split(' ', 1)[1]} {value:.2f}" for key, value in r.items()
                          if key.startswith("statements_per_run "))
        if roles:
            print(f"{name}: statements per run by role (polls included): {roles}")
    print("stmts, commits: what the onthedot process sent to its database from the due second "
          "until all runs were done and their events applied, / runs (db/counting.py says what "
          "counts); CPU: its user + system time over the same window / runs")


if __name__ == "__main__":
    main()
