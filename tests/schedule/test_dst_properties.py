"""Property tests of the DST policy around real transitions, for cron and RRULE alike.

Zones: America/New_York and Europe/London (one-hour shifts at different local times),
Australia/Lord_Howe (a 30-minute shift) and Pacific/Apia (skipped the whole of 2011-12-30).

For random daily, hourly and minute-level schedules and random start instants near a transition:

* occurrences are aware UTC, strictly increasing, never duplicated;
* each occurrence is either a matching wall time at its first instant (fold=0), or the first
  instant after a gap for a matching wall time that does not exist;
* no occurrence is missed: they are exactly the resolved matching wall times after the start;
* a daily wall time fires exactly once per local day, fall-back days included.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from onthedot.domain.models import JobParams
from onthedot.schedule import compile_schedule, resolve_local
from onthedot.schedule.local import wall_time

ZONES = ("America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Apia")
MINUTE = timedelta(minutes=1)
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


@functools.cache
def transitions(zone: str) -> tuple[datetime, ...]:
    """Exact UTC instants at which ``zone`` changed its offset, 2011-2012 and 2025-2027."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    for first, last in (
        (date(2011, 1, 1), date(2012, 12, 31)),
        (date(2025, 1, 1), date(2027, 12, 31)),
    ):
        day = datetime.combine(first, datetime.min.time(), UTC)
        while day.date() < last:
            nxt = day + timedelta(days=1)
            if day.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
                lo, hi = int(day.timestamp()), int(nxt.timestamp())
                while hi - lo > 1:  # first second with the new offset
                    mid = (lo + hi) // 2
                    if (
                        datetime.fromtimestamp(mid, tz).utcoffset()
                        == day.astimezone(tz).utcoffset()
                    ):
                        lo = mid
                    else:
                        hi = mid
                found.append(datetime.fromtimestamp(hi, UTC))
            day = nxt
    return tuple(found)


def test_the_zones_have_the_transitions_we_mean() -> None:
    apia = transitions("Pacific/Apia")
    assert datetime(2011, 12, 30, 10, tzinfo=UTC) in apia
    lord_howe = transitions("Australia/Lord_Howe")
    shifts = {
        (t.astimezone(ZoneInfo("Australia/Lord_Howe")).utcoffset() or timedelta())
        - ((t - MINUTE).astimezone(ZoneInfo("Australia/Lord_Howe")).utcoffset() or timedelta())
        for t in lord_howe
    }
    assert shifts == {timedelta(minutes=30), timedelta(minutes=-30)}
    for zone in ZONES:
        assert len(transitions(zone)) >= 4


@dataclass(frozen=True)
class Case:
    """A schedule text and an independent predicate over naive wall times."""

    schedule: str
    matches: Callable[[datetime], bool]
    daily: bool = False


def _daily(h: int, m: int) -> Callable[[datetime], bool]:
    return lambda w: w.hour == h and w.minute == m and w.second == 0


hours = st.one_of(st.integers(0, 3), st.integers(0, 23))  # transitions happen around 00:00-03:00
minutes = st.sampled_from([0, 15, 30, 45, 59, 1, 10, 20, 40])


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kind = draw(
        st.sampled_from(
            [
                "cron-daily",
                "rrule-daily",
                "cron-hourly",
                "rrule-hourly",
                "cron-step",
                "cron-list",
                "rrule-minutely",
            ]
        )
    )
    h, m = draw(hours), draw(minutes)
    if kind == "cron-daily":
        return Case(f"{m} {h} * * *", _daily(h, m), daily=True)
    if kind == "rrule-daily":
        return Case(f"RRULE:FREQ=DAILY;BYHOUR={h};BYMINUTE={m}", _daily(h, m), daily=True)
    if kind == "cron-hourly":
        return Case(f"{m} * * * *", lambda w: w.minute == m and w.second == 0)
    if kind == "rrule-hourly":
        return Case(f"FREQ=HOURLY;BYMINUTE={m}", lambda w: w.minute == m and w.second == 0)
    if kind == "cron-step":
        k = draw(st.sampled_from([1, 2, 5, 10, 15, 20, 30]))
        return Case(f"*/{k} * * * *", lambda w: w.minute % k == 0 and w.second == 0)
    if kind == "cron-list":
        m2 = (m + draw(st.integers(1, 58))) % 60
        h2 = min(h + 2, 23)
        return Case(
            f"{m},{m2} {h}-{h2} * * *",
            lambda w: w.minute in (m, m2) and h <= w.hour <= h2 and w.second == 0,
        )
    # rrule-minutely: phase counted in wall-clock minutes from DTSTART (see `anchor` below).
    k = draw(st.sampled_from([1, 7, 15, 30, 45]))
    return Case(f"FREQ=MINUTELY;INTERVAL={k}", lambda w: w.second == 0, daily=False)


@st.composite
def starts(draw: st.DrawFn) -> tuple[str, datetime]:
    zone = draw(st.sampled_from(ZONES))
    transition = draw(st.sampled_from(transitions(zone)))
    offset = draw(st.integers(-36 * 60, 12 * 60))
    seconds = draw(st.sampled_from([0, 0, 1, 30]))
    return zone, transition + timedelta(minutes=offset, seconds=seconds)


def compile_case(
    case: Case, zone: str, start: datetime
) -> tuple[object, Callable[[datetime], bool]]:
    # The anchor (creation) is a few days before the start; it is the bare rules' DTSTART.
    anchor = start - timedelta(days=3, minutes=17)
    schedule = compile_schedule(
        JobParams("recurring", schedule=case.schedule, timezone=zone), anchor=anchor
    )
    matches = case.matches
    if case.schedule.startswith("FREQ=MINUTELY"):
        k = int(case.schedule.rsplit("=", 1)[1])
        dtstart = wall_time(anchor, ZoneInfo(zone)).replace(second=0, microsecond=0)
        matches = lambda w: (  # noqa: E731
            w.second == 0 and w >= dtstart and int((w - dtstart).total_seconds()) // 60 % k == 0
        )
    return schedule, matches


def gap_walls(instant: datetime, tz: ZoneInfo) -> list[datetime]:
    """The minute wall times skipped by a forward transition at ``instant`` (empty if none).

    Computed from offsets only, independently of ``resolve_local``: just before the transition
    the clock shows G0 - 1s, at it G1; every wall time in [G0, G1) does not exist.
    """
    before = instant - timedelta(seconds=1)
    shift = (instant.astimezone(tz).utcoffset() or timedelta()) - (
        before.astimezone(tz).utcoffset() or timedelta()
    )
    if shift <= timedelta():
        return []
    gap_start = wall_time(before, tz) + timedelta(seconds=1)
    gap_end = wall_time(instant, tz)
    first = gap_start.replace(second=0, microsecond=0)
    if first < gap_start:
        first += MINUTE
    count = int((gap_end - first) / MINUTE) + (1 if (gap_end - first) % MINUTE else 0)
    return [first + i * MINUTE for i in range(max(count, 0))]


def expected_after(
    matches: Callable[[datetime], bool], tz: ZoneInfo, start: datetime, last: datetime
) -> list[datetime]:
    """Brute force: resolve every matching minute wall time after the start's wall time."""
    wall = wall_time(start, tz).replace(second=0, microsecond=0)
    end = wall_time(last, tz) + timedelta(hours=2)
    found: set[datetime] = set()
    while wall <= end:
        if matches(wall):
            instant = resolve_local(wall, tz)
            if start < instant <= last:
                found.add(instant)
        wall += MINUTE
    return sorted(found)


@PROPERTY_SETTINGS
@given(case=cases(), where=starts())
def test_occurrences_follow_the_policy(case: Case, where: tuple[str, datetime]) -> None:
    zone, start = where
    tz = ZoneInfo(zone)
    schedule, matches = compile_case(case, zone, start)
    count = 6 if case.daily else 40
    got = schedule.upcoming(start, count)  # type: ignore[attr-defined]
    assert len(got) == count
    assert all(o.tzinfo is UTC for o in got)
    assert all(a < b for a, b in pairwise(got)), "strictly increasing"
    assert got[0] > start

    for occurrence in got:
        wall = wall_time(occurrence, tz)
        # fold == 0: the first time the clocks showed this wall time.
        on_time = matches(wall) and occurrence.astimezone(tz).fold == 0
        after_gap = any(matches(w) for w in gap_walls(occurrence, tz))
        assert on_time or after_gap, f"{occurrence} ({wall} local) matches nothing"

    assert got == expected_after(matches, tz, start, got[-1]), "missed or extra occurrences"
    # next_after walks the same sequence one step at a time.
    assert schedule.next_after(start) == got[0]  # type: ignore[attr-defined]
    assert schedule.next_after(got[0]) == got[1]  # type: ignore[attr-defined]


@PROPERTY_SETTINGS
@given(
    h=hours,
    m=minutes,
    form=st.sampled_from(["cron", "rrule"]),
    zone=st.sampled_from(ZONES),
    data=st.data(),
)
def test_daily_wall_time_fires_once_per_local_day(
    h: int, m: int, form: str, zone: str, data: st.DataObject
) -> None:
    tz = ZoneInfo(zone)
    transition = data.draw(st.sampled_from(transitions(zone)))
    start = transition - timedelta(days=3, minutes=data.draw(st.integers(0, 1439)))
    text = f"{m} {h} * * *" if form == "cron" else f"FREQ=DAILY;BYHOUR={h};BYMINUTE={m}"
    schedule = compile_schedule(
        JobParams("recurring", schedule=text, timezone=zone), anchor=start - timedelta(days=1)
    )
    got = schedule.upcoming(start, 7)

    # Each occurrence stands for the calendar days whose h:m it fires: its own, and those of
    # non-existent h:m it is the first instant after. Together: consecutive days, none twice.
    nominal: list[date] = []
    for occurrence in got:
        wall = wall_time(occurrence, tz)
        days = [w.date() for w in gap_walls(occurrence, tz) if (w.hour, w.minute) == (h, m)]
        if (wall.hour, wall.minute) == (h, m):
            days.append(wall.date())
        assert days, f"{occurrence} ({wall} local) stands for no day"
        nominal.extend(days)
    assert nominal == [nominal[0] + timedelta(days=i) for i in range(len(nominal))]
    wall_times = [
        datetime.combine(d, datetime.min.time()).replace(hour=h, minute=m) for d in nominal
    ]
    assert got == sorted({resolve_local(w, tz) for w in wall_times})

    per_local_day = Counter(wall_time(o, tz).date() for o in got)
    skipped = date(2011, 12, 30)  # Apia: no wall time of this day exists
    if zone == "Pacific/Apia" and skipped in nominal:
        # The skipped day's h:m fires at 00:00 on the 31st - on its own unless h:m is 00:00.
        assert per_local_day[skipped] == 0
        assert per_local_day[skipped + timedelta(days=1)] == (1 if (h, m) == (0, 0) else 2)
        del per_local_day[skipped + timedelta(days=1)]
    assert set(per_local_day.values()) == {1}


def test_fall_back_days_fire_once_in_every_zone() -> None:
    cases_by_zone = {
        # zone: (a repeated wall time, a date it repeats on)
        "America/New_York": ("30 1 * * *", date(2026, 11, 1)),
        "Europe/London": ("30 1 * * *", date(2026, 10, 25)),
        "Australia/Lord_Howe": ("45 1 * * *", date(2026, 4, 5)),
    }
    for zone, (expr, day) in cases_by_zone.items():
        tz = ZoneInfo(zone)
        for text in (expr, f"FREQ=DAILY;BYHOUR=1;BYMINUTE={expr.split()[0]}"):
            schedule = compile_schedule(
                JobParams("recurring", schedule=text, timezone=zone),
                anchor=datetime(2026, 1, 1, tzinfo=UTC),
            )
            around = datetime.combine(day, datetime.min.time(), tz).astimezone(UTC)
            got = schedule.upcoming(around, 3)
            days = [wall_time(o, tz).date() for o in got]
            assert days == [day, day + timedelta(days=1), day + timedelta(days=2)], (zone, text)
            assert (got[0].astimezone(tz).fold, got[0].astimezone(tz).minute) == (
                0,
                int(expr.split()[0]),
            )
