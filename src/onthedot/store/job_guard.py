"""The job guard of the run transitions that start or resume work, shared by both backends.

A run may start an attempt, be put up for a retry, be handed back to the queue or be redriven
only while its job lets it run:

* a run of kind ``scheduled`` needs its job not paused and not cancelled (deleted);
* a run of kind ``manual`` ("run now") needs its job not cancelled: an explicit run-now is
  honoured on a paused job, with its retries; a delete stops it.

The guard is checked in SQL, in the statement (PostgreSQL: with the job's row locked FOR
SHARE, which a pause's or delete's UPDATE of the job waits for) or the write transaction
(SQLite) that makes the transition, never from an earlier read. A run the guard stops ends
CANCELLED with one of the reasons below in ``error``, and no RunEvent: a paused or deleted job
gets no next occurrence from it, and a resume inserts (or revives) its next run itself.
"""

from __future__ import annotations

from typing import Any

PAUSED = "paused"
DELETED = "deleted"


def _reason(status: str, what: str) -> str:
    return f"cancelled: the job was {status} {what}"


def stop_params(what: str, detail: str | None = None) -> dict[str, str]:
    """The two reasons a guarded statement chooses from by the job's locked status:
    ``paused_error`` and ``deleted_error``, e.g. "cancelled: the job was paused while the
    attempt ran (the attempt failed: HTTP 500)"."""
    suffix = "" if detail is None else f" ({detail})"
    return {"paused_error": _reason(PAUSED, what) + suffix,
            "deleted_error": _reason(DELETED, what) + suffix}


def retry_stop_params(error: str) -> dict[str, Any]:
    """A failed attempt of a stopped run is not retried."""
    return stop_params("while the attempt ran; not retried", f"the attempt failed: {error}")


RELEASE_STOP = stop_params("while the attempt ran; not handed back",
                           "the attempt was interrupted by a worker shutdown")
# Claims, rescues and hand-backs: the run (queued, retrying, or whose worker died) does not get
# its next attempt.
NEXT_ATTEMPT_STOP = stop_params("before the run's next attempt")
