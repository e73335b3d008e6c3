"""Counting the statements and transactions this process sends to its database, by dialect and
role (``store``, ``queue``): the instrument of docs/performance.md, "Instruments for the
run-lifecycle redesign". The counts live in metrics.py (``DB_STATEMENTS``,
``DB_TRANSACTIONS``), exported on /metrics as ``onthedot_db_statements_total`` and
``onthedot_db_transactions_total`` and read directly by in-process benchmarks.

What counts:

* a statement: each SQL statement our code hands to the driver; one inside a pipeline counts
  as one, and ``executemany`` counts one per parameter set (the server runs each). Transaction
  control (BEGIN, COMMIT, SAVEPOINT, RELEASE, ROLLBACK) is not a statement here: it is what
  the transaction count is for. The pool's liveness check of a PostgreSQL connection (an empty
  query, sent at checkout when the connection sat idle a second or more: pgpool.py) is counted
  under the role ``ping``, so a role's count does not depend on how long its connections idled;
* a transaction: each committed outermost transaction block, plus each statement run on its
  own in autocommit (reads included, as PostgreSQL's ``xact_commit`` counts them); a rolled
  back block is not counted.

PostgreSQL statements are counted on the event loop's thread; SQLite's in each connection's
own thread, under a lock. The cost is a Python call and a dictionary increment or two per
statement: about 1 µs of CPU (an in-memory SQLite ``SELECT 1`` went from 0.7 to 1.7 µs; on
PostgreSQL the difference is lost in the noise of a round trip that costs 60-80 µs of client
CPU).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection, AsyncCursor, AsyncTransaction
from psycopg.rows import DictRow

from onthedot.metrics import DB_STATEMENTS as STATEMENTS
from onthedot.metrics import DB_TRANSACTIONS as TRANSACTIONS

_CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK", "END")
_WORK, _CONTROL_ONLY, _COMMIT = 0, 1, 2
_SQLITE_LOCK = threading.Lock()
_KINDS: dict[str, int] = {}  # statement text -> kind: our texts are few (named queries)
_KINDS_MAX = 4096  # texts remembered; any further one is classified on each call


def _kind(sql: str) -> int:
    head = sql.lstrip()[:9].upper()
    kind = (_COMMIT if head.startswith(("COMMIT", "END")) else
            _CONTROL_ONLY if head.startswith(_CONTROL) else _WORK)
    if len(_KINDS) < _KINDS_MAX:
        _KINDS[sql] = kind
    return kind


def count_sqlite(role: str, sql: str, autocommit: bool, executions: int = 1) -> None:
    """One call of ``execute`` (or ``executemany`` over ``executions`` rows) on SQLite."""
    kind = _KINDS.get(sql)
    if kind is None:
        kind = _kind(sql)
    if kind == _CONTROL_ONLY:
        return
    with _SQLITE_LOCK:  # each SQLite connection has its thread; ``+=`` is not atomic
        if kind == _COMMIT:
            TRANSACTIONS["sqlite", role] += 1
            return
        STATEMENTS["sqlite", role] += executions
        if autocommit:
            TRANSACTIONS["sqlite", role] += executions


class CountingCursor(AsyncCursor[DictRow]):
    """The cursor of every pooled PostgreSQL connection (``connection.execute`` makes one too)."""

    async def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None,
                      binary: bool | None = None) -> CountingCursor:
        _count_pg(self.connection, 1, ping=query == "")
        await super().execute(query, params, prepare=prepare, binary=binary)
        return self

    async def executemany(self, query: Any, params_seq: Iterable[Any], *,
                          returning: bool = False) -> None:
        params: Sequence[Any] = list(params_seq)
        _count_pg(self.connection, len(params), ping=False)
        await super().executemany(query, params, returning=returning)


class CountingConnection(AsyncConnection[DictRow]):
    """A pooled PostgreSQL connection that counts its committed transaction blocks; ``role``
    is set by the pool that configures it."""

    counting_role = "store"
    _counting_depth = 0  # transaction blocks open on this connection (ours and nested)

    @asynccontextmanager
    async def transaction(self, savepoint_name: str | None = None,
                          force_rollback: bool = False) -> AsyncIterator[AsyncTransaction]:
        outer = not self._counting_depth
        self._counting_depth += 1
        try:
            async with super().transaction(savepoint_name, force_rollback) as tx:
                yield tx
        finally:
            self._counting_depth -= 1
        if outer and tx.status == AsyncTransaction.Status.COMMITTED:
            TRANSACTIONS["postgresql", self.counting_role] += 1


def _count_pg(conn: AsyncConnection[Any], executions: int, ping: bool) -> None:
    role = "ping" if ping else getattr(conn, "counting_role", "other")
    STATEMENTS["postgresql", role] += executions
    if not getattr(conn, "_counting_depth", 0):  # autocommit: each statement is a transaction
        TRANSACTIONS["postgresql", role] += executions
