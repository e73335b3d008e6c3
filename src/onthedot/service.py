"""The service layer: every use case of a job, shared by the REST API, MCP tools and chat.

It validates, computes the first occurrence and writes the Job and its first JobRun in one
store transaction. It never executes anything: the watcher and workers do that.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, NoReturn, TypeVar

from onthedot.actions import ActionRegistry, EgressGuard, secret_headers
from onthedot.config import Settings
from onthedot.delivery import validate_notify
from onthedot.domain.clock import Clock
from onthedot.domain.delivery import Delivery, InboxCursor, InboxItem
from onthedot.domain.errors import ConflictError, NotFoundError, QuotaError, ValidationError
from onthedot.domain.history import (
    ChangeAction,
    JobChange,
    RunAttempt,
    acting_channel,
    field_changes,
)
from onthedot.domain.ids import MAX_FLEXIBLE_WINDOW_SECONDS, new_ulid
from onthedot.domain.jsonvalue import TEXT_EXPECTED, first_problem, is_storable_text
from onthedot.domain.models import (
    MAX_ACTION_BYTES,
    MAX_ACTION_DEPTH,
    MAX_BACKOFF_SECONDS,
    OVERLAP_POLICIES,
    Job,
    JobParams,
    JobRun,
    JobStatus,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    RunKind,
    RunStatus,
    default_notify,
)
from onthedot.metrics import Metrics
from onthedot.queue.base import Queue, run_message
from onthedot.quotas import CreateRate, ParseRate, RunRate, active_quota_error
from onthedot.schedule import (
    Schedule,
    compile_schedule_async,
    job_next_after,
    job_occurrences,
    job_schedule,
    with_flexible_window,
)
from onthedot.schedule.local import load_timezone
from onthedot.schedule.oneshot import out_of_range
from onthedot.store.base import (
    SKIP_ERROR,
    InboxQuery,
    JobCreated,
    JobInsert,
    JobListQuery,
    JobSave,
    Store,
    skip_refused,
)
from onthedot.store.group_commit import GroupCommit

T = TypeVar("T")
_OPEN = (RunStatus.PENDING, RunStatus.ENQUEUED, RunStatus.RUNNING, RunStatus.RETRYING)
MAX_PAGE_SIZE = 100
MAX_BATCH_JOBS = 1000  # jobs in one create_jobs call (one transaction)
MAX_NAME_CHARS = 200
MAX_TIMEOUT_SECONDS = 3600.0
MAX_ATTEMPTS_LIMIT = 100
MAX_BACKFILL_RUNS = 100  # occurrences one backfill may run
MAX_BACKFILL_AGE = timedelta(days=366)  # how far back a backfill may start
MAX_CHANGE_ATTEMPTS = 10  # a change that keeps losing the compare-and-set is answered 409
DUE_SOON_SECONDS = 5.0  # runs due this soon are announced to the in-process watcher


@dataclass(frozen=True)
class JobSpec:
    """What a client asks for; validated by the service."""

    action: dict[str, Any]
    params: JobParams
    name: str | None = None
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    misfire_policy: MisfirePolicy = "run_late"
    timeout_seconds: float = 60.0
    notify: list[dict[str, Any]] = field(default_factory=default_notify)
    overlap_policy: OverlapPolicy = "skip"


@dataclass(frozen=True)
class JobPatch:
    """Fields of a PATCH; None leaves a field as it is."""

    name: str | None = None
    action: dict[str, Any] | None = None
    params: JobParams | None = None
    retry_policy: RetryPolicy | None = None
    misfire_policy: MisfirePolicy | None = None
    timeout_seconds: float | None = None
    notify: list[dict[str, Any]] | None = None  # replaces the whole list
    overlap_policy: OverlapPolicy | None = None


@dataclass(frozen=True)
class JobView:
    job: Job
    status: str  # user-facing: scheduled | running | completed | failed | paused | cancelled
    last_run: JobRun | None


@dataclass(frozen=True)
class CreateOutcome:
    """One job of ``create_jobs``: its view (``created`` False for a replay) or its error."""

    view: JobView | None = None
    created: bool = False
    error: ValidationError | ConflictError | QuotaError | None = None


@dataclass(frozen=True)
class Skipped:
    """What ``skip_next`` did: the run it marked SKIPPED and the job as it now is (its
    next_run_at the occurrence after the skipped one)."""

    run: JobRun
    view: JobView


@dataclass(frozen=True)
class Backfilled:
    """What ``backfill`` did: each occurrence in the range, in time order, with its run: a new
    run now (``created``) or the run the instant had already (left as it is)."""

    runs: list[JobRun]
    created: list[bool]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_page_token: str | None


class JobService:
    def __init__(self, store: Store, queue: Queue, clock: Clock, settings: Settings,
                 actions: ActionRegistry,
                 on_due_soon: Callable[[datetime], None] | None = None,
                 metrics: Metrics | None = None) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.settings = settings
        self.actions = actions
        self._on_due_soon = on_due_soon or (lambda _at: None)
        self.metrics = metrics or Metrics()
        self._guard = EgressGuard.from_settings(settings)
        self._group_commit = GroupCommit(store)
        self._create_rate = CreateRate(settings.create_rate_per_minute)
        self._parse_rate = ParseRate(settings.parse_rate_per_minute)
        self._run_rate = RunRate(settings.run_rate_per_minute)

    def set_due_soon_hook(self, hook: Callable[[datetime], None]) -> None:
        """The in-process watcher wants to hear at once about runs due within its tick."""
        self._on_due_soon = hook

    # --- create / read -------------------------------------------------------------------
    async def create_job(self, user_id: str, spec: JobSpec,
                         idempotency_key: str | None = None) -> tuple[JobView, bool]:
        self._take_creates(user_id, 1)
        item = await self._prepare(user_id, spec, idempotency_key, self.clock.now())
        # Concurrent creates share one transaction (store/group_commit.py); this one returns
        # once the transaction holding its job has committed.
        stored = await self._group_commit.job_create(item.job, item.first_run,
                                                     max_active=item.max_active)
        view, created = await self._settle(item, stored)
        if created:
            self._due_soon(item.job.next_run_at)
        return view, created

    async def create_jobs(self, user_id: str,
                          requests: Sequence[tuple[JobSpec, str | None]]) -> list[CreateOutcome]:
        """Create many jobs at once: each (spec, idempotency key) is what ``create_job`` takes,
        judged the same way, and all valid ones are written in ONE store transaction. Each
        outcome, in request order, is the job (created, or the replay of an earlier identical
        request) or the error that refused it; a store failure fails the whole call and
        writes nothing."""
        if len(requests) > MAX_BATCH_JOBS:
            raise ValidationError(f"{len(requests)} jobs in one batch", code="too_many_jobs",
                                  field="jobs", expected=f"at most {MAX_BATCH_JOBS} jobs")
        now = self.clock.now()
        prepared: list[JobInsert | ValidationError | QuotaError] = []
        # The quotas are looked at before each item's validation, so items that would be
        # refused anyway cost no compiling: a user at the limit gets 429s for nothing.
        room = await self._active_room(user_id)
        for spec, key in requests:
            refused = self._batch_refusal(user_id, room, key is not None, now)
            if refused is not None:
                prepared.append(refused)
                continue
            try:
                insert = await self._prepare(user_id, spec, key, now)
            except (ValidationError, QuotaError) as exc:  # this item only; the others go on
                prepared.append(exc)
                continue
            self._create_rate.take(user_id, 1, now)
            room = None if room is None else room - 1
            prepared.append(insert)
        items = [p for p in prepared if isinstance(p, JobInsert)]
        stored = iter(await self.store.jobs_insert_many(items) if items else [])
        outcomes: list[CreateOutcome] = []
        for item in prepared:
            if isinstance(item, (ValidationError, QuotaError)):
                outcomes.append(CreateOutcome(error=item))
                continue
            try:
                view, created = await self._settle(item, next(stored))
            except (ConflictError, QuotaError) as exc:
                outcomes.append(CreateOutcome(error=exc))
            else:
                outcomes.append(CreateOutcome(view=view, created=created))
        firsts = [o.view.job.next_run_at for o in outcomes if o.created and o.view is not None]
        self._due_soon(min((at for at in firsts if at is not None), default=None))
        return outcomes

    async def _prepare(self, user_id: str, spec: JobSpec, idempotency_key: str | None,
                       now: datetime) -> JobInsert:
        """Validate, compute the first occurrence and build the job and its first run (to
        be inserted within the user's active-job quota)."""
        spec = self._validated(spec)
        job_id = new_ulid(now)

        async def room_first() -> None:
            # Before a costly compile only: a user at the active-job limit is refused without
            # it (a replay, with its key, may still be answered by the insert).
            if idempotency_key is None and await self._active_room(user_id) == 0:
                raise active_quota_error(self.settings.max_active_jobs)

        compiled = await self._compile(spec.params, anchor=now, now=now, before_thread=room_first)
        schedule = with_flexible_window(compiled, job_id, spec.params.flexible_window_seconds)
        first_at = self._first_occurrence(spec.params, schedule, now)
        job = Job(
            job_id=job_id, user_id=user_id, name=spec.name or _default_name(spec),
            action=spec.action, params=spec.params, status=JobStatus.SCHEDULED,
            created_at=now, updated_at=now, retry_policy=spec.retry_policy,
            misfire_policy=spec.misfire_policy, timeout_seconds=spec.timeout_seconds,
            idempotency_key=idempotency_key, request_hash=_request_hash(spec),
            next_run_at=first_at, notify=spec.notify, overlap_policy=spec.overlap_policy,
        )
        return JobInsert(job=job, first_run=self._new_run(job_id, first_at, "scheduled"),
                         max_active=self.settings.max_active_jobs or None)

    async def _settle(self, item: JobInsert, result: JobCreated) -> tuple[JobView, bool]:
        """What the store did with a prepared job: created it, or found its idempotency key
        held, by the same request (a replay) or by another one (409)."""
        if result.over_quota:
            raise active_quota_error(self.settings.max_active_jobs)
        if not result.created:
            if result.job.request_hash != item.job.request_hash:
                raise ConflictError(
                    "this Idempotency-Key was already used with a different request",
                    code="idempotency_key_reused", field="Idempotency-Key",
                    expected="a new key for a different request")
            return await self._view(result.job), False
        self.metrics.jobs_created.inc()
        return JobView(job=_shown(item.job), status=item.job.status.value, last_run=None), True

    async def get_job(self, user_id: str, job_id: str) -> JobView:
        return await self._view(await self._job(user_id, job_id))

    async def list_jobs(self, user_id: str, *, status: str | None = None,
                        start_time: datetime | None = None, end_time: datetime | None = None,
                        page_size: int = 20, page_token: str | None = None) -> Page[JobView]:
        _check_page_size(page_size)
        stored_status = _parse_status_filter(status)
        query = JobListQuery(user_id=user_id, status=stored_status, created_from=start_time,
                             created_to=end_time, before_job_id=_decode_token(page_token, "j"),
                             limit=page_size + 1)
        jobs = await self.store.jobs_list(query)
        views = [await self._view(j) for j in jobs[:page_size]]
        if status == "running":
            views = [v for v in views if v.status == "running"]
        token = _encode_token("j", jobs[page_size - 1].job_id) if len(jobs) > page_size else None
        return Page(items=views, next_page_token=token)

    # --- change --------------------------------------------------------------------------
    # Every change is planned from the job as read and saved as a compare-and-set on its
    # version; a plan that lost a race is made again from the new state (see _change).

    async def update_job(self, user_id: str, job_id: str, patch: JobPatch, *,
                         expected_version: int | None = None) -> JobView:
        async def plan(job: Job) -> JobSave:
            if job.status is JobStatus.CANCELLED:
                raise ConflictError("a deleted job cannot be changed", code="job_cancelled",
                                    field="job_id", expected="a job that is not cancelled")
            spec = self._validated(JobSpec(
                # A hidden secret sent back as *** keeps the stored value.
                action=(job.action if patch.action is None
                        else secret_headers.restore(patch.action, job.action)),
                params=patch.params if patch.params is not None else job.params,
                name=patch.name if patch.name is not None else job.name,
                retry_policy=patch.retry_policy or job.retry_policy,
                misfire_policy=patch.misfire_policy or job.misfire_policy,
                timeout_seconds=(job.timeout_seconds if patch.timeout_seconds is None
                                 else patch.timeout_seconds),
                notify=job.notify if patch.notify is None else patch.notify,
                overlap_policy=patch.overlap_policy or job.overlap_policy,
            ), check_notify=patch.notify is not None)
            now = self.clock.now()
            updated = replace(job, name=spec.name or job.name, action=spec.action,
                              params=spec.params, retry_policy=spec.retry_policy,
                              misfire_policy=spec.misfire_policy,
                              timeout_seconds=spec.timeout_seconds, notify=spec.notify,
                              overlap_policy=spec.overlap_policy, updated_at=now)
            if patch.params is None or patch.params == job.params:
                return JobSave(job=updated)
            # A new schedule replaces the pending run (a finished one-time job comes back to
            # life); a paused job keeps it for its resume.
            schedule = with_flexible_window(
                await self._compile(spec.params, anchor=job.created_at, now=now),
                job.job_id, spec.params.flexible_window_seconds)
            if job.status is JobStatus.PAUSED:
                return JobSave(job=updated)
            first_at = self._first_occurrence(spec.params, schedule, now)
            updated = replace(updated, status=JobStatus.SCHEDULED, next_run_at=first_at)
            # A one-time job whose run is RUNNING is given a new occurrence too: the running
            # one ends as it was started, and the job ends once both have (docs/api.md PATCH).
            return JobSave(job=updated, cancel_open_runs=True,
                           insert_run=self._new_run(job.job_id, first_at, "scheduled"),
                           max_active=self._revival_quota(job))

        return await self._view(await self._change(user_id, job_id, plan, expected_version,
                                                   action=ChangeAction.UPDATE))

    async def delete_job(self, user_id: str, job_id: str, *,
                         expected_version: int | None = None) -> None:
        async def plan(job: Job) -> JobSave | None:
            if job.status is JobStatus.CANCELLED:
                return None
            cancelled = replace(job, status=JobStatus.CANCELLED, next_run_at=None,
                                updated_at=self.clock.now())
            return JobSave(job=cancelled, cancel_open_runs=True, cancel_manual_runs=True)

        await self._change(user_id, job_id, plan, expected_version, action=ChangeAction.DELETE)

    async def pause_job(self, user_id: str, job_id: str) -> JobView:
        async def plan(job: Job) -> JobSave | None:
            if job.status is JobStatus.PAUSED:
                return None
            if job.status is not JobStatus.SCHEDULED:
                raise ConflictError(f"a {job.status.value} job cannot be paused",
                                    code="not_pausable", field="status",
                                    expected="a scheduled job")
            paused = replace(job, status=JobStatus.PAUSED, next_run_at=None,
                             updated_at=self.clock.now())
            return JobSave(job=paused, cancel_open_runs=True)

        return await self._view(await self._change(user_id, job_id, plan,
                                                   action=ChangeAction.PAUSE))

    async def resume_job(self, user_id: str, job_id: str) -> JobView:
        async def plan(job: Job) -> JobSave | None:
            if job.status is JobStatus.SCHEDULED:
                return None
            if job.status is not JobStatus.PAUSED:
                raise ConflictError(f"a {job.status.value} job cannot be resumed",
                                    code="not_resumable", field="status",
                                    expected="a paused job")
            now = self.clock.now()
            next_at = await self._resume_occurrence(job, now)
            if next_at is None:
                return JobSave(job=replace(job, status=JobStatus.COMPLETED, next_run_at=None,
                                           updated_at=now))
            resumed = replace(job, status=JobStatus.SCHEDULED, next_run_at=next_at,
                              updated_at=now)
            return JobSave(job=resumed,
                           insert_run=self._new_run(job.job_id, next_at, "scheduled"))

        return await self._view(await self._change(user_id, job_id, plan,
                                                   action=ChangeAction.RESUME))

    async def run_job_now(self, user_id: str, job_id: str) -> JobRun:
        now = self.clock.now()
        self._run_rate.take_one(user_id, now)  # a run now makes a worker call out at once
        manual = self._new_run(job_id, now, "manual")

        async def plan(job: Job) -> JobSave:
            if job.status is JobStatus.CANCELLED:
                raise ConflictError("a deleted job cannot run", code="job_cancelled",
                                    field="job_id", expected="a job that is not cancelled")
            # Saved with the job (its version bumped), so a delete landing at the same moment
            # either cancels this run or comes first and refuses it.
            return JobSave(job=job, insert_run=manual)

        await self._change(user_id, job_id, plan, action=ChangeAction.RUN)
        # A run of this job at this very instant may have existed (same deterministic id):
        # report the stored one, not a PENDING run that was never written.
        return await self.store.run_get(manual.run_id) or manual

    async def skip_next(self, user_id: str, job_id: str) -> Skipped:
        """Skip the next occurrence of a scheduled recurring job: its PENDING run becomes
        SKIPPED (with its RunEvent) and the occurrence after it is scheduled, in the job's
        compare-and-set save. Refused (409) for a one-time job (``not_recurring``: pause or
        delete it), a job that is not scheduled (``not_skippable``) and a job whose next run
        has already started (``run_started``)."""
        skipped: list[JobRun] = []

        async def plan(job: Job) -> JobSave:
            run = await self._next_open_run(job)
            now = self.clock.now()
            # As the recurring watcher would after this run: missed occurrences coalesce.
            following_at = await job_next_after(job, max(run.scheduled_at, now))
            following = (None if following_at is None
                         else self._new_run(job.job_id, following_at, "scheduled"))
            after = replace(job, next_run_at=following_at, updated_at=now,
                            status=JobStatus.SCHEDULED if following else JobStatus.COMPLETED)
            skipped[:] = [replace(run, status=RunStatus.SKIPPED, finished_at=now,
                                  error=SKIP_ERROR)]
            return JobSave(job=after, skip_run=run, insert_run=following)

        job = await self._change(user_id, job_id, plan, action=ChangeAction.SKIP)
        return Skipped(run=skipped[0], view=await self._view(job))

    async def backfill(self, user_id: str, job_id: str, start: datetime, end: datetime, *,
                       max_runs: int = MAX_BACKFILL_RUNS) -> Backfilled:
        """Run now the occurrences of a recurring job scheduled in ``[start, end)``, both in
        the past: each gets a run (kind manual, its scheduled_at the occurrence's instant,
        so its run id and idempotency key are the occurrence's), unless the instant has a run
        already, which is left as it is. The schedule itself is not touched. ``start`` is at
        most MAX_BACKFILL_AGE before now. At most
        ``max_runs`` (≤ MAX_BACKFILL_RUNS) occurrences: more is a 422 ``too_many_runs`` and
        nothing runs. Counts as one run-now request against the user's run rate."""
        if not 1 <= max_runs <= MAX_BACKFILL_RUNS:
            raise ValidationError("max_runs out of range", field="max_runs",
                                  expected=f"1..{MAX_BACKFILL_RUNS}")
        for name, value in (("start_time", start), ("end_time", end)):
            if value.tzinfo is None:
                raise ValidationError(f"{name} has no offset", field=name,
                                      expected="an ISO 8601 instant with an offset or Z")
        now = self.clock.now()
        if not start < end <= now:
            raise ValidationError("the range must be in the past and not empty",
                                  code="invalid_range", field="end_time",
                                  expected=f"start_time < end_time <= now ({now.isoformat()})")
        if start < now - MAX_BACKFILL_AGE:
            raise ValidationError("the range starts too long ago", code="invalid_range",
                                  field="start_time", expected="a start_time at most "
                                  f"{MAX_BACKFILL_AGE.days} days before now")
        self._run_rate.take_one(user_id, now)  # backfilled runs call out at once
        planned: list[JobRun] = []
        existing: set[str] = set()

        async def plan(job: Job) -> JobSave:
            if job.params.type != "recurring":
                raise ConflictError(f"a {job.params.type} job has no occurrences to backfill",
                                    code="not_recurring", field="job_params.type",
                                    expected="a recurring job; run a one-time job with :run")
            if job.status is JobStatus.CANCELLED:
                raise ConflictError("a deleted job cannot run", code="job_cancelled",
                                    field="job_id", expected="a job that is not cancelled")
            planned[:] = [self._new_run(job.job_id, at, "manual")
                          for at in await _occurrences(job, start, end, max_runs)]
            # Read before the save: an instant with a run is left as it is (insert if absent).
            existing.clear()
            existing.update(await self.store.runs_get_many([r.run_id for r in planned]))
            return JobSave(job=replace(job, updated_at=now), backfill_runs=tuple(planned))

        await self._change(user_id, job_id, plan, action=ChangeAction.BACKFILL)
        stored = await self.store.runs_get_many([r.run_id for r in planned])
        runs = [stored.get(r.run_id, r) for r in planned]
        created = [r.run_id not in existing for r in runs]
        if any(created):
            self._due_soon(now)
        return Backfilled(runs=runs, created=created)

    async def _next_open_run(self, job: Job) -> JobRun:
        """The PENDING run ``skip_next`` skips (see there for its refusals)."""
        if job.params.type != "recurring":
            raise ConflictError(
                f"a {job.params.type} job has no next occurrence to skip", code="not_recurring",
                field="job_params.type", expected="a recurring job; pause or delete a one-time job")
        if job.status is not JobStatus.SCHEDULED:
            raise ConflictError(f"a {job.status.value} job has no next run to skip",
                                code="not_skippable", field="status",
                                expected="a scheduled job")
        runs = await self.store.runs_list(job.job_id, 5, None)
        open_runs = [r for r in runs if r.kind == "scheduled" and r.status in _OPEN]
        if not open_runs:
            raise ConflictError("the job has no next run to skip yet", code="not_skippable",
                                field="status", expected="a scheduled job with a next run")
        run = open_runs[0]
        if run.status is not RunStatus.PENDING:
            raise skip_refused(run)
        return run

    async def _change(self, user_id: str, job_id: str,
                      plan: Callable[[Job], Awaitable[JobSave | None]],
                      expected_version: int | None = None, *,
                      action: ChangeAction | None = None) -> Job:
        """Read the job, plan the change, save it as a compare-and-set on the version read;
        when another change landed in between, plan again from the new state.

        With ``expected_version`` the change was decided from that version (a confirmed chat
        request): any other version is refused instead of planned again, and since the save is
        conditional on the version read, a change landing after this check fails the save and
        is refused on the next round. With ``action`` the job's history entry is saved with
        the change (and only if the change lands)."""
        for _ in range(MAX_CHANGE_ATTEMPTS):
            job = await self._job(user_id, job_id)
            if expected_version is not None and job.version != expected_version:
                raise ConflictError("the job changed since this change was decided",
                                    code="version_mismatch", field="expected_version",
                                    expected=f"version {job.version}")
            save = await plan(job)
            if save is None:
                return job  # nothing to change (already paused, already deleted, ...)
            if action is not None:
                save = replace(save, change=self._change_entry(user_id, job, save, action))
            saved = await self.store.job_save(save)
            if saved is not None:
                if save.insert_run is not None:
                    self._due_soon(save.insert_run.scheduled_at)
                return saved
        raise ConflictError("the job kept changing while this request was applied",
                            code="concurrent_change", field="job_id",
                            expected="the same request again")

    # --- runs and dead letters -----------------------------------------------------------
    async def list_runs(self, user_id: str, job_id: str, *, page_size: int = 20,
                        page_token: str | None = None) -> Page[JobRun]:
        _check_page_size(page_size)
        await self._job(user_id, job_id)
        before = _decode_token(page_token, "r")
        before_at = None if before is None else _token_instant(before)
        runs = await self.store.runs_list(job_id, page_size + 1, before_at)
        token = (_encode_token("r", runs[page_size - 1].scheduled_at.isoformat())
                 if len(runs) > page_size else None)
        return Page(items=await self._with_deliveries(runs[:page_size]), next_page_token=token)

    async def get_run(self, user_id: str, run_id: str) -> JobRun:
        # An id no run can have (PostgreSQL text cannot even hold a NUL) is simply not found.
        run = await self.store.run_get(run_id) if is_storable_text(run_id) else None
        if run is None or await self.store.job_get(user_id, run.job_id) is None:
            raise NotFoundError(f"no run {run_id}", field="run_id")
        return (await self._with_deliveries([run]))[0]

    async def _with_deliveries(self, runs: list[JobRun]) -> list[JobRun]:
        """The runs with what was delivered where (and delivery errors), for users to read."""
        if not runs:
            return runs
        found: dict[str, list[Delivery]] = {}
        for delivery in await self.store.deliveries_of([r.run_id for r in runs]):
            found.setdefault(delivery.run_id, []).append(delivery)
        return [replace(r, deliveries=tuple(found.get(r.run_id, ()))) for r in runs]

    # --- inbox ---------------------------------------------------------------------------
    async def list_inbox(self, user_id: str, *, unread_only: bool = False, page_size: int = 20,
                         page_token: str | None = None) -> Page[InboxItem]:
        """Delivered results, unread first, then newest first."""
        _check_page_size(page_size)
        after = _inbox_cursor(_decode_token(page_token, "i"))
        items = await self.store.inbox_list(InboxQuery(
            user_id=user_id, limit=page_size + 1, after=after, unread_only=unread_only))
        token = None
        if len(items) > page_size:
            last = items[page_size - 1]
            token = _encode_token("i", f"{int(last.read_at is not None)}:{last.item_id}")
        return Page(items=items[:page_size], next_page_token=token)

    async def mark_inbox_read(self, user_id: str, item_id: str) -> InboxItem:
        item = (await self.store.inbox_mark_read(user_id, item_id, self.clock.now())
                if is_storable_text(item_id) else None)
        if item is None:
            raise NotFoundError(f"no inbox item {item_id}", field="item_id",
                                expected="the item_id of an item in your inbox")
        return item

    async def list_dead_letters(self, user_id: str, *, page_size: int = 20,
                                page_token: str | None = None) -> Page[JobRun]:
        _check_page_size(page_size)
        runs = await self.store.runs_dead_lettered(user_id, page_size + 1,
                                                   _decode_token(page_token, "d"))
        token = (_encode_token("d", runs[page_size - 1].run_id)
                 if len(runs) > page_size else None)
        return Page(items=runs[:page_size], next_page_token=token)

    async def redrive(self, user_id: str, run_id: str) -> JobRun:
        run = await self.get_run(user_id, run_id)
        if not run.dead_lettered:
            raise ConflictError("only a dead-lettered run can be redriven", code="not_dead_letter",
                                field="run_id", expected="a run listed in /v1/dead-letters")
        change = self._change_record(user_id, run.job_id, ChangeAction.REDRIVE,
                                     {"run_id": run_id})
        # A finished one-time job whose run is redriven is scheduled again (the store does it
        # in the redrive's transaction), so it counts against the active-job quota there.
        redriven = await self.store.run_redrive(run_id, self.clock.now(), change,
                                                max_active=self.settings.max_active_jobs or None)
        if redriven is None:
            await self._redrive_refused(run)
        await self.queue.dead_letter_redrive(run_id)
        # The queue's copy may be gone (or never existed); publishing again is harmless.
        await self.queue.send(run_id, run_message(redriven))
        return redriven

    async def _redrive_refused(self, run: JobRun) -> NoReturn:
        """Why the store's redrive wrote nothing: its job guard (a deleted job, or a paused one
        for a scheduled run; store/job_guard.py), else the run is no longer a dead letter. Read
        after the refusal only to name it: the guard itself was checked in the redrive."""
        job = await self.store.job_get_any(run.job_id)
        if job is not None and job.status is JobStatus.CANCELLED:
            raise ConflictError("a deleted job's run cannot be redriven", code="job_cancelled",
                                field="run_id", expected="a run of a job that is not deleted")
        if job is not None and job.status is JobStatus.PAUSED and run.kind == "scheduled":
            raise ConflictError("a paused job's scheduled run is redriven after :resume",
                                code="job_paused", field="run_id",
                                expected="a run of a scheduled job (resume it first)")
        raise ConflictError("the run was redriven already", code="not_dead_letter",
                            field="run_id", expected="a run listed in /v1/dead-letters")

    # --- per-user quotas (onthedot.quotas) ------------------------------------------------
    def take_parse(self, user_id: str) -> None:
        """One sentence for the parser (parse, chat, MCP `when`), or 429 rate_limited: the
        edges call it before the work starts."""
        self._parse_rate.take_one(user_id, self.clock.now())

    def _take_creates(self, user_id: str, wanted: int) -> None:
        now = self.clock.now()
        if self._create_rate.take(user_id, wanted, now) < wanted:
            raise self._create_rate.limited(user_id, now)

    async def _active_room(self, user_id: str) -> int | None:
        """How many more active jobs the user may have now (None: no limit). Only a first
        look: the insert checks the limit again under its lock (JobInsert.max_active)."""
        limit = self.settings.max_active_jobs
        if not limit:
            return None
        return max(0, limit - await self.store.jobs_count_active(user_id, limit))

    def _batch_refusal(self, user_id: str, room: int | None, keyed: bool,
                       now: datetime) -> QuotaError | None:
        """The 429 a batch item gets before it is validated, if any: the valid items take one
        create each, in order, and the rest are answered 429 in their place. An item with an
        idempotency key may be the replay of a job already counted, so only the insert can
        refuse it for the active-job limit."""
        if not self._create_rate.can_take(user_id, now):
            return self._create_rate.limited(user_id, now)
        if room is not None and room <= 0 and not keyed:
            return active_quota_error(self.settings.max_active_jobs)
        return None

    def _revival_quota(self, job: Job) -> int | None:
        """A finished job that a new schedule brings back counts again: the quota the save
        checks under the per-user lock creates take (None: already active, or no limit)."""
        if job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED):
            return None
        return self.settings.max_active_jobs or None

    # --- helpers -------------------------------------------------------------------------
    async def _compile(self, params: JobParams, *, anchor: datetime, now: datetime | None,
                       before_thread: Callable[[], Awaitable[None]] | None = None) -> Schedule:
        # Bounded, and off the event loop unless cheap (onthedot.schedule.limits).
        return await compile_schedule_async(params, anchor=anchor, now=now,
                                            min_interval_seconds=self.settings.min_interval,
                                            before_thread=before_thread)

    def _first_occurrence(self, params: JobParams, schedule: Schedule,
                          now: datetime) -> datetime:
        if params.type == "immediate":
            return now
        if params.type == "one-time":
            # A time slightly in the past (within the grace compile accepted) runs at once.
            first = schedule.next_after(datetime.min.replace(tzinfo=now.tzinfo))
        else:
            first = schedule.next_at_or_after(now)
        if first is None and params.type == "one-time":
            # Its one time exists (compile checked it): a flexible window carried it past the
            # end of the supported range.
            raise out_of_range(params.time or "")
        if first is None:
            raise ValidationError("the schedule has no future occurrence",
                                  code="no_future_occurrence", field="job_params.schedule",
                                  expected="a schedule that fires again after now")
        return first

    async def _resume_occurrence(self, job: Job, now: datetime) -> datetime | None:
        """Missed runs are not made up. Recurring: the next occurrence after now. One-time and
        immediate: the original time again if it is not missed (at most misfire_grace ago, as a
        late run counts), else ConflictError time_passed and the job stays paused."""
        if job.params.type == "recurring":
            return await job_next_after(job, now)
        runs = await self.store.runs_list(job.job_id, 50, None)
        scheduled = [r for r in runs if r.kind == "scheduled"]
        if job.params.type == "one-time":
            # The configured time, which a PATCH while paused may have changed.
            at = job_schedule(job).next_after(datetime.min.replace(tzinfo=now.tzinfo))
        else:
            at = scheduled[-1].scheduled_at if scheduled else now
        done = any(r.scheduled_at == at and r.status in (RunStatus.SUCCEEDED, RunStatus.SKIPPED)
                   for r in scheduled)
        if at is None or done:
            return None
        if at < now - timedelta(seconds=self.settings.misfire_grace):
            local = at.astimezone(load_timezone(job.params.timezone)).isoformat(timespec="minutes")
            raise ConflictError(
                f"its time ({local}) passed while it was paused, and missed runs are not made "
                "up", code="time_passed", field="job_params.time",
                expected="a new time (PATCH job_params), or one run now (:run)")
        return at

    def _new_run(self, job_id: str, at: datetime, kind: RunKind) -> JobRun:
        return JobRun.pending(job_id, at, self.settings.shards, kind)

    def _due_soon(self, at: datetime | None) -> None:
        if at is not None and at <= self.clock.now() + timedelta(seconds=DUE_SOON_SECONDS):
            self._on_due_soon(at)

    async def _job(self, user_id: str, job_id: str) -> Job:
        job = await self.store.job_get(user_id, job_id) if is_storable_text(job_id) else None
        if job is None:
            raise NotFoundError(f"no job {job_id}", field="job_id",
                                expected="the job_id of one of your jobs")
        return job

    async def _view(self, job: Job) -> JobView:
        runs = await self.store.runs_list(job.job_id, 3, None)
        # The last run is the newest one that left the schedule: dispatched, running or done.
        started = [r for r in runs if r.status not in (RunStatus.PENDING, RunStatus.CANCELLED)]
        last = started[0] if started else None
        running = any(r.status in (RunStatus.RUNNING, RunStatus.RETRYING) for r in runs)
        status = "running" if running and job.status is JobStatus.SCHEDULED else job.status.value
        return JobView(job=_shown(job), status=status, last_run=last)

    def _validated(self, spec: JobSpec, *, check_notify: bool = True) -> JobSpec:
        """``spec`` checked, as one new JobSpec (the create path's hottest few microseconds:
        one constructor call, not a dataclasses.replace per normalised field)."""
        # A stored list is not judged again on other changes: a deployment that lost its
        # SMTP settings must still let its users rename or pause a job.
        notify = (validate_notify(spec.notify, settings=self.settings, guard=self._guard)
                  if check_notify else spec.notify)
        _check_action_shape(spec.action)
        self.actions.validate(spec.action)
        secret_headers.check_not_redacted(spec.action)
        name = (spec.name or "").strip()
        _check_text(name, "name")
        if len(name) > MAX_NAME_CHARS:
            raise ValidationError("name is too long", field="name",
                                  expected=f"at most {MAX_NAME_CHARS} characters")
        _check_retry_policy(spec.retry_policy)
        if spec.misfire_policy not in ("run_late", "skip"):
            raise ValidationError("unknown misfire policy", field="misfire_policy",
                                  expected="run_late | skip")
        if spec.overlap_policy not in OVERLAP_POLICIES:
            raise ValidationError("unknown overlap policy", field="overlap_policy",
                                  expected=" | ".join(OVERLAP_POLICIES))
        # Written so that NaN fails it too.
        if not 0 < spec.timeout_seconds <= MAX_TIMEOUT_SECONDS:
            raise ValidationError("timeout out of range", field="timeout_seconds",
                                  expected=f"more than 0 and at most {MAX_TIMEOUT_SECONDS:g}")
        params = spec.params
        _check_params(params)
        if not params.timezone:
            params = replace(params, timezone=self.settings.default_timezone)
        return JobSpec(action=spec.action, params=params, name=name or None,
                       retry_policy=spec.retry_policy, misfire_policy=spec.misfire_policy,
                       timeout_seconds=spec.timeout_seconds, notify=notify,
                       overlap_policy=spec.overlap_policy)

    # --- attempts and history (docs/api.md) ----------------------------------------------
    async def get_run_attempts(self, user_id: str, run_id: str) -> tuple[JobRun, list[RunAttempt]]:
        """The run (as ``get_run``) and its attempts, oldest first."""
        run = await self.get_run(user_id, run_id)
        return run, await self.store.run_attempts(run_id, MAX_ATTEMPTS_SHOWN)

    async def job_history(self, user_id: str, job_id: str, *, page_size: int = 20,
                          page_token: str | None = None) -> Page[JobChange]:
        """The job's changes, newest first, ending with its creation (read from the job row,
        written in the creating transaction). Only the owner sees them; a deleted job's
        history stays readable until retention prunes the job."""
        _check_page_size(page_size)
        job = await self._job(user_id, job_id)
        changes = await self.store.job_changes(job_id, page_size + 1,
                                               _decode_token(page_token, "h"))
        if len(changes) <= page_size:  # the stored changes end here: the creation comes next
            changes.append(JobChange(change_id=job.job_id, job_id=job.job_id, actor=job.user_id,
                                     action=ChangeAction.CREATE, changed_at=job.created_at))
        token = (_encode_token("h", changes[page_size - 1].change_id)
                 if len(changes) > page_size else None)
        return Page(items=changes[:page_size], next_page_token=token)

    def _change_entry(self, user_id: str, job: Job, save: JobSave,
                      action: ChangeAction) -> JobChange:
        """What a change did to the job's user-facing fields; a run-now names its run."""
        details = field_changes(_audited_fields(job), _audited_fields(save.job))
        if "action" in details:  # compared in full, shown with credential headers redacted
            details["action"] = {"old": secret_headers.redact(job.action),
                                 "new": secret_headers.redact(save.job.action)}
        if action is ChangeAction.RUN and save.insert_run is not None:
            details["run_id"] = save.insert_run.run_id
        if action is ChangeAction.BACKFILL:
            details["run_ids"] = [r.run_id for r in save.backfill_runs]
        if action is ChangeAction.SKIP and save.skip_run is not None:
            details["run_id"] = save.skip_run.run_id
            details["scheduled_at"] = save.skip_run.scheduled_at.isoformat()
        return self._change_record(user_id, job.job_id, action, details)

    def _change_record(self, user_id: str, job_id: str, action: ChangeAction,
                       details: dict[str, Any]) -> JobChange:
        now = self.clock.now()
        return JobChange(change_id=new_ulid(now), job_id=job_id, actor=user_id, action=action,
                         changed_at=now, channel=acting_channel.get(), details=details)


MAX_ATTEMPTS_SHOWN = 200  # attempts of one run in a response (max_attempts is at most 100)


async def _occurrences(job: Job, start: datetime, end: datetime,
                       max_runs: int) -> list[datetime]:
    """The job's occurrences in ``[start, end)``; more than ``max_runs`` is a 422."""
    found = await job_occurrences(job, start - timedelta(microseconds=1), end, max_runs + 1)
    if len(found) > max_runs:
        raise ValidationError(
            f"more than {max_runs} occurrences between start_time and end_time",
            code="too_many_runs", field="end_time",
            expected=f"a range with at most {max_runs} occurrences (max_runs, at most "
                     f"{MAX_BACKFILL_RUNS})")
    return found


def _audited_fields(job: Job) -> dict[str, Any]:
    """A job's fields as the API shows them (compared before the action is redacted)."""
    return {"name": job.name, "action": job.action,
            "job_params": job.params.to_dict(), "retry_policy": job.retry_policy.to_dict(),
            "misfire_policy": job.misfire_policy, "overlap_policy": job.overlap_policy,
            "timeout_seconds": job.timeout_seconds,
            "notify": job.notify, "status": job.status.value}


def _shown(job: Job) -> Job:
    """The job as users and models see it: secret header values hidden."""
    action = secret_headers.redact(job.action)
    return job if action is job.action else replace(job, action=action)


def _check_text(text: str | None, field_name: str) -> None:
    if text is not None and not is_storable_text(text):
        raise ValidationError(f"{field_name} holds an unpaired surrogate or a NUL character",
                              code="invalid_text", field=field_name, expected=TEXT_EXPECTED)


def _check_action_shape(action: dict[str, Any]) -> None:
    """What any action must be to be stored and shown again: storable text, finite numbers,
    bounded nesting and size. The action's own rules come after (ActionRegistry.validate)."""
    problem = first_problem(action, "action", max_depth=MAX_ACTION_DEPTH)
    if problem is not None and problem.kind == "text":
        raise ValidationError(problem.detail, code="invalid_text", field=problem.path,
                              expected=TEXT_EXPECTED)
    if problem is not None and problem.kind == "number":
        raise ValidationError(problem.detail, field=problem.path, expected="a finite number")
    if problem is not None:
        raise ValidationError(problem.detail, code="action_too_deep", field=problem.path,
                              expected=f"at most {MAX_ACTION_DEPTH} levels of nested objects "
                                       "and arrays in the action, itself included")
    size = len(json.dumps(action, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_ACTION_BYTES:
        raise ValidationError(f"the action is {size} bytes of JSON", code="action_too_large",
                              field="action",
                              expected=f"an action of at most {MAX_ACTION_BYTES} bytes of JSON")


def _check_retry_policy(policy: RetryPolicy) -> None:
    if not 1 <= policy.max_attempts <= MAX_ATTEMPTS_LIMIT:
        raise ValidationError("max_attempts out of range", field="retry_policy.max_attempts",
                              expected=f"an integer from 1 to {MAX_ATTEMPTS_LIMIT}")
    for name, seconds in (("backoff_seconds", policy.backoff_seconds),
                          ("max_backoff_seconds", policy.max_backoff_seconds)):
        if not (math.isfinite(seconds) and 0 <= seconds <= MAX_BACKOFF_SECONDS):
            raise ValidationError(f"{name} out of range", field=f"retry_policy.{name}",
                                  expected=f"seconds from 0 to {MAX_BACKOFF_SECONDS:g}")
    if policy.max_backoff_seconds < policy.backoff_seconds:
        raise ValidationError("backoff out of range", field="retry_policy.backoff_seconds",
                              expected="0 <= backoff_seconds <= max_backoff_seconds")


# Which of time / schedule each job type takes; the other one is a contradiction, not a value
# to store and ignore.
_TIME_FIELDS: dict[str, tuple[str, str]] = {
    "immediate": ("", "neither time nor schedule: an immediate job runs now"),
    "one-time": ("time", "only time (ISO 8601) for a one-time job"),
    "recurring": ("schedule", "only schedule (cron or RRULE) for a recurring job"),
}


def _check_params(params: JobParams) -> None:
    for name in ("time", "schedule", "timezone"):
        _check_text(getattr(params, name), f"job_params.{name}")
    takes, expected = _TIME_FIELDS.get(params.type, ("", ""))
    for name in ("schedule", "time"):
        if getattr(params, name) is not None and name != takes:
            article = "an" if params.type.startswith("i") else "a"
            raise ValidationError(f"{article} {params.type} job has no {name}",
                                  code="conflicting_field", field=f"job_params.{name}",
                                  expected=expected)
    _check_flexible_window(params)


def _check_flexible_window(params: JobParams) -> None:
    window = params.flexible_window_seconds
    field_name = "job_params.flexible_window_seconds"
    # bool is an int in Python; MCP and chat hand over whatever JSON they were given.
    if (isinstance(window, bool) or not isinstance(window, int)
            or not 0 <= window <= MAX_FLEXIBLE_WINDOW_SECONDS):
        raise ValidationError("flexible_window_seconds out of range", field=field_name,
                              expected=f"an integer from 0 to {MAX_FLEXIBLE_WINDOW_SECONDS} "
                                       "(0: fire exactly on time)")
    if window and params.type == "immediate":
        # An immediate job runs now; a window would only make "now" later.
        raise ValidationError("an immediate job has no flexible window",
                              code="conflicting_field", field=field_name,
                              expected="no flexible_window_seconds (or 0) for an immediate job")


def _default_name(spec: JobSpec) -> str:
    action = spec.action
    text = action.get("text") or action.get("prompt") or action.get("url") or action["type"]
    return str(text)[:80]


def _request_hash(spec: JobSpec) -> str:
    request: dict[str, Any] = {
        "action": spec.action, "params": spec.params.to_dict(), "name": spec.name,
        "retry": spec.retry_policy.to_dict(), "misfire": spec.misfire_policy,
        "timeout": spec.timeout_seconds,
    }
    if spec.notify != default_notify():  # so hashes of requests made before notify still match
        request["notify"] = spec.notify
    if spec.overlap_policy != "skip":  # likewise for requests made before overlap_policy
        request["overlap"] = spec.overlap_policy
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_page_size(page_size: int) -> None:
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValidationError("page_size out of range", field="page_size",
                              expected=f"an integer from 1 to {MAX_PAGE_SIZE}")


def _parse_status_filter(status: str | None) -> JobStatus | None:
    if status is None or status == "running":
        return None if status is None else JobStatus.SCHEDULED
    try:
        return JobStatus(status)
    except ValueError:
        raise ValidationError(f"unknown status {status!r}", field="status",
                              expected="scheduled | running | completed | failed | paused | "
                                       "cancelled") from None


def _encode_token(kind: str, value: str) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{value}".encode()).decode().rstrip("=")


def _decode_token(token: str | None, kind: str) -> str | None:
    if token is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        got_kind, value = raw.split(":", 1)
    except ValueError:
        got_kind, value = "", ""
    if got_kind != kind or not value or not is_storable_text(value):
        raise _invalid_token()
    return value


def _token_instant(value: str) -> datetime:
    """The instant of a runs page token; a forged one is refused, not passed to the store."""
    try:
        instant = datetime.fromisoformat(value)
        if instant.tzinfo is None:
            raise ValueError("naive")
        instant.astimezone(UTC)  # an offset that moves year 1 or 9999 out of range overflows
    except (ValueError, OverflowError):
        raise _invalid_token() from None
    return instant


def _inbox_cursor(value: str | None) -> InboxCursor | None:
    if value is None:
        return None
    read, _, item_id = value.partition(":")
    if read not in ("0", "1") or not item_id:
        raise _invalid_token()
    return InboxCursor(read=read == "1", item_id=item_id)


def _invalid_token() -> ValidationError:
    return ValidationError("page_token is not valid here", code="invalid_page_token",
                           field="page_token", expected="a next_page_token from this listing")


__all__ = ["CreateOutcome", "JobPatch", "JobService", "JobSpec", "JobView", "Page"]
