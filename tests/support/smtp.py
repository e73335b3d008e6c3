"""A real SMTP server on loopback (aiosmtpd) that keeps every message it accepts.

``answer`` decides the reply to DATA (default ``250``); ``hold`` blocks a DATA command until
``release()`` after the message was stored, to catch a sender between the server having the
message and the sender hearing so; ``hold_quit`` holds the answer to QUIT until
``release_quit()``, to see what the sender did before its session ended.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from typing import Any

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Mailbox:
    answer: Callable[[EmailMessage, int], str] = lambda _m, _n: "250 OK"
    hold: bool = False
    hold_quit: bool = False  # QUIT is answered only after release_quit()
    messages: list[EmailMessage] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    quit_arrived: threading.Event = field(default_factory=threading.Event)
    _release_quit: threading.Event = field(default_factory=threading.Event)
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _controller: Controller | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.original_content or envelope.content,
                                     policy=default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self.messages.append(message)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            nth = len(self.messages)
        self.arrived.set()
        if self.hold:
            self._release.wait(timeout=60)
        return self.answer(message, nth)

    async def handle_QUIT(self, server: Any, session: Any, envelope: Any) -> str:
        self.quit_arrived.set()
        if self.hold_quit:
            self._release_quit.wait(timeout=60)
        return "221 Bye"

    def release_quit(self) -> None:
        self._release_quit.set()

    def start(self) -> Mailbox:
        self.port = free_port()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def release(self) -> None:
        self._release.set()

    def stop(self) -> None:
        self._release.set()
        self._release_quit.set()
        if self._controller is not None:
            self._controller.stop()

    def count(self) -> int:
        with self._lock:
            return len(self.messages)

    def message_ids(self) -> list[str]:
        with self._lock:
            return [str(m["Message-ID"]) for m in self.messages]
