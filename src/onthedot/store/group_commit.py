"""Group commit: concurrent single creates share one multi-row insert transaction.

::

    create ──┐   idle: flushed at once              ┌─► its own JobCreated, after the commit
    create ──┼─► waiting ──► flush: jobs_insert_many ┼─► its own JobCreated, after the commit
    create ──┘   (arrived during the previous flush) └─► its own error, if its row failed

There is no timer. A create that finds no flush running starts one at once, so a lone caller
waits for nothing but its own commit; creates that arrive while a flush is in progress wait for
it to end and then go together in the next one. Batches therefore grow with the load (up to
``MAX_ITEMS``), and so does the number of jobs per commit, while the latency of each stays about
one transaction.

Each item is judged exactly as ``job_create`` judges it (``jobs_insert_many`` promises that,
idempotency keys included), and each caller gets its own result only once the transaction that
wrote its job has committed. Errors stay with their item: when the shared transaction fails for
anything but an unavailable database, every item of it is written again on its own, so one row
the database refuses fails one request. When the database is unavailable, every waiter gets
that ``BackendError``, as each would have alone.
"""

from __future__ import annotations

import asyncio
import logging

from onthedot.domain.errors import BackendError
from onthedot.domain.models import Job, JobRun
from onthedot.store.base import JobCreated, JobInsert, JobStore

log = logging.getLogger(__name__)

MAX_ITEMS = 1000  # jobs in one flush: one statement's worth

Waiter = tuple[JobInsert, "asyncio.Future[JobCreated]"]


class GroupCommit:
    """``job_create`` for many concurrent callers of one event loop through one store."""

    def __init__(self, store: JobStore, max_items: int = MAX_ITEMS) -> None:
        self.store = store
        self.max_items = max_items
        self._waiting: list[Waiter] = []
        self._flusher: asyncio.Task[None] | None = None

    async def job_create(self, job: Job, first_run: JobRun | None, *,
                         max_active: int | None = None) -> JobCreated:
        future: asyncio.Future[JobCreated] = asyncio.get_running_loop().create_future()
        self._waiting.append((JobInsert(job=job, first_run=first_run, max_active=max_active),
                              future))
        running = self._flusher
        if running is None or running.done() or running.get_loop() is not future.get_loop():
            self._flusher = asyncio.create_task(self._flush_all(), name="onthedot-group-commit")
        return await future

    async def _flush_all(self) -> None:
        batch: list[Waiter] = []
        try:
            while self._waiting:
                batch = self._waiting[:self.max_items]
                del self._waiting[:self.max_items]
                await self._flush(batch)
        except BaseException as exc:  # cancelled with the loop, or a bug: nobody waits forever
            for _item, future in [*batch, *self._waiting]:
                _fail(future, exc)
            self._waiting.clear()
            raise

    async def _flush(self, batch: list[Waiter]) -> None:
        try:
            results = await self.store.jobs_insert_many([item for item, _ in batch])
        except BackendError as exc:
            for _item, future in batch:
                _fail(future, exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0][1], exc)
                return
            log.warning("a group commit of %d jobs failed (%s); writing each on its own",
                        len(batch), exc)
            await self._one_by_one(batch)
            return
        for (_item, future), result in zip(batch, results, strict=True):
            if not future.done():  # its caller may have gone away; the job stays written
                future.set_result(result)

    async def _one_by_one(self, batch: list[Waiter]) -> None:
        for item, future in batch:
            try:
                if item.max_active is None:
                    result = await self.store.job_create(item.job, item.first_run)
                else:  # job_create knows no quota
                    result = (await self.store.jobs_insert_many([item]))[0]
            except Exception as exc:
                _fail(future, exc)
            else:
                if not future.done():
                    future.set_result(result)


def _fail(future: asyncio.Future[JobCreated], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
