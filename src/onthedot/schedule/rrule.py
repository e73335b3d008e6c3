"""RFC 5545 recurrence rules, expanded by python-dateutil over naive wall times.

dateutil's ``rrule.after()`` walks the recurrence from DTSTART every time, so a job created years
ago would pay for every past occurrence on each lookup. Instead each rule is first made explicit
(every default that RFC 5545 derives from DTSTART - BYHOUR, BYMINUTE, BYSECOND, BYDAY for weekly,
BYMONTHDAY for monthly and yearly - is written out) and COUNT is replaced by the UNTIL it implies.
Such a rule depends on its DTSTART only through the *phase* of INTERVAL, so a lookup can start the
expansion at the beginning of the latest period, aligned with INTERVAL, that does not follow the
lookup point. The re-based rules are cached, keyed by that period start.

dateutil keeps looking for a match until year 9999 when a rule matches nothing (for example
``FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30`` spins for seconds). Compilation therefore refuses a rule
that cannot match within 50 years, using a conservative day-by-day check, and a BYSETPOS that
can never select anything.
"""

from __future__ import annotations

import calendar
import functools
import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import MAXYEAR, UTC, date, datetime, time, timedelta
from itertools import count as counter
from typing import Any, Literal
from zoneinfo import ZoneInfo

from dateutil.rrule import (
    DAILY,
    FR,
    HOURLY,
    MINUTELY,
    MO,
    MONTHLY,
    SA,
    SECONDLY,
    SU,
    TH,
    TU,
    WE,
    WEEKLY,
    YEARLY,
    rrule,
    weekday,
)

from onthedot.schedule.base import WallClockSchedule
from onthedot.schedule.ical import (
    SCHEDULE_FIELD,
    CalDateTime,
    invalid,
    parse_cal_datetime,
    parse_calendar_text,
)
from onthedot.schedule.local import load_timezone, resolve_local, wall_time

Freq = Literal[0, 1, 2, 3, 4, 5, 6]

FREQUENCIES: dict[str, Freq] = {
    "YEARLY": YEARLY,
    "MONTHLY": MONTHLY,
    "WEEKLY": WEEKLY,
    "DAILY": DAILY,
    "HOURLY": HOURLY,
    "MINUTELY": MINUTELY,
    "SECONDLY": SECONDLY,
}
WEEKDAY_NAMES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_WEEKDAYS: tuple[weekday, ...] = (MO, TU, WE, TH, FR, SA, SU)

MAX_COUNT = 100_000  # COUNT is expanded once at compile time; this bounds that work
HORIZON_YEARS = 50  # a rule with no match this far ahead is treated as never matching
_MIN_PERIODS = 60  # ...but always look at least this many INTERVAL steps ahead
_UNIT_SECONDS = {HOURLY: 3600, MINUTELY: 60, SECONDLY: 1}

RRULE_EXPECTED = (
    'an RFC 5545 rule such as "RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=8;BYMINUTE=0" '
    "(parts: FREQ, INTERVAL, COUNT, UNTIL, WKST, BYSECOND, BYMINUTE, BYHOUR, BYDAY, BYMONTHDAY, "
    "BYYEARDAY, BYWEEKNO, BYMONTH, BYSETPOS)"
)

# Part name -> (smallest, largest) allowed value; zero is never allowed where negatives are.
_INT_LIST_PARTS: dict[str, tuple[int, int]] = {
    "BYSECOND": (0, 59),
    "BYMINUTE": (0, 59),
    "BYHOUR": (0, 23),
    "BYMONTHDAY": (-31, 31),
    "BYYEARDAY": (-366, 366),
    "BYWEEKNO": (-53, 53),
    "BYMONTH": (1, 12),
    "BYSETPOS": (-366, 366),
}


@dataclass(frozen=True)
class RuleParts:
    """An RRULE value as written; an empty tuple means the part is absent."""

    freq: Freq
    interval: int = 1
    count: int | None = None
    until: CalDateTime | None = None
    wkst: int = 0
    bysetpos: tuple[int, ...] = ()
    bymonth: tuple[int, ...] = ()
    bymonthday: tuple[int, ...] = ()
    byyearday: tuple[int, ...] = ()
    byweekno: tuple[int, ...] = ()
    byweekday: tuple[tuple[int, int], ...] = ()  # (weekday 0=MO, n); n == 0 means every one
    byhour: tuple[int, ...] = ()
    byminute: tuple[int, ...] = ()
    bysecond: tuple[int, ...] = ()


@dataclass(frozen=True)
class RuleSpec:
    """A rule with every DTSTART-derived default written out, ready to re-base.

    ``until_wall`` bounds the dateutil expansion (wall time); ``until_instant`` is an exact UTC
    bound from a ``Z`` UNTIL, checked on resolved instants because a wall time inside a repeated
    hour does not say which of its two instants the UNTIL meant.
    """

    parts: RuleParts
    dtstart: datetime
    until_wall: datetime | None = None
    until_instant: datetime | None = None


def parse_rule(value: str) -> RuleParts:
    """Parse an RRULE value (``FREQ=...;...``, a leading ``RRULE:`` is allowed)."""
    text = value.strip()
    if text.upper().startswith("RRULE:"):
        text = text[len("RRULE:") :]
    seen: dict[str, str] = {}
    for item in text.strip().strip(";").split(";"):
        name, sep, part_value = item.partition("=")
        name = name.strip().upper()
        if not sep or not name:
            raise invalid(f"cannot read the rule part {item!r} in {value!r}", RRULE_EXPECTED)
        if name in seen:
            raise invalid(f"{name} appears twice in {value!r}", RRULE_EXPECTED)
        seen[name] = part_value.strip()
    if "FREQ" not in seen:
        raise invalid(f"the rule {value!r} has no FREQ", RRULE_EXPECTED)
    freq = FREQUENCIES.get(seen.pop("FREQ").upper())
    if freq is None:
        raise invalid(f"unknown FREQ in {value!r}", "FREQ=" + "|".join(FREQUENCIES))
    parts = RuleParts(freq=freq)
    for name, raw in seen.items():
        parts = _with_part(parts, name, raw)
    _check_rfc_combinations(parts)
    return parts


def _with_part(parts: RuleParts, name: str, raw: str) -> RuleParts:
    upper = raw.upper()
    if name == "INTERVAL":
        return replace(parts, interval=_positive_int(name, raw))
    if name == "COUNT":
        count = _positive_int(name, raw)
        if count > MAX_COUNT:
            raise invalid(f"COUNT={count} is too large", f"COUNT between 1 and {MAX_COUNT}")
        return replace(parts, count=count)
    if name == "UNTIL":
        return replace(parts, until=parse_cal_datetime(raw, what="UNTIL"))
    if name == "WKST":
        if upper not in WEEKDAY_NAMES:
            raise invalid(f"WKST={raw} is not a weekday", "WKST=MO|TU|WE|TH|FR|SA|SU")
        return replace(parts, wkst=WEEKDAY_NAMES.index(upper))
    if name == "BYDAY":
        return replace(parts, byweekday=tuple(_weekday_item(item) for item in upper.split(",")))
    bounds = _INT_LIST_PARTS.get(name)
    if bounds is None:
        raise invalid(f"unsupported rule part {name}", RRULE_EXPECTED)
    low, high = bounds
    values: list[int] = []
    for item in raw.split(","):
        try:
            number = int(item)
        except ValueError:
            number = low - 1
        if not low <= number <= high or (low < 0 and number == 0):
            raise invalid(
                f"{name}={raw} is out of range", f"{name} values between {low} and {high}"
            )
        values.append(number)
    changes: dict[str, Any] = {name.lower(): tuple(sorted(set(values)))}
    return replace(parts, **changes)


def _positive_int(name: str, raw: str) -> int:
    try:
        number = int(raw)
    except ValueError:
        number = 0
    if number < 1:
        raise invalid(f"{name}={raw} is not a positive integer", f"{name}=1 or more")
    return number


def _weekday_item(item: str) -> tuple[int, int]:
    text = item.strip()
    name = text[-2:]
    ordinal = text[:-2]
    try:
        n = int(ordinal) if ordinal else 0
    except ValueError:
        n = 0
        name = "?"
    if name not in WEEKDAY_NAMES or (ordinal and not 1 <= abs(n) <= 53):
        raise invalid(f"BYDAY item {item!r} is not a weekday", "BYDAY like MO,WE,FR or 1MO or -1FR")
    return WEEKDAY_NAMES.index(name), n


def _check_rfc_combinations(parts: RuleParts) -> None:
    """Refuse combinations RFC 5545 forbids; dateutil would quietly give them another meaning."""
    freq = parts.freq
    if parts.count is not None and parts.until is not None:
        raise invalid("COUNT and UNTIL cannot both be given", "either COUNT or UNTIL")
    if parts.byweekno and freq != YEARLY:
        raise invalid("BYWEEKNO is only allowed with FREQ=YEARLY", RRULE_EXPECTED)
    if parts.byyearday and freq in (MONTHLY, WEEKLY, DAILY):
        raise invalid("BYYEARDAY is not allowed with FREQ=MONTHLY, WEEKLY or DAILY", RRULE_EXPECTED)
    if parts.bymonthday and freq == WEEKLY:
        raise invalid("BYMONTHDAY is not allowed with FREQ=WEEKLY", RRULE_EXPECTED)
    if any(n for _, n in parts.byweekday) and (freq not in (MONTHLY, YEARLY) or parts.byweekno):
        raise invalid(
            "numbered BYDAY items (like 1MO) need FREQ=MONTHLY or FREQ=YEARLY without BYWEEKNO",
            RRULE_EXPECTED,
        )


def make_spec(parts: RuleParts, dtstart: datetime, tz: ZoneInfo) -> RuleSpec:
    """Write out the DTSTART-derived defaults of ``parts`` (as dateutil would derive them) and
    turn UNTIL into bounds; COUNT is still in ``parts`` (see :func:`expand_count`)."""
    explicit = parts
    if not (parts.byweekno or parts.byyearday or parts.bymonthday or parts.byweekday):
        if parts.freq == YEARLY:
            explicit = replace(
                explicit, bymonth=parts.bymonth or (dtstart.month,), bymonthday=(dtstart.day,)
            )
        elif parts.freq == MONTHLY:
            explicit = replace(explicit, bymonthday=(dtstart.day,))
        elif parts.freq == WEEKLY:
            explicit = replace(explicit, byweekday=((dtstart.weekday(), 0),))
    if not parts.byhour and parts.freq < HOURLY:
        explicit = replace(explicit, byhour=(dtstart.hour,))
    if not parts.byminute and parts.freq < MINUTELY:
        explicit = replace(explicit, byminute=(dtstart.minute,))
    if not parts.bysecond and parts.freq < SECONDLY:
        explicit = replace(explicit, bysecond=(dtstart.second,))
    explicit = replace(explicit, until=None)

    until_wall: datetime | None = None
    until_instant: datetime | None = None
    until = parts.until
    if until is not None:
        if until.is_utc:
            until_instant = until.value.replace(tzinfo=UTC)
            # Loose wall bound so dateutil stops; no DST shift is larger than a day.
            until_wall = _add_days(wall_time(until_instant, tz), 2)
        elif until.is_date:
            # A date means "up to and including that day", whatever the time of day of DTSTART.
            until_wall = datetime.combine(until.value.date(), time(23, 59, 59))
        else:
            until_wall = until.value
    return RuleSpec(explicit, dtstart, until_wall=until_wall, until_instant=until_instant)


def _add_days(value: datetime, days: int) -> datetime:
    try:
        return value + timedelta(days=days)
    except OverflowError:
        return datetime.max


def build_rrule(spec: RuleSpec, start: datetime, *, count: int | None = None) -> rrule:
    """The dateutil rule for ``spec`` expanded from ``start`` (DTSTART or a period start)."""
    p = spec.parts
    byweekday = [_WEEKDAYS[wd](n) if n else _WEEKDAYS[wd] for wd, n in p.byweekday]
    return rrule(
        p.freq,
        dtstart=start,
        interval=p.interval,
        wkst=p.wkst,
        count=count,
        until=None if count is not None else spec.until_wall,
        bysetpos=p.bysetpos or None,
        bymonth=p.bymonth or None,
        bymonthday=p.bymonthday or None,
        byyearday=p.byyearday or None,
        byweekno=p.byweekno or None,
        byweekday=byweekday or None,
        byhour=p.byhour or None,
        byminute=p.byminute or None,
        bysecond=p.bysecond or None,
    )


def expand_count(spec: RuleSpec) -> RuleSpec:
    """Replace COUNT by the UNTIL it implies, so the rule can be re-based like any other."""
    if spec.parts.count is None:
        return spec
    last = deque(build_rrule(spec, spec.dtstart, count=spec.parts.count), maxlen=1)
    # No occurrence at all: an UNTIL before DTSTART keeps the rule empty.
    until_wall = last[0] if last else spec.dtstart - timedelta(seconds=1)
    return replace(spec, parts=replace(spec.parts, count=None), until_wall=until_wall)


# --- re-basing -----------------------------------------------------------------------------------


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
            steps = (target.year - origin.year) // k
            start = datetime(origin.year + steps * k, 1, 1)
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
            floor = _floor(origin, unit)
            steps = int((target - floor).total_seconds()) // unit // k
            start = floor + timedelta(seconds=steps * k * unit)
    except (OverflowError, ValueError):
        return origin
    return start if start > origin else origin


def _week_start(day: date, wkst: int) -> date:
    return day - timedelta(days=(day.weekday() - wkst) % 7)


def _floor(value: datetime, unit: int) -> datetime:
    if unit == 3600:
        return value.replace(minute=0, second=0, microsecond=0)
    if unit == 60:
        return value.replace(second=0, microsecond=0)
    return value.replace(microsecond=0)


@functools.lru_cache(maxsize=4096)
def _cached_rrule(spec: RuleSpec, start: datetime) -> rrule:
    return build_rrule(spec, start)


def rule_walls_after(spec: RuleSpec, tz: ZoneInfo, wall: datetime) -> Iterator[datetime]:
    """Occurrences (naive wall times) of one rule strictly after ``wall``, increasing."""
    for occurrence in _cached_rrule(spec, aligned_start(spec, wall)):
        if occurrence <= wall:
            continue
        if spec.until_instant is not None and resolve_local(occurrence, tz) > spec.until_instant:
            return
        yield occurrence


# --- "can this rule ever match?" -----------------------------------------------------------------


def check_can_occur(spec: RuleSpec) -> None:
    """Refuse a rule dateutil would search for until year 9999 (see the module docstring)."""
    if spec.parts.bysetpos and min(abs(pos) for pos in spec.parts.bysetpos) > _max_per_period(
        spec.parts
    ):
        raise invalid(
            f"BYSETPOS={','.join(map(str, spec.parts.bysetpos))} can never select an occurrence: "
            "each period has fewer candidates",
            "BYSETPOS values no larger than the number of candidates per period",
        )
    if not _may_occur_within_horizon(spec):
        raise invalid(
            f"the rule never matches a real date within {HORIZON_YEARS} years "
            "(for example BYMONTHDAY=30 never happens in February)",
            "BYxxx parts that some real date satisfies",
        )


def _max_per_period(p: RuleParts) -> int:
    """An upper bound of the candidates one period of the rule can hold (BYSETPOS picks among
    them). Only ever too large, never too small, so no valid rule is refused."""
    seconds = len(p.bysecond or range(60))
    minutes = len(p.byminute or range(60))
    times = len(p.byhour or range(24)) * minutes * seconds
    # Sub-daily periods are one hour, minute or second long.
    sub_daily = {DAILY: times, HOURLY: minutes * seconds, MINUTELY: seconds, SECONDLY: 1}
    if p.freq >= DAILY:
        return sub_daily[p.freq]
    plain = sum(1 for _, n in p.byweekday if n == 0)
    numbered = len(p.byweekday) - plain
    months = len(p.bymonth) if p.bymonth else 12
    if p.freq == WEEKLY:
        days = plain or 7
    elif p.freq == MONTHLY:
        days = 31
        if p.byweekday:
            days = min(days, 5 * plain + numbered)
        if p.bymonthday:
            days = min(days, len(p.bymonthday))
    else:
        days = 366 if not p.bymonth else 31 * months
        if p.byweekday:
            days = min(days, 53 * plain + numbered * (months if p.bymonth else 1))
        if p.bymonthday:
            days = min(days, months * len(p.bymonthday))
        if p.byyearday:
            days = min(days, len(p.byyearday))
        if p.byweekno:
            days = min(days, 7 * len(p.byweekno))
    return days * times


def _day_may_match(p: RuleParts, day: date) -> bool:
    """Day-level BYxxx filters, over-approximated: numbered weekdays count as plain weekdays and
    BYWEEKNO/BYSETPOS are ignored, so this is True on every day the rule really matches."""
    if p.bymonth and day.month not in p.bymonth:
        return False
    if p.byweekday and day.weekday() not in {wd for wd, _ in p.byweekday}:
        return False
    if p.bymonthday:
        month_length = calendar.monthrange(day.year, day.month)[1]
        if day.day not in p.bymonthday and day.day - month_length - 1 not in p.bymonthday:
            return False
    if p.byyearday:
        year_length = 366 if calendar.isleap(day.year) else 365
        yday = day.timetuple().tm_yday
        if yday not in p.byyearday and yday - year_length - 1 not in p.byyearday:
            return False
    return True


def _period_days(p: RuleParts, origin: datetime, j: int) -> list[date]:
    """The days of the ``j``-th period the rule visits (period index ``j * INTERVAL``)."""
    k = p.interval
    if p.freq == YEARLY:
        year = origin.year + j * k
        first = date(year, 1, 1)
        return [first + timedelta(days=i) for i in range(366 if calendar.isleap(year) else 365)]
    if p.freq == MONTHLY:
        year, month0 = divmod(origin.year * 12 + origin.month - 1 + j * k, 12)
        length = calendar.monthrange(year, month0 + 1)[1]
        return [date(year, month0 + 1, d) for d in range(1, length + 1)]
    if p.freq == WEEKLY:
        start = _week_start(origin.date(), p.wkst) + timedelta(weeks=j * k)
        return [start + timedelta(days=i) for i in range(7)]
    return [origin.date() + timedelta(days=j * k)]


def _may_occur_within_horizon(spec: RuleSpec) -> bool:
    p = spec.parts
    origin = spec.dtstart
    last_year = min(origin.year + HORIZON_YEARS, MAXYEAR)
    if p.freq >= HOURLY:
        return _sub_daily_may_occur(p, origin, last_year)
    for j in counter():
        try:
            days = _period_days(p, origin, j)
        except (OverflowError, ValueError):
            return False
        if days[0].year > last_year and j >= _MIN_PERIODS:
            return False
        if any(day >= origin.date() and _day_may_match(p, day) for day in days):
            return True
    return False  # pragma: no cover - the loop only ends by returning


def _sub_daily_may_occur(p: RuleParts, origin: datetime, last_year: int) -> bool:
    """HOURLY/MINUTELY/SECONDLY: a day may match when some allowed time of day on it is a
    multiple of INTERVAL units away from DTSTART."""
    unit = _UNIT_SECONDS[p.freq]
    step = p.interval * unit
    # The INTERVAL phase applies to the start of each hour/minute/second the rule visits.
    seconds_of_day = {
        (h * 3600 + m * 60 + s) // unit * unit
        for h in (p.byhour or range(24))
        for m in (p.byminute or range(60))
        for s in (p.bysecond or range(60))
    }
    base = _floor(origin, unit)
    base_abs = base.toordinal() * 86400 + base.hour * 3600 + base.minute * 60 + base.second
    if step >= 86400:
        # At most one visit a day: walk the visits themselves.
        for j in counter():
            visit = base_abs + j * step
            try:
                day = date.fromordinal(visit // 86400)
            except (OverflowError, ValueError):
                return False
            if day.year > last_year and j >= _MIN_PERIODS:
                return False
            if visit % 86400 in seconds_of_day and _day_may_match(p, day):
                return True
    residues = {s % step for s in seconds_of_day}
    day = origin.date()
    while day.year <= last_year:
        if (base_abs - day.toordinal() * 86400) % step in residues and _day_may_match(p, day):
            return True
        try:
            day += timedelta(days=1)
        except OverflowError:
            return False
    return False


# --- the schedule --------------------------------------------------------------------------------


class RRuleSchedule(WallClockSchedule):
    """RRULEs plus RDATEs minus EXDATEs, as wall times in one timezone (RFC 5545 semantics)."""

    def __init__(
        self,
        tz: ZoneInfo,
        rules: Sequence[RuleSpec],
        *,
        rdates: Iterable[datetime] = (),
        exdates: Iterable[datetime] = (),
        exdate_days: Iterable[date] = (),
    ) -> None:
        super().__init__(tz)
        self.rules = tuple(rules)
        self.rdates = tuple(sorted(set(rdates)))
        self.exdates = frozenset(exdates)
        self.exdate_days = frozenset(exdate_days)

    def walls_after(self, wall: datetime) -> Iterator[datetime]:
        streams: list[Iterator[datetime]] = [
            rule_walls_after(spec, self.tz, wall) for spec in self.rules
        ]
        if self.rdates:
            streams.append(iter(self.rdates[bisect_right(self.rdates, wall) :]))
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams)
        previous: datetime | None = None
        for occurrence in merged:
            if occurrence == previous:
                continue
            previous = occurrence
            if occurrence in self.exdates or occurrence.date() in self.exdate_days:
                continue
            yield occurrence

    def __repr__(self) -> str:
        return f"RRuleSchedule(rules={len(self.rules)}, tz={self.tz.key!r})"


def compile_rrule(text: str, tz: ZoneInfo, anchor_wall: datetime) -> RRuleSchedule:
    """Compile a bare rule, VEVENT or DTSTART/RRULE text.

    ``tz`` is the job's timezone and ``anchor_wall`` the job's creation time truncated to the
    minute in it: the DTSTART used when the text has none, so one job always compiles alike.
    """
    cal = parse_calendar_text(text)
    dtstart, event_tz = _event_start(cal.dtstart, tz, anchor_wall)
    specs: list[RuleSpec] = []
    for value in cal.rrules:
        spec = make_spec(parse_rule(value), dtstart, event_tz)
        try:
            check_can_occur(spec)
            specs.append(expand_count(spec))
            build_rrule(specs[-1], dtstart)  # dateutil's own checks (e.g. empty BYHOUR sets)
        except ValueError as exc:  # raised by dateutil itself
            raise invalid(f"the rule {value!r} cannot be used: {exc}", RRULE_EXPECTED) from exc
    rdates = [_to_event_wall(item, event_tz, dtstart) for item in cal.rdates]
    exdates = [_to_event_wall(item, event_tz, dtstart) for item in cal.exdates if not item.is_date]
    exdate_days = [item.value.date() for item in cal.exdates if item.is_date]
    return RRuleSchedule(event_tz, specs, rdates=rdates, exdates=exdates, exdate_days=exdate_days)


def _event_start(
    dtstart: CalDateTime | None, tz: ZoneInfo, anchor_wall: datetime
) -> tuple[datetime, ZoneInfo]:
    """DTSTART as a wall time and the zone the rule runs in: a TZID overrides the job's zone and
    a UTC DTSTART makes the rule run in UTC (RFC 5545)."""
    if dtstart is None:
        return anchor_wall, tz
    if dtstart.is_utc:
        return dtstart.value, ZoneInfo("UTC")
    if dtstart.tzid is not None:
        return dtstart.value, load_timezone(dtstart.tzid, field=SCHEDULE_FIELD)
    return dtstart.value, tz


def _to_event_wall(item: CalDateTime, event_tz: ZoneInfo, dtstart: datetime) -> datetime:
    """An RDATE/EXDATE as a wall time of the event's zone, for matching against occurrences."""
    if item.is_date:
        return datetime.combine(item.value.date(), dtstart.time())
    if item.is_utc:
        return wall_time(item.value.replace(tzinfo=UTC), event_tz)
    if item.tzid is not None:
        zone = load_timezone(item.tzid, field=SCHEDULE_FIELD)
        if zone.key != event_tz.key:
            return wall_time(resolve_local(item.value, zone), event_tz)
    return item.value
