"""What both backends share in ``jobs_insert_many``: which items go into the multi-row insert,
and how each item's result is made from what the insert reported.

An idempotency key may appear in several items of one call (a client retrying inside its own
batch, or two concurrent requests coalesced into one commit). Only its first item is offered to
the database; the others follow it, so no statement ever holds the same key twice and the
outcome does not depend on the order a database processes the rows of one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onthedot.domain.errors import BackendError
from onthedot.domain.models import Job, JobRun
from onthedot.store.base import JobCreated, JobInsert

Key = tuple[str, str]  # (user_id, idempotency_key)


def key_of(job: Job) -> Key | None:
    return None if job.idempotency_key is None else (job.user_id, job.idempotency_key)


@dataclass(frozen=True)
class InsertPlan:
    items: Sequence[JobInsert]
    offered: list[JobInsert]  # the items the insert statement gets, keyed ones sorted by key

    @classmethod
    def of(cls, items: Sequence[JobInsert]) -> InsertPlan:
        seen: set[Key] = set()
        unkeyed: list[JobInsert] = []
        keyed: list[JobInsert] = []
        for item in items:
            key = key_of(item.job)
            if key is None:
                unkeyed.append(item)
            elif key not in seen:
                seen.add(key)
                keyed.append(item)
        # Keys in one order everywhere: two concurrent inserts that wait on each other's keys
        # (PostgreSQL's unique index) then wait in the same order and cannot deadlock.
        keyed.sort(key=lambda i: key_of(i.job) or ("", ""))
        return cls(items=items, offered=unkeyed + keyed)

    def runs_of(self, created: set[str]) -> list[JobRun]:
        """First runs of the jobs the insert created (the others' runs are never written)."""
        return [i.first_run for i in self.offered
                if i.first_run is not None and i.job.job_id in created]

    def keys_to_read(self, created: set[str]) -> list[Key]:
        """Keys of items that did not create their job: their results are the stored holder."""
        keys = {key_of(i.job) for i in self.items if i.job.job_id not in created}
        return sorted(k for k in keys if k is not None)

    def results(self, created: set[str], holders: dict[Key, Job]) -> list[JobCreated]:
        out: list[JobCreated] = []
        for item in self.items:
            if item.job.job_id in created:
                out.append(JobCreated(job=item.job, created=True))
                continue
            key = key_of(item.job)
            holder = None if key is None else holders.get(key)
            if holder is None:  # cannot happen: only a held key stops an insert
                raise BackendError("a job was not inserted and no job holds its key")
            out.append(JobCreated(job=holder, created=False))
        return out
