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

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from onthedot.domain.errors import BackendError

log = logging.getLogger(__name__)

Conn = AsyncConnection[DictRow]
MAX_STATEMENTS = 256  # in one flush: a transaction short enough to hold its row locks briefly


@dataclass
class _Statement:
    key: str  # the row it writes; the order statements of a group run in
    query: str
    params: dict[str, Any]
    future: asyncio.Future[DictRow | None] = field(repr=False)


class StatementGroups:
    """``one(query, params)`` for many concurrent callers of one event loop: the first row the
    statement returns (or None), once the transaction that ran it has committed."""

    def __init__(self, connection: Callable[[], AbstractAsyncContextManager[Conn]],
                 max_statements: int = MAX_STATEMENTS) -> None:
        self._connection = connection
        self.max_statements = max_statements
        self._waiting: list[_Statement] = []
        self._flusher: asyncio.Task[None] | None = None

    async def one(self, key: str, query: str, params: dict[str, Any]) -> DictRow | None:
        future: asyncio.Future[DictRow | None] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Statement(key, query, params, future))
        running = self._flusher
        if running is None or running.done() or running.get_loop() is not future.get_loop():
            self._flusher = asyncio.create_task(self._flush_all(),
                                                name="onthedot-statement-groups")
        return await future

    async def _flush_all(self) -> None:
        batch: list[_Statement] = []
        try:
            while self._waiting:
                batch = self._waiting[:self.max_statements]
                del self._waiting[:self.max_statements]
                await self._flush(batch)
        except BaseException as exc:  # cancelled with the loop, or a bug: nobody waits forever
            for statement in [*batch, *self._waiting]:
                _fail(statement.future, exc)
            self._waiting.clear()
            raise

    async def _flush(self, batch: list[_Statement]) -> None:
        batch.sort(key=lambda s: s.key)
        try:
            rows = await self._run(batch)
        except BackendError as exc:
            for statement in batch:
                _fail(statement.future, exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0].future, exc)
                return
            log.warning("a group of %d statements failed (%s); running each on its own",
                        len(batch), exc)
            for statement in batch:
                await self._one_alone(statement)
            return
        for statement, row in zip(batch, rows, strict=True):
            if not statement.future.done():  # its caller may have gone; the write stands
                statement.future.set_result(row)

    async def _run(self, batch: list[_Statement]) -> list[DictRow | None]:
        async with self._connection() as conn:
            if len(batch) == 1:  # autocommit: no BEGIN/COMMIT around a lone statement
                cur = await conn.execute(batch[0].query, batch[0].params)
                return [await cur.fetchone()]
            async with conn.pipeline(), conn.transaction():
                cursors = [await conn.execute(s.query, s.params) for s in batch]
            return [await cur.fetchone() for cur in cursors]

    async def _one_alone(self, statement: _Statement) -> None:
        try:
            (row,) = await self._run([statement])
        except Exception as exc:
            _fail(statement.future, exc)
        else:
            if not statement.future.done():
                statement.future.set_result(row)


def _fail(future: asyncio.Future[DictRow | None], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
