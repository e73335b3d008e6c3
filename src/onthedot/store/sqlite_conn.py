"""One SQLite connection owned by one thread, driven from asyncio.

A whole transaction runs as one synchronous function inside the connection's thread, so
coroutines sharing the connection can never interleave statements of different transactions,
and each store call costs a single thread hop.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from onthedot.domain.errors import BackendError, ConfigError

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000  # several processes share one file; wait for the write lock, don't fail


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


class SqliteConnection:
    def __init__(self, path: str) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="onthedot-sqlite")
        self._conn: sqlite3.Connection | None = None

    async def open(self) -> None:
        await self.run(lambda _c: None)

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
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
        SKIP LOCKED, so claims serialise on the database write lock instead."""

        def tx(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            result = fn(conn)
            conn.execute("COMMIT")
            return result

        return await self.run(tx)

    async def close(self) -> None:
        def shut(_c: sqlite3.Connection) -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        if self._conn is not None:
            await self.run(shut)
        self._executor.shutdown(wait=True)
