"""update_task never ends a recurring task's repetition by surprise.

"Run the backup now" said to a model may come out as ``update_task(when="now")``, which would
turn a daily task into a one-shot: the call is refused with ``confirmation_required`` until the
caller passes ``confirm_type_change: true``, and the error points to run_task_now."""

from __future__ import annotations

from typing import Any

import pytest

from onthedot.mcp.registry import Caller
from onthedot.mcp.tools import build_registry
from onthedot.runtime import Runtime
from tests.mcp.conftest import TZ, error, memory_session, ok


@pytest.mark.parametrize("new_time", [
    {"when": "now"}, {"when": "tomorrow at 9am"}, {"time": "2026-07-01T09:00:00"},
    {"in": {"minutes": 30}},
])
async def test_a_recurring_task_becomes_one_time_only_when_confirmed(
        rt: Runtime, new_time: dict[str, Any]) -> None:
    async with memory_session(rt) as session:
        task = ok(await session.call_tool("create_task", {
            "when": "every day at 8am", "task": "back up the photos"}))["task"]
        refused = error(await session.call_tool("update_task", {
            "task_id": task["job_id"], **new_time}), "confirmation_required",
            "confirm_type_change")
        assert "would not repeat" in refused["message"]
        assert "run_task_now" in refused["message"]
        assert "back up the photos" in refused["message"]
        error(await session.call_tool("update_task", {
            "task_id": task["job_id"], "confirm_type_change": False, **new_time}),
            "confirmation_required", "confirm_type_change")
        unchanged = ok(await session.call_tool("get_task", {"task_id": task["job_id"]}))
        assert unchanged["task"]["job_params"] == task["job_params"]
        assert unchanged["task"]["next_run_at"] == task["next_run_at"]

        changed = ok(await session.call_tool("update_task", {
            "task_id": task["job_id"], "confirm_type_change": True, **new_time}))["task"]
    assert changed["job_params"]["type"] in ("one-time", "immediate")


async def test_changes_that_keep_it_recurring_need_no_confirmation(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        task = ok(await session.call_tool("create_task", {
            "when": "every day at 8am", "task": "water the plants"}))["task"]
        moved = ok(await session.call_tool("update_task", {
            "task_id": task["job_id"], "when": "every weekday at 7am"}))["task"]
        assert moved["job_params"]["schedule"] == "0 7 * * 1-5"
        cron = ok(await session.call_tool("update_task", {
            "task_id": task["job_id"], "schedule": "0 6 * * *", "confirm_type_change": None}))
        assert cron["task"]["job_params"]["schedule"] == "0 6 * * *"
        # A one-time task may become recurring (it gains runs, loses none), or another time.
        once = ok(await session.call_tool("create_task", {
            "when": "tomorrow at 9am", "task": "call the bank"}))["task"]
        later = ok(await session.call_tool("update_task", {
            "task_id": once["job_id"], "when": "now"}))["task"]
        assert later["job_params"]["type"] == "immediate"
        daily = ok(await session.call_tool("update_task", {
            "task_id": once["job_id"], "when": "every day at 9am"}))["task"]
        assert daily["job_params"]["type"] == "recurring"


async def test_the_chat_front_doors_dry_run_asks_as_well(rt: Runtime) -> None:
    registry = build_registry(TZ)
    caller = Caller(service=rt.service, user_id="alice", timezone=TZ)
    task = (await registry.call("create_task", {"when": "every day at 8am", "task": "x"},
                                caller)).payload["task"]
    dry = Caller(service=rt.service, user_id="alice", timezone=TZ, dry_run=True)
    result = await registry.call("update_task", {"task_id": task["job_id"], "when": "now"}, dry)
    assert result.payload["error"]["code"] == "confirmation_required"
