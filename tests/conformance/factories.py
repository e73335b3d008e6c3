"""Records in a valid state for each status, so a test starts from the row it needs.

``make_run(job, status=RUNNING)`` has started_at, a lease token and a lease expiry;
``make_run(job, status=FAILED, dead_lettered=True)`` is a dead letter; and so on. Every field
can be overridden by keyword.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from onthedot.domain.ids import run_id_for, shard_of, time_bucket_of, ulid_floor
from onthedot.domain.models import Job, JobParams, JobRun, JobStatus, RetryPolicy, RunStatus

LEASE = timedelta(seconds=30)
RETRY_DELAY = timedelta(seconds=10)


def make_job(**overrides: Any) -> Job:
    """A recurring job of user-1 created ``now`` (default: the current instant)."""
    now: datetime = overrides.pop("now", None) or datetime.now(UTC)
    fields: dict[str, Any] = {
        "job_id": job_id_at(now),
        "user_id": "user-1",
        "name": "每天早上八點總結財經新聞",
        "action": {"type": "webhook", "url": "https://hooks.example.test/digest",
                   "headers": {"X-Lang": "zh-TW"}},
        "params": JobParams(type="recurring", schedule="0 8 * * *", timezone="Asia/Taipei"),
        "status": JobStatus.SCHEDULED,
        "created_at": now,
        "updated_at": now,
        "retry_policy": RetryPolicy(max_attempts=3, backoff_seconds=10.0),
        "misfire_policy": "run_late",
        "timeout_seconds": 60.0,
    }
    fields.update(overrides)
    return Job(**fields)


def make_run(job: Job, status: RunStatus = RunStatus.RUNNING, *,
             scheduled_at: datetime | None = None, now: datetime | None = None,
             **overrides: Any) -> JobRun:
    """A run of ``job`` at ``scheduled_at`` (default ``now``) with the fields its status needs;
    ``now`` (default ``scheduled_at``) is when it was enqueued, started or finished."""
    at = scheduled_at or now or datetime.now(UTC)
    now = now or at
    fields: dict[str, Any] = {
        "run_id": run_id_for(job.job_id, at),
        "job_id": job.job_id,
        "scheduled_at": at,
        "time_bucket": time_bucket_of(at),
        "shard": shard_of(job.job_id),
        "status": status,
    }
    if status in {RunStatus.ENQUEUED, RunStatus.RUNNING, RunStatus.RETRYING,
                  RunStatus.SUCCEEDED, RunStatus.FAILED}:
        fields["enqueued_at"] = now
    if status in {RunStatus.RUNNING, RunStatus.RETRYING, RunStatus.SUCCEEDED, RunStatus.FAILED}:
        fields["attempt"] = 1
        fields["started_at"] = now
    if status is RunStatus.RUNNING:
        fields["lease_token"] = new_token()
        fields["lease_expires_at"] = now + LEASE
    elif status is RunStatus.RETRYING:
        fields["error"] = "HTTP 503 from hooks.example.test"
        fields["retry_at"] = now + RETRY_DELAY
    elif status is RunStatus.SUCCEEDED:
        fields["finished_at"] = now
        fields["output"] = {"status": 200, "summary": "台股收高"}
    elif status is RunStatus.FAILED:
        fields["finished_at"] = now
        fields["error"] = "HTTP 500 from hooks.example.test"
    elif status is RunStatus.SKIPPED:
        fields["finished_at"] = now
        fields["error"] = "missed: misfire policy is skip"
    elif status is RunStatus.CANCELLED:
        fields["finished_at"] = now
    fields.update(overrides)
    return JobRun(**fields)


def job_id_at(instant: datetime) -> str:
    """A ULID whose time part is ``instant`` (new_ulid is monotonic per process, so it would
    not go back to an earlier instant)."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return ulid_floor(instant)[:10] + "".join(secrets.choice(alphabet) for _ in range(16))


def new_token() -> str:
    return uuid.uuid4().hex
