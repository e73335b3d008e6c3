"""flexible_window_seconds through create_task and update_task: optional (null = omitted),
range-checked by the server (the published schema carries no minimum/maximum), kept by a new
time, refused for a task run now with an error naming the argument."""

from __future__ import annotations

from datetime import datetime

from onthedot.domain.ids import flexible_offset
from onthedot.runtime import Runtime
from tests.mcp.conftest import error, memory_session, ok

EIGHT = datetime.fromisoformat("2026-06-23T08:00:00+08:00")  # START is Monday 10:00 Taipei


async def test_create_and_update_carry_the_window(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        task = ok(await session.call_tool("create_task", {
            "schedule": "0 8 * * *", "task": "stretch", "flexible_window_seconds": 600}))["task"]
        offset = flexible_offset(task["job_id"], 600)
        assert task["job_params"]["flexible_window_seconds"] == 600
        assert datetime.fromisoformat(task["next_run_at"]) == EIGHT + offset

        # A new time keeps the window; null leaves it as it is.
        moved = ok(await session.call_tool("update_task", {
            "task_id": task["job_id"], "schedule": "0 9 * * *",
            "flexible_window_seconds": None}))["task"]
        assert moved["job_params"]["flexible_window_seconds"] == 600
        assert datetime.fromisoformat(moved["next_run_at"]) == EIGHT.replace(hour=9) + offset

        exact = ok(await session.call_tool("update_task", {
            "task_id": task["job_id"], "flexible_window_seconds": 0}))["task"]
        assert exact["job_params"]["flexible_window_seconds"] == 0
        assert datetime.fromisoformat(exact["next_run_at"]) == EIGHT.replace(hour=9)


async def test_a_plain_task_has_no_window(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        task = ok(await session.call_tool("create_task", {
            "schedule": "0 8 * * *", "task": "stretch", "flexible_window_seconds": None}))
    assert task["task"]["job_params"]["flexible_window_seconds"] == 0
    assert datetime.fromisoformat(task["task"]["next_run_at"]) == EIGHT


async def test_bad_windows_name_the_argument(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        for window in (-1, 3601, "600", 2.5):
            error(await session.call_tool("create_task", {
                "schedule": "0 8 * * *", "task": "x", "flexible_window_seconds": window}),
                "invalid_argument", "flexible_window_seconds")
        error(await session.call_tool("create_task", {
            "when": "now", "task": "x", "flexible_window_seconds": 60}),
            "conflicting_field", "flexible_window_seconds")
        listed = ok(await session.call_tool("list_tasks", {}))
    assert listed["tasks"] == []
