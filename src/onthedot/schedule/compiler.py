"""``compile_schedule``: validate a job's ``JobParams`` and build its ``Schedule``.

Validation is bounded (``onthedot.schedule.limits``): :func:`compile_schedule` runs under a
budget of ``VALIDATION_STEPS`` and :func:`compile_schedule_async` additionally keeps the work
off the event loop unless it is cheap. :func:`job_schedule` compiles a stored job's schedule
without a deadline; its lookups are bounded by the search horizon.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

from dateutil.rrule import DAILY

from onthedot.domain.errors import ScheduleError
from onthedot.domain.models import Job, JobParams, JobType
from onthedot.schedule.base import (
    NoOccurrences,
    Schedule,
    WallClockSchedule,
    with_flexible_window,
)
from onthedot.schedule.cron import CRON_EXPECTED, CronSchedule, looks_like_cron
from onthedot.schedule.expand import HORIZON_YEARS
from onthedot.schedule.ical import looks_like_calendar
from onthedot.schedule.limits import (
    INLINE_CHARS,
    MAX_SCHEDULE_CHARS,
    SCHEDULE_FIELD,
    VALIDATION_STEPS,
    active_budget,
    budget,
    run_bounded,
    too_complex,
)
from onthedot.schedule.local import load_timezone, require_aware, wall_time
from onthedot.schedule.oneshot import TIME_EXPECTED, TIME_FIELD, OneTimeSchedule, parse_one_time
from onthedot.schedule.rrule import RRULE_EXPECTED, times_of_day
from onthedot.schedule.vevent import RRuleSchedule, compile_rrule

TYPE_FIELD = "job_params.type"
TIMEZONE_FIELD = "job_params.timezone"
SCHEDULE_EXPECTED = (
    f"{CRON_EXPECTED}; or {RRULE_EXPECTED}; or a VEVENT block "
    '"BEGIN:VEVENT DTSTART;TZID=Asia/Taipei:20260622T080000 RRULE:FREQ=DAILY END:VEVENT"'
)
FREQUENCY_SAMPLE = 200  # gaps are checked between this many occurrences after the anchor...
FREQUENCY_SAMPLE_YEARS = HORIZON_YEARS  # ...that come within this many years of it


def compile_schedule(
    params: JobParams,
    *,
    anchor: datetime,
    now: datetime | None = None,
    min_interval_seconds: float = 60.0,
    past_grace_seconds: float = 60.0,
) -> Schedule:
    """Validate and compile ``params`` into a :class:`Schedule`.

    ``anchor`` is the job's creation instant (aware): the implicit DTSTART of a bare RRULE
    (truncated to the minute in the job's timezone), so the same job always compiles to the same
    schedule. When ``now`` is given, also check that a one-time time is not more than
    ``past_grace_seconds`` in the past (``time_in_past``) and that a recurring schedule has an
    occurrence after ``now`` (``no_future_occurrence``).

    Compiled schedules are immutable and cached, in two bounded LRUs: by form (job type, time or
    schedule text, timezone, minimum interval) when neither the schedule nor its verdict depends
    on the anchor (immediate, one-time, and cron whose time fields settle the minimum
    interval), so every job created with that form shares one compile; otherwise by (params,
    anchor, minimum interval), as the service compiles the same job again for each occurrence.

    The work runs under the active budget, or under a new one of ``VALIDATION_STEPS``; a
    schedule that needs more is refused with ``schedule_too_complex``.
    """
    anchor = require_aware(anchor, "anchor")
    if active_budget() is None:
        with budget(VALIDATION_STEPS):
            return _validated(params, anchor, now, min_interval_seconds, past_grace_seconds)
    return _validated(params, anchor, now, min_interval_seconds, past_grace_seconds)


async def compile_schedule_async(
    params: JobParams,
    *,
    anchor: datetime,
    now: datetime | None = None,
    min_interval_seconds: float = 60.0,
    past_grace_seconds: float = 60.0,
    before_thread: Callable[[], Awaitable[None]] | None = None,
) -> Schedule:
    """:func:`compile_schedule` for the event loop: cheap schedules (ordinary cron expressions
    and rules) compile inline, anything else in the schedule thread (see ``limits``), after
    ``before_thread`` is awaited."""

    def compile_it() -> Schedule:
        return compile_schedule(
            params,
            anchor=anchor,
            now=now,
            min_interval_seconds=min_interval_seconds,
            past_grace_seconds=past_grace_seconds,
        )

    # A long text is read in the thread at once: reading it is linear, but not free.
    long_text = len(params.schedule or "") + len(params.time or "") > INLINE_CHARS
    return await run_bounded(compile_it, inline=not long_text, before_thread=before_thread)


def _validated(
    params: JobParams,
    anchor: datetime,
    now: datetime | None,
    min_interval_seconds: float,
    past_grace_seconds: float,
) -> Schedule:
    schedule = _compile(params, anchor, float(min_interval_seconds))
    if now is not None:
        _check_against_now(params, schedule, require_aware(now, "now"), past_grace_seconds)
    return schedule


SHARED_CACHE_SIZE = 4096  # compiled forms kept per process (a few KB each at most)
ANCHORED_CACHE_SIZE = 4096  # compiled (params, anchor) pairs kept per process


def _compile(params: JobParams, anchor: datetime, min_interval_seconds: float) -> Schedule:
    shared = _compile_shared(params.type, params.time, params.schedule, params.timezone,
                             min_interval_seconds)
    return shared if shared is not None else _compile_anchored(params, anchor,
                                                               min_interval_seconds)


@functools.lru_cache(maxsize=SHARED_CACHE_SIZE)
def _compile_shared(job_type: JobType, time_text: str | None, schedule_text: str | None,
                    timezone: str, min_interval_seconds: float) -> Schedule | None:
    """The schedule of a form that compiles to the same schedule, with the same verdict, at any
    anchor; None for one that depends on it (a rule's implicit DTSTART, a cron expression whose
    gaps take iterating from the anchor). Keyed by the form as written, its timezone included:
    the same text in two timezones is two entries. An invalid form raises and is not cached."""
    if job_type == "recurring":
        if not schedule_text or not schedule_text.strip() or len(
                schedule_text) > MAX_SCHEDULE_CHARS or not looks_like_cron(schedule_text):
            return None  # the anchored compile reads it, or says what is wrong with it
        if looks_like_calendar(schedule_text):
            return None
        tz = load_timezone(timezone, field=TIMEZONE_FIELD)
        cron = CronSchedule(schedule_text, tz)
        if min_interval_seconds > 0 and not _cron_settled_by_fields(cron, min_interval_seconds):
            return None
        return cron
    params = JobParams(type=job_type, time=time_text, schedule=schedule_text, timezone=timezone)
    return _compile_at(params, _NO_ANCHOR, min_interval_seconds)


_NO_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)  # immediate and one-time schedules ignore it


def _compile_at(params: JobParams, anchor: datetime, min_interval_seconds: float) -> Schedule:
    tz = load_timezone(params.timezone or "", field=TIMEZONE_FIELD)
    if params.type == "immediate":
        return NoOccurrences()
    if params.type == "one-time":
        if not params.time or not params.time.strip():
            raise ScheduleError(
                "a one-time job needs job_params.time",
                code="missing_field",
                field=TIME_FIELD,
                expected=TIME_EXPECTED,
            )
        return OneTimeSchedule(parse_one_time(params.time, tz))
    if params.type == "recurring":
        return _compile_recurring(params.schedule, tz, anchor, min_interval_seconds)
    raise ScheduleError(
        f"unknown job type {params.type!r}",
        code="invalid_value",
        field=TYPE_FIELD,
        expected='one of "immediate", "one-time", "recurring"',
    )


_compile_anchored = functools.lru_cache(maxsize=ANCHORED_CACHE_SIZE)(_compile_at)


def _compile_recurring(
    text: str | None, tz: ZoneInfo, anchor: datetime, min_interval_seconds: float
) -> WallClockSchedule:
    if not text or not text.strip():
        raise ScheduleError(
            "a recurring job needs job_params.schedule",
            code="missing_field",
            field=SCHEDULE_FIELD,
            expected=SCHEDULE_EXPECTED,
        )
    if len(text) > MAX_SCHEDULE_CHARS:
        raise too_complex(f"the schedule is {len(text)} characters long")
    schedule: WallClockSchedule
    if looks_like_calendar(text):
        anchor_wall = wall_time(anchor, tz).replace(second=0, microsecond=0)
        schedule = compile_rrule(text, tz, anchor_wall)
    elif looks_like_cron(text):
        schedule = CronSchedule(text, tz)
    else:
        raise ScheduleError(
            f"cannot read the schedule {text!r}",
            code="invalid_schedule",
            field=SCHEDULE_FIELD,
            expected=SCHEDULE_EXPECTED,
        )
    _check_min_interval(schedule, wall_time(anchor, schedule.tz), min_interval_seconds)
    return schedule


def _check_min_interval(schedule: WallClockSchedule, start: datetime, minimum: float) -> None:
    """Refuse a schedule whose first occurrences after ``start`` come closer than ``minimum``.

    Gaps are measured on the schedule's own wall clock: that is the rule's intent, and it keeps a
    DST transition (which can bring two real instants closer) from refusing a valid schedule.
    """
    if minimum <= 0:
        return
    if isinstance(schedule, CronSchedule) and _cron_settled_by_fields(schedule, minimum):
        return
    if isinstance(schedule, RRuleSchedule) and _rule_settled_by_times(schedule, minimum):
        return
    previous: datetime | None = None
    end = _years_later(start, FREQUENCY_SAMPLE_YEARS)
    try:  # walls_after checks the budget at every step
        for wall in islice(schedule.walls_after(start), FREQUENCY_SAMPLE + 1):
            if wall > end:
                break
            if previous is not None:
                gap = (wall - previous).total_seconds()
                if gap < minimum:
                    raise _too_frequent(gap, previous.isoformat(), wall.isoformat(), minimum)
            previous = wall
    except OverflowError:  # reached year 9999
        pass
    except ValueError as exc:  # dateutil reports some impossible rules only while expanding
        raise ScheduleError(
            f"the schedule cannot be expanded: {exc}",
            code="invalid_schedule",
            field=SCHEDULE_FIELD,
            expected=SCHEDULE_EXPECTED,
        ) from exc


def _cron_settled_by_fields(schedule: CronSchedule, minimum: float) -> bool:
    """Check a cron expression's gaps from its time fields alone; False when that cannot tell.

    Iterating cronsim 200 times costs ~10 ms, too much for every job creation, and the time
    fields usually settle the question at once.
    """
    times = schedule.times_of_day()
    if times is None:
        return False
    for a, b in pairwise(times):
        gap = _seconds(b) - _seconds(a)
        if gap < minimum:
            raise _too_frequent(gap, a.isoformat(), b.isoformat(), minimum)
    # Only when the last time of one day and the first of the next come too close does it take
    # iterating to know whether two consecutive days both match.
    return 86400 - _seconds(times[-1]) + _seconds(times[0]) >= minimum


def _rule_settled_by_times(schedule: RRuleSchedule, minimum: float) -> bool:
    """Check the gaps of one DAILY (or longer) rule from its times of day alone; False when that
    cannot tell. Each of its occurrences falls on another day or at another of these times."""
    if len(schedule.rules) != 1 or schedule.rdates:
        return False
    spec = schedule.rules[0]
    parts = spec.parts
    if parts.freq > DAILY:  # HOURLY and shorter: the times are not a fixed set per day
        return False
    times = times_of_day(parts)
    gaps = [_seconds(b) - _seconds(a) for a, b in pairwise(times)]
    across_days = 86400 - _seconds(times[-1]) + _seconds(times[0])
    if min(gaps, default=across_days) >= minimum and across_days >= minimum:
        return True
    if not parts.bysetpos and spec.until_wall is None and spec.until_instant is None:
        # Every time of every matching day fires, and such days never run out: the gap is real.
        for (a, b), gap in zip(pairwise(times), gaps, strict=True):
            if gap < minimum:
                raise _too_frequent(gap, a.isoformat(), b.isoformat(), minimum)
    return False


def _years_later(value: datetime, years: int) -> datetime:
    try:
        return value.replace(year=value.year + years, day=min(value.day, 28))
    except ValueError:  # past year 9999
        return datetime.max


def _seconds(t: time) -> int:
    return t.hour * 3600 + t.minute * 60 + t.second


def _too_frequent(gap: float, first: str, second: str, minimum: float) -> ScheduleError:
    return ScheduleError(
        f"the schedule fires {gap:g} s apart (at {first} and {second} local time); "
        f"the minimum interval is {minimum:g} s",
        code="schedule_too_frequent",
        field=SCHEDULE_FIELD,
        expected=f"at most one occurrence every {minimum:g} seconds",
    )


def _check_against_now(
    params: JobParams, schedule: Schedule, now: datetime, past_grace_seconds: float
) -> None:
    if params.type == "one-time" and isinstance(schedule, OneTimeSchedule):
        if schedule.at < now - timedelta(seconds=past_grace_seconds):
            raise ScheduleError(
                f"{params.time} is in the past (now is {now.isoformat()})",
                code="time_in_past",
                field=TIME_FIELD,
                expected=f"a time after {now.isoformat()}",
            )
    elif params.type == "recurring" and schedule.next_at_or_after(now) is None:
        raise ScheduleError(
            f"the schedule has no occurrence after {now.isoformat()}",
            code="no_future_occurrence",
            field=SCHEDULE_FIELD,
            expected="a schedule that still fires in the future (check COUNT, UNTIL and EXDATE)",
        )


def job_schedule(job: Job) -> Schedule:
    """The schedule of a stored job. Its limits (minimum interval, a future occurrence) were
    checked when it was created or changed; they are not checked again for every occurrence,
    and no deadline applies: an accepted schedule keeps firing. Each lookup is bounded by the
    search horizon. Its instants are effective times: shifted by the job's flexible window."""
    schedule = _compile(job.params, require_aware(job.created_at, "created_at"), 0.0)
    return with_flexible_window(schedule, job.job_id, job.params.flexible_window_seconds)


async def job_occurrences(job: Job, after: datetime, before: datetime,
                          limit: int) -> list[datetime]:
    """The stored job's first ``limit`` occurrences after ``after`` and before ``before``, in
    one computation (off the event loop when it is not cheap), not one lookup each."""
    def walk() -> list[datetime]:
        schedule = job_schedule(job)
        found: list[datetime] = []
        at = schedule.next_after(after)
        while at is not None and at < before and len(found) < limit:
            found.append(at)
            at = schedule.next_after(at)
        return found

    return await run_bounded(walk, steps=None)


async def job_next_after(job: Job, after: datetime) -> datetime | None:
    """The stored job's first occurrence after ``after``, computed off the event loop when it
    is not cheap (the horizon bounds it; there is no deadline)."""
    return await run_bounded(lambda: job_schedule(job).next_after(after), steps=None)
