"""The API's HTTP connections: a bound per process, and no connection that holds a file
descriptor while doing nothing.

uvicorn (h11) arms its keep-alive timer only after a response; a connection that never sends a
request, or sends its headers a byte at a time (slowloris), is kept for ever, and enough of them
exhaust the process's file descriptors. This protocol adds what it lacks::

    accepted ──► waiting for headers ──► request in progress ──► idle (keep-alive) ──┐
       │               │ header_timeout: closed                     │ keep_alive: closed
       │               ▲                                            │
       │               └────────────── next request's first byte ◄──┘
       └─ over max_connections: the connection idle longest (waiting for headers or between
          requests) is closed to make room; when every connection has a request in progress,
          the new one is closed at once. Neither writes a log line (a flood would fill the log).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int  # open HTTP connections of one process
    header_timeout_seconds: float  # from accept (or a request's first byte) to its last header
    keep_alive_seconds: float  # an idle connection between two requests


class _Idle:
    """The connections of one server with no request in progress, the longest idle first."""

    def __init__(self) -> None:
        self.order: OrderedDict[GuardedH11Protocol, None] = OrderedDict()

    def mark(self, conn: GuardedH11Protocol) -> None:
        self.order.pop(conn, None)
        self.order[conn] = None

    def discard(self, conn: GuardedH11Protocol) -> None:
        self.order.pop(conn, None)

    def oldest(self) -> GuardedH11Protocol | None:
        return next(iter(self.order), None)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection bound and a header timeout (see the module)."""

    limits: ClassVar[ConnectionLimits]
    idle: ClassVar[_Idle]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.limits.keep_alive_seconds  # type: ignore[assignment]
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._make_room():
            self.connections.discard(self)
            transport.abort()  # every other connection is serving a request: no room
            return
        self.idle.mark(self)
        self._arm_header_timer()

    def _make_room(self) -> bool:
        victim = self.idle.oldest()
        if victim is None:
            return False
        victim.close_quietly()
        return True

    def close_quietly(self) -> None:
        self.idle.discard(self)
        self.connections.discard(self)  # counted out now, not when the loop reports the loss
        self._cancel_header_timer()
        self._unset_keepalive_if_required()
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.idle.discard(self)
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE:
            # Part of a request's head arrived: its remaining headers have a deadline.
            self._arm_header_timer()
        else:
            self._cancel_header_timer()
            self.idle.discard(self)  # a request is in progress: never evicted

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.idle.mark(self)  # keep-alive: uvicorn's timer closes it after keep_alive

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout_seconds,
                                                      self._header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.close_quietly()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """The protocol class of one server: its limits and its own idle list."""

    class Protocol(GuardedH11Protocol):
        pass

    Protocol.limits = limits
    Protocol.idle = _Idle()
    return Protocol
