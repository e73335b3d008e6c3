"""Ingest, dispatch lateness and execution throughput for N runs due in the same second.

onthedot (all roles in one process, SQLite + table queue, ``message`` action) side by side with
APScheduler 3 (SQLAlchemyJobStore on SQLite, thread pool), the peer a Python user would
otherwise pick for "run this at that time".

    python -m bench.dispatch [--runs 10000] [--database-url postgresql://...] [--queue-url nats://...]

Dispatch lateness = enqueue time - scheduled time (onthedot) / start of the job function -
scheduled time (APScheduler, which has no queue between finding and running a job).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from onthedot.config import Settings
from onthedot.domain.models import JobParams, JobRun, RunStatus
from onthedot.runtime import Runtime
from onthedot.service import JobSpec

LEAD_SECONDS = 5.0  # the runs fall due this long after ingest ends


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def onthedot_run(n: int, settings: Settings) -> dict[str, float]:
    rt = await Runtime.open(settings)
    started = time.perf_counter()
    specs = []
    # Jobs are created through the service, as the API would, with one shared due second.
    due_at = (datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS + n / 2000)).replace(
        microsecond=0)
    for i in range(n):
        specs.append(JobSpec(action={"type": "message", "text": f"m{i}"},
                             params=JobParams(type="one-time", time=due_at.isoformat())))
    sem = asyncio.Semaphore(64)

    async def create(spec: JobSpec) -> None:
        async with sem:
            await rt.service.create_job("bench", spec)

    await asyncio.gather(*(create(s) for s in specs))
    ingest_seconds = time.perf_counter() - started
    if datetime.now(UTC) >= due_at:
        raise SystemExit("ingest took longer than the lead time; lower --runs")
    await rt.start(["watcher", "worker", "recurring"])
    while True:
        counts = await rt.store.runs_count_by_status()
        if counts.get(RunStatus.SUCCEEDED, 0) >= n:
            break
        await asyncio.sleep(0.2)
    runs = await _all_runs(rt)
    await rt.close()
    lateness = [(r.enqueued_at - r.scheduled_at).total_seconds() for r in runs if r.enqueued_at]
    done = max(r.finished_at for r in runs if r.finished_at)
    return {
        "ingest_per_s": n / ingest_seconds,
        "p50": pct(lateness, 50), "p99": pct(lateness, 99),
        "runs_per_s": n / max(1e-9, (done - due_at).total_seconds()),
    }


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


def apscheduler_run(n: int, folder: Path) -> dict[str, float] | None:
    try:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError:
        return None
    started_at: list[float] = []
    lock = threading.Lock()
    finished = threading.Event()

    def job() -> None:
        with lock:
            started_at.append(time.time())
            if len(started_at) >= n:
                finished.set()

    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{folder}/aps.db")},
        executors={"default": ThreadPoolExecutor(16)}, timezone=UTC,
        job_defaults={"misfire_grace_time": 3600, "coalesce": True})
    scheduler.start(paused=True)
    t0 = time.perf_counter()
    due_at = (datetime.now(UTC) + timedelta(seconds=LEAD_SECONDS + n / 500)).replace(
        microsecond=0)
    for i in range(n):
        scheduler.add_job(job, "date", run_date=due_at, id=f"j{i}")
    ingest_seconds = time.perf_counter() - t0
    scheduler.resume()
    finished.wait(timeout=600)
    scheduler.shutdown(wait=True)
    lateness = [t - due_at.timestamp() for t in started_at]
    return {"ingest_per_s": n / ingest_seconds, "p50": pct(lateness, 50),
            "p99": pct(lateness, 99),
            "runs_per_s": len(started_at) / max(1e-9, max(started_at) - due_at.timestamp())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--queue-url", default=None)
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = args.database_url or f"sqlite:///{folder}/bench.db"
        label = "onthedot " + ("SQLite" if url.startswith("sqlite") else "PostgreSQL") + \
            (" + NATS" if args.queue_url else " + table queue")
        settings = Settings(database_url=url, queue_url=args.queue_url, workers=64,
                            min_interval=0)
        rows.append((label, asyncio.run(onthedot_run(args.runs, settings))))
        if not args.skip_peer:
            peer = apscheduler_run(args.runs, folder)
            if peer is not None:
                rows.append(("APScheduler 3 (SQLAlchemy/SQLite)", peer))
    print(f"{args.runs:,} runs due in the same second")
    print(f"{'system':<36} | {'ingest jobs/s':>13} | {'lateness p50 s':>14} | "
          f"{'lateness p99 s':>14} | {'runs/s':>8}")
    print("-" * 98)
    for name, r in rows:
        print(f"{name:<36} | {r['ingest_per_s']:>13,.0f} | {r['p50']:>14.3f} | "
              f"{r['p99']:>14.3f} | {r['runs_per_s']:>8,.0f}")


if __name__ == "__main__":
    main()
