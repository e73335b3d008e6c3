"""From a Spec to JobParams: the documented rules of time, in one place for every language.

- A daypart without an hour takes its default (早上/morning 08:00, 上午 09:00, 中午/noon 12:00,
  下午/afternoon 15:00, 傍晚 18:00, 晚上/evening/tonight 19:00); a day without any time 09:00.
- A bare hour is on the 24-hour clock (三點 = 03:00, "at 3" = 03:00); 下午/晚上/pm move it, and
  the confirmation says how a bare hour from 1 to 11 was read.
- 晚上十二點, 午夜 and "midnight" are 00:00 at the END of the named day.
- A one-time expression with no day that has already passed today means tomorrow; a named day
  (今天, 明天, 11月30日 2026) that has passed is an error; a bare weekday or month-day rolls on.
- Several times of day make one recurring job; a window (九點到五點) with a step lists its times,
  both ends included, and a bare end hour not after the start is in the afternoon (10 to 4).
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from onthedot.domain.models import JobParams
from onthedot.nl import holidays
from onthedot.nl.combine import Spec, fail
from onthedot.nl.parts import (
    AbsDate,
    Clock,
    Daily,
    DateRef,
    DayOfMonth,
    Daypart,
    Every,
    HolidayRef,
    MonthRef,
    NthWeekdayRef,
    Problem,
    Recurrence,
    RelativeDay,
    SlashDate,
    Slot,
    WeekdayRef,
    Weekly,
    WeekRef,
)
from onthedot.schedule import resolve_local


@dataclass(frozen=True)
class TimeOfDay:
    hour: int
    minute: int
    shift: int = 0  # 1 for midnight at the end of the named day


DEFAULT_TIME = TimeOfDay(9, 0)
ALL_DAYS = frozenset(range(7))
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
# English slash dates are day/month in these regions (10/6 is 10 June in London), else month/day.
_DAY_FIRST_PREFIXES = ("Europe/", "Africa/", "Australia/", "Atlantic/Reykjavik")
_DAY_FIRST_ZONES = {
    "Asia/Kolkata", "Asia/Calcutta", "Asia/Singapore", "Asia/Kuala_Lumpur", "Asia/Jakarta",
    "Asia/Bangkok", "Asia/Ho_Chi_Minh", "Asia/Dubai", "Asia/Karachi", "Asia/Dhaka",
    "Pacific/Auckland", "America/Sao_Paulo", "America/Argentina/Buenos_Aires",
    "America/Mexico_City", "America/Bogota", "America/Lima", "America/Santiago",
}  # fmt: skip


def to_params(
    spec: Spec, now: datetime, zone: ZoneInfo, tz: str
) -> tuple[JobParams, tuple[Problem, ...]]:
    """The job, and notes for the confirmation (how a bare hour was read)."""
    if spec.immediate:
        return JobParams(type="immediate", timezone=tz), ()
    local_now = now.astimezone(zone)
    _same_time_as_now(spec, local_now)
    times, notes = times_of_day(spec)
    if spec.count is not None:
        if not times and spec.window is None:
            raise fail("need_times", _text(spec, "count"))
        if len(set(times)) != spec.count:  # "twice a day at 8 and 8pm" is one time
            raise fail("count_mismatch", _text(spec, "count"), n=spec.count, given=len(set(times)))
    if spec.exclude:
        spec.recurrence = _without_days(spec)
    if spec.recurrence is not None:
        if spec.weekday_check is not None:
            raise fail("conflict", _text(spec, "date"))
        # Imported here: emit needs TimeOfDay and localize from this module.
        from onthedot.nl.emit import recurring

        schedule = recurring(spec, times, local_now, zone, tz)
        return JobParams(type="recurring", schedule=schedule, timezone=tz), notes
    if spec.window is not None:
        if times:
            raise fail("conflict", _text(spec, "window"))
        times = window_times(spec, step_seconds=None)[:1]  # 明天兩點到三點開會: at its start
    if len(times) > 1:
        raise fail("several_times", spec.slot_texts[1])
    instant = one_time(spec, times[0] if times else None, local_now, zone)
    params = JobParams(type="one-time", time=instant.isoformat(timespec="seconds"), timezone=tz)
    return params, notes


def _same_time_as_now(spec: Spec, now: datetime) -> None:
    """"this time tomorrow", 明天這個時候: the clock of the request, on the day said. Without a day
    it would be now itself (or tomorrow): refused."""
    for index, slot in enumerate(spec.slots):
        if slot.clock is None or not slot.clock.same_as_now:
            continue
        if spec.recurrence is None and spec.date is None and spec.offset is None:
            raise fail("same_time_day", spec.slot_texts[index])
        # On the 12-hour clock with its half of the day: exact, so never read as a bare hour.
        meridiem: Literal["am", "pm"] = "am" if now.hour < 12 else "pm"
        spec.slots[index] = Slot(Clock(now.hour % 12 or 12, now.minute, meridiem))


def _without_days(spec: Spec) -> Recurrence:
    """The recurrence less the weekdays an exception names ("daily at 7 except weekends",
    週六週日除外); an exception that cannot be taken out of it is refused, never dropped."""
    rec, gone = spec.recurrence, spec.exclude
    field = spec.exclude_text
    if isinstance(rec, Daily) and rec.interval == 1:
        days = ALL_DAYS - gone
        rec = Weekly(days)
    elif isinstance(rec, Weekly) and rec.interval == 1:
        days = rec.days - gone
        rec = Weekly(days)
    elif isinstance(rec, Every):
        days = (rec.days if rec.days is not None else ALL_DAYS) - gone
        rec = Every(rec.seconds, days)
    else:
        raise fail("exception", field)
    if not days:
        raise fail("exception_all", field)
    return rec


def _text(spec: Spec, name: str) -> str:
    for p in spec.pieces:
        if getattr(p, name) is not None:
            return p.text
    return spec.matched


def times_of_day(spec: Spec) -> tuple[list[TimeOfDay], tuple[Problem, ...]]:
    """Each slot's time; a slot with no part of the day takes the previous slot's when its hour
    fits it (晚上八點和十點 = 20:00 and 22:00). A bare hour not after the time before it is the
    afternoon's or evening's when that puts it after ("twice a day at 9 and 6" = 09:00 and
    18:00), and a note says so."""
    times: list[TimeOfDay] = []
    notes: list[Problem] = []
    previous: Daypart | None = None
    for slot, text in zip(spec.slots, spec.slot_texts, strict=True):
        tod, bare = slot_time(slot, text, previous)
        clock = slot.clock
        if bare and clock is not None and 1 <= clock.hour <= 11:
            before = times[-1] if times and not times[-1].shift else None
            # Not after the time before it: "at 9 and 6", "at 8 and 8" (twice the same is
            # not what anyone means).
            if before is not None and _minute(tod) <= _minute(before) < _minute(tod) + 720:
                notes.append(_evening_note(clock.hour, clock.minute, before))
                tod = TimeOfDay(tod.hour + 12, tod.minute)
            else:
                notes.append(_bare_note(clock.hour, clock.minute))
        times.append(tod)
        previous = slot.daypart or previous
    unique = sorted(set(times), key=lambda t: (t.shift, t.hour, t.minute))
    return unique if len(unique) > 1 else times, tuple(dict.fromkeys(notes))


def _minute(t: TimeOfDay) -> int:
    return t.hour * 60 + t.minute


def _evening_note(hour: int, minute: int, before: TimeOfDay) -> Problem:
    said = f"{hour}" if minute == 0 else f"{hour}:{minute:02d}"
    params = (
        ("said", said), ("as", f"{hour + 12}:{minute:02d}"), ("am", f"{hour:02d}:{minute:02d}"),
        ("after", f"{before.hour:02d}:{before.minute:02d}"),
    )
    return Problem("evening_hour", said, params)


def _bare_note(hour: int, minute: int) -> Problem:
    said = f"{hour}" if minute == 0 else f"{hour}:{minute:02d}"
    params = (
        ("said", said), ("as", f"{hour:02d}:{minute:02d}"), ("pm", f"{hour + 12}:{minute:02d}"),
    )
    return Problem("bare_hour", said, params)


def slot_time(slot: Slot, field: str, inherit: Daypart | None) -> tuple[TimeOfDay, bool]:
    """The time of one slot, and whether it was a bare hour read on the 24-hour clock."""
    clock, part = slot.clock, slot.daypart
    if clock is None:
        if part is None:
            return DEFAULT_TIME, False
        if part is Daypart.EARLY:
            raise fail("need_hour", field)
        return DAYPART_DEFAULTS[part], False
    if clock.end_of_day:
        if part not in (None, Daypart.EVENING, Daypart.MIDNIGHT):
            raise fail("conflict", field)
        return TimeOfDay(0, 0, 1), False
    if clock.meridiem is not None:
        if (clock.meridiem == "am" and part in _PM_PARTS) or (
            clock.meridiem == "pm" and part in _AM_PARTS
        ):
            raise fail("conflict", field)
        hour = clock.hour % 12 + (12 if clock.meridiem == "pm" else 0)
        return TimeOfDay(hour, clock.minute), False
    if part is None and inherit is not None:
        inherited = _hour_in(inherit, clock.hour)
        if inherited is not None and inherited < 24:
            return TimeOfDay(inherited, clock.minute), False
    read = _hour_in(part, clock.hour)
    if read is None:
        raise fail("bad_hour" if clock.hour > 23 else "hour_daypart", field)
    hour = read
    return TimeOfDay(hour % 24, clock.minute, 1 if hour >= 24 else 0), part is None


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


def window_times(spec: Spec, step_seconds: int | None) -> list[TimeOfDay]:
    """The times from a window's start to its end, both included, ``step_seconds`` apart (just
    the start when there is no step). "10 to 4": a bare end hour not after the start is pm."""
    assert spec.window is not None
    field = _text(spec, "window")
    first, last = spec.window
    start, start_bare = slot_time(first, field, None)
    end, end_bare = slot_time(last, field, first.daypart)
    if start.shift or end.shift:
        raise fail("unparsed", field)
    begin, finish = start.hour * 60 + start.minute, end.hour * 60 + end.minute
    pm_end = last.clock is not None and last.clock.meridiem == "pm"
    if start_bare and pm_end and start.hour < 12 and begin + 12 * 60 < finish:
        begin += 12 * 60  # "from 2 to 4pm": the pm of the end covers the start
        start = TimeOfDay(start.hour + 12, start.minute)
    if end_bare and finish <= begin and end.hour < 12:
        finish += 12 * 60
    if finish <= begin:
        raise fail("window_order", field)
    if step_seconds is None:
        return [start]
    if step_seconds % 60:
        raise fail("unparsed", field)
    step = step_seconds // 60
    return [TimeOfDay(m // 60, m % 60) for m in range(begin, finish + 1, step)]


# One-time ----------------------------------------------------------------------------------------

Roll = Callable[[date], date | None]


def one_time(spec: Spec, tod: TimeOfDay | None, now: datetime, zone: ZoneInfo) -> datetime:
    if spec.offset is not None:
        return _after_offset(spec, tod, now, zone)
    t = tod or DEFAULT_TIME
    day, roll = first_day(spec.date, now.date(), spec, zone)
    for _ in range(800):  # bounded: 2月29日 rolls at most eight years
        wall = datetime.combine(day + timedelta(days=t.shift), time(t.hour, t.minute))
        instant = localize(wall, zone)
        if instant > now:
            _check_weekday(spec, day)
            return instant
        nxt = roll(day) if roll else None
        if nxt is None:
            # 今天 alone at 10:00: the day is right, only the default 09:00 has passed.
            raise fail("passed" if tod else "need_time", spec.matched)
        day = nxt
    raise fail("passed", spec.matched)


def _check_weekday(spec: Spec, day: date) -> None:
    """"Tue, Oct 6": said with a date, a weekday must be that date's; never one or the other."""
    if spec.weekday_check is not None and day.weekday() != spec.weekday_check:
        field = next((p.text for p in spec.pieces if p.date == spec.date), spec.matched)
        raise fail("wrong_weekday", field, day=day.isoformat())


def _after_offset(spec: Spec, tod: TimeOfDay | None, now: datetime, zone: ZoneInfo) -> datetime:
    off = spec.offset
    assert off is not None
    if off.unit in ("minute", "hour"):
        if tod is not None:
            raise fail("conflict", spec.slot_texts[0] if spec.slot_texts else spec.matched)
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


def first_day(
    ref: DateRef | None, today: date, spec: Spec, zone: ZoneInfo
) -> tuple[date, Roll | None]:
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
        last = calendar.monthrange(first.year, first.month)[1]
        day = last if ref.day == -1 else (ref.day or 1)
        if day > last:
            raise fail("bad_date", _text(spec, "date"))
        return first.replace(day=day), None
    if isinstance(ref, SlashDate):
        return _abs_date(slash_date(ref, zone, spec), today, spec)
    if isinstance(ref, AbsDate):
        return _abs_date(ref, today, spec)
    if isinstance(ref, NthWeekdayRef):
        return _nth_weekday(ref, today, spec)
    if isinstance(ref, HolidayRef):
        return _holiday(ref.holiday, today, spec)
    assert isinstance(ref, DayOfMonth)
    return _day_of_month(ref.day, today.replace(day=1)), lambda d: _day_of_month(
        ref.day, add_months(d.replace(day=1), 1)
    )


def slash_date(ref: SlashDate, zone: ZoneInfo, spec: Spec) -> AbsDate:
    """10/6: month/day, but day/month where the region writes it so (see _DAY_FIRST_*); a part
    above 12 can only be the day, whatever the region."""
    key = zone.key
    day_first = key.startswith(_DAY_FIRST_PREFIXES) or key in _DAY_FIRST_ZONES
    month, day = (ref.second, ref.first) if day_first else (ref.first, ref.second)
    if month > 12 and day <= 12:
        month, day = day, month
    year = ref.year
    if year is not None and year < 100:
        year += 2000
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(2024, month)[1]:
        raise fail("bad_date", _text(spec, "date"))
    return AbsDate(month, day, year)


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


def _nth_weekday(ref: NthWeekdayRef, today: date, spec: Spec) -> tuple[date, Roll | None]:
    def in_month(year: int, month: int) -> date:
        found = holidays.nth_weekday(year, month, ref.nth, ref.weekday)
        if found is None:  # the fifth Monday of a month that has four
            raise fail("bad_date", _text(spec, "date"))
        return found

    if ref.months_ahead is not None:
        first = add_months(today.replace(day=1), ref.months_ahead)
        return in_month(first.year, first.month), None
    assert ref.month is not None
    month = ref.month
    if ref.year_offset is not None:
        return in_month(today.year + ref.year_offset, month), None
    this_year = in_month(today.year, month)
    if this_year >= today:
        return this_year, lambda d: in_month(d.year + 1, month)
    return in_month(today.year + 1, month), lambda d: in_month(d.year + 1, month)


def _holiday(key: str, today: date, spec: Spec) -> tuple[date, Roll | None]:
    def on_or_after(start: date) -> date | None:
        for day in holidays.days_from(key, start.year, start.year + 2):
            if day >= start:
                return day
        return None

    first = on_or_after(today)
    if first is None:
        raise fail("holiday_range", _text(spec, "date"))
    return first, lambda d: on_or_after(d + timedelta(days=1))


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

