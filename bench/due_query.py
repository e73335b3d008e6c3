"""Due-run query time with 10 thousand vs 1 million stored future runs (the goal is flat).

Side by side with APScheduler 3's SQLAlchemyJobStore on SQLite (``get_due_jobs``), the peer a
Python user would otherwise pick, holding the same number of future jobs.

    python -m bench.due_query [--sizes 10000,1000000] [--due 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from onthedot.db.timestamps import ts
from onthedot.domain.ids import new_ulid, run_id_for, shard_of, time_bucket_of
from onthedot.store.base import DueClaim
from onthedot.store.sqlite import SqliteStore

NOW = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
REPEATS = 20


def _fill(path: str, future: int, due: int) -> None:
    """Bulk-load jobs and runs with plain SQL (the service would take minutes for a million)."""
    conn = sqlite3.connect(path)
    job_rows, run_rows = [], []
    for i in range(future + due):
        job_id = new_ulid(NOW)
        at = NOW - timedelta(seconds=1) if i < due else NOW + timedelta(minutes=1 + i % 525_600)
        job_rows.append((job_id, "bench", "b", '{"type":"message","text":"x"}', "one-time",
                         ts(at), "UTC", "scheduled", '{"max_attempts":3,"backoff_seconds":10,'
                         '"max_backoff_seconds":3600}', "run_late", 60.0, ts(NOW), ts(NOW)))
        run_rows.append((run_id_for(job_id, at), job_id, time_bucket_of(at), shard_of(job_id),
                         ts(at), "scheduled", "PENDING", 0))
    conn.executemany(
        "INSERT INTO jobs (job_id, user_id, name, action, job_type, run_time, timezone, status,"
        " retry_policy, misfire_policy, timeout_seconds, created_at, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", job_rows)
    conn.executemany(
        "INSERT INTO job_runs (run_id, job_id, time_bucket, shard, scheduled_at, kind, status,"
        " attempt) VALUES (?,?,?,?,?,?,?,?)", run_rows)
    conn.commit()
    conn.execute("ANALYZE")
    conn.close()


def _reset(path: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE job_runs SET status = 'PENDING', enqueued_at = NULL "
                     "WHERE status = 'ENQUEUED'")


async def onthedot_due_ms(folder: Path, future: int, due: int) -> float:
    """Median time of one dispatcher pass over all 32 shards that claims the due runs; between
    repeats (untimed) the claimed runs are put back to PENDING."""
    url = f"sqlite:///{folder}/onthedot-{future}.db"
    store = SqliteStore(url)
    await store.migrate()
    _fill(store.path, future, due)
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        claimed = 0
        for shard in range(32):
            got = await store.runs_claim_due(DueClaim(shard=shard, now=NOW, limit=1000,
                                                      misfire_grace_seconds=60))
            claimed += len(got.enqueued)
        times.append((time.perf_counter() - started) * 1000)
        assert claimed == due, (claimed, due)
        _reset(store.path)
    await store.close()
    return statistics.median(times)


def apscheduler_due_ms(folder: Path, future: int, due: int) -> float | None:
    try:
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.date import DateTrigger
    except ImportError:
        return None
    store = SQLAlchemyJobStore(url=f"sqlite:///{folder}/aps-{future}.db")
    scheduler = BackgroundScheduler(jobstores={"default": store}, timezone=UTC)
    store.start(scheduler, "default")
    # Bulk insert the way APScheduler stores jobs (pickled state), in one transaction.
    from apscheduler.job import Job

    rows = []
    for i in range(future + due):
        at = NOW - timedelta(seconds=1) if i < due else NOW + timedelta(minutes=1 + i % 525_600)
        job = Job(scheduler, id=f"j{i}", func=print, args=(), kwargs={},
                  trigger=DateTrigger(at), executor="default", max_instances=1,
                  misfire_grace_time=60, coalesce=True, name="b", next_run_time=at)
        rows.append({"id": job.id, "next_run_time": at.timestamp(),
                     "job_state": store.pickle_protocol and __import__("pickle").dumps(
                         job.__getstate__(), store.pickle_protocol)})
    with store.engine.begin() as conn:
        conn.execute(store.jobs_t.insert(), rows)
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        got = store.get_due_jobs(NOW)
        times.append((time.perf_counter() - started) * 1000)
        assert len(got) == due
    store.shutdown()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--due", type=int, default=100)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"due-run query: {args.due} due runs among N stored future runs; median of {REPEATS}")
    print(f"{'stored future runs':>20} | {'onthedot (32 shards) ms':>24} | "
          f"{'APScheduler 3 get_due_jobs ms':>30}")
    print("-" * 82)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in sizes:
            ours = asyncio.run(onthedot_due_ms(folder, n, args.due))
            peer = apscheduler_due_ms(folder, n, args.due)
            peer_text = "not installed" if peer is None else f"{peer:.2f}"
            print(f"{n:>20,} | {ours:>24.2f} | {peer_text:>30}")


if __name__ == "__main__":
    main()
