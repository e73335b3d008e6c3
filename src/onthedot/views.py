"""What a job, a run and an inbox item look like to a client: one shape for every edge.

The REST API returns these bodies, the MCP tools return the same objects as structured content
(their output schemas are derived from these models), and the chat front door shows them, so a
task reads the same whichever door a person or a model came through.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, Field

from onthedot.domain.delivery import Delivery, DeliveryStatus, InboxItem
from onthedot.domain.models import JobRun
from onthedot.nl.describe import describe
from onthedot.nl.parts import Language
from onthedot.service import JobView

JobTypeIn = Literal["immediate", "one-time", "recurring"]
MisfireIn = Literal["run_late", "skip"]
OverlapIn = Literal["skip", "buffer_one", "allow_all"]
UserJobStatus = Literal["scheduled", "running", "completed", "failed", "paused", "cancelled"]


class JobParamsOut(BaseModel):
    type: JobTypeIn
    time: str | None
    schedule: str | None
    timezone: str
    flexible_window_seconds: int = Field(
        description="0: runs fire exactly on time; else each run's scheduled_at is its "
        "occurrence plus the job's fixed offset in [0, window)")


def schedule_words(schedule: str | None) -> dict[str, str] | None:
    """A schedule said in words in each language the service speaks (onthedot.nl.describe; the
    schedule as written where it cannot be said exactly)."""
    if not schedule:
        return None
    return {language: describe(schedule, language) for language in get_args(Language)}


class RetryPolicyOut(BaseModel):
    max_attempts: int
    backoff_seconds: float
    max_backoff_seconds: float


class DeliveryOut(BaseModel):
    channel: Literal["inbox", "email", "webhook"]
    target: str = Field(description="the address, the URL, or inbox")
    status: Literal["sending", "delivered", "retrying", "failed"] = Field(
        description="delivered; retrying: the last send failed and the next one is due at "
                    "next_attempt_at; failed: for good (not worth retrying, or out of "
                    "retries); sending: claimed, its outcome not recorded yet")
    attempts: int = Field(description="sends so far")
    sent_at: datetime | None
    next_attempt_at: datetime | None = Field(
        description="when a retrying delivery is sent again; null otherwise")
    error: str | None = Field(description="the last failed send's error")

    @classmethod
    def of(cls, delivery: Delivery) -> DeliveryOut:
        retrying = delivery.status is DeliveryStatus.RETRYING
        return cls(channel=cast(Any, delivery.channel), target=delivery.target,
                   status=cast(Any, delivery.status.value), attempts=delivery.attempts,
                   sent_at=delivery.sent_at,
                   next_attempt_at=delivery.next_attempt_at if retrying else None,
                   error=delivery.error)


class RunOut(BaseModel):
    run_id: str
    job_id: str
    kind: Literal["scheduled", "manual"]
    scheduled_at: datetime
    status: str = Field(description="PENDING | ENQUEUED | RUNNING | RETRYING | SUCCEEDED | "
                        "FAILED | SKIPPED | CANCELLED")
    attempt: int
    started_at: datetime | None
    finished_at: datetime | None
    output: Any
    error: str | None
    deliveries: list[DeliveryOut] = Field(
        default_factory=list, description="where the output was delivered (inbox, email, "
        "webhook), with each channel's status and error")

    @classmethod
    def of(cls, run: JobRun) -> RunOut:
        return cls(run_id=run.run_id, job_id=run.job_id, kind=run.kind,
                   scheduled_at=run.scheduled_at, status=run.status.value, attempt=run.attempt,
                   started_at=run.started_at, finished_at=run.finished_at, output=run.output,
                   error=run.error, deliveries=[DeliveryOut.of(d) for d in run.deliveries])


class JobOut(BaseModel):
    job_id: str
    name: str
    status: UserJobStatus
    action: dict[str, Any]
    job_params: JobParamsOut
    schedule_words: dict[str, str] | None = Field(
        description="a recurring schedule in words by language (en, zh-Hant, zh-Hans), as the "
                    "Tasks page shows it; null for one-time and immediate jobs",
        examples=[{"en": "every day at 08:00", "zh-Hant": "每天 08:00", "zh-Hans": "每天 08:00"}])
    retry_policy: RetryPolicyOut
    misfire_policy: MisfireIn
    overlap_policy: OverlapIn = Field(
        description="a recurring job's occurrence that comes while its previous run still runs: "
                    "skip, buffer_one or allow_all (docs/schedules.md#overlapping-runs)")
    timeout_seconds: float
    notify: list[dict[str, Any]] = Field(description="the channels each result goes to")
    next_run_at: datetime | None
    last_run: RunOut | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, view: JobView) -> JobOut:
        job = view.job
        params = job.params
        policy = job.retry_policy
        return cls(
            job_id=job.job_id, name=job.name, status=cast(UserJobStatus, view.status),
            action=job.action,
            job_params=JobParamsOut(type=params.type, time=params.time,
                                    schedule=params.schedule, timezone=params.timezone,
                                    flexible_window_seconds=params.flexible_window_seconds),
            schedule_words=schedule_words(params.schedule),
            retry_policy=RetryPolicyOut(max_attempts=policy.max_attempts,
                                        backoff_seconds=policy.backoff_seconds,
                                        max_backoff_seconds=policy.max_backoff_seconds),
            misfire_policy=job.misfire_policy, overlap_policy=job.overlap_policy,
            timeout_seconds=job.timeout_seconds, notify=job.notify, next_run_at=job.next_run_at,
            last_run=None if view.last_run is None else RunOut.of(view.last_run),
            created_at=job.created_at, updated_at=job.updated_at)


class InboxItemOut(BaseModel):
    item_id: str
    job_id: str
    run_id: str
    title: str = Field(description="the job's name")
    text: str = Field(description="the result as text")
    output: Any = Field(description="the run's output as the action returned it")
    scheduled_at: datetime
    delivered_at: datetime
    read: bool
    read_at: datetime | None

    @classmethod
    def of(cls, item: InboxItem) -> InboxItemOut:
        return cls(item_id=item.item_id, job_id=item.job_id, run_id=item.run_id,
                   title=item.title, text=item.text, output=item.output,
                   scheduled_at=item.scheduled_at, delivered_at=item.created_at,
                   read=item.read_at is not None, read_at=item.read_at)
