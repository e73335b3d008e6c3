"""Statement groups: single-row writes that arrive together share one PostgreSQL transaction.

::

    claim  ──┐   idle: sent at once                     ┌─► its own row, after the commit
    finish ──┼─► waiting ──► flush: one connection,     ┼─► its own row, after the commit
    claim  ──┘   (arrived during the previous flush)    └─► its own error
                 one transaction, pipelined

A worker holding hundreds of runs claims and finishes them a few milliseconds apart. Sent one by
one, each is a pool checkout, a round trip and a durable commit of its own; grouped, a burst pays
one of each. As with the job group commit (store/group_commit.py) there is no timer: a statement
that finds no flush running starts one, so a lone caller waits only for its own statement, and
statements that arrive meanwhile go together in the next flush.

Each statement keeps its own guard (a compare-and-set on the run's status and lease token), so
grouping changes no outcome: two statements on one run in one group see each other in order, as
two transactions would. Statements run in the order of their keys (run ids) so two groups
touching the same runs lock them in the same order. When the database is unavailable (the
connection is lost: SQLSTATE class 08, a closed connection, a pool timeout) every waiter gets
the ``BackendError`` it would have got alone (and the worker retries it). When the shared
transaction fails for any other reason -- a deadlock with another transaction, a serialization
failure, a lock or statement timeout, a refused statement -- each statement runs again on its
own, so the others of the group succeed; a statement that lost such a conflict is tried again
up to ``CONFLICT_ATTEMPTS`` times before its caller gets the ``StatementRefusedError``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from onthedot.db.coalesce import Coalescer
from onthedot.db.pgpool import conflict
from onthedot.domain.errors import StatementRefusedError

Conn = AsyncConnection[DictRow]
T = TypeVar("T")
log = logging.getLogger(__name__)
MAX_STATEMENTS = 256  # in one flush: a transaction short enough to hold its row locks briefly
CONFLICT_ATTEMPTS = 4  # runs of one statement that keeps losing a conflict, then its error
CONFLICT_PAUSE_SECONDS = 0.02  # before trying again (with jitter up to twice as long)


@dataclass(frozen=True)
class _Statement:
    key: str  # the row it writes; the order statements of a group run in
    query: str
    params: dict[str, Any]


class StatementGroups:
    """``one(query, params)`` for many concurrent callers of one event loop: the first row the
    statement returns (or None), once the transaction that ran it has committed."""

    def __init__(self, connection: Callable[[], AbstractAsyncContextManager[Conn]],
                 max_statements: int = MAX_STATEMENTS) -> None:
        self._connection = connection
        self._groups: Coalescer[_Statement, DictRow | None] = Coalescer(
            self._run, self._run_alone, max_items=max_statements, what="statements")

    async def one(self, key: str, query: str, params: dict[str, Any]) -> DictRow | None:
        return await self._groups.submit(_Statement(key, query, params))

    async def _run(self, statements: list[_Statement]) -> list[DictRow | None]:
        """Run in key order; the rows come back in the statements' order."""
        order = sorted(range(len(statements)), key=lambda i: statements[i].key)
        async with self._connection() as conn:
            if len(statements) == 1:  # autocommit: no BEGIN/COMMIT around a lone statement
                cur = await conn.execute(statements[0].query, statements[0].params)
                return [await cur.fetchone()]
            async with conn.pipeline(), conn.transaction():
                cursors = {i: await conn.execute(statements[i].query, statements[i].params)
                           for i in order}
            return [await cursors[i].fetchone() for i in range(len(statements))]

    async def _run_alone(self, statement: _Statement) -> DictRow | None:
        async def run() -> DictRow | None:
            (row,) = await self._run([statement])
            return row

        return await conflict_retried(statement.key, run)


async def conflict_retried(key: str, write: Callable[[], Awaitable[T]]) -> T:
    """One write in its own transaction; one that lost a conflict (deadlock, serialization
    failure, lock or statement timeout) is tried again, a few times: it was rolled back, and
    its guard makes running it again as safe as running it once."""
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return await write()
        except StatementRefusedError as exc:
            if attempt == CONFLICT_ATTEMPTS or not conflict(exc.__cause__):
                raise
            log.info("statement on %s lost a conflict (%s); trying again",
                     key, type(exc.__cause__).__name__)
            await asyncio.sleep(CONFLICT_PAUSE_SECONDS * (1 + random.random()))
    raise AssertionError("unreachable")  # the loop returns or raises
