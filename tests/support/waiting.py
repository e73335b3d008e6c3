"""Wait for a condition with a deadline instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

POLL_SECONDS = 0.02


def wait_until(condition: Callable[[], bool], within: float = 10.0,
               what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(POLL_SECONDS)


async def async_wait_until(condition: Callable[[], Awaitable[bool]], within: float = 10.0,
                           what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)
