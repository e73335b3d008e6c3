"""Coalescing: writes that arrive while a flush is being written go together in the next one.

There is no timer. A call that finds no flush running starts one at once, so a lone caller waits
for nothing but its own write; calls that arrive meanwhile wait for it to end and then go
together, up to ``max_items`` at a time. Batches therefore grow with the load, and the latency
of each call stays about one write. Each caller is answered only once the write that holds its
item has ended.

Errors stay with their item. When the database is unavailable (``BackendError``, but not its
``StatementRefusedError``: a deadlock or a lock timeout is not unavailability) every caller of
the flush gets that error, as each would have alone. When the shared write fails for any other
reason, each item is written again on its own, so one item the database refuses fails one
caller; a lone item refused for a reason of the moment (``StatementRefusedError``) is written
again on its own too, where ``write_one`` may retry it. Used by the job group commit
(store/group_commit.py), the worker's run batches (store/run_batches.py) and the queues' acks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from onthedot.domain.errors import BackendError, StatementRefusedError

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741 - the item, as R is its result
R = TypeVar("R")


class Coalescer(Generic[I, R]):
    """``submit(item)`` for many concurrent callers of one event loop. ``write_many`` writes a
    batch in one go (results in the items' order); ``write_one`` writes one item alone."""

    def __init__(self, write_many: Callable[[list[I]], Awaitable[Sequence[R]]],
                 write_one: Callable[[I], Awaitable[R]], *, max_items: int,
                 what: str) -> None:
        self._write_many = write_many
        self._write_one = write_one
        self._max_items = max_items
        self._what = what  # "statements", "jobs": for the log and the task's name
        self._waiting: list[tuple[I, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: I) -> R:
        """``item``'s result, once the write that holds it has ended."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        running = self._flusher
        if running is None or running.done() or running.get_loop() is not future.get_loop():
            self._flusher = asyncio.create_task(self._flush_all(),
                                                name=f"onthedot-coalesce-{self._what}")
        return await future

    async def _flush_all(self) -> None:
        batch: list[tuple[I, asyncio.Future[R]]] = []
        try:
            while self._waiting:
                batch = self._waiting[:self._max_items]
                del self._waiting[:self._max_items]
                await self._flush(batch)
        except BaseException as exc:  # cancelled with the loop, or a bug: nobody waits forever
            for _item, future in [*batch, *self._waiting]:
                _fail(future, exc)
            self._waiting.clear()
            raise

    async def _flush(self, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        try:
            results = await self._write_many([item for item, _ in batch])
        except Exception as exc:
            if isinstance(exc, BackendError) and not isinstance(exc, StatementRefusedError):
                for _item, future in batch:  # unavailable: alone, each would fail the same
                    _fail(future, exc)
                return
            if len(batch) == 1 and not isinstance(exc, StatementRefusedError):
                _fail(batch[0][1], exc)
                return
            log.warning("a group of %d %s failed (%s); writing each on its own",
                        len(batch), self._what, exc)
            for item, future in batch:
                await self._alone(item, future)
            return
        for (_item, future), result in zip(batch, results, strict=True):
            _answer(future, result)

    async def _alone(self, item: I, future: asyncio.Future[R]) -> None:
        try:
            result = await self._write_one(item)
        except Exception as exc:
            _fail(future, exc)
        else:
            _answer(future, result)


def _answer(future: asyncio.Future[R], result: R) -> None:
    if not future.done():  # its caller may have gone away; the write stands
        future.set_result(result)


def _fail(future: asyncio.Future[R], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
