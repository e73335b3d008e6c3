"""The schedule of RRULE / VEVENT text: its RRULEs plus RDATEs minus EXDATEs, in one timezone."""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from dateutil.rrule import DAILY

from onthedot.schedule.base import WallClockSchedule
from onthedot.schedule.expand import check_can_occur, expand_count, rule_walls_after
from onthedot.schedule.ical import CalDateTime, invalid, parse_calendar_text
from onthedot.schedule.limits import (
    MAX_COUNT_TOTAL,
    MAX_TIMES_OF_DAY,
    SCHEDULE_FIELD,
    current_budget,
    too_complex,
)
from onthedot.schedule.local import load_timezone, resolve_local, wall_time
from onthedot.schedule.rrule import (
    RRULE_EXPECTED,
    RuleParts,
    RuleSpec,
    build_rrule,
    make_spec,
    parse_rule,
)


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
        budget = current_budget()
        previous: datetime | None = None
        for occurrence in merged:
            budget.check()
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
    rules = [(value, parse_rule(value)) for value in cal.rrules]
    total_count = sum(parts.count or 0 for _, parts in rules)
    if total_count > MAX_COUNT_TOTAL:
        raise too_complex(
            f"the COUNTs of this schedule add up to {total_count}; at most {MAX_COUNT_TOTAL}"
        )
    specs: list[RuleSpec] = []
    for value, parts in rules:
        spec = make_spec(parts, dtstart, event_tz)
        _check_times_of_day(spec.parts)
        try:
            build_rrule(spec, dtstart)  # dateutil's own checks (e.g. empty BYHOUR sets)
            check_can_occur(spec)
            specs.append(expand_count(spec))
        except ValueError as exc:  # raised by dateutil itself
            raise invalid(f"the rule {value!r} cannot be used: {exc}", RRULE_EXPECTED) from exc
    rdates = [_to_event_wall(item, event_tz, dtstart, "RDATE") for item in cal.rdates]
    exdates = [
        _to_event_wall(item, event_tz, dtstart, "EXDATE")
        for item in cal.exdates
        if not item.is_date
    ]
    exdate_days = [item.value.date() for item in cal.exdates if item.is_date]
    return RRuleSchedule(event_tz, specs, rdates=rdates, exdates=exdates, exdate_days=exdate_days)


def _check_times_of_day(parts: RuleParts) -> None:
    # Every time of day is listed (and sorted) when a DAILY or longer rule is expanded; more
    # than one a minute is what MINUTELY and SECONDLY rules are for.
    if parts.freq > DAILY:
        return
    times = len(parts.byhour) * len(parts.byminute) * len(parts.bysecond)
    if times > MAX_TIMES_OF_DAY:
        raise too_complex(
            f"the rule has {times} times of day (BYHOUR x BYMINUTE x BYSECOND); at most "
            f"{MAX_TIMES_OF_DAY} - use FREQ=MINUTELY or FREQ=SECONDLY for more"
        )


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


def _to_event_wall(
    item: CalDateTime, event_tz: ZoneInfo, dtstart: datetime, name: str
) -> datetime:
    """An RDATE/EXDATE as a wall time of the event's zone, for matching against occurrences."""
    if item.is_date:
        return datetime.combine(item.value.date(), dtstart.time())
    try:
        if item.is_utc:
            return wall_time(item.value.replace(tzinfo=UTC), event_tz)
        if item.tzid is not None:
            zone = load_timezone(item.tzid, field=SCHEDULE_FIELD)
            if zone.key != event_tz.key:
                return wall_time(resolve_local(item.value, zone), event_tz)
    except OverflowError as exc:
        raise invalid(
            f"{name} {item.value.isoformat()} is outside years 1-9999 in {event_tz.key}",
            f"{name} values between years 1 and 9999 in the event's timezone",
        ) from exc
    return item.value
