"""The schedule text of a recurring Spec: cron where cron can say it, else RFC 5545 rules.

- Cron (``30 21 * * 1,3,5``, ``0 12,18 * * *``) when the times of day are one hours x minutes grid
  and the days are every day, weekdays, days of the month or one date a year.
- ``RRULE:`` lines otherwise, one per group of times that share their hours (7:30 and 22:00 are
  two rules); every rule carries BYHOUR, BYMINUTE and BYSECOND=0.
- A rule counted from the job's creation (the schedule package's implicit DTSTART) for an
  interval with nothing to align it to: every 3 days, every 2 weeks, every 40 minutes.
- An explicit ``DTSTART;TZID=...`` when the first run must be the coming matching day: every
  other Monday, fortnightly on Friday, every 3 months on the 1st.
- ``DTSTART`` plus ``RDATE`` for yearly days no rule can state (lunar dates, Easter): the dates
  are listed up to the end of the lunar table (2099).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from onthedot.nl import holidays
from onthedot.nl.combine import Spec, fail
from onthedot.nl.parts import (
    Anchored,
    Daily,
    Every,
    MonthlyDays,
    MonthlyNth,
    MonthlyWorkday,
    Recurrence,
    Weekly,
    Yearly,
    YearlyComputed,
    YearlyDates,
    YearlyNth,
)
from onthedot.nl.resolve import DEFAULT_TIME, TimeOfDay, localize, window_times
from onthedot.schedule.limits import MAX_DATES, MAX_RULES

RRULE_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
WORKDAYS = "MO,TU,WE,TH,FR"
_SEARCH_DAYS = 800  # the coming matching day of a rule is within two years and a bit


def recurring(spec: Spec, times: list[TimeOfDay], now: datetime, zone: ZoneInfo, tz: str) -> str:
    rec = spec.recurrence
    assert rec is not None
    if isinstance(rec, Every):
        if spec.window is None:
            if times:
                raise fail("interval_time", spec.slot_texts[0])
            return every_schedule(rec)
        if times:
            raise fail("conflict", spec.slot_texts[0])
        times = window_times(spec, rec.seconds)
        days = Weekly(rec.days) if rec.days is not None else Daily()
        return _on_days(days, times, Where(now, zone, tz, _text(spec)))
    if spec.window is not None:
        raise fail("need_step", _text(spec))
    if isinstance(rec, Anchored) and rec.unit == "year":  # 每年 with no date to complete it
        raise fail("need_date", next(p.text for p in spec.pieces if p.recurrence == rec))
    field = spec.slot_texts[0] if spec.slot_texts else spec.matched
    if spec.start is not None:
        counted = isinstance(rec, Weekly | MonthlyDays) and rec.interval > 1
        if not counted:  # a start of any other rule is a bound: not read, never dropped
            raise fail("unparsed", spec.start_text)
        field = spec.start_text
    if isinstance(rec, YearlyDates):  # too many rules: blame the dates, not the time
        field = spec.matched
    return _on_days(rec, times or [DEFAULT_TIME], Where(now, zone, tz, field, spec.start))


def _text(spec: Spec) -> str:
    for p in spec.pieces:
        if p.window is not None:
            return p.text
    return spec.matched


@dataclass(frozen=True)
class Where:
    """What a rule needs besides the recurrence: the local now, the zone and the text to blame."""

    now: datetime
    zone: ZoneInfo
    tz: str
    field: str
    start: date | None = None  # said: "starting 2026-12-04"


def _on_days(rec: Recurrence, times: list[TimeOfDay], at: Where) -> str:
    tz = at.tz
    shifted = any(t.shift for t in times)
    if shifted and (
        not isinstance(rec, Daily | Weekly) or (isinstance(rec, Weekly) and len(times) > 1)
    ):
        raise fail("midnight_day", at.field)
    if isinstance(rec, Daily):
        if rec.interval == 1:
            return _cron_or_rules("FREQ=DAILY", times, "*", "*", "*")
        return _rules(f"FREQ=DAILY;INTERVAL={rec.interval}", times)
    if isinstance(rec, Weekly):
        days = frozenset((d + times[0].shift) % 7 for d in rec.days)
        byday = ",".join(RRULE_DAYS[d] for d in sorted(days))
        if rec.interval == 1:
            dow = cron_weekdays(days)
            return _cron_or_rules(f"FREQ=WEEKLY;BYDAY={byday}", times, "*", "*", dow)
        start = _first_day(lambda d: d.weekday() in days, times, at)
        return _rules(f"FREQ=WEEKLY;INTERVAL={rec.interval};BYDAY={byday}", times, start, tz)
    if isinstance(rec, MonthlyDays):
        return _monthly_days(rec, times, at)
    if isinstance(rec, MonthlyNth):
        return _rules(f"FREQ=MONTHLY;BYDAY={rec.nth}{RRULE_DAYS[rec.weekday]}", times)
    if isinstance(rec, MonthlyWorkday):
        # BYSETPOS picks among all of a month's occurrences, times of day included: one rule
        # per time, so that the last working day at 9 and 18 is not just its 18:00.
        by_month = f"BYMONTH={','.join(map(str, rec.months))};" if rec.months else ""
        base = f"FREQ=MONTHLY;{by_month}BYDAY={WORKDAYS};BYSETPOS={rec.nth}"
        ordered = sorted(times, key=lambda t: (t.hour, t.minute))
        return "\n".join(_rules(base, [t]) for t in ordered)
    if isinstance(rec, Yearly):
        return _cron_or_rules(
            f"FREQ=YEARLY;BYMONTH={rec.month};BYMONTHDAY={rec.day}",
            times, str(rec.day), str(rec.month), "*",
        )  # fmt: skip
    if isinstance(rec, YearlyDates):  # one rule per date: cron would cross days with months
        lines = [_rules(f"FREQ=YEARLY;BYMONTH={m};BYMONTHDAY={d}", times) for m, d in rec.dates]
        if len(lines) * len(_groups(times)) > MAX_RULES:
            raise fail("yearly_days", at.field, limit=MAX_RULES)
        return "\n".join(lines)
    if isinstance(rec, YearlyNth):
        return _rules(f"FREQ=YEARLY;BYMONTH={rec.month};BYDAY={rec.nth}{RRULE_DAYS[rec.weekday]}",
                      times)
    if isinstance(rec, YearlyComputed):
        return _listed(rec.holiday, times, at)
    assert isinstance(rec, Anchored)
    assert rec.unit != "year"  # refused in recurring(): there is no date
    if rec.unit == "week":
        return _rules(f"FREQ=WEEKLY;INTERVAL={rec.interval}", times)
    day = at.now.day
    if day <= 28:
        return _rules(f"FREQ=MONTHLY;INTERVAL={rec.interval}", times)
    # Said on the 31st, "every 3 months" falls on the last day of shorter months (not skipped,
    # as a plain BYMONTHDAY=31 would): the last of days 28..31 that the month has. BYSETPOS
    # picks among all times of a period, so each time of day gets its own rule.
    last_days = ",".join(str(d) for d in range(28, day + 1))
    base = f"FREQ=MONTHLY;INTERVAL={rec.interval};BYMONTHDAY={last_days};BYSETPOS=-1"
    return "\n".join(_rules(base, [t]) for t in sorted(times, key=lambda t: (t.hour, t.minute)))


def _monthly_days(rec: MonthlyDays, times: list[TimeOfDay], at: Where) -> str:
    days_text = ",".join(str(d) for d in rec.days)
    months_text = ",".join(str(m) for m in rec.months)
    by_month = f"BYMONTH={months_text};" if rec.months else ""
    base = f"FREQ=MONTHLY;{by_month}BYMONTHDAY={days_text}"
    if rec.interval == 1:
        if any(d < 0 for d in rec.days):  # counted from the month's end: cron cannot say it
            return _rules(base, times)
        return _cron_or_rules(base, times, days_text, months_text or "*", "*")

    def matches(d: date) -> bool:
        last = (d.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
        in_month = not rec.months or d.month in rec.months
        return in_month and (d.day in rec.days or d.day - last.day - 1 in rec.days)

    start = _first_day(matches, times, at)
    base = f"FREQ=MONTHLY;INTERVAL={rec.interval};{by_month}BYMONTHDAY={days_text}"
    return _rules(base, times, start, at.tz)


def _first_day(matches: Callable[[date], bool], times: list[TimeOfDay], at: Where) -> datetime:
    """The coming day the rule matches with a time still ahead, at its first time: the DTSTART
    that makes "every other Monday" start this Monday, not in a fortnight."""
    now, zone = at.now, at.zone
    earliest = min(times, key=lambda t: (t.hour, t.minute))
    if at.start is not None:  # said: it must be a day of the rule
        if not matches(at.start):
            raise fail("conflict", at.field)
        return datetime.combine(at.start, time(earliest.hour, earliest.minute))
    day = now.date()
    for _ in range(_SEARCH_DAYS):
        if matches(day) and any(
            localize(datetime.combine(day, time(t.hour, t.minute)), zone) > now for t in times
        ):
            return datetime.combine(day, time(earliest.hour, earliest.minute))
        day += timedelta(days=1)
    raise fail("bad_date", at.field)


def _groups(times: list[TimeOfDay]) -> list[tuple[list[int], list[int]]]:
    """Times as (hours, minutes) grids: {7:30, 22:00} is two, {9:00, 9:30, 10:00, 10:30} one."""
    by_minute: dict[int, set[int]] = {}
    for t in times:
        by_minute.setdefault(t.minute, set()).add(t.hour)
    grids: dict[frozenset[int], list[int]] = {}
    for minute, hours in sorted(by_minute.items()):
        grids.setdefault(frozenset(hours), []).append(minute)
    groups = [(sorted(hours), minutes) for hours, minutes in grids.items()]
    if len(groups) > MAX_RULES:
        raise fail("too_many_times", "", n=len(times))
    return sorted(groups, key=lambda g: (g[0][0], g[1][0]))


def _cron_or_rules(base: str, times: list[TimeOfDay], dom: str, month: str, dow: str) -> str:
    groups = _groups(times)
    if len(groups) == 1:
        hours, minutes = groups[0]
        return f"{cron_list(minutes)} {cron_list(hours)} {dom} {month} {dow}"
    return _rules(base, times)


def _rules(
    base: str, times: list[TimeOfDay], start: datetime | None = None, tz: str = ""
) -> str:
    lines = [
        f"RRULE:{base};BYHOUR={','.join(map(str, h))};BYMINUTE={','.join(map(str, m))};BYSECOND=0"
        for h, m in _groups(times)
    ]
    if start is not None:
        lines.insert(0, f"DTSTART;TZID={tz}:{start:%Y%m%dT%H%M%S}")
    return "\n".join(lines)


def _listed(key: str, times: list[TimeOfDay], at: Where) -> str:
    """A yearly day from a table (lunar dates, Easter) as DTSTART plus RDATE values."""
    now, tz, zone = at.now, at.tz, at.zone
    walls: list[datetime] = []
    for day in holidays.days_from(key, now.year, holidays.LUNAR_LAST_YEAR):
        for t in sorted(times, key=lambda t: (t.hour, t.minute)):
            wall = datetime.combine(day + timedelta(days=t.shift), time(t.hour, t.minute))
            if localize(wall, zone) > now:
                walls.append(wall)
    walls = walls[:MAX_DATES]
    if not walls:
        raise fail("holiday_range", at.field)
    values = ",".join(f"{w:%Y%m%dT%H%M%S}" for w in walls)
    # The schedule package counts only RDATEs when there is no RRULE, so DTSTART is one of them.
    return f"DTSTART;TZID={tz}:{walls[0]:%Y%m%dT%H%M%S}\nRDATE;TZID={tz}:{values}"


def every_schedule(rec: Every) -> str:
    """On the clock when the interval divides it (cron), else counted from creation (RRULE)."""
    dow = "*" if rec.days is None else cron_weekdays(rec.days)
    seconds = rec.seconds
    if seconds % 60 == 0:
        m = seconds // 60
        if m < 60 and 60 % m == 0:
            return f"{'*' if m == 1 else f'*/{m}'} * * * {dow}"
        if m % 60 == 0 and 24 % (m // 60) == 0:
            h = m // 60
            hours = "*" if h == 1 else ("0" if h == 24 else f"*/{h}")
            return f"0 {hours} * * {dow}"
    byday = ""
    if rec.days is not None:
        byday = ";BYDAY=" + ",".join(RRULE_DAYS[d] for d in sorted(rec.days))
    if seconds % 3600 == 0:
        return f"RRULE:FREQ=HOURLY;INTERVAL={seconds // 3600}{byday}"
    if seconds % 60 == 0:
        return f"RRULE:FREQ=MINUTELY;INTERVAL={seconds // 60}{byday}"
    return f"RRULE:FREQ=SECONDLY;INTERVAL={seconds}{byday}"


def cron_list(values: list[int]) -> str:
    """Sorted numbers as a cron list, runs of three or more as ranges: 9-17, 0,30."""
    parts: list[str] = []
    start = prev = values[0]
    for n in [*values[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(
            f"{start}-{prev}" if prev - start >= 2 else ",".join(map(str, range(start, prev + 1)))
        )
        if n is not None:
            start = prev = n
    return ",".join(parts)


def cron_weekdays(days: frozenset[int]) -> str:
    """Python weekdays to a cron day-of-week field, runs of three or more as ranges: 1-5."""
    if len(days) == 7:
        return "*"
    return cron_list(sorted((d + 1) % 7 for d in days))
