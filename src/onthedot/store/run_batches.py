"""A worker's claims, finishes and retries that arrive together, written as one set-based
statement (PostgreSQL) or one transaction of set-based statements (SQLite) per kind.

::

    claim  ──┐   idle: written at once                   ┌─► its own ClaimedRun or None
    claim  ──┼─► waiting ──► flush: sorted by run id,    ┼─► its own ClaimedRun or None
    claim  ──┘   (arrived during the previous flush)     └─► its own error
                 ONE statement for the whole batch:
                 UPDATE ... FROM unnest(arrays) ... RETURNING

The lifecycle is written here once; a backend supplies only the SQL that writes a batch of one
kind and returns the rows that changed, keyed by (run id, token). Each caller's answer is the
row of its own key, so a guard that refused one item (a stale fencing token, a run no longer
claimable, a job that stops the run: store/job_guard.py) answers that caller None and leaves
the rest of the batch as it was. Two items of one run in one batch are two claims (or two
finishes) of one row: the row changes once, with one item's token, and only that item's
caller gets the row: the others are answered as a lost race, as a moment later they would be.

Coalescing is db/coalesce.py's (no timer: a lone call is written at once; calls that arrive
during a flush go together in the next, up to ``MAX_BATCH``). Every caller is answered after
the commit that holds its item, so a worker records a run's outcome before it acks the run's
message. When the database is unavailable every caller of the batch gets the ``BackendError``
it would have got alone (the worker retries recording a result); when the batch fails for any
other reason each item is written again on its own (``alone``: on PostgreSQL, again after a
lost conflict), so one item the database refuses fails one caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from onthedot.db.coalesce import Coalescer
from onthedot.domain.models import RunEvent, RunStatus
from onthedot.store.base import ClaimedRun, RunClaim, RunFinish, RunRetry
from onthedot.store.codec import Row, job_from_row, run_from_row

MAX_BATCH = 256  # items of one kind in one statement: a short transaction, brief row locks
JOB_PREFIX = "j_"  # the claim's columns of the run's job (the run has a job_id and status too)

Key = tuple[str, str]  # (run id, token): whose answer a returned row is
I = TypeVar("I", RunClaim, RunFinish, RunRetry)  # noqa: E741 - the item, as R is its answer
R = TypeVar("R")


class RunWrites(Protocol):
    """What a backend writes: one batch of one kind, sorted by run id, in one statement (or
    one transaction); the rows that changed, by (run id, token). Nothing else."""

    async def claims_write(self, claims: Sequence[RunClaim]) -> dict[Key, ClaimedRun]: ...

    async def finishes_write(self, finishes: Sequence[RunFinish]) -> dict[Key, RunEvent]: ...

    async def retries_write(self, retries: Sequence[RunRetry]) -> dict[Key, RunStatus]: ...


Alone = Callable[[str, Callable[[], Awaitable[R]]], Awaitable[R]]


async def _once(_run_id: str, write: Callable[[], Awaitable[R]]) -> R:
    return await write()


class RunBatches:
    """``claim`` / ``finish`` / ``retry`` for many concurrent callers of one event loop."""

    def __init__(self, writes: RunWrites, *, alone: Alone[object] | None = None,
                 max_items: int = MAX_BATCH) -> None:
        self._alone = alone or _once
        self._claims: Coalescer[RunClaim, ClaimedRun | None] = self._coalescer(
            writes.claims_write, max_items, "claims")
        self._finishes: Coalescer[RunFinish, RunEvent | None] = self._coalescer(
            writes.finishes_write, max_items, "finishes")
        self._retries: Coalescer[RunRetry, RunStatus | None] = self._coalescer(
            writes.retries_write, max_items, "retries")

    async def claim(self, claim: RunClaim) -> ClaimedRun | None:
        return await self._claims.submit(claim)

    async def finish(self, finish: RunFinish) -> RunEvent | None:
        return await self._finishes.submit(finish)

    async def retry(self, retry: RunRetry) -> RunStatus | None:
        return await self._retries.submit(retry)

    def _coalescer(self, write: Callable[[list[I]], Awaitable[dict[Key, R]]], max_items: int,
                   what: str) -> Coalescer[I, R | None]:
        async def many(items: list[I]) -> list[R | None]:
            rows = await write(sorted(items, key=lambda i: i.run_id))  # one lock order
            return [rows.get((item.run_id, item.token)) for item in items]

        async def one(item: I) -> R | None:
            async def write_it() -> R | None:
                return (await many([item]))[0]
            return await self._alone(item.run_id, write_it)  # type: ignore[return-value]

        return Coalescer(many, one, max_items=max_items, what=what)


def claimed_from_row(row: Row) -> ClaimedRun:
    """A claim's returned row: the run's columns, and its job's prefixed ``j_`` (all NULL
    when the job row is gone)."""
    keys = list(row.keys())  # type: ignore[attr-defined]
    job = None
    if row[JOB_PREFIX + "job_id"] is not None:
        job = job_from_row({k[len(JOB_PREFIX):]: row[k] for k in keys
                            if k.startswith(JOB_PREFIX)})
    return ClaimedRun(run=run_from_row(row), job=job)


def finish_event(finish: RunFinish, event_id: int, job_id: str) -> RunEvent:
    return RunEvent(event_id=event_id, job_id=job_id, run_id=finish.run_id,
                    status=finish.status, emitted_at=finish.finished_at)
