"""RRULE / VEVENT schedules: RFC 5545 semantics, DST policy, re-basing, validation."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import DAILY, rrulestr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from onthedot.domain.errors import ScheduleError
from onthedot.domain.models import JobParams
from onthedot.schedule import Schedule, compile_schedule
from onthedot.schedule.expand import check_can_occur, horizon, period_floor, rule_walls_after
from onthedot.schedule.rrule import RuleParts, make_spec, parse_rule

ANCHOR = datetime(2026, 6, 1, 3, 17, 42, tzinfo=UTC)  # 11:17:42 in Taipei


def rule(
    text: str, tz: str = "UTC", anchor: datetime = ANCHOR, now: datetime | None = None
) -> Schedule:
    return compile_schedule(
        JobParams("recurring", schedule=text, timezone=tz), anchor=anchor, now=now
    )


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def error_of(text: str, tz: str = "UTC", now: datetime | None = None) -> ScheduleError:
    with pytest.raises(ScheduleError) as info:
        rule(text, tz, now=now)
    return info.value


# --- forms ---------------------------------------------------------------------------------------


def test_daily_eight_in_taipei_matches_the_cron_form() -> None:
    as_rrule = rule("RRULE:FREQ=DAILY;BYHOUR=8;BYMINUTE=0", "Asia/Taipei")
    as_cron = rule("0 8 * * *", "Asia/Taipei")
    after = utc(2026, 6, 10)
    assert as_rrule.upcoming(after, 30) == as_cron.upcoming(after, 30)
    assert as_rrule.next_after(after) == utc(2026, 6, 11)


def test_bare_freq_without_rrule_prefix_and_lowercase() -> None:
    assert rule("freq=daily;byhour=8;byminute=0", "Asia/Taipei").next_after(
        utc(2026, 6, 10)
    ) == utc(2026, 6, 11)


def test_byday_mo_we_fr() -> None:
    schedule = rule("RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9;BYMINUTE=0", "Europe/Paris")
    got = schedule.upcoming(utc(2026, 6, 1), 9)
    assert [o.weekday() for o in got] == [0, 2, 4] * 3  # 2026-06-01 09:00 CEST is 07:00 UTC
    assert got[0] == utc(2026, 6, 1, 7)
    assert all(o.astimezone(ZoneInfo("Europe/Paris")).hour == 9 for o in got)


def test_bare_rule_takes_its_dtstart_from_the_anchor_minute() -> None:
    # The anchor is 11:17:42 Taipei: a bare daily rule fires at 11:17:00 (BYSECOND defaults to 0).
    schedule = rule("FREQ=DAILY", "Asia/Taipei")
    assert schedule.next_after(ANCHOR) == utc(2026, 6, 2, 3, 17)
    # The weekday of a bare weekly rule is the anchor's (Monday 2026-06-01).
    weekly = rule("FREQ=WEEKLY;BYHOUR=8;BYMINUTE=0", "Asia/Taipei")
    assert [o.weekday() for o in weekly.upcoming(ANCHOR, 3)] == [0, 0, 0]


def test_same_job_compiles_to_the_same_schedule() -> None:
    first = rule("FREQ=MINUTELY;INTERVAL=7", "Asia/Taipei")
    # Any anchor within the same minute gives the same DTSTART, hence the same phase.
    second = rule("FREQ=MINUTELY;INTERVAL=7", "Asia/Taipei", anchor=ANCHOR + timedelta(seconds=10))
    after = utc(2026, 7, 1)
    assert first.upcoming(after, 20) == second.upcoming(after, 20)
    assert first is rule("FREQ=MINUTELY;INTERVAL=7", "Asia/Taipei")  # cached


def test_vevent_with_count_yields_count_then_none() -> None:
    text = (
        "BEGIN:VEVENT\nDTSTART;TZID=Asia/Taipei:20260622T080000\n"
        "RRULE:FREQ=DAILY;COUNT=3\nEND:VEVENT"
    )
    schedule = rule(text, "UTC")
    got = schedule.upcoming(utc(2026, 6, 1), 10)
    assert got == [utc(2026, 6, 22), utc(2026, 6, 23), utc(2026, 6, 24)]
    assert schedule.next_after(got[-1]) is None
    assert schedule.next_after(utc(2030, 1, 1)) is None


def test_vevent_on_one_line_with_descriptive_properties() -> None:
    text = (
        "BEGIN:VEVENT SUMMARY:Summarize the news UID:abc@example.com "
        "DTSTART;TZID=Asia/Taipei:20260622T080000 RRULE:FREQ=DAILY;COUNT=2 END:VEVENT"
    )
    assert rule(text).upcoming(utc(2026, 6, 1), 5) == [utc(2026, 6, 22), utc(2026, 6, 23)]


def test_vcalendar_with_vtimezone_crlf_and_folded_lines() -> None:
    text = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VTIMEZONE\r\nTZID:Asia/Taipei\r\n"
        "BEGIN:STANDARD\r\nDTSTART:19700101T000000\r\nTZOFFSETFROM:+0800\r\n"
        "TZOFFSETTO:+0800\r\nEND:STANDARD\r\nEND:VTIMEZONE\r\nBEGIN:VEVENT\r\n"
        "DTSTART;TZID=Asia/Taipei:20260622T080000\r\nRRULE:FREQ=DAILY;\r\n COUNT=2\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    assert rule(text).upcoming(utc(2026, 6, 1), 5) == [utc(2026, 6, 22), utc(2026, 6, 23)]


def test_bare_dtstart_and_rrule_lines() -> None:
    text = "DTSTART:20260622T080000\nRRULE:FREQ=WEEKLY;COUNT=2"
    # A floating DTSTART is read in the job's timezone.
    assert rule(text, "Asia/Taipei").upcoming(utc(2026, 6, 1), 5) == [
        utc(2026, 6, 22),
        utc(2026, 6, 29),
    ]


def test_tzid_on_dtstart_overrides_the_job_timezone() -> None:
    text = "DTSTART;TZID=America/New_York:20260622T080000\nRRULE:FREQ=DAILY"
    assert rule(text, "Asia/Taipei").next_after(utc(2026, 6, 22)) == utc(2026, 6, 22, 12)


def test_utc_dtstart_runs_in_utc_across_dst() -> None:
    text = "DTSTART:20260301T120000Z\nRRULE:FREQ=DAILY"
    got = rule(text, "America/New_York").upcoming(utc(2026, 3, 6), 4)
    assert got == [utc(2026, 3, d, 12) for d in (6, 7, 8, 9)]


def test_iso_extended_dtstart_is_accepted() -> None:
    text = "DTSTART;TZID=Asia/Taipei:2026-06-22T08:00:00\nRRULE:FREQ=DAILY"
    assert rule(text).next_after(utc(2026, 6, 1)) == utc(2026, 6, 22)


def test_until_in_utc_is_inclusive() -> None:
    text = "DTSTART;TZID=Asia/Taipei:20260622T080000\nRRULE:FREQ=DAILY;UNTIL=20260624T000000Z"
    schedule = rule(text)
    assert schedule.upcoming(utc(2026, 6, 1), 10) == [
        utc(2026, 6, 22),
        utc(2026, 6, 23),
        utc(2026, 6, 24),
    ]


def test_until_floating_and_date() -> None:
    floating = "DTSTART:20260622T080000\nRRULE:FREQ=DAILY;UNTIL=20260623T080000"
    assert len(rule(floating, "Asia/Taipei").upcoming(utc(2026, 6, 1), 10)) == 2
    as_date = "DTSTART:20260622T080000\nRRULE:FREQ=DAILY;UNTIL=20260624"
    assert len(rule(as_date, "Asia/Taipei").upcoming(utc(2026, 6, 1), 10)) == 3


def test_until_inside_repeated_hour_is_an_exact_instant() -> None:
    # Hourly at :30 in New York; UNTIL is 01:30 EST (06:30 UTC), the second 01:30 of Nov 1.
    text = "DTSTART;TZID=America/New_York:20261031T223000\nRRULE:FREQ=HOURLY;UNTIL=20261101T063000Z"
    got = rule(text).upcoming(utc(2026, 11, 1, 3), 10)
    # 23:30, 00:30, 01:30 EDT, then 02:30 EST would be after UNTIL.
    assert got == [utc(2026, 11, 1, 3, 30), utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5, 30)]


def test_exdate_skips_occurrences() -> None:
    text = (
        "BEGIN:VEVENT\nDTSTART;TZID=Asia/Taipei:20260622T080000\nRRULE:FREQ=DAILY;COUNT=5\n"
        "EXDATE;TZID=Asia/Taipei:20260623T080000,20260625T080000\nEND:VEVENT"
    )
    assert rule(text).upcoming(utc(2026, 6, 1), 10) == [
        utc(2026, 6, 22),
        utc(2026, 6, 24),
        utc(2026, 6, 26),
    ]


def test_exdate_in_utc_and_as_a_date() -> None:
    text = (
        "DTSTART;TZID=Asia/Taipei:20260622T080000\nRRULE:FREQ=DAILY;COUNT=4\n"
        "EXDATE:20260623T000000Z\nEXDATE;VALUE=DATE:20260624"
    )
    assert rule(text).upcoming(utc(2026, 6, 1), 10) == [utc(2026, 6, 22), utc(2026, 6, 25)]


def test_rdate_adds_occurrences() -> None:
    text = (
        "DTSTART;TZID=Asia/Taipei:20260622T080000\nRRULE:FREQ=WEEKLY;COUNT=2\n"
        "RDATE;TZID=Asia/Taipei:20260624T090000\nRDATE:20260622T000000Z"
    )
    assert rule(text).upcoming(utc(2026, 6, 1), 10) == [
        utc(2026, 6, 22),  # the RDATE equal to DTSTART does not fire twice
        utc(2026, 6, 24, 1),
        utc(2026, 6, 29),
    ]


def test_monthly_last_friday_and_setpos() -> None:
    last_friday = rule("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17;BYMINUTE=0")
    assert last_friday.upcoming(utc(2026, 6, 1), 2) == [utc(2026, 6, 26, 17), utc(2026, 7, 31, 17)]
    last_workday = rule("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=9;BYMINUTE=0")
    assert last_workday.next_after(utc(2026, 6, 1)) == utc(2026, 6, 30, 9)
    # A bare rule starts at the job's creation: nothing before the anchor.
    assert last_workday.next_after(utc(2026, 1, 1)) == utc(2026, 6, 30, 9)


# --- DST -----------------------------------------------------------------------------------------


def test_daily_in_spring_gap_fires_at_gap_end() -> None:
    schedule = rule("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "America/New_York", anchor=utc(2026, 1, 1))
    assert schedule.upcoming(utc(2026, 3, 7), 3) == [
        utc(2026, 3, 7, 7, 30),
        utc(2026, 3, 8, 7, 0),
        utc(2026, 3, 9, 6, 30),
    ]


def test_daily_in_repeated_hour_fires_once() -> None:
    schedule = rule("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", "America/New_York", anchor=utc(2026, 1, 1))
    assert schedule.upcoming(utc(2026, 10, 31), 3) == [
        utc(2026, 10, 31, 5, 30),
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 30),
    ]


def test_minutely_across_fall_back_follows_the_wall_clock() -> None:
    text = "DTSTART;TZID=America/New_York:20261101T000000\nRRULE:FREQ=MINUTELY;INTERVAL=30"
    got = rule(text).upcoming(utc(2026, 11, 1, 4, 50), 5)
    # 01:00, 01:30 EDT; the repeated 01:00, 01:30 EST are not fired again; then 02:00 EST.
    assert got == [
        utc(2026, 11, 1, 5),
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 7),
        utc(2026, 11, 1, 7, 30),
        utc(2026, 11, 1, 8),
    ]


# --- efficiency ----------------------------------------------------------------------------------


def test_old_dtstart_does_not_expand_from_the_start() -> None:
    text = "DTSTART:19900101T000000\nRRULE:FREQ=MINUTELY;INTERVAL=7"
    schedule = rule(text, "Europe/Berlin")
    began = time.perf_counter()
    for day in range(1, 29):
        schedule.next_after(utc(2026, 2, day, 12))
    assert time.perf_counter() - began < 1.0  # ~19 million minutes from DTSTART
    found = schedule.next_after(utc(2026, 2, 1, 12))
    assert found is not None
    wall = found.astimezone(ZoneInfo("Europe/Berlin")).replace(tzinfo=None)
    assert (wall - datetime(1990, 1, 1)).total_seconds() % (7 * 60) == 0


def test_impossible_rule_is_refused_quickly() -> None:
    began = time.perf_counter()
    err = error_of("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30")
    assert time.perf_counter() - began < 1.0
    assert err.code == "invalid_schedule"


# Re-basing must never change which wall times a rule yields: compare against dateutil expanding
# from DTSTART. BYWEEKNO and numbered BYDAY with BYMONTHDAY are left out: the "can it occur"
# check is conservative for them, and dateutil could then search until year 9999.
_FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"]


@st.composite
def rule_texts(draw: st.DrawFn) -> str:
    freq = draw(st.sampled_from(_FREQS))
    parts = [f"FREQ={freq}", f"INTERVAL={draw(st.sampled_from([1, 2, 3, 5, 7, 13]))}"]
    if draw(st.booleans()):
        months = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True))
        parts.append("BYMONTH=" + ",".join(map(str, months)))
    monthdays = freq != "WEEKLY" and draw(st.booleans())
    if monthdays:
        values = st.sampled_from([1, 2, 15, 28, 29, 30, 31, -1, -2])
        days = draw(st.lists(values, min_size=1, max_size=3, unique=True))
        parts.append("BYMONTHDAY=" + ",".join(map(str, days)))
    if draw(st.booleans()):
        names = draw(
            st.lists(
                st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU"]),
                min_size=1,
                max_size=3,
                unique=True,
            )
        )
        if freq in ("MONTHLY", "YEARLY") and not monthdays and draw(st.booleans()):
            names = [draw(st.sampled_from(["1", "2", "-1"])) + name for name in names]
        parts.append("BYDAY=" + ",".join(names))
    if draw(st.booleans()):
        hours = draw(st.lists(st.integers(0, 23), min_size=1, max_size=3, unique=True))
        parts.append("BYHOUR=" + ",".join(map(str, hours)))
    if draw(st.booleans()):
        minutes = draw(st.lists(st.integers(0, 59), min_size=1, max_size=3, unique=True))
        parts.append("BYMINUTE=" + ",".join(map(str, minutes)))
    if freq in ("MONTHLY", "YEARLY", "WEEKLY") and draw(st.booleans()):
        parts.append("BYSETPOS=" + draw(st.sampled_from(["1", "-1", "2"])))
    if draw(st.booleans()):
        parts.append("WKST=" + draw(st.sampled_from(["MO", "SU", "WE"])))
    return ";".join(parts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=rule_texts(),
    dtstart=st.datetimes(datetime(2018, 1, 1), datetime(2022, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
    days_later=st.integers(0, 1500),
)
def test_rebasing_yields_the_same_occurrences_as_expanding_from_dtstart(
    text: str, dtstart: datetime, days_later: int
) -> None:
    tz = ZoneInfo("UTC")
    try:
        spec = make_spec(parse_rule(text), dtstart, tz)
        check_can_occur(spec)
    except ScheduleError:
        assume(False)
    if spec.parts.freq >= 4:  # sub-daily: keep the reference expansion short
        days_later %= 40
    target = dtstart + timedelta(days=days_later, seconds=days_later * 37 % 86400)
    reference = within_horizon(
        spec.parts, target, islice(rrulestr("RRULE:" + text, dtstart=dtstart).xafter(target), 12)
    )
    assert list(islice(rule_walls_after(spec, tz, target), 12)) == reference


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "RRULE:BYHOUR=8",  # no FREQ
        "FREQ=FORTNIGHTLY",
        "FREQ=DAILY;BYHOUR=25",
        "FREQ=DAILY;BYMINUTE=x",
        "FREQ=DAILY;INTERVAL=0",
        "FREQ=DAILY;COUNT=3;UNTIL=20270101T000000Z",
        "FREQ=DAILY;FREQ=WEEKLY",
        "FREQ=MONTHLY;BYWEEKNO=3",
        "FREQ=WEEKLY;BYMONTHDAY=3",
        "FREQ=DAILY;BYDAY=1MO",
        "FREQ=DAILY;BYDAY=XX",
        "FREQ=DAILY;BYEASTER=0",
        "FREQ=DAILY;UNTIL=tomorrow",
        "FREQ=DAILY;COUNT=1000000",
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30",  # never happens
        "FREQ=DAILY;INTERVAL=7;BYDAY=TU",  # DTSTART is a Monday: every 7th day never is a Tuesday
        "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6",
        "DTSTART:2026-13-01T08:00:00\nRRULE:FREQ=DAILY",
        "DTSTART:20260622T080000+0800\nRRULE:FREQ=DAILY",
        "DTSTART:20260622T080000\nEXDATE:20260623T080000",  # no RRULE
        "DTSTART:20260622T080000\nRRULE:FREQ=DAILY\nEXRULE:FREQ=WEEKLY",
        "BEGIN:VEVENT\nRRULE:FREQ=DAILY\nEND:VEVENT\nBEGIN:VEVENT\nRRULE:FREQ=DAILY\nEND:VEVENT",
    ],
)
def test_invalid_rules(text: str) -> None:
    err = error_of(text)
    assert err.code == "invalid_schedule"
    assert err.field == "job_params.schedule"
    assert err.expected


def test_general_expected_names_the_accepted_forms() -> None:
    err = error_of("every day at eight")
    assert err.code == "invalid_schedule"
    assert err.expected is not None
    for form in ("cron", "RRULE:FREQ=", "BEGIN:VEVENT"):
        assert form in err.expected


def test_unknown_tzid() -> None:
    err = error_of("DTSTART;TZID=Eastern Standard Time:20260622T080000\nRRULE:FREQ=DAILY")
    assert err.code == "unknown_timezone"
    assert err.field == "job_params.schedule"
    assert err.expected == "an IANA timezone such as Asia/Taipei"


def test_unknown_job_timezone_with_rrule() -> None:
    err = error_of("FREQ=DAILY", "Taipei")
    assert err.code == "unknown_timezone"
    assert err.field == "job_params.timezone"


def test_too_frequent_rule() -> None:
    err = error_of("FREQ=SECONDLY;INTERVAL=10")
    assert err.code == "schedule_too_frequent"
    assert err.expected == "at most one occurrence every 60 seconds"
    rule("FREQ=MINUTELY")  # exactly the minimum is fine


def test_too_frequent_by_list() -> None:
    err = error_of("FREQ=DAILY;BYHOUR=8;BYMINUTE=0;BYSECOND=0,30")
    assert err.code == "schedule_too_frequent"


def test_no_future_occurrence() -> None:
    ended = "DTSTART:20200101T080000\nRRULE:FREQ=DAILY;COUNT=3"
    assert rule(ended).next_after(utc(2026, 1, 1)) is None  # compiles without `now`
    err = error_of(ended, now=utc(2026, 6, 1))
    assert err.code == "no_future_occurrence"
    assert err.field == "job_params.schedule"
    until_past = "FREQ=DAILY;UNTIL=20250101T000000Z"
    assert error_of(until_past, now=utc(2026, 6, 1)).code == "no_future_occurrence"
    everything_excluded = (
        "DTSTART:20270101T080000\nRRULE:FREQ=DAILY;COUNT=1\nEXDATE:20270101T080000"
    )
    assert error_of(everything_excluded, now=utc(2026, 6, 1)).code == "no_future_occurrence"


def test_future_occurrence_passes_the_now_check() -> None:
    schedule = rule("FREQ=DAILY;BYHOUR=8;BYMINUTE=0", "Asia/Taipei", now=utc(2026, 6, 1))
    assert schedule.next_after(utc(2026, 6, 1)) is not None


# WEEKLY and shorter are expanded by onthedot itself (dateutil could walk without end), and
# MONTHLY/YEARLY one period at a time when a period may be empty: compare them with dateutil.
@st.composite
def walked_rule_texts(draw: st.DrawFn) -> str:
    freq = draw(st.sampled_from(["YEARLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"]))
    interval = draw(st.sampled_from([1, 2, 3, 5, 7, 13, 25, 61]))
    parts = [f"FREQ={freq}", f"INTERVAL={interval}"]
    if draw(st.booleans()):
        months = draw(st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True))
        parts.append("BYMONTH=" + ",".join(map(str, months)))
    if freq != "WEEKLY" and draw(st.booleans()):
        days = draw(st.lists(st.sampled_from([1, 2, 15, 28, 31, -1]), min_size=1, max_size=2,
                             unique=True))
        parts.append("BYMONTHDAY=" + ",".join(map(str, days)))
    if freq in ("YEARLY", "HOURLY", "MINUTELY", "SECONDLY") and draw(st.booleans()):
        yeardays = draw(st.lists(st.sampled_from([1, 45, 100, 200, -1]), min_size=1, max_size=3,
                                 unique=True))
        parts.append("BYYEARDAY=" + ",".join(map(str, yeardays)))
    if freq == "YEARLY" and draw(st.booleans()):
        weeks = draw(st.lists(st.sampled_from([1, 2, 26, 52, 53, -1]), min_size=1, max_size=2,
                              unique=True))
        parts.append("BYWEEKNO=" + ",".join(map(str, weeks)))
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU"]),
                              min_size=1, max_size=3, unique=True))
        parts.append("BYDAY=" + ",".join(names))
    if freq in ("WEEKLY", "DAILY", "HOURLY", "MINUTELY") and draw(st.booleans()):
        hours = draw(st.lists(st.integers(0, 23), min_size=1, max_size=3, unique=True))
        parts.append("BYHOUR=" + ",".join(map(str, hours)))
    if freq != "SECONDLY" and draw(st.booleans()):
        minutes = draw(st.lists(st.integers(0, 59), min_size=1, max_size=3, unique=True))
        parts.append("BYMINUTE=" + ",".join(map(str, minutes)))
    if draw(st.booleans()):
        seconds = draw(st.lists(st.integers(0, 59), min_size=1, max_size=3, unique=True))
        parts.append("BYSECOND=" + ",".join(map(str, seconds)))
    if draw(st.booleans()):
        parts.append("BYSETPOS=" + draw(st.sampled_from(["1", "-1", "2", "1,-1"])))
    if draw(st.booleans()):
        parts.append("WKST=" + draw(st.sampled_from(["MO", "SU", "WE"])))
    return ";".join(parts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=walked_rule_texts(),
    dtstart=st.datetimes(datetime(2018, 1, 1), datetime(2022, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
    seconds_later=st.integers(0, 1500 * 86400),
)
def test_walked_expansion_yields_the_same_occurrences_as_dateutil(
    text: str, dtstart: datetime, seconds_later: int
) -> None:
    tz = ZoneInfo("UTC")
    try:
        spec = make_spec(parse_rule(text), dtstart, tz)
        check_can_occur(spec)
    except ScheduleError:
        assume(False)
    # Keep dateutil's reference expansion from DTSTART short for the short frequencies.
    window = {"SECONDLY": 3 * 86400, "MINUTELY": 60 * 86400, "HOURLY": 400 * 86400}
    seconds_later %= window.get(text.split(";")[0][5:], 1500 * 86400)
    target = dtstart + timedelta(seconds=seconds_later)
    reference = within_horizon(
        spec.parts, target, islice(rrulestr("RRULE:" + text, dtstart=dtstart).xafter(target), 6)
    )
    assert list(islice(rule_walls_after(spec, tz, target), 6)) == reference


def within_horizon(
    parts: RuleParts, start: datetime, occurrences: Iterable[datetime]
) -> list[datetime]:
    """The occurrences up to the first whose period (day, for DAILY and shorter) begins past the
    search horizon of the one before: there a lookup gives up, by design."""
    kept: list[datetime] = []
    previous = start
    for occurrence in occurrences:
        if parts.freq >= DAILY:  # DAILY and shorter are walked by day
            period = datetime.combine(occurrence.date(), datetime.min.time())
        else:
            period = period_floor(parts, occurrence)
        if period > horizon(parts, previous):
            break
        kept.append(occurrence)
        previous = occurrence
    return kept
