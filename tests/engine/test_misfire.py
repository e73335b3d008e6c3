"""Runs that became due while nothing was running: run late (default) or skip."""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.models import JobParams, RunStatus
from tests.engine.conftest import Engine


async def test_downtime_run_late_fires_once_and_coalesces(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="0 * * * *"))
    # Three days of downtime: 72 occurrences were missed.
    engine.clock.set(view.job.next_run_at + timedelta(days=3, minutes=20))
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.status for r in runs] == [RunStatus.PENDING, RunStatus.SUCCEEDED]
    assert runs[1].scheduled_at == view.job.next_run_at
    assert runs[0].scheduled_at == view.job.next_run_at + timedelta(days=3, hours=1)


async def test_downtime_with_skip_policy_skips_the_missed_run(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="0 * * * *"),
                               misfire_policy="skip")
    engine.clock.set(view.job.next_run_at + timedelta(hours=5, minutes=20))
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert [r.status for r in runs] == [RunStatus.PENDING, RunStatus.SKIPPED]
    assert runs[0].scheduled_at == view.job.next_run_at + timedelta(hours=6)


async def test_skip_policy_within_grace_still_runs(engine: Engine) -> None:
    view = await engine.create(JobParams(type="recurring", schedule="0 * * * *"),
                               misfire_policy="skip")
    engine.clock.set(view.job.next_run_at + timedelta(seconds=30))
    await engine.settle()
    runs = (await engine.rt.service.list_runs("alice", view.job.job_id)).items
    assert runs[1].status is RunStatus.SUCCEEDED
