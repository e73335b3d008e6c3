"""The socket `onthedot serve` listens on: accepted connections must send small answers at once.

asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets whose ``proto`` is TCP; a
listening socket made with proto 0 hands out connections that keep Nagle on, and every answer on a
keep-alive connection then waits for the client's delayed ACK (~40 ms here).
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from onthedot.cli import _bind
from onthedot.domain.errors import ConfigError


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_accepted_connections_have_nagle_off(host: str) -> None:
    try:
        sock = _bind(host, 0)
    except ConfigError:  # a machine without IPv6 loopback
        if host == "::1":
            pytest.skip("no IPv6 loopback")
        raise
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted = writer.get_extra_info("socket")
        seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(handle, sock=sock)
    async with server:
        _reader, writer = await asyncio.open_connection(host, sock.getsockname()[1])
        try:
            assert await asyncio.wait_for(seen, 5) != 0
        finally:
            writer.close()
            await writer.wait_closed()
