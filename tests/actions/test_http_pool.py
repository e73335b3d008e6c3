"""The guarded client's connections (aiohttp under httpx, actions/egress.py): kept alive and
reused for the name they were checked for, never more at once than the pool's limit, closed
with the client; a GET goes out without body headers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest

from onthedot.actions.egress import EgressGuard, guarded_client, read_capped
from onthedot.domain.errors import ActionError, EgressRefusedError
from tests.actions.conftest import FakeDns
from tests.support.waiting import async_wait_until

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"


@dataclass
class CountingServer:
    """Answers every request on a connection with ``ANSWER``, after ``release`` is set; counts
    connections opened, open now and the most open at once."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    opened: int = 0
    open_now: int = 0
    most_open: int = 0
    heads: list[bytes] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.heads.append(head)
                await self.release.wait()
                writer.write(ANSWER)
                await writer.drain()
        finally:
            self.open_now -= 1
            writer.close()


@pytest.fixture
async def counting() -> AsyncIterator[CountingServer]:
    server = CountingServer()
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    yield server
    listening.close()
    await listening.wait_closed()


async def _post(client: httpx.AsyncClient, url: str, method: str = "POST") -> int:
    content = b"{}" if method == "POST" else None
    async with client.stream(method, url, content=content, timeout=10) as response:
        await read_capped(response)
        return response.status_code


async def test_calls_in_turn_reuse_one_connection_checked_once(counting: CountingServer) -> None:
    counting.release.set()
    dns = FakeDns({"hooks.example.test": ["127.0.0.1"]})
    client = guarded_client(EgressGuard(["127.0.0.1"], resolve=dns))
    url = f"http://hooks.example.test:{counting.port}/hook"
    try:
        assert [await _post(client, url) for _ in range(5)] == [200] * 5
        assert counting.opened == 1, "each call opened its own connection"
        assert dns.asked == ["hooks.example.test"], "a reused connection was checked again"
    finally:
        await client.aclose()
    await async_wait_until(lambda: _true(counting.open_now == 0), 5,
                           "the client's close to close its connection")


async def test_never_more_connections_than_the_pool_holds(counting: CountingServer) -> None:
    client = guarded_client(EgressGuard(["127.0.0.1"]),
                            limits=httpx.Limits(max_connections=3, max_keepalive_connections=3))
    url = f"http://127.0.0.1:{counting.port}/hook"
    try:
        calls = [asyncio.create_task(_post(client, url)) for _ in range(10)]
        # Three requests arrive on three connections and are held; the other seven wait for
        # a connection of the pool instead of opening more.
        await async_wait_until(lambda: _true(len(counting.heads) == 3), 5, "three requests")
        assert counting.opened == 3
        counting.release.set()
        assert await asyncio.gather(*calls) == [200] * 10
        assert counting.most_open == 3, counting.most_open
        assert len(counting.heads) == 10
    finally:
        await client.aclose()


async def test_refused_and_unresolved_hosts_do_not_use_up_the_pool(
        counting: CountingServer) -> None:
    """A refusal raised inside the connector gives its connection slot back: a pool of two
    still serves an admitted host after many refusals."""
    counting.release.set()
    dns = FakeDns({"inside.example.test": ["10.0.0.1"]})
    client = guarded_client(EgressGuard(["127.0.0.1"], resolve=dns),
                            limits=httpx.Limits(max_connections=2, max_keepalive_connections=2))
    try:
        for _ in range(3):
            with pytest.raises(EgressRefusedError):
                await client.get("http://inside.example.test/", timeout=5)
            with pytest.raises(EgressRefusedError):
                await client.get("http://10.1.2.3/", timeout=5)
            with pytest.raises(ActionError, match="could not resolve"):
                await client.get("http://missing.example.test/", timeout=5)
        assert await _post(client, f"http://127.0.0.1:{counting.port}/hook") == 200
    finally:
        await client.aclose()
    assert len(counting.heads) == 1


async def test_a_get_carries_no_body_headers(counting: CountingServer) -> None:
    counting.release.set()
    client = guarded_client(EgressGuard(["127.0.0.1"]))
    url = f"http://127.0.0.1:{counting.port}/hook"
    try:
        assert await _post(client, url, "GET") == 200
        assert await _post(client, url, "POST") == 200
    finally:
        await client.aclose()
    get, post = (head.lower() for head in counting.heads)
    assert b"content-length" not in get
    assert b"transfer-encoding" not in get
    assert b"content-length: 2\r\n" in post


async def _true(value: bool) -> bool:
    return value


async def test_a_put_whose_connection_breaks_is_sent_once() -> None:
    """aiohttp by itself sends an idempotent request again on a new connection when a reused
    one closes before the answer; a webhook is sent once per attempt, as before the switch."""
    received: list[bytes] = []

    async def answer_once_then_hang_up(reader: asyncio.StreamReader,
                                       writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received.append(head)
                await reader.readexactly(2)  # the body
                if len(received) > 1:
                    return  # read, acted on, no answer
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    listening = await asyncio.start_server(answer_once_then_hang_up, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    client = guarded_client(EgressGuard(["127.0.0.1"]))
    try:
        url = f"http://127.0.0.1:{port}/hook"
        assert await _post(client, url) == 200  # opens the connection that is then reused
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("PUT", url, content=b"{}", timeout=10) as response:
                await read_capped(response)
        assert [head.split(b" ")[0] for head in received] == [b"POST", b"PUT"]
    finally:
        await client.aclose()
        listening.close()
        await listening.wait_closed()
