"""The partitions of ``job_runs`` in the PostgreSQL store: their names, read back strictly, and
the calendar arithmetic of keeping them. No I/O; ``PostgresStore.partitions_maintain`` acts.

    job_runs                            RANGE (scheduled_at)
    ├── job_runs_default                runs no other partition takes (beyond the far horizon,
    │                                   or older than yesterday when first inserted)
    ├── job_runs_p20261130              a day of the near window
    ├── job_runs_m202701                a month the window has reached: RANGE again, split
    │   ├── job_runs_p20270101              into its days
    │   └── ...
    └── job_runs_m202803                a month still ahead of the window:
        └── job_runs_m202803_unsplit        one leaf for the whole month

A month is born with its one ``_unsplit`` leaf; when the daily window reaches it, that leaf is
split into the month's days (``unsplit`` -> ``split``, once); days leave by retention, and an
empty month after them. A name is ours only if it is exactly one of these shapes, names a real
date and sits under the parent its shape implies; anything else below ``job_runs`` is left
alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

ROOT = "job_runs"
DEFAULT = "job_runs_default"
DAY = timedelta(days=1)
_DAY_NAME = re.compile(r"job_runs_p(\d{8})")
_MONTH_NAME = re.compile(r"job_runs_m(\d{6})")
_UNSPLIT_NAME = re.compile(r"job_runs_m(\d{6})_unsplit")


def day_name(day: date) -> str:
    return f"job_runs_p{day:%Y%m%d}"


def month_name(month: date) -> str:
    return f"job_runs_m{month:%Y%m}"


def unsplit_name(month: date) -> str:
    return f"{month_name(month)}_unsplit"


def start_of(day: date) -> datetime:
    """The first instant of a UTC day (or of a month, given its first day)."""
    return datetime.combine(day, time(), UTC)


def month_of(day: date) -> date:
    return day.replace(day=1)


def months_after(month: date, count: int = 1) -> date:
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def days_of(month: date) -> list[date]:
    end = months_after(month)
    return [month + timedelta(days=n) for n in range((end - month).days)]


def far_months(last_day: date, now: datetime, count: int) -> list[date]:
    """The months kept as monthly partitions: each month after the one holding the daily
    window's last day, up to the month holding ``now`` + ``count`` months."""
    horizon = months_after(month_of(now.astimezone(UTC).date()), count)
    month = months_after(month_of(last_day))
    found = []
    while month <= horizon:
        found.append(month)
        month = months_after(month)
    return found


@dataclass(frozen=True)
class Month:
    start: date  # its first day
    unsplit: bool  # still one leaf for the whole month
    days: frozenset[date] = frozenset()  # its daily partitions, once split

    @property
    def end(self) -> date:
        return months_after(self.start)

    @property
    def empty(self) -> bool:
        return not self.unsplit and not self.days


@dataclass(frozen=True)
class Layout:
    days: dict[date, str] = field(default_factory=dict)  # every daily partition -> its parent
    months: dict[date, Month] = field(default_factory=dict)  # by first day
    foreign: tuple[str, ...] = ()  # below job_runs but not ours (the default aside)

    def month_covering(self, day: date) -> Month | None:
        return self.months.get(month_of(day))

    def is_free(self, first: date, end: date) -> bool:
        """No partition of ours covers any day in [first, end)."""
        if any(first <= day < end for day in self.days):
            return False
        return not any(m.start < end and first < m.end for m in self.months.values())


def parse_layout(rows: Iterable[tuple[str, str]]) -> Layout:
    """The layout from (name, parent name) pairs of every partition below job_runs."""
    rows = list(rows)
    months: dict[date, Month] = {}
    for name, parent in rows:
        month = _parse(_MONTH_NAME, name, "%Y%m", month_name)
        if month is not None and parent == ROOT:
            months[month] = Month(start=month, unsplit=False)
    days: dict[date, str] = {}
    foreign = []
    for name, parent in rows:
        month = _parse(_MONTH_NAME, name, "%Y%m", month_name)
        if month is not None and month in months:
            continue
        unsplit = _parse(_UNSPLIT_NAME, name, "%Y%m", unsplit_name)
        if unsplit is not None and unsplit in months and parent == month_name(unsplit):
            months[unsplit] = Month(start=unsplit, unsplit=True)
            continue
        day = _parse(_DAY_NAME, name, "%Y%m%d", day_name)
        if day is not None and (parent == ROOT or (month_of(day) in months
                                                   and parent == month_name(month_of(day)))):
            days[day] = parent
            continue
        if name != DEFAULT:
            foreign.append(name)
    for day, parent in days.items():
        if parent != ROOT:
            holder = months[month_of(day)]
            months[holder.start] = Month(start=holder.start, unsplit=holder.unsplit,
                                         days=holder.days | {day})
    return Layout(days=days, months=months, foreign=tuple(sorted(foreign)))


def _parse(shape: re.Pattern[str], name: str, stamp: str,
           spell: Callable[[date], str]) -> date | None:
    """The date a name of this shape stands for; None unless the name is exactly how we would
    spell that date (so no ``job_runs_p20261331``, no stray characters)."""
    match = shape.fullmatch(name)
    if match is None:
        return None
    try:
        parsed = datetime.strptime(match.group(1), stamp).date()
    except ValueError:
        return None
    return parsed if spell(parsed) == name else None
