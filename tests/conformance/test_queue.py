"""The Queue conformance suite: every backend, against the real thing, in real time.

Each test runs once per backend: ``table`` (a fresh SQLite file), ``postgres`` (the PostgreSQL
table queue in a fresh schema of the ``test`` database, dropped at teardown) and ``nats`` (fresh
streams on the JetStream server at 127.0.0.1:4222 under a random prefix, deleted at teardown).
Visibility timeouts are short (``VISIBILITY`` seconds) so expiry takes about a second; waits go
through ``receive(wait_seconds=...)`` or ``eventually``, which return as soon as the condition
holds.

The fixtures live here rather than in conftest.py: this module owns them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from onthedot.domain.errors import BackendError, ConfigError
from onthedot.queue.base import Delivery, Queue
from onthedot.queue.nats import NatsQueue, delete_streams
from onthedot.queue.postgres import PostgresQueue
from onthedot.queue.table import TableQueue

from .conftest import PG_DSN, drop_pg_schema, new_pg_schema

NATS_URL = "nats://127.0.0.1:4222"
VISIBILITY = 1.0  # seconds: the visibility timeout every test uses
SOON = 5.0  # seconds: generous upper bound for something that should happen at once
POLL_SECONDS = 0.02

Factory = Callable[[], Awaitable[Queue]]


async def eventually(condition: Callable[[], Awaitable[bool]], within: float = SOON,
                     what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def receive_one(queue: Queue, within: float = SOON) -> Delivery:
    got = await queue.receive(1, VISIBILITY, wait_seconds=within)
    assert len(got) == 1, f"nothing delivered within {within}s"
    return got[0]


def assert_no_stray_tasks() -> None:
    """Closing a queue must stop its background tasks (read loops, pingers, flushers)."""
    current = asyncio.current_task()
    stray = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    assert not stray, f"tasks left running after the queues closed: {stray}"


@pytest.fixture(params=["table", pytest.param("postgres", marks=pytest.mark.postgres),
                        pytest.param("nats", marks=pytest.mark.nats)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """Opens queue objects that share one backend, as separate processes would."""
    kind: str = request.param
    prefix = f"t{secrets.token_hex(6)}"
    schema = new_pg_schema()
    opened: list[Queue] = []

    async def make() -> Queue:
        queue: Queue
        if kind == "table":
            queue = TableQueue(f"sqlite:///{tmp_path}/q.db")
        elif kind == "postgres":
            queue = PostgresQueue(PG_DSN, schema=schema, pool_max=4)
        else:
            queue = NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=VISIBILITY)
        await queue.open()
        opened.append(queue)
        return queue

    try:
        yield make
        for queue in opened:
            await queue.close()
        assert_no_stray_tasks()
    finally:
        for queue in opened:
            await queue.close()
        if kind == "nats":
            await delete_streams(NATS_URL, prefix)
        if kind == "postgres":
            await drop_pg_schema(schema)


@pytest.fixture
async def queue(backend: Factory) -> Queue:
    return await backend()


async def test_send_receive_ack(queue: Queue) -> None:
    await queue.send("run-1", b"hello")
    await queue.send_many([("run-2", b"two"), ("run-3", b"three")])

    first = await queue.receive(2, VISIBILITY, wait_seconds=SOON)
    assert [d.message_id for d in first] == ["run-1", "run-2"]
    assert [d.body for d in first] == [b"hello", b"two"]
    assert all(d.delivery_count == 1 for d in first)
    assert len({d.receipt for d in first}) == 2
    rest = await queue.receive(10, VISIBILITY, wait_seconds=SOON)
    assert [(d.message_id, d.body) for d in rest] == [("run-3", b"three")]

    for d in first + rest:
        assert await queue.ack(d) is True
    assert await queue.ack(first[0]) is False  # already acked
    assert await queue.receive(10, VISIBILITY, wait_seconds=0.2) == []
    assert await queue.depth() == 0


async def test_receive_without_messages_returns_empty(queue: Queue) -> None:
    assert await queue.receive(5, VISIBILITY) == []
    started = time.monotonic()
    assert await queue.receive(5, VISIBILITY, wait_seconds=0.3) == []
    assert time.monotonic() - started >= 0.25


async def test_waiting_receiver_gets_a_message_sent_meanwhile(backend: Factory) -> None:
    receiver, sender = await backend(), await backend()
    waiting = asyncio.create_task(receiver.receive(5, VISIBILITY, wait_seconds=SOON))
    await asyncio.sleep(0.1)  # let the receive start waiting; correctness does not depend on it
    await sender.send("run-1", b"x")
    got = await waiting
    assert [d.message_id for d in got] == ["run-1"]


async def test_every_send_is_one_publication(queue: Queue) -> None:
    """A message is one publication: sending an id (and body) again, or twice in a batch, is
    delivered again rather than merged into the first (issue 18 §1.4)."""
    await queue.send("run-1", b"x")
    await queue.send("run-1", b"x")
    await queue.send_many([("run-2", b"y"), ("run-2", b"y")])
    got: list[Delivery] = []
    for _ in range(4):
        got.append(await receive_one(queue))
    assert sorted(d.message_id for d in got) == ["run-1", "run-1", "run-2", "run-2"]
    assert len({d.receipt for d in got}) == 4
    for d in got:
        assert await queue.ack(d) is True
    assert await queue.receive(10, VISIBILITY, wait_seconds=0.3) == []
    assert await queue.depth() == 0


@pytest.mark.parametrize("settle", ["ack", "nack_delayed", "nack", "dead_letter"])
async def test_settling_one_delivery_leaves_a_later_publication_of_the_same_id(
        queue: Queue, settle: str) -> None:
    """The retry of a run is published (same id, maybe the same body) before the worker acks
    the previous attempt's message: the ack, nack or dead letter of that delivery must neither
    delete nor delay the new publication (the table queues merged them and the run waited
    ENQUEUED without a message until the rescuer's republish)."""
    await queue.send("run-1", b"same")
    first = await receive_one(queue)
    await queue.send("run-1", b"same")  # the retry, while the first delivery is held

    if settle == "ack":
        assert await queue.ack(first) is True
    elif settle == "nack_delayed":
        assert await queue.nack(first, 600) is True
    elif settle == "nack":
        assert await queue.nack(first, 0) is True
    else:
        assert await queue.dead_letter(first, "gave up") is True

    second = await receive_one(queue, within=VISIBILITY / 2 + SOON)
    assert (second.message_id, second.body) == ("run-1", b"same")
    assert second.receipt != first.receipt
    assert await queue.ack(second) is True


async def test_a_publication_after_a_delayed_nack_is_not_delayed(queue: Queue) -> None:
    await queue.send("run-1", b"same")
    first = await receive_one(queue)
    assert await queue.nack(first, 600) is True
    await queue.send("run-1", b"same")
    second = await receive_one(queue, within=SOON)
    assert second.message_id == "run-1"
    assert second.delivery_count == 1  # the new publication, not the nacked message
    assert await queue.ack(second) is True
    assert await queue.live(["run-1"]) == {"run-1"}  # the nacked one still waits its delay


async def test_a_new_publication_of_an_id_is_delivered_even_inside_the_dedupe_window(
        queue: Queue) -> None:
    """A run published again after its first message is gone (a retry that fell due, a lost
    message the rescuer republishes) names a new enqueue generation in its body; NATS' duplicate
    window must not swallow it, as it did when the message id alone was the Nats-Msg-Id."""
    await queue.send("run-1", b'{"enqueued_at": "first"}')
    first = await receive_one(queue)
    assert await queue.ack(first)

    await queue.send("run-1", b'{"enqueued_at": "second"}')

    again = await receive_one(queue)
    assert (again.message_id, again.body) == ("run-1", b'{"enqueued_at": "second"}')


async def test_live_tells_which_ids_still_have_a_message(backend: Factory) -> None:
    queue, other = await backend(), await backend()
    await queue.send_many([(f"run-{i}", b"x") for i in range(1, 5)])
    assert await other.live(["run-1", "run-2", "run-3", "run-4", "run-9"]) == {
        "run-1", "run-2", "run-3", "run-4"}

    got = await queue.receive(4, VISIBILITY, wait_seconds=SOON)
    by_id = {d.message_id: d for d in got}
    assert await other.live(["run-1"]) == {"run-1"}  # in flight: still live
    assert await queue.ack(by_id["run-1"])
    assert await queue.nack(by_id["run-2"], 30)  # waiting out a delay: live
    assert await queue.dead_letter(by_id["run-3"], "bad")  # dead-lettered: not live

    assert await other.live(["run-1", "run-2", "run-3", "run-4"]) == {"run-2", "run-4"}
    assert await other.live([]) == set()


async def test_in_flight_message_is_invisible_to_other_receivers(backend: Factory) -> None:
    one, two = await backend(), await backend()
    await one.send("run-1", b"x")
    got = await receive_one(one)
    assert await two.receive(10, VISIBILITY, wait_seconds=VISIBILITY / 2) == []
    assert await one.receive(10, VISIBILITY, wait_seconds=0.1) == []
    assert await one.ack(got)


async def test_visibility_expiry_redelivers_and_stale_receiver_is_refused(
        backend: Factory) -> None:
    zombie, rescuer = await backend(), await backend()
    await zombie.send("run-1", b"x")
    stale = await receive_one(zombie)
    assert stale.delivery_count == 1

    # The zombie neither acks nor extends: after the visibility timeout another receiver gets it.
    fresh = await receive_one(rescuer, within=VISIBILITY + SOON)
    assert (fresh.message_id, fresh.body, fresh.delivery_count) == ("run-1", b"x", 2)
    assert fresh.receipt != stale.receipt

    # Every late move of the zombie is refused, and none of them disturbs the new holder.
    assert await zombie.extend(stale, VISIBILITY) is False
    assert await zombie.nack(stale, 0) is False
    assert await zombie.dead_letter(stale, "zombie") is False
    assert await zombie.ack(stale) is False
    assert await zombie.receive(10, VISIBILITY, wait_seconds=0.2) == []
    assert await zombie.dead_letters() == []
    assert await rescuer.depth() == 1  # still there: no late move reached the backend
    assert await rescuer.ack(fresh) is True
    assert await rescuer.depth() == 0


async def test_redelivery_to_the_same_receiver_makes_the_old_delivery_stale(
        queue: Queue) -> None:
    await queue.send("run-1", b"x")
    first = await receive_one(queue)
    second = await receive_one(queue, within=VISIBILITY + SOON)
    assert second.delivery_count == 2
    assert await queue.ack(first) is False
    assert await queue.ack(second) is True


async def test_extend_keeps_a_message_invisible_past_its_timeout(backend: Factory) -> None:
    worker, other = await backend(), await backend()
    await worker.send("run-1", b"x")
    held = await receive_one(worker)
    beats: list[bool] = []

    async def heartbeat() -> None:
        for _ in range(8):  # 8 beats of VISIBILITY/3: well past the original timeout
            await asyncio.sleep(VISIBILITY / 3)
            beats.append(await worker.extend(held, VISIBILITY))

    beating = asyncio.create_task(heartbeat())
    assert await other.receive(10, VISIBILITY, wait_seconds=VISIBILITY * 2.5) == []
    await beating
    assert beats == [True] * 8
    assert await worker.ack(held) is True
    assert await other.receive(10, VISIBILITY, wait_seconds=0.2) == []


async def test_nack_with_delay_hides_the_message_until_the_delay_passed(queue: Queue) -> None:
    delay = 1.5
    await queue.send("run-1", b"x")
    got = await receive_one(queue)
    nacked_at = time.monotonic()
    assert await queue.nack(got, delay) is True
    assert await queue.ack(got) is False  # the nack ended this delivery

    assert await queue.receive(10, VISIBILITY, wait_seconds=delay / 2) == []
    again = await receive_one(queue, within=delay + SOON)
    assert time.monotonic() - nacked_at >= delay - 0.05
    assert (again.message_id, again.delivery_count) == ("run-1", 2)
    assert await queue.ack(again)


async def test_nack_without_delay_makes_the_message_visible_at_once(queue: Queue) -> None:
    await queue.send("run-1", b"x")
    got = await receive_one(queue)
    assert await queue.nack(got, 0) is True
    again = await receive_one(queue, within=VISIBILITY / 2)
    assert again.delivery_count == 2


async def test_dead_letter_is_listed_and_not_delivered_again(queue: Queue) -> None:
    reason = "webhook answered 500: 伺服器錯誤\nafter 5 attempts"
    await queue.send("run-1", b'{"run": 1}')
    got = await receive_one(queue)
    before = datetime.now(UTC)
    assert await queue.dead_letter(got, reason) is True
    after = datetime.now(UTC)

    assert await queue.ack(got) is False
    assert await queue.receive(10, VISIBILITY, wait_seconds=VISIBILITY * 1.5) == []
    assert await queue.depth() == 0
    [dead] = await queue.dead_letters()
    assert (dead.message_id, dead.body, dead.reason) == ("run-1", b'{"run": 1}', reason)
    assert before - timedelta(seconds=1) <= dead.dead_at <= after + timedelta(seconds=1)


async def test_dead_letters_are_listed_newest_first_up_to_the_limit(queue: Queue) -> None:
    await queue.send_many([(f"run-{i}", b"x") for i in range(3)])
    got = await queue.receive(3, VISIBILITY, wait_seconds=SOON)
    assert len(got) == 3
    for d in sorted(got, key=lambda d: d.message_id):
        assert await queue.dead_letter(d, f"failed {d.message_id}")
    assert [d.message_id for d in await queue.dead_letters(limit=2)] == ["run-2", "run-1"]
    assert len(await queue.dead_letters()) == 3


async def test_redrive_delivers_again_with_the_original_message_id(queue: Queue) -> None:
    await queue.send("run-1", b"body")
    got = await receive_one(queue)
    assert await queue.dead_letter(got, "boom")

    assert await queue.dead_letter_redrive("run-1") is True
    assert await queue.dead_letters() == []
    assert await queue.dead_letter_redrive("run-1") is False
    assert await queue.dead_letter_redrive("no-such-run") is False

    again = await receive_one(queue)
    assert (again.message_id, again.body, again.delivery_count) == ("run-1", b"body", 1)
    # Dead-lettered a second time: one entry again, with the new reason.
    assert await queue.dead_letter(again, "boom again")
    assert [(d.message_id, d.reason) for d in await queue.dead_letters()] == [
        ("run-1", "boom again")]


async def test_prune_drops_dead_letters_older_than_the_cutoff(queue: Queue) -> None:
    await queue.send_many([("run-1", b"1"), ("run-2", b"2")])
    for d in await queue.receive(2, VISIBILITY, wait_seconds=SOON):
        assert await queue.dead_letter(d, "bad")
    now = datetime.now(UTC)

    assert await queue.prune(now - timedelta(hours=1)) == 0
    assert len(await queue.dead_letters()) == 2
    pruned = await queue.prune(now + timedelta(minutes=1))
    if isinstance(queue, NatsQueue):  # expires them itself (MaxAge): prune drops nothing
        assert pruned == 0
    else:
        assert pruned == 2
        assert await queue.dead_letters() == []


async def test_depth_counts_waiting_and_in_flight(queue: Queue) -> None:
    assert await queue.depth() == 0
    await queue.send_many([("run-1", b"1"), ("run-2", b"2"), ("run-3", b"3")])
    assert await queue.depth() == 3
    a, b = await queue.receive(2, VISIBILITY, wait_seconds=SOON)
    assert await queue.depth() == 3
    assert await queue.ack(a)
    assert await queue.depth() == 2
    assert await queue.nack(b, 30)  # waiting behind its delay still counts
    assert await queue.depth() == 2
    c = await receive_one(queue)
    assert await queue.dead_letter(c, "bad")
    assert await queue.depth() == 1


async def test_two_concurrent_receivers_get_each_message_once(backend: Factory) -> None:
    total = 200
    receivers = [await backend(), await backend()]
    await receivers[0].send_many([(f"run-{i:03d}", str(i).encode()) for i in range(total)])
    seen: list[tuple[int, str]] = []

    async def work(index: int, queue: Queue) -> None:
        deadline = time.monotonic() + 30
        while len(seen) < total and time.monotonic() < deadline:
            for d in await queue.receive(16, VISIBILITY, wait_seconds=0.2):
                assert d.delivery_count == 1
                seen.append((index, d.message_id))
                assert await queue.ack(d)

    await asyncio.gather(*(work(i, q) for i, q in enumerate(receivers)))
    counts = Counter(message_id for _, message_id in seen)
    assert len(counts) == total
    assert set(counts.values()) == {1}
    assert await receivers[0].depth() == 0


# -- NATS only: what the protocol leaves to the backend ------------------------------------


@pytest.mark.nats
async def test_nats_visibility_timeout_is_fixed_per_consumer() -> None:
    prefix = f"t{secrets.token_hex(6)}"
    queue = NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=VISIBILITY)
    await queue.open()
    try:
        with pytest.raises(ConfigError) as caught:
            await queue.receive(1, VISIBILITY * 2)
        assert caught.value.field == "visibility_timeout"
    finally:
        await queue.close()
        await delete_streams(NATS_URL, prefix)


@pytest.mark.nats
async def test_nats_open_takes_over_the_layout_of_version_0_1() -> None:
    """0.1 published every run on ``<prefix>.runs`` to a consumer filtering on it; its waiting
    messages are still delivered after an upgrade, alongside the new per-run subjects."""
    from nats.aio.client import Client
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig

    prefix = f"t{secrets.token_hex(6)}"
    nc = Client()
    await nc.connect(NATS_URL)
    queue = NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=VISIBILITY)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name=f"{prefix.upper()}_RUNS",
                                         subjects=[f"{prefix}.runs"],
                                         retention=RetentionPolicy.WORK_QUEUE))
        await js.add_consumer(f"{prefix.upper()}_RUNS", ConsumerConfig(
            durable_name="workers", filter_subject=f"{prefix}.runs",
            ack_policy=AckPolicy.EXPLICIT, ack_wait=VISIBILITY))
        await js.publish(f"{prefix}.runs", b"old", headers={"Nats-Msg-Id": "run-old",
                                                             "Onthedot-Message-Id": "run-old"})

        await queue.open()
        await queue.send("run-new", b"new")

        got = await queue.receive(2, VISIBILITY, wait_seconds=SOON)
        assert sorted((d.message_id, d.body) for d in got) == [("run-new", b"new"),
                                                               ("run-old", b"old")]
    finally:
        await queue.close()
        await nc.close()
        await delete_streams(NATS_URL, prefix)


@pytest.mark.nats
async def test_nats_open_is_safe_from_many_processes_at_once() -> None:
    prefix = f"t{secrets.token_hex(6)}"
    queues = [NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=VISIBILITY)
              for _ in range(4)]
    try:
        await asyncio.gather(*(q.open() for q in queues))
        await queues[0].send("run-1", b"x")
        got = await receive_one(queues[3])
        assert got.message_id == "run-1"
        # A changed visibility timeout updates the consumer in place.
        changed = NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=VISIBILITY * 3)
        queues.append(changed)
        await changed.open()
        await changed.ping()
    finally:
        for q in queues:
            await q.close()
        await delete_streams(NATS_URL, prefix)


@pytest.mark.nats
async def test_nats_ping_fails_with_backend_error_when_closed() -> None:
    queue = NatsQueue(NATS_URL, prefix=f"t{secrets.token_hex(6)}", visibility_timeout=VISIBILITY)
    with pytest.raises(BackendError):
        await queue.ping()
    unreachable = NatsQueue("nats://127.0.0.1:1", prefix="unused", open_timeout=1.0)
    with pytest.raises(BackendError):
        await unreachable.open()


def _nats_server_binary() -> str | None:
    found = shutil.which("nats-server") or "/usr/sbin/nats-server"
    return found if os.path.exists(found) else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.nats
@pytest.mark.failure
async def test_nats_survives_a_restarted_server(tmp_path: Path) -> None:
    """A private nats-server (not the shared one) is stopped and started again on the same port
    and store: the queue reconnects by itself and the stored message is still there."""
    binary = _nats_server_binary()
    if binary is None:
        pytest.skip("nats-server binary not found")
    port = _free_port()
    command = [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path / "js")]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    server = start()
    queue = NatsQueue(f"nats://127.0.0.1:{port}", prefix="restart",
                      visibility_timeout=VISIBILITY)

    async def answers() -> bool:
        try:
            await queue.ping()
        except BackendError:
            return False
        return True

    try:
        await eventually(lambda: _opened(queue), what="the private server to accept")
        await queue.send("run-1", b"before")
        server.terminate()
        server.wait(timeout=10)
        await eventually(lambda: _not(answers), within=10, what="ping to report the outage")

        server = start()
        await eventually(answers, within=15, what="the queue to reconnect")
        await queue.send("run-2", b"after")
        got = await queue.receive(10, VISIBILITY, wait_seconds=SOON)
        assert sorted(d.message_id for d in got) == ["run-1", "run-2"]
        for d in got:
            assert await queue.ack(d)
    finally:
        await queue.close()
        server.terminate()
        server.wait(timeout=10)


async def _not(condition: Callable[[], Awaitable[bool]]) -> bool:
    return not await condition()


async def _opened(queue: NatsQueue) -> bool:
    try:
        await queue.open()
    except BackendError:
        return False
    return True


async def test_table_queue_upgrades_a_file_keyed_by_message_id(tmp_path: Path) -> None:
    """A SQLite file from before one row per publication (message_id was the primary key) is
    rebuilt by open(), keeping its waiting messages; then a second publication of an id that
    is in flight gets a row of its own."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE queue_messages (message_id TEXT PRIMARY KEY, body BLOB NOT NULL,
            visible_at TEXT NOT NULL, delivery_count INTEGER NOT NULL DEFAULT 0
            CHECK (delivery_count >= 0), receipt TEXT, sent_at TEXT NOT NULL);
        CREATE INDEX queue_messages_visible ON queue_messages (visible_at);
        INSERT INTO queue_messages (message_id, body, visible_at, sent_at)
        VALUES ('run-old', x'6f6c64', '2000-01-01T00:00:00.000000Z',
                '2000-01-01T00:00:00.000000Z');
    """)
    conn.close()
    queue = TableQueue(f"sqlite:///{path}")
    await queue.open()
    try:
        old = await receive_one(queue)
        assert (old.message_id, old.body) == ("run-old", b"old")
        await queue.send("run-old", b"old")
        assert await queue.ack(old) is True
        again = await receive_one(queue)
        assert again.message_id == "run-old"
        assert again.delivery_count == 1
        await queue.open()  # a second open finds nothing to rebuild
        assert await queue.depth() == 1
    finally:
        await queue.close()


@pytest.mark.nats
async def test_nats_a_receiver_stalled_past_its_pull_deadline_loses_no_message() -> None:
    """A worker's event loop can stall (CPU starved, a long GC) while the server hands its
    lingering pull a message: the client's wait for that pull then ends before it read the
    message. The message must still reach a receiver at once, not after AckWait."""
    prefix = f"t{secrets.token_hex(6)}"
    long_visibility = 60.0  # far longer than the test: a message left to AckWait fails it
    receiver = NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=long_visibility)
    await receiver.open()

    def publish_from_another_thread() -> None:
        async def publish() -> None:
            sender = NatsQueue(NATS_URL, prefix=prefix, visibility_timeout=long_visibility)
            await sender.open()
            try:
                await sender.send("run-1", b"x")
            finally:
                await sender.close()
        asyncio.run(publish())

    try:
        waiting = asyncio.create_task(receiver.receive(1, long_visibility, wait_seconds=0.5))
        await asyncio.sleep(0.2)  # the lingering pull is at the server
        sender = threading.Thread(target=publish_from_another_thread)
        sender.start()
        # The loop stalls past the pull's end and its grace while the message is delivered.
        time.sleep(2.5)  # noqa: ASYNC251 -- the stall is the point
        sender.join()
        try:
            got = await waiting
        except BackendError:  # a failed receive is retried by the worker; the message waits
            got = []
        if not got:  # the stalled pull let it go: it must come back now, not after AckWait
            got = await receiver.receive(1, long_visibility, wait_seconds=SOON)
        assert [d.message_id for d in got] == ["run-1"]
    finally:
        await receiver.close()
        await delete_streams(NATS_URL, prefix)
