"""The Store protocol: durable state for jobs, runs, run events and watcher bookkeeping.

Concurrency contract (every backend must honour it; ``tests/conformance`` proves it):

* Every run transition is a compare-and-set on ``status`` (and, for a RUNNING run, on its
  ``lease_token``). A call whose guard does not hold changes nothing and reports so (``None`` /
  ``False``); it never raises for a lost race.
* ``runs_claim_due`` may be called concurrently for the same shard by several watchers: a PENDING
  run is moved to ENQUEUED (or SKIPPED) by exactly one of them.
* ``run_claim`` hands an attempt to at most one worker at a time: it succeeds for ENQUEUED and
  RETRYING runs, and for a RUNNING run whose lease has expired (its worker is presumed dead). It
  bumps ``attempt`` and installs a fresh fencing token; any later write carrying the old token
  (a zombie worker) changes nothing.
* ``run_finish`` writes the terminal status and appends the RunEvent in ONE transaction.
* ``event_apply`` inserts the next run (insert-if-absent on the deterministic run id), updates the
  job's projection and advances the consumer's cursor in ONE transaction, guarded by the cursor's
  previous position, so an event applied twice or concurrently has its effect once.
* Shard leases: a shard has at most one owner whose lease has not expired. Membership rows
  (``members_heartbeat``) only say who is alive; ownership is always the lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from onthedot.domain.models import Job, JobRun, JobStatus, RunEvent, RunStatus


@dataclass(frozen=True)
class JobCreated:
    job: Job
    created: bool  # False: an earlier request with the same idempotency key already created it


@dataclass(frozen=True)
class JobListQuery:
    user_id: str
    status: JobStatus | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before_job_id: str | None = None  # keyset cursor: only jobs older than this one
    limit: int = 20


@dataclass(frozen=True)
class JobSave:
    """Replace a job's row and, atomically, its open runs.

    ``cancel_open_runs``: PENDING/ENQUEUED/RETRYING runs of scheduled kind become CANCELLED;
    with ``cancel_manual_runs`` also the extra runs asked for with "run now" (on delete).
    ``insert_run``: inserted if absent; a CANCELLED run with the same id is revived to PENDING
    (pause then resume before the occurrence comes back to the same run id).
    """

    job: Job
    cancel_open_runs: bool = False
    cancel_manual_runs: bool = False
    insert_run: JobRun | None = None


@dataclass(frozen=True)
class DueClaim:
    shard: int
    now: datetime
    limit: int
    misfire_grace_seconds: float
    # Runs whose scheduled_at is earlier than this instant are never looked at again once the
    # shard's watermark has passed their bucket; the watermark never passes this instant.
    watermark_margin_seconds: float = 300.0


@dataclass(frozen=True)
class DueClaimed:
    enqueued: list[JobRun]
    skipped: list[JobRun]


@dataclass(frozen=True)
class RunClaim:
    run_id: str
    token: str
    now: datetime
    lease_seconds: float


@dataclass(frozen=True)
class RunFinish:
    run_id: str
    token: str
    status: RunStatus  # SUCCEEDED or FAILED
    finished_at: datetime
    output: Any = None
    error: str | None = None
    dead_lettered: bool = False


@dataclass(frozen=True)
class RunRetry:
    run_id: str
    token: str
    error: str
    now: datetime


@dataclass(frozen=True)
class EventApply:
    consumer: str
    previous_event_id: int  # the cursor position this decision was made from
    event: RunEvent
    insert_run: JobRun | None
    job_status: JobStatus | None  # new stored status, or None to leave it
    next_run_at: datetime | None
    set_next_run_at: bool  # distinguish "clear next_run_at" from "leave it"


class Store(Protocol):
    async def migrate(self) -> None:
        """Apply pending migrations; safe to call concurrently from several processes."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise BackendError when the database does not answer."""
        ...

    async def maintain(self, now: datetime) -> None:
        """Periodic housekeeping, safe to run from several processes (PostgreSQL: create the
        coming days' partitions, drop those past retention). Watchers call it hourly."""
        ...

    async def due_notice_wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for another process's signal that a run became due
        soon (PostgreSQL: LISTEN/NOTIFY, sent when a PENDING run due within a few seconds is
        inserted). Backends without cross-process signals wait out the timeout and return False.
        """
        ...

    # --- jobs (viewing path: always scoped by user) --------------------------------------
    async def job_create(self, job: Job, first_run: JobRun | None) -> JobCreated:
        """Insert the job and its first run in one transaction. When (user_id, idempotency_key)
        exists already, return that job with created=False (the caller compares request_hash)."""
        ...

    async def job_get(self, user_id: str, job_id: str) -> Job | None: ...

    async def job_get_any(self, job_id: str) -> Job | None:
        """Unscoped lookup for the execution path (workers, watchers)."""
        ...

    async def jobs_list(self, query: JobListQuery) -> list[Job]:
        """Newest first (job_id descending)."""
        ...

    async def job_save(self, save: JobSave) -> None: ...

    # --- runs ----------------------------------------------------------------------------
    async def run_insert(self, run: JobRun) -> bool:
        """Insert if absent; False when a run with that id exists."""
        ...

    async def run_get(self, run_id: str) -> JobRun | None: ...

    async def runs_list(self, job_id: str, limit: int,
                        before_scheduled_at: datetime | None) -> list[JobRun]:
        """A job's runs, newest scheduled_at first (keyset pagination on scheduled_at)."""
        ...

    async def runs_claim_due(self, claim: DueClaim) -> DueClaimed:
        """Move due PENDING runs of one shard to ENQUEUED (or SKIPPED, with a RunEvent, when they
        are later than the misfire grace and their job says ``skip``). Reads only the shard's
        partitions from its watermark up to now, and advances the watermark past drained buckets."""
        ...

    async def runs_stale_enqueued(self, shard: int, older_than: datetime, now: datetime,
                                  limit: int) -> list[JobRun]:
        """ENQUEUED runs published before ``older_than`` (the publish may have been lost):
        touch their enqueued_at to ``now`` and return them for republishing."""
        ...

    async def shard_watermark(self, shard: int) -> int | None:
        """The earliest time bucket of the shard that may still hold PENDING runs."""
        ...

    async def run_claim(self, claim: RunClaim) -> JobRun | None: ...

    async def run_extend_lease(self, run_id: str, token: str, lease_expires_at: datetime) -> bool:
        ...

    async def run_release(self, run_id: str, token: str, now: datetime) -> bool:
        """RUNNING (with this token) -> ENQUEUED, the interrupted attempt not counted: a worker
        shutting down hands the run back so another can start it at once."""
        ...

    async def run_retry(self, retry: RunRetry) -> bool:
        """RUNNING (with this token) -> RETRYING, keeping the error of the failed attempt."""
        ...

    async def run_finish(self, finish: RunFinish) -> RunEvent | None:
        """RUNNING (with this token) -> terminal, plus its RunEvent, atomically."""
        ...

    async def run_redrive(self, run_id: str, now: datetime) -> JobRun | None:
        """A dead-lettered FAILED run -> ENQUEUED with attempt 0, ready to be published again."""
        ...

    async def runs_dead_lettered(self, user_id: str, limit: int,
                                 before_run_id: str | None) -> list[JobRun]: ...

    async def runs_count_by_status(self) -> dict[RunStatus, int]: ...

    # --- events and the recurring watcher's cursor ---------------------------------------
    async def events_after(self, event_id: int, limit: int) -> list[RunEvent]: ...

    async def cursor_get(self, consumer: str) -> int: ...

    async def event_apply(self, apply: EventApply) -> bool:
        """False (and nothing written) when the cursor has moved since ``previous_event_id``."""
        ...

    # --- shard ownership for several watchers ---------------------------------------------
    async def shard_leases_acquire(self, owner: str, shards: list[int], now: datetime,
                                   ttl_seconds: float) -> list[int]:
        """Take or renew each listed shard that is free, expired or already ours; return the
        shards now owned by ``owner``."""
        ...

    async def shard_leases_release(self, owner: str) -> None: ...

    async def shard_owners(self, now: datetime) -> dict[int, str]: ...

    async def members_heartbeat(self, group: str, member: str, now: datetime,
                                ttl_seconds: float) -> list[str]:
        """Record that ``member`` of ``group`` (e.g. all watchers) is alive until now + ttl;
        return the live members, sorted. Watchers split shards over this list; the first
        live member of the ``recurring`` group is its leader."""
        ...

    async def members_leave(self, group: str, member: str) -> None: ...

    # --- API tokens (stored hashed) -------------------------------------------------------
    async def token_add(self, token_hash: str, user_id: str, now: datetime) -> None: ...

    async def token_user(self, token_hash: str) -> str | None: ...

    async def tokens_exist(self) -> bool: ...
