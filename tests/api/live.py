"""A real uvicorn server on a free loopback port, in a background thread (API tests and CLI
client tests talk to it over a real socket)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import uvicorn

from onthedot.api.app import create_app
from onthedot.config import Settings
from tests.support.waiting import wait_until


@dataclass
class LiveServer:
    url: str
    settings: Settings
    server: uvicorn.Server


@contextlib.contextmanager
def live_server(settings: Settings, roles: Iterable[str] = ()) -> Iterator[LiveServer]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # bound before the server starts: no race for the port
    port = sock.getsockname()[1]
    settings = settings.model_copy(update={"host": "127.0.0.1", "port": port})
    config = uvicorn.Config(create_app(settings=settings, roles=roles), lifespan="on",
                            log_config=None, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="uvicorn-test")
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), 15, "uvicorn to start")
        assert server.started, "uvicorn did not start (see the log)"
        yield LiveServer(url=f"http://127.0.0.1:{port}", settings=settings, server=server)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"
