"""The ``Schedule`` protocol and the wall-clock machinery shared by cron and RRULE schedules."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Protocol
from zoneinfo import ZoneInfo

from onthedot.domain.ids import flexible_offset
from onthedot.schedule.local import LATEST_INSTANT, require_aware, resolve_local, wall_time

_ONE_MICROSECOND = timedelta(microseconds=1)
_REMEMBERED = 16  # answers of next_after a compiled (shared, cached) schedule keeps
# Callers ask for "the first occurrence ever" with datetime.min; no wall clock can show a time
# before this one (UTC offsets are under a day), so starting here never overflows.
_EARLIEST = datetime(1, 1, 3, tzinfo=UTC)


class Schedule(Protocol):
    """When a job fires: a strictly increasing sequence of UTC instants (possibly empty)."""

    def next_after(self, after: datetime) -> datetime | None:
        """The first occurrence strictly after ``after`` (aware datetime), as an aware UTC
        datetime; None when there is none."""
        ...

    def next_at_or_after(self, t: datetime) -> datetime | None:
        """The first occurrence at or after ``t`` (aware datetime); None when there is none."""
        ...

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        """Up to ``count`` next occurrences strictly after ``after``, in increasing order."""
        ...


class NoOccurrences:
    """An immediate job: it runs once when created and never again by schedule."""

    def next_after(self, after: datetime) -> datetime | None:
        require_aware(after, "after")
        return None

    def next_at_or_after(self, t: datetime) -> datetime | None:
        require_aware(t, "t")
        return None

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        require_aware(after, "after")
        return []

    def __repr__(self) -> str:
        return "NoOccurrences()"


class ShiftedSchedule:
    """Another schedule with every occurrence moved later by a fixed offset: a job's flexible
    window (``JobParams.flexible_window_seconds``, offset from ``ids.flexible_offset``). The
    instants it answers are the job's effective times, the ones its runs are stored and
    dispatched at; ``after`` is read on the same effective scale."""

    def __init__(self, inner: Schedule, offset: timedelta) -> None:
        self.inner = inner
        self.offset = offset

    def _nominal(self, t: datetime) -> datetime:
        # Nothing occurs before _EARLIEST, so a time that close to it needs no shift (and
        # shifting datetime.min would overflow).
        return t - self.offset if t - _EARLIEST > self.offset else t

    def _effective(self, t: datetime | None) -> datetime | None:
        # An occurrence the shift would carry past the supported range is no occurrence.
        if t is None or t >= LATEST_INSTANT - self.offset:
            return None
        return t + self.offset

    def next_after(self, after: datetime) -> datetime | None:
        return self._effective(self.inner.next_after(self._nominal(require_aware(after, "after"))))

    def next_at_or_after(self, t: datetime) -> datetime | None:
        return self._effective(self.inner.next_at_or_after(self._nominal(require_aware(t, "t"))))

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        nominal = self.inner.upcoming(self._nominal(require_aware(after, "after")), count)
        return [t + self.offset for t in nominal if t < LATEST_INSTANT - self.offset]

    def __repr__(self) -> str:
        return f"ShiftedSchedule({self.inner!r}, {self.offset})"


def with_flexible_window(schedule: Schedule, job_id: str, window_seconds: int) -> Schedule:
    """The schedule a job's runs follow: its own, shifted by its offset in the window."""
    if window_seconds <= 0:
        return schedule
    return ShiftedSchedule(schedule, flexible_offset(job_id, window_seconds))


class WallClockSchedule(ABC):
    """A schedule defined by matching wall times in one timezone.

    Subclasses only enumerate matching naive wall times in increasing order; this class turns them
    into instants with :func:`resolve_local` and drops every instant not strictly later than the
    previous one. Because that mapping never decreases, dropping equal instants is all it takes to
    merge the wall times of a spring-forward gap into one firing, and skipping instants not after
    ``after`` is all it takes when ``after`` lies in the second pass of a repeated hour.
    """

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz
        # Validation asks for the first occurrence after now (off the event loop, under a
        # budget); the service then asks the same question of the same cached object.
        self._recent: dict[datetime, datetime | None] = {}
        # The last answer as (after, first occurrence after it): no occurrence lies between
        # the two, so it answers every instant in that span too (an answer of None is not
        # reused: a later start may reach past the search horizon). Creates share a cached
        # schedule (compiler._compile_shared) and each asks from its own `now`, all of them
        # usually inside one such span. One tuple, so another thread reads it whole.
        self._span: tuple[datetime, datetime | None] | None = None

    @abstractmethod
    def walls_after(self, wall: datetime) -> Iterator[datetime]:
        """Matching naive wall times strictly after the naive wall time ``wall``, increasing."""

    def instants_after(self, after: datetime) -> Iterator[datetime]:
        """Occurrences strictly after ``after``, as aware UTC datetimes, strictly increasing."""
        last = max(require_aware(after, "after"), _EARLIEST)
        try:
            start = wall_time(last, self.tz)
            for wall in self.walls_after(start):
                instant = resolve_local(wall, self.tz)
                if instant >= LATEST_INSTANT:
                    return  # the end of the supported range: nothing more to schedule
                if instant > last:
                    last = instant
                    yield instant
        except OverflowError:
            # Past year 9999 in some timezone: there is nothing more to schedule.
            return

    def next_after(self, after: datetime) -> datetime | None:
        key = require_aware(after, "after")
        span = self._span
        if span is not None and span[1] is not None and span[0] <= key < span[1]:
            return span[1]
        try:  # one atomic read: another thread may clear the dict at any time
            return self._recent[key]
        except KeyError:
            pass
        found = next(self.instants_after(key), None)
        if len(self._recent) >= _REMEMBERED:
            self._recent.clear()
        self._recent[key] = found
        self._span = (key, found)
        return found

    def next_at_or_after(self, t: datetime) -> datetime | None:
        return self.next_after(require_aware(t, "t") - _ONE_MICROSECOND)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        return list(islice(self.instants_after(after), max(count, 0)))
