"""Hot buckets: N recurring jobs all due at 08:00 ("every day at 08:00" for many users), with
and without a flexible window (``job_params.flexible_window_seconds``).

    python -m bench.hot_bucket [--jobs 100000] [--windows 0,600] [--stores sqlite,postgres]
                               [--speed 10]

Per (store, window) it creates the jobs through the service's ``create_jobs`` (what
``POST /v1/jobs:batch`` calls) in batches of 1,000 on a fresh database, then runs the watcher's
dispatcher alone (one member owning every shard, table queue in the same database) against an
injected clock that starts one second before 08:00 and moves ``--speed`` times faster than real
time, until every run is ENQUEUED. It prints:

* the spread: how many runs are due in the busiest second, and over how many seconds they fall;
* the dispatch lateness of every run, enqueued_at - scheduled_at, where scheduled_at is the
  run's effective time (08:00 plus the job's offset in its window). Figures are divided by
  ``--speed``, so they are real seconds; a sped-up clock makes runs arrive ``--speed`` times
  faster than they would, so this is a harsher test than real time, not a kinder one.

Execution (workers) is left out on purpose: the window is about when runs fall due and how
soon the watcher hands them on; bench/burst.py and bench/dispatch.py measure execution.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sqlite3
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from onthedot.config import Settings, load_settings
from onthedot.domain.models import JobParams
from onthedot.runtime import Runtime
from onthedot.service import MAX_BATCH_JOBS, JobSpec
from onthedot.watcher import Watcher

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
IDLE_POLL_SECONDS = 0.005  # real seconds between dispatcher ticks that found nothing due


class BenchClock:
    """Frozen while the jobs are made, then running from ``start`` at ``speed`` x real time."""

    def __init__(self, frozen: datetime) -> None:
        self._frozen: datetime | None = frozen
        self._start = frozen
        self._t0 = 0.0
        self.speed = 1.0

    def run_from(self, start: datetime, speed: float) -> None:
        self._frozen, self._start, self._t0, self.speed = None, start, time.perf_counter(), speed

    def now(self) -> datetime:
        if self._frozen is not None:
            return self._frozen
        return self._start + timedelta(seconds=(time.perf_counter() - self._t0) * self.speed)


@dataclass
class Result:
    store: str
    window: int
    jobs: int
    ingest_per_s: float
    busiest_second: int
    seconds_spanned: int
    p50: float
    p99: float
    max: float
    drain_s: float


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def one(store: str, settings: Settings, jobs: int, window: int, speed: float,
              eight: datetime) -> Result:
    clock = BenchClock(eight - timedelta(hours=1))
    rt = await Runtime.open(settings, clock)
    try:
        params = JobParams(type="recurring", schedule="0 8 * * *", timezone="UTC",
                           flexible_window_seconds=window)
        started = time.perf_counter()
        for first in range(0, jobs, MAX_BATCH_JOBS):
            batch = [(JobSpec(action={"type": "message", "text": f"good morning {i}"},
                              params=params), None)
                     for i in range(first, min(jobs, first + MAX_BATCH_JOBS))]
            outcomes = await rt.service.create_jobs(f"user-{first}", batch)
            assert all(o.created for o in outcomes), [o.error for o in outcomes if o.error]
        ingest = time.perf_counter() - started

        dispatcher = Watcher(rt.store, rt.queue, clock, settings, rt.metrics, "bench")
        await dispatcher.refresh_shards()
        clock.run_from(eight - timedelta(seconds=1), speed)
        done = 0
        while done < jobs:
            claimed = await dispatcher.run_once()
            done += claimed
            if not claimed:
                await asyncio.sleep(IDLE_POLL_SECONDS)
        drain = ((clock.now() - eight).total_seconds()) / speed
    finally:
        await rt.close()
    pairs = await _due_and_enqueued(settings)
    per_second = Counter(int((due - eight).total_seconds()) for due, _ in pairs)
    lateness = [max(0.0, (enq - due).total_seconds()) / speed for due, enq in pairs]
    return Result(store=store, window=window, jobs=jobs, ingest_per_s=jobs / ingest,
                  busiest_second=max(per_second.values()), seconds_spanned=len(per_second),
                  p50=pct(lateness, 50), p99=pct(lateness, 99), max=max(lateness),
                  drain_s=drain)


async def _due_and_enqueued(settings: Settings) -> list[tuple[datetime, datetime]]:
    """(scheduled_at, enqueued_at) of every run, read straight from the database."""
    query = "SELECT scheduled_at, enqueued_at FROM job_runs WHERE enqueued_at IS NOT NULL"
    if settings.database_url.startswith("sqlite:///"):
        with sqlite3.connect(settings.database_url.removeprefix("sqlite:///")) as conn:
            rows = conn.execute(query).fetchall()
        return [(_ts(a), _ts(b)) for a, b in rows]
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_URL) as conn:
        await conn.execute(f'SET search_path TO "{settings.database_schema}"')  # our own name
        got = await (await conn.execute(query)).fetchall()
    return [(a, b) for a, b in got]


def _ts(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


async def _drop_schema(schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # our own generated name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--windows", default="0,600")
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--speed", type=float, default=10.0)
    args = parser.parse_args()
    # 08:00 UTC of tomorrow: recent enough for PostgreSQL's daily partitions.
    eight = (datetime.now(UTC) + timedelta(days=1)).replace(hour=8, minute=0, second=0,
                                                             microsecond=0)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for store in args.stores.split(","):
            for window in (int(w) for w in args.windows.split(",")):
                tag = secrets.token_hex(3)
                schema = None
                if store == "sqlite":
                    settings = load_settings(database_url=f"sqlite:///{tmp}/{tag}.db")
                else:
                    schema = f"bench_hot_{tag}"
                    settings = load_settings(database_url=PG_URL, database_schema=schema)
                try:
                    result = asyncio.run(one(store, settings, args.jobs, window, args.speed,
                                             eight))
                finally:
                    if schema is not None:
                        asyncio.run(_drop_schema(schema))
                results.append(result)
                _print(result)
    print()
    print("| store | window s | jobs | create jobs/s | busiest second | seconds with runs "
          "| lateness p50 s | p99 s | max s | all enqueued after s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.store} | {r.window} | {r.jobs:,} | {r.ingest_per_s:,.0f} "
              f"| {r.busiest_second:,} | {r.seconds_spanned:,} | {r.p50:.2f} | {r.p99:.2f} "
              f"| {r.max:.2f} | {r.drain_s:.1f} |")


def _print(r: Result) -> None:
    print(f"{r.store} window={r.window}s: {r.jobs:,} jobs at {r.ingest_per_s:,.0f}/s; "
          f"busiest second {r.busiest_second:,} runs, {r.seconds_spanned} seconds with runs; "
          f"lateness p50 {r.p50:.2f}s p99 {r.p99:.2f}s max {r.max:.2f}s; "
          f"drained {r.drain_s:.1f}s after 08:00", flush=True)


if __name__ == "__main__":
    main()
