"""Request and response bodies of the REST API, and their translation to/from the service.

Request bodies forbid unknown fields: a typo such as ``"schedual"`` is a 422 naming the field,
not a silently ignored value. Range checks (page sizes, attempts, timeouts, schedules) live in the
service, so the REST API, MCP and chat reject the same things with the same messages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from onthedot.delivery import MAX_CHANNELS
from onthedot.domain.history import ERROR_MAX_CHARS, PREVIEW_MAX_CHARS, JobChange, RunAttempt
from onthedot.domain.models import JobParams, JobRun, RetryPolicy, default_notify
from onthedot.service import MAX_BACKFILL_RUNS, MAX_BATCH_JOBS, JobPatch, JobSpec
from onthedot.views import InboxItemOut, JobOut, JobTypeIn, MisfireIn, OverlapIn, RunOut


class _Request(BaseModel):
    # strict: a JSON value of the wrong type is refused, not converted (false is not 0.0, "60"
    # is not 60): what the OpenAPI document says is what is accepted.
    model_config = ConfigDict(extra="forbid", strict=True)


class ActionIn(BaseModel):
    """What the job does. Parameters besides ``type`` depend on it: ``message`` takes ``text``;
    ``webhook`` takes ``url`` and optional ``method``, ``headers``, ``body``. Any other parameter
    is a 422 ``unknown_field`` (checked by the service, which knows the action types)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={
        "examples": [{"type": "message", "text": "stand up and stretch"},
                     {"type": "webhook", "url": "https://example.com/hook", "method": "POST"}]})

    type: str = Field(description="webhook | message | ...")


class JobParamsIn(_Request):
    type: JobTypeIn
    time: str | None = Field(
        default=None, description="one-time: ISO 8601 instant, or local time read in `timezone`",
        examples=["2026-06-22T08:00:00+08:00"])
    schedule: str | None = Field(
        default=None, description="recurring: 5-field cron, RFC 5545 RRULE or VEVENT",
        examples=["0 8 * * *", "FREQ=DAILY;BYHOUR=8;BYMINUTE=0"])
    timezone: str | None = Field(
        default=None, description="IANA timezone; default: the server's default_timezone",
        examples=["Asia/Taipei"])
    flexible_window_seconds: int | None = Field(
        default=None, description="one-time and recurring: fire each run up to this many "
        "seconds late, at the job's own fixed offset (from a hash of its job id) inside the "
        "window, so many jobs due at one instant spread out; 0-3600, 0 or absent = exactly "
        "on time. Refused for immediate jobs.", examples=[600])

    def to_domain(self, default_timezone: str) -> JobParams:
        return JobParams(type=self.type, time=self.time, schedule=self.schedule,
                         timezone=self.timezone or default_timezone,
                         flexible_window_seconds=self.flexible_window_seconds or 0)


class RetryPolicyIn(_Request):
    max_attempts: int | None = Field(
        default=None, description="attempts in total, 1-100 (default 3)")
    backoff_seconds: float | None = Field(
        default=None, description="first retry delay; doubles each attempt, with jitter "
        "(default 10)")
    max_backoff_seconds: float | None = Field(
        default=None, description="cap of the retry delay (default 3600)")

    def over(self, base: RetryPolicy) -> RetryPolicy:
        """Fields given here replace those of ``base``."""
        return RetryPolicy(
            max_attempts=base.max_attempts if self.max_attempts is None else self.max_attempts,
            backoff_seconds=(base.backoff_seconds if self.backoff_seconds is None
                             else self.backoff_seconds),
            max_backoff_seconds=(base.max_backoff_seconds if self.max_backoff_seconds is None
                                 else self.max_backoff_seconds),
        )


class NotifyChannelIn(_Request):
    """Where each result of the job goes. ``inbox`` takes nothing else; ``email`` takes ``to``
    (an address; the server needs ONTHEDOT_SMTP_URL); ``webhook`` takes ``url`` and an optional
    ``format`` (``json``, the default, or ``slack``). The service checks which keys fit which
    channel and answers 422 naming the entry, e.g. ``notify[1].to``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"channel": "inbox"}, {"channel": "email", "to": "me@example.com"},
        {"channel": "webhook", "url": "https://hooks.slack.com/services/T/B/X",
         "format": "slack"}]})

    channel: Literal["inbox", "email", "webhook"]
    to: str | None = Field(default=None, description="email: the recipient's address")
    url: str | None = Field(default=None, description="webhook: the http(s) URL to POST to")
    format: Literal["json", "slack"] | None = Field(
        default=None, description="webhook: json (the run and its output) or slack "
        "({\"text\": ...})")

    def to_domain(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


NotifyIn = Field(default=None, max_length=MAX_CHANNELS,
                 description=f"channels for each result, at most {MAX_CHANNELS} (default: "
                             "the inbox); [] delivers nowhere")


def _notify(channels: list[NotifyChannelIn] | None) -> list[dict[str, Any]] | None:
    return None if channels is None else [c.to_domain() for c in channels]


class JobCreate(_Request):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{
        "name": "morning news",
        "action": {"type": "message", "text": "summarize the financial news"},
        "job_params": {"type": "recurring", "schedule": "0 8 * * *",
                       "timezone": "Asia/Taipei"},
    }]})

    name: str | None = None
    action: ActionIn
    job_params: JobParamsIn
    retry_policy: RetryPolicyIn | None = None
    misfire_policy: MisfireIn = "run_late"
    overlap_policy: OverlapIn = Field(
        default="skip", description="a recurring job's occurrence that comes while its previous "
        "run still runs: skip (the default: it is not run), buffer_one (the latest such one runs "
        "as soon as the previous run ends) or allow_all (each runs at its time, overlapping)")
    timeout_seconds: float = Field(default=60.0, description="seconds one attempt may take")
    notify: list[NotifyChannelIn] | None = NotifyIn

    def to_spec(self, default_timezone: str) -> JobSpec:
        return JobSpec(
            action=self.action.model_dump(), params=self.job_params.to_domain(default_timezone),
            name=self.name, retry_policy=(RetryPolicy() if self.retry_policy is None
                                          else self.retry_policy.over(RetryPolicy())),
            misfire_policy=self.misfire_policy, timeout_seconds=self.timeout_seconds,
            notify=default_notify() if self.notify is None else [
                c.to_domain() for c in self.notify], overlap_policy=self.overlap_policy)


MAX_IDEMPOTENCY_KEY_CHARS = 255


class JobBatchItem(JobCreate):
    """One job of ``POST /v1/jobs:batch``: what ``POST /v1/jobs`` takes, plus its own key."""

    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=MAX_IDEMPOTENCY_KEY_CHARS,
        description="this job's Idempotency-Key: the same key with the same job returns the "
                    "original job (200), with a different job it is a 409")


class JobBatch(_Request):
    """Each item is validated on its own: an invalid one is a 422 in its place in
    ``results``, and the others are still created."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{
        "jobs": [{"action": {"type": "message", "text": "stand up"},
                  "job_params": {"type": "recurring", "schedule": "0 9 * * 1-5"},
                  "idempotency_key": "standup-1"},
                 {"action": {"type": "message", "text": "tea"},
                  "job_params": {"type": "one-time", "time": "2026-06-22T16:00:00+08:00"}}],
    }]})

    jobs: list[Any] = Field(min_length=1, max_length=MAX_BATCH_JOBS,
                            json_schema_extra={"items": {"$ref": "#/components/schemas/"
                                                                 "JobBatchItem"}},
                            description=f"1 to {MAX_BATCH_JOBS} jobs, each as POST /v1/jobs "
                                        "takes it, with an optional idempotency_key")


class JobUpdate(_Request):
    """Fields left out (or null) stay as they are. ``job_params`` is replaced as a whole (a
    changed schedule replaces the pending run); ``retry_policy`` fields are merged."""

    name: str | None = None
    action: ActionIn | None = None
    job_params: JobParamsIn | None = None
    retry_policy: RetryPolicyIn | None = None
    misfire_policy: MisfireIn | None = None
    overlap_policy: OverlapIn | None = Field(
        default=None, description="a recurring job's occurrence that comes while its previous "
        "run still runs: skip (the default: it is not run), buffer_one (the latest such one runs "
        "as soon as the previous run ends) or allow_all (each runs at its time, overlapping)")
    timeout_seconds: float | None = None
    notify: list[NotifyChannelIn] | None = Field(
        default=None, max_length=MAX_CHANNELS, description="replaces the job's channels")

    def to_patch(self, current: RetryPolicy, default_timezone: str) -> JobPatch:
        return JobPatch(
            name=self.name,
            action=None if self.action is None else self.action.model_dump(),
            params=None if self.job_params is None else self.job_params.to_domain(
                default_timezone),
            retry_policy=None if self.retry_policy is None else self.retry_policy.over(current),
            misfire_policy=self.misfire_policy, timeout_seconds=self.timeout_seconds,
            notify=_notify(self.notify), overlap_policy=self.overlap_policy)


# --- responses ---------------------------------------------------------------------------
class BatchResult(BaseModel):
    status: Literal[200, 201, 409, 422] = Field(
        description="201 created, 200 replay of an earlier identical create with the same "
                    "key, 409 key already used for a different job, 422 invalid job")
    job: JobOut | None = Field(default=None, description="with 201 and 200")
    problem: Problem | None = Field(default=None, description="with 409 and 422; its field "
                                    "names the item, e.g. jobs[3].job_params.schedule")


class BatchOut(BaseModel):
    results: list[BatchResult] = Field(description="one per job, in request order")


class JobList(BaseModel):
    jobs: list[JobOut]
    next_page_token: str | None


class RunList(BaseModel):
    runs: list[RunOut]
    next_page_token: str | None


class DeadLetterList(BaseModel):
    dead_letters: list[RunOut]
    next_page_token: str | None


class InboxList(BaseModel):
    items: list[InboxItemOut]
    next_page_token: str | None


class Problem(BaseModel):
    """RFC 9457 problem details, extended with what a client needs to fix its request."""

    type: str = Field(examples=["urn:onthedot:problem:invalid_schedule"])
    title: str = Field(examples=["Unprocessable Content"])
    status: int = Field(examples=[422])
    detail: str = Field(examples=["unknown timezone 'Mars/Base'"])
    code: str = Field(examples=["invalid_schedule"])
    field: str | None = Field(examples=["job_params.timezone"])
    expected: str | None = Field(examples=["an IANA timezone such as Asia/Taipei"])
    errors: list[dict[str, Any]] | None = Field(
        default=None,
        description="422 from request parsing: every problem found, not only the first")


class Health(BaseModel):
    status: str
    checks: dict[str, str] = Field(default_factory=dict)


# --- attempts and job history (docs/api.md) -------------------------------------------------
class AttemptOut(BaseModel):
    attempt: int = Field(description="the run's attempt number; a redrive starts again at 1, "
                         "and a released attempt's number is used again")
    status: Literal["running", "succeeded", "failed", "released", "lost"] = Field(
        description="released: the worker shut down and handed the run back (not counted); "
                    "lost: the worker stopped renewing its lease (crashed) and the run was "
                    "taken over")
    started_at: datetime
    finished_at: datetime | None
    error: str | None = Field(description=f"at most {ERROR_MAX_CHARS} characters")
    preview: str | None = Field(description=f"the start of the output (text, or JSON), at "
                                f"most {PREVIEW_MAX_CHARS} characters")

    @classmethod
    def of(cls, attempt: RunAttempt) -> AttemptOut:
        return cls(attempt=attempt.attempt, status=attempt.status.value,
                   started_at=attempt.started_at, finished_at=attempt.finished_at,
                   error=attempt.error, preview=attempt.preview)


class RunDetailOut(RunOut):
    attempts: list[AttemptOut] = Field(default_factory=list,
                                       description="every attempt of the run, oldest first")

    @classmethod
    def with_attempts(cls, run: JobRun, attempts: list[RunAttempt]) -> RunDetailOut:
        return cls(**RunOut.of(run).model_dump(), attempts=[AttemptOut.of(a) for a in attempts])


class BackfillIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{
        "start_time": "2026-06-20T00:00:00Z", "end_time": "2026-06-22T00:00:00Z"}]})

    # strict=False: JSON has no datetime type; an ISO 8601 string is what is sent.
    start_time: datetime = Field(strict=False, description="the first instant of the range "
                                 "(included), with an offset or Z")
    end_time: datetime = Field(strict=False, description="the end of the range (excluded), "
                               "not after now")
    max_runs: int = Field(default=MAX_BACKFILL_RUNS, ge=1, le=MAX_BACKFILL_RUNS,
                          description="refuse (422 too_many_runs) a range with more "
                                      "occurrences than this")


class BackfilledRun(BaseModel):
    created: bool = Field(description="true: a new run now; false: the instant had a run "
                          "already, left as it is")
    run: RunOut


class BackfillOut(BaseModel):
    runs: list[BackfilledRun] = Field(description="each occurrence in the range, oldest first")


class SkippedOut(BaseModel):
    skipped: RunOut = Field(description="the run marked SKIPPED (error \"skipped on request\")")
    job: JobOut = Field(description="the job, its next_run_at the occurrence after the "
                        "skipped one")


class ChangeOut(BaseModel):
    change_id: str
    action: Literal["create", "update", "pause", "resume", "run", "delete", "redrive",
                    "skip", "backfill"]
    actor: str = Field(description="the user who made the change (the token's user, or local)")
    channel: Literal["api", "mcp", "chat", "cli"] | None = Field(
        description="where the change came from; null when not recorded (creations)")
    changed_at: datetime
    details: dict[str, Any] = Field(
        description='update: {field: {"old": ..., "new": ...}} for each changed field '
                    '(credential headers as "***"); pause, resume, delete: the status change; '
                    "run and redrive: the run_id; skip: the skipped run's run_id and "
                    "scheduled_at, and next_run_at")

    @classmethod
    def of(cls, change: JobChange) -> ChangeOut:
        return cls(change_id=change.change_id, action=change.action.value, actor=change.actor,
                   channel=cast(Any, change.channel), changed_at=change.changed_at,
                   details=change.details)


class HistoryList(BaseModel):
    changes: list[ChangeOut]
    next_page_token: str | None
