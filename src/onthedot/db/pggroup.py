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
touching the same runs lock them in the same order. When the database is unavailable every
waiter gets the ``BackendError`` it would have got alone (and the worker retries it); when the
shared transaction fails for any other reason, each statement runs again on its own, so one
refused statement fails one caller.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from onthedot.db.coalesce import Coalescer

Conn = AsyncConnection[DictRow]
MAX_STATEMENTS = 256  # in one flush: a transaction short enough to hold its row locks briefly


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
        (row,) = await self._run([statement])
        return row
