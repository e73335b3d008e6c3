"""RFC 5545 recurrence rules: reading an RRULE value and making its defaults explicit.

A rule is read into :class:`RuleParts` (refusing what RFC 5545 forbids, which dateutil would
quietly reinterpret) and then into a :class:`RuleSpec`: every default that RFC 5545 derives from
DTSTART - BYHOUR, BYMINUTE, BYSECOND, BYDAY for weekly, BYMONTHDAY for monthly and yearly - is
written out, so the rule depends on DTSTART only through the phase of INTERVAL. Expanding a spec
with bounded work is ``onthedot.schedule.expand``'s job; this module also states the facts about
the parts that expansion relies on (:func:`times_of_day`, :func:`max_per_period`,
:func:`day_may_match`).
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
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

from onthedot.schedule.ical import CalDateTime, invalid, parse_cal_datetime
from onthedot.schedule.local import wall_time

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
    if (freq == MONTHLY or parts.bymonth) and any(abs(n) > 5 for _, n in parts.byweekday):
        # Counted within a month there is no sixth Monday (dateutil fails on such numbers).
        raise invalid(
            "numbered BYDAY items count within a month here: at most 5 (like 5FR or -5MO)",
            "BYDAY like 1MO or -1FR, numbered -5 to 5 with FREQ=MONTHLY or BYMONTH",
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
            until_wall = _add_days(_wall_or_max(until_instant, tz), 2)
        elif until.is_date:
            # A date means "up to and including that day", whatever the time of day of DTSTART.
            until_wall = datetime.combine(until.value.date(), time(23, 59, 59))
        else:
            until_wall = until.value
    return RuleSpec(explicit, dtstart, until_wall=until_wall, until_instant=until_instant)


def _wall_or_max(instant: datetime, tz: ZoneInfo) -> datetime:
    try:
        return wall_time(instant, tz)
    except OverflowError:  # an UNTIL in year 9999 that is year 10000 on this zone's clocks
        return datetime.max


def _add_days(value: datetime, days: int) -> datetime:
    try:
        return value + timedelta(days=days)
    except OverflowError:
        return datetime.max


def build_rrule(spec: RuleSpec, start: datetime, *, interval: int | None = None) -> rrule:
    """The dateutil rule for ``spec`` expanded from ``start`` (DTSTART, the start of a period
    the rule visits, or a point inside one); ``interval`` overrides the rule's INTERVAL."""
    p = spec.parts
    byweekday = [_WEEKDAYS[wd](n) if n else _WEEKDAYS[wd] for wd, n in p.byweekday]
    return rrule(
        p.freq,
        dtstart=start,
        interval=interval or p.interval,
        wkst=p.wkst,
        until=spec.until_wall,
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

@functools.lru_cache(maxsize=1024)
def times_of_day(p: RuleParts) -> tuple[time, ...]:
    """The sorted times of day of a rule whose BYHOUR, BYMINUTE and BYSECOND are explicit."""
    return tuple(
        sorted(time(h, m, s) for h in p.byhour for m in p.byminute for s in p.bysecond)
    )


@functools.lru_cache(maxsize=1024)
def max_per_period(p: RuleParts) -> int:
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


def day_may_match(p: RuleParts, day: date) -> bool:
    """Day-level BYxxx filters, over-approximated: numbered weekdays count as plain weekdays and
    BYWEEKNO/BYSETPOS are ignored, so this is True on every day the rule really matches. Exact
    for DAILY and shorter frequencies, which allow neither numbered weekdays nor BYWEEKNO."""
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
