"""What a user can read back about the past: every attempt of a run, and every change of a job.

An attempt's life, written by the store in the transaction of the run's own transition::

    run_claim ──► running ──► succeeded     run_finish SUCCEEDED
                          ├─► failed        run_retry, or run_finish FAILED
                          ├─► released      run_release (worker shut down; not counted)
                          └─► lost          its lease expired and the run was claimed again or
                                            requeued by the rescuer (the worker crashed)

A job change is one row per effective change (create, update, pause, resume, run, delete,
redrive), written in the transaction of the change itself. No I/O here.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PREVIEW_MAX_CHARS = 500  # of an attempt's output, as text: enough to recognise it
ERROR_MAX_CHARS = 2000  # of an attempt's error
LOST_ERROR = "lost: the worker stopped renewing its lease (it crashed or was cut off)"
RELEASED_ERROR = "released: the worker shut down before the attempt ended; not counted"

# What a database cannot store in text: unpaired surrogates (UTF-8) and NUL (PostgreSQL).
_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")

# The edge a change came through (api, mcp, chat, cli); each edge sets it for its requests.
acting_channel: ContextVar[str | None] = ContextVar("onthedot_acting_channel", default=None)


class AttemptStatus(enum.StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RELEASED = "released"
    LOST = "lost"


@dataclass(frozen=True)
class RunAttempt:
    run_id: str
    attempt: int  # the run's attempt number (a redrive starts again at 1)
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    preview: str | None = None  # the start of the output, at most PREVIEW_MAX_CHARS


class ChangeAction(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    RUN = "run"
    DELETE = "delete"
    REDRIVE = "redrive"
    SKIP = "skip"  # skip next: the next occurrence marked SKIPPED, the following kept
    BACKFILL = "backfill"  # past occurrences run now


@dataclass(frozen=True)
class JobChange:
    change_id: str  # ULID: sorts by time
    job_id: str
    actor: str  # the user who made the change (the token's user, or "local")
    action: ChangeAction
    changed_at: datetime
    channel: str | None = None  # api | mcp | chat | cli; None when not known
    # update: {field: {"old": ..., "new": ...}}; run and redrive: {"run_id": ...}
    details: dict[str, Any] = field(default_factory=dict)


def preview_of(output: Any, stored: str | None) -> str | None:
    """The start of an output as text: a string as it is, anything else as its stored JSON
    (``stored``, which the store has already made storable)."""
    return bounded(output if isinstance(output, str) else stored, PREVIEW_MAX_CHARS)


def bounded(text: str | None, limit: int) -> str | None:
    """At most ``limit`` characters of ``text``, each one a database can store (an unpaired
    surrogate or a NUL becomes U+FFFD: this is a preview, not the record)."""
    if text is None:
        return None
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _UNSTORABLE.sub("\ufffd", text)


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """{field: {"old": ..., "new": ...}} for every field whose value differs."""
    return {name: {"old": old.get(name), "new": new.get(name)}
            for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)}


__all__ = ["ERROR_MAX_CHARS", "LOST_ERROR", "PREVIEW_MAX_CHARS", "RELEASED_ERROR",
           "AttemptStatus", "ChangeAction", "JobChange", "RunAttempt", "acting_channel",
           "bounded", "field_changes", "preview_of"]
