"""Group commit: concurrent single creates share one multi-row insert transaction.

::

    create ──┐   idle: flushed at once              ┌─► its own JobCreated, after the commit
    create ──┼─► waiting ──► flush: jobs_insert_many ┼─► its own JobCreated, after the commit
    create ──┘   (arrived during the previous flush) └─► its own error, if its row failed

There is no timer (the coalescing is db/coalesce.py). A create that finds no flush running
starts one at once, so a lone caller waits for nothing but its own commit; creates that arrive
while a flush is in progress wait for it to end and then go together in the next one. Batches
therefore grow with the load (up to ``MAX_ITEMS``), and so does the number of jobs per commit,
while the latency of each stays about one transaction.

Each item is judged exactly as ``job_create`` judges it (``jobs_insert_many`` promises that,
idempotency keys included), and each caller gets its own result only once the transaction that
wrote its job has committed. Errors stay with their item: when the shared transaction fails for
anything but an unavailable database, every item of it is written again on its own, so one row
the database refuses fails one request. When the database is unavailable, every waiter gets
that ``BackendError``, as each would have alone.
"""

from __future__ import annotations

from onthedot.db.coalesce import Coalescer
from onthedot.domain.models import Job, JobRun
from onthedot.store.base import JobCreated, JobInsert, JobStore

MAX_ITEMS = 1000  # jobs in one flush: one statement's worth


class GroupCommit:
    """``job_create`` for many concurrent callers of one event loop through one store."""

    def __init__(self, store: JobStore, max_items: int = MAX_ITEMS) -> None:
        self.store = store
        self._commits: Coalescer[JobInsert, JobCreated] = Coalescer(
            store.jobs_insert_many, self._insert_one, max_items=max_items, what="jobs")

    async def job_create(self, job: Job, first_run: JobRun | None, *,
                         max_active: int | None = None) -> JobCreated:
        return await self._commits.submit(
            JobInsert(job=job, first_run=first_run, max_active=max_active))

    async def _insert_one(self, item: JobInsert) -> JobCreated:
        if item.max_active is None:
            return await self.store.job_create(item.job, item.first_run)
        return (await self.store.jobs_insert_many([item]))[0]  # job_create knows no quota
