"""Only IANA names are timezones: the names of the tzdata package's zone list (canonical ones
and backward links). The other files a system's zoneinfo directory holds (``localtime``,
``posixrules``, ``posix/…``, ``right/…`` with its leap seconds, ``Factory``) are refused on
every way a timezone comes in: a job's timezone, a VEVENT's TZID, ``/v1/parse``, ``/v1/chat``
and MCP."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from onthedot.domain.errors import ScheduleError
from onthedot.runtime import Runtime
from onthedot.schedule.local import load_timezone, zone_names
from tests.api.conftest import assert_problem, job_body
from tests.mcp.conftest import error, memory_session, payload

NOT_ZONES = ("right/UTC", "right/Asia/Taipei", "posix/Asia/Taipei", "posix/UTC", "localtime",
             "posixrules", "Factory", "SystemV/AST4", "/usr/share/zoneinfo/UTC", "../UTC",
             "Asia/../UTC", "zone.tab", "tzdata.zi", "leapseconds", "Asia", "RIGHT/utc")
SYSTEM_ZONEINFO = Path("/usr/share/zoneinfo")


def system_files_that_are_not_zones() -> list[str]:
    """Every file under the host's zoneinfo directory whose name is not in the list."""
    if not SYSTEM_ZONEINFO.is_dir():
        return []
    found = []
    for root, _dirs, files in os.walk(SYSTEM_ZONEINFO):
        for name in files:
            key = str((Path(root) / name).relative_to(SYSTEM_ZONEINFO))
            if key not in zone_names():
                found.append(key)
    return found


def test_every_listed_name_loads_and_nothing_else_does() -> None:
    names = zone_names()
    assert {"UTC", "Asia/Taipei", "America/New_York", "US/Eastern", "Etc/GMT-8"} <= names
    for name in names:
        assert load_timezone(name).key == name
    for name in (*NOT_ZONES, *system_files_that_are_not_zones()):
        with pytest.raises(ScheduleError) as info:
            load_timezone(name)
        assert info.value.code == "unknown_timezone", name


@pytest.mark.parametrize("name", NOT_ZONES)
async def test_rest_refuses_a_name_that_is_not_a_zone(client: httpx.AsyncClient,
                                                      name: str) -> None:
    created = await client.post("/v1/jobs", json=job_body(job_params={
        "type": "recurring", "schedule": "0 8 * * *", "timezone": name}))
    assert_problem(created, 422, "unknown_timezone", "job_params.timezone")

    tzid = await client.post("/v1/jobs", json=job_body(job_params={
        "type": "recurring", "timezone": "UTC",
        "schedule": f"DTSTART;TZID={name}:20260623T080000\nRRULE:FREQ=DAILY"}))
    assert_problem(tzid, 422, "unknown_timezone", "job_params.schedule")

    parsed = await client.post("/v1/parse", json={"text": "every day at 8am", "timezone": name})
    assert_problem(parsed, 422, "unknown_timezone", "timezone")

    chat = await client.post("/v1/chat", json={"message": "remind me to stretch every day at "
                                                          "9am", "timezone": name,
                                               "dry_run": True})
    assert_problem(chat, 422, "unknown_timezone", "timezone")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_mcp_refuses_a_name_that_is_not_a_zone(rt: Runtime) -> None:
    async with memory_session(rt) as session:
        for name in NOT_ZONES:
            result = await session.call_tool("create_task", {
                "task": "stretch", "schedule": "0 9 * * *", "timezone": name})
            code = payload(result)["error"]["code"]
            assert code in ("unknown_timezone", "ambiguous_timezone"), (name, code)
            error(result, code, "timezone")
