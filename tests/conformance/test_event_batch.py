"""Store conformance: the recurring watcher's events applied in batches (issue 19 §1); every
backend.

* ``events_apply`` applies consecutive events in ONE transaction with a number of statements
  that does not grow with the batch; each event keeps its guards: a job changed since its
  event's decision cuts the batch there (the events before it apply, the cursor stops at the
  last of them), and the watcher decides that one event again, alone, then goes on.
* A job's second event in one batch is refused (its decision would come from the version the
  first replaces); the watcher puts it in the next batch.
* A failure in the middle of the batch's transaction writes nothing, cursor included, so no
  event is lost or applied twice.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta

import psycopg
import pytest

from onthedot.config import Settings
from onthedot.domain.clock import FakeClock
from onthedot.domain.models import Job, JobParams, JobRun, JobStatus, RunEvent, RunStatus
from onthedot.metrics import DB_STATEMENTS
from onthedot.store.base import (
    ApplyResult,
    EventApply,
    EventsApplied,
    JobSave,
    Store,
)
from onthedot.watcher.recurring import CONSUMER, RecurringWatcher

from .factories import make_run
from .test_store import finished_event, half_past, visible_events, with_job


def _next(job: Job, at: datetime) -> JobRun:
    return make_run(job, RunStatus.PENDING, scheduled_at=at)


def _decisions(events: list[RunEvent], jobs: list[Job], nexts: list[JobRun],
               cursor: int = 0) -> list[EventApply]:
    """What the watcher decides for recurring jobs: each event gives its job its next run."""
    decisions = []
    for event, job, nxt in zip(events, jobs, nexts, strict=True):
        decisions.append(EventApply(consumer=CONSUMER, previous_event_id=cursor, event=event,
                                    job_version=job.version, insert_run=nxt, job_status=None,
                                    next_run_at=nxt.scheduled_at, set_next_run_at=True))
        cursor = event.event_id
    return decisions


async def _jobs_with_events(store: Store, count: int, now: datetime,
                            ) -> tuple[list[Job], list[RunEvent], list[JobRun]]:
    jobs = [await with_job(store, now=now - timedelta(days=1, seconds=i)) for i in range(count)]
    events = [await finished_event(store, job, now - timedelta(minutes=count - i))
              for i, job in enumerate(jobs)]
    await visible_events(store, 0, count)
    nexts = [_next(job, now + timedelta(hours=1, minutes=i)) for i, job in enumerate(jobs)]
    return jobs, events, nexts


def _store_statements() -> int:
    return sum(n for (_, role), n in DB_STATEMENTS.items() if role == "store")


async def test_a_batch_applies_every_event_with_statements_that_do_not_grow_with_it(
        store: Store) -> None:
    now = half_past()
    jobs, events, nexts = await _jobs_with_events(store, 12, now)
    decisions = _decisions(events, jobs, nexts)

    # The consumer's first event also makes its cursor row.
    assert await store.events_apply(decisions[:1]) == EventsApplied(
        applied=1, result=ApplyResult.APPLIED)
    before = _store_statements()
    small = await store.events_apply(decisions[1:3])
    small_cost = _store_statements() - before
    before = _store_statements()
    large = await store.events_apply(decisions[3:])
    large_cost = _store_statements() - before

    assert small == EventsApplied(applied=2, result=ApplyResult.APPLIED)
    assert large == EventsApplied(applied=9, result=ApplyResult.APPLIED)
    # cursor, job lock, open-run check, job update, run insert (+ its watermark touch on SQLite)
    assert large_cost == small_cost <= 6
    assert await store.cursor_get(CONSUMER) == events[-1].event_id
    for job, nxt in zip(jobs, nexts, strict=True):
        stored = await store.job_get_any(job.job_id)
        assert stored is not None
        assert stored.version == job.version + 1
        assert stored.next_run_at == nxt.scheduled_at
        run = await store.run_get(nxt.run_id)
        assert run is not None
        assert run.status is RunStatus.PENDING
    # The same batch again: the cursor has moved, nothing is applied twice.
    assert await store.events_apply(decisions[3:]) == EventsApplied(
        applied=0, result=ApplyResult.CURSOR_MOVED)


async def test_a_job_changed_since_its_decision_cuts_the_batch_at_its_event(store: Store) -> None:
    now = half_past()
    jobs, events, nexts = await _jobs_with_events(store, 4, now)
    decisions = _decisions(events, jobs, nexts)
    paused = await store.job_save(JobSave(job=replace(jobs[2], status=JobStatus.PAUSED,
                                                      next_run_at=None, updated_at=now),
                                          cancel_open_runs=True))
    assert paused is not None

    done = await store.events_apply(decisions)

    assert done == EventsApplied(applied=2, result=ApplyResult.JOB_CHANGED)
    assert await store.cursor_get(CONSUMER) == events[1].event_id
    for job, nxt in zip(jobs[:2], nexts[:2], strict=True):
        stored = await store.job_get_any(job.job_id)
        assert stored is not None
        assert stored.version == job.version + 1
        assert await store.run_get(nxt.run_id) is not None
    assert await store.job_get_any(jobs[2].job_id) == paused
    assert await store.job_get_any(jobs[3].job_id) == jobs[3]  # after the cut: untouched
    for nxt in nexts[2:]:
        assert await store.run_get(nxt.run_id) is None
    # The refused event alone, decided again from the paused job (no next run), then the rest.
    keep = replace(decisions[2], job_version=paused.version, insert_run=None, next_run_at=None,
                   set_next_run_at=False)
    assert await store.events_apply([keep]) == EventsApplied(applied=1,
                                                             result=ApplyResult.APPLIED)
    assert await store.events_apply(decisions[3:]) == EventsApplied(applied=1,
                                                                    result=ApplyResult.APPLIED)
    assert await store.cursor_get(CONSUMER) == events[-1].event_id
    assert await store.run_get(nexts[3].run_id) is not None


async def test_a_changed_first_job_writes_nothing(store: Store) -> None:
    now = half_past()
    jobs, events, nexts = await _jobs_with_events(store, 3, now)
    decisions = _decisions(events, jobs, nexts)
    assert await store.job_save(JobSave(job=replace(jobs[0], name="renamed",
                                                    updated_at=now))) is not None

    assert await store.events_apply(decisions) == EventsApplied(
        applied=0, result=ApplyResult.JOB_CHANGED)

    assert await store.cursor_get(CONSUMER) == 0
    for job, nxt in zip(jobs[1:], nexts[1:], strict=True):
        assert await store.job_get_any(job.job_id) == job
        assert await store.run_get(nxt.run_id) is None


async def test_a_job_twice_in_one_batch_is_refused(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    first = await finished_event(store, job, now - timedelta(minutes=20))
    second = await finished_event(store, job, now - timedelta(minutes=10))
    await visible_events(store, 0, 2)
    decisions = _decisions([first, second], [job, job],
                           [_next(job, now + timedelta(hours=1))] * 2)

    with pytest.raises(ValueError, match="twice"):
        await store.events_apply(decisions)

    assert await store.cursor_get(CONSUMER) == 0


async def test_a_failure_mid_batch_writes_nothing_and_the_retry_applies_each_event_once(
        store: Store) -> None:
    now = half_past()
    jobs, events, nexts = await _jobs_with_events(store, 3, now)
    good = _decisions(events, jobs, nexts)
    # The second event's next run breaks a constraint: the statement inserting the batch's runs
    # fails after the cursor, the job lock and the jobs' update have run.
    broken = [good[0], replace(good[1], insert_run=replace(nexts[1], kind="bogus")), good[2]]

    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.IntegrityError)):
        await store.events_apply(broken)

    assert await store.cursor_get(CONSUMER) == 0
    for job, nxt in zip(jobs, nexts, strict=True):
        assert await store.job_get_any(job.job_id) == job
        assert await store.run_get(nxt.run_id) is None
    assert await store.events_apply(good) == EventsApplied(applied=3,
                                                           result=ApplyResult.APPLIED)
    for job in jobs:
        stored = await store.job_get_any(job.job_id)
        assert stored is not None
        assert stored.version == job.version + 1


# --- the watcher over batches --------------------------------------------------------------


class _ChangesAJobOnce:
    """The store, with a pause of one job landing just before the first batch is applied: after
    the watcher read the job, before its decision is applied (what a user's pause can do)."""

    def __init__(self, store: Store, job: Job, at: datetime) -> None:
        self._store = store
        self._job = job
        self._at = at
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def events_apply(self, applies: list[EventApply]) -> EventsApplied:
        if not self.batches:
            paused = await self._store.job_save(JobSave(
                job=replace(self._job, status=JobStatus.PAUSED, next_run_at=None,
                            updated_at=self._at), cancel_open_runs=True))
            assert paused is not None
        self.batches.append(len(applies))
        return await self._store.events_apply(applies)

    async def event_apply(self, apply: EventApply) -> ApplyResult:
        self.batches.append(1)
        return await self._store.event_apply(apply)


async def test_the_watcher_decides_a_refused_event_again_alone_and_applies_the_rest(
        store: Store) -> None:
    now = half_past()
    jobs = [await with_job(store, now=now - timedelta(days=1, seconds=i)) for i in range(5)]
    events = [await finished_event(store, job, now - timedelta(minutes=5 - i))
              for i, job in enumerate(jobs)]
    await visible_events(store, 0, 5)
    changing = _ChangesAJobOnce(store, jobs[2], now)
    watcher = RecurringWatcher(changing, FakeClock(now), Settings(), "r1")  # type: ignore[arg-type]

    assert await watcher.run_once() == 5

    assert changing.batches == [5, 1, 2]  # cut at the paused job; it alone; the rest
    assert await store.cursor_get(CONSUMER) == events[-1].event_id
    for i, job in enumerate(jobs):
        stored = await store.job_get_any(job.job_id)
        assert stored is not None
        open_runs = [r for r in await store.runs_list(job.job_id, 10, None)
                     if r.status is RunStatus.PENDING]
        if i == 2:  # paused: its event gives it no next run
            assert stored.status is JobStatus.PAUSED
            assert open_runs == []
        else:
            assert stored.version == job.version + 1
            assert [r.scheduled_at for r in open_runs] == [stored.next_run_at]


async def test_the_watcher_applies_a_jobs_events_in_turn(store: Store) -> None:
    now = half_past()
    job = await with_job(store, now=now - timedelta(days=1))
    other = await with_job(store, now=now - timedelta(days=1, seconds=1))
    events = [await finished_event(store, job, now - timedelta(minutes=30)),
              await finished_event(store, other, now - timedelta(minutes=25)),
              await finished_event(store, job, now - timedelta(minutes=20)),
              await finished_event(store, job, now - timedelta(minutes=10))]
    await visible_events(store, 0, 4)

    applied = await RecurringWatcher(store, FakeClock(now), Settings(), "r1").run_once()

    assert applied == 4
    assert await store.cursor_get(CONSUMER) == events[-1].event_id
    stored = await store.job_get_any(job.job_id)
    assert stored is not None
    assert stored.version == job.version + 3  # each of its events applied once
    assert stored.last_run_id == events[-1].run_id
    open_runs = [r for r in await store.runs_list(job.job_id, 10, None)
                 if r.status is RunStatus.PENDING]
    assert [r.scheduled_at for r in open_runs] == [stored.next_run_at]


async def test_the_watcher_ends_one_time_jobs_of_a_batch(store: Store) -> None:
    now = half_past()
    jobs = [await with_job(store, now=now - timedelta(days=1, seconds=i),
                           params=JobParams(type="one-time", time="2026-06-22T08:00:00+00:00"))
            for i in range(3)]
    for i, job in enumerate(jobs):
        await finished_event(store, job, now - timedelta(minutes=3 - i))
    await visible_events(store, 0, 3)

    assert await RecurringWatcher(store, FakeClock(now), Settings(), "r1").run_once() == 3

    for job in jobs:
        stored = await store.job_get_any(job.job_id)
        assert stored is not None
        assert stored.status is JobStatus.COMPLETED
