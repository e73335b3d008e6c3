"""The worker tells an action about the job's history: ``ActionContext.previous`` is the job's
last SUCCEEDED run before the one firing, whatever failed in between."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from onthedot.actions.base import ActionContext
from onthedot.domain.errors import ActionError
from onthedot.domain.models import JobParams, JobRun, RetryPolicy, RunStatus
from tests.engine.conftest import Engine

FIRST = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)


class Recorder:
    """Returns which day it is; fails on the days listed in ``fail_on``."""

    name = "record"
    uses_previous = True
    param_names: tuple[str, ...] = ("fail_on",)

    def __init__(self) -> None:
        self.seen: list[tuple[datetime, JobRun | None]] = []

    def validate(self, params: dict[str, Any]) -> None:
        pass

    async def execute(self, params: dict[str, Any], ctx: ActionContext) -> Any:
        self.seen.append((ctx.run.scheduled_at, ctx.previous))
        day = ctx.run.scheduled_at.day
        if day in params.get("fail_on", []):
            raise ActionError(f"day {day} fails")
        return {"day": day}


async def test_previous_is_the_last_succeeded_run(engine: Engine) -> None:
    recorder = Recorder()
    engine.rt.actions.register(recorder)
    view = await engine.create(JobParams(type="recurring", schedule="0 8 * * *"),
                               {"type": "record", "fail_on": [23]},
                               retry_policy=RetryPolicy(max_attempts=1))
    for day in range(3):
        engine.clock.set(FIRST + timedelta(days=day, seconds=1))
        await engine.settle()

    runs = {r.scheduled_at: r for r in
            (await engine.rt.service.list_runs("alice", view.job.job_id)).items}
    first, second, third = (FIRST + timedelta(days=d) for d in range(3))
    assert [runs[at].status for at in (first, second, third)] == [
        RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SUCCEEDED]
    assert [(at, prev and prev.run_id) for at, prev in recorder.seen] == [
        (first, None),
        (second, runs[first].run_id),
        (third, runs[first].run_id),  # the failed run in between is no history
    ]
    previous = recorder.seen[2][1]
    assert previous is not None
    assert previous.output == {"day": 22}
    assert previous.finished_at == first + timedelta(seconds=1)


class Forgetful(Recorder):
    """The same action, declaring that it never reads the job's history."""

    name = "forget"
    uses_previous = False


async def test_an_action_that_does_not_use_history_is_not_given_it(engine: Engine) -> None:
    # The worker skips the previous-run read for such actions (webhook, message): one store
    # read per run fewer. The action must then see None, not a stale or partial run.
    forgetful = Forgetful()
    engine.rt.actions.register(forgetful)
    await engine.create(JobParams(type="recurring", schedule="0 8 * * *"), {"type": "forget"})
    for day in range(2):
        engine.clock.set(FIRST + timedelta(days=day, seconds=1))
        await engine.settle()
    assert [prev for _at, prev in forgetful.seen] == [None, None]
    assert len(forgetful.seen) == 2
