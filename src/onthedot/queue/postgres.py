"""The table queue on PostgreSQL: with it, PostgreSQL alone is a complete deployment.

The same semantics as the SQLite table queue (queue/table.py), with PostgreSQL doing the
concurrency work. A message, as the ``queue_messages`` row sees it::

    send ──> WAITING (visible_at <= now, receipt NULL), a row of its own per send (seq)
               │ receive: FOR UPDATE SKIP LOCKED, receipt = next number of queue_receipts,
               v          visible_at = now + visibility timeout, delivery_count + 1
             IN FLIGHT (visible_at = the visibility deadline)
               │  ^ extend (receipt matches): visible_at = now + visibility timeout
               │  └─────┘
               ├─ack (receipt matches)──────────> row deleted
               ├─nack(delay) (receipt matches)──> WAITING again from now + delay, receipt NULL
               ├─dead_letter (receipt matches)──> moved to queue_dead_letters
               └─deadline passes──> receivable again; the next receive gives it a new receipt,
                                    so every later move under the old one changes no row (False)

* Receivers never wait for each other: ``SKIP LOCKED`` passes over the rows another receive is
  taking, and a row is only ever taken by the transaction that locked it.
* Wake-ups: every statement that makes a message visible now (send, nack without delay,
  redrive) sends ``NOTIFY`` on the schema's channel in the same transaction, so it is delivered
  only if the message committed. A queue object that has waited in ``receive`` keeps one
  connection LISTENing (a background task) and wakes its waiting receives on every notice.
  They also wake at the earliest ``visible_at`` in the table (a visibility deadline or a nack
  delay ending) and, as a fallback for a lost LISTEN connection, every ``poll_seconds``.
* Time is the injected clock's, as for the store's leases: processes on several hosts need
  synchronised clocks (NTP), a skew shifts redeliveries by as much.
* The tables are created by the queue's own numbered migrations (``sql/postgres_migrations``,
  recorded in ``queue_migrations``), applied by ``open()`` under an advisory lock.

Driver errors meaning "the database did not answer" become ``BackendError``, and a statement
refused for a reason of the moment its subclass ``StatementRefusedError``, as in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import DictRow

from onthedot.db.coalesce import Coalescer
from onthedot.db.pgpool import IDENTIFIER_MAX_BYTES, Conn, LazyPool, apply_migrations
from onthedot.db.sqlfile import load_queries
from onthedot.domain.clock import Clock, SystemClock
from onthedot.domain.errors import ConfigError
from onthedot.queue.base import DeadLetter, Delivery

Q = load_queries("onthedot.queue", "sql/postgres.sql")
log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # fallback: an idle receive looks again at least this often
MIN_PAUSE_SECONDS = 0.01  # a visible row another receiver was taking: look again this soon
RELISTEN_SECONDS = 1.0  # after the LISTEN connection broke, before connecting again
POOL_TIMEOUT_SECONDS = 10.0  # wait for a pooled connection, then BackendError
ACK_BATCH = 256  # acks in one statement at most


def channel_name(schema: str) -> str:
    """The NOTIFY channel of one schema's queue (an identifier: at most 63 bytes)."""
    channel = f"onthedot_queue.{schema}"
    if len(channel.encode()) > IDENTIFIER_MAX_BYTES:
        channel = "onthedot_queue." + hashlib.sha256(schema.encode()).hexdigest()[:32]
    return channel


class PostgresQueue:
    def __init__(self, dsn: str, *, schema: str = "public", pool_min: int = 1,
                 pool_max: int = 10, poll_seconds: float = POLL_SECONDS,
                 pool_timeout_seconds: float = POOL_TIMEOUT_SECONDS,
                 clock: Clock | None = None) -> None:
        if poll_seconds <= 0:
            raise ConfigError("poll_seconds must be positive", field="poll_seconds",
                              expected="seconds > 0")
        self.dsn = dsn
        self.schema = schema
        self.poll_seconds = poll_seconds
        self.channel = channel_name(schema)
        self._clock = clock or SystemClock()
        self._acks: Coalescer[tuple[str, int], bool] = Coalescer(
            self._ack_many, self._ack_one, max_items=ACK_BATCH, what="acks")
        self._db = LazyPool(dsn, schema=schema, role="queue", pool_min=pool_min,
                            pool_max=pool_max, timeout_seconds=pool_timeout_seconds)
        self._closed = False
        # Waiting receives hold the current event; a wake-up sets it and installs a fresh one,
        # so a wake-up between a receiver's look and its wait is never lost.
        self._changed = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self.listening = False  # the LISTEN connection is up (observability, tests)
        self.waiting = 0  # receives now blocked until a wake-up (observability, tests)

    # --- lifecycle -----------------------------------------------------------------------
    async def open(self) -> None:
        """Apply the queue's migrations. Safe to call from many processes at once: they
        serialise on the schema's advisory lock (the one the store's migrate takes too), and a
        version is applied once."""
        async with self._conn() as conn:
            await apply_migrations(conn, schema=self.schema, queries=Q, package="onthedot.queue",
                                   folder="sql/postgres_migrations")

    async def close(self) -> None:
        self._closed = True
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        await self._db.close()
        self._wake()  # receives still waiting return at once

    async def ping(self) -> None:
        async with self._conn() as conn:
            await conn.execute("SELECT 1")

    # --- messages ------------------------------------------------------------------------
    async def send(self, message_id: str, body: bytes) -> None:
        await self.send_many([(message_id, body)])

    async def send_many(self, messages: list[tuple[str, bytes]]) -> None:
        if not messages:
            return
        params = {"message_ids": [m for m, _ in messages], "bodies": [b for _, b in messages],
                  "now": self._clock.now(), "channel": self.channel}
        row = await self._one(Q["send"], params)
        if row is not None and row["sent"]:
            self._wake()  # this process's receivers need not wait for the notice

    async def receive(self, max_messages: int, visibility_timeout: float,
                      wait_seconds: float = 0.0) -> list[Delivery]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        if wait_seconds > 0:
            self._listen()
        while True:
            changed = self._changed  # taken before looking: a wake-up during the look counts
            got = await self._take(max_messages, visibility_timeout)
            remaining = deadline - loop.time()
            if got or remaining <= 0 or self._closed:
                return got
            pause = min(self.poll_seconds, remaining, await self._until_next_visible())
            self.waiting += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout=pause)
            finally:
                self.waiting -= 1
            if self._closed:  # close() wakes the waiting receives: they return empty
                return []

    async def _take(self, max_messages: int, visibility_timeout: float) -> list[Delivery]:
        if max_messages <= 0:
            return []
        now = self._clock.now()
        rows = await self._all(Q["receive"], {
            "now": now, "invisible_until": now + timedelta(seconds=visibility_timeout),
            "limit": max_messages})
        return [Delivery(message_id=r["message_id"], body=bytes(r["body"]),
                         delivery_count=int(r["delivery_count"]), receipt=str(r["receipt"]))
                for r in rows]

    async def _until_next_visible(self) -> float:
        """Seconds until the earliest message becomes visible (a deadline or a delay ending);
        a long time when the table is empty. Never below MIN_PAUSE_SECONDS: a visible row that
        this receive passed over is being taken by another one."""
        row = await self._one(Q["next_visible"], {})
        if row is None or row["next_visible"] is None:
            return self.poll_seconds
        next_visible: datetime = row["next_visible"]
        return max(MIN_PAUSE_SECONDS, (next_visible - self._clock.now()).total_seconds())

    async def extend(self, delivery: Delivery, visibility_timeout: float) -> bool:
        until = self._clock.now() + timedelta(seconds=visibility_timeout)
        return await self._guarded("extend", delivery, invisible_until=until)

    async def ack(self, delivery: Delivery) -> bool:
        receipt = _receipt(delivery)
        if receipt is None:
            return False
        # Acks that arrive together (a worker finishing a burst) go as one statement.
        return await self._acks.submit((delivery.message_id, receipt))

    async def _ack_many(self, acks: list[tuple[str, int]]) -> list[bool]:
        ordered = sorted(acks)  # one lock order
        rows = await self._all(Q["ack_many"], {"message_ids": [a[0] for a in ordered],
                                               "receipts": [a[1] for a in ordered]})
        settled = {(str(r["message_id"]), int(r["receipt"])) for r in rows}
        return [a in settled for a in acks]

    async def _ack_one(self, ack: tuple[str, int]) -> bool:
        return (await self._ack_many([ack]))[0]

    async def nack(self, delivery: Delivery, delay_seconds: float) -> bool:
        receipt = _receipt(delivery)
        if receipt is None:
            return False
        delay = max(0.0, delay_seconds)
        row = await self._one(Q["nack"], {
            "message_id": delivery.message_id, "receipt": receipt,
            "visible_at": self._clock.now() + timedelta(seconds=delay),
            "wake": delay == 0, "channel": self.channel})
        if row is not None and delay == 0:
            self._wake()
        return row is not None

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        receipt = _receipt(delivery)
        if receipt is None:
            return False
        row = await self._one(Q["dead_letter"], {
            "message_id": delivery.message_id, "receipt": receipt, "reason": reason,
            "now": self._clock.now()})
        return row is not None

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        rows = await self._all(Q["dead_letters"], {"limit": limit})
        return [DeadLetter(message_id=r["message_id"], body=bytes(r["body"]), reason=r["reason"],
                           dead_at=r["dead_at"]) for r in rows]

    async def dead_letter_redrive(self, message_id: str) -> bool:
        row = await self._one(Q["redrive"], {"message_id": message_id, "now": self._clock.now(),
                                             "channel": self.channel})
        if row is not None:
            self._wake()
        return row is not None

    async def live(self, message_ids: list[str]) -> set[str]:
        if not message_ids:
            return set()
        rows = await self._all(Q["live"], {"message_ids": message_ids})
        return {str(r["message_id"]) for r in rows}

    async def prune(self, before: datetime) -> int:
        async with self._conn() as conn:
            cur = await conn.execute(Q["prune_dead_letters"], {"before": before})
            return cur.rowcount

    async def depth(self) -> int:
        row = await self._one(Q["depth"], {})
        return 0 if row is None else int(row["n"])

    # --- wake-ups ------------------------------------------------------------------------
    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _listen(self) -> None:
        """Start the LISTEN task on the first waiting receive (an API process that only sends
        never holds that connection)."""
        if self._listener is None and not self._closed:
            self._listener = asyncio.create_task(self._listen_loop(),
                                                 name=f"onthedot-queue-listen:{self.schema}")

    async def _listen_loop(self) -> None:
        """Keep one connection LISTENing and wake the waiting receives on every notice. When
        the connection breaks, receives fall back to polling until it is back."""
        while not self._closed:
            try:
                conn = await AsyncConnection.connect(
                    self.dsn, autocommit=True,
                    application_name=f"onthedot/{self.schema}/queue-listen"[
                        :IDENTIFIER_MAX_BYTES])
            except Exception as exc:  # wake-ups only speed receives up: never die
                log.warning("queue LISTEN connection failed, polling meanwhile: %s", exc)
                await asyncio.sleep(RELISTEN_SECONDS)
                continue
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                self.listening = True
                self._wake()  # what was sent before LISTEN took effect: look again
                async for _ in conn.notifies():
                    self._wake()  # a burst of notices costs a look each, no more
            except Exception as exc:  # as above
                log.warning("queue LISTEN connection lost, polling meanwhile: %s", exc)
            finally:
                self.listening = False
                await conn.close()
            await asyncio.sleep(RELISTEN_SECONDS)

    # --- helpers -------------------------------------------------------------------------
    def _conn(self) -> AbstractAsyncContextManager[Conn]:
        return self._db.connection()

    async def _one(self, query: str, params: dict[str, Any]) -> DictRow | None:
        async with self._conn() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchone()

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._conn() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()

    async def _guarded(self, query: str, delivery: Delivery, **extra: Any) -> bool:
        receipt = _receipt(delivery)
        if receipt is None:
            return False
        async with self._conn() as conn:
            cur = await conn.execute(Q[query], {"message_id": delivery.message_id,
                                                "receipt": receipt, **extra})
            return cur.rowcount == 1


def _receipt(delivery: Delivery) -> int | None:
    """The delivery number this queue handed out; None for a receipt it cannot have made."""
    receipt = delivery.receipt
    return int(receipt) if receipt.isascii() and receipt.isdigit() and len(receipt) < 19 else None
