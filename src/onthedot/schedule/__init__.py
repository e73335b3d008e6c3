"""When jobs fire: validating ``JobParams`` and computing occurrences (timezone- and DST-aware).

Accepted forms (``JobParams.type``):

* ``immediate`` - no scheduled occurrences; only the timezone is checked.
* ``one-time`` - ``time`` in ISO 8601. With an offset or ``Z`` it is an instant and ``timezone``
  is informational (``2026-06-22T08:00:00+08:00``); without one it is a wall time read in
  ``timezone`` (``2026-06-22T08:00:00`` with ``Asia/Taipei``). Exactly one occurrence.
* ``recurring`` - ``schedule`` is one of

  - a cron expression, 5 fields (``0 8 * * *``) or 6 with a leading seconds field
    (``0 0 8 * * MON-FRI``), or a macro (``@daily``, ``@hourly``, ...), matched against the wall
    clock of ``timezone``;
  - a bare RFC 5545 rule, ``RRULE:FREQ=DAILY;BYHOUR=8;BYMINUTE=0`` or just ``FREQ=...``. Its
    DTSTART is the job's creation instant truncated to the minute in ``timezone``, so parts the
    rule leaves out (BYHOUR, BYMINUTE, the weekday of a weekly rule, ...) come from the creation
    time, except that a missing BYSECOND means second 0;
  - a VEVENT block (``BEGIN:VEVENT`` ... ``END:VEVENT``, on several lines or on one) or bare
    ``DTSTART:...`` / ``RRULE:...`` lines. COUNT, UNTIL, EXDATE and RDATE are honoured. A TZID on
    DTSTART overrides ``timezone``; a UTC DTSTART (``...Z``) makes the rule run in UTC, as RFC
    5545 says. Rules are expanded over naive wall times with bounded work (``expand``).

DST policy - one rule for cron, RRULE and local one-time times. Every form first produces naive
wall times in its zone, then :func:`resolve_local` turns each into an instant:

* a wall time that does not exist (spring-forward gap) fires at the first valid instant after the
  gap: ``30 2 * * *`` in America/New_York fires at 03:00 EDT on the spring-forward day;
* a wall time that happens twice (fall back) fires once, at its first occurrence (fold=0):
  ``30 1 * * *`` fires at 01:30 EDT, not again at 01:30 EST;
* sub-hourly cron and RRULE schedules follow the same wall-clock rule: each matching wall time
  fires once, at fold=0. ``*/15 * * * *`` in New York fires at 01:00, 01:15, 01:30 and 01:45 EDT
  on fall-back night and next at 02:00 EST - the repeated hour is not fired a second time, which
  leaves a 75-minute gap. On spring-forward night the non-existent 02:00-02:45 all map to 03:00
  EDT and fire once there. Jobs that need evenly spaced real intervals should use UTC;
* instants are strictly increasing and never repeated: wall times that resolve to the same
  instant (all of a gap) fire once.

A zone that skips a whole day (Pacific/Apia skipped 2011-12-30) is no exception: the skipped
day's wall times all fire at the first instant after the gap (00:00 on 2011-12-31).

A deployment-wide minimum interval (``min_interval_seconds``) is enforced on the gaps between the
first 200 occurrences after the job's creation (within 50 years), measured on the schedule's wall
clock.

No schedule can cost much: sizes are capped, every lookup stops at a search horizon, and
validation runs under a time budget, inline when cheap and in a worker thread otherwise
(``limits``).

Errors are :class:`onthedot.domain.errors.ScheduleError` with codes ``missing_field``,
``invalid_time``, ``invalid_schedule``, ``unknown_timezone``, ``schedule_too_frequent``,
``schedule_too_complex``, ``time_in_past``, ``no_future_occurrence`` and ``invalid_value``
(unknown job type).
"""

from onthedot.schedule.base import Schedule, with_flexible_window
from onthedot.schedule.compiler import (
    compile_schedule,
    compile_schedule_async,
    job_next_after,
    job_occurrences,
    job_schedule,
)
from onthedot.schedule.limits import run_bounded
from onthedot.schedule.local import resolve_local

__all__ = [
    "Schedule",
    "compile_schedule",
    "compile_schedule_async",
    "job_next_after",
    "job_occurrences",
    "job_schedule",
    "resolve_local",
    "run_bounded",
    "with_flexible_window",
]
