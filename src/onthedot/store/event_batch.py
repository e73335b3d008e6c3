"""The recurring watcher's event apply over a batch of events, written once for every SQL store.

A batch is consecutive events from one cursor position, each with the decision made for it
(``EventApply``). One transaction applies it, with one statement per step for the whole batch::

    advance the cursor   previous -> last event          (guard: the cursor is still at previous)
    lock the jobs        at the versions decided from    (the first refused job cuts the batch:
                                                           the events before it are applied and
                                                           the cursor goes back to the last of them)
    check open runs      of the jobs to end or to give a next run (with their rows locked)
    update the jobs      status, next_run_at, last_run_id, version + 1
    insert next runs     insert-if-absent, then revive CANCELLED ones, touch watermarks

The backend runs each step's SQL (PostgreSQL over arrays, SQLite over JSON); this module decides
what each step writes, from the decisions and what the earlier steps read. A job appears at
most once among a batch's guarded events: its guard compares with the version stored before
the batch, so a second event of it would be decided from a version the first one replaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from onthedot.domain.models import JobRun
from onthedot.store.base import ApplyResult, EventApply, EventsApplied


@dataclass(frozen=True)
class OpenRuns:
    """What the open-run check found for one job, its row locked."""

    other_open: bool  # an open scheduled run besides the next run the event would insert
    open: bool  # an open run (run-now runs included when the event waits for them)


@dataclass(frozen=True)
class JobWrite:
    """One job's projection update (a row of the jobs_apply_events statement)."""

    job_id: str
    version: int
    job_status: str | None
    set_next_run_at: bool
    next_run_at: datetime | None
    last_run_id: str
    updated_at: datetime


class EventBatch:
    """One batch's decisions and what follows from them (see the module docstring)."""

    def __init__(self, applies: Sequence[EventApply]) -> None:
        if not applies:
            raise ValueError("an event batch needs at least one event")
        position = applies[0].previous_event_id
        seen: set[str] = set()
        for apply in applies:
            if apply.previous_event_id != position or apply.consumer != applies[0].consumer:
                raise ValueError("an event batch is consecutive events of one consumer")
            position = apply.event.event_id
            if apply.job_version is not None:
                if apply.event.job_id in seen:
                    raise ValueError(f"job {apply.event.job_id} appears twice in one batch")
                seen.add(apply.event.job_id)
        self.applies = list(applies)
        self.consumer = applies[0].consumer
        self.previous = applies[0].previous_event_id
        self.last = applies[-1].event.event_id

    def guarded(self) -> list[EventApply]:
        """The events whose job exists (a job that is gone only moves the cursor)."""
        return [a for a in self.applies if a.job_version is not None]

    def cut(self, locked: set[str]) -> int:
        """How many events, from the first, apply: up to the first whose job was not locked at
        its version (it changed since the decision)."""
        for i, apply in enumerate(self.applies):
            if apply.job_version is not None and apply.event.job_id not in locked:
                return i
        return len(self.applies)

    def outcome(self, applied: int) -> EventsApplied:
        if applied == len(self.applies):
            return EventsApplied(applied=applied, result=ApplyResult.APPLIED)
        return EventsApplied(applied=applied, result=ApplyResult.JOB_CHANGED)

    @staticmethod
    def to_check(applies: Sequence[EventApply]) -> list[EventApply]:
        """The events whose write depends on the job's open runs."""
        return [a for a in applies if a.job_version is not None
                and (a.insert_run is not None or a.job_status is not None)]

    @staticmethod
    def writes(applies: Sequence[EventApply],
               found: dict[str, OpenRuns]) -> tuple[list[JobWrite], list[JobRun]]:
        """The jobs' updates and the next runs to insert, given the open-run check's answers
        (``found``, by job id)."""
        jobs: list[JobWrite] = []
        runs: list[JobRun] = []
        for apply in applies:
            if apply.job_version is None:
                continue
            runs_now = found.get(apply.event.job_id, OpenRuns(other_open=False, open=False))
            other_open = apply.insert_run is not None and runs_now.other_open
            # A job ends only while no run of it is open (a new time given while this run ran,
            # a redrive, a run-now): that run's own event ends it later.
            ends = apply.job_status is not None and not runs_now.open
            jobs.append(JobWrite(
                job_id=apply.event.job_id,
                version=apply.job_version,
                job_status=apply.job_status.value if ends and apply.job_status else None,
                set_next_run_at=(apply.set_next_run_at and not other_open
                                 and (ends or apply.job_status is None)),
                next_run_at=apply.next_run_at,
                last_run_id=apply.event.run_id,
                updated_at=apply.event.emitted_at,
            ))
            if apply.insert_run is not None and not other_open:
                runs.append(apply.insert_run)
        return jobs, runs


def single_result(applied: EventsApplied) -> ApplyResult:
    """``event_apply``'s answer for a batch of one."""
    return ApplyResult.APPLIED if applied.applied == 1 else applied.result
