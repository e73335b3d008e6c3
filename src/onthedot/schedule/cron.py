"""Cron schedules, matched against the local wall clock of the job's timezone.

``cronsim`` is used for field parsing and matching only, always on *naive* wall times. Handing it an
aware datetime would bring in its own DST handling, which (verified with cronsim 2.8) is not our
policy and differs between forms:

* 5-field expressions with a fixed minute and hour follow Debian cron (once at fold=0 on fall-back
  day, a skipped time runs when the gap ends) - that matches our policy;
* 5-field expressions with ``*`` in the minute or hour field are matched in real time, so
  ``*/15 * * * *`` fires at 01:00-01:45 in both passes of the repeated hour on fall-back night;
* 6-field expressions get no special handling: ``0 30 1 * * *`` fires twice on fall-back day and
  ``0 30 2 * * *`` does not fire at all on a US spring-forward day.

Iterating naive wall times and resolving them with :func:`resolve_local` gives every cron form the
one policy of this package (see the package docstring).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, time
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from onthedot.domain.errors import ScheduleError
from onthedot.schedule.base import WallClockSchedule
from onthedot.schedule.limits import current_budget

# The usual cron shorthands; "@reboot" has no meaning for a service and is rejected.
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

CRON_EXPECTED = (
    'a cron expression "minute hour day-of-month month day-of-week" such as "0 8 * * *" '
    '(optionally with a leading seconds field, "0 0 8 * * MON-FRI")'
)


def looks_like_cron(text: str) -> bool:
    """True when ``text`` has the shape of a cron expression (5 or 6 fields, or a macro)."""
    stripped = text.strip()
    return stripped.lower() in CRON_MACROS or len(stripped.split()) in (5, 6)


def normalize_cron(text: str) -> str:
    """The 5- or 6-field expression for ``text``, with macros expanded and whitespace collapsed."""
    stripped = text.strip()
    expr = CRON_MACROS.get(stripped.lower(), stripped)
    return " ".join(expr.split())


class CronSchedule(WallClockSchedule):
    """A 5-field (or 6-field, leading seconds) cron expression read in local wall time."""

    def __init__(self, expr: str, tz: ZoneInfo, *, field: str = "job_params.schedule") -> None:
        super().__init__(tz)
        self.expr = normalize_cron(expr)
        if len(self.expr.split()) not in (5, 6):
            raise ScheduleError(
                f"a cron expression has 5 fields (or 6 with seconds), got {expr!r}",
                code="invalid_schedule",
                field=field,
                expected=CRON_EXPECTED,
            )
        try:
            # Parse once now so that a bad field is reported at compile time, not at run time.
            CronSim(self.expr, datetime(2000, 1, 1))
        except CronSimError as exc:
            raise ScheduleError(
                f"invalid cron expression {expr!r}: {exc}",
                code="invalid_schedule",
                field=field,
                expected=CRON_EXPECTED,
            ) from exc

    def times_of_day(self) -> list[time] | None:
        """The matching times of day, sorted; None when there are more than 2000 of them.

        Day fields only choose days, so every matching day has these same times: the gaps inside
        a day are a fact about the expression, found without iterating.
        """
        sim = CronSim(self.expr, datetime(2000, 1, 1))
        if len(sim.hours) * len(sim.minutes) * len(sim.seconds) > 2000:
            return None
        return sorted(time(h, m, s) for h in sim.hours for m in sim.minutes for s in sim.seconds)

    def walls_after(self, wall: datetime) -> Iterator[datetime]:
        # A naive start makes cronsim tick the wall clock itself, with no DST adjustment.
        it = CronSim(self.expr, wall)
        budget = current_budget()
        while True:
            budget.check()
            try:
                yield next(it)
            except (StopIteration, OverflowError):
                # cronsim gives up after 50 years without a match (the horizon of RRULEs too);
                # OverflowError is year 9999.
                return

    def __repr__(self) -> str:
        return f"CronSchedule({self.expr!r}, tz={self.tz.key!r})"
