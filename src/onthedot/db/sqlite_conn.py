"""One SQLite connection owned by one thread, driven from asyncio.

A whole transaction runs as one synchronous function inside the connection's thread, so
coroutines sharing the connection can never interleave statements of different transactions,
and each store call costs a single thread hop.

Group commit: write transactions that arrive while the thread is busy are run together in the
next one — one ``BEGIN IMMEDIATE`` … ``COMMIT``, each caller's function inside a SAVEPOINT of
its own. A function that raises rolls back to its savepoint and only its caller sees the error;
every caller is answered after the shared COMMIT, so a write is never reported before it is
durable. Under a burst (hundreds of runs claimed, finished and acked at once) this turns
hundreds of commits and thread hops into a few, and the file's write lock changes hands far
less often between the store's and the table queue's connections.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from onthedot.db import counting
from onthedot.domain.errors import BackendError, ConfigError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000  # several processes share one file; wait for the write lock, don't fail
MAX_GROUP_WRITES = 256  # write transactions merged into one commit at most

_Outcome = tuple[bool, object]  # (succeeded, its value or its exception)


def sqlite_path(database_url: str) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a bare path."""
    if database_url.startswith("sqlite:///"):
        path = database_url[len("sqlite:///"):]
    elif database_url.startswith("sqlite://"):
        raise ConfigError(
            f"cannot read database url {database_url!r}",
            field="database_url",
            expected="sqlite:///path/to/file.db",
        )
    else:
        path = database_url
    if not path:
        raise ConfigError("empty SQLite path", field="database_url",
                          expected="sqlite:///path/to/file.db")
    return path


class _CountingSqlite(sqlite3.Connection):
    """Counts what it executes (db/counting.py); ``role`` is set by SqliteConnection."""

    counting_role = "store"

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        counting.count_sqlite(self.counting_role, sql, not self.in_transaction)
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        rows = list(parameters)
        counting.count_sqlite(self.counting_role, sql, not self.in_transaction, len(rows))
        return super().executemany(sql, rows)


class SqliteConnection:
    def __init__(self, path: str, role: str = "store") -> None:
        self.path = path
        self.role = role  # labels its statement counts (db/counting.py)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="onthedot-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await self.run(lambda _c: None)

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000, factory=_CountingSqlite)
        conn.counting_role = self.role
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable across process crashes in WAL mode
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._conn is None:
            self._conn = self._connect()
        try:
            return fn(self._conn)
        except sqlite3.OperationalError as exc:
            if self._conn.in_transaction:
                self._conn.rollback()
            raise BackendError(f"SQLite error: {exc}") from exc
        except BaseException:
            if self._conn.in_transaction:
                self._conn.rollback()
            raise

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a write transaction taken up front (BEGIN IMMEDIATE): SQLite has no
        SKIP LOCKED, so claims serialise on the database write lock instead. Concurrent writes
        share one transaction and one commit (module docstring); ``fn`` sees the writes of
        those queued before it, exactly as if it had run right after them."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        self._pending.append((fn, done))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        return await done

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[:MAX_GROUP_WRITES]
                del self._pending[:MAX_GROUP_WRITES]
                fns = [fn for fn, _ in batch]
                try:
                    outcomes = await self.run(functools.partial(_group, fns=fns))
                except Exception as exc:  # BEGIN or COMMIT failed: nothing of the group landed
                    outcomes = [(False, exc)] * len(batch)
                for (_, done), (ok, value) in zip(batch, outcomes, strict=True):
                    if done.done():  # its caller was cancelled meanwhile
                        continue
                    if ok:
                        done.set_result(value)
                    else:
                        assert isinstance(value, BaseException)
                        done.set_exception(value)
        finally:
            self._flusher = None

    async def close(self) -> None:
        if self._flusher is not None:  # writes already asked for land before the close
            await self._flusher

        def shut(_c: sqlite3.Connection) -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        if self._conn is not None:
            await self.run(shut)
        self._executor.shutdown(wait=True)


def _group(conn: sqlite3.Connection, fns: list[Callable[[sqlite3.Connection], Any]]
           ) -> list[_Outcome]:
    """One write transaction for several callers, each in a savepoint of its own."""
    if len(fns) == 1:  # the common idle case: no savepoint needed, an error aborts it all
        conn.execute("BEGIN IMMEDIATE")
        value = fns[0](conn)
        conn.execute("COMMIT")
        return [(True, value)]
    conn.execute("BEGIN IMMEDIATE")
    outcomes: list[_Outcome] = []
    for fn in fns:
        conn.execute("SAVEPOINT onthedot_write")
        try:
            value = fn(conn)
        except Exception as exc:
            if not conn.in_transaction:  # SQLite rolled the whole transaction back itself
                raise
            conn.execute("ROLLBACK TO onthedot_write")
            conn.execute("RELEASE onthedot_write")
            if isinstance(exc, sqlite3.OperationalError):
                wrapped = BackendError(f"SQLite error: {exc}")
                wrapped.__cause__ = exc
                outcomes.append((False, wrapped))
            else:
                outcomes.append((False, exc))
        else:
            conn.execute("RELEASE onthedot_write")
            outcomes.append((True, value))
    conn.execute("COMMIT")
    return outcomes
