"""Cron schedules: 5/6 fields, local wall clock, DST policy, validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from onthedot.domain.errors import ScheduleError
from onthedot.domain.models import JobParams
from onthedot.schedule import Schedule, compile_schedule

ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)


def cron(expr: str, tz: str = "UTC", *, min_interval_seconds: float = 60.0) -> Schedule:
    return compile_schedule(
        JobParams("recurring", schedule=expr, timezone=tz),
        anchor=ANCHOR,
        min_interval_seconds=min_interval_seconds,
    )


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_daily_eight_in_taipei_is_midnight_utc() -> None:
    schedule = cron("0 8 * * *", "Asia/Taipei")
    assert schedule.upcoming(utc(2026, 6, 21, 12, 0), 3) == [
        utc(2026, 6, 22),
        utc(2026, 6, 23),
        utc(2026, 6, 24),
    ]


def test_next_after_is_strict_and_next_at_or_after_is_not() -> None:
    schedule = cron("0 8 * * *", "Asia/Taipei")
    at = utc(2026, 6, 22)
    assert schedule.next_after(at) == utc(2026, 6, 23)
    assert schedule.next_at_or_after(at) == at
    assert schedule.next_after(at - timedelta(microseconds=1)) == at


def test_after_in_another_timezone_is_the_same_instant() -> None:
    schedule = cron("0 8 * * *", "Asia/Taipei")
    after = utc(2026, 6, 21, 20, 0).astimezone(ZoneInfo("America/Los_Angeles"))
    result = schedule.next_after(after)
    assert result == utc(2026, 6, 22)
    assert result is not None
    assert result.tzinfo is UTC


def test_weekdays_only() -> None:
    schedule = cron("0 9 * * MON-FRI", "Europe/London")
    # Friday 2026-06-26 10:00 BST -> Monday 09:00 BST (08:00 UTC).
    assert schedule.next_after(utc(2026, 6, 26, 9, 0)) == utc(2026, 6, 29, 8, 0)
    days = [o.weekday() for o in schedule.upcoming(utc(2026, 6, 26), 10)]
    assert set(days) == {0, 1, 2, 3, 4}


def test_lowercase_names() -> None:
    assert cron("0 9 * * mon-fri").next_after(utc(2026, 6, 27)) == utc(2026, 6, 29, 9)


def test_leading_seconds_field() -> None:
    schedule = cron("30 0 8 * * *", "Asia/Taipei")
    assert schedule.next_after(utc(2026, 6, 21, 12)) == utc(2026, 6, 22, 0, 0, 30)


@pytest.mark.parametrize(
    ("macro", "after", "expected"),
    [
        ("@daily", utc(2026, 6, 21, 12), utc(2026, 6, 22)),
        ("@hourly", utc(2026, 6, 21, 12, 1), utc(2026, 6, 21, 13)),
        ("@weekly", utc(2026, 6, 21, 12), utc(2026, 6, 28)),  # Sunday midnight
        ("@monthly", utc(2026, 6, 21), utc(2026, 7, 1)),
        ("@yearly", utc(2026, 6, 21), utc(2027, 1, 1)),
    ],
)
def test_macros(macro: str, after: datetime, expected: datetime) -> None:
    assert cron(macro).next_after(after) == expected


def test_upcoming_count() -> None:
    schedule = cron("*/5 * * * *")
    got = schedule.upcoming(utc(2026, 6, 1), 4)
    assert got == [utc(2026, 6, 1, 0, m) for m in (5, 10, 15, 20)]
    assert schedule.upcoming(utc(2026, 6, 1), 0) == []


def test_naive_after_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        cron("0 8 * * *").next_after(datetime(2026, 6, 1))


# --- DST -----------------------------------------------------------------------------------------
# America/New_York 2026: spring forward Mar 8 02:00 EST -> 03:00 EDT (07:00 UTC),
# fall back Nov 1 02:00 EDT -> 01:00 EST (06:00 UTC).


def test_spring_forward_fixed_time_fires_when_the_gap_ends() -> None:
    schedule = cron("30 2 * * *", "America/New_York")
    assert schedule.upcoming(utc(2026, 3, 7), 3) == [
        utc(2026, 3, 7, 7, 30),  # 02:30 EST
        utc(2026, 3, 8, 7, 0),  # 03:00 EDT: 02:30 does not exist
        utc(2026, 3, 9, 6, 30),  # 02:30 EDT
    ]


def test_fall_back_fixed_time_fires_once_at_first_occurrence() -> None:
    schedule = cron("30 1 * * *", "America/New_York")
    assert schedule.upcoming(utc(2026, 10, 31), 3) == [
        utc(2026, 10, 31, 5, 30),
        utc(2026, 11, 1, 5, 30),  # 01:30 EDT, not again at 01:30 EST
        utc(2026, 11, 2, 6, 30),
    ]


def test_six_field_expressions_follow_the_same_policy() -> None:
    # cronsim alone fires "0 30 1 * * *" twice on fall-back day and skips "0 30 2 * * *" in spring.
    assert cron("0 30 1 * * *", "America/New_York").upcoming(utc(2026, 11, 1), 2) == [
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 30),
    ]
    assert cron("0 30 2 * * *", "America/New_York").next_after(utc(2026, 3, 8)) == utc(
        2026, 3, 8, 7, 0
    )


def test_sub_hourly_on_fall_back_night_fires_each_wall_time_once() -> None:
    schedule = cron("*/15 * * * *", "America/New_York")
    assert schedule.upcoming(utc(2026, 11, 1, 4, 40), 7) == [
        utc(2026, 11, 1, 4, 45),  # 00:45 EDT
        utc(2026, 11, 1, 5, 0),  # 01:00 EDT
        utc(2026, 11, 1, 5, 15),
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 5, 45),  # 01:45 EDT
        utc(2026, 11, 1, 7, 0),  # 02:00 EST: the repeated 01:xx EST is not fired again
        utc(2026, 11, 1, 7, 15),
    ]


def test_after_inside_the_repeated_hour() -> None:
    schedule = cron("*/15 * * * *", "America/New_York")
    # 01:20 EST (second pass): the next wall time not yet fired is 02:00 EST.
    assert schedule.next_after(utc(2026, 11, 1, 6, 20)) == utc(2026, 11, 1, 7, 0)


def test_sub_hourly_on_spring_forward_night_fires_once_at_gap_end() -> None:
    schedule = cron("*/15 * * * *", "America/New_York")
    assert schedule.upcoming(utc(2026, 3, 8, 6, 20), 4) == [
        utc(2026, 3, 8, 6, 30),  # 01:30 EST
        utc(2026, 3, 8, 6, 45),  # 01:45 EST
        utc(2026, 3, 8, 7, 0),  # 03:00 EDT, standing for 02:00-02:45 and itself
        utc(2026, 3, 8, 7, 15),
    ]


def test_hourly_across_spring_gap_has_no_duplicates() -> None:
    schedule = cron("0 * * * *", "America/New_York")
    got = schedule.upcoming(utc(2026, 3, 8, 5, 30), 3)
    assert got == [utc(2026, 3, 8, 6), utc(2026, 3, 8, 7), utc(2026, 3, 8, 8)]


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr", ["61 * * * *", "0 8 * *", "0 0 8 * * * 2026", "0 8 30 2 *", "hello", "@reboot"]
)
def test_invalid_cron(expr: str) -> None:
    with pytest.raises(ScheduleError) as info:
        cron(expr)
    assert info.value.code == "invalid_schedule"
    assert info.value.field == "job_params.schedule"
    assert info.value.expected
    assert "cron" in info.value.expected


@pytest.mark.parametrize(
    "expr", ["* * * * * *", "*/30 * * * * *", "0,30 * * * * *", "* * 0-1 * * *", "0,30 0 8 * * *"]
)
def test_too_frequent(expr: str) -> None:
    with pytest.raises(ScheduleError) as info:
        cron(expr)
    assert info.value.code == "schedule_too_frequent"
    assert info.value.field == "job_params.schedule"
    assert info.value.expected == "at most one occurrence every 60 seconds"


def test_minimum_interval_is_configurable() -> None:
    cron("*/30 * * * * *", min_interval_seconds=30)
    with pytest.raises(ScheduleError) as info:
        cron("*/5 * * * *", min_interval_seconds=600)
    assert info.value.code == "schedule_too_frequent"
    assert "600" in (info.value.expected or "")


def test_every_minute_is_allowed_by_default() -> None:
    cron("* * * * *")


def test_too_frequent_only_on_some_days_is_found() -> None:
    # Every second, but only on January 1st; the anchor is in June.
    with pytest.raises(ScheduleError) as info:
        compile_schedule(JobParams("recurring", schedule="* * * 1 1 *"), anchor=utc(2026, 6, 1))
    assert info.value.code == "schedule_too_frequent"


def test_unknown_timezone() -> None:
    with pytest.raises(ScheduleError) as info:
        cron("0 8 * * *", "Asia/Taipeii")
    assert info.value.code == "unknown_timezone"
    assert info.value.field == "job_params.timezone"
    assert info.value.expected == "an IANA timezone such as Asia/Taipei"


def test_missing_schedule() -> None:
    for schedule in (None, "", "   "):
        with pytest.raises(ScheduleError) as info:
            compile_schedule(JobParams("recurring", schedule=schedule), anchor=ANCHOR)
        assert info.value.code == "missing_field"
        assert info.value.field == "job_params.schedule"


def test_cron_always_has_a_future_occurrence() -> None:
    compile_schedule(
        JobParams("recurring", schedule="0 0 29 2 *"), anchor=ANCHOR, now=utc(2026, 6, 1)
    )


def test_gap_inside_a_day_is_found_from_the_fields() -> None:
    with pytest.raises(ScheduleError) as info:
        cron("0 8,9 * * 1", min_interval_seconds=7200)
    assert "3600" in info.value.message
    cron("0 8 * * *", min_interval_seconds=86400)


def test_gap_across_midnight_counts_only_when_consecutive_days_match() -> None:
    # 23:59 and the next day's 00:00 are one minute apart on consecutive days...
    with pytest.raises(ScheduleError):
        cron("0,59 0,23 * * *", min_interval_seconds=120)
    # ...but not when only Mondays match.
    cron("0,59 0,23 * * MON", min_interval_seconds=120)
