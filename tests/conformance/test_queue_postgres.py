"""The PostgreSQL table queue's own behaviour, beyond the shared queue suite: receivers skip
rows another transaction holds instead of waiting, concurrent consumers never hold the same
message, NOTIFY wakes an idle receive long before its poll, the LISTEN connection comes back
after being killed, and the queue's migrations are safe from many processes at once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

from onthedot.queue.base import Delivery
from onthedot.queue.postgres import PostgresQueue
from onthedot.store.postgres import PostgresStore
from tests.support.waiting import async_wait_until

from .conftest import (
    PG_DSN,
    PG_TEST_AHEAD_DAYS,
    PG_TEST_FAR_MONTHS,
    drop_pg_schema,
    new_pg_schema,
)
from .test_queue import SOON, assert_no_stray_tasks, eventually

pytestmark = pytest.mark.postgres

VISIBILITY = 30.0  # seconds: long, so nothing in these tests expires by itself
LONG_POLL = 60.0  # seconds: a receive that returns sooner was woken by something else

Opener = Callable[..., Awaitable[PostgresQueue]]


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = new_pg_schema()
    yield name
    await drop_pg_schema(name)


@pytest.fixture
async def opener(schema: str) -> AsyncIterator[Opener]:
    """Opens queue objects on one schema, each with its own pool, as processes would."""
    opened: list[PostgresQueue] = []

    async def make(**options: Any) -> PostgresQueue:
        queue = PostgresQueue(PG_DSN, schema=schema, **{"pool_max": 4, **options})
        opened.append(queue)
        await queue.open()
        return queue

    try:
        yield make
        for queue in opened:
            await queue.close()
        assert_no_stray_tasks()
    finally:
        for queue in opened:
            await queue.close()


async def sql(schema: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        await conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))
        cur = await conn.execute(statement.encode(), params)
        return await cur.fetchall() if cur.description else []


async def test_receive_skips_a_row_another_transaction_holds(schema: str,
                                                              opener: Opener) -> None:
    """Without SKIP LOCKED the receive would wait behind the lock (here: for ever)."""
    queue = await opener()
    await queue.send_many([("run-1", b"1"), ("run-2", b"2")])
    async with await psycopg.AsyncConnection.connect(PG_DSN) as holder:
        await holder.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                             (schema,))
        await holder.execute("SELECT 1 FROM queue_messages WHERE message_id = 'run-1' FOR UPDATE")

        got = await asyncio.wait_for(queue.receive(10, VISIBILITY), timeout=SOON)

        assert [d.message_id for d in got] == ["run-2"]
        await holder.rollback()
    [late] = await queue.receive(10, VISIBILITY)
    assert (late.message_id, late.delivery_count) == ("run-1", 1)


async def test_concurrent_consumers_never_hold_the_same_message(opener: Opener) -> None:
    """Six consumers (six pools: six sets of sessions) take a backlog in small batches and hold
    everything they got, acking nothing: a message handed out twice would show up twice."""
    total = 300
    consumers = [await opener() for _ in range(6)]
    await consumers[0].send_many([(f"run-{i:03d}", b"x") for i in range(total)])
    held: list[Delivery] = []

    async def consume(queue: PostgresQueue) -> None:
        while len(held) < total:
            held.extend(await queue.receive(7, VISIBILITY, wait_seconds=0.2))

    await asyncio.wait_for(asyncio.gather(*(consume(q) for q in consumers)), timeout=30)

    counts = Counter(d.message_id for d in held)
    assert len(counts) == total
    assert set(counts.values()) == {1}
    assert {d.delivery_count for d in held} == {1}
    assert len({d.receipt for d in held}) == total
    assert await consumers[1].receive(10, VISIBILITY) == []  # all of them in flight


async def test_notify_wakes_an_idle_receive_long_before_its_poll(opener: Opener) -> None:
    receiver = await opener(poll_seconds=LONG_POLL)
    sender = await opener()  # another object: no in-process wake-up, only the NOTIFY
    assert await receiver.receive(1, VISIBILITY, wait_seconds=0.01) == []  # starts LISTEN

    async def listening() -> bool:
        return receiver.listening

    await eventually(listening, what="the LISTEN connection")
    waiting = asyncio.create_task(receiver.receive(1, VISIBILITY, wait_seconds=LONG_POLL))

    async def idle() -> bool:
        return receiver.waiting == 1

    await eventually(idle, what="the receive to wait")
    await sender.send("run-1", b"x")

    got = await asyncio.wait_for(waiting, timeout=SOON)  # << LONG_POLL

    assert [d.message_id for d in got] == ["run-1"]


async def test_listen_connection_comes_back_after_being_killed(schema: str,
                                                               opener: Opener) -> None:
    receiver = await opener(poll_seconds=LONG_POLL)
    sender = await opener()
    assert await receiver.receive(1, VISIBILITY, wait_seconds=0.01) == []
    listen_sessions = ("SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                       f"onthedot/{schema}/queue-listen")

    async def listener_pid() -> int | None:
        rows = await sql(schema, *listen_sessions)
        return int(rows[0][0]) if rows and receiver.listening else None

    first = await async_wait_until(listener_pid, SOON, "the LISTEN connection")
    await sql(schema, "SELECT pg_terminate_backend(%s)", first)

    async def another_pid() -> int | None:
        pid = await listener_pid()
        return pid if pid not in (None, first) else None

    await async_wait_until(another_pid, SOON, "LISTEN on a new connection")
    waiting = asyncio.create_task(receiver.receive(1, VISIBILITY, wait_seconds=LONG_POLL))

    async def idle() -> bool:
        return receiver.waiting == 1

    await eventually(idle, what="the receive to wait")
    await sender.send("run-1", b"x")
    got = await asyncio.wait_for(waiting, timeout=SOON)
    assert [d.message_id for d in got] == ["run-1"]


async def test_open_is_safe_from_many_processes_at_once(schema: str, opener: Opener) -> None:
    """Queues and a store starting together on a database where the schema does not exist yet:
    all of them may create it, and they must not trip over each other."""
    store = PostgresStore(PG_DSN, schema=schema, partition_ahead_days=PG_TEST_AHEAD_DAYS,
                          partition_far_months=PG_TEST_FAR_MONTHS)
    try:
        *queues, _ = await asyncio.gather(*(opener() for _ in range(4)), store.migrate())
    finally:
        await store.close()
    await queues[0].open()  # again: nothing left to apply
    assert await sql(schema, "SELECT version FROM queue_migrations ORDER BY version") == [
        (1,), (2,)]
    await queues[1].send("run-1", b"x")
    [got] = await queues[3].receive(1, VISIBILITY)
    assert got.message_id == "run-1"


async def test_a_receipt_this_queue_never_made_is_refused(opener: Opener) -> None:
    queue = await opener()
    await queue.send("run-1", b"x")
    [got] = await queue.receive(1, VISIBILITY)
    for receipt in ("", "abc", "-1", "1" * 40, "١٢"):  # the last: Arabic-Indic digits
        forged = Delivery(got.message_id, got.body, got.delivery_count, receipt)
        assert await queue.ack(forged) is False
        assert await queue.nack(forged, 0) is False
        assert await queue.dead_letter(forged, "forged") is False
    assert await queue.ack(got) is True
