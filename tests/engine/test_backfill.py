"""Backfill: the occurrences of a past range run now, on SQLite and on PostgreSQL with NATS;
an occurrence with a run keeps it, and a second backfill of the range adds nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from onthedot.domain.errors import ConflictError, ValidationError
from onthedot.domain.history import ChangeAction
from onthedot.domain.models import JobParams, RunStatus
from tests.engine.conftest import Engine
from tests.support.waiting import async_wait_until

HOURLY = JobParams(type="recurring", schedule="0 * * * *")
ONE = datetime(2026, 6, 22, 1, 0, tzinfo=UTC)  # the first occurrence after START (00:00:30)


async def test_backfill_runs_the_past_occurrences_once(both: Engine) -> None:
    view = await both.create(HOURLY)
    assert view.job.next_run_at == ONE
    both.clock.set(ONE + timedelta(hours=4, minutes=30))  # down from before 01:00 to 05:30

    done = await both.rt.service.backfill("alice", view.job.job_id, ONE,
                                          ONE + timedelta(hours=4))

    assert [r.scheduled_at for r in done.runs] == [ONE + timedelta(hours=h) for h in range(4)]
    assert done.created == [False, True, True, True]  # 01:00 has its scheduled run
    assert [r.kind for r in done.runs] == ["scheduled", "manual", "manual", "manual"]
    after = await both.rt.service.get_job("alice", view.job.job_id)
    assert after.job.next_run_at == ONE  # the schedule is not touched

    async def ran() -> list[RunStatus]:
        await both.tick()
        runs = (await both.rt.service.list_runs("alice", view.job.job_id)).items
        found = [r.status for r in runs if r.scheduled_at < ONE + timedelta(hours=4)]
        return found if found == [RunStatus.SUCCEEDED] * 4 else []

    await async_wait_until(ran, 30, "the four occurrences to run")
    again = await both.rt.service.backfill("alice", view.job.job_id, ONE,
                                           ONE + timedelta(hours=4))
    assert again.created == [False] * 4
    history = (await both.rt.service.job_history("alice", view.job.job_id)).items
    assert [c.action for c in history[:2]] == [ChangeAction.BACKFILL] * 2
    assert history[1].details["run_ids"] == [r.run_id for r in done.runs]


@pytest.mark.parametrize(("hours", "max_runs", "code"), [
    (5, 4, "too_many_runs"),  # five occurrences, four allowed
    (0, 100, "invalid_range"),  # empty
    (10, 100, "invalid_range"),  # reaches past now
])
async def test_backfill_refusals_run_nothing(engine: Engine, hours: int, max_runs: int,
                                             code: str) -> None:
    view = await engine.create(HOURLY)
    engine.clock.set(ONE + timedelta(hours=6))
    with pytest.raises(ValidationError) as refused:
        await engine.rt.service.backfill("alice", view.job.job_id, ONE,
                                         ONE + timedelta(hours=hours), max_runs=max_runs)
    assert refused.value.code == code
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.kind for r in runs] == ["scheduled"]


async def test_backfill_of_a_one_time_job_is_refused(engine: Engine) -> None:
    view = await engine.create(JobParams(type="one-time", time="2026-06-23T09:00:00+08:00"))
    engine.clock.set(ONE + timedelta(hours=6))
    with pytest.raises(ConflictError) as refused:
        await engine.rt.service.backfill("alice", view.job.job_id, ONE,
                                         ONE + timedelta(hours=2))
    assert refused.value.code == "not_recurring"


async def test_backfill_starting_over_a_year_ago_is_refused(engine: Engine) -> None:
    view = await engine.create(HOURLY)
    engine.clock.set(ONE + timedelta(days=400))
    with pytest.raises(ValidationError) as refused:
        await engine.rt.service.backfill("alice", view.job.job_id, ONE, ONE + timedelta(hours=2))
    assert (refused.value.code, refused.value.field) == ("invalid_range", "start_time")
