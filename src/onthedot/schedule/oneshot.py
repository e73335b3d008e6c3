"""One-time jobs: a single instant given in ISO 8601."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from onthedot.domain.errors import ScheduleError
from onthedot.schedule.local import LATEST_INSTANT, require_aware, resolve_local

TIME_FIELD = "job_params.time"
TIME_EXPECTED = (
    "ISO 8601 like 2026-06-22T08:00:00+08:00, 2026-06-22T00:00:00Z, "
    "or a local 2026-06-22T08:00:00 read in job_params.timezone"
)
_DATE_ONLY = re.compile(r"\d{4}-?\d{2}-?\d{2}")
_ONE_MICROSECOND = timedelta(microseconds=1)


def parse_one_time(text: str, tz: ZoneInfo) -> datetime:
    """The instant of a one-time job, as an aware UTC datetime.

    With an offset or ``Z`` the text is an instant and ``tz`` is only informational; without one
    it is a wall time in ``tz``, resolved under the package's DST policy.
    """
    stripped = text.strip()
    if _DATE_ONLY.fullmatch(stripped):
        raise ScheduleError(
            f"{text!r} is a date without a time of day",
            code="invalid_time",
            field=TIME_FIELD,
            expected=TIME_EXPECTED,
        )
    try:
        parsed = datetime.fromisoformat(stripped)
    except ValueError as exc:
        raise ScheduleError(
            f"cannot read {text!r} as an ISO 8601 time",
            code="invalid_time",
            field=TIME_FIELD,
            expected=TIME_EXPECTED,
        ) from exc
    try:
        at = resolve_local(parsed, tz) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError as exc:  # 9999-12-31T23:59:59-14:00 is in year 10000 in UTC
        raise out_of_range(text) from exc
    if at >= LATEST_INSTANT:
        raise out_of_range(text)
    return at


def out_of_range(text: str) -> ScheduleError:
    return ScheduleError(
        f"{text!r} is outside the supported range (years 1 to 9999 in UTC, before "
        f"{LATEST_INSTANT:%Y-%m-%dT%H:%M:%SZ})",
        code="invalid_time",
        field=TIME_FIELD,
        expected=f"a time before {LATEST_INSTANT:%Y-%m-%dT%H:%M:%SZ}, counting the flexible "
                 "window",
    )


class OneTimeSchedule:
    """Exactly one occurrence."""

    def __init__(self, at: datetime) -> None:
        self.at = require_aware(at, "at")

    def next_after(self, after: datetime) -> datetime | None:
        return self.at if self.at > require_aware(after, "after") else None

    def next_at_or_after(self, t: datetime) -> datetime | None:
        return self.next_after(require_aware(t, "t") - _ONE_MICROSECOND)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        found = self.next_after(after)
        return [found] if found is not None and count > 0 else []

    def __repr__(self) -> str:
        return f"OneTimeSchedule({self.at.isoformat()})"
