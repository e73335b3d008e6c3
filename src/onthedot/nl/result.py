"""The answer of ``parse``: the job to create, the task it carries and when it will run."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from onthedot.domain.models import JobParams
from onthedot.nl.parts import Language


@dataclass(frozen=True)
class ParseResult:
    job_params: JobParams
    task: str
    matched: str
    # The instant the text was read at: "tomorrow" and the first runs are relative to it.
    now: datetime = field(default_factory=lambda: datetime.now(UTC), compare=False)
    language: Language = "en"

    def next_runs(self, count: int = 3, *, after: datetime | None = None) -> list[datetime]:
        """The next ``count`` fire times (aware, UTC), computed by onthedot.schedule."""
        start = after or self.now
        if self.job_params.type == "immediate":
            return [start.astimezone(UTC)][:count]
        # Imported here: the schedule package is a sibling role, only needed for this answer.
        from onthedot.schedule import compile_schedule

        schedule = compile_schedule(self.job_params, anchor=self.now, now=start)
        return [t.astimezone(UTC) for t in schedule.upcoming(start, count)]

    def to_dict(self, next_runs: int = 3) -> dict[str, Any]:
        return {
            "job_params": self.job_params.to_dict(),
            "task": self.task,
            "matched": self.matched,
            "next_runs": [utc_z(t) for t in self.next_runs(next_runs)],
        }


def utc_z(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
