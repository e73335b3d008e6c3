"""A job with a flexible window, fired by the engine on a moved clock: each run fires at the
job's own offset after its occurrence, never before, and the next occurrences keep it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from onthedot.domain.ids import flexible_offset
from onthedot.domain.models import JobParams, RunStatus
from tests.engine.conftest import Engine

EIGHT = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
DAILY = JobParams(type="recurring", schedule="0 8 * * *", timezone="UTC",
                  flexible_window_seconds=600)


async def statuses(engine: Engine, job_id: str) -> list[tuple[datetime, RunStatus]]:
    runs = (await engine.rt.service.list_runs("alice", job_id)).items
    return [(r.scheduled_at, r.status) for r in runs]


async def test_a_windowed_job_fires_at_its_offset_not_before(engine: Engine) -> None:
    view = await engine.create(DAILY)
    job_id = view.job.job_id
    offset = flexible_offset(job_id, 600)
    due = EIGHT + offset
    assert view.job.next_run_at == due

    # At the nominal time and up to a millisecond before its slot, nothing fires.
    for at in (EIGHT, due - timedelta(milliseconds=1)):
        engine.clock.set(at)
        await engine.settle()
        assert await statuses(engine, job_id) == [(due, RunStatus.PENDING)]

    engine.clock.set(due)
    await engine.settle()
    tomorrow = due + timedelta(days=1)
    assert await statuses(engine, job_id) == [(tomorrow, RunStatus.PENDING),
                                              (due, RunStatus.SUCCEEDED)]
    job = await engine.rt.service.get_job("alice", job_id)
    assert job.job.next_run_at == tomorrow

    # The next day, the same slot.
    engine.clock.set(tomorrow - timedelta(milliseconds=1))
    await engine.settle()
    assert (await statuses(engine, job_id))[0] == (tomorrow, RunStatus.PENDING)
    engine.clock.set(tomorrow)
    await engine.settle()
    assert [s for _, s in await statuses(engine, job_id)] == [
        RunStatus.PENDING, RunStatus.SUCCEEDED, RunStatus.SUCCEEDED]
    assert (await statuses(engine, job_id))[0][0] == EIGHT + timedelta(days=2) + offset


async def test_misfire_grace_counts_from_the_effective_time(engine: Engine) -> None:
    """Grace is 60 s in the engine fixture. A skip-policy run asked 30 s after its slot runs,
    though that is over 120 s after the nominal 08:00; asked 90 s after its slot, it is
    skipped."""
    views = [await engine.create(DAILY, misfire_policy="skip") for _ in range(40)]
    # Offsets are uniform over 600 s: 40 jobs hold two past 120 s, short of a 1e-20 chance.
    far = sorted((v.job for v in views
                  if flexible_offset(v.job.job_id, 600) > timedelta(seconds=120)),
                 key=lambda j: j.next_run_at or EIGHT)
    first, second = far[0], far[-1]
    assert first.next_run_at is not None
    assert second.next_run_at is not None
    engine.clock.set(first.next_run_at + timedelta(seconds=30))
    await engine.settle()
    assert (await statuses(engine, first.job_id))[1] == (first.next_run_at, RunStatus.SUCCEEDED)

    engine.clock.set(max(engine.clock.now(), second.next_run_at + timedelta(seconds=90)))
    await engine.settle()
    if second.job_id != first.job_id:
        assert (await statuses(engine, second.job_id))[1] == (second.next_run_at,
                                                              RunStatus.SKIPPED)
