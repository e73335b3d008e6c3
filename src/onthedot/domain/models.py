"""The records every role shares: jobs, their runs and the append-only run events.

Run state machine (every arrow is a compare-and-set in the store; RUNNING transitions also
check the fencing token of the attempt)::

    PENDING --watcher--> ENQUEUED --worker claim--> RUNNING --ok--------> SUCCEEDED
       |                    ^  ^  ^                  |  |  \\--fail, last--> FAILED (dead-lettered)
       |                    |  |  |                  |  \\--fail--> RETRYING (retry_at stored)
       |                    |  |  +-- rescuer, at retry_at ---------------------+
       |                    |  +----- lease expired: another worker claims RUNNING again, or
       |                    |         the rescuer hands it back when no message is left
       |                    +-------- rescuer: ENQUEUED with no live message, published again
       +--watcher, late and misfire=skip--> SKIPPED
    PENDING/ENQUEUED/RETRYING --pause/delete/schedule change--> CANCELLED

SUCCEEDED, FAILED, SKIPPED and CANCELLED are terminal; reaching one of the first three appends a
RunEvent in the same transaction.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from onthedot.domain.delivery import Delivery
from onthedot.domain.ids import run_id_for, shard_of, time_bucket_of


class RunStatus(enum.StrEnum):
    PENDING = "PENDING"
    ENQUEUED = "ENQUEUED"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"


class JobStatus(enum.StrEnum):
    """Stored job status. ``running`` is never stored: the API derives it from the last run."""

    SCHEDULED = "scheduled"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


JobType = Literal["immediate", "one-time", "recurring"]
MisfirePolicy = Literal["run_late", "skip"]
# What a recurring job does with an occurrence that comes while its previous run still runs
# (docs/schedules.md, "Overlapping runs"): skip it (the default), run the latest such one as
# soon as the previous run ends (buffer_one), or run each at its time (allow_all).
OverlapPolicy = Literal["skip", "buffer_one", "allow_all"]
OVERLAP_POLICIES: tuple[OverlapPolicy, ...] = ("skip", "buffer_one", "allow_all")
RunKind = Literal["scheduled", "manual"]


@dataclass(frozen=True)
class JobParams:
    """When a job fires. ``time`` is for one-time jobs, ``schedule`` (cron, RRULE or VEVENT)
    for recurring ones; ``timezone`` is the IANA zone the schedule is read in.
    ``flexible_window_seconds`` (0 = exact) moves every occurrence later by the job's own fixed
    offset inside the window (ids.flexible_offset), so many jobs due at one instant spread out."""

    type: JobType
    time: str | None = None
    schedule: str | None = None
    timezone: str = "UTC"
    flexible_window_seconds: int = 0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, "timezone": self.timezone}
        if self.time is not None:
            d["time"] = self.time
        if self.schedule is not None:
            d["schedule"] = self.schedule
        if self.flexible_window_seconds:  # absent when exact: older request hashes still match
            d["flexible_window_seconds"] = self.flexible_window_seconds
        return d


# Bounds of a stored job that the service enforces on every write and the store's codec checks
# on every read (a row written before a bound existed is shown as unreadable, not as a 500).
MAX_ACTION_DEPTH = 32  # nesting of the action object, itself included (a webhook body: 31)
MAX_ACTION_BYTES = 65_536  # the action as compact UTF-8 JSON
MAX_BACKOFF_SECONDS = 86_400.0  # one day: the longest wait before a retry


def default_notify() -> list[dict[str, Any]]:
    """Where a job's results go unless it says otherwise: the user's inbox."""
    return [{"channel": "inbox"}]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    backoff_seconds: float = 10.0  # first retry delay; doubles each attempt, with jitter
    max_backoff_seconds: float = 3600.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "backoff_seconds": self.backoff_seconds,
            "max_backoff_seconds": self.max_backoff_seconds,
        }


@dataclass(frozen=True)
class Job:
    job_id: str
    user_id: str
    name: str
    action: dict[str, Any]
    params: JobParams
    status: JobStatus
    created_at: datetime
    updated_at: datetime
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    misfire_policy: MisfirePolicy = "run_late"
    timeout_seconds: float = 60.0
    idempotency_key: str | None = None
    overlap_policy: OverlapPolicy = "skip"
    request_hash: str | None = None
    next_run_at: datetime | None = None
    last_run_id: str | None = None
    version: int = 0  # bumped by every stored change; changes are compare-and-set on it
    # The channels each successful run's output is delivered to (onthedot.delivery).
    notify: list[dict[str, Any]] = field(default_factory=default_notify)


@dataclass(frozen=True)
class JobRun:
    run_id: str
    job_id: str
    scheduled_at: datetime
    time_bucket: int
    shard: int
    status: RunStatus
    kind: RunKind = "scheduled"
    attempt: int = 0
    lease_token: str | None = None
    lease_expires_at: datetime | None = None
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output: Any = None
    error: str | None = None
    dead_lettered: bool = False
    retry_at: datetime | None = None  # RETRYING: when the next attempt is due
    # What the delivery step recorded for this run (domain/delivery.py). Filled by the service
    # for the views users read; the execution path reads runs without it.
    deliveries: tuple[Delivery, ...] = ()

    @classmethod
    def pending(cls, job_id: str, at: datetime, shards: int,
                kind: RunKind = "scheduled") -> JobRun:
        """A new occurrence: its id, bucket and shard all follow from (job, instant), so
        every process that schedules the same occurrence builds the same row."""
        return cls(run_id=run_id_for(job_id, at), job_id=job_id, scheduled_at=at,
                   time_bucket=time_bucket_of(at), shard=shard_of(job_id, shards),
                   status=RunStatus.PENDING, kind=kind)


@dataclass(frozen=True)
class RunEvent:
    event_id: int
    job_id: str
    run_id: str
    status: RunStatus
    emitted_at: datetime
