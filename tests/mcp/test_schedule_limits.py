"""create_task with a pathological schedule: a quick, structured isError result, nothing created."""

from __future__ import annotations

import time

import pytest

from onthedot.mcp.registry import Caller
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from tests.mcp.conftest import TZ, error, memory_session

ANSWERED = 2.0  # seconds, generous on a loaded CI machine (the validation budget is 0.5 s)


def vevent(*rules: str) -> str:
    return "\n".join(
        ["BEGIN:VEVENT", "DTSTART:20260622T000000Z", *[f"RRULE:{r}" for r in rules], "END:VEVENT"]
    )


NEVER_MATCHING = vevent(
    *[f"FREQ=YEARLY;BYWEEKNO={20 + i};BYMONTH=12;BYMONTHDAY=1" for i in range(20)]
)
EXPENSIVE = vevent(*[f"FREQ=YEARLY;BYMONTH={m};COUNT=10000" for m in range(1, 11)])


@pytest.mark.parametrize("schedule", [NEVER_MATCHING, EXPENSIVE], ids=["capped", "budget"])
async def test_create_task_with_a_pathological_schedule_is_a_quick_tool_error(
    rt: Runtime, schedule: str
) -> None:
    async with memory_session(rt) as session:
        began = time.perf_counter()
        result = await session.call_tool("create_task", {"task": "x", "schedule": schedule})
        elapsed = time.perf_counter() - began
        err = error(result, "schedule_too_complex", "schedule")
        assert "RRULE" in err["expected"]
        assert elapsed < ANSWERED
    assert (await rt.service.list_jobs("alice")).items == []


async def test_a_dry_run_preview_is_bounded_too(rt: Runtime) -> None:
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ, dry_run=True)
    began = time.perf_counter()
    result = await build_registry(TZ).call(
        "create_task", {"task": "x", "schedule": EXPENSIVE}, caller
    )
    assert time.perf_counter() - began < ANSWERED
    assert result.is_error
    assert result.payload["error"]["code"] == "schedule_too_complex"
    assert result.payload["error"]["field"] == "schedule"
    preview = await build_registry(TZ).call(
        "create_task", {"task": "x", "schedule": "FREQ=DAILY;BYHOUR=8;BYMINUTE=0"}, caller
    )
    assert preview.payload["would_create"]["next_runs"] == [
        "2026-06-23T00:00:00Z",
        "2026-06-24T00:00:00Z",
        "2026-06-25T00:00:00Z",
    ]
