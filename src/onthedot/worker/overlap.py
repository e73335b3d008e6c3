"""Overlap policy ``allow_all``: a recurring job's next run is scheduled when a run of it
starts, not when it ends, so the next occurrence starts at its time even while this run still
runs (docs/schedules.md, "Overlapping runs").

Every other job's next run is scheduled by the recurring watcher from the run's terminal event.
For ``allow_all`` the worker that has just claimed a scheduled run saves the job with its next
run, as any change of a job is saved: a compare-and-set on the version it read, the run inserted
if absent, in one transaction. A pause, delete or schedule change that lands first moves the
version and the save does nothing (that change decided the job's runs); the terminal event of
this run later finds the next run open and inserts nothing (the store never adds a second open
run), so each occurrence gets one run however the two meet.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

from onthedot.domain.models import Job, JobRun, JobStatus
from onthedot.schedule import job_next_after
from onthedot.store.base import JobSave, Store

log = logging.getLogger("onthedot.worker")

SAVE_ATTEMPTS = 3  # the job's version moved by the engine's own bookkeeping: read it again


def schedules_at_start(job: Job, run: JobRun) -> bool:
    """Whether starting ``run`` schedules ``job``'s next run (allow_all)."""
    return (job.overlap_policy == "allow_all" and job.params.type == "recurring"
            and run.kind == "scheduled" and job.status is JobStatus.SCHEDULED)


async def schedule_next(store: Store, job: Job, run: JobRun, now: datetime,
                        shards: int) -> JobRun | None:
    """Save ``job`` with the run of its occurrence after ``run`` (coalescing missed ones, as
    the recurring watcher does); the run inserted, or None when there was nothing to do."""
    for _ in range(SAVE_ATTEMPTS):
        if not schedules_at_start(job, run):
            return None
        if job.next_run_at is not None and job.next_run_at > run.scheduled_at:
            return None  # already scheduled (this run's earlier attempt, or a change)
        at = await job_next_after(job, max(run.scheduled_at, now))
        if at is None:
            return None  # the last occurrence: the run's own event completes the job
        following = JobRun.pending(job.job_id, at, shards)
        saved = await store.job_save(JobSave(job=replace(job, next_run_at=at, updated_at=now),
                                             insert_run=following))
        if saved is not None:
            return following
        found = await store.job_get_any(job.job_id)
        if found is None:
            return None
        job = found
    log.warning("job %s kept changing; its next run is scheduled when run %s ends",
                job.job_id, run.run_id)
    return None
