"""One-time and immediate jobs, job types, and checks against `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from onthedot.domain.errors import ScheduleError
from onthedot.domain.models import JobParams
from onthedot.schedule import Schedule, compile_schedule

ANCHOR = datetime(2026, 6, 1, tzinfo=UTC)


def one_time(
    time: str | None,
    tz: str = "UTC",
    *,
    now: datetime | None = None,
    past_grace_seconds: float = 60.0,
) -> Schedule:
    return compile_schedule(
        JobParams("one-time", time=time, timezone=tz),
        anchor=ANCHOR,
        now=now,
        past_grace_seconds=past_grace_seconds,
    )


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("time", "tz", "expected"),
    [
        ("2026-06-22T08:00:00+08:00", "UTC", utc(2026, 6, 22)),
        ("2026-06-22T08:00:00+08:00", "America/New_York", utc(2026, 6, 22)),  # offset wins
        ("2026-06-22T00:00:00Z", "Asia/Taipei", utc(2026, 6, 22)),
        ("2026-06-22T08:00:00", "Asia/Taipei", utc(2026, 6, 22)),  # local, read in the zone
        ("2026-06-22 08:00", "Asia/Taipei", utc(2026, 6, 22)),
        ("20260622T080000", "Asia/Taipei", utc(2026, 6, 22)),
        ("2026-06-22T08:00:00.250000Z", "UTC", datetime(2026, 6, 22, 8, 0, 0, 250000, UTC)),
        # DST policy applies to local one-time times too.
        ("2026-03-08T02:30:00", "America/New_York", utc(2026, 3, 8, 7, 0)),
        ("2026-11-01T01:30:00", "America/New_York", utc(2026, 11, 1, 5, 30)),
    ],
)
def test_time_forms(time: str, tz: str, expected: datetime) -> None:
    schedule = one_time(time, tz)
    result = schedule.next_after(utc(2026, 1, 1))
    assert result == expected
    assert result is not None
    assert result.tzinfo is UTC


def test_exactly_one_occurrence() -> None:
    schedule = one_time("2026-06-22T08:00:00+08:00")
    at = utc(2026, 6, 22)
    assert schedule.upcoming(utc(2026, 1, 1), 5) == [at]
    assert schedule.upcoming(utc(2026, 1, 1), 0) == []
    assert schedule.next_after(at) is None
    assert schedule.next_at_or_after(at) == at
    assert schedule.next_at_or_after(at + timedelta(microseconds=1)) is None


@pytest.mark.parametrize("time", [None, "", "  "])
def test_missing_time(time: str | None) -> None:
    with pytest.raises(ScheduleError) as info:
        one_time(time)
    assert info.value.code == "missing_field"
    assert info.value.field == "job_params.time"


@pytest.mark.parametrize(
    "time", ["tomorrow at 8", "2026-06-22", "2026-02-30T08:00:00", "2026-06-22T25:00", "8:00"]
)
def test_malformed_time(time: str) -> None:
    with pytest.raises(ScheduleError) as info:
        one_time(time)
    assert info.value.code == "invalid_time"
    assert info.value.field == "job_params.time"
    assert info.value.expected
    assert "2026-06-22T08:00:00+08:00" in info.value.expected


def test_time_in_the_past() -> None:
    now = utc(2026, 6, 22, 12)
    with pytest.raises(ScheduleError) as info:
        one_time("2026-06-22T11:58:59Z", now=now)
    assert info.value.code == "time_in_past"
    assert info.value.field == "job_params.time"


def test_slightly_past_time_is_within_the_grace() -> None:
    now = utc(2026, 6, 22, 12)
    assert one_time("2026-06-22T11:59:30Z", now=now).next_at_or_after(now - timedelta(minutes=1))
    one_time("2026-06-22T11:55:00Z", now=now, past_grace_seconds=600)


def test_one_time_validates_the_informational_timezone() -> None:
    with pytest.raises(ScheduleError) as info:
        one_time("2026-06-22T08:00:00Z", "Nowhere/City")
    assert info.value.code == "unknown_timezone"


def test_immediate_has_no_occurrences() -> None:
    schedule = compile_schedule(JobParams("immediate"), anchor=ANCHOR, now=ANCHOR)
    assert schedule.next_after(ANCHOR) is None
    assert schedule.next_at_or_after(ANCHOR) is None
    assert schedule.upcoming(ANCHOR, 3) == []


def test_immediate_checks_only_the_timezone() -> None:
    compile_schedule(JobParams("immediate", schedule="not looked at"), anchor=ANCHOR)
    with pytest.raises(ScheduleError) as info:
        compile_schedule(JobParams("immediate", timezone="Moon/Base"), anchor=ANCHOR)
    assert info.value.code == "unknown_timezone"
    assert info.value.field == "job_params.timezone"


def test_unknown_job_type() -> None:
    params = JobParams("weekly", schedule="0 8 * * *")  # type: ignore[arg-type]
    with pytest.raises(ScheduleError) as info:
        compile_schedule(params, anchor=ANCHOR)
    assert info.value.field == "job_params.type"
    assert info.value.code == "invalid_value"


def test_naive_anchor_or_now_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="anchor"):
        compile_schedule(JobParams("immediate"), anchor=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="now"):
        compile_schedule(JobParams("immediate"), anchor=ANCHOR, now=datetime(2026, 1, 1))


def test_errors_serialise_for_clients() -> None:
    with pytest.raises(ScheduleError) as info:
        one_time("soon")
    body = info.value.to_dict()
    assert body["code"] == "invalid_time"
    assert body["field"] == "job_params.time"
    assert body["expected"]
    assert info.value.http_status == 422
