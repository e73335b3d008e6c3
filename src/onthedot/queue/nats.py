"""The production queue: NATS JetStream.

Layout (``<prefix>`` is lower case, ``<PREFIX>`` its upper-case form)::

    stream <PREFIX>_RUNS   subjects <prefix>.runs.<id>  retention WorkQueue, dedupe on Nats-Msg-Id
      └ durable pull consumer "workers"                  AckExplicit, AckWait = visibility timeout
    stream <PREFIX>_DLQ    subjects <prefix>.dlq.<id>   retention Limits, MaxMsgsPerSubject = 1,
                                                        MaxAge = dead-letter retention

Each run's messages have a subject of their own (``<id>`` is ``subject_token(run id)``). A work
queue stream deletes a message when it is acked, so "does the run still have a live message"
(waiting, in flight or waiting out a nak delay) is one last-by-subject lookup: ``live()``, which
the rescuer asks before it publishes a run again. Every send is one publication: Nats-Msg-Id is
the run id plus a random token drawn once per send, so the stream's duplicate window never drops
a new publication of a run (a retry sent while the previous attempt's message is still held, with
the same body) -- it only ever collapses a resend of that one publication.

A delivery, as this process sees it::

    receive ──> IN FLIGHT (lease = pulled + AckWait) ──ack──────────> gone
                  │  ^ extend (+WPI, lease = now + AckWait)
                  │  └─────┘
                  ├─nack(delay)──> waiting again (server redelivers after the delay)
                  ├─dead_letter──> copied to <PREFIX>_DLQ, then +TERM
                  └─lease ran out─> STALE: every later ack/nack/extend/dead_letter is refused
                                    (returns False, nothing is sent to the server)

Why the client-side lease: a NATS server acts on any ack sent to a message's reply subject, even
one from a receiver whose AckWait ran out and whose message now belongs to someone else (nats-server
2.9 acks the new holder's delivery). So this class refuses to act on a delivery whose lease may
have expired. The lease starts when a no-wait pull was *sent* (or, on a lingering pull, when the
message arrived) and is renewed from the moment an extend was *sent*, so it does not outlive the
server's AckWait timer; a margin of ``LEASE_MARGIN_FRACTION`` of the visibility timeout absorbs
the time a message or an ack spends between client and server. The cost: a receiver that is
late but was not yet replaced gets False as well, and the message is delivered again
(at-least-once; the store's fencing token makes that harmless).

AckWait is fixed per consumer, so ``receive`` and ``extend`` only accept the visibility timeout
this queue was configured with (``ConfigError`` otherwise). See docs/nats.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote, unquote

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RawStreamMsg,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from onthedot.domain.clock import Clock, SystemClock
from onthedot.domain.errors import BackendError, ConfigError
from onthedot.queue.base import DeadLetter, Delivery

T = TypeVar("T")

log = logging.getLogger(__name__)

CONSUMER = "workers"
HEADER_DEDUPE = "Nats-Msg-Id"
HEADER_MESSAGE_ID = "Onthedot-Message-Id"  # the run id, also after a redrive changed Nats-Msg-Id
HEADER_REASON = "Onthedot-Reason"  # percent-encoded: header values are one line of ASCII
HEADER_DEAD_AT = "Onthedot-Dead-At"  # ISO 8601, UTC
HEADER_DELIVERIES = "Onthedot-Delivery-Count"

DEFAULT_MAX_ACK_PENDING = 100_000  # in flight + nak-delayed, all workers (server default 1,000)
CONNECT_TIMEOUT_SECONDS = 2
RECONNECT_WAIT_SECONDS = 0.5  # between reconnect attempts; we retry forever
STREAM_RETRY_SECONDS = 1.0  # between two tries to create a stream whose cluster is busy
STREAM_PLACEMENT_SECONDS = 60.0  # how long a starting process waits for a busy cluster to answer
OPEN_TIMEOUT_SECONDS = 10.0  # open() gives up when no server answered in this time
DRAIN_TIMEOUT_SECONDS = 5
REQUEST_TIMEOUT_SECONDS = 5.0  # JetStream API calls, publish acks, ack replies
PING_TIMEOUT_SECONDS = 2.0  # a health check answers fast or reports the queue down
PULL_GRACE_SECONDS = 1.0  # wait this long past a pull's expiry for the server's closing 408
MIN_LINGER_SECONDS = 0.01  # shorter waits are not worth a lingering pull request
BUSY_PAUSE_SECONDS = 0.05  # after a pull the server refused (409), before pulling again
PENDING_READ_SECONDS = 0.05  # to take a message the client holds already, past a pull's end
# A pull we stopped reading before the server closed it may still be answered (our loop
# stalled, the server was slow): its reply inbox is watched this long past the pull's end and
# every late message is handed straight back (NAK), so it waits for no AckWait.
LATE_REPLY_WATCH_SECONDS = 5.0
LEASE_MARGIN_FRACTION = 0.1  # of the visibility timeout: time for an ack to reach the server
MAX_TRACKED = 100_000  # in-flight deliveries remembered by one queue object
PUBLISH_CONCURRENCY = 256  # publishes awaiting their ack at once in send_many
MAX_REASON_CHARS = 2_000
MAX_DEAD_LETTER_SCAN = 1_000_000  # sequences; bounds dead_letters() on a huge DLQ

_PREFIX_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")
_SUBJECT_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_REASON_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


@dataclass
class _InFlight:
    msg: Msg
    stream_seq: int
    lease_until: float  # time.monotonic() seconds


@dataclass
class _Pulled:
    msgs: list[Msg] = field(default_factory=list)
    lease_from: list[float] = field(default_factory=list)  # per message, time.monotonic()
    status: str | None = None  # "404", "408", "409", ... when the server closed the request
    description: str = ""
    sent_at: float = 0.0  # time.monotonic() just before the pull request was published


@contextlib.contextmanager
def _driver_errors(what: str) -> Iterator[None]:
    try:
        yield
    except (nats.errors.Error, TimeoutError, OSError) as exc:
        raise BackendError(f"NATS {what} failed: {exc or type(exc).__name__}") from exc


def subject_token(message_id: str) -> str:
    """An injective mapping of a message id to one subject token: ``[A-Za-z0-9-]`` stay, every
    other UTF-8 byte becomes ``_XX`` (``.``, ``*``, ``>`` and spaces are not allowed in tokens)."""
    out = []
    for ch in message_id:
        if ch in _SUBJECT_SAFE:
            out.append(ch)
        else:
            out.extend(f"_{b:02x}" for b in ch.encode())
    return "".join(out) or "_"


def publication_id(message_id: str) -> str:
    """Nats-Msg-Id of one publication, drawn once per send: two sends of a run are two messages
    even with the same body and inside the duplicate window (issue 18 §1.4)."""
    return f"{message_id}:{secrets.token_hex(8)}"


def stream_names(prefix: str) -> tuple[str, str]:
    """The run stream and the dead-letter stream of one deployment prefix."""
    return f"{prefix.upper()}_RUNS", f"{prefix.upper()}_DLQ"


def server_list(url: str) -> list[str]:
    """``nats://a:4222,nats://b:4222``: every node of a cluster, so the first connection does
    not depend on one node being up."""
    return [u.strip() for u in url.split(",") if u.strip()]


async def delete_streams(url: str, prefix: str) -> None:
    """Remove a deployment's streams and everything in them (tests, benchmarks, teardown)."""
    nc = Client()
    await nc.connect(servers=server_list(url), connect_timeout=CONNECT_TIMEOUT_SECONDS,
                     max_reconnect_attempts=2)
    try:
        js = nc.jetstream()
        for stream in stream_names(prefix):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(stream)
    finally:
        await nc.close()


class NatsQueue:
    def __init__(self, url: str = "nats://127.0.0.1:4222", *, prefix: str = "onthedot",
                 visibility_timeout: float = 30.0, max_deliver: int = -1, replicas: int = 1,
                 duplicate_window_seconds: float = 120.0,
                 max_ack_pending: int = DEFAULT_MAX_ACK_PENDING,
                 open_timeout: float = OPEN_TIMEOUT_SECONDS,
                 dead_letter_max_age_seconds: float = 0.0,
                 clock: Clock | None = None) -> None:
        if not _PREFIX_RE.fullmatch(prefix):
            raise ConfigError(f"bad NATS prefix {prefix!r}", field="prefix",
                              expected="lower-case letters, digits, '_' or '-'")
        if visibility_timeout <= 0:
            raise ConfigError("visibility timeout must be positive", field="visibility_timeout",
                              expected="seconds > 0")
        if replicas < 1 or replicas > 5:
            raise ConfigError("bad replica count", field="replicas", expected="1 to 5")
        self.url = url
        self.servers = server_list(url)
        self.visibility_timeout = visibility_timeout
        self.max_deliver = max_deliver
        self.replicas = replicas
        self.duplicate_window_seconds = duplicate_window_seconds
        self.max_ack_pending = max_ack_pending
        self.open_timeout = open_timeout
        self.dead_letter_max_age_seconds = dead_letter_max_age_seconds  # 0: kept for ever
        self.clock = clock or SystemClock()
        self.runs_stream, self.dlq_stream = stream_names(prefix)
        self.runs_subject = f"{prefix}.runs"  # version 1 published every run here
        self._run_prefix = f"{prefix}.runs."
        self.dlq_subjects = f"{prefix}.dlq.>"
        self._dlq_prefix = f"{prefix}.dlq."
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{self.runs_stream}.{CONSUMER}"
        self._margin = visibility_timeout * LEASE_MARGIN_FRACTION
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._idle: list[Subscription] = []  # reply subscriptions with no pull in progress
        self._late_watches: set[asyncio.Task[None]] = set()  # see _watch_late_replies
        self._instance = secrets.token_hex(4)  # receipts of other queue objects never match
        # receipt -> delivery, oldest lease first (extend moves an entry to the end)
        self._inflight: OrderedDict[str, _InFlight] = OrderedDict()
        self._receipt_of: dict[int, str] = {}  # stream seq -> receipt of its latest delivery

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, then create or update both streams and the consumer. Safe to call from many
        processes at once: creating an identical stream or consumer is a no-op for the server,
        and a changed one is updated in place (AckWait, MaxDeliver, replicas, dedupe window)."""
        if self._nc is not None:
            return
        nc = Client()
        try:
            await asyncio.wait_for(nc.connect(
                servers=self.servers, name="onthedot-queue",
                allow_reconnect=True, max_reconnect_attempts=-1,  # survive a restarted node
                reconnect_time_wait=RECONNECT_WAIT_SECONDS,  # type: ignore[arg-type]
                connect_timeout=CONNECT_TIMEOUT_SECONDS, drain_timeout=DRAIN_TIMEOUT_SECONDS,
                error_cb=self._on_error, disconnected_cb=self._on_disconnected,
                reconnected_cb=self._on_reconnected,
            ), timeout=self.open_timeout)
        except (nats.errors.Error, TimeoutError, OSError) as exc:
            with contextlib.suppress(Exception):
                await nc.close()
            raise BackendError(f"cannot connect to NATS at {self.url}: {exc!r}") from exc
        self._nc = nc
        self._js = nc.jetstream(timeout=REQUEST_TIMEOUT_SECONDS)
        try:
            await self._ensure_stream(StreamConfig(
                name=self.runs_stream, subjects=[self.runs_subject, self._run_prefix + ">"],
                retention=RetentionPolicy.WORK_QUEUE, storage=StorageType.FILE,
                num_replicas=self.replicas, duplicate_window=self.duplicate_window_seconds))
            await self._ensure_stream(StreamConfig(
                name=self.dlq_stream, subjects=[self.dlq_subjects],
                retention=RetentionPolicy.LIMITS, storage=StorageType.FILE,
                num_replicas=self.replicas, max_msgs_per_subject=1,
                max_age=self.dead_letter_max_age_seconds or None))
            await self._ensure_consumer()
        except BaseException:
            await self.close()
            raise

    async def _ensure_consumer(self) -> None:
        """The consumer takes every subject of the stream. One made by version 1 filtered on
        ``<prefix>.runs`` alone; a server that cannot change a filter in place (before 2.10) gets
        it deleted and made again, its unacked messages then going to the new consumer."""
        js = self._need_js()
        config = ConsumerConfig(
            name=CONSUMER, durable_name=CONSUMER, deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT, ack_wait=self.visibility_timeout,
            max_deliver=self.max_deliver, max_ack_pending=self.max_ack_pending)
        with _driver_errors("consumer create"):
            try:
                info = await js.consumer_info(self.runs_stream, CONSUMER)
            except nats.js.errors.NotFoundError:
                info = None
            if info is not None and info.config.filter_subject:
                log.warning("NATS consumer %s filters on %s (onthedot 0.1); making it again",
                            CONSUMER, info.config.filter_subject)
                await js.delete_consumer(self.runs_stream, CONSUMER)
            await js.add_consumer(self.runs_stream, config)

    async def _ensure_stream(self, config: StreamConfig) -> None:
        """Create or update the stream. A replicated stream cannot be placed while its cluster
        elects a leader or a peer is slow, and the server then does not answer in time: ask
        again for up to ``STREAM_PLACEMENT_SECONDS`` rather than fail the process on its first
        try."""
        js = self._need_js()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(self.open_timeout, STREAM_PLACEMENT_SECONDS)
        while True:
            try:
                with _driver_errors(f"stream {config.name} create"):
                    await self._add_or_update_stream(js, config)
                return
            except BackendError as exc:
                transient = isinstance(exc.__cause__, (nats.errors.TimeoutError, TimeoutError,
                                                       nats.js.errors.ServiceUnavailableError))
                if not transient or loop.time() + STREAM_RETRY_SECONDS > deadline:
                    raise
                log.warning("%s; asking again", exc.message)
                await asyncio.sleep(STREAM_RETRY_SECONDS)

    @staticmethod
    async def _add_or_update_stream(js: JetStreamContext, config: StreamConfig) -> None:
        try:
            await js.add_stream(config)
        except nats.js.errors.BadRequestError as exc:
            if exc.err_code != 10058:  # "stream name already in use with a different config"
                raise
            await js.update_stream(config)

    async def close(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        self._inflight.clear()
        self._receipt_of.clear()
        self._idle.clear()
        watches, self._late_watches = self._late_watches, set()
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        if nc is None or nc.is_closed:
            return
        try:
            await nc.drain()
        except (nats.errors.Error, TimeoutError, OSError):
            await nc.close()

    async def ping(self) -> None:
        js = self._need_js()
        if not self._need_nc().is_connected:  # fail fast while reconnecting
            raise BackendError(f"not connected to NATS at {self.url} (reconnecting)")
        with _driver_errors("ping"):
            await js.consumer_info(self.runs_stream, CONSUMER, timeout=PING_TIMEOUT_SECONDS)

    # -- sending -----------------------------------------------------------------------------

    async def send(self, message_id: str, body: bytes) -> None:
        await self.send_many([(message_id, body)])

    async def send_many(self, messages: list[tuple[str, bytes]]) -> None:
        """Each message is acknowledged by the stream before this returns, and each is a
        publication of its own (``publication_id``)."""
        await self._gathered([self._publish_run(mid, publication_id(mid), body)
                              for mid, body in messages])

    async def _gathered(self, calls: list[Coroutine[Any, Any, T]]) -> list[T]:
        """Run the calls PUBLISH_CONCURRENCY at a time; the first failure is raised."""
        out: list[T] = []
        for start in range(0, len(calls), PUBLISH_CONCURRENCY):
            results = await asyncio.gather(*calls[start:start + PUBLISH_CONCURRENCY],
                                           return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    for pending in calls[start + PUBLISH_CONCURRENCY:]:
                        pending.close()
                    raise result
                out.append(result)
        return out

    async def _publish_run(self, message_id: str, dedupe: str, body: bytes) -> None:
        if "\r" in message_id or "\n" in message_id:
            raise ValueError("a message id must be one line")
        js = self._need_js()
        with _driver_errors("publish"):
            await js.publish(self._run_subject(message_id), body, stream=self.runs_stream,
                             headers={HEADER_DEDUPE: dedupe, HEADER_MESSAGE_ID: message_id})

    async def live(self, message_ids: list[str]) -> set[str]:
        """The ids with a message in the stream: waiting, in flight or nak-delayed (acked and
        terminated messages are gone from a work queue stream)."""
        found = await self._gathered([self._has_message(mid) for mid in message_ids])
        return {mid for mid, present in zip(message_ids, found, strict=True) if present}

    async def _has_message(self, message_id: str) -> bool:
        js = self._need_js()
        with _driver_errors("message lookup"):
            try:
                # The first message of the subject, not the last: a server's last-by-subject
                # lookup misses an older message (a nak-delayed publication) once the newest
                # publication of the same run was acked.
                await js.get_msg(self.runs_stream, seq=1, subject=self._run_subject(message_id),
                                 next=True)
            except nats.js.errors.NotFoundError:
                return False
        return True

    def _run_subject(self, message_id: str) -> str:
        return self._run_prefix + subject_token(message_id)

    # -- receiving ---------------------------------------------------------------------------

    async def receive(self, max_messages: int, visibility_timeout: float,
                      wait_seconds: float = 0.0) -> list[Delivery]:
        """First a no-wait pull for up to ``max_messages``; when that is empty, lingering pulls
        of one message until ``wait_seconds`` have passed, topped up by a no-wait pull. A
        lingering pull asks for one message only, so it ends the moment one arrives."""
        self._check_visibility(visibility_timeout)
        if max_messages < 1:
            return []
        deadline = time.monotonic() + max(0.0, wait_seconds)
        pulls = [await self._pull(max_messages, None)]
        while not pulls[-1].msgs:
            remaining = deadline - time.monotonic()
            if remaining < MIN_LINGER_SECONDS:
                break
            pulled = await self._pull(1, remaining)
            pulls.append(pulled)
            if pulled.msgs and max_messages > 1:
                try:
                    pulls.append(await self._pull(max_messages - 1, None))
                except BackendError:  # what we hold already must reach the caller
                    log.warning("NATS top-up pull failed", exc_info=True)
                break
            if not pulled.msgs and pulled.status not in ("404", "408", None):
                await asyncio.sleep(min(BUSY_PAUSE_SECONDS, max(0.0, remaining)))
        return [self._track(msg, start) for p in pulls for msg, start in zip(p.msgs, p.lease_from,
                                                                         strict=True)]

    async def _pull(self, batch: int, expires: float | None) -> _Pulled:
        """One pull request, answered on a reply subscription no other pull uses meanwhile.
        Reads until ``batch`` messages or the status message with which the server closes the
        request; ``expires`` None = no-wait. A subscription whose request was closed goes back
        to the pool; one we stopped reading early (disconnect, slow server) is dropped, so a
        late delivery cannot be mistaken for the next pull's (it is redelivered after AckWait)."""
        nc = self._need_nc()
        if not nc.is_connected:  # fail fast while reconnecting; the caller retries
            raise BackendError(f"not connected to NATS at {self.url} (reconnecting)")
        with _driver_errors("pull"):
            sub = self._idle.pop() if self._idle else await nc.subscribe(nc.new_inbox())
        request: dict[str, object] = {"batch": batch}
        if expires is None:
            request["no_wait"] = True
            limit = REQUEST_TIMEOUT_SECONDS
        else:
            request["expires"] = int(expires * 1e9)  # nanoseconds
            limit = expires + PULL_GRACE_SECONDS
        pulled = _Pulled(sent_at=time.monotonic())
        closed = False
        try:
            with _driver_errors("pull"):
                await nc.publish(self._next_subject, json.dumps(request).encode(),
                                 reply=sub.subject)
                end = pulled.sent_at + limit
                while len(pulled.msgs) < batch:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        if sub.pending_msgs == 0:
                            break
                        # Our loop stalled past the end while the answer had arrived: it is
                        # ours (its AckWait runs), so take it rather than let it go.
                        remaining = PENDING_READ_SECONDS
                    try:
                        msg = await sub.next_msg(timeout=remaining)
                    except nats.errors.TimeoutError:
                        break
                    status = (msg.headers or {}).get("Status")
                    if status:
                        pulled.status = status
                        pulled.description = (msg.headers or {}).get("Description", "")
                        break
                    # A no-wait pull is answered at once, so its send time bounds the server's
                    # AckWait start from below. A lingering pull may wait long before the
                    # server delivers; its message counts from arrival, and the lease margin
                    # covers the one-way trip from the server.
                    lease_from = pulled.sent_at if expires is None else time.monotonic()
                    pulled.msgs.append(msg)
                    pulled.lease_from.append(lease_from)
                closed = pulled.status is not None or len(pulled.msgs) == batch
        finally:
            if closed and sub.pending_msgs == 0:
                self._idle.append(sub)
            else:
                self._watch_late_replies(sub)
        if pulled.status not in (None, "404", "408", "409") or "Deleted" in pulled.description:
            raise BackendError(f"NATS pull failed: {pulled.status} {pulled.description}")
        if not closed and not pulled.msgs:
            raise BackendError(f"NATS did not answer a pull within {limit:g}s")
        return pulled

    def _watch_late_replies(self, sub: Subscription) -> None:
        """Retire the reply inbox of a pull we stopped reading early: what the server still
        delivers to it is NAKed (visible again at once) until the watch ends, then the inbox is
        dropped. Without this, a message delivered into a dropped inbox waits out AckWait."""
        task = asyncio.get_running_loop().create_task(self._hand_back_late(sub))
        self._late_watches.add(task)
        task.add_done_callback(self._late_watches.discard)

    async def _hand_back_late(self, sub: Subscription) -> None:
        end = time.monotonic() + LATE_REPLY_WATCH_SECONDS
        try:
            while (remaining := end - time.monotonic()) > 0:
                try:
                    msg = await sub.next_msg(timeout=remaining)
                except nats.errors.TimeoutError:
                    break
                if (msg.headers or {}).get("Status"):
                    break  # the server closed the pull: nothing more comes
                await msg.nak()
        except (nats.errors.Error, OSError):
            pass  # disconnected: the server redelivers after AckWait, as for any lost receiver
        finally:
            with contextlib.suppress(nats.errors.Error, OSError):
                await sub.unsubscribe()

    def _track(self, msg: Msg, lease_from: float) -> Delivery:
        meta = msg.metadata
        seq = meta.sequence.stream
        headers = msg.headers or {}
        message_id = headers.get(HEADER_MESSAGE_ID) or headers.get(HEADER_DEDUPE) or str(seq)
        receipt = f"{seq}.{meta.num_delivered}.{self._instance}"
        older = self._receipt_of.get(seq)
        if older is not None:  # redelivered to us: the earlier delivery is stale
            self._forget(older)
        self._inflight[receipt] = _InFlight(msg, seq, lease_from + self.visibility_timeout)
        self._receipt_of[seq] = receipt
        self._evict()
        return Delivery(message_id=message_id, body=msg.data, delivery_count=meta.num_delivered,
                        receipt=receipt)

    def _evict(self) -> None:
        now = time.monotonic()
        while self._inflight:
            receipt, entry = next(iter(self._inflight.items()))
            if len(self._inflight) <= MAX_TRACKED and entry.lease_until > now:
                break
            self._forget(receipt)

    def _forget(self, receipt: str) -> None:
        entry = self._inflight.pop(receipt, None)
        if entry is not None and self._receipt_of.get(entry.stream_seq) == receipt:
            del self._receipt_of[entry.stream_seq]

    def _held(self, delivery: Delivery) -> _InFlight | None:
        """The in-flight entry, if this object still holds the delivery's lease."""
        entry = self._inflight.get(delivery.receipt)
        if entry is None:
            return None
        if time.monotonic() >= entry.lease_until - self._margin:
            self._forget(delivery.receipt)
            return None
        return entry

    # -- settling ----------------------------------------------------------------------------

    async def extend(self, delivery: Delivery, visibility_timeout: float) -> bool:
        """+WPI restarts the server's AckWait timer; confirmed by the server's reply."""
        self._check_visibility(visibility_timeout)
        entry = self._held(delivery)
        if entry is None:
            return False
        sent_at = time.monotonic()
        await self._ack_request(entry, b"+WPI")
        entry.lease_until = sent_at + self.visibility_timeout
        self._inflight.move_to_end(delivery.receipt)
        return True

    async def ack(self, delivery: Delivery) -> bool:
        return await self._settle(delivery, b"+ACK")

    async def nack(self, delivery: Delivery, delay_seconds: float) -> bool:
        payload = b"-NAK"
        if delay_seconds > 0:
            payload += b" " + json.dumps({"delay": int(delay_seconds * 1e9)}).encode()
        return await self._settle(delivery, payload)

    async def _settle(self, delivery: Delivery, payload: bytes) -> bool:
        entry = self._held(delivery)
        if entry is None:
            return False
        await self._ack_request(entry, payload)
        self._forget(delivery.receipt)
        return True

    async def _ack_request(self, entry: _InFlight, payload: bytes) -> None:
        """Acks go as requests: the server's reply proves it processed them."""
        nc = self._need_nc()
        assert entry.msg.reply
        with _driver_errors("ack"):
            await nc.request(entry.msg.reply, payload, timeout=REQUEST_TIMEOUT_SECONDS)

    # -- dead letters ------------------------------------------------------------------------

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool:
        """Copy to the DLQ first, then terminate: a crash in between leaves the message in both
        places, and dead-lettering it again overwrites its one DLQ entry."""
        entry = self._held(delivery)
        if entry is None:
            return False
        js = self._need_js()
        headers = {
            HEADER_MESSAGE_ID: delivery.message_id,
            HEADER_REASON: quote(reason[:MAX_REASON_CHARS], safe=_REASON_SAFE),
            HEADER_DEAD_AT: self.clock.now().isoformat(),
            HEADER_DELIVERIES: str(delivery.delivery_count),
        }
        with _driver_errors("dead-letter publish"):
            await js.publish(self._dlq_subject(delivery.message_id), delivery.body,
                             stream=self.dlq_stream, headers=headers)
        await self._ack_request(entry, b"+TERM")
        self._forget(delivery.receipt)
        return True

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]:
        """Newest first. Reads a window of the DLQ's last sequences with next-by-subject gets
        (which skip purged gaps), widening the window until it holds ``limit`` entries."""
        if limit < 1:
            return []
        js = self._need_js()
        with _driver_errors("dead-letter list"):
            state = (await js.stream_info(self.dlq_stream)).state
        if state.messages == 0:
            return []
        first, last = state.first_seq, state.last_seq
        floor = max(first, last - MAX_DEAD_LETTER_SCAN + 1)
        window = limit
        while True:
            start = max(floor, last - window + 1)
            found = await self._dlq_range(start, last)
            if len(found) >= limit or start <= floor:
                break
            window *= 4
        found.sort(key=lambda m: m.seq or 0, reverse=True)
        return [self._dead_letter_of(m) for m in found[:limit]]

    async def _dlq_range(self, start: int, last: int) -> list[RawStreamMsg]:
        js = self._need_js()
        found: list[RawStreamMsg] = []
        seq = start
        with _driver_errors("dead-letter read"):
            while seq <= last:
                try:
                    msg = await js.get_msg(self.dlq_stream, seq=seq, subject=self.dlq_subjects,
                                           next=True)
                except nats.js.errors.NotFoundError:
                    break
                if msg.seq is None or msg.seq > last:
                    break
                found.append(msg)
                seq = msg.seq + 1
        return found

    def _dead_letter_of(self, msg: RawStreamMsg) -> DeadLetter:
        headers = msg.headers or {}
        message_id = headers.get(HEADER_MESSAGE_ID) or (msg.subject or "")[len(self._dlq_prefix):]
        dead_at_text = headers.get(HEADER_DEAD_AT)
        dead_at = (datetime.fromisoformat(dead_at_text) if dead_at_text
                   else msg.time or self.clock.now())
        return DeadLetter(message_id=message_id, body=msg.data or b"",
                          reason=unquote(headers.get(HEADER_REASON, "")), dead_at=dead_at)

    async def dead_letter_redrive(self, message_id: str) -> bool:
        """Republish under a new Nats-Msg-Id (else the dedupe window could swallow it) while
        the message id header keeps the run id; then purge the DLQ subject. Only the caller
        whose purge removed the entry gets True."""
        js = self._need_js()
        subject = self._dlq_subject(message_id)
        with _driver_errors("redrive"):
            try:
                dead = await js.get_msg(self.dlq_stream, subject=subject)
            except nats.js.errors.NotFoundError:
                return False
        await self._publish_run(message_id, f"{message_id}:redrive:{dead.seq}", dead.data or b"")
        return await self._purge(subject) > 0

    async def _purge(self, subject: str) -> int:
        nc = self._need_nc()
        with _driver_errors("dead-letter purge"):
            reply = await nc.request(f"$JS.API.STREAM.PURGE.{self.dlq_stream}",
                                     json.dumps({"filter": subject}).encode(),
                                     timeout=REQUEST_TIMEOUT_SECONDS)
        answer = json.loads(reply.data or b"{}")
        if "error" in answer:
            raise BackendError(f"NATS dead-letter purge failed: {answer['error']}")
        return int(answer.get("purged", 0))

    def _dlq_subject(self, message_id: str) -> str:
        return self._dlq_prefix + subject_token(message_id)

    async def prune(self, before: datetime) -> int:
        return 0  # the dead-letter stream's MaxAge expires them

    # -- observing ---------------------------------------------------------------------------

    async def depth(self) -> int:
        js = self._need_js()
        with _driver_errors("consumer info"):
            info = await js.consumer_info(self.runs_stream, CONSUMER)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    # -- helpers -----------------------------------------------------------------------------

    def _check_visibility(self, visibility_timeout: float) -> None:
        if abs(visibility_timeout - self.visibility_timeout) > 1e-6:
            raise ConfigError(
                f"NATS AckWait is fixed per consumer at {self.visibility_timeout}s; "
                f"got a visibility timeout of {visibility_timeout}s",
                field="visibility_timeout", expected=f"{self.visibility_timeout}")

    def _need_nc(self) -> Client:
        if self._nc is None:
            raise BackendError("the NATS queue is not open")
        return self._nc

    def _need_js(self) -> JetStreamContext:
        if self._js is None:
            raise BackendError("the NATS queue is not open")
        return self._js

    async def _on_error(self, exc: Exception) -> None:
        # While (re)connecting every refused attempt lands here: once per disconnect is enough.
        connected = self._nc is not None and self._nc.is_connected
        log.log(logging.WARNING if connected else logging.DEBUG, "NATS error: %r", exc)

    async def _on_disconnected(self) -> None:
        if self._nc is None:  # we are closing
            return
        log.warning("disconnected from NATS; reconnecting every %gs", RECONNECT_WAIT_SECONDS)

    async def _on_reconnected(self) -> None:
        log.info("reconnected to NATS")
