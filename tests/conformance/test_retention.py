"""One retention rule for every store (issue 18 §1.3), as the rescuer applies it: ``maintain``
(on PostgreSQL: dropping whole daily partitions) then ``prune`` (row by row).

Nothing open, nothing whose run event a consumer has not applied yet, nothing finished -- or
dead-lettered -- within the retention, and no finished job with such a run is removed. Runs are
placed by their *scheduled* day 40 days ago and finish at various times since: PostgreSQL
dropped a daily partition by its scheduled day, with a run dead-lettered a minute before in it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from onthedot.domain.models import Job, JobRun, JobStatus, RunEvent, RunStatus
from onthedot.store.base import ApplyResult, EventApply, Prune, RunFinish, Store
from onthedot.store.postgres import PostgresStore

from .test_store import half_past, partition_of, partitions, run_in, with_job

RETENTION = timedelta(days=30)  # PostgresStore's default retention_days, which maintain uses
NOW = half_past()
SCHEDULED = NOW - timedelta(days=40)  # the day every run below was scheduled on
COMMON = SCHEDULED + timedelta(days=1)  # a day holding only history past retention


async def housekeeping(store: Store, now: datetime) -> None:
    """What the rescuer does: partitions first, then rows."""
    await store.maintain(now)
    while (await store.prune(Prune(before=now - RETENTION, limit=1000))).total:
        pass


async def finished_late(store: Store, job: Job, scheduled_at: datetime,
                        finished_at: datetime) -> RunEvent:
    """A run of ``scheduled_at`` whose last attempt failed at ``finished_at``, with its event."""
    run = await run_in(store, job, RunStatus.RUNNING, scheduled_at=scheduled_at,
                       now=finished_at - timedelta(minutes=1))
    assert run.lease_token is not None
    event = await store.run_finish(RunFinish(run.run_id, run.lease_token, RunStatus.FAILED,
                                             finished_at, error="HTTP 500"))
    assert event is not None
    return event


async def present(store: Store, runs: list[JobRun]) -> list[bool]:
    return [await store.run_get(r.run_id) is not None for r in runs]


async def test_retention_keeps_open_unread_and_recently_dead_lettered_runs(store: Store) -> None:
    pg = store if isinstance(store, PostgresStore) else None
    if pg is not None:
        assert pg.retention_days == RETENTION.days
        await pg.maintain(SCHEDULED)  # the daily partitions of those days, as back then
    job = await with_job(store, now=SCHEDULED - timedelta(days=1))
    done = await with_job(store, now=SCHEDULED - timedelta(days=1), status=JobStatus.FAILED,
                          updated_at=SCHEDULED + timedelta(hours=6))

    # Day A: no open run, but a run dead-lettered a minute ago (retried daily for 40 days), one
    # of a finished job (the job must stay while its run does), and one whose FAILED event the
    # recurring watcher has not applied (finished 35 days ago, after day C's history).
    a = (SCHEDULED - timedelta(days=1)).replace(hour=1)
    dead = await run_in(store, job, RunStatus.FAILED, scheduled_at=a,
                        now=NOW - timedelta(minutes=1), dead_lettered=True)
    dead_of_done = await run_in(store, done, RunStatus.FAILED, scheduled_at=a,
                                now=NOW - timedelta(minutes=1), dead_lettered=True)
    unread = await finished_late(store, job, a + timedelta(hours=1), SCHEDULED + timedelta(5))
    # Day B: open runs beside old history.
    b = SCHEDULED.replace(hour=1)
    old = await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=b, now=b)
    retrying = await run_in(store, job, RunStatus.RETRYING, scheduled_at=b + timedelta(hours=2),
                            now=NOW - timedelta(minutes=5))
    pending = await run_in(store, job, RunStatus.PENDING, scheduled_at=b + timedelta(hours=3))
    # Day C: history past retention alone, the common case.
    history = [await run_in(store, job, RunStatus.SUCCEEDED, scheduled_at=COMMON + timedelta(
        hours=h), now=COMMON + timedelta(hours=h)) for h in range(3)]
    if pg is not None:
        day_a, day_b, day_c = [await partition_of(pg, r) for r in (dead, old, history[0])]
        assert len({day_a, day_b, day_c}) == 3
        assert {day_a, day_b, day_c} <= await partitions(pg)
        assert await partition_of(pg, unread) == day_a

    await housekeeping(store, NOW)

    assert await present(store, [dead, dead_of_done, retrying, pending]) == [True] * 4
    assert await store.run_get(unread.run_id) is not None, "its event is unread"
    assert await store.job_get_any(done.job_id) is not None
    assert await present(store, [old, *history]) == [False] * 4
    if pg is not None:
        layout = await partitions(pg)
        assert day_a in layout, "a partition holding a kept run is not dropped"
        assert day_b in layout
        assert day_c not in layout, "a day of history alone still goes whole"

    # The recurring watcher applies the event: its run may go now, the rest stays.
    read = EventApply(consumer="recurring", previous_event_id=0, event=unread,
                      job_version=(await store.job_get_any(job.job_id) or job).version,
                      insert_run=None, job_status=None, next_run_at=None, set_next_run_at=False)
    assert await store.event_apply(read) is ApplyResult.APPLIED
    await housekeeping(store, NOW)
    assert await store.run_get(unread.run_id) is None
    assert await present(store, [dead, dead_of_done, retrying, pending]) == [True] * 4
    if pg is not None:
        assert day_a in await partitions(pg)

    # Retention after the dead-lettering: the dead letters go, day A whole, and the finished
    # job with its last run; the open runs stay, and so does their partition.
    later = NOW + RETENTION + timedelta(minutes=2)
    await housekeeping(store, later)
    assert await present(store, [dead, dead_of_done, retrying, pending]) == [False, False,
                                                                             True, True]
    assert await store.job_get_any(done.job_id) is None
    if pg is not None:
        layout = await partitions(pg)
        assert day_a not in layout
        assert day_b in layout
