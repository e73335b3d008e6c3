"""The recurring watcher: reads terminal RunEvents in order and schedules what comes next.

For each event, from a durable cursor: a recurring job that is still scheduled gets its next
run (deterministic run id, insert-if-absent), computed after max(this occurrence, now), so the
occurrences that came while this run ran are not run (overlap policy ``skip``); with
``buffer_one`` the latest of them runs at once instead (``latest_missed``), and with
``allow_all`` the worker that started this run has already inserted the next one (the store
then inserts nothing here: it never adds a second open run); a one-time or immediate job
becomes completed or failed, once none of its runs is open (a run-now included; a time changed
while a run was running, or a redrive, opens another), with the outcome of the last run to end.
Events are applied in batches (consecutive events, a job at most once in each): the store
applies a batch's decisions and advances the cursor in one transaction guarded by the cursor's
old position, with one statement per step for the whole batch, so an event processed twice (or
a crash between insert and cursor advance) has its effect exactly once. Each decision is also
guarded by its job's version: when a pause, delete or schedule change lands between reading the
job and applying, the batch is applied up to that event, which alone is decided again from the
new state; the rest of the batch follows. The next run is inserted only while the job has no
other open scheduled run (a resume or a schedule change may have inserted one).
Only the first live member of the group works; the others stand by.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta

from onthedot.config import Settings
from onthedot.domain.clock import Clock
from onthedot.domain.models import Job, JobRun, JobStatus, RunEvent, RunStatus
from onthedot.schedule import job_next_after, job_occurrences
from onthedot.store.base import ApplyResult, EventApply, Store

log = logging.getLogger("onthedot.recurring")

CONSUMER = "recurring"
EVENT_BATCH = 500
DECIDE_ATTEMPTS = 5  # per event and tick, when the job keeps changing under the decision


class RecurringWatcher:
    def __init__(self, store: Store, clock: Clock, settings: Settings, member_id: str) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings
        self.member_id = member_id

    async def is_leader(self) -> bool:
        members = await self.store.members_heartbeat(
            CONSUMER, self.member_id, self.clock.now(), self.settings.leader_lease_seconds)
        return bool(members) and members[0] == self.member_id

    async def run_once(self) -> int:
        """Apply the next events, a batch per transaction; returns how many were applied."""
        cursor = await self.store.cursor_get(CONSUMER)
        events = await self.store.events_after(cursor, EVENT_BATCH)
        if not events:
            return 0
        # The events' jobs and runs in two reads, not two per event. A job read here may change
        # before its event is applied: the version guard refuses that event's decision then,
        # and it is decided again from a fresh read.
        jobs = await self.store.jobs_get_any_many([e.job_id for e in events])
        runs = await self.store.runs_get_many([e.run_id for e in events])
        stale: set[str] = set()  # jobs an applied event changed since they were read
        applied = 0
        while applied < len(events):
            batch = one_event_per_job(events[applied:])
            again = stale & {e.job_id for e in batch}
            if again:  # read again (a job deleted meanwhile is then absent)
                for job_id in again:
                    jobs.pop(job_id, None)
                jobs.update(await self.store.jobs_get_any_many(sorted(again)))
                stale -= again
            decisions = await self._decide_batch(batch, cursor, jobs, runs)
            done = await self.store.events_apply(decisions)
            applied += done.applied
            stale |= {e.job_id for e in batch[:done.applied]}
            if done.applied:
                cursor = batch[done.applied - 1].event_id
            if done.result is ApplyResult.CURSOR_MOVED:
                break  # another consumer moved the cursor: start over from there next tick
            if done.result is ApplyResult.JOB_CHANGED:
                # That one event's job changed since it was read: it alone is decided again.
                event = batch[done.applied]
                result = await self._apply(event, cursor, await self.store.job_get_any(
                    event.job_id), runs.get(event.run_id))
                if result is not ApplyResult.APPLIED:
                    break  # the cursor moved, or the job kept changing: next tick
                cursor = event.event_id
                applied += 1
                stale.add(event.job_id)
        return applied

    async def _decide_batch(self, batch: list[RunEvent], cursor: int, jobs: dict[str, Job],
                            runs: dict[str, JobRun]) -> list[EventApply]:
        decisions: list[EventApply] = []
        for event in batch:
            decisions.append(await self._decide(event, cursor, jobs.get(event.job_id),
                                                runs.get(event.run_id)))
            cursor = event.event_id
        return decisions

    async def _apply(self, event: RunEvent, cursor: int, job: Job | None,
                     run: JobRun | None) -> ApplyResult:
        result = ApplyResult.JOB_CHANGED
        for _ in range(DECIDE_ATTEMPTS):
            result = await self.store.event_apply(await self._decide(event, cursor, job, run))
            if result is not ApplyResult.JOB_CHANGED:
                return result
            job = await self.store.job_get_any(event.job_id)  # decided from a stale job
        log.warning("job %s changed %d times while event %d was applied; trying next tick",
                    event.job_id, DECIDE_ATTEMPTS, event.event_id)
        return result

    async def decide(self, event: RunEvent, cursor: int) -> EventApply:
        """The decision for ``event`` from the job and run as they are stored now."""
        return await self._decide(event, cursor, await self.store.job_get_any(event.job_id),
                                  await self.store.run_get(event.run_id))

    async def _decide(self, event: RunEvent, cursor: int, job: Job | None,
                      run: JobRun | None) -> EventApply:
        keep = EventApply(consumer=CONSUMER, previous_event_id=cursor, event=event,
                          job_version=None if job is None else job.version,
                          insert_run=None, job_status=None, next_run_at=None,
                          set_next_run_at=False)
        if job is None or run is None:
            return keep
        if job.params.type == "recurring":
            if run.kind == "manual" or job.status is not JobStatus.SCHEDULED:
                # An extra run now changes nothing about the schedule; paused or deleted: no
                # next run.
                return keep
            now = self.clock.now()
            missed = (await latest_missed(job, run.scheduled_at, now)
                      if job.overlap_policy == "buffer_one" else None)
            next_run = (JobRun.pending(job.job_id, missed, self.settings.shards)
                        if missed is not None
                        else await self.next_run(job, max(run.scheduled_at, now)))
            if next_run is None:
                return replace(keep, job_status=JobStatus.COMPLETED, set_next_run_at=True)
            return replace(keep, insert_run=next_run, next_run_at=next_run.scheduled_at,
                           set_next_run_at=True)
        if job.status in (JobStatus.PAUSED, JobStatus.CANCELLED):
            return keep
        # A one-time or immediate job takes the outcome of the last of its runs to end, a
        # run-now included; the store writes it only once none of its runs is open (a schedule
        # change or a redrive may have opened one since this run started).
        status = JobStatus.FAILED if event.status is RunStatus.FAILED else JobStatus.COMPLETED
        return replace(keep, job_status=status, set_next_run_at=True, wait_for_manual_runs=True)

    async def next_run(self, job: Job, after: datetime) -> JobRun | None:
        at = await job_next_after(job, after)  # off the event loop when it is not cheap
        return None if at is None else JobRun.pending(job.job_id, at, self.settings.shards)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            applied = 0
            try:
                if await self.is_leader():
                    applied = await self.run_once()
            except Exception:
                log.exception("recurring tick failed; trying again next tick")
            if applied < EVENT_BATCH:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.settings.tick_seconds)
        try:
            await self.store.members_leave(CONSUMER, self.member_id)
        except Exception:
            log.warning("could not leave the recurring group cleanly", exc_info=True)


MAX_MISSED_STEPS = 10_000  # occurrences latest_missed walks through (a minute's for a week)


async def latest_missed(job: Job, after: datetime, now: datetime) -> datetime | None:
    """The latest occurrence of ``job`` after ``after`` and at or before ``now`` (the one
    ``buffer_one`` runs late), or None when none came. After MAX_MISSED_STEPS occurrences the
    one reached is taken: still one late run, a little older than the latest."""
    missed = await job_occurrences(job, after, now + timedelta(microseconds=1), MAX_MISSED_STEPS)
    return missed[-1] if missed else None


def one_event_per_job(events: list[RunEvent]) -> list[RunEvent]:
    """The longest prefix of ``events`` with no job twice: a job's second event is decided
    from the job as its first one leaves it, so it goes in the next batch."""
    seen: set[str] = set()
    for i, event in enumerate(events):
        if event.job_id in seen:
            return events[:i]
        seen.add(event.job_id)
    return events
