"""What every failure test asserts at the end: each run SUCCEEDED, each executed, none lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from psycopg import sql

from onthedot.domain.models import RunStatus
from tests.support.webhook import WebhookReceiver


async def eventually(condition: Callable[[], Awaitable[bool]], within: float, what: str,
                     every: float = 0.5) -> float:
    """Poll ``condition`` every ``every`` seconds until it holds; returns the seconds it took.
    (A coarser poll than ``tests.support.waiting``: these conditions are queries over
    thousands of rows.)"""
    started = time.monotonic()
    while not await condition():
        if time.monotonic() - started > within:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        await asyncio.sleep(every)
    return time.monotonic() - started


async def while_progressing(progress: Callable[[], Awaitable[int]], target: int, what: str,
                            state: Callable[[], object], stall: float = 60.0,
                            every: float = 1.0) -> float:
    """Wait until ``progress()`` reaches ``target``, for as long as it keeps moving: the
    deadline is ``stall`` seconds after the last step forward, not a fixed time, so a loaded
    machine that is slower but sound passes, and a stuck system fails within ``stall``. On
    failure the message carries ``state()`` (e.g. how many runs are in which status). Returns
    the seconds it took."""
    started = last_move = time.monotonic()
    best = -1
    while (done := await progress()) < target:
        now = time.monotonic()
        if done > best:
            best, last_move = done, now
        elif now - last_move > stall:
            raise AssertionError(f"{what}: stuck at {done}/{target} for {stall:g}s "
                                 f"({now - started:.0f}s in all); state: {state()}")
        await asyncio.sleep(every)
    return time.monotonic() - started


async def past(at: datetime) -> bool:
    """A condition for ``eventually``: the wall clock has reached ``at``."""
    return datetime.now(UTC) >= at


def run_statuses(dsn: str, schema: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT status, count(*) FROM {}.job_runs GROUP BY status")
                            .format(sql.Identifier(schema))).fetchall()
    return {str(status): int(n) for status, n in rows}


def run_ids(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT run_id FROM {}.job_runs")
                            .format(sql.Identifier(schema))).fetchall()
    return {str(r[0]) for r in rows}


def jobs_by_idempotency_key(dsn: str, schema: str) -> tuple[int, int]:
    """(jobs, jobs created under an Idempotency-Key)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT count(*), count(idempotency_key) FROM {}.jobs")
                           .format(sql.Identifier(schema))).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@dataclass(frozen=True)
class Outcome:
    runs: int
    executions: int  # webhook requests received
    duplicated: int  # runs whose webhook was called more than once
    extra: int  # executions beyond one per run


def assert_nothing_lost(dsn: str, schema: str, receiver: WebhookReceiver,
                        expected_runs: int) -> Outcome:
    """Every run in the store SUCCEEDED, the store holds exactly ``expected_runs`` runs, and
    the receiver saw the idempotency key of each of them (and no other)."""
    statuses = run_statuses(dsn, schema)
    assert statuses == {RunStatus.SUCCEEDED.value: expected_runs}, statuses
    stored = run_ids(dsn, schema)
    keys = dict(receiver.keys)
    missing = stored - keys.keys()
    assert not missing, f"{len(missing)} runs never reached the webhook, e.g. {sorted(missing)[:5]}"
    foreign = keys.keys() - stored
    assert not foreign, f"webhook calls for unknown runs: {sorted(foreign)[:5]}"
    executions = sum(keys.values())
    return Outcome(runs=len(stored), executions=executions,
                   duplicated=sum(1 for n in keys.values() if n > 1),
                   extra=executions - len(stored))
