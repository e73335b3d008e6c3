"""The Store protocol: durable state for jobs, runs, run events and watcher bookkeeping.

``Store`` is composed of facets, one per thing the store serves: ``LifecycleStore``,
``JobStore``, ``RunStore``, ``DueStore`` (the watcher), ``RescueStore`` (the rescuer),
``EventStore`` (the recurring watcher), ``LeaseStore`` (shard leases and members),
``DeliveryStore``, ``InboxStore``, ``HistoryStore`` (attempts and job changes), ``TokenStore``
and ``FeedStateStore`` (actions). Each facet's docstring states its concurrency contract; every
backend honours all of them, and ``tests/conformance`` proves it. Two rules hold throughout: a
decision is made inside the transaction that acts on it, or guarded in SQL by the state it was
made from; and a call that loses a race changes nothing and says so (``None`` / ``False``)
instead of raising.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from onthedot.domain.delivery import (
    Delivery,
    DeliveryClaim,
    DeliveryDone,
    DeliveryRetryClaim,
    InboxCursor,
    InboxItem,
    WebhookSecret,
)
from onthedot.domain.errors import ConflictError
from onthedot.domain.history import JobChange, RunAttempt
from onthedot.domain.models import Job, JobRun, JobStatus, RunEvent, RunStatus

# The watermark never passes now minus this: a run inserted slightly in the past is still found.
WATERMARK_MARGIN_SECONDS = 300.0
# An inserted run older than now minus this might be passed by a watcher's walk that is running
# at the same moment; its insert bumps the shard's watermark generation (half the margin leaves
# the other half for transaction time and clock skew between processes).
WATERMARK_TOUCH_SECONDS = WATERMARK_MARGIN_SECONDS / 2


# runs_oldest_due looks at this many of the oldest queued runs (a bounded scrape whatever the
# backlog; queued runs leave roughly in the order they were queued)
OLDEST_DUE_ENQUEUED_CAP = 1000


@dataclass(frozen=True)
class JobCreated:
    job: Job
    created: bool  # False: an earlier request with the same idempotency key already created it
    over_quota: bool = False  # not created: the user's active-job quota is reached (0007)


@dataclass(frozen=True)
class JobInsert:
    """One item of ``jobs_insert_many``: what ``job_create`` takes."""

    job: Job
    first_run: JobRun | None
    # The user's active-job quota (scheduled + paused jobs), checked in the inserting
    # transaction; None: no limit.
    max_active: int | None = None


@dataclass(frozen=True)
class JobListQuery:
    user_id: str
    status: JobStatus | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before_job_id: str | None = None  # keyset cursor: only jobs older than this one
    limit: int = 20


SKIP_ERROR = "skipped on request"  # the error of a run "skip next" marked SKIPPED


def skip_refused(run: JobRun) -> ConflictError:
    """A skip whose run a watcher took between the read and the save."""
    return ConflictError(f"the next run ({run.scheduled_at.isoformat()}) has already started",
                         code="run_started", field="status",
                         expected="a job whose next run has not started yet")


@dataclass(frozen=True)
class JobSave:
    """Replace a job's row and, atomically, its open runs: a compare-and-set on ``job.version``
    (the version the caller read); the stored row gets version + 1.

    ``cancel_open_runs``: PENDING/ENQUEUED/RETRYING runs of scheduled kind become CANCELLED;
    with ``cancel_manual_runs`` also the extra runs asked for with "run now" (on delete).
    ``insert_run``: inserted if absent; a CANCELLED run with the same id is revived to PENDING
    (pause then resume before the occurrence comes back to the same run id).
    ``skip_run``: the job's next scheduled run, still PENDING, becomes SKIPPED (error
    ``SKIP_ERROR``) and gets its RunEvent; when it is no longer PENDING (a watcher took it) the
    save raises ConflictError ``run_started`` and writes nothing.
    ``backfill_runs``: extra runs (kind manual) inserted if absent: an instant that has a run
    already keeps that run as it is.
    ``max_active``: the save makes a finished job active again (a new schedule): it lands only
    while the user has at most this many active jobs with it, counted under the per-user lock
    creates take; otherwise ``job_save`` raises QuotaError and writes nothing.
    """

    job: Job
    cancel_open_runs: bool = False
    cancel_manual_runs: bool = False
    insert_run: JobRun | None = None
    skip_run: JobRun | None = None
    backfill_runs: tuple[JobRun, ...] = ()
    change: JobChange | None = None  # the job's history entry, written only with the change
    max_active: int | None = None  # the user's active-job quota; None: not checked


@dataclass(frozen=True)
class DueClaim:
    shard: int
    now: datetime
    limit: int
    misfire_grace_seconds: float
    # Runs whose scheduled_at is earlier than this instant are never looked at again once the
    # shard's watermark has passed their bucket; the watermark never passes this instant.
    watermark_margin_seconds: float = WATERMARK_MARGIN_SECONDS
    # The fencing token of the caller's shard lease (``ShardLease.token``): the claim changes
    # nothing unless it is still the shard's current token. None: unfenced (one-off tools and
    # tests that own the database alone); the watcher always passes its token.
    lease_token: int | None = None


@dataclass(frozen=True)
class DueClaimed:
    enqueued: list[JobRun]
    skipped: list[JobRun]
    lease_lost: bool = False  # the claim's lease token is no longer the shard's: nothing claimed


@dataclass(frozen=True)
class ShardLease:
    """One shard a watcher holds, as ``shard_leases_acquire`` reports it."""

    shard: int
    # The tenure's fencing token: it goes up whenever the shard changes hands or its lease
    # lapsed, and stays while the same owner renews in time. Due claims pass it
    # (``DueClaim.lease_token``).
    token: int
    # Set when this call took the shard from a lease that lapsed without being released (its
    # holder died or stalled): that holder's member id (possibly the caller's own).
    taken_from: str | None = None


@dataclass(frozen=True)
class RunClaim:
    run_id: str
    token: str
    now: datetime
    lease_seconds: float


@dataclass(frozen=True)
class ClaimedRun:
    """A claim that held: the run as it now is (RUNNING, the claim's token) and its job as
    the claim's transaction read it under the job guard (None when the job row is gone)."""

    run: JobRun
    job: Job | None


@dataclass(frozen=True)
class RunFinish:
    run_id: str
    token: str
    status: RunStatus  # SUCCEEDED or FAILED
    finished_at: datetime
    output: Any = None
    error: str | None = None
    dead_lettered: bool = False
    inbox: InboxItem | None = None  # SUCCEEDED: the run's inbox item, written with the result


@dataclass(frozen=True)
class RunRetry:
    run_id: str
    token: str
    error: str
    now: datetime
    retry_at: datetime  # when the rescuer hands the run back for its next attempt


@dataclass(frozen=True)
class EventApply:
    consumer: str
    previous_event_id: int  # the cursor position this decision was made from
    event: RunEvent
    job_version: int | None  # the job version this decision was made from; None: no job
    insert_run: JobRun | None
    # New stored status, or None to leave it. A job ends (completed, failed) only while none of
    # its scheduled runs is open, and with ``wait_for_manual_runs`` none of its run-now runs
    # either; otherwise neither its status nor its next_run_at is written (the open run's own
    # event decides later).
    job_status: JobStatus | None
    next_run_at: datetime | None
    set_next_run_at: bool  # distinguish "clear next_run_at" from "leave it"
    wait_for_manual_runs: bool = False


class ApplyResult(enum.Enum):
    APPLIED = "applied"
    CURSOR_MOVED = "cursor_moved"  # another consumer applied this event: start over from there
    JOB_CHANGED = "job_changed"  # the job changed since the decision: decide again


@dataclass(frozen=True)
class EventsApplied:
    """What ``events_apply`` did with a batch: its first ``applied`` events are applied (the
    cursor is at the last of them); ``result`` is APPLIED when all were, else why the next one
    was not (CURSOR_MOVED: nothing of the batch was written)."""

    applied: int
    result: ApplyResult


@dataclass(frozen=True)
class RunCounts:
    """Counts for a metrics scrape, each read through a partial index and capped."""

    open: dict[RunStatus, int]  # PENDING, ENQUEUED, RUNNING, RETRYING
    dead_lettered: int


@dataclass(frozen=True)
class Prune:
    """Delete history older than ``before``, at most ``limit`` rows of each kind per call."""

    before: datetime
    limit: int = 1000


@dataclass(frozen=True)
class Migrated:
    """What one ``migrate`` call did: the schema version before and after, and the versions it
    applied (none when another process had applied them, or nothing was pending)."""

    before: int
    after: int
    applied: tuple[int, ...] = ()


@dataclass(frozen=True)
class Pruned:
    runs: int = 0
    events: int = 0
    jobs: int = 0
    deliveries: int = 0
    inbox: int = 0
    attempts: int = 0

    @property
    def total(self) -> int:
        return self.runs + self.events + self.jobs + self.deliveries + self.inbox + self.attempts

    @property
    def largest(self) -> int:
        """The most rows of one kind: below the batch limit, nothing of any kind is left."""
        return max(self.runs, self.events, self.jobs, self.deliveries, self.inbox,
                   self.attempts)


@dataclass(frozen=True)
class InboxQuery:
    user_id: str
    limit: int
    after: InboxCursor | None = None  # keyset cursor: the last item of the previous page
    unread_only: bool = False


@dataclass(frozen=True)
class FeedState:
    """What a news digest remembers of one feed between two runs of a job: the validators for
    a conditional GET, when the feed was last read (or confirmed unchanged), and the keys of
    the items it held then (bounded, newest first)."""

    feed_url: str
    fetched_at: datetime
    etag: str | None = None
    last_modified: str | None = None
    seen: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiToken:
    """A bearer token as stored (its secret never is: only its SHA-256). ``scopes`` as given
    at creation: ``read``, ``write`` (implies read), ``admin`` (implies both)."""

    token_id: str
    user_id: str
    scopes: tuple[str, ...]
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class FeedStatesPut:
    """Replace the feed states written by ``run_id`` (an earlier attempt's are dropped) and
    delete every other state of the job except those of ``keep_run_id`` (the job's last
    succeeded run, still the one to read if this run does not succeed). Fenced like every
    write of an attempt: only while the run is RUNNING at ``attempt``, so a worker that lost
    its lease cannot overwrite what the attempt that took over wrote."""

    job_id: str
    run_id: str
    attempt: int
    keep_run_id: str | None
    states: tuple[FeedState, ...]


class FeedStateStore(Protocol):
    """The part of the store an action may use: per-job state kept between runs.

    States are written per run and read per run: an action reads the states written by the
    job's last SUCCEEDED run (``ActionContext.previous``), never those of an attempt whose
    result was not recorded, so a crash between fetching and recording cannot make a feed
    look already read."""

    async def feed_states_get(self, job_id: str, run_id: str) -> list[FeedState]:
        """The states ``run_id`` wrote for the job's feeds (none if it wrote none)."""
        ...

    async def feed_states_put(self, put: FeedStatesPut) -> bool:
        """One transaction (see ``FeedStatesPut``); False, with nothing written, when the run
        is no longer RUNNING at ``put.attempt``."""
        ...


class LifecycleStore(Protocol):
    """Opening, migrating and closing the database, and the settings pinned in it.

    * ``migrate`` is safe to call from several processes at once: migrations are applied in
      version order under one lock (SQLite's write lock, a PostgreSQL advisory lock), and one
      already applied is skipped.
    * ``deployment_pin`` is insert-if-absent: of two processes pinning different values, one
      wins and both read the winner's value (the loser refuses to start).
    """

    async def migrate(self) -> Migrated:
        """Apply pending migrations; safe to call concurrently from several processes."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise BackendError when the database does not answer."""
        ...

    async def deployment_pin(self, name: str, value: str) -> str:
        """Store ``value`` under ``name`` unless something is stored already; return what is
        stored. Settings that shape stored data (the shard count) are pinned this way."""
        ...


class JobStore(Protocol):
    """Jobs, on the viewing path (always scoped by user) and the execution path.

    * Every change of a job is a compare-and-set on its ``version``: ``job_save`` writes only
      when the stored version is still the one the caller read, and the stored row then carries
      version + 1. A lost race changes nothing and returns None; the caller re-reads and decides
      again. Cancelling and inserting the job's runs happen in the same transaction, so a paused
      or deleted job never keeps a PENDING run.
    * Creating is idempotent per (user_id, idempotency_key): a repeat returns the stored job
      with ``created=False``; concurrent creates with the same key insert one job.
    * ``job_create`` writes the job and its first run in ONE transaction; ``jobs_insert_many``
      writes every item it inserts (job, first run, watermark touch, wake-up) in ONE
      transaction, as ``job_create`` would one by one: a failure inserts none of them.
    * Both honour ``JobInsert.max_active``: the count of the user's scheduled and paused jobs
      and the inserts happen under one per-user lock (SQLite: the write lock; PostgreSQL: an
      advisory transaction lock), so concurrent creates never pass the quota together. A
      refused item is answered ``over_quota`` and not written; an item whose idempotency key
      is held is a replay and never counts against the quota. ``job_save`` with
      ``JobSave.max_active`` and ``run_redrive`` with ``max_active`` (the two ways a finished
      job becomes active again) count under the same lock and raise QuotaError, with nothing
      written, past the quota: distinct from a lost compare-and-set (None).
    * ``jobs_reassign`` moves every job of a user (and its inbox items) in ONE transaction, or
      nothing.
    """

    async def job_create(self, job: Job, first_run: JobRun | None) -> JobCreated:
        """Insert the job and its first run in one transaction. When (user_id, idempotency_key)
        exists already, return that job with created=False (the caller compares request_hash)."""
        ...

    async def jobs_insert_many(self, items: Sequence[JobInsert]) -> list[JobCreated]:
        """``job_create`` for every item, in order, in ONE transaction: multi-row inserts of
        the jobs and their first runs, the watermark touches and the watchers' wake-up. The
        results are in the order of ``items``. An item whose (user_id, idempotency_key) is held
        by a stored job, or by an earlier item of the same call, is not inserted: its result is
        the job holding the key with created=False (the caller compares request_hash). When any
        statement fails, nothing of any item is written and the error propagates."""
        ...

    async def job_get(self, user_id: str, job_id: str) -> Job | None: ...

    async def job_get_any(self, job_id: str) -> Job | None:
        """Unscoped lookup for the execution path (workers, watchers)."""
        ...

    async def jobs_get_any_many(self, job_ids: Sequence[str]) -> dict[str, Job]:
        """``job_get_any`` for many ids in one read: the jobs that exist, by id (the recurring
        watcher reads the jobs of a whole batch of events at once)."""
        ...

    async def jobs_list(self, query: JobListQuery) -> list[Job]:
        """Newest first (job_id descending)."""
        ...

    async def job_save(self, save: JobSave) -> Job | None:
        """The stored job (version + 1), or None when its version moved or it is gone;
        QuotaError (nothing written) when ``save.max_active`` is passed."""
        ...

    async def jobs_count_of_user(self, user_id: str) -> int:
        """Every stored job of the user, whatever its status."""
        ...

    async def jobs_count_active(self, user_id: str, cap: int) -> int:
        """The user's scheduled and paused jobs, counted up to ``cap``."""
        ...

    async def jobs_reassign(self, from_user: str, to_user: str, now: datetime) -> int:
        """Give every job of ``from_user`` (and its inbox items) to ``to_user`` in ONE
        transaction; the number of jobs moved. ConflictError, with nothing moved, when a job
        of ``from_user`` has an idempotency key that ``to_user`` uses already."""
        ...


class RunStore(Protocol):
    """Runs: reading them, and the transitions of one attempt (claim, lease, finish).

    * Every run transition is a compare-and-set on ``status`` (and, for a RUNNING run, on its
      ``lease_token``). A call whose guard does not hold changes nothing and reports so
      (``None`` / ``False``); it never raises for a lost race.
    * ``run_claim`` hands an attempt to at most one worker at a time: it succeeds for an
      ENQUEUED run and for a RUNNING run whose lease has expired (its worker is presumed dead).
      It bumps ``attempt`` and installs a fresh fencing token; any later write carrying the old
      token (a zombie worker) changes nothing. A RETRYING run is not claimable: it waits in the
      store until ``runs_retry_due`` hands it back at its ``retry_at`` (the queue only holds due
      runs).
    * ``run_finish`` writes the terminal status and appends the RunEvent in ONE transaction;
      with the inbox channel it also writes the run's inbox item and its DELIVERED row there, so
      only the attempt holding the run writes it and it exists exactly when the success does.
    * ``run_insert`` is insert-if-absent on the deterministic run id: inserting the same
      occurrence twice is a no-op.
    * The job guard (``store/job_guard.py``): ``run_claim``, ``run_retry``, ``run_release``,
      ``run_redrive`` and the rescuer's ``runs_retry_due`` and ``run_requeue`` start or resume
      work only for a run whose job lets it run: a run of kind ``scheduled`` needs its job
      neither paused nor cancelled, a ``manual`` run ("run now") needs it not cancelled. The
      guard is read in the statement (PostgreSQL: the job's row locked FOR SHARE, so a pause
      committing at the same moment is either seen or waits) or write transaction (SQLite) of
      the transition. A run it stops ends CANCELLED with the reason in ``error`` and no
      RunEvent; a dead letter it stops is not redriven. ``run_finish`` is not guarded: an
      attempt that was running when its job was paused records its result.
    """

    async def run_insert(self, run: JobRun) -> bool:
        """Insert if absent; False when a run with that id exists. Prefer ``job_save`` with
        ``insert_run`` when the insert depends on the job's state."""
        ...

    async def run_get(self, run_id: str) -> JobRun | None: ...

    async def runs_get_many(self, run_ids: Sequence[str]) -> dict[str, JobRun]:
        """``run_get`` for many ids in one read: the runs that exist, by id."""
        ...

    async def run_last_succeeded(self, job_id: str, before: datetime) -> JobRun | None:
        """The job's SUCCEEDED run with the latest ``scheduled_at`` earlier than ``before``
        (scheduled or run-now), or None: what an action knows of the job's history."""
        ...

    async def runs_list(self, job_id: str, limit: int,
                        before_scheduled_at: datetime | None) -> list[JobRun]:
        """A job's runs, newest scheduled_at first (keyset pagination on scheduled_at)."""
        ...

    async def run_claim(self, claim: RunClaim) -> JobRun | None:
        """ENQUEUED, or RUNNING with an expired lease -> RUNNING with attempt + 1 and the new
        token. Under the job guard: such a run of a job that stops it -> CANCELLED (the
        expired attempt ends as lost), answered None like any refused claim."""
        ...

    async def run_claim_job(self, claim: RunClaim) -> ClaimedRun | None:
        """``run_claim``, answering the run's job too, read in the claim's own statement
        (PostgreSQL) or transaction (SQLite): what a worker needs to start the attempt, without
        a read of its own. Claims, finishes and retries that arrive together are written as
        one set-based statement per kind (store/run_batches.py), each keeping its own guard
        and getting its own answer."""
        ...

    async def run_extend_lease(self, run_id: str, token: str, lease_expires_at: datetime) -> bool:
        ...

    async def run_release(self, run_id: str, token: str, now: datetime) -> RunStatus | None:
        """RUNNING (with this token) -> ENQUEUED, the interrupted attempt not counted: a worker
        shutting down hands the run back so another can start it at once. Under the job guard:
        -> CANCELLED. The status the run moved to, or None (fenced: not held with this
        token)."""
        ...

    async def run_retry(self, retry: RunRetry) -> RunStatus | None:
        """RUNNING (with this token) -> RETRYING until ``retry_at``, keeping the error of the
        failed attempt. Under the job guard: -> CANCELLED (finished_at = ``retry.now``), the
        reason and the attempt's error in ``error``. The status the run moved to, or None
        (fenced: not held with this token)."""
        ...

    async def run_finish(self, finish: RunFinish) -> RunEvent | None:
        """RUNNING (with this token) -> terminal, plus its RunEvent and (``inbox``) the run's
        inbox item with its DELIVERED row, atomically."""
        ...

    async def run_redrive(self, run_id: str, now: datetime, change: JobChange | None = None,
                          *, max_active: int | None = None) -> JobRun | None:
        """A dead-lettered FAILED run -> ENQUEUED with attempt 0, ready to be published again;
        with ``change``, the job's history entry in the same transaction. None, with nothing
        written, when the run is not a dead letter (any more) or the job guard stops it (see
        ``RunStore``: a scheduled run of a paused job, any run of a cancelled one).

        In the same transaction, with the job's row locked first (so a run event being applied
        sees the run open, or ends the job before this revives it): a completed or failed
        one-time or immediate job is scheduled again (next_run_at ``now``, version + 1) until
        the redriven run's event ends it. That makes it active again: with ``max_active``,
        QuotaError and nothing written when the user would have more active jobs than that.
        A recurring, scheduled, paused or cancelled job is left as it is."""
        ...

    async def runs_dead_lettered(self, user_id: str, limit: int,
                                 before_run_id: str | None) -> list[JobRun]: ...

    async def runs_count_by_status(self) -> dict[RunStatus, int]:
        """Every stored run, by status: a full scan, for tests and tools (not for scrapes)."""
        ...

    async def runs_count_capped(self, cap: int) -> RunCounts:
        """Open runs by status and dead-lettered runs, each counted up to ``cap`` (cheap enough
        for every metrics scrape, whatever the history holds)."""
        ...

    async def runs_oldest_due(self, now: datetime, shards: int) -> datetime | None:
        """When the oldest run that is due and not yet started fell due, or None when every
        due run has started. Due means: PENDING with scheduled_at <= now, RETRYING with
        retry_at <= now, or ENQUEUED (due at scheduled_at on its first attempt, at enqueued_at
        after a retry or a hand-back; only the oldest ``OLDEST_DUE_ENQUEUED_CAP`` queued runs
        are looked at). ``shards`` is the deployment's shard count. Read-only and bounded
        (a probe per shard), so every metrics scrape may call it."""
        ...

    # --- a worker's batched writes (one call per heartbeat) ------------------------------
    async def runs_extend_leases(self, items: Sequence[tuple[str, str]],
                                 lease_expires_at: datetime) -> set[str]:
        """``run_extend_lease`` for many ``(run_id, token)`` pairs in ONE write: the run ids
        still held (RUNNING with that token), whose lease now ends at ``lease_expires_at``.
        A pair whose guard fails (another attempt's token, or the run is no longer RUNNING)
        changes nothing and is left out of the answer: its attempt has lost the run. Attempt
        rows are not touched (a renewal starts or ends no attempt)."""
        ...


class DueStore(Protocol):
    """What the watcher uses to find due runs: the claim walk and its wake-up.

    * ``runs_claim_due`` may be called concurrently for the same shard by several watchers: a
      PENDING run is moved to ENQUEUED (or SKIPPED) by exactly one of them. A claim that names
      a lease token is fenced: it first checks, in its own transaction, that the token is still
      the shard's (PostgreSQL holds a share lock on the lease row until it commits, so a
      takeover waits for a claim in flight); with a stale token it changes nothing and reports
      ``lease_lost``. So a watcher that lost its lease while paused cannot dispatch from a
      shard another watcher now owns. The shard's
      watermark only advances by a compare-and-set on the generation the walk read
      (``store/watermark.py``); inserting a run at or behind the watermark lowers it and bumps
      the generation in the inserting transaction, so no PENDING run is ever left behind it.
    * ``due_notice_wait`` is a hint, never a guarantee: a lost notice only delays a run until
      the watcher's next tick.
    """

    async def due_notice_wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for another process's signal that a run became due
        soon (PostgreSQL: LISTEN/NOTIFY, sent when a PENDING run due within a few seconds is
        inserted). Backends without cross-process signals wait out the timeout and return False.
        """
        ...

    async def runs_claim_due(self, claim: DueClaim) -> DueClaimed:
        """Move due PENDING runs of one shard to ENQUEUED (or SKIPPED, with a RunEvent, when they
        are later than the misfire grace and their job says ``skip``). Reads only the shard's
        partitions from its watermark up to now, and advances the watermark past drained buckets."""
        ...

    async def runs_claim_due_many(self, claims: Sequence[DueClaim]) -> list[DueClaimed]:
        """``runs_claim_due`` for several shards (a watcher's tick) in one transaction, each
        claim with the same guarantees as alone; the answers in the claims' order. When they
        are all fenced and share one instant and one misfire grace (and, on SQLite, one limit),
        one statement fences them all and reads their watermarks, and one claims (SQLite:
        reads) a bucket of each shard per round of the walks."""
        ...

    async def shard_watermark(self, shard: int) -> int | None:
        """The earliest time bucket of the shard that may still hold PENDING runs."""
        ...

    async def runs_enqueued_in_shards(self, shards: list[int], since: datetime,
                                      limit: int) -> list[JobRun]:
        """Read-only: ENQUEUED runs of these shards enqueued at or after ``since``, oldest
        first. A watcher that takes shards from a lapsed lease publishes again those the queue
        has no message for: their claimer may have died between its claim and its publish."""
        ...


class RescueStore(Protocol):
    """Rescue and retention, run by the rescuer's leader.

    * Rescue (``runs_retry_due``, ``runs_rescue_candidates`` + ``run_requeue``,
      ``watermarks_rewind``) hands each stranded run back exactly once: every step is a
      compare-and-set on the state the candidate was read in, and concurrent callers of
      ``runs_retry_due`` hand back disjoint sets.
    * ``prune`` never deletes an open run or the job that owns one; it races harmlessly with
      anything that writes open runs. ``maintain`` is safe to run from several processes.
    """

    async def maintain(self, now: datetime) -> None:
        """Periodic housekeeping, safe to run from several processes (PostgreSQL: create the
        coming days' partitions, drop those past retention). The rescuer calls it hourly."""
        ...

    async def runs_retry_due(self, now: datetime, limit: int) -> list[JobRun]:
        """RETRYING runs whose ``retry_at`` has come -> ENQUEUED (enqueued_at = now), returned
        for publishing. Concurrent callers hand back disjoint sets. Under the job guard (see
        ``RunStore``): such a run of a job that stops it -> CANCELLED, not returned."""
        ...

    async def runs_rescue_candidates(self, now: datetime, enqueued_before: datetime,
                                     limit: int) -> list[JobRun]:
        """Read-only: RUNNING runs whose lease expired by ``now`` and ENQUEUED runs enqueued
        before ``enqueued_before``, oldest first. The rescuer keeps those with no live queue
        message and hands them back with ``run_requeue``."""
        ...

    async def run_requeue(self, run: JobRun, now: datetime) -> JobRun | None:
        """Compare-and-set from the state ``run`` was read in: RUNNING with its token and an
        expired lease -> ENQUEUED (the lost attempt stays counted); ENQUEUED with its
        enqueued_at -> enqueued_at = now (a new publication). The updated run, or None when the
        run moved on meanwhile. Under the job guard (see ``RunStore``): a run of a job that
        stops it -> CANCELLED (a RUNNING run's attempt ends as lost), answered None."""
        ...

    async def watermarks_rewind(self) -> dict[int, int]:
        """Lower each shard's watermark that has passed a PENDING run to that run's bucket;
        return {shard: new watermark} for the shards that moved (none, unless a bug or a
        manual edit left a run behind)."""
        ...

    async def prune(self, prune: Prune) -> Pruned:
        """Delete finished runs, run events every consumer has read, and finished jobs (with
        their runs) whose last change is older than ``prune.before``, and deliveries and inbox
        items older than that, and ended run attempts older than that (a pruned job's history
        goes with it). Open runs and the jobs that own them are never deleted."""
        ...


class EventStore(Protocol):
    """Run events and the recurring watcher's durable cursor.

    * Events are append-only and read in id order; ``events_after`` returns a prefix of what
      will ever be visible (on PostgreSQL, an event is visible once every older transaction
      ended), so a cursor never skips an event.
    * ``event_apply`` advances the consumer's cursor (guarded by its previous position), updates
      the job's projection (guarded by the job version the decision was made from) and inserts
      the next run (only while the job is scheduled at that version and has no other open
      scheduled run) in ONE transaction; when a guard fails nothing is written, so two
      consumers racing over one event apply it once. A job is ended (``job_status``) only when
      the same transaction, with the job's row locked, finds none of its runs open (see
      ``EventApply.job_status``): a run inserted by a schedule change or reopened by a redrive
      keeps it as it is.
    * ``events_apply`` does the same for a batch of consecutive events in ONE transaction, one
      statement per step for the whole batch (``store/event_batch.py``). Each event keeps its
      own guards: a job that changed since its event's decision cuts the batch there (the
      events before it are applied and the cursor stops at the last of them), so one refused
      guard holds back one event, which its caller decides again, not the batch. A crash
      anywhere in the transaction writes nothing, cursor included.
    """

    async def events_after(self, event_id: int, limit: int) -> list[RunEvent]: ...

    async def cursor_get(self, consumer: str) -> int: ...

    async def event_apply(self, apply: EventApply) -> ApplyResult:
        """APPLIED, or (with nothing written) CURSOR_MOVED when the cursor has moved since
        ``previous_event_id``, JOB_CHANGED when the job's version is no longer
        ``job_version``."""
        ...

    async def events_apply(self, applies: Sequence[EventApply]) -> EventsApplied:
        """Apply consecutive events (each ``previous_event_id`` is the event before it; a job
        at most once among events whose ``job_version`` is set, else ValueError) from the
        longest prefix whose job guards hold, cursor included, in one transaction."""
        ...

    async def events_lag(self, consumer: str, now: datetime) -> float:
        """Seconds since the oldest run event the consumer has not applied was emitted (0 when
        it is caught up); on PostgreSQL it also counts events hidden by a long transaction."""
        ...


class LeaseStore(Protocol):
    """Shard leases and group membership, for several watchers and leaders.

    * A shard has at most one owner whose lease has not expired; taking or renewing is one
      conditional write per shard, so two members racing for a shard cannot both own it.
    * Each tenure of a shard has a fencing token (``ShardLease.token``), bumped in the same
      write whenever the shard changes hands or its lease had lapsed; due claims check it, so
      a holder whose lease lapsed cannot dispatch once another has taken the shard.
    * Membership rows (``members_heartbeat``) only say who is alive; ownership is always the
      lease. Heartbeats and leaving are idempotent.
    """

    async def shard_leases_acquire(self, owner: str, shards: list[int], now: datetime,
                                   ttl_seconds: float) -> list[ShardLease]:
        """Take or renew each listed shard that is free, expired or already ours, and release
        ``owner``'s leases of the shards not listed (handed over to a watcher that joined);
        return the shards now owned by ``owner`` (in shard order) with their tokens."""
        ...

    async def shard_leases_release(self, owner: str) -> None:
        """End ``owner``'s leases at once (a clean stop): the shards are free to take, and
        whoever takes them gets a new token."""
        ...

    async def shard_owners(self, now: datetime) -> dict[int, str]: ...

    async def members_heartbeat(self, group: str, member: str, now: datetime,
                                ttl_seconds: float) -> list[str]:
        """Record that ``member`` of ``group`` (e.g. all watchers) is alive until now + ttl;
        return the live members, sorted. Watchers split shards over this list; the first
        live member of the ``recurring`` group is its leader."""
        ...

    async def members_leave(self, group: str, member: str) -> None: ...


class DeliveryStore(Protocol):
    """Sending a run's output to its channels, at least once per (run, channel), with one
    claim at a time.

    * ``delivery_claim``: while the run is executed, a (run, channel) is claimed only by the
      attempt that holds the run (RUNNING with that lease token), so by one attempt at a time.
    * ``deliveries_retry_claim``: once the run SUCCEEDED, a due retry is claimed by one sweep.
    * A DELIVERED or FAILED one is never claimed again. ``delivery_done`` lands only for the
      claim's token.
    * Webhook signing secrets are append-only; the newest ones sign.
    """

    async def delivery_claim(self, claim: DeliveryClaim) -> Delivery | None:
        """Take (run, channel) for one send, if the run is RUNNING with ``claim_token`` as its
        lease token: insert it SENDING, or move a RETRYING row (or a SENDING row claimed by an
        earlier attempt of the run) back to SENDING with attempts + 1 and this claim token;
        next_attempt_at becomes ``claim.stale_at``. None: the attempt lost the run, the channel
        was delivered already, failed for good, is being sent by this attempt, or is out of
        attempts."""
        ...

    async def delivery_done(self, done: DeliveryDone) -> bool:
        """SENDING (with this claim token) -> DELIVERED (sent_at = now), RETRYING (error,
        next_attempt_at) or FAILED (error)."""
        ...

    async def deliveries_retry_claim(self, claim: DeliveryRetryClaim) -> list[Delivery]:
        """Claim up to ``claim.limit`` due deliveries of SUCCEEDED runs, the earliest due ones
        (see ``DeliveryRetryClaim``), in no particular order. Two sweeps at the same moment
        never claim the same one."""
        ...

    async def deliveries_of(self, run_ids: list[str]) -> list[Delivery]:
        """The deliveries of these runs, by run id then channel key."""
        ...

    async def webhook_secret_add(self, secret: WebhookSecret) -> None: ...

    async def webhook_secrets_recent(self, user_id: str, limit: int) -> list[WebhookSecret]:
        """The user's newest signing secrets, newest first."""
        ...


class InboxStore(Protocol):
    """A user's inbox (items are written by ``run_finish``, see ``RunStore``).

    * ``inbox_mark_read`` is idempotent: the first read time is kept; it never touches another
      user's item.
    """

    async def inbox_list(self, query: InboxQuery) -> list[InboxItem]:
        """A user's inbox: unread items first, each part newest first."""
        ...

    async def inbox_mark_read(self, user_id: str, item_id: str,
                              now: datetime) -> InboxItem | None:
        """Mark the user's item read (the first read time is kept); None if it is not theirs."""
        ...


class HistoryStore(Protocol):
    """Every attempt of a run, and the history of a job's changes (domain/history.py).

    * Nothing here writes: attempts are written by the run transitions of ``RunStore``, each in
      the transaction of its transition. ``run_claim`` starts one (and marks any attempt of the
      run still running as lost: its lease expired); ``run_retry`` and ``run_finish`` end it
      (failed / succeeded, with the error or the start of the output); ``run_release`` ends it
      as released, ``run_requeue`` of a RUNNING run as lost. A fenced (zombie) write changes no
      attempt either.
    * Job changes are written by ``job_save`` (``JobSave.change``) and ``run_redrive``
      (``change``) only when the change lands, so a lost compare-and-set leaves no entry.
    """

    async def run_attempts(self, run_id: str, limit: int) -> list[RunAttempt]:
        """The run's attempts, oldest first (at most ``limit``)."""
        ...

    async def job_changes(self, job_id: str, limit: int,
                          before_change_id: str | None) -> list[JobChange]:
        """The job's changes, newest first (keyset pagination on change_id)."""
        ...


class TokenStore(Protocol):
    """API tokens, stored hashed (never the token itself).

    * ``token_add`` writes one row per token hash; ``token_user`` and ``tokens_exist`` are
      plain reads of committed rows, so a token works from the moment ``token_add`` returns.
    * ``token_find`` answers only a live token (not revoked, not expired by ``now``), so a
      revoke or a rotation takes effect with its commit. ``token_touch`` writes only when the
      stored use is older than ``stale_before``; two racing touches both leave a recent time.
    """

    async def token_add(self, token_hash: str, user_id: str, now: datetime) -> None: ...

    async def token_user(self, token_hash: str) -> str | None: ...

    async def tokens_exist(self) -> bool: ...

    async def token_create(self, token: ApiToken, token_hash: str) -> None: ...

    async def token_find(self, token_hash: str, now: datetime) -> ApiToken | None:
        """The live token with this hash: None when unknown, revoked or expired by ``now``."""
        ...

    async def token_touch(self, token_id: str, now: datetime, stale_before: datetime) -> None:
        """Record a use: last_used_at = now, written only when the stored one is older than
        ``stale_before`` (so a busy token costs one write a minute, not one per request)."""
        ...

    async def tokens_list(self) -> list[ApiToken]:
        """Every token, revoked ones included, oldest first."""
        ...

    async def token_revoke(self, token_id: str, now: datetime) -> bool:
        """False when no token has this id or it is revoked already."""
        ...

    async def token_rotate(self, token_id: str, token_hash: str) -> ApiToken | None:
        """Replace the hash of a token that is not revoked (the old secret stops working with
        this commit); None when there is no such token."""
        ...


class Store(LifecycleStore, JobStore, RunStore, DueStore, RescueStore, EventStore, LeaseStore,
            DeliveryStore, InboxStore, HistoryStore, TokenStore, FeedStateStore, Protocol):
    """Every facet of the store: what a backend implements and what the runtime hands out.

    A consumer that needs only part of the store is annotated with that facet (the deliverer
    takes a ``DeliveryStore``), so its signature says what it may touch. Each facet's docstring
    states its concurrency contract.
    """
