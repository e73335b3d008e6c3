"""A ``timezone`` argument names a place: abbreviations and fixed offsets are refused with the
region zones that match, because a task in "EST" would fire an hour late all summer."""

from __future__ import annotations

import pytest

from onthedot.domain.models import JobParams
from onthedot.runtime import Runtime
from onthedot.service import JobSpec
from tests.mcp.conftest import error, memory_session, ok


@pytest.mark.parametrize(("zone", "first", "also"), [
    ("EST", "America/New_York", "America/Toronto"),
    ("edt", "America/New_York", None),
    ("PST", "America/Los_Angeles", "Asia/Manila"),
    ("CST", "America/Chicago", "Asia/Shanghai"),  # three countries use it
    ("MST", "America/Denver", "America/Phoenix"),
    ("HST", "Pacific/Honolulu", None),
    ("GMT", "Europe/London", "UTC"),
    ("BST", "Europe/London", None),
    ("IST", "Asia/Kolkata", "Europe/Dublin"),
    ("CET", "Europe/Paris", None),
    ("JST", "Asia/Tokyo", None),
    ("AEST", "Australia/Sydney", None),
    # Fixed offsets: places at that offset all year first, then in June 2026, then December.
    ("GMT+8", "Asia/Shanghai", "Asia/Taipei"),
    ("UTC+08:00", "Asia/Shanghai", "Asia/Singapore"),
    ("utc-5", "America/Bogota", "America/New_York"),  # Chicago in June, New York in winter
    ("+05:30", "Asia/Kolkata", None),
    ("UTC\u22123", "America/Sao_Paulo", None),
    ("Etc/GMT-8", "Asia/Shanghai", None),  # tzdata's sign is inverted: UTC+08:00
    ("UTC+0", "UTC", "Europe/London"),
])
async def test_abbreviations_and_offsets_are_refused_with_places(
        rt: Runtime, zone: str, first: str, also: str | None) -> None:
    async with memory_session(rt) as session:
        err = error(await session.call_tool("create_task", {
            "when": "every day at 9am", "task": "stand up", "timezone": zone}),
            "ambiguous_timezone", "timezone")
        assert ok(await session.call_tool("list_tasks", {}))["tasks"] == []
    assert err["candidates"][0] == first, err
    if also is not None:
        assert also in err["candidates"], err
    assert first in err["message"]
    assert "daylight saving" in err["message"]
    assert "IANA region timezone" in err["expected"]


@pytest.mark.parametrize(("zone", "stored"), [
    ("UTC", "UTC"), ("Etc/UTC", "Etc/UTC"), ("America/New_York", "America/New_York"),
    ("asia/taipei", "Asia/Taipei"), ("US/Eastern", "US/Eastern"), ("EST5EDT", "EST5EDT"),
])
async def test_places_and_utc_are_accepted(rt: Runtime, zone: str, stored: str) -> None:
    async with memory_session(rt) as session:
        task = ok(await session.call_tool("create_task", {
            "when": "every day at 9am", "task": "stand up", "timezone": zone}))["task"]
    assert task["job_params"]["timezone"] == stored


async def test_an_unknown_name_is_still_unknown(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        error(await session.call_tool("create_task", {
            "schedule": "0 9 * * *", "task": "x", "timezone": "Mars/Olympus"}),
            "unknown_timezone", "timezone")


async def test_update_task_judges_only_a_new_timezone(rt: Runtime) -> None:
    """A task made through the REST API, which takes any IANA name, can still be renamed
    through MCP; only a timezone given to the tool is judged."""
    view, _ = await rt.service.create_job("alice", JobSpec(
        action={"type": "message", "text": "x"},
        params=JobParams("recurring", schedule="0 9 * * *", timezone="EST")))
    async with memory_session(rt) as session:
        renamed = ok(await session.call_tool("update_task", {
            "task_id": view.job.job_id, "title": "standup"}))["task"]
        assert (renamed["name"], renamed["job_params"]["timezone"]) == ("standup", "EST")
        error(await session.call_tool("update_task", {
            "task_id": view.job.job_id, "timezone": "PST"}), "ambiguous_timezone", "timezone")
        moved = ok(await session.call_tool("update_task", {
            "task_id": view.job.job_id, "timezone": "America/New_York"}))["task"]
    assert moved["job_params"]["timezone"] == "America/New_York"
    assert moved["next_run_at"] == "2026-06-22T13:00:00Z"  # 09:00 EDT
