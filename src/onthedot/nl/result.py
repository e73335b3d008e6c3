"""The answer of ``parse``: the job to create, the task it carries and when it will run."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from onthedot.domain.models import JobParams
from onthedot.nl.parts import Language, Problem


@dataclass(frozen=True)
class ParseResult:
    job_params: JobParams
    task: str
    matched: str
    # The instant the text was read at: "tomorrow" and the first runs are relative to it.
    now: datetime = field(default_factory=lambda: datetime.now(UTC), compare=False)
    language: Language = "en"
    # How the parser read what a person might mean otherwise ("at 3" as 03:00): the
    # confirmation says it (messages.render_notes), so a misreading is visible at once.
    notes: tuple[Problem, ...] = field(default=(), compare=False)

    def next_runs(self, count: int = 3, *, after: datetime | None = None) -> list[datetime]:
        """The next ``count`` fire times (aware, UTC), computed by onthedot.schedule."""
        start = after or self.now
        if self.job_params.type == "immediate":
            return [start.astimezone(UTC)][:count]
        # Imported here: the schedule package is a sibling role, only needed for this answer.
        from onthedot.schedule import compile_schedule

        # No minimum interval here: the service enforces its own (ONTHEDOT_MIN_INTERVAL) when the
        # job is created; this answer only lists the times.
        schedule = compile_schedule(
            self.job_params, anchor=self.now, now=start, min_interval_seconds=0
        )
        return [t.astimezone(UTC) for t in schedule.upcoming(start, count)]

    def to_dict(self, next_runs: int = 3) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job_params": self.job_params.to_dict(),
            "task": self.task,
            "matched": self.matched,
            "next_runs": [utc_z(t) for t in self.next_runs(next_runs)],
        }
        if self.notes:
            out["notes"] = [{"key": note.key, **dict(note.params)} for note in self.notes]
        return out


def utc_z(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
