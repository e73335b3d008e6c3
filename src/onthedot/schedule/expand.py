"""Expanding one recurrence rule with bounded work: its occurrences (naive wall times) from a point.

python-dateutil, asked for the next occurrence, walks period after period until one matches -
up to year 9999 when none ever does. That costs seconds of CPU for a rule that never matches
(``FREQ=YEARLY;BYWEEKNO=53;BYMONTH=6``) and half a minute for one that matches every few years
(``FREQ=MINUTELY;INTERVAL=7;BYMONTH=2;BYMONTHDAY=29;BYHOUR=0;BYMINUTE=1``), and one step of a
SECONDLY rule can loop over a whole day of seconds. None of that can be interrupted. So:

* WEEKLY, DAILY, HOURLY, MINUTELY and SECONDLY rules, whose RFC 5545 meaning is simple, are
  expanded here: the days that pass the day filters (BYMONTH, BYMONTHDAY, BYYEARDAY, BYDAY),
  then their times; a visited period (week, day, hour, minute, second) starts INTERVAL periods
  after the previous one, counted from DTSTART's; BYSETPOS picks among one period's candidates.
  Every loop here is a budget step.
* MONTHLY and YEARLY rules (BYWEEKNO, numbered BYDAY, negative BYMONTHDAY and BYYEARDAY,
  BYSETPOS over a month or a year) are left to dateutil, but only where it cannot walk far: a
  *dense* rule, whose every visited period holds an occurrence (``FREQ=MONTHLY;BYDAY=-1FR``,
  ``FREQ=YEARLY;BYMONTH=6;BYMONTHDAY=22``), is expanded in one go - the next occurrence is never
  more than two periods away; any other is expanded one period at a time (dateutil with an
  INTERVAL so large that it stops after one period).

A walk ends when no occurrence comes within the *horizon*: max(50 years, 60 INTERVAL periods)
after the previous occurrence or the lookup point. A rule with longer gaps is treated as ended
there, so every lookup, of every schedule, is bounded.

Re-basing: dateutil's ``after()`` starts at DTSTART, so a job created years ago would pay for
every past occurrence. Because specs are explicit (``make_spec``), an expansion may instead start
at the beginning of any period the rule visits (aligned with INTERVAL) and, without BYSETPOS
(which counts from the start of its period), right at the lookup point.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import MAXYEAR, date, datetime, time, timedelta
from itertools import islice
from math import gcd
from zoneinfo import ZoneInfo

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, SECONDLY, WEEKLY, YEARLY, rrule

from onthedot.schedule.ical import invalid
from onthedot.schedule.limits import Budget, current_budget
from onthedot.schedule.local import resolve_local
from onthedot.schedule.rrule import (
    RuleParts,
    RuleSpec,
    build_rrule,
    day_may_match,
    max_per_period,
    times_of_day,
)

HORIZON_YEARS = 50  # no lookup walks further than this past the previous occurrence...
MIN_PERIODS = 60  # ...or than this many INTERVAL periods, whichever is further
_UNIT_SECONDS = {HOURLY: 3600, MINUTELY: 60, SECONDLY: 1}
# An INTERVAL that puts dateutil's next period past year 9999, so it stops after the first.
_ONE_PERIOD_INTERVAL = {YEARLY: MAXYEAR, MONTHLY: 12 * MAXYEAR}
_ONE_MICROSECOND = timedelta(microseconds=1)
_DAY_SECONDS = 86400
PERIOD_STEPS = 50  # budget steps one dateutil expansion of a MONTHLY/YEARLY period counts for

Walk = Callable[[RuleSpec, datetime, Budget], Iterator[datetime]]


def rule_walls_after(spec: RuleSpec, tz: ZoneInfo, wall: datetime) -> Iterator[datetime]:
    """Occurrences (naive wall times in ``tz``) of one rule strictly after ``wall``, increasing,
    within the horizon, under the active budget."""
    try:
        begin = wall + _ONE_MICROSECOND
    except OverflowError:
        return
    if spec.until_wall is not None and begin > spec.until_wall:
        return  # the rule has ended (UNTIL, or the last occurrence COUNT allows)
    for occurrence in walls_from(spec, begin, current_budget()):
        if spec.until_wall is not None and occurrence > spec.until_wall:
            return
        if spec.until_instant is not None and _instant_after(occurrence, tz, spec):
            return
        yield occurrence


def _instant_after(occurrence: datetime, tz: ZoneInfo, spec: RuleSpec) -> bool:
    assert spec.until_instant is not None
    try:
        return resolve_local(occurrence, tz) > spec.until_instant
    except OverflowError:  # past year 9999 in UTC: past any UNTIL too
        return True


def walls_from(spec: RuleSpec, begin: datetime, budget: Budget) -> Iterator[datetime]:
    """Occurrences at or after ``begin``, increasing; UNTIL is left to the caller."""
    p = spec.parts
    if not can_select(p) or not times_reachable(p, spec.dtstart):
        return
    walk: Walk
    if p.freq in (YEARLY, MONTHLY):
        walk = _continuous if is_dense(p) else _by_period
    elif p.freq == WEEKLY:
        walk = _by_week
    else:
        walk = _by_day
    try:
        yield from walk(spec, begin, budget)
    except OverflowError:  # the next period would start after year 9999
        return


# --- which MONTHLY/YEARLY rules dateutil may expand in one go -------------------------------------


@functools.lru_cache(maxsize=1024)
def is_dense(p: RuleParts) -> bool:
    """MONTHLY/YEARLY: True when every period the rule visits holds an occurrence, so that
    dateutil, asked for the next one, never walks more than two periods. Decided from the parts
    alone; it errs towards False, which only costs speed."""
    if p.byweekno or (p.freq == MONTHLY and p.bymonth):
        return False
    day_parts = [part for part in (p.bymonthday, p.byweekday, p.byyearday) if part]
    if len(day_parts) != 1 or (p.byyearday and p.bymonth):
        return False
    days = _days_in_every_period(p)
    if days == 0:
        return False
    return not p.bysetpos or min(abs(pos) for pos in p.bysetpos) <= days * len(times_of_day(p))


def _days_in_every_period(p: RuleParts) -> int:
    """A lower bound of the days matching the (one) day part in every month or year the rule
    visits: every month has days 1-28, every year days 1-365, four of each weekday a month and
    52 a year."""
    if p.bymonthday:
        return _count_within(p.bymonthday, 28)
    if p.byyearday:
        return _count_within(p.byyearday, 365)
    per_month = p.freq == MONTHLY or bool(p.bymonth)
    limit = 4 if per_month else 52
    plain = sum(1 for _, n in p.byweekday if n == 0)
    if plain:
        return plain * limit
    return 1 if any(abs(n) <= limit for _, n in p.byweekday) else 0


def _count_within(values: tuple[int, ...], limit: int) -> int:
    # Counted from the start and from the end separately: day 1 and day -28 can be one day.
    return max(sum(1 for v in values if 0 < v <= limit), sum(1 for v in values if -limit <= v < 0))


def can_select(p: RuleParts) -> bool:
    """False when BYSETPOS asks for a position no period can have."""
    return not p.bysetpos or min(abs(pos) for pos in p.bysetpos) <= max_per_period(p)


@functools.lru_cache(maxsize=1024)
def times_reachable(p: RuleParts, dtstart: datetime) -> bool:
    """HOURLY/MINUTELY/SECONDLY: False when stepping INTERVAL units from DTSTART never lands on
    an hour, minute or second the BYxxx parts allow (dateutil would fail or spin)."""
    if p.freq < HOURLY:
        return True
    unit = _UNIT_SECONDS[p.freq]
    # Period starts are DTSTART's plus multiples of the step; within a day they repeat with the
    # step's greatest common divisor with a day.
    step = gcd(p.interval * unit, _DAY_SECONDS)
    base = (dtstart.hour * 3600 + dtstart.minute * 60 + dtstart.second) // unit * unit
    allowed = _AllowedPeriods(p)
    seconds = {second % step for second in allowed.seconds}
    return any(
        (base - hour * 3600 - minute * 60) % step in seconds
        for hour in allowed.hours
        for minute in allowed.minutes
    )


# --- walks ---------------------------------------------------------------------------------------


def _continuous(spec: RuleSpec, begin: datetime, budget: Budget) -> Iterator[datetime]:
    """A dense MONTHLY/YEARLY rule: dateutil from the period that holds ``begin``."""
    monthly = spec.parts.freq == MONTHLY
    period: tuple[int, int] | None = None
    for occurrence in _rrule_at(spec, _first_start(spec, begin)):
        # A new period is dateutil setting up its tables again (see PERIOD_STEPS).
        reached = (occurrence.year, occurrence.month if monthly else 0)
        budget.check(PERIOD_STEPS if reached != period else 1)
        period = reached
        if occurrence >= begin:
            yield occurrence


class _Horizon:
    """How far a walk looks: the horizon after the latest occurrence found (or the lookup
    point), recomputed only when the walk gets there."""

    __slots__ = ("_latest", "_p", "_stale", "limit")

    def __init__(self, p: RuleParts, begin: datetime) -> None:
        self._p = p
        self._latest = begin
        self._stale = False
        self.limit = horizon(p, begin)

    def found(self, occurrence: datetime) -> None:
        self._latest = occurrence
        self._stale = True

    def passed(self, value: datetime) -> bool:
        if value <= self.limit:
            return False
        if self._stale:
            self.limit = horizon(self._p, self._latest)
            self._stale = False
        return value > self.limit


def _by_period(spec: RuleSpec, begin: datetime, budget: Budget) -> Iterator[datetime]:
    """MONTHLY/YEARLY that is not dense: one dateutil expansion per visited period."""
    start = _first_start(spec, begin)
    horizon = _Horizon(spec.parts, begin)
    interval = _ONE_PERIOD_INTERVAL[spec.parts.freq]
    while not horizon.passed(start):
        # dateutil sets up a whole year's tables for each period: about fifty steps of CPU.
        budget.check(PERIOD_STEPS)
        for occurrence in _rrule_at(spec, start, interval):
            budget.check()
            if occurrence >= begin:
                horizon.found(occurrence)
                yield occurrence
        start = periods_later(spec.parts, start, 1)


def _by_week(spec: RuleSpec, begin: datetime, budget: Budget) -> Iterator[datetime]:
    """WEEKLY: the weeks the rule visits, expanded here one by one (with BYMONTH a week may be
    empty, so dateutil could walk far)."""
    start = aligned_start(spec, begin)
    horizon = _Horizon(spec.parts, begin)
    lower = max(begin, spec.dtstart)
    while not horizon.passed(start):
        budget.check()
        for occurrence in _week(spec.parts, start, lower):
            budget.check()
            horizon.found(occurrence)
            yield occurrence
        start = periods_later(spec.parts, start, 1)


def _week(p: RuleParts, start: datetime, lower: datetime) -> Iterator[datetime]:
    """One week's occurrences at or after ``lower``, as dateutil defines them: the week runs
    from ``start`` (DTSTART in the first week, else the WKST day) to the next WKST day; BYSETPOS
    counts among its days that pass BYDAY and BYMONTH times the times of day, in order."""
    weekdays = {wd for wd, _ in p.byweekday}
    days: list[date] = []
    day = start.date()
    for _ in range(7):
        if day.weekday() in weekdays and (not p.bymonth or day.month in p.bymonth):
            days.append(day)
        if day == date.max:
            break
        day += timedelta(days=1)
        if day.weekday() == p.wkst:
            break
    times = times_of_day(p)
    if p.bysetpos:
        total = len(days) * len(times)
        for i in _positions(p.bysetpos, total):
            occurrence = datetime.combine(days[i // len(times)], times[i % len(times)])
            if occurrence >= lower:
                yield occurrence
        return
    for day in days:
        if day >= lower.date():
            yield from _at_or_after(day, times, lower)


def _by_day(spec: RuleSpec, begin: datetime, budget: Budget) -> Iterator[datetime]:
    """DAILY and shorter: the days that pass the day filters, then each day's times."""
    p = spec.parts
    lower = max(begin, spec.dtstart)
    horizon = _Horizon(p, begin)
    expand_day = _daily_times(spec) if p.freq == DAILY else _sub_daily_times(spec, budget)
    day = lower.date()
    while True:
        found = _next_matching_day(spec, day, horizon, budget)
        if found is None:
            return
        for occurrence in expand_day(found, lower):
            horizon.found(occurrence)
            yield occurrence
        day = found + timedelta(days=1)


def _next_matching_day(
    spec: RuleSpec, day: date, horizon: _Horizon, budget: Budget
) -> date | None:
    """The first day from ``day`` within the horizon that DAILY's INTERVAL visits and the day
    filters allow (exactly: DAILY and shorter have no numbered weekdays and no BYWEEKNO)."""
    p = spec.parts
    step = p.interval if p.freq == DAILY else 1
    origin = spec.dtstart.date()
    while True:
        budget.check()
        if step > 1:
            day += timedelta(days=(origin - day).days % step)
        if horizon.passed(datetime.combine(day, time())):
            return None
        if p.bymonth and day.month not in p.bymonth:
            day = _next_month(day)
        elif day_may_match(p, day):
            return day
        else:
            day += timedelta(days=step)


def _next_month(day: date) -> date:
    if day.year == MAXYEAR and day.month == 12:
        raise OverflowError("past year 9999")
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


DayTimes = Callable[[date, datetime], Iterator[datetime]]


def _daily_times(spec: RuleSpec) -> DayTimes:
    """A DAILY rule's occurrences on a day it visits: its times of day, BYSETPOS among them."""
    p = spec.parts
    times = times_of_day(p)
    if p.bysetpos:
        times = tuple(times[i] for i in _positions(p.bysetpos, len(times)))

    def expand(day: date, lower: datetime) -> Iterator[datetime]:
        return _at_or_after(day, times, lower)

    return expand


def _sub_daily_times(spec: RuleSpec, budget: Budget) -> DayTimes:
    """HOURLY/MINUTELY/SECONDLY occurrences on one day, as dateutil defines them: the periods
    (hours, minutes, seconds) start at DTSTART's, INTERVAL units apart; a period counts when its
    hour (and minute, and second) is allowed; its candidates are the BYMINUTE x BYSECOND times
    of the hour, the BYSECOND seconds of the minute, or the second itself; BYSETPOS picks among
    them. Walks whichever is shorter: the visited periods of the day or the allowed ones."""
    p = spec.parts
    unit = _UNIT_SECONDS[p.freq]
    step = p.interval * unit
    origin = _epoch_seconds(period_floor(p, spec.dtstart))
    allowed = _AllowedPeriods(p)
    walk_visited = -(-_DAY_SECONDS // step) <= allowed.count
    pattern = _period_pattern(p)

    def expand(day: date, lower: datetime) -> Iterator[datetime]:
        day_start = day.toordinal() * _DAY_SECONDS
        first = 0
        if day == lower.date():
            first = (lower.hour * 3600 + lower.minute * 60 + lower.second) // unit * unit
        if walk_visited:
            at = max(day_start + first, origin)
            at += (origin - at) % step
            while at < day_start + _DAY_SECONDS:
                budget.check()
                if allowed.contains(at - day_start):
                    yield from _period_walls(day, at - day_start, pattern, lower)
                at += step
            return
        for second in allowed.starting_at(first):
            budget.check()
            at = day_start + second
            if at >= origin and (at - origin) % step == 0:
                yield from _period_walls(day, second, pattern, lower)

    return expand


def _positions(bysetpos: tuple[int, ...], total: int) -> list[int]:
    """The indexes BYSETPOS picks among ``total`` candidates, in order, each once."""
    picks = {pos - 1 if pos > 0 else total + pos for pos in bysetpos}
    return sorted(i for i in picks if 0 <= i < total)


def _at_or_after(day: date, times: Sequence[time], lower: datetime) -> Iterator[datetime]:
    first = bisect_left(times, lower.time()) if day == lower.date() else 0
    for t in islice(times, first, None):
        yield datetime.combine(day, t)


@functools.lru_cache(maxsize=128)
def _period_pattern(p: RuleParts) -> tuple[int, ...]:
    """Where in each sub-daily period its candidates fall, in seconds from the period's start
    (the same for every period), BYSETPOS applied: BYMINUTE x BYSECOND for HOURLY, BYSECOND for
    MINUTELY, the second itself for SECONDLY."""
    if p.freq == HOURLY:
        offsets = tuple(m * 60 + s for m in p.byminute for s in p.bysecond)
    elif p.freq == MINUTELY:
        offsets = p.bysecond
    else:
        offsets = (0,)
    if p.bysetpos:
        offsets = tuple(offsets[i] for i in _positions(p.bysetpos, len(offsets)))
    return offsets


def _period_walls(
    day: date, period_start: int, pattern: tuple[int, ...], lower: datetime
) -> Iterator[datetime]:
    """The candidates of the period starting ``period_start`` seconds into ``day`` that are at
    or after ``lower``."""
    first = 0
    if day == lower.date():
        lower_second = lower.hour * 3600 + lower.minute * 60 + lower.second
        lower_second += 1 if lower.microsecond else 0
        first = bisect_left(pattern, lower_second - period_start)
    for offset in islice(pattern, first, None):
        hour, rest = divmod(period_start + offset, 3600)
        yield datetime.combine(day, time(hour, *divmod(rest, 60)))


class _AllowedPeriods:
    """The seconds of the day at which a period that BYHOUR/BYMINUTE/BYSECOND allow starts,
    without listing them (a SECONDLY rule may allow all 86400)."""

    def __init__(self, p: RuleParts) -> None:
        every = range(60)
        self.hours = tuple(p.byhour or range(24))
        self.minutes = tuple(p.byminute or every) if p.freq >= MINUTELY else (0,)
        self.seconds = tuple(p.bysecond or every) if p.freq == SECONDLY else (0,)
        self._sets = (frozenset(self.hours), frozenset(self.minutes), frozenset(self.seconds))
        self.count = len(self.hours) * len(self.minutes) * len(self.seconds)

    def contains(self, second_of_day: int) -> bool:
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        hours, minutes, seconds = self._sets
        return hour in hours and minute in minutes and second in seconds

    def starting_at(self, first: int) -> Iterator[int]:
        """The allowed period starts at or after ``first``, in order."""
        for hour in self.hours:
            for minute in self.minutes:
                base = hour * 3600 + minute * 60
                if base + 59 < first:
                    continue
                for second in self.seconds:
                    if base + second >= first:
                        yield base + second


def _epoch_seconds(value: datetime) -> int:
    return value.toordinal() * _DAY_SECONDS + value.hour * 3600 + value.minute * 60 + value.second


# --- periods -------------------------------------------------------------------------------------


def period_floor(p: RuleParts, value: datetime) -> datetime:
    """The start of the period (of the rule's frequency) that holds ``value``."""
    if p.freq == YEARLY:
        return datetime(value.year, 1, 1)
    if p.freq == MONTHLY:
        return datetime(value.year, value.month, 1)
    if p.freq == WEEKLY:
        return datetime.combine(_week_start(value.date(), p.wkst), time())
    if p.freq == DAILY:
        return datetime.combine(value.date(), time())
    unit = _UNIT_SECONDS[p.freq]
    seconds = value.minute * 60 + value.second
    return value.replace(microsecond=0) - timedelta(seconds=seconds % unit)


def periods_later(p: RuleParts, value: datetime, n: int) -> datetime:
    """The start of the period ``n`` * INTERVAL periods after the one holding ``value``;
    OverflowError past year 9999."""
    step = n * p.interval
    floor = period_floor(p, value)
    if p.freq in (YEARLY, MONTHLY):
        months = step * 12 if p.freq == YEARLY else step
        year, month0 = divmod(floor.year * 12 + floor.month - 1 + months, 12)
        if year > MAXYEAR:
            raise OverflowError("past year 9999")
        return datetime(year, month0 + 1, 1)
    if p.freq == WEEKLY:
        return floor + timedelta(weeks=step)
    if p.freq == DAILY:
        return floor + timedelta(days=step)
    return floor + timedelta(seconds=step * _UNIT_SECONDS[p.freq])


def aligned_start(spec: RuleSpec, target: datetime) -> datetime:
    """The start of the latest period at or before ``target`` that the rule visits (its index
    from DTSTART's period is a multiple of INTERVAL); DTSTART itself when that is DTSTART's
    period. Expanding from there yields exactly the rule's occurrences from that point on."""
    p = spec.parts
    k = p.interval
    origin = spec.dtstart
    if target <= origin:
        return origin
    try:
        if p.freq == YEARLY:
            start = datetime(origin.year + (target.year - origin.year) // k * k, 1, 1)
        elif p.freq == MONTHLY:
            months = (target.year - origin.year) * 12 + target.month - origin.month
            year, month0 = divmod(origin.year * 12 + origin.month - 1 + months // k * k, 12)
            start = datetime(year, month0 + 1, 1)
        elif p.freq == WEEKLY:
            week0 = _week_start(origin.date(), p.wkst)
            weeks = (_week_start(target.date(), p.wkst) - week0).days // 7
            start = datetime.combine(week0 + timedelta(weeks=weeks // k * k), time())
        elif p.freq == DAILY:
            days = (target.date() - origin.date()).days
            start = datetime.combine(origin.date() + timedelta(days=days // k * k), time())
        else:
            unit = _UNIT_SECONDS[p.freq]
            floor = period_floor(p, origin)
            steps = int((target - floor).total_seconds()) // unit // k
            start = floor + timedelta(seconds=steps * k * unit)
    except (OverflowError, ValueError):
        return origin
    return start if start > origin else origin


def _first_start(spec: RuleSpec, begin: datetime) -> datetime:
    """Where an expansion must start to yield every occurrence at or after ``begin``."""
    start = aligned_start(spec, begin)
    if begin <= start or spec.parts.bysetpos:
        return start  # BYSETPOS positions count from the start of the period
    if period_floor(spec.parts, start) == period_floor(spec.parts, begin):
        return begin  # inside a visited period: nothing before begin needs expanding
    return periods_later(spec.parts, start, 1)  # between visited periods: the next one


def horizon(p: RuleParts, value: datetime) -> datetime:
    """How far a walk looks past ``value`` for the next occurrence: a period (a day for DAILY
    and shorter) that starts later is not searched."""
    try:
        by_periods = periods_later(p, value, MIN_PERIODS)
    except OverflowError:
        return datetime.max
    if value.year + HORIZON_YEARS > MAXYEAR:
        return datetime.max
    by_years = datetime(value.year + HORIZON_YEARS, value.month, 1)
    return max(by_years, by_periods)


def _week_start(day: date, wkst: int) -> date:
    return day - timedelta(days=(day.weekday() - wkst) % 7)


def _rrule_at(spec: RuleSpec, start: datetime, interval: int | None = None) -> rrule:
    if start == spec.dtstart or start == period_floor(spec.parts, start):
        return _cached_rrule(spec, start, interval)
    return build_rrule(spec, start, interval=interval)  # a lookup point: not worth caching


@functools.lru_cache(maxsize=4096)
def _cached_rrule(spec: RuleSpec, start: datetime, interval: int | None) -> rrule:
    return build_rrule(spec, start, interval=interval)


# --- whole-rule questions ------------------------------------------------------------------------


def check_can_occur(spec: RuleSpec) -> None:
    """Refuse a rule that has no occurrence within the horizon after DTSTART (ignoring COUNT and
    UNTIL, which only end a rule)."""
    p = spec.parts
    if not can_select(p):
        raise invalid(
            f"BYSETPOS={','.join(map(str, p.bysetpos))} can never select an occurrence: "
            "each period has fewer candidates",
            "BYSETPOS values no larger than the number of candidates per period",
        )
    if not times_reachable(p, spec.dtstart):
        raise invalid(
            f"INTERVAL={p.interval} steps from DTSTART never reach an allowed hour, minute or "
            "second",
            "an INTERVAL and BYHOUR/BYMINUTE/BYSECOND that meet",
        )
    pattern = replace(spec, parts=replace(p, count=None), until_wall=None, until_instant=None)
    if next(walls_from(pattern, spec.dtstart, current_budget()), None) is None:
        raise invalid(
            f"the rule never matches a real date within {HORIZON_YEARS} years "
            "(for example BYMONTHDAY=30 never happens in February)",
            "BYxxx parts that some real date satisfies",
        )


def expand_count(spec: RuleSpec) -> RuleSpec:
    """Replace COUNT by the UNTIL it implies, so the rule can be re-based like any other."""
    count = spec.parts.count
    if count is None:
        return spec
    uncounted = replace(spec, parts=replace(spec.parts, count=None))
    last: datetime | None = None
    for last in islice(walls_from(uncounted, spec.dtstart, current_budget()), count):  # noqa: B007
        pass
    if last is None:  # no occurrence at all: an UNTIL before DTSTART keeps the rule empty
        try:
            last = spec.dtstart - timedelta(seconds=1)
        except OverflowError:
            last = datetime.min
    return replace(uncounted, until_wall=last)
