"""Wall clocks and instants: loading IANA timezones and resolving local times under the DST policy.

Every schedule form is evaluated as a sequence of *naive wall times* in one timezone and then
turned into instants here, so that cron, RRULE and one-time jobs share exactly one DST rule:

* a wall time that does not exist (spring-forward gap) resolves to the first valid instant after
  the gap, i.e. the transition instant itself;
* a wall time that happens twice (fall back) resolves to its first occurrence (``fold=0``).

The mapping wall time -> instant is therefore monotonic (never decreasing) in the wall time,
which is what lets the schedules walk wall times in order and only drop equal instants.
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime
from importlib import resources
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from onthedot.domain.errors import ScheduleError

TIMEZONE_EXPECTED = "an IANA timezone such as Asia/Taipei"


# Every occurrence of every job lies before this instant. The year left before datetime.max is
# room for what is added to a run's time later (a flexible window, a retry's backoff, the
# misfire grace, a zone's offset, the next hour's bucket), so none of it can overflow.
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=UTC)


def load_timezone(name: str, *, field: str = "job_params.timezone") -> ZoneInfo:
    """The IANA zone called ``name``; a wrong-case name ("asia/taipei") is accepted too.

    Only the names of the tzdata package's zone list are zones: canonical ones and their
    backward links (``US/Eastern``). Files that a system's zoneinfo directory holds beside them
    are not: ``localtime`` (whatever the host is set to), ``posixrules``, the ``posix/`` and
    ``right/`` copies (``right/`` counts leap seconds, so its clock runs 27 s off), and
    ``Factory`` (a placeholder that says "-00"). Raises ``ScheduleError`` (code
    ``unknown_timezone``) naming ``field`` otherwise.
    """
    key = name.strip()
    canonical = key if key in zone_names() else _zone_names_by_lowercase().get(key.lower())
    if canonical is not None:
        try:
            return ZoneInfo(canonical)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass  # listed but not installed: reported as unknown
    raise ScheduleError(
        f"unknown timezone {name[:80]!r}",
        code="unknown_timezone",
        field=field,
        expected=TIMEZONE_EXPECTED,
    )


NOT_PLACES = frozenset({"Factory"})  # in tzdata's list, but a placeholder, not a zone to use


@functools.cache
def zone_names() -> frozenset[str]:
    """The IANA names accepted as timezones: the tzdata package's list (read once)."""
    listed = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(listed.split()) - NOT_PLACES


@functools.cache
def _zone_names_by_lowercase() -> dict[str, str]:
    return {zone.lower(): zone for zone in zone_names()}


def wall_time(instant: datetime, tz: ZoneInfo) -> datetime:
    """The naive local wall time shown by clocks in ``tz`` at ``instant`` (an aware datetime)."""
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def resolve_local(naive: datetime, tz: ZoneInfo) -> datetime:
    """Naive wall time -> aware UTC instant under the DST policy of this package.

    A non-existent wall time (inside a spring-forward gap) becomes the first valid instant after
    the gap; an ambiguous one (inside a fall-back repeat) becomes its first occurrence.
    """
    if naive.tzinfo is not None:
        raise ValueError("resolve_local expects a naive wall time")
    # zoneinfo follows PEP 495: fold=0 reads an ambiguous time with the offset in force *before*
    # the transition, i.e. its first occurrence.
    instant = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if wall_time(instant, tz) == naive:
        return instant
    return _end_of_gap(naive, tz)


def _end_of_gap(naive: datetime, tz: ZoneInfo) -> datetime:
    """The transition instant that ends the gap ``naive`` falls into.

    PEP 495 gives two readings of a time in a gap: fold=1 (the offset after the transition) lands
    before the transition and fold=0 lands after it. Between the two, "the clock already shows a
    later wall time than ``naive``" flips from false to true exactly at the transition; tzdata
    transitions fall on whole seconds, so a binary search over integer epoch seconds finds it.
    """
    lo = math.floor(naive.replace(tzinfo=tz, fold=1).timestamp())
    hi = math.ceil(naive.replace(tzinfo=tz, fold=0).timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if wall_time(datetime.fromtimestamp(mid, UTC), tz) > naive:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def require_aware(value: datetime, name: str) -> datetime:
    """``value`` as an aware UTC datetime; naive datetimes are a programming error here."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value.astimezone(UTC)
