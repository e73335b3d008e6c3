"""Turning records into SQL parameters and rows back into records (text timestamps, JSON)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Protocol

from onthedot.domain.models import (
    Job,
    JobParams,
    JobRun,
    JobStatus,
    RetryPolicy,
    RunEvent,
    RunStatus,
)

TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class Row(Protocol):
    """sqlite3.Row and psycopg's dict rows both index by column name."""

    def __getitem__(self, key: str, /) -> Any: ...


def ts(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("naive datetime reached the store")
    return value.astimezone(UTC).strftime(TS_FORMAT)


def parse_ts(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.strptime(value, TS_FORMAT).replace(tzinfo=UTC)


def need_ts(value: str) -> datetime:
    parsed = parse_ts(value)
    assert parsed is not None
    return parsed


def job_to_params(job: Job) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "user_id": job.user_id,
        "name": job.name,
        "action": json.dumps(job.action, ensure_ascii=False),
        "job_type": job.params.type,
        "schedule": job.params.schedule,
        "run_time": job.params.time,
        "timezone": job.params.timezone,
        "status": job.status.value,
        "retry_policy": json.dumps(job.retry_policy.to_dict()),
        "misfire_policy": job.misfire_policy,
        "timeout_seconds": job.timeout_seconds,
        "idempotency_key": job.idempotency_key,
        "request_hash": job.request_hash,
        "next_run_at": ts(job.next_run_at),
        "last_run_id": job.last_run_id,
        "created_at": ts(job.created_at),
        "updated_at": ts(job.updated_at),
        "version": job.version,
    }


def job_from_row(row: Row) -> Job:
    retry = row["retry_policy"]
    retry = json.loads(retry) if isinstance(retry, str) else retry
    action = row["action"]
    action = json.loads(action) if isinstance(action, str) else action
    return Job(
        job_id=row["job_id"],
        user_id=row["user_id"],
        name=row["name"],
        action=action,
        params=JobParams(
            type=row["job_type"],
            time=row["run_time"],
            schedule=row["schedule"],
            timezone=row["timezone"],
        ),
        status=JobStatus(row["status"]),
        retry_policy=RetryPolicy(**retry),
        misfire_policy=row["misfire_policy"],
        timeout_seconds=float(row["timeout_seconds"]),
        idempotency_key=row["idempotency_key"],
        request_hash=row["request_hash"],
        next_run_at=_as_dt(row["next_run_at"]),
        last_run_id=row["last_run_id"],
        created_at=_need_dt(row["created_at"]),
        updated_at=_need_dt(row["updated_at"]),
        version=int(row["version"]),
    )


def run_to_params(run: JobRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "job_id": run.job_id,
        "time_bucket": run.time_bucket,
        "shard": run.shard,
        "scheduled_at": ts(run.scheduled_at),
        "kind": run.kind,
        "status": run.status.value,
        "attempt": run.attempt,
        "lease_token": run.lease_token,
        "lease_expires_at": ts(run.lease_expires_at),
        "enqueued_at": ts(run.enqueued_at),
        "started_at": ts(run.started_at),
        "finished_at": ts(run.finished_at),
        "output": dump_output(run.output),
        "error": run.error,
        "dead_lettered": int(run.dead_lettered),
        "retry_at": ts(run.retry_at),
    }


def dump_output(output: Any) -> str | None:
    return None if output is None else json.dumps(output, ensure_ascii=False)


def run_from_row(row: Row) -> JobRun:
    output = row["output"]
    if isinstance(output, str):
        output = json.loads(output)
    return JobRun(
        run_id=row["run_id"],
        job_id=row["job_id"],
        scheduled_at=_need_dt(row["scheduled_at"]),
        time_bucket=int(row["time_bucket"]),
        shard=int(row["shard"]),
        status=RunStatus(row["status"]),
        kind=row["kind"],
        attempt=int(row["attempt"]),
        lease_token=row["lease_token"],
        lease_expires_at=_as_dt(row["lease_expires_at"]),
        enqueued_at=_as_dt(row["enqueued_at"]),
        started_at=_as_dt(row["started_at"]),
        finished_at=_as_dt(row["finished_at"]),
        output=output,
        error=row["error"],
        dead_lettered=bool(row["dead_lettered"]),
        retry_at=_as_dt(row["retry_at"]),
    )


def event_from_row(row: Row) -> RunEvent:
    return RunEvent(
        event_id=int(row["event_id"]),
        job_id=row["job_id"],
        run_id=row["run_id"],
        status=RunStatus(row["status"]),
        emitted_at=_need_dt(row["emitted_at"]),
    )


def _as_dt(value: Any) -> datetime | None:
    """Rows from SQLite carry text, rows from PostgreSQL carry datetimes."""
    if value is None or isinstance(value, datetime):
        return value
    return parse_ts(value)


def _need_dt(value: Any) -> datetime:
    result = _as_dt(value)
    if result is None:
        raise ValueError("missing timestamp in row")
    return result
