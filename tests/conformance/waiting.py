"""Waiting for a condition with a deadline, instead of sleeping a fixed time.

PostgreSQL shows a run event only once every older transaction in the cluster has ended, so a
test that just committed one polls for it; SQLite shows it at once and the first poll succeeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_SECONDS = 30.0  # generous: another test run on the same server may hold a transaction
POLL_SECONDS = 0.02


async def wait_until(probe: Callable[[], Awaitable[T]], *, what: str,
                     within: float = DEADLINE_SECONDS) -> T:
    """Call ``probe`` until it returns something truthy; return that value. Fails the test
    with ``what`` when the deadline passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(f"gave up after {within:.0f}s waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def wait_for_count(probe: Callable[[], Awaitable[list[T]]], count: int, *, what: str,
                         within: float = DEADLINE_SECONDS) -> list[T]:
    """Poll ``probe`` until it returns at least ``count`` items; return them."""
    async def enough() -> list[T]:
        items = await probe()
        return items if len(items) >= count else []

    if count == 0:
        return await probe()
    return await wait_until(enough, what=what, within=within)
