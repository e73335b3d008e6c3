"""The embedded default queue: a table in the store's own SQLite file.

Each send is one publication with a row of its own (``seq``), even when a message of the same
id is waiting or in flight: the retry of a run published before the previous attempt's message
was acked must survive that ack.

Receiving takes SQLite's write lock (BEGIN IMMEDIATE) and flips ``visible_at`` forward with a new
receipt (one statement for the whole batch), so a message is handed to one receiver at a time;
every later ack, nack or extend is guarded by that receipt, so a receiver whose visibility
expired can no longer touch it. Acks that arrive together are one statement (db/coalesce.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sqlite3
from datetime import datetime, timedelta

from onthedot.db.coalesce import Coalescer
from onthedot.db.sqlfile import load_queries
from onthedot.db.sqlite_conn import SqliteConnection, sqlite_path
from onthedot.db.timestamps import need_ts, ts
from onthedot.domain.clock import Clock, SystemClock
from onthedot.queue.base import DeadLetter, Delivery

Q = load_queries("onthedot.queue", "sql/sqlite.sql")
POLL_SECONDS = 0.05  # how often an empty receive looks again while waiting
ACK_BATCH = 256  # acks in one statement at most


class TableQueue:
    def __init__(self, database_url: str, clock: Clock | None = None) -> None:
        self._db = SqliteConnection(sqlite_path(database_url), role="queue")
        self._clock = clock or SystemClock()
        self._wakeup = asyncio.Event()  # in-process senders wake waiting receivers at once
        self._acks: Coalescer[tuple[str, str], bool] = Coalescer(
            self._ack_many, self._ack_one, max_items=ACK_BATCH, what="acks")

    async def open(self) -> None:
        def ddl(c: sqlite3.Connection) -> None:
            keyed_by_id = c.execute(Q["messages_keyed_by_id"]).fetchone() is not None
            if keyed_by_id:  # rebuilt once, in this write transaction, messages kept
                c.execute(Q["messages_rename_old"])
            c.execute(Q["create_messages"])
            if keyed_by_id:
                c.execute(Q["messages_copy_old"])
                c.execute(Q["messages_drop_old"])
            for name in ("create_visible_index", "create_message_id_index",
                         "create_dead_letters"):
                c.execute(Q[name])

        await self._db.write(ddl)

    async def close(self) -> None:
        await self._db.close()

    async def ping(self) -> None:
        await self._db.run(lambda c: c.execute("SELECT 1").fetchone())

    async def send(self, message_id: str, body: bytes) -> None:
        await self.send_many([(message_id, body)])

    async def send_many(self, messages: list[tuple[str, bytes]]) -> None:
        if not messages:
            return
        now = ts(self._clock.now())
        rows = [{"message_id": m, "body": b, "now": now} for m, b in messages]
        await self._db.write(lambda c: c.executemany(Q["send"], rows))
        self._wakeup.set()

    async def receive(self, max_messages: int, visibility_timeout: float,
                      wait_seconds: float = 0.0) -> list[Delivery]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            self._wakeup.clear()
            got = await self._take(max_messages, visibility_timeout)
            remaining = deadline - loop.time()
            if got or remaining <= 0:
                return got
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=min(POLL_SECONDS, remaining))

    async def _take(self, max_messages: int, visibility_timeout: float) -> list[Delivery]:
        now = self._clock.now()
        params = {
            "now": ts(now),
            "invisible_until": ts(now + timedelta(seconds=visibility_timeout)),
        }

        def tx(c: sqlite3.Connection) -> list[Delivery]:
            seqs = [int(r["seq"]) for r in c.execute(
                Q["visible"], {"now": params["now"], "limit": max_messages}).fetchall()]
            if not seqs:
                return []
            rows = {int(r["seq"]): r for r in c.execute(Q["take_many"], {
                **params, "seqs": json.dumps(seqs),
                "receipt_prefix": secrets.token_hex(8) + "-"}).fetchall()}
            return [Delivery(message_id=got["message_id"], body=bytes(got["body"]),
                             delivery_count=int(got["delivery_count"]), receipt=got["receipt"])
                    for seq in seqs if (got := rows.get(seq)) is not None]  # in visible order

        # Peek first without the write lock: idle workers must not queue up on it.
        peek = await self._db.run(
            lambda c: c.execute(Q["visible"], {"now": params["now"], "limit": 1}).fetchone()
        )
        if peek is None:
            return []
        return await self._db.write(tx)

    async def extend(self, delivery: Delivery, visibility_timeout: float) -> bool:
        until = ts(self._clock.now() + timedelta(seconds=visibility_timeout))
        return await self._guarded("extend", delivery, invisible_until=until)

    async def ack(self, delivery: Delivery) -> bool:
        # Acks that arrive together (a worker finishing a burst) go as one statement.
        return await self._acks.submit((delivery.message_id, delivery.receipt))

    async def _ack_many(self, acks: list[tuple[str, str]]) -> list[bool]:
        pairs = json.dumps(sorted(acks))

        def tx(c: sqlite3.Connection) -> set[tuple[str, str]]:
            return {(str(r["message_id"]), str(r["receipt"]))
                    for r in c.execute(Q["ack_many"], {"acks": pairs}).fetchall()}

        settled = await self._db.write(tx)
        return [a in settled for a in acks]

    async def _ack_one(self, ack: tuple[str, str]) -> bool:
        return (await self._ack_many([ack]))[0]

    async def nack(self, delivery: Delivery, delay_seconds: float) -> bool:
        visible_at = ts(self._clock.now() + timedelta(seconds=max(0.0, delay_seconds)))
        return await self._guarded("nack", delivery, visible_at=visible_at)

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        params = {"message_id": delivery.message_id, "receipt": delivery.receipt,
                  "reason": reason, "now": ts(self._clock.now())}

        def tx(c: sqlite3.Connection) -> bool:
            if c.execute(Q["dead_letter_insert"], params).rowcount != 1:
                return False
            c.execute(Q["ack"], params)
            return True

        return await self._db.write(tx)

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        rows = await self._db.run(lambda c: c.execute(Q["dead_letters"], {"limit": limit})
                                  .fetchall())
        return [DeadLetter(message_id=r["message_id"], body=bytes(r["body"]), reason=r["reason"],
                           dead_at=need_ts(r["dead_at"])) for r in rows]

    async def dead_letter_redrive(self, message_id: str) -> bool:
        params = {"message_id": message_id, "now": ts(self._clock.now())}

        def tx(c: sqlite3.Connection) -> bool:
            c.execute(Q["redrive_insert"], params)
            return c.execute(Q["redrive_delete"], params).rowcount == 1

        moved = await self._db.write(tx)
        if moved:
            self._wakeup.set()
        return moved

    async def live(self, message_ids: list[str]) -> set[str]:
        ids = json.dumps(message_ids)
        rows = await self._db.run(lambda c: c.execute(Q["live"], {"ids": ids}).fetchall())
        return {str(r["message_id"]) for r in rows}

    async def prune(self, before: datetime) -> int:
        params = {"before": ts(before)}
        return await self._db.write(lambda c: c.execute(Q["prune_dead_letters"], params).rowcount)

    async def depth(self) -> int:
        row = await self._db.run(lambda c: c.execute(Q["depth"]).fetchone())
        return int(row["n"])

    async def _guarded(self, query: str, delivery: Delivery, **extra: str | None) -> bool:
        params = {"message_id": delivery.message_id, "receipt": delivery.receipt, **extra}
        return await self._db.write(lambda c: c.execute(Q[query], params).rowcount == 1)
