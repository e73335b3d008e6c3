"""Turning records into SQL parameters and rows back into records (text timestamps, JSON).

Reading never fails on the JSON a user gave (action, retry policy) or an action produced
(output): a row written before today's limits, or damaged by hand, must not take down a user's
whole listing nor block the DELETE that would clean it up. What cannot be shown is replaced, and
a warning is logged:

* an action that is not a JSON object with a ``type``, or breaks what the service enforces on
  writes (nesting, finite numbers, storable text) -> ``{"type": "unreadable", "reason": ...}``;
  the worker fails such a run (no action is called that), and a PATCH must give a new action;
* a retry policy that cannot be read -> the default policy;
* a run output that is not JSON or nests too deeply -> ``{"unreadable": reason}`` (such an
  output is also stored that way: ``dump_output`` checks what an endpoint answered).
"""

from __future__ import annotations

import json
import logging
import math
from datetime import datetime
from typing import Any, Protocol

from onthedot.db.timestamps import parse_ts, ts
from onthedot.domain.jsonvalue import MAX_JSON_DEPTH, first_problem, storable_text
from onthedot.domain.models import (
    MAX_ACTION_DEPTH,
    Job,
    JobParams,
    JobRun,
    JobStatus,
    RetryPolicy,
    RunEvent,
    RunStatus,
    default_notify,
)
from onthedot.store.base import FeedState, FeedStatesPut

UNREADABLE_ACTION = "unreadable"  # the type shown for a stored action that cannot be shown

log = logging.getLogger("onthedot.store")


class Row(Protocol):
    """sqlite3.Row and psycopg's dict rows both index by column name."""

    def __getitem__(self, key: str, /) -> Any: ...


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
        "flexible_window_seconds": job.params.flexible_window_seconds,
        "status": job.status.value,
        "retry_policy": json.dumps(job.retry_policy.to_dict()),
        "misfire_policy": job.misfire_policy,
        "overlap_policy": job.overlap_policy,
        "timeout_seconds": job.timeout_seconds,
        "idempotency_key": job.idempotency_key,
        "request_hash": job.request_hash,
        "next_run_at": ts(job.next_run_at),
        "last_run_id": job.last_run_id,
        "created_at": ts(job.created_at),
        "updated_at": ts(job.updated_at),
        "version": job.version,
        "notify_channels": json.dumps(job.notify, ensure_ascii=False),
    }


def job_from_row(row: Row) -> Job:
    return Job(
        job_id=row["job_id"],
        user_id=row["user_id"],
        name=row["name"],
        action=_action_of(row["job_id"], row["action"]),
        params=JobParams(
            type=row["job_type"],
            time=row["run_time"],
            schedule=row["schedule"],
            timezone=row["timezone"],
            flexible_window_seconds=int(row["flexible_window_seconds"]),
        ),
        status=JobStatus(row["status"]),
        retry_policy=_retry_policy_of(row["job_id"], row["retry_policy"]),
        misfire_policy=row["misfire_policy"],
        overlap_policy=row["overlap_policy"],
        timeout_seconds=float(row["timeout_seconds"]),
        idempotency_key=row["idempotency_key"],
        request_hash=row["request_hash"],
        next_run_at=_as_dt(row["next_run_at"]),
        last_run_id=row["last_run_id"],
        created_at=_need_dt(row["created_at"]),
        updated_at=_need_dt(row["updated_at"]),
        version=int(row["version"]),
        notify=_notify_of(row["job_id"], row["notify"]),
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
    """An action's output as stored JSON. What an endpoint answered is not ours to trust: text
    that UTF-8 (or PostgreSQL) cannot hold, or absurd nesting, is stored as unreadable rather
    than failing the write that finishes the run."""
    if output is None:
        return None
    problem = first_problem(output, "output", max_depth=MAX_JSON_DEPTH)
    if problem is not None and problem.kind != "number":
        output = {"unreadable": f"the output cannot be stored: {problem.detail}"}
    return json.dumps(output, ensure_ascii=False)


def run_from_row(row: Row) -> JobRun:
    output = _output_of(row["run_id"], row["output"])
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


def feed_state_params(put: FeedStatesPut, state: FeedState) -> dict[str, Any]:
    return {
        "job_id": put.job_id,
        "run_id": put.run_id,
        "feed_url": state.feed_url,
        # Validators and item keys are what a feed's server sent: made storable here.
        "etag": None if state.etag is None else storable_text(state.etag),
        "last_modified": (None if state.last_modified is None
                          else storable_text(state.last_modified)),
        "fetched_at": ts(state.fetched_at),
        "seen": json.dumps([storable_text(k) for k in state.seen], ensure_ascii=False),
    }


def feed_state_from_row(row: Row) -> FeedState:
    """A state whose seen keys cannot be read keeps its validators and forgets the keys (the
    next digest may then repeat a few undated items, which beats failing it)."""
    try:
        seen = _loaded(row["seen"])
    except (ValueError, RecursionError):
        seen = None
    if not isinstance(seen, list) or not all(isinstance(k, str) for k in seen):
        log.warning("feed state of %s: the stored seen keys cannot be read", row["feed_url"])
        seen = []
    return FeedState(feed_url=row["feed_url"], fetched_at=_need_dt(row["fetched_at"]),
                     etag=row["etag"], last_modified=row["last_modified"], seen=tuple(seen))


def _loaded(value: Any) -> Any:
    """SQLite columns carry JSON text; PostgreSQL's jsonb arrives decoded."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _action_of(job_id: str, stored: Any) -> dict[str, Any]:
    try:
        action = _loaded(stored)
    except (ValueError, RecursionError):
        return _unreadable_action(job_id, "the stored action is not JSON")
    if not isinstance(action, dict) or not isinstance(action.get("type"), str):
        return _unreadable_action(job_id, "the stored action is not an object with a type")
    problem = first_problem(action, "action", max_depth=MAX_ACTION_DEPTH)
    if problem is not None:
        return _unreadable_action(job_id, f"the stored action cannot be shown: {problem.detail}")
    return action


def _unreadable_action(job_id: str, reason: str) -> dict[str, Any]:
    log.warning("job %s: %s", job_id, reason)
    return {"type": UNREADABLE_ACTION, "reason": reason}


def _retry_policy_of(job_id: str, stored: Any) -> RetryPolicy:
    try:
        data = _loaded(stored)
        policy = RetryPolicy(max_attempts=int(data["max_attempts"]),
                             backoff_seconds=float(data["backoff_seconds"]),
                             max_backoff_seconds=float(data["max_backoff_seconds"]))
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError):
        policy = None
    if policy is None or not (math.isfinite(policy.backoff_seconds)
                              and math.isfinite(policy.max_backoff_seconds)):
        log.warning("job %s: the stored retry policy cannot be read; using the default", job_id)
        return RetryPolicy()
    return policy


def _notify_of(job_id: str, stored: Any) -> list[dict[str, Any]]:
    """The job's channels; a list that cannot be read falls back to the inbox, which reaches
    the job's own user and no one else."""
    try:
        channels = _loaded(stored)
    except (ValueError, RecursionError):
        channels = None
    if isinstance(channels, list) and all(
            isinstance(c, dict) and isinstance(c.get("channel"), str) for c in channels):
        return channels
    log.warning("job %s: the stored notify channels cannot be read; using the inbox", job_id)
    return default_notify()


def _output_of(run_id: str, stored: Any) -> Any:
    reason = None
    try:
        output = _loaded(stored)
    except (ValueError, RecursionError):
        reason = "the stored output is not JSON"
    else:
        problem = first_problem(output, "output", max_depth=MAX_JSON_DEPTH)
        if problem is not None and problem.kind != "number":  # NaN is shown as null
            reason = f"the stored output cannot be shown: {problem.detail}"
    if reason is None:
        return output
    log.warning("run %s: %s", run_id, reason)
    return {"unreadable": reason}


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
