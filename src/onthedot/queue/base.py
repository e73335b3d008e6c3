"""The Queue protocol: at-least-once delivery of run messages, with no job semantics.

Contract (every backend passes ``tests/conformance/test_queue.py``):

* ``send``: the message id is the run id. Every send is one publication, delivered at least once
  whatever else the queue holds for that id: sending an id that is already waiting or in flight
  adds a message, and acking, nacking or dead-lettering one delivery never deletes or delays
  another publication of the same id (a retry is often published before the previous attempt's
  message is acked). Duplicates are harmless: the store's claim fences them.
* ``receive``: hands out up to ``max_messages`` visible messages and hides each from every other
  receiver for ``visibility_timeout`` seconds. A receiver that neither acks, nacks nor extends
  in that time loses the message: it becomes visible again and is delivered to someone else with
  ``delivery_count`` + 1.
* ``extend`` (the heartbeat) pushes the message's invisibility to now + ``visibility_timeout``.
* ``ack`` removes the message. ``nack(delay)`` makes it visible again after ``delay`` seconds
  (delayed retry). Acking, nacking or extending with a stale delivery (one that expired and was
  handed to another receiver) is ignored and reports False.
* ``dead_letter`` moves the message to the dead-letter queue; ``dead_letters`` lists it and
  ``dead_letter_redrive`` sends it back to the main queue.
* ``live`` tells which ids still have a message (waiting, in flight or delayed): the rescuer
  publishes a run again only when its message is gone, so a run that merely waits behind a
  backlog never gains a second copy.

The queue only ever holds runs that are due: future runs wait in the store, never behind a
visibility timeout used as a delay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from onthedot.domain.models import JobRun


def run_message(run: JobRun) -> bytes:
    """The message body of one publication of a run; workers re-read everything else from the
    store. ``enqueued_at`` names the publication, so a later one (after a retry or a rescue) is
    a new message to a backend that drops duplicates."""
    enqueued = None if run.enqueued_at is None else run.enqueued_at.isoformat()
    return json.dumps({"run_id": run.run_id, "job_id": run.job_id,
                       "enqueued_at": enqueued}).encode()


@dataclass(frozen=True)
class Delivery:
    message_id: str
    body: bytes
    delivery_count: int  # 1 on first delivery
    receipt: str  # backend-specific handle proving this receiver holds the message


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    body: bytes
    reason: str
    dead_at: datetime


class Queue(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise BackendError when the queue does not answer."""
        ...

    async def send(self, message_id: str, body: bytes) -> None: ...

    async def send_many(self, messages: list[tuple[str, bytes]]) -> None: ...

    async def receive(self, max_messages: int, visibility_timeout: float,
                      wait_seconds: float = 0.0) -> list[Delivery]:
        """Wait up to ``wait_seconds`` for at least one message."""
        ...

    async def extend(self, delivery: Delivery, visibility_timeout: float) -> bool: ...

    async def ack(self, delivery: Delivery) -> bool: ...

    async def nack(self, delivery: Delivery, delay_seconds: float) -> bool: ...

    async def dead_letter(self, delivery: Delivery, reason: str) -> bool: ...

    async def dead_letters(self, limit: int = 100) -> list[DeadLetter]: ...

    async def dead_letter_redrive(self, message_id: str) -> bool: ...

    async def live(self, message_ids: list[str]) -> set[str]:
        """The subset of ``message_ids`` that have a message waiting, in flight or delayed."""
        ...

    async def prune(self, before: datetime) -> int:
        """Drop dead letters older than ``before``; returns how many (a backend that expires
        them itself returns 0)."""
        ...

    async def depth(self) -> int:
        """Messages waiting or in flight (not dead-lettered)."""
        ...
