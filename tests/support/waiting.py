"""Wait for a condition with a deadline instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

POLL_SECONDS = 0.02


def wait_until(condition: Callable[[], bool], within: float = 10.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(POLL_SECONDS)


async def async_wait_until(probe: Callable[[], Awaitable[T]], within: float = 10.0,
                           what: str = "condition") -> T:
    """Await ``probe`` until it returns something truthy, and return that value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def wait_for_count(probe: Callable[[], Awaitable[list[T]]], count: int, *, what: str,
                         within: float = 30.0) -> list[T]:
    """Poll ``probe`` until it returns at least ``count`` items; return them."""
    async def enough() -> list[T]:
        items = await probe()
        return items if len(items) >= count else []

    if count == 0:
        return await probe()
    return await async_wait_until(enough, within, what)
