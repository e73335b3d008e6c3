"""The production store: PostgreSQL through psycopg 3 (async) and a connection pool.

Same semantics as the SQLite store, with PostgreSQL doing the concurrency work:

* ``job_runs`` is partitioned by day on ``scheduled_at`` (``job_runs_pYYYYMMDD``) near now, by
  month (``job_runs_mYYYYMM``) further ahead, plus a DEFAULT partition as a safety net.
  ``partitions_maintain`` keeps yesterday .. now + ahead days as days, splits a month into its
  days when the window reaches it, keeps months ready up to the far horizon, and drops
  partitions older than the retention (store/pg_partitions.py draws the layout). Every lookup
  by run id also names ``scheduled_at`` (the run id encodes it), so it reads a single partition.
* ``runs_claim_due`` walks the shard's hourly buckets from its watermark (``store/watermark.py``),
  but each bucket is claimed by ONE statement (``FOR UPDATE SKIP LOCKED`` in a CTE, the PENDING
  guard repeated in the UPDATE), so watchers may claim the same shard concurrently: each run is
  taken by exactly one of them. A bucket where rows were skipped (held by another transaction)
  does not count as drained, so the watermark never passes a run that might stay PENDING.
* Run events become visible to ``events_after`` only once every older transaction has ended;
  their ids carry the inserting transaction's id so that visible events are always a prefix
  of the id order (migration 0001 and docs/postgres.md explain why a plain sequence is not
  enough).
* Inserting or reviving a PENDING run that is due within ``NOTIFY_HORIZON`` sends a NOTIFY in
  the same transaction; ``due_notice_wait`` LISTENs on a dedicated connection.

Driver errors that mean "the database is not answering" (a lost connection: SQLSTATE class 08,
a closed connection, a pool timeout) become ``BackendError`` with the driver error as cause; a
statement the server refused for a reason of the moment (deadlock, serialization failure, lock
or statement timeout) becomes its subclass ``StatementRefusedError`` (db/pgpool.py). The pool
checks each connection before handing it out and reconnects in the background, so the store
survives a PostgreSQL restart: calls fail with BackendError while it is down, then work again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.rows import DictRow
from psycopg.types.string import TextLoader

from onthedot.db.pgpool import (
    IDENTIFIER_MAX_BYTES,
    UNAVAILABLE,
    Conn,
    LazyPool,
    apply_migrations,
    conflict_retried,
)
from onthedot.db.sqlfile import load_queries
from onthedot.domain.clock import Clock, SystemClock
from onthedot.domain.delivery import (
    Delivery,
    DeliveryClaim,
    DeliveryDone,
    DeliveryRetryClaim,
    InboxItem,
    WebhookSecret,
)
from onthedot.domain.errors import BackendError, ConfigError
from onthedot.domain.history import (
    ERROR_MAX_CHARS,
    LOST_ERROR,
    RELEASED_ERROR,
    AttemptStatus,
    JobChange,
    RunAttempt,
    bounded,
)
from onthedot.domain.ids import bucket_start, scheduled_at_of
from onthedot.domain.models import Job, JobRun, RunEvent, RunStatus
from onthedot.store.base import (
    OLDEST_DUE_ENQUEUED_CAP,
    SKIP_ERROR,
    ApiToken,
    ApplyResult,
    ClaimedRun,
    DueClaim,
    DueClaimed,
    EventApply,
    EventsApplied,
    FeedState,
    FeedStatesPut,
    InboxQuery,
    JobCreated,
    JobInsert,
    JobSave,
    Migrated,
    Prune,
    Pruned,
    RunClaim,
    RunFinish,
    RunRetry,
    ShardLease,
    skip_refused,
)
from onthedot.store.codec import (
    dump_output,
    feed_state_from_row,
    feed_state_params,
    job_from_row,
    job_to_params,
    run_from_row,
    run_to_params,
)
from onthedot.store.delivery_rows import (
    claim_params,
    delivery_from_row,
    done_params,
    inbox_from_row,
    native_times,
    retry_claim_params,
    secret_from_row,
    secret_params,
)
from onthedot.store.event_batch import EventBatch, OpenRuns, single_result
from onthedot.store.history_rows import (
    attempt_end_params,
    attempt_from_row,
    change_from_row,
    change_params,
)
from onthedot.store.insert_many import InsertPlan
from onthedot.store.job_guard import NEXT_ATTEMPT_STOP, RELEASE_STOP, retry_stop_params
from onthedot.store.leases import RELEASED_AT, leases_taken
from onthedot.store.pg_partitions import (
    Layout,
    day_name,
    days_of,
    far_months,
    month_name,
    months_after,
    parse_layout,
    start_of,
    unsplit_name,
)
from onthedot.store.reads import SharedReads
from onthedot.store.run_batches import Key, RunBatches, claimed_from_row, finish_event
from onthedot.store.tokens import (
    ACTIVE,
    QuotaSplit,
    active_quota_error,
    quota_keys,
    quota_users,
    reassign_clash,
    token_from_row,
    token_params,
)
from onthedot.store.watermark import BucketWalk, Walks, is_behind, tick_rounds, tick_walk

Q = load_queries("onthedot.store", "sql/postgres/queries.sql")
log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
NOTIFY_HORIZON = timedelta(seconds=2)  # a PENDING run due sooner than this wakes the watchers
POOL_TIMEOUT_SECONDS = 10.0  # default wait for a pooled connection, then BackendError
# Partition DDL gives up rather than queue every query of the table behind its lock request.
# Under half of PostgreSQL's default deadlock_timeout (1 s): in a lock cycle with a request
# (docs/postgres.md, "Partitions"), the maintainer's wait always ends first and it is the one
# that gives up; the next maintenance tries again.
PARTITION_LOCK_TIMEOUT = "200ms"
# Event ids keep a per-transaction ordinal in their low 16 bits (run_event_next_id), so one
# transaction appends at most this many events: a claim takes at most this many runs per call.
MAX_EVENTS_PER_TRANSACTION = 65_535

# Partition DDL that did not get its locks: left for the next maintenance.
_LOCK_REFUSED = (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected)



async def _load_jsonb_as_text(conn: Conn) -> None:
    # The codec parses JSON text itself: psycopg's jsonb loader would hand it a Python string
    # for a JSON string output, which the codec would then parse a second time.
    conn.adapters.register_loader("jsonb", TextLoader)


class PostgresStore(SharedReads):
    queries = Q

    def __init__(self, dsn: str, *, schema: str = "public", partition_ahead_days: int = 7,
                 partition_far_months: int = 24, retention_days: int = 30, pool_min: int = 1,
                 pool_max: int = 10, pool_timeout_seconds: float = POOL_TIMEOUT_SECONDS,
                 clock: Clock | None = None) -> None:
        if partition_ahead_days < 0:
            raise ConfigError("partition_ahead_days must not be negative",
                              field="partition_ahead_days", expected="an integer >= 0")
        if partition_far_months < 0:
            raise ConfigError("partition_far_months must not be negative",
                              field="partition_far_months", expected="an integer >= 0")
        if retention_days < 1:
            raise ConfigError("retention_days must be at least 1", field="retention_days",
                              expected="an integer >= 1")
        self.dsn = dsn
        self.clock = clock or SystemClock()
        self.schema = schema
        self.partition_ahead_days = partition_ahead_days
        self.partition_far_months = partition_far_months
        self.retention_days = retention_days
        self.channel = _channel_name(schema)
        self._db = LazyPool(dsn, schema=schema, role="store", pool_min=pool_min,
                            pool_max=pool_max, timeout_seconds=pool_timeout_seconds,
                            configure=_load_jsonb_as_text)
        # A worker's claims, retries and finishes that arrive together: one statement a kind.
        self._batches = RunBatches(self, alone=conflict_retried)
        self._closed = False
        self._listener: AsyncConnection[Any] | None = None
        self._listen_lock = asyncio.Lock()

    # --- lifecycle -----------------------------------------------------------------------
    async def migrate(self) -> Migrated:
        async with self._conn() as conn:
            done, applied = await apply_migrations(
                conn, schema=self.schema, queries=Q, package="onthedot.store",
                folder="sql/postgres/migrations")
        await self.partitions_maintain(self.clock.now())
        before = max(done, default=0)
        return Migrated(before=before, after=max([before, *applied]), applied=tuple(applied))

    async def close(self) -> None:
        self._closed = True
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
        await self._db.close()

    async def ping(self) -> None:
        async with self._conn() as conn:
            await conn.execute("SELECT 1")

    async def due_notice_wait(self, seconds: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        try:
            async with asyncio.timeout(seconds):
                await self._listen_lock.acquire()
        except TimeoutError:
            return False
        try:
            conn = await self._listen_connection()
            remaining = max(0.0, deadline - loop.time())
            # The generators hold the connection's lock until closed: close them here.
            got = False
            async with aclosing(conn.notifies(timeout=remaining, stop_after=1)) as notices:
                async for _ in notices:
                    got = True
            if got:  # collapse a burst of notices into this one wakeup
                async with aclosing(conn.notifies(timeout=0)) as notices:
                    async for _ in notices:
                        pass
            return got
        except UNAVAILABLE as exc:
            await self._drop_listener()
            if self._closed:
                return False
            # Degrade to polling: the watcher ticks on its own; LISTEN again next time.
            log.warning("LISTEN connection failed, waiting without it: %s", exc)
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            return False
        finally:
            self._listen_lock.release()

    # --- partitions ----------------------------------------------------------------------
    async def maintain(self, now: datetime) -> None:
        await self.partitions_maintain(now)

    async def partitions_maintain(self, now: datetime) -> None:
        """Keep the job_runs partitions of docs/postgres.md ("Partitions") ready around now:

        * a daily partition for each day from yesterday to now + ``partition_ahead_days``; a
          day inside a month that is still one leaf splits that whole month into days;
        * a monthly partition for each later month up to the month of now +
          ``partition_far_months`` months, so far-future runs stay out of the default
          partition that every new top-level partition must scan;
        * partitions that ended before now - ``retention_days`` are dropped, except one still
          holding a run the retention rule keeps (docs/reliability.md, "Nothing is kept for
          ever"; ``_runs_kept_from``): an open run (runs missed during a long outage must still
          be found by the watchers), one that finished -- or was dead-lettered -- within the
          retention, or one whose run event a consumer has not applied yet. A partition is
          dropped whole or not at all; the rows such a partition may lose go one by one by
          ``prune``, and the partition at a later maintenance. A month goes once its days are
          gone.

        Each change is one transaction; one whose locks are not granted within
        PARTITION_LOCK_TIMEOUT is left for the next call."""
        first = (now - DAY).astimezone(UTC).date()
        last = (now + timedelta(days=self.partition_ahead_days)).astimezone(UTC).date()
        layout = await self._partition_layout()
        splits_tried: set[date] = set()
        day = first
        while day <= last:
            month = layout.month_covering(day)
            if day in layout.days or (month is not None and month.start in splits_tried):
                pass
            elif month is None:
                await self._partition_step(day_name(day), partial(self._day_create, day))
            elif month.unsplit:
                splits_tried.add(month.start)
                await self._partition_step(month_name(month.start),
                                           partial(self._month_split, month.start))
                layout = await self._partition_layout()
            else:
                await self._partition_step(day_name(day),
                                           partial(self._month_day_create, day))
            day += DAY
        for start in far_months(last, now, self.partition_far_months):
            if layout.is_free(start, months_after(start)):
                await self._partition_step(month_name(start),
                                           partial(self._month_create, start))
        cutoff = now - timedelta(days=self.retention_days)
        old_days = [old for old in sorted(layout.days) if start_of(old) + DAY <= cutoff]
        old_months = [m.start for m in sorted(layout.months.values(), key=lambda m: m.start)
                      if start_of(m.end) <= cutoff]
        if not old_days and not old_months:
            return
        # Read once: a run that finishes after this read has finished_at >= now >= keep_from.
        async with self._conn() as conn:
            keep_from = await self._runs_kept_from(conn, cutoff)
        for old in old_days:
            await self._partition_step(day_name(old), partial(self._day_drop, old, keep_from))
        for start in old_months:
            await self._partition_step(month_name(start),
                                       partial(self._month_drop, start, keep_from))

    async def _runs_kept_from(self, conn: Conn, before: datetime) -> datetime:
        """The retention rule's line for finished runs, shared by ``prune`` and the partition
        drops: a finished run may go only if it finished before ``before`` and before the
        oldest run event some consumer has not applied yet (so the run of every unread event,
        which the recurring watcher still has to decide on, stays)."""
        cur = await conn.execute(Q["prune_cursor_floor"])
        floor = await cur.fetchone()
        position = 0 if floor is None else int(floor["position"])
        cur = await conn.execute(Q["oldest_unread_event"], {"position": position})
        unread = await cur.fetchone()
        return before if unread is None else min(before, unread["emitted_at"])

    async def _partition_layout(self, conn: Conn | None = None) -> Layout:
        if conn is None:
            async with self._conn() as own:
                return await self._partition_layout(own)
        rows = await (await conn.execute(Q["partitions_tree"])).fetchall()
        layout = parse_layout((str(r["name"]), str(r["parent"])) for r in rows)
        if layout.foreign:
            log.debug("partitions not made by onthedot, left alone: %s", layout.foreign)
        return layout

    async def _partition_step(self, label: str, step: Callable[[Conn], Awaitable[None]]) -> None:
        try:
            async with self._tx() as conn:
                await conn.execute(Q["partitions_lock"], {"schema": self.schema})
                await conn.execute(Q["partition_set_lock_timeout"],
                                   {"lock_timeout": PARTITION_LOCK_TIMEOUT})
                await step(conn)
        except BackendError as exc:
            if not isinstance(exc.__cause__, _LOCK_REFUSED):
                raise
            log.warning("partition %s: locks not granted (%s), retrying at the next maintenance",
                        label, type(exc.__cause__).__name__)

    async def _day_create(self, day: date, conn: Conn) -> None:
        """A top-level day: its rows so far wait in the default partition."""
        layout = await self._partition_layout(conn)
        if day in layout.days or layout.month_covering(day) is not None:
            return  # another maintainer got there while we waited for the lock
        names = _day_parts(day)
        await conn.execute(Q["partition_lock_jobs"])
        # Writers into the default partition wait until the day's rows have moved: none can
        # slip in between the move and the attach (which would then fail its check).
        await conn.execute(Q["partition_lock_default"])
        await conn.execute(_ddl("partition_create_table", **names))
        moved = await conn.execute(_ddl("partition_move_from_default", **names))
        await conn.execute(_ddl("partition_attach", **names))
        if moved.rowcount:
            log.info("partition %s created with %d runs from the default partition",
                     day_name(day), moved.rowcount)

    async def _month_create(self, start: date, conn: Conn) -> None:
        """A month ahead of the daily window, as one leaf; the rows it takes over from the
        default partition are those a run of far_months = 0 (or an older version) left there."""
        layout = await self._partition_layout(conn)
        end = months_after(start)
        if not layout.is_free(start, end):
            return
        names = _month_parts(start)
        await conn.execute(Q["partition_lock_jobs"])
        await conn.execute(Q["partition_lock_default"])
        await conn.execute(_ddl("month_create", **names))
        await conn.execute(_ddl("month_create_unsplit", **names))
        moved = await conn.execute(_ddl("partition_move_from_default",
                                        **{**names, "partition": names["month"]}))
        await conn.execute(_ddl("partition_attach", **{**names, "partition": names["month"]}))
        if moved.rowcount:
            log.info("partition %s created with %d runs from the default partition",
                     month_name(start), moved.rowcount)

    async def _month_split(self, start: date, conn: Conn) -> None:
        """Replace a month's one leaf by its days, holding a lock on that month only: queries
        that prune it away (today's due runs, any run looked up by id) go on meanwhile."""
        month = (await self._partition_layout(conn)).months.get(start)
        if month is None or not month.unsplit:
            return
        names = _month_parts(start)
        await conn.execute(Q["partition_lock_jobs"])
        await conn.execute(_ddl("partition_lock_exclusive", partition=names["month"]))
        moved = 0
        days = days_of(start)
        for day in days:
            day_names = {**names, **_day_parts(day)}
            await conn.execute(_ddl("month_day_create_detached", **day_names))
            moved += (await conn.execute(_ddl("month_day_copy", **day_names))).rowcount
        await conn.execute(_ddl("partition_drop", partition=names["unsplit"]))
        for day in days:
            day_names = {**names, **_day_parts(day)}
            await conn.execute(_ddl("month_day_attach", **day_names))
            await conn.execute(_ddl("partition_drop_check", **day_names))
        log.info("partition %s split into %d days (%d runs)", month_name(start),
                 len(days), moved)

    async def _month_day_create(self, day: date, conn: Conn) -> None:
        """A day missing from a month already split (only if someone dropped it)."""
        month = (await self._partition_layout(conn)).month_covering(day)
        if month is None or month.unsplit or day in month.days:
            return
        await conn.execute(Q["partition_lock_jobs"])
        await conn.execute(_ddl("month_day_create", **_month_parts(month.start),
                                **_day_parts(day)))

    async def _day_drop(self, day: date, keep_from: datetime, conn: Conn) -> None:
        if day not in (await self._partition_layout(conn)).days:
            return
        await self._leaf_drop_unless_kept(conn, day_name(day), keep_from)

    async def _month_drop(self, start: date, keep_from: datetime, conn: Conn) -> None:
        """A month past retention goes once it has no days left (they go one by one first);
        a month never split goes with its leaf."""
        month = (await self._partition_layout(conn)).months.get(start)
        if month is None or month.days:
            return
        if month.unsplit and not await self._leaf_drop_unless_kept(
                conn, unsplit_name(start), keep_from):
            return
        await conn.execute(_ddl("partition_drop", partition=_month_parts(start)["month"]))

    async def _leaf_drop_unless_kept(self, conn: Conn, name: str, keep_from: datetime) -> bool:
        partition = sql.Identifier(name)
        cur = await conn.execute(_ddl("partition_has_kept_runs", partition=partition),
                                 {"keep_from": keep_from})
        row = await cur.fetchone()
        if row is not None and row["kept"]:
            log.info("partition %s is past retention but holds runs the retention rule keeps "
                     "(open, finished or dead-lettered since %s, or with an unread event); "
                     "kept", name, keep_from.isoformat())
            return False
        # Dropped while attached: DETACH would first give it a foreign key of its own, which
        # takes locks on jobs; DROP needs only its parent (job_runs, or its month).
        await conn.execute(_ddl("partition_drop", partition=partition))
        return True

    # --- jobs ----------------------------------------------------------------------------
    async def job_create(self, job: Job, first_run: JobRun | None) -> JobCreated:
        run = {f"r_{k}": v for k, v in _run_params(first_run).items()} if first_run else {
            f"r_{k}": None for k in ("run_id", "time_bucket", "shard", "scheduled_at", "kind",
                                     "status", "attempt")}
        now = self.clock.now()
        notify = (first_run is not None and first_run.status is RunStatus.PENDING
                  and first_run.scheduled_at <= now + NOTIFY_HORIZON)
        behind = first_run is not None and is_behind(first_run.scheduled_at, now)
        params = {**_job_params(job), **run, "channel": self.channel,
                  "payload": str(first_run.shard if first_run else 0), "notify": notify,
                  "behind": behind}
        row = await self._one(Q["job_create"], params)
        if row is not None and row["created"]:
            return JobCreated(job=job, created=True)
        existing = await self._one(Q["job_by_idempotency_key"], {
            "user_id": job.user_id, "idempotency_key": job.idempotency_key,
        })
        if existing is None:  # cannot happen: the conflict that stopped the insert is here
            raise BackendError("idempotency conflict without a matching job")
        return JobCreated(job=job_from_row(existing), created=False)

    async def jobs_insert_many(self, items: Sequence[JobInsert]) -> list[JobCreated]:
        if not items:
            return []
        if quota_users(items):
            return await self._jobs_insert_within_quota(items)
        plan = InsertPlan.of(items)
        # One statement is one transaction (autocommit): all of it or none of it. Reading the
        # holders of keys afterwards is what job_create does too: the holder is committed.
        found = await self._all(Q["jobs_insert_many"], {
            **_insert_columns(plan.offered, self.clock.now()), "channel": self.channel})
        created = {str(r["job_id"]) for r in found}
        holders: dict[tuple[str, str], Job] = {}
        keys = plan.keys_to_read(created)
        if keys:
            for row in await self._all(Q["jobs_by_idempotency_keys"], _key_columns(keys)):
                holders[(row["user_id"], row["idempotency_key"])] = job_from_row(row)
        return plan.results(created, holders)

    async def job_save(self, save: JobSave) -> Job | None:
        counted = save.max_active is not None and save.job.status in ACTIVE
        async with self._tx() as conn:
            if counted:
                # The user's quota lock before the job's row, as creates and redrives take them.
                await conn.execute(Q["quota_lock"], {"user_id": save.job.user_id})
            cur = await conn.execute(Q["job_update"], _job_params(save.job))
            row = await cur.fetchone()
            if row is None:
                return None  # the version moved: another change landed first; nothing written
            if counted and save.max_active is not None:
                await _check_active(conn, save.job.user_id, save.max_active)  # rolls back
            if save.cancel_open_runs:
                await conn.execute(Q["runs_cancel_open"], {
                    "job_id": save.job.job_id, "now": save.job.updated_at,
                    "include_manual": save.cancel_manual_runs,
                })
            if save.skip_run is not None:
                skip = save.skip_run
                cur = await conn.execute(Q["run_skip"], {
                    "run_id": skip.run_id, "scheduled_at": skip.scheduled_at,
                    "error": SKIP_ERROR, "now": save.job.updated_at})
                if cur.rowcount != 1:
                    raise skip_refused(skip)  # rolls the whole save back
            if save.insert_run is not None:
                await self._insert_or_revive(conn, save.insert_run)
            for run in save.backfill_runs:
                await self._insert_run(conn, run)
            if save.change is not None:
                await conn.execute(Q["job_change_insert"], _change_params(save.change))
            return replace(save.job, version=int(row["version"]))

    async def deployment_pin(self, name: str, value: str) -> str:
        async with self._tx() as conn:
            await conn.execute(Q["deployment_pin"], {"name": name, "value": value})
            cur = await conn.execute(Q["deployment_get"], {"name": name})
            row = await cur.fetchone()
            assert row is not None  # inserted above or there already
            return str(row["value"])

    # --- runs ----------------------------------------------------------------------------
    async def run_insert(self, run: JobRun) -> bool:
        async with self._tx() as conn:
            return await self._insert_run(conn, run)

    async def run_get(self, run_id: str) -> JobRun | None:
        at = _scheduled_at(run_id)
        if at is None:
            return None
        row = await self._one(Q["run_get"], {"run_id": run_id, "scheduled_at": at})
        return None if row is None else run_from_row(row)

    async def runs_get_many(self, run_ids: Sequence[str]) -> dict[str, JobRun]:
        keyed = [(run_id, at) for run_id in set(run_ids)
                 if (at := _scheduled_at(run_id)) is not None]
        if not keyed:
            return {}
        rows = await self._all(Q["runs_get_many"], {
            "run_ids": [k[0] for k in keyed], "scheduled_ats": [k[1] for k in keyed]})
        return {str(r["run_id"]): run_from_row(r) for r in rows}

    async def jobs_get_any_many(self, job_ids: Sequence[str]) -> dict[str, Job]:
        if not job_ids:
            return {}
        rows = await self._all(Q["jobs_get_any_many"], {"job_ids": sorted(set(job_ids))})
        return {str(r["job_id"]): job_from_row(r) for r in rows}

    async def run_last_succeeded(self, job_id: str, before: datetime) -> JobRun | None:
        row = await self._one(Q["run_last_succeeded"], {"job_id": job_id, "before": before})
        return None if row is None else run_from_row(row)

    async def runs_list(self, job_id: str, limit: int,
                        before_scheduled_at: datetime | None) -> list[JobRun]:
        rows = await self._all(Q["runs_list"], {
            "job_id": job_id, "limit": limit, "before_scheduled_at": before_scheduled_at,
        })
        return [run_from_row(r) for r in rows]

    async def runs_claim_due(self, claim: DueClaim) -> DueClaimed:
        async with self._tx() as conn:
            return await _claim_due(conn, claim)

    async def runs_claim_due_many(self, claims: Sequence[DueClaim]) -> list[DueClaimed]:
        if not _one_tick(claims):
            return [await self.runs_claim_due(claim) for claim in claims]
        async with self._tx() as conn:
            return await _claim_due_many(conn, claims)

    async def runs_enqueued_in_shards(self, shards: list[int], since: datetime,
                                      limit: int) -> list[JobRun]:
        rows = await self._all(Q["runs_enqueued_in_shards"],
                               {"shards": sorted(set(shards)), "since": since, "limit": limit})
        return [run_from_row(r) for r in rows]

    async def run_claim(self, claim: RunClaim) -> JobRun | None:
        claimed = await self.run_claim_job(claim)
        return None if claimed is None else claimed.run

    async def run_claim_job(self, claim: RunClaim) -> ClaimedRun | None:
        if _scheduled_at(claim.run_id) is None:
            return None
        return await self._batches.claim(claim)

    async def run_release(self, run_id: str, token: str, now: datetime) -> RunStatus | None:
        at = _scheduled_at(run_id)
        if at is None:
            return None
        row = await self._one(Q["run_release"], {
            "run_id": run_id, "scheduled_at": at, "token": token, "now": now,
            **_attempt_end(run_id, token, AttemptStatus.RELEASED, now, RELEASED_ERROR),
            **RELEASE_STOP,
        })
        return None if row is None else RunStatus(row["status"])

    async def run_extend_lease(self, run_id: str, token: str, lease_expires_at: datetime) -> bool:
        at = _scheduled_at(run_id)
        if at is None:
            return False
        return await self._count(Q["run_extend_lease"], {
            "run_id": run_id, "scheduled_at": at, "token": token,
            "lease_expires_at": lease_expires_at,
        }) == 1

    async def run_retry(self, retry: RunRetry) -> RunStatus | None:
        if _scheduled_at(retry.run_id) is None:
            return None
        return await self._batches.retry(retry)

    async def run_finish(self, finish: RunFinish) -> RunEvent | None:
        if _scheduled_at(finish.run_id) is None:
            return None
        return await self._batches.finish(finish)

    # --- the set-based lifecycle writes (store/run_batches.py): SQL only ----------------
    async def claims_write(self, claims: Sequence[RunClaim]) -> dict[Key, ClaimedRun]:
        rows = await self._all(Q["runs_claim"], {
            "run_ids": [c.run_id for c in claims],
            "scheduled_ats": [_scheduled_at(c.run_id) for c in claims],
            "tokens": [c.token for c in claims],
            "nows": [c.now for c in claims],
            "lease_expires_ats": [c.now + timedelta(seconds=c.lease_seconds) for c in claims],
            "lost_error": LOST_ERROR,
            **NEXT_ATTEMPT_STOP,
        })
        return {(str(r["run_id"]), str(r["lease_token"])): claimed_from_row(r) for r in rows}

    async def retries_write(self, retries: Sequence[RunRetry]) -> dict[Key, RunStatus]:
        stops = [retry_stop_params(r.error) for r in retries]
        rows = await self._all(Q["runs_retry"], {
            "run_ids": [r.run_id for r in retries],
            "scheduled_ats": [_scheduled_at(r.run_id) for r in retries],
            "tokens": [r.token for r in retries],
            "errors": [r.error for r in retries],
            "retry_ats": [r.retry_at for r in retries],
            "nows": [r.now for r in retries],
            "a_errors": [bounded(r.error, ERROR_MAX_CHARS) for r in retries],
            "paused_errors": [s["paused_error"] for s in stops],
            "deleted_errors": [s["deleted_error"] for s in stops],
        })
        return {(str(r["run_id"]), str(r["token"])): RunStatus(r["status"]) for r in rows}

    async def finishes_write(self, finishes: Sequence[RunFinish]) -> dict[Key, RunEvent]:
        outputs = [dump_output(f.output) for f in finishes]
        ends = [attempt_end_params(f.run_id, f.token,
                                   AttemptStatus.SUCCEEDED if f.status is RunStatus.SUCCEEDED
                                   else AttemptStatus.FAILED,
                                   f.finished_at, f.error, f.output, output)
                for f, output in zip(finishes, outputs, strict=True)]
        items = [f.inbox for f in finishes]
        rows = await self._all(Q["runs_finish"], {
            "run_ids": [f.run_id for f in finishes],
            "scheduled_ats": [_scheduled_at(f.run_id) for f in finishes],
            "tokens": [f.token for f in finishes],
            "statuses": [f.status.value for f in finishes],
            "finished_ats": [f.finished_at for f in finishes],
            "outputs": outputs,
            "errors": [f.error for f in finishes],
            "dead_lettereds": [f.dead_lettered for f in finishes],
            "a_statuses": [e["a_status"] for e in ends],
            "a_errors": [e["a_error"] for e in ends],
            "a_previews": [e["a_preview"] for e in ends],
            "i_item_ids": [None if i is None else i.item_id for i in items],
            "i_user_ids": [None if i is None else i.user_id for i in items],
            "i_titles": [None if i is None else i.title for i in items],
            "i_bodies": [None if i is None else i.text for i in items],
            "i_outputs": [None if i is None else dump_output(i.output) for i in items],
            "i_scheduled_ats": [None if i is None else i.scheduled_at for i in items],
            "i_created_ats": [None if i is None else i.created_at for i in items],
        })
        by_run = {f.run_id: f for f in finishes}
        return {(str(r["run_id"]), str(r["token"])):
                finish_event(by_run[str(r["run_id"])], int(r["event_id"]), str(r["job_id"]))
                for r in rows}

    async def run_redrive(self, run_id: str, now: datetime, change: JobChange | None = None,
                          *, max_active: int | None = None) -> JobRun | None:
        at = _scheduled_at(run_id)
        if at is None:
            return None
        async with self._tx() as conn:
            cur = await conn.execute(Q["run_job_of"], {"run_id": run_id, "scheduled_at": at})
            job = await cur.fetchone()
            if job is None:
                return None
            job_id, user_id = str(job["job_id"]), str(job["user_id"])
            if max_active is not None:  # the quota lock first, then the job's row
                await conn.execute(Q["quota_lock"], {"user_id": user_id})
            # A run event being applied to the job holds this lock while it decides: it ends
            # the job before the run reopens (revived below), or waits and sees the run open.
            await conn.execute(Q["job_row_lock"], {"job_id": job_id})
            cur = await conn.execute(Q["run_redrive"],
                                     {"run_id": run_id, "scheduled_at": at, "now": now})
            row = await cur.fetchone()
            if row is None:
                return None
            cur = await conn.execute(Q["job_redrive_revive"], {"job_id": job_id, "now": now})
            if cur.rowcount == 1 and max_active is not None:
                await _check_active(conn, user_id, max_active)  # rolls back
            if change is not None:
                await conn.execute(Q["job_change_insert"], _change_params(change))
        return run_from_row(row)

    # --- rescue and retention ------------------------------------------------------------
    async def runs_retry_due(self, now: datetime, limit: int) -> list[JobRun]:
        params = {"now": now, "limit": limit}
        async with self._tx() as conn:
            # The job guard's locks first, in job order (queries.sql, runs_retry_due_lock_jobs).
            cur = await conn.execute(Q["runs_retry_due_lock_jobs"], params)
            job_ids = [str(r["job_id"]) for r in await cur.fetchall()]
            if not job_ids:
                return []
            cur = await conn.execute(Q["runs_retry_due"],
                                     {**params, "job_ids": job_ids, **NEXT_ATTEMPT_STOP})
            rows = await cur.fetchall()
        return [run_from_row(r) for r in rows]

    async def runs_rescue_candidates(self, now: datetime, enqueued_before: datetime,
                                     limit: int) -> list[JobRun]:
        expired = await self._all(Q["runs_lease_expired"], {"now": now, "limit": limit})
        waiting = await self._all(Q["runs_enqueued_before"],
                                  {"before": enqueued_before, "limit": limit})
        return [run_from_row(r) for r in [*expired, *waiting]]

    async def run_requeue(self, run: JobRun, now: datetime) -> JobRun | None:
        params: dict[str, Any] = {"run_id": run.run_id, "scheduled_at": run.scheduled_at,
                                  "now": now, **NEXT_ATTEMPT_STOP}
        if run.status is RunStatus.RUNNING:
            token = run.lease_token or ""
            row = await self._one(Q["run_requeue_running"], {
                **params, "token": token,
                **_attempt_end(run.run_id, token, AttemptStatus.LOST, now, LOST_ERROR)})
        elif run.status is RunStatus.ENQUEUED:
            row = await self._one(Q["run_requeue_enqueued"],
                                  {**params, "enqueued_at": run.enqueued_at})
        else:
            return None
        return None if row is None else run_from_row(row)

    async def watermarks_rewind(self) -> dict[int, int]:
        rows = await self._all(Q["watermarks_rewind"], {})
        return {int(r["shard"]): int(r["bucket"]) for r in rows}

    async def prune(self, prune: Prune) -> Pruned:
        async with self._tx() as conn:
            cur = await conn.execute(Q["prune_cursor_floor"])
            floor = await cur.fetchone()
            position = 0 if floor is None else int(floor["position"])
            runs_before = await self._runs_kept_from(conn, prune.before)
            params = {"before": prune.before, "limit": prune.limit}
            events = (await conn.execute(Q["prune_events"],
                                         {**params, "position": position})).rowcount
            runs = (await conn.execute(Q["prune_runs"],
                                       {**params, "before": runs_before})).rowcount
            jobs = 0
            for row in await (await conn.execute(Q["prunable_jobs"],
                                                 {**params, "keep_from": runs_before})
                              ).fetchall():
                job = {"job_id": row["job_id"]}
                runs += (await conn.execute(Q["job_runs_delete"], job)).rowcount
                await conn.execute(Q["job_feed_state_delete"], job)
                await conn.execute(Q["job_changes_delete"], job)
                jobs += (await conn.execute(Q["job_delete"], {**params, **job})).rowcount
            deliveries = (await conn.execute(Q["prune_deliveries"], params)).rowcount
            inbox = (await conn.execute(Q["prune_inbox"], params)).rowcount
            attempts = (await conn.execute(Q["prune_attempts"], params)).rowcount
            return Pruned(runs=runs, events=events, jobs=jobs, deliveries=deliveries,
                          inbox=inbox, attempts=attempts)

    async def events_lag(self, consumer: str, now: datetime) -> float:
        position = await self.cursor_get(consumer)
        row = await self._one(Q["oldest_unread_event"], {"position": position})
        if row is None:
            return 0.0
        emitted: datetime = row["emitted_at"]
        return max(0.0, (now - emitted).total_seconds())

    # --- per-job state of actions ----------------------------------------------------------
    async def feed_states_get(self, job_id: str, run_id: str) -> list[FeedState]:
        rows = await self._all(Q["feed_states_get"], {"job_id": job_id, "run_id": run_id})
        return [feed_state_from_row(r) for r in rows]

    async def feed_states_put(self, put: FeedStatesPut) -> bool:
        async with self._tx() as conn:
            cur = await conn.execute(Q["run_attempt_live"], {
                "run_id": put.run_id, "scheduled_at": _scheduled_at(put.run_id),
                "attempt": put.attempt})
            if await cur.fetchone() is None:
                return False
            await conn.execute(Q["feed_states_drop"], {"job_id": put.job_id,
                                                       "keep_run_id": put.keep_run_id})
            if put.states:
                async with conn.cursor() as rows:
                    await rows.executemany(Q["feed_state_insert"], [
                        {**feed_state_params(put, state), "fetched_at": state.fetched_at}
                        for state in put.states])
            return True

    # --- events --------------------------------------------------------------------------
    async def event_apply(self, apply: EventApply) -> ApplyResult:
        return single_result(await self.events_apply([apply]))

    async def events_apply(self, applies: Sequence[EventApply]) -> EventsApplied:
        batch = EventBatch(applies)
        try:
            async with self._tx() as conn:
                if not await self._cursor_advance(conn, batch.consumer, batch.previous,
                                                  batch.last):
                    return EventsApplied(applied=0, result=ApplyResult.CURSOR_MOVED)
                applied = await self._batch_lock(conn, batch)
                if applied == 0:
                    raise _JobChanged  # roll back the cursor advance
                if applied < len(batch.applies):  # the cursor stops before the changed job
                    await self._cursor_advance(conn, batch.consumer, batch.last,
                                               batch.applies[applied - 1].event.event_id)
                await self._batch_write(conn, batch.applies[:applied])
                return batch.outcome(applied)
        except _JobChanged:
            return EventsApplied(applied=0, result=ApplyResult.JOB_CHANGED)

    @staticmethod
    async def _cursor_advance(conn: Conn, consumer: str, previous: int, position: int) -> bool:
        advance = {"consumer": consumer, "position": position, "previous": previous}
        cur = await conn.execute(Q["cursor_advance"], advance)
        if cur.rowcount != 1 and previous == 0:
            # The consumer's first event: its row (at 0) is made once, not per event.
            await conn.execute(Q["cursor_init"], {"consumer": consumer})
            cur = await conn.execute(Q["cursor_advance"], advance)
        return cur.rowcount == 1

    @staticmethod
    async def _batch_lock(conn: Conn, batch: EventBatch) -> int:
        """Lock the batch's jobs at their decided versions (job changes wait until this
        commits, so the open-run check cannot interleave with them); how many events apply."""
        guarded = batch.guarded()
        if not guarded:
            return len(batch.applies)
        cur = await conn.execute(Q["jobs_lock_versions"], {
            "job_ids": [a.event.job_id for a in guarded],
            "versions": [a.job_version for a in guarded]})
        return batch.cut({str(r["job_id"]) for r in await cur.fetchall()})

    async def _batch_write(self, conn: Conn, applies: Sequence[EventApply]) -> None:
        found: dict[str, OpenRuns] = {}
        checks = EventBatch.to_check(applies)
        if checks:
            cur = await conn.execute(Q["jobs_open_runs"], {
                "job_ids": [a.event.job_id for a in checks],
                "insert_run_ids": [None if a.insert_run is None else a.insert_run.run_id
                                   for a in checks],
                "include_manual": [a.wait_for_manual_runs for a in checks]})
            found = {str(r["job_id"]): OpenRuns(other_open=bool(r["other_open"]),
                                                open=bool(r["open"]))
                     for r in await cur.fetchall()}
        jobs, runs = EventBatch.writes(applies, found)
        if jobs:
            cur = await conn.execute(Q["jobs_apply_events"], {
                "job_ids": [j.job_id for j in jobs], "versions": [j.version for j in jobs],
                "job_statuses": [j.job_status for j in jobs],
                "set_next_run_ats": [j.set_next_run_at for j in jobs],
                "next_run_ats": [j.next_run_at for j in jobs],
                "last_run_ids": [j.last_run_id for j in jobs],
                "updated_ats": [j.updated_at for j in jobs]})
            if cur.rowcount != len(jobs):  # cannot happen: their rows are locked at these versions
                raise BackendError("a locked job changed during its event apply")
        if runs:
            await self._next_runs_insert(conn, runs)

    async def _next_runs_insert(self, conn: Conn, runs: Sequence[JobRun]) -> None:
        """Insert the runs (watermarks touched, watchers woken), or bring a CANCELLED run with
        the same id back to PENDING."""
        now = self.clock.now()
        cur = await conn.execute(Q["event_runs_insert"], {
            "runs": json.dumps([_next_run_row(run, now) for run in runs], ensure_ascii=False),
            "channel": self.channel})
        inserted = {str(r["run_id"]) for r in await cur.fetchall()}
        for run in runs:
            if run.run_id not in inserted:
                await self._revive(conn, run)

    # --- shard leases --------------------------------------------------------------------
    async def shard_leases_acquire(self, owner: str, shards: list[int], now: datetime,
                                   ttl_seconds: float) -> list[ShardLease]:
        wanted = sorted(set(shards))
        previous: dict[int, tuple[str, datetime]] = {}
        async with self._tx() as conn:
            await conn.execute(Q["shard_leases_hand_over"], {
                "owner": owner, "shards": wanted, "now": now, "released_at": RELEASED_AT})
            if wanted:
                cur = await conn.execute(Q["shard_leases_previous"], {"shards": wanted})
                previous = {int(r["shard"]): (str(r["owner"]), r["expires_at"])
                            for r in await cur.fetchall()}
                await conn.execute(Q["shard_lease_take"], {
                    "shards": wanted, "owner": owner,
                    "expires_at": now + timedelta(seconds=ttl_seconds), "now": now,
                })
            cur = await conn.execute(Q["shard_leases_owned"], {"owner": owner, "now": now})
            owned = [(int(r["shard"]), int(r["token"])) for r in await cur.fetchall()]
        return leases_taken(previous, owned, now)

    async def shard_leases_release(self, owner: str) -> None:
        await self._count(Q["shard_leases_release"], {"owner": owner,
                                                      "released_at": RELEASED_AT})

    async def shard_owners(self, now: datetime) -> dict[int, str]:
        rows = await self._all(Q["shard_owners"], {"now": now})
        return {int(r["shard"]): r["owner"] for r in rows}

    async def members_heartbeat(self, group: str, member: str, now: datetime,
                                ttl_seconds: float) -> list[str]:
        params = {"group_name": group, "member": member, "now": now,
                  "expires_at": now + timedelta(seconds=ttl_seconds)}
        async with self._tx() as conn:
            await conn.execute(Q["member_heartbeat"], params)
            await conn.execute(Q["members_expired_delete"], params)
            cur = await conn.execute(Q["members_live"], params)
            return [str(r["member"]) for r in await cur.fetchall()]

    async def members_leave(self, group: str, member: str) -> None:
        await self._count(Q["member_leave"], {"group_name": group, "member": member})

    # --- delivery ------------------------------------------------------------------------
    async def delivery_claim(self, claim: DeliveryClaim) -> Delivery | None:
        row = await self._one(Q["delivery_claim"], native_times(
            claim_params(claim), now=claim.now, stale_at=claim.stale_at))
        return None if row is None else delivery_from_row(row)

    async def delivery_done(self, done: DeliveryDone) -> bool:
        return await self._count(Q["delivery_done"], native_times(
            done_params(done), now=done.now, next_attempt_at=done.next_attempt_at)) == 1

    async def deliveries_retry_claim(self, claim: DeliveryRetryClaim) -> list[Delivery]:
        rows = await self._all(Q["deliveries_retry_claim"], native_times(
            retry_claim_params(claim), now=claim.now, stale_at=claim.stale_at))
        return [delivery_from_row(r) for r in rows]

    async def deliveries_of(self, run_ids: list[str]) -> list[Delivery]:
        rows = await self._all(Q["deliveries_of_runs"], {"run_ids": run_ids})
        return [delivery_from_row(r) for r in rows]

    async def inbox_list(self, query: InboxQuery) -> list[InboxItem]:
        after = query.after
        rows = await self._all(Q["inbox_list"], {
            "user_id": query.user_id, "limit": query.limit, "unread_only": query.unread_only,
            "after_read": None if after is None else after.read,
            "after_id": None if after is None else after.item_id,
        })
        return [inbox_from_row(r) for r in rows]

    async def inbox_mark_read(self, user_id: str, item_id: str,
                              now: datetime) -> InboxItem | None:
        row = await self._one(Q["inbox_mark_read"],
                              {"user_id": user_id, "item_id": item_id, "now": now})
        return None if row is None else inbox_from_row(row)

    async def webhook_secret_add(self, secret: WebhookSecret) -> None:
        await self._count(Q["webhook_secret_add"],
                          native_times(secret_params(secret), created_at=secret.created_at))

    async def webhook_secrets_recent(self, user_id: str, limit: int) -> list[WebhookSecret]:
        rows = await self._all(Q["webhook_secrets_recent"], {"user_id": user_id, "limit": limit})
        return [secret_from_row(r) for r in rows]

    # --- tokens --------------------------------------------------------------------------
    async def token_add(self, token_hash: str, user_id: str, now: datetime) -> None:
        await self._count(Q["token_add"], {"token_hash": token_hash, "user_id": user_id,
                                           "now": now})

    # --- tokens with ids, scopes and expiry; reassigning jobs (0007) ----------------------
    async def token_create(self, token: ApiToken, token_hash: str) -> None:
        await self._count(Q["token_create"], token_params(token, token_hash, lambda v: v))

    async def token_find(self, token_hash: str, now: datetime) -> ApiToken | None:
        row = await self._one(Q["token_find"], {"token_hash": token_hash, "now": now})
        return None if row is None else token_from_row(row)

    async def token_touch(self, token_id: str, now: datetime, stale_before: datetime) -> None:
        await self._count(Q["token_touch"], {"token_id": token_id, "now": now,
                                             "stale_before": stale_before})

    async def tokens_list(self) -> list[ApiToken]:
        return [token_from_row(r) for r in await self._all(Q["tokens_list"], {})]

    async def token_revoke(self, token_id: str, now: datetime) -> bool:
        return await self._count(Q["token_revoke"], {"token_id": token_id, "now": now}) == 1

    async def token_rotate(self, token_id: str, token_hash: str) -> ApiToken | None:
        async with self._tx() as conn:
            cur = await conn.execute(Q["token_rotate"], {"token_id": token_id,
                                                         "token_hash": token_hash})
            row = await cur.fetchone()
        return None if row is None else token_from_row(row)

    async def jobs_count_of_user(self, user_id: str) -> int:
        row = await self._one(Q["jobs_count_of_user"], {"user_id": user_id})
        return 0 if row is None else int(row["n"])

    async def jobs_count_active(self, user_id: str, cap: int) -> int:
        row = await self._one(Q["jobs_count_active"], {"user_id": user_id, "cap": cap})
        return 0 if row is None else int(row["n"])

    async def jobs_reassign(self, from_user: str, to_user: str, now: datetime) -> int:
        params = {"from_user": from_user, "to_user": to_user, "now": now}
        async with self._tx() as conn:
            # Both users' quota locks, in one order: a create for either waits for the move.
            for user in sorted({from_user, to_user}):
                await conn.execute(Q["quota_lock"], {"user_id": user})
            cur = await conn.execute(Q["jobs_reassign_key_clashes"], params)
            row = await cur.fetchone()
            if row is not None and int(row["n"]):
                raise reassign_clash(int(row["n"]), from_user, to_user)
            cur = await conn.execute(Q["jobs_reassign"], params)
            moved = cur.rowcount
            await conn.execute(Q["inbox_reassign"], params)
        return moved

    async def _jobs_insert_within_quota(self, items: Sequence[JobInsert]) -> list[JobCreated]:
        """``jobs_insert_many`` under the users' active-job quotas: lock each user (in one
        order), count, then insert in the same transaction. READ COMMITTED gives each statement
        a fresh snapshot, so the count taken after the lock sees the jobs of the create that
        held it before (committed when it released the lock)."""
        now = self.clock.now()
        async with self._tx() as conn:
            active: dict[str, int] = {}
            for user, cap in quota_users(items):
                await conn.execute(Q["quota_lock"], {"user_id": user})
                cur = await conn.execute(Q["jobs_count_active"], {"user_id": user, "cap": cap})
                row = await cur.fetchone()
                active[user] = 0 if row is None else int(row["n"])
            held = set(await self._holders(conn, quota_keys(items)))
            split = QuotaSplit.of(items, active, held)
            plan = InsertPlan.of(split.allowed)
            created: set[str] = set()
            if plan.offered:
                cur = await conn.execute(Q["jobs_insert_many"], {
                    **_insert_columns(plan.offered, now), "channel": self.channel})
                created = {str(r["job_id"]) for r in await cur.fetchall()}
            holders = await self._holders(conn, plan.keys_to_read(created))
        return split.results(items, plan.results(created, holders))

    @staticmethod
    async def _holders(conn: Conn, keys: list[tuple[str, str]]) -> dict[tuple[str, str], Job]:
        if not keys:
            return {}
        cur = await conn.execute(Q["jobs_by_idempotency_keys"], _key_columns(keys))
        return {(r["user_id"], r["idempotency_key"]): job_from_row(r)
                for r in await cur.fetchall()}

    # --- operators and tests -------------------------------------------------------------
    # --- attempts and job history ----------------------------------------------------------
    async def run_attempts(self, run_id: str, limit: int) -> list[RunAttempt]:
        rows = await self._all(Q["run_attempts"], {"run_id": run_id, "limit": limit})
        return [attempt_from_row(r) for r in rows]

    async def job_changes(self, job_id: str, limit: int,
                          before_change_id: str | None) -> list[JobChange]:
        rows = await self._all(Q["job_changes"], {"job_id": job_id, "limit": limit,
                                                  "before_change_id": before_change_id})
        return [change_from_row(r) for r in rows]

    async def explain_due_query(self, shard: int, bucket: int, now: datetime) -> list[str]:
        """EXPLAIN of one bucket's claim statement: shows the partitions it reads (one, after
        pruning) and the index it uses."""
        rows = await self._all("EXPLAIN " + Q["runs_claim_due_bucket"],
                               _bucket_params(shard, bucket, now, 100, 0.0))
        return [str(r["QUERY PLAN"]) for r in rows]

    # --- helpers -------------------------------------------------------------------------
    def _conn(self) -> AbstractAsyncContextManager[Conn]:
        return self._db.connection()

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        async with self._conn() as conn, conn.transaction():
            yield conn

    async def _one(self, query: str, params: dict[str, Any]) -> DictRow | None:
        async with self._conn() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchone()

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._conn() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()

    async def _count(self, query: str, params: dict[str, Any]) -> int:
        async with self._conn() as conn:
            cur = await conn.execute(query, params)
            return cur.rowcount

    async def _insert_run(self, conn: Conn, run: JobRun) -> bool:
        cur = await conn.execute(Q["run_insert"], _run_params(run))
        inserted = cur.rowcount == 1
        if inserted and run.status is RunStatus.PENDING:
            await self._pending_added(conn, run)
        return inserted

    async def _insert_or_revive(self, conn: Conn, run: JobRun) -> None:
        """Insert the run, or bring a CANCELLED run with its id back to PENDING."""
        if not await self._insert_run(conn, run):
            await self._revive(conn, run)

    async def _revive(self, conn: Conn, run: JobRun) -> None:
        """Bring a CANCELLED run with this run's id back to PENDING."""
        cur = await conn.execute(Q["run_revive"], {
            "run_id": run.run_id, "scheduled_at": run.scheduled_at,
        })
        if cur.rowcount == 1:
            await self._pending_added(conn, run)

    async def _pending_added(self, conn: Conn, run: JobRun) -> None:
        """A run became PENDING in this transaction: keep the watermark from passing it, and
        wake the watchers when it is due soon."""
        now = self.clock.now()
        await conn.execute(Q["watermark_touch"], {
            "shard": run.shard, "bucket": run.time_bucket,
            "behind": is_behind(run.scheduled_at, now)})
        if run.scheduled_at <= now + NOTIFY_HORIZON:
            await conn.execute(Q["notify_due"], {"channel": self.channel,
                                                 "payload": str(run.shard)})

    async def _listen_connection(self) -> AsyncConnection[Any]:
        if self._listener is None or self._listener.closed:
            conn = await AsyncConnection.connect(
                self.dsn, autocommit=True,
                application_name=f"onthedot/{self.schema}/listen"[:IDENTIFIER_MAX_BYTES],
            )
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            except BaseException:
                await conn.close()
                raise
            self._listener = conn
        return self._listener

    async def _drop_listener(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()

    # --- operations (metrics) ---------------------------------------------------------------
    async def runs_oldest_due(self, now: datetime, shards: int) -> datetime | None:
        row = await self._one(Q["runs_oldest_due"], {
            "now": now, "shards": shards, "enqueued_cap": OLDEST_DUE_ENQUEUED_CAP})
        assert row is not None  # an aggregate always has a row
        due = [at for at in (row[k] for k in ("pending", "retrying", "enqueued"))
               if at is not None and at <= now]
        return min(due, default=None)

    # --- a worker's batched writes ---------------------------------------------------------
    async def runs_extend_leases(self, items: Sequence[tuple[str, str]],
                                 lease_expires_at: datetime) -> set[str]:
        keyed = sorted((run_id, at, token) for run_id, token in items  # one lock order
                       if (at := _scheduled_at(run_id)) is not None)
        if not keyed:
            return set()
        rows = await self._all(Q["runs_extend_leases"], {
            "run_ids": [k[0] for k in keyed], "scheduled_ats": [k[1] for k in keyed],
            "tokens": [k[2] for k in keyed], "lease_expires_at": lease_expires_at})
        return {str(r["run_id"]) for r in rows}


async def _claim_due(conn: Conn, claim: DueClaim) -> DueClaimed:
    """Walk the shard's hourly buckets from its watermark up to now, claiming due runs
    (``store.watermark`` decides where the walk starts and where the watermark moves), unless
    the claim's lease token is no longer the shard's."""
    if claim.lease_token is None:
        row = await (await conn.execute(Q["watermark_get"], {"shard": claim.shard})).fetchone()
    else:  # the fence and the watermark in one statement
        row = await (await conn.execute(Q["shard_claim_start"], {
            "shard": claim.shard, "token": claim.lease_token})).fetchone()
        if row is None:
            return DueClaimed(enqueued=[], skipped=[], lease_lost=True)
        if row["bucket"] is None:
            row = None  # the shard's first visit
    generation = None if row is None else int(row["generation"])
    oldest: int | None = None
    if row is None:  # first visit: start at the oldest PENDING run, however old
        cur = await conn.execute(Q["oldest_pending_bucket"], {"shard": claim.shard})
        found = await cur.fetchone()
        oldest = None if found is None or found["bucket"] is None else int(found["bucket"])
    walk = BucketWalk(claim, None if row is None else int(row["bucket"]), oldest,
                      min(claim.limit, MAX_EVENTS_PER_TRANSACTION))
    enqueued: list[JobRun] = []
    skipped: list[JobRun] = []
    for b in walk.buckets():
        params = _bucket_params(claim.shard, b, claim.now, walk.remaining,
                                claim.misfire_grace_seconds)
        rows = await (await conn.execute(Q["runs_claim_due_bucket"], params)).fetchall()
        for r in rows:
            run = run_from_row(r)
            (skipped if run.status is RunStatus.SKIPPED else enqueued).append(run)
        walk.claimed(b, len(rows))
        if walk.would_pass(b):
            # Rows another transaction holds were skipped; until it commits they are PENDING.
            cur = await conn.execute(Q["bucket_has_pending"], params)
            pending = await cur.fetchone()
            if pending is not None and pending["pending"]:
                walk.hold(b)
    save = walk.save(generation)
    if save is not None:
        await conn.execute(Q[save[0]], save[1])
    return DueClaimed(enqueued=enqueued, skipped=skipped)


def _one_tick(claims: Sequence[DueClaim]) -> bool:
    """Can these claims go in one statement per round: fenced, distinct shards, one instant
    and one misfire grace (a watcher's tick)?"""
    return (len(claims) > 1 and all(c.lease_token is not None for c in claims)
            and len({c.shard for c in claims}) == len(claims)
            and len({(c.now, c.misfire_grace_seconds) for c in claims}) == 1)


async def _claim_due_many(conn: Conn, claims: Sequence[DueClaim]) -> list[DueClaimed]:
    """_claim_due for a tick's shards in one transaction: one statement fences them all and
    reads their watermarks, then each round claims the next bucket of every walk with room left
    in one statement (a round per bucket of the longest walk: one, or two in the first minutes
    of an hour)."""
    ordered = sorted(claims, key=lambda c: c.shard)  # the lease rows' lock order
    cur = await conn.execute(Q["shards_claim_start"], {
        "shards": [c.shard for c in ordered], "tokens": [c.lease_token for c in ordered]})
    held = {int(r["shard"]): r for r in await cur.fetchall()}
    cap = max(1, MAX_EVENTS_PER_TRANSACTION // len(ordered))  # skipped runs' events
    walks: Walks = {}
    for claim in ordered:
        row = held.get(claim.shard)
        if row is None:
            continue
        oldest: int | None = None
        if row["bucket"] is None:  # first visit: start at the oldest PENDING run, however old
            found = await (await conn.execute(Q["oldest_pending_bucket"],
                                              {"shard": claim.shard})).fetchone()
            oldest = None if found is None or found["bucket"] is None else int(found["bucket"])
        walks[claim.shard] = tick_walk(claim, row, oldest, min(claim.limit, cap))
    runs: dict[int, list[JobRun]] = {shard: [] for shard in walks}
    for step in tick_rounds(walks):
        await _claim_round(conn, ordered[0], step, walks, runs)
    for walk, generation in walks.values():
        save = walk.save(generation)
        if save is not None:
            await conn.execute(Q[save[0]], save[1])
    results = {shard: DueClaimed(
        enqueued=[r for r in got if r.status is RunStatus.ENQUEUED],
        skipped=[r for r in got if r.status is RunStatus.SKIPPED]) for shard, got in runs.items()}
    lost = DueClaimed(enqueued=[], skipped=[], lease_lost=True)
    return [results.get(claim.shard, lost) for claim in claims]


async def _claim_round(conn: Conn, tick: DueClaim, step: dict[int, int],
                       walks: Walks,
                       runs: dict[int, list[JobRun]]) -> None:
    """Claim one bucket of each walk in ``step`` ({shard: bucket}) in one statement."""
    shards = sorted(step)
    starts = [bucket_start(step[s]) for s in shards]
    cur = await conn.execute(Q["runs_claim_due_buckets"], {
        "shards": shards, "buckets": [step[s] for s in shards], "bucket_froms": starts,
        "bucket_tos": [start + HOUR for start in starts],
        "limits": [walks[s][0].remaining for s in shards], "range_from": min(starts),
        "now": tick.now,
        "misfire_before": tick.now - timedelta(seconds=tick.misfire_grace_seconds)})
    counts = dict.fromkeys(shards, 0)
    for row in await cur.fetchall():
        run = run_from_row(row)
        runs[run.shard].append(run)
        counts[run.shard] += 1
    for shard in shards:
        walk = walks[shard][0]
        walk.claimed(step[shard], counts[shard])
        if walk.would_pass(step[shard]):
            # Rows another transaction holds were skipped; until it commits they are PENDING.
            cur = await conn.execute(Q["bucket_has_pending"], _bucket_params(
                shard, step[shard], tick.now, walk.remaining, tick.misfire_grace_seconds))
            found = await cur.fetchone()
            if found is not None and found["pending"]:
                walk.hold(step[shard])


class _JobChanged(Exception):
    """Raised inside an event_apply transaction to roll it back."""


async def _check_active(conn: Conn, user_id: str, max_active: int) -> None:
    """Raise the active-job quota error (rolling the transaction back) when the user has more
    than ``max_active`` active jobs, the one being revived included. Called under the user's
    quota lock: READ COMMITTED gives this statement a snapshot taken after the lock, so it sees
    every create or revival that held the lock before."""
    cur = await conn.execute(Q["jobs_count_active"], {"user_id": user_id, "cap": max_active + 1})
    row = await cur.fetchone()
    if row is not None and int(row["n"]) > max_active:
        raise active_quota_error(max_active)


def _bucket_params(shard: int, bucket: int, now: datetime, limit: int,
                   misfire_grace_seconds: float) -> dict[str, Any]:
    start = bucket_start(bucket)
    return {
        "shard": shard,
        "bucket": bucket,
        "bucket_from": start,
        "bucket_to": start + HOUR,
        "now": now,
        "misfire_before": now - timedelta(seconds=misfire_grace_seconds),
        "limit": limit,
    }


def _job_params(job: Job) -> dict[str, Any]:
    """The codec's parameters (JSON as text, cast to jsonb in SQL) with native timestamps."""
    params = job_to_params(job)  # also refuses naive datetimes
    params.update(next_run_at=job.next_run_at, created_at=job.created_at,
                  updated_at=job.updated_at)
    return params


# jobs_insert_many's columns, in its order: element i of each is item i.
_JOB_COLUMNS = ("job_id", "user_id", "name", "action", "job_type", "schedule", "run_time",
                "timezone", "status", "retry_policy", "misfire_policy", "timeout_seconds",
                "idempotency_key", "request_hash", "next_run_at", "last_run_id", "created_at",
                "updated_at", "notify_channels", "flexible_window_seconds", "overlap_policy")
_RUN_COLUMNS = ("r_run_id", "r_time_bucket", "r_shard", "r_scheduled_at", "r_kind", "r_status",
                "r_attempt", "r_behind", "r_notify")
_NO_RUN = (None,) * len(_RUN_COLUMNS)


def _insert_columns(items: Sequence[JobInsert], now: datetime) -> dict[str, list[Any]]:
    """jobs_insert_many's parameters: one array per column (job_create's parameters, native
    timestamps, JSON as text), and what job_create decides about each first run. The query
    takes them in binary (``%(name)b``): psycopg writes a binary array about 6x faster than a
    text one, and each array holds one Python type (hence the float() and int())."""
    rows = [(*_job_values(i.job), *_first_run_values(i.first_run, now)) for i in items]
    names = _JOB_COLUMNS + _RUN_COLUMNS
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return {name: list(values) for name, values in zip(names, columns, strict=True)}


def _job_values(job: Job) -> tuple[Any, ...]:
    if job.created_at.tzinfo is None or job.updated_at.tzinfo is None or (
            job.next_run_at is not None and job.next_run_at.tzinfo is None):
        raise ValueError("naive datetime reached the store")
    return (job.job_id, job.user_id, job.name, json.dumps(job.action, ensure_ascii=False),
            job.params.type, job.params.schedule, job.params.time, job.params.timezone,
            job.status.value, json.dumps(job.retry_policy.to_dict()), job.misfire_policy,
            float(job.timeout_seconds), job.idempotency_key, job.request_hash,
            job.next_run_at, job.last_run_id, job.created_at, job.updated_at,
            json.dumps(job.notify, ensure_ascii=False), int(job.params.flexible_window_seconds),
            job.overlap_policy)


def _first_run_values(run: JobRun | None, now: datetime) -> tuple[Any, ...]:
    if run is None:
        return _NO_RUN
    if run.scheduled_at.tzinfo is None:
        raise ValueError("naive datetime reached the store")
    return (run.run_id, run.time_bucket, run.shard, run.scheduled_at, run.kind,
            run.status.value, run.attempt, is_behind(run.scheduled_at, now),
            run.status is RunStatus.PENDING and run.scheduled_at <= now + NOTIFY_HORIZON)


def _key_columns(keys: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """jobs_by_idempotency_keys' parameters: the users and the keys, pair i at index i."""
    return {"user_ids": [user for user, _ in keys], "keys": [key for _, key in keys]}


def _next_run_row(run: JobRun, now: datetime) -> dict[str, Any]:
    """One element of event_runs_insert's JSON: the run's columns (timestamps as the codec's
    text) and what run_insert's caller decides about its watermark and wake-up."""
    row = {k: v for k, v in run_to_params(run).items()
           if k in ("run_id", "job_id", "time_bucket", "shard", "scheduled_at", "kind",
                    "status", "attempt")}
    row["behind"] = is_behind(run.scheduled_at, now)
    row["notify"] = run.status is RunStatus.PENDING and run.scheduled_at <= now + NOTIFY_HORIZON
    return row


def _run_params(run: JobRun) -> dict[str, Any]:
    params = run_to_params(run)
    params.update(
        scheduled_at=run.scheduled_at,
        lease_expires_at=run.lease_expires_at,
        enqueued_at=run.enqueued_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        dead_lettered=run.dead_lettered,
        retry_at=run.retry_at,
    )
    return params


def _scheduled_at(run_id: str) -> datetime | None:
    """The partition key of a run id; None for an id no run can have (such as a typo in a
    redrive request), which then matches nothing."""
    try:
        return scheduled_at_of(run_id)
    except (ValueError, IndexError):
        return None


def _channel_name(schema: str) -> str:
    channel = f"onthedot_due.{schema}"
    if len(channel.encode()) > IDENTIFIER_MAX_BYTES:
        channel = "onthedot_due." + hashlib.sha256(schema.encode()).hexdigest()[:32]
    return channel


def _ddl(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(Q[name]).format(**parts)


def _day_parts(day: date) -> dict[str, sql.Composable]:
    lo = start_of(day)
    return {
        "partition": sql.Identifier(day_name(day)),
        "range_check": sql.Identifier(f"{day_name(day)}_range"),
        "lo": sql.Literal(lo),
        "hi": sql.Literal(lo + DAY),
    }


def _month_parts(start: date) -> dict[str, sql.Composable]:
    return {
        "month": sql.Identifier(month_name(start)),
        "unsplit": sql.Identifier(unsplit_name(start)),
        "partition": sql.Identifier(unsplit_name(start)),
        "range_check": sql.Identifier(f"{unsplit_name(start)}_range"),
        "lo": sql.Literal(start_of(start)),
        "hi": sql.Literal(start_of(months_after(start))),
    }


def _attempt_end(run_id: str, token: str, status: AttemptStatus, now: datetime,
                 error: str | None = None, output: Any = None,
                 stored_output: str | None = None) -> dict[str, Any]:
    """attempt_end's parameters (the a_ part of a transition's statement), native times."""
    return native_times(attempt_end_params(run_id, token, status, now, error, output,
                                           stored_output), a_now=now)


def _change_params(change: JobChange) -> dict[str, Any]:
    return native_times(change_params(change), changed_at=change.changed_at)
