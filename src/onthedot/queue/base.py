"""The Queue protocol: at-least-once delivery of run messages, with no job semantics.

Contract (every backend passes ``tests/conformance/test_queue.py``):

* ``send``: the message id is the run id. Sending an id that is already waiting or in flight
  collapses into the existing message (publishing is at-least-once; duplicates are harmless).
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

The queue only ever holds runs that are due: future runs wait in the store, never behind a
visibility timeout used as a delay.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


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

    async def depth(self) -> int:
        """Messages waiting or in flight (not dead-lettered)."""
        ...
