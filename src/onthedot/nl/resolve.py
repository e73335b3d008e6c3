"""From a Spec to JobParams: the documented rules of time, in one place for every language.

- A daypart without an hour takes its default (早上/morning 08:00, 上午 09:00, 中午/noon 12:00,
  下午/afternoon 15:00, 傍晚 18:00, 晚上/evening/tonight 19:00); a day without any time 09:00.
- A bare hour is on the 24-hour clock (三點 = 03:00, "at 3" = 03:00); 下午/晚上/pm move it.
- 晚上十二點, 午夜 and "midnight" are 00:00 at the END of the named day.
- A one-time expression with no day that has already passed today means tomorrow; a named day
  (今天, 明天, 11月30日 2026) that has passed is an error; a bare weekday or month-day rolls on.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from onthedot.domain.models import JobParams
from onthedot.nl.combine import Spec, fail
from onthedot.nl.parts import (
    AbsDate,
    Daily,
    DateRef,
    DayOfMonth,
    Daypart,
    Every,
    MonthlyDays,
    MonthlyNth,
    MonthRef,
    RelativeDay,
    WeekdayRef,
    Weekly,
    WeekRef,
    Yearly,
)
from onthedot.schedule import resolve_local


@dataclass(frozen=True)
class TimeOfDay:
    hour: int
    minute: int
    shift: int = 0  # 1 for midnight at the end of the named day


DEFAULT_TIME = TimeOfDay(9, 0)
DAYPART_DEFAULTS: dict[Daypart, TimeOfDay] = {
    Daypart.MORNING: TimeOfDay(8, 0),
    Daypart.FORENOON: TimeOfDay(9, 0),
    Daypart.NOON: TimeOfDay(12, 0),
    Daypart.AFTERNOON: TimeOfDay(15, 0),
    Daypart.DUSK: TimeOfDay(18, 0),
    Daypart.EVENING: TimeOfDay(19, 0),
    Daypart.MIDNIGHT: TimeOfDay(0, 0, 1),
}
_PM_PARTS = {Daypart.AFTERNOON, Daypart.DUSK, Daypart.EVENING}
_AM_PARTS = {Daypart.EARLY, Daypart.MORNING, Daypart.FORENOON}
RRULE_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
MINUTE_STEPS = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720, 1440]
HOUR_STEPS = [1, 2, 3, 4, 6, 8, 12, 24]


def to_params(spec: Spec, now: datetime, zone: ZoneInfo, tz: str) -> JobParams:
    if spec.immediate:
        return JobParams(type="immediate", timezone=tz)
    tod = time_of_day(spec)
    if spec.recurrence is not None:
        return JobParams(type="recurring", schedule=recurring(spec, tod), timezone=tz)
    instant = one_time(spec, tod, now.astimezone(zone), zone)
    return JobParams(type="one-time", time=instant.isoformat(timespec="seconds"), timezone=tz)


def _text(spec: Spec, name: str) -> str:
    for p in spec.pieces:
        if getattr(p, name) is not None:
            return p.text
    return spec.matched


def time_of_day(spec: Spec) -> TimeOfDay | None:
    clock, part = spec.clock, spec.daypart
    if clock is None:
        if part is None:
            return None
        if part is Daypart.EARLY:
            raise fail("need_hour", _text(spec, "daypart"))
        return DAYPART_DEFAULTS[part]
    field = _text(spec, "clock")
    if clock.end_of_day:
        if part not in (None, Daypart.EVENING, Daypart.MIDNIGHT):
            raise fail("conflict", field)
        return TimeOfDay(0, 0, 1)
    if clock.meridiem is not None:
        if (clock.meridiem == "am" and part in _PM_PARTS) or (
            clock.meridiem == "pm" and part in _AM_PARTS
        ):
            raise fail("conflict", field)
        return TimeOfDay(clock.hour % 12 + (12 if clock.meridiem == "pm" else 0), clock.minute)
    hour = _hour_in(part, clock.hour)
    if hour is None:
        raise fail("bad_hour" if clock.hour > 23 else "hour_daypart", _text(spec, "daypart"))
    return TimeOfDay(hour % 24, clock.minute, 1 if hour >= 24 else 0)


def _hour_in(part: Daypart | None, h: int) -> int | None:
    """The 24-hour hour that ``h`` o'clock means in ``part``; 24 means 00:00 the next day."""
    if h > 23:
        return None
    if part is None:
        return h
    rules: dict[Daypart, Callable[[int], int | None]] = {
        Daypart.EARLY: lambda h: 0 if h == 12 else (h if h <= 6 else None),
        Daypart.MORNING: lambda h: h if h <= 12 else None,
        Daypart.FORENOON: lambda h: h if h <= 12 else None,
        Daypart.NOON: lambda h: h + 12 if 1 <= h <= 3 else (h if 11 <= h <= 15 else None),
        Daypart.AFTERNOON: lambda h: h + 12 if 1 <= h <= 11 else (h if 12 <= h <= 19 else None),
        Daypart.DUSK: lambda h: h + 12 if 4 <= h <= 8 else (h if 16 <= h <= 20 else None),
        Daypart.EVENING: lambda h: h + 12 if 5 <= h <= 12 else (h if 17 <= h <= 23 else None),
        Daypart.MIDNIGHT: lambda h: 24 if h in (0, 12) else (24 + h if h <= 3 else None),
    }
    return rules[part](h)


# Recurring ---------------------------------------------------------------------------------------


def recurring(spec: Spec, tod: TimeOfDay | None) -> str:
    rec = spec.recurrence
    if isinstance(rec, Every):
        if tod is not None:
            raise fail("interval_time", _text(spec, "clock") if spec.clock else spec.matched)
        return every_cron(rec, _text(spec, "recurrence"))
    t = tod or DEFAULT_TIME
    if t.shift and not isinstance(rec, Daily | Weekly):
        raise fail("midnight_day", _text(spec, "clock") if spec.clock else spec.matched)
    at = f"BYHOUR={t.hour};BYMINUTE={t.minute};BYSECOND=0"
    if isinstance(rec, Daily):
        if rec.interval == 1:
            return f"{t.minute} {t.hour} * * *"
        return f"RRULE:FREQ=DAILY;INTERVAL={rec.interval};{at}"
    if isinstance(rec, Weekly):
        days = frozenset((d + t.shift) % 7 for d in rec.days)
        if rec.interval == 1:
            return f"{t.minute} {t.hour} * * {cron_weekdays(days)}"
        byday = ",".join(RRULE_DAYS[d] for d in sorted(days))
        return f"RRULE:FREQ=WEEKLY;INTERVAL={rec.interval};BYDAY={byday};{at}"
    if isinstance(rec, MonthlyDays):
        days_text = ",".join(str(d) for d in rec.days)
        if rec.interval == 1 and -1 not in rec.days:
            return f"{t.minute} {t.hour} {days_text} * *"
        interval = f"INTERVAL={rec.interval};" if rec.interval > 1 else ""
        return f"RRULE:FREQ=MONTHLY;{interval}BYMONTHDAY={days_text};{at}"
    if isinstance(rec, MonthlyNth):
        return f"RRULE:FREQ=MONTHLY;BYDAY={rec.nth}{RRULE_DAYS[rec.weekday]};{at}"
    assert isinstance(rec, Yearly)
    return f"{t.minute} {t.hour} {rec.day} {rec.month} *"


def cron_weekdays(days: frozenset[int]) -> str:
    """Python weekdays to a cron day-of-week field, runs of three or more as ranges: 1-5."""
    if len(days) == 7:
        return "*"
    nums = sorted((d + 1) % 7 for d in days)
    parts: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(
            f"{start}-{prev}" if prev - start >= 2 else ",".join(map(str, range(start, prev + 1)))
        )
        if n is not None:
            start = prev = n
    return ",".join(parts)


def every_cron(rec: Every, field: str) -> str:
    """Clock-aligned intervals only: every 7 minutes cannot be a cron and is refused, not bent."""
    dow = "*" if rec.days is None else cron_weekdays(rec.days)
    m = rec.minutes
    if m < 60 and 60 % m == 0:
        return f"{'*' if m == 1 else f'*/{m}'} * * * {dow}"
    if m % 60 == 0 and 24 % (m // 60) == 0:
        h = m // 60
        hours = "*" if h == 1 else ("0" if h == 24 else f"*/{h}")
        return f"0 {hours} * * {dow}"
    if m > 1440:
        raise fail("interval_long", field, n=m)
    if m % 60 == 0:
        lower, upper = _around(m // 60, HOUR_STEPS)
        raise fail("interval_hours", field, n=m // 60, lower=lower, upper=upper)
    lower, upper = _around(m, MINUTE_STEPS)
    raise fail("interval_minutes", field, n=m, lower=lower, upper=upper)


def _around(n: int, steps: list[int]) -> tuple[int, int]:
    lower = max(s for s in steps if s < n)
    upper = min(s for s in steps if s > n)
    return lower, upper


# One-time ----------------------------------------------------------------------------------------

Roll = Callable[[date], date | None]


def one_time(spec: Spec, tod: TimeOfDay | None, now: datetime, zone: ZoneInfo) -> datetime:
    if spec.offset is not None:
        return _after_offset(spec, tod, now, zone)
    t = tod or DEFAULT_TIME
    day, roll = first_day(spec.date, now.date(), spec)
    for _ in range(800):  # bounded: 2月29日 rolls at most eight years
        wall = datetime.combine(day + timedelta(days=t.shift), time(t.hour, t.minute))
        instant = localize(wall, zone)
        if instant > now:
            return instant
        nxt = roll(day) if roll else None
        if nxt is None:
            # 今天 alone at 10:00: the day is right, only the default 09:00 has passed.
            raise fail("passed" if tod else "need_time", spec.matched)
        day = nxt
    raise fail("passed", spec.matched)


def _after_offset(spec: Spec, tod: TimeOfDay | None, now: datetime, zone: ZoneInfo) -> datetime:
    off = spec.offset
    assert off is not None
    if off.unit in ("minute", "hour"):
        if tod is not None:
            raise fail("conflict", _text(spec, "clock") if spec.clock else _text(spec, "daypart"))
        minutes = off.amount * (60 if off.unit == "hour" else 1)
        later = now.astimezone(UTC) + timedelta(minutes=minutes)
        return later.astimezone(zone).replace(microsecond=0)
    days = {"day": 1, "week": 7}.get(off.unit)
    base = (
        now.date() + timedelta(days=off.amount * days)
        if days
        else add_months(now.date(), off.amount)
    )
    if tod is None:
        return localize(datetime.combine(base, now.time().replace(microsecond=0)), zone)
    return localize(
        datetime.combine(base + timedelta(days=tod.shift), time(tod.hour, tod.minute)), zone
    )


def add_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def first_day(ref: DateRef | None, today: date, spec: Spec) -> tuple[date, Roll | None]:
    """The first candidate day for ``ref`` and how to move on if that day's time has passed."""
    monday = today - timedelta(days=today.weekday())
    if ref is None:
        return today, lambda d: d + timedelta(days=1)
    if isinstance(ref, RelativeDay):
        return today + timedelta(days=ref.days), None
    if isinstance(ref, WeekdayRef):
        if ref.week is None:
            ahead = (ref.weekday - today.weekday()) % 7
            return today + timedelta(days=ahead), lambda d: d + timedelta(days=7)
        return monday + timedelta(days=7 * ref.week + ref.weekday), None
    if isinstance(ref, WeekRef):
        return monday + timedelta(days=7 * ref.weeks), None
    if isinstance(ref, MonthRef):
        first = add_months(today.replace(day=1), ref.months)
        day = ref.day or 1
        if day > calendar.monthrange(first.year, first.month)[1]:
            raise fail("bad_date", _text(spec, "date"))
        return first.replace(day=day), None
    if isinstance(ref, AbsDate):
        return _abs_date(ref, today, spec)
    assert isinstance(ref, DayOfMonth)
    return _day_of_month(ref.day, today.replace(day=1)), lambda d: _day_of_month(
        ref.day, add_months(d.replace(day=1), 1)
    )


def _abs_date(ref: AbsDate, today: date, spec: Spec) -> tuple[date, Roll | None]:
    year = ref.year if ref.year is not None else today.year + (ref.year_offset or 0)
    if ref.year is not None or ref.year_offset is not None:
        try:
            return date(year, ref.month, ref.day), None
        except ValueError:
            raise fail("bad_date", _text(spec, "date")) from None

    def next_year(d: date) -> date | None:
        for y in range(d.year + 1, d.year + 9):
            if ref.day <= calendar.monthrange(y, ref.month)[1]:
                return date(y, ref.month, ref.day)
        return None

    if ref.day <= calendar.monthrange(year, ref.month)[1]:
        return date(year, ref.month, ref.day), next_year
    later = next_year(date(year, 1, 1))
    assert later is not None
    return later, next_year


def _day_of_month(day: int, month_start: date) -> date:
    """The first month from ``month_start`` that has ``day`` (31號 skips 30-day months)."""
    start = month_start
    while day > calendar.monthrange(start.year, start.month)[1]:
        start = add_months(start, 1)
    return start.replace(day=day)


def localize(wall: datetime, zone: ZoneInfo) -> datetime:
    """A wall time in ``zone`` under the schedule package's DST policy (a skipped time becomes
    the first instant after the gap, a repeated one its first occurrence), shown in ``zone``."""
    return resolve_local(wall, zone).astimezone(zone)
