"""Attempt and job-change records to SQL parameters and back (see codec.py).

Parameters carry timestamps as the SQLite text format; the PostgreSQL store replaces them with
native datetimes (``delivery_rows.native_times``). Rows from either backend map through the
same functions.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from onthedot.db.timestamps import ts
from onthedot.domain.history import (
    ERROR_MAX_CHARS,
    AttemptStatus,
    ChangeAction,
    JobChange,
    RunAttempt,
    bounded,
    preview_of,
)
from onthedot.store.codec import Row, _as_dt, _need_dt


def attempt_end_params(run_id: str, token: str, status: AttemptStatus, now: datetime,
                       error: str | None = None, output: Any = None,
                       stored_output: str | None = None) -> dict[str, Any]:
    """attempt_end's parameters: the error and the output bounded (the run keeps them whole);
    ``stored_output`` is the output as the run stores it (``dump_output``)."""
    return {"a_run_id": run_id, "a_token": token, "a_status": status.value, "a_now": ts(now),
            "a_error": bounded(error, ERROR_MAX_CHARS),
            "a_preview": preview_of(output, stored_output)}


def attempt_from_row(row: Row) -> RunAttempt:
    return RunAttempt(run_id=row["run_id"], attempt=int(row["attempt"]),
                      status=AttemptStatus(row["status"]),
                      started_at=_need_dt(row["started_at"]),
                      finished_at=_as_dt(row["finished_at"]), error=row["error"],
                      preview=row["preview"])


def change_params(change: JobChange) -> dict[str, Any]:
    return {"change_id": change.change_id, "job_id": change.job_id, "actor": change.actor,
            "channel": change.channel, "action": change.action.value,
            "details": json.dumps(change.details, ensure_ascii=False),
            "changed_at": ts(change.changed_at)}


def change_from_row(row: Row) -> JobChange:
    details = row["details"]
    return JobChange(change_id=row["change_id"], job_id=row["job_id"], actor=row["actor"],
                     channel=row["channel"], action=ChangeAction(row["action"]),
                     changed_at=_need_dt(row["changed_at"]),
                     details=json.loads(details) if isinstance(details, str) else details)
