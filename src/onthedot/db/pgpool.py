"""The PostgreSQL connection pool the store and the PostgreSQL queue share the shape of: opened
on first use (a process that never touches the database never connects), autocommit sessions
with dict rows, ``search_path`` and ``TimeZone`` set on every connection, connections a server
restart killed dropped on checkout, and "the database does not answer" turned into BackendError.
"""

from __future__ import annotations

import asyncio
import logging
import random
import select
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TypeVar

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from onthedot.db.counting import CountingConnection, CountingCursor
from onthedot.db.sqlfile import load_migrations
from onthedot.domain.errors import BackendError, ConfigError, StatementRefusedError

Conn = AsyncConnection[DictRow]
T = TypeVar("T")
log = logging.getLogger(__name__)
IDENTIFIER_MAX_BYTES = 63  # PostgreSQL names (and NOTIFY channels) are at most 63 bytes
# Errors of the driver that are not bugs of a statement: a database that does not answer (or a
# connection that broke), and a statement the server refused for a reason of the moment; they
# become BackendError / StatementRefusedError (``backend_error``).
UNAVAILABLE = (psycopg.OperationalError, psycopg.InterfaceError)
# SQLSTATEs of a server that ends or refuses the session: class 08 (connection exception) and
# the shutdown / "cannot connect now" codes of class 57P.
_SESSION_LOST_STATES = ("57P01", "57P02", "57P03")
# SQLSTATEs worth trying the statement again for: class 40 (transaction rollback: serialization
# failure 40001, deadlock 40P01), lock not available (55P03), query canceled (57014: statement
# or lock timeout, a cancel request).
_CONFLICT_CLASSES = ("40",)
_CONFLICT_STATES = ("55P03", "57014")
CONFLICT_ATTEMPTS = 4  # runs of one write that keeps losing a conflict, then its error
CONFLICT_PAUSE_SECONDS = 0.02  # before trying again (with jitter up to twice as long)
RECENTLY_USED_SECONDS = 1.0  # a connection given back more recently is not pinged (_check)
# How long the pool keeps re-trying one lost connection in the background before it gives that
# attempt up. psycopg_pool doubles the pause between tries (1, 2, 4, 8 s ...) until this many
# seconds have passed; with its default, 300 s, the pause after a two-minute outage is 64 s, so
# the pool could stay empty that long after the server came back. Given up early, the next
# checkout that finds no connection starts a fresh attempt at once (the pool grows on demand).
RECONNECT_GIVE_UP_SECONDS = 4.0


def _has_input(conn: Conn) -> bool:
    """Whether the server sent anything on an idle connection (no system call waits)."""
    try:
        poller = select.poll()
        poller.register(conn.pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.OperationalError):
        return True  # no usable socket: let the ping find out


def connection_lost(exc: BaseException) -> bool:
    """Whether a driver error means the database or the connection is gone (what
    "unavailable" means): a closed connection, a pool timeout, a failed connect (no SQLSTATE),
    SQLSTATE class 08 or a server shutting down. A deadlock, a serialization failure or a lock
    or statement timeout is the error of one statement, not unavailability."""
    if isinstance(exc, psycopg.InterfaceError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _SESSION_LOST_STATES


def conflict(exc: BaseException | None) -> bool:
    """Whether a refused statement lost to another transaction or a timeout, so that running it
    again (in a new transaction) may succeed."""
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and (state[:2] in _CONFLICT_CLASSES
                                       or state in _CONFLICT_STATES)


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
            log.info("write of %s lost a conflict (%s); trying again",
                     key, type(exc.__cause__).__name__)
            await asyncio.sleep(CONFLICT_PAUSE_SECONDS * (1 + random.random()))
    raise AssertionError("unreachable")  # the loop returns or raises


def backend_error(exc: BaseException) -> BackendError:
    """The project's error for a driver error of UNAVAILABLE (cause kept by the caller)."""
    if connection_lost(exc):
        return BackendError(f"PostgreSQL error: {exc}")
    return StatementRefusedError(f"PostgreSQL refused the statement "
                                 f"({getattr(exc, 'sqlstate', None)}): {exc}")


async def set_session(conn: Conn, schema: str) -> None:
    """The session settings every statement of ours assumes: our schema first, times in UTC."""
    await conn.execute(
        "SELECT set_config('search_path', quote_ident(%(schema)s), false),"
        " set_config('TimeZone', 'UTC', false)",
        {"schema": schema},
    )


class LazyPool:
    def __init__(self, dsn: str, *, schema: str, role: str, pool_min: int, pool_max: int,
                 timeout_seconds: float,
                 configure: Callable[[Conn], Awaitable[None]] | None = None) -> None:
        if not 1 <= pool_min <= pool_max:
            raise ConfigError("pool sizes must satisfy 1 <= pool_min <= pool_max",
                              field="pool_max", expected="an integer >= pool_min")
        self.schema = schema
        self.role = role
        self._extra_configure = configure
        suffix = "" if role == "store" else f"/{role}"
        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            dsn,
            # Counting statements and transactions (db/counting.py) costs an increment each.
            connection_class=CountingConnection,
            kwargs={"autocommit": True, "row_factory": dict_row,
                    "cursor_factory": CountingCursor,
                    # Lets an operator (and the tests) tell the sessions apart.
                    "application_name": f"onthedot/{schema}{suffix}"[:IDENTIFIER_MAX_BYTES]},
            min_size=pool_min,
            max_size=pool_max,
            open=False,
            configure=self._configure,
            check=self._check,  # drop connections a restart killed
            timeout=timeout_seconds,
            reconnect_timeout=RECONNECT_GIVE_UP_SECONDS,
            name=f"onthedot{'' if role == 'store' else '-' + role}:{schema}",
        )
        self._opened = False
        self.closed = False
        # When each connection was last given back (see _check); forgotten with the connection.
        self._last_used: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()
        self._open_lock = asyncio.Lock()

    async def _check(self, conn: Conn) -> None:
        """Ping a connection before handing it out only when there is a reason to: it sat
        idle for a second or more, or the server sent something unasked (a server that ends a
        session, in a restart or by pg_terminate_backend, sends its FATAL and closes the
        socket, which makes it readable). A ping per checkout was one more round trip for
        every statement under load."""
        last_used = self._last_used.get(conn)
        if (last_used is not None and time.monotonic() - last_used < RECENTLY_USED_SECONDS
                and not _has_input(conn)):
            return
        try:
            await AsyncConnectionPool.check_connection(conn)
        except UNAVAILABLE:
            # A dead connection is seldom alone: a restart or a failover killed every idle one.
            # psycopg_pool waits 1, 2, 4 ... s after each failed check before trying the next
            # idle connection, so five dead ones outlast a 10 s checkout timeout although the
            # server is back. Check them all now; the broken ones are replaced at once.
            await self._pool.check()
            raise

    async def _configure(self, conn: Conn) -> None:
        if isinstance(conn, CountingConnection):
            conn.counting_role = self.role
        if self._extra_configure is not None:
            await self._extra_configure(conn)
        await set_session(conn, self.schema)

    async def _open(self) -> None:
        if self.closed:
            raise BackendError(f"the PostgreSQL {self.role} is closed")
        if not self._opened:
            async with self._open_lock:  # the first callers may arrive together
                if not self._opened:
                    await self._pool.open(wait=False)  # connects in the background
                    self._opened = True

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        await self._open()
        try:
            async with self._pool.connection() as conn:
                try:
                    yield conn
                finally:
                    self._last_used[conn] = time.monotonic()
        except UNAVAILABLE as exc:
            raise backend_error(exc) from exc

    async def close(self) -> None:
        self.closed = True
        if self._opened:
            await self._pool.close()
            self._opened = False


async def apply_migrations(conn: Conn, *, schema: str, queries: Mapping[str, str], package: str,
                           folder: str) -> tuple[set[int], list[int]]:
    """Apply the numbered migrations of ``package``/``folder`` not yet recorded, in one
    transaction under the schema's advisory lock (the store and the queue take the same one:
    both may create the schema). ``queries`` gives ``migrate_lock``, ``migrations_table``,
    ``migrations_done`` and ``migration_record``. Returns (versions found, versions applied)."""
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute(queries["migrate_lock"], {"schema": schema})
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(queries["migrations_table"])
        rows = await (await conn.execute(queries["migrations_done"])).fetchall()
        done = {int(r["version"]) for r in rows}
        for version, text in load_migrations(package, folder):
            if version not in done:
                await conn.execute(text.encode())  # several statements, no parameters
                await conn.execute(queries["migration_record"], {"version": version})
                applied.append(version)
    return done, applied
