"""The embedded default store: one SQLite file in WAL mode.

Several processes may share the file (two watchers and four workers in the tests): every write
transaction starts with BEGIN IMMEDIATE, which takes SQLite's single write lock up front, so the
compare-and-set guards in ``sql/sqlite/queries.sql`` see a consistent state and a claim is never
handed to two processes (SQLite has no SKIP LOCKED).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from onthedot.db.sqlfile import load_migrations, load_queries
from onthedot.db.sqlite_conn import SqliteConnection, sqlite_path
from onthedot.db.timestamps import need_ts, parse_ts, ts
from onthedot.domain.clock import Clock, SystemClock
from onthedot.domain.delivery import (
    Delivery,
    DeliveryClaim,
    DeliveryDone,
    DeliveryRetryClaim,
    InboxItem,
    WebhookSecret,
)
from onthedot.domain.errors import BackendError
from onthedot.domain.history import (
    LOST_ERROR,
    RELEASED_ERROR,
    AttemptStatus,
    JobChange,
    RunAttempt,
)
from onthedot.domain.models import (
    Job,
    JobRun,
    RunEvent,
    RunStatus,
)
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
    inbox_params,
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
from onthedot.store.reads import SharedReads
from onthedot.store.run_batches import Key, RunBatches, finish_event
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

Q = load_queries("onthedot.store", "sql/sqlite/queries.sql")
MISSED_ERROR = "missed: misfire policy is skip"  # what run_mark_skipped stores


class SqliteStore(SharedReads):
    queries = Q

    def __init__(self, database_url: str, clock: Clock | None = None) -> None:
        self.path = sqlite_path(database_url)
        self._db = SqliteConnection(self.path)
        self._clock = clock or SystemClock()
        # A worker's claims, retries and finishes that arrive together: one transaction of
        # set-based statements a kind (store/run_batches.py).
        self._batches = RunBatches(self)

    # --- lifecycle -----------------------------------------------------------------------
    async def migrate(self) -> Migrated:
        return await self._db.write(_apply_migrations)

    async def close(self) -> None:
        await self._db.close()

    async def ping(self) -> None:
        await self._db.run(lambda c: c.execute("SELECT 1").fetchone())

    async def maintain(self, now: datetime) -> None:
        """Nothing to do: SQLite's table is not partitioned."""

    async def due_notice_wait(self, seconds: float) -> bool:
        # One process per file in practice: the in-process wakeup suffices.
        await asyncio.sleep(seconds)
        return False

    # --- jobs ----------------------------------------------------------------------------
    async def job_create(self, job: Job, first_run: JobRun | None) -> JobCreated:
        def tx(c: sqlite3.Connection) -> JobCreated:
            inserted = c.execute(Q["job_insert"], job_to_params(job)).rowcount == 1
            if not inserted:
                row = c.execute(Q["job_by_idempotency_key"], {
                    "user_id": job.user_id, "idempotency_key": job.idempotency_key,
                }).fetchone()
                return JobCreated(job=job_from_row(row), created=False)
            if first_run is not None:
                self._insert_run(c, first_run)
            return JobCreated(job=job, created=True)

        return await self._db.write(tx)

    async def jobs_insert_many(self, items: Sequence[JobInsert]) -> list[JobCreated]:
        def tx(c: sqlite3.Connection) -> list[JobCreated]:
            # Counted under the write lock the insert holds: no other create can slip in.
            split = _quota_split(c, items)
            plan = InsertPlan.of(split.allowed)
            rows = [job_to_params(i.job) for i in plan.offered]
            created = {r["job_id"] for r in c.execute(Q["jobs_insert_many"],
                                                      {"jobs": _json_rows(rows)})}
            runs = plan.runs_of(created)
            if runs:
                _insert_runs(c, runs, self._clock.now())
            holders: dict[tuple[str, str], Job] = {}
            keys = plan.keys_to_read(created)
            if keys:
                for row in c.execute(Q["jobs_by_idempotency_keys"], {"keys": _json_rows(keys)}):
                    holders[(row["user_id"], row["idempotency_key"])] = job_from_row(row)
            return split.results(items, plan.results(created, holders))

        if not items:
            return []
        return await self._db.write(tx)

    async def job_save(self, save: JobSave) -> Job | None:
        def tx(c: sqlite3.Connection) -> Job | None:
            row = c.execute(Q["job_update"], job_to_params(save.job)).fetchone()
            if row is None:
                return None  # the version moved: another change landed first
            if save.cancel_open_runs:
                c.execute(Q["runs_cancel_open"], {
                    "job_id": save.job.job_id, "now": ts(save.job.updated_at),
                    "include_manual": int(save.cancel_manual_runs),
                })
            if save.skip_run is not None:
                skip = save.skip_run
                if c.execute(Q["run_skip"], {"run_id": skip.run_id, "error": SKIP_ERROR,
                                             "now": ts(save.job.updated_at)}).rowcount != 1:
                    raise skip_refused(skip)  # rolls the whole save back
                _append_event(c, skip.job_id, skip.run_id, RunStatus.SKIPPED,
                              save.job.updated_at)
            if save.insert_run is not None:
                self._insert_or_revive(c, save.insert_run)
            if save.backfill_runs:
                _insert_runs(c, save.backfill_runs, self._clock.now())
            if save.change is not None:
                c.execute(Q["job_change_insert"], change_params(save.change))
            if save.max_active is not None and save.job.status in ACTIVE:
                # Counted with this job, under the write lock every create and revival takes:
                # raising rolls the whole save back.
                _check_active(c, save.job.user_id, save.max_active)
            return replace(save.job, version=int(row["version"]))

        return await self._db.write(tx)

    async def deployment_pin(self, name: str, value: str) -> str:
        def tx(c: sqlite3.Connection) -> str:
            c.execute(Q["deployment_pin"], {"name": name, "value": value})
            return str(c.execute(Q["deployment_get"], {"name": name}).fetchone()["value"])

        return await self._db.write(tx)

    # --- runs ----------------------------------------------------------------------------
    async def run_insert(self, run: JobRun) -> bool:
        return await self._db.write(lambda c: self._insert_run(c, run))

    async def run_get(self, run_id: str) -> JobRun | None:
        row = await self._one(Q["run_get"], {"run_id": run_id})
        return None if row is None else run_from_row(row)

    async def runs_get_many(self, run_ids: Sequence[str]) -> dict[str, JobRun]:
        if not run_ids:
            return {}
        rows = await self._all(Q["runs_get_many"], {"run_ids": json.dumps(sorted(set(run_ids)))})
        return {str(r["run_id"]): run_from_row(r) for r in rows}

    async def jobs_get_any_many(self, job_ids: Sequence[str]) -> dict[str, Job]:
        if not job_ids:
            return {}
        rows = await self._all(Q["jobs_get_any_many"],
                               {"job_ids": json.dumps(sorted(set(job_ids)))})
        return {str(r["job_id"]): job_from_row(r) for r in rows}

    async def run_last_succeeded(self, job_id: str, before: datetime) -> JobRun | None:
        row = await self._one(Q["run_last_succeeded"], {"job_id": job_id, "before": ts(before)})
        return None if row is None else run_from_row(row)

    async def runs_list(self, job_id: str, limit: int,
                        before_scheduled_at: datetime | None) -> list[JobRun]:
        rows = await self._all(Q["runs_list"], {
            "job_id": job_id, "limit": limit, "before_scheduled_at": ts(before_scheduled_at),
        })
        return [run_from_row(r) for r in rows]

    async def runs_claim_due(self, claim: DueClaim) -> DueClaimed:
        return await self._db.write(lambda c: _claim_due(c, claim))

    async def runs_claim_due_many(self, claims: Sequence[DueClaim]) -> list[DueClaimed]:
        if not claims:
            return []
        if _one_tick(claims):
            return await self._db.write(lambda c: _claim_due_many(c, claims))
        return await self._db.write(lambda c: [_claim_due(c, claim) for claim in claims])

    async def runs_enqueued_in_shards(self, shards: list[int], since: datetime,
                                      limit: int) -> list[JobRun]:
        rows = await self._all(Q["runs_enqueued_in_shards"], {
            "shards": json.dumps(sorted(set(shards))), "since": ts(since), "limit": limit})
        return [run_from_row(r) for r in rows]

    async def run_claim(self, claim: RunClaim) -> JobRun | None:
        claimed = await self.run_claim_job(claim)
        return None if claimed is None else claimed.run

    async def run_claim_job(self, claim: RunClaim) -> ClaimedRun | None:
        return await self._batches.claim(claim)

    async def run_release(self, run_id: str, token: str, now: datetime) -> RunStatus | None:
        params = {"run_id": run_id, "token": token, "now": ts(now), **RELEASE_STOP}
        ended = attempt_end_params(run_id, token, AttemptStatus.RELEASED, now, RELEASED_ERROR)
        return await self._db.write(lambda c: _guarded_attempt_end(
            c, (Q["run_release"], RunStatus.ENQUEUED),
            (Q["run_release_stopped"], RunStatus.CANCELLED), params, ended))

    async def run_extend_lease(self, run_id: str, token: str, lease_expires_at: datetime) -> bool:
        params = {"run_id": run_id, "token": token, "lease_expires_at": ts(lease_expires_at)}
        return await self._db.write(
            lambda c: c.execute(Q["run_extend_lease"], params).rowcount == 1
        )

    async def run_retry(self, retry: RunRetry) -> RunStatus | None:
        return await self._batches.retry(retry)

    async def run_finish(self, finish: RunFinish) -> RunEvent | None:
        return await self._batches.finish(finish)

    # --- the set-based lifecycle writes (store/run_batches.py): SQL only ----------------
    async def claims_write(self, claims: Sequence[RunClaim]) -> dict[Key, ClaimedRun]:
        batch = _json_rows([{"run_id": c.run_id, "token": c.token, "now": ts(c.now),
                             "lease_expires_at": ts(c.now + timedelta(seconds=c.lease_seconds))}
                            for c in claims])

        def tx(c: sqlite3.Connection) -> dict[Key, ClaimedRun]:
            runs = c.execute(Q["runs_claim"], {"claims": batch}).fetchall()
            stopped = c.execute(Q["runs_stop_next_attempt"],
                                {"claims": batch, **NEXT_ATTEMPT_STOP}).fetchall()
            ended = [{"run_id": r["run_id"], "now": r["started_at"]} for r in runs]
            ended += [{"run_id": r["run_id"], "now": r["finished_at"]} for r in stopped]
            if not ended:
                return {}
            # An attempt of these runs still running lost its lease; then theirs start.
            c.execute(Q["attempts_lost_many"], {"ended": _json_rows(ended),
                                                "error": LOST_ERROR})
            if not runs:
                return {}
            c.execute(Q["attempts_start_many"], {"started": _json_rows([
                {"run_id": r["run_id"], "token": r["lease_token"], "attempt": r["attempt"],
                 "now": r["started_at"]} for r in runs])})
            jobs = {str(j["job_id"]): job_from_row(j) for j in c.execute(
                Q["jobs_get_any_many"],
                {"job_ids": _json_rows(sorted({str(r["job_id"]) for r in runs}))})}
            return {(str(r["run_id"]), str(r["lease_token"])):
                    ClaimedRun(run=run_from_row(r), job=jobs.get(str(r["job_id"])))
                    for r in runs}

        return await self._db.write(tx)

    async def retries_write(self, retries: Sequence[RunRetry]) -> dict[Key, RunStatus]:
        batch = _json_rows([{"run_id": r.run_id, "token": r.token, "error": r.error,
                             "retry_at": ts(r.retry_at), "now": ts(r.now),
                             **retry_stop_params(r.error)} for r in retries])
        ends = {(r.run_id, r.token): attempt_end_params(r.run_id, r.token, AttemptStatus.FAILED,
                                                        r.now, r.error) for r in retries}

        def tx(c: sqlite3.Connection) -> dict[Key, RunStatus]:
            rows = [*c.execute(Q["runs_retry"], {"retries": batch}).fetchall(),
                    *c.execute(Q["runs_retry_stopped"], {"retries": batch}).fetchall()]
            moved = {(str(r["run_id"]), str(r["lease_token"])): RunStatus(r["status"])
                     for r in rows}
            if moved:
                c.execute(Q["attempts_end_many"],
                          {"ended": _json_rows([ends[key] for key in moved])})
            return moved

        return await self._db.write(tx)

    async def finishes_write(self, finishes: Sequence[RunFinish]) -> dict[Key, RunEvent]:
        outputs = {f.run_id: dump_output(f.output) for f in finishes}
        batch = _json_rows([{"run_id": f.run_id, "token": f.token, "status": f.status.value,
                             "finished_at": ts(f.finished_at), "output": outputs[f.run_id],
                             "error": f.error, "dead_lettered": int(f.dead_lettered)}
                            for f in finishes])
        by_key = {(f.run_id, f.token): f for f in finishes}

        def tx(c: sqlite3.Connection) -> dict[Key, RunEvent]:
            rows = c.execute(Q["runs_finish"], {"finishes": batch}).fetchall()
            done = [(by_key[(str(r["run_id"]), str(r["lease_token"]))], str(r["job_id"]))
                    for r in rows]
            if not done:
                return {}  # every one fenced: another attempt owns its run now
            c.execute(Q["attempts_end_many"], {"ended": _json_rows([attempt_end_params(
                f.run_id, f.token, AttemptStatus.SUCCEEDED if f.status is RunStatus.SUCCEEDED
                else AttemptStatus.FAILED, f.finished_at, f.error, f.output,
                outputs[f.run_id]) for f, _job in done])})
            items = _json_rows([inbox_params(f.inbox, f.token) for f, _job in done
                                if f.inbox is not None])
            if items != "[]":
                c.execute(Q["inbox_insert_many"], {"items": items})
                c.execute(Q["inbox_delivered_many"], {"items": items})
            events = c.execute(Q["events_append_many"], {"events": _json_rows([
                {"job_id": job_id, "run_id": f.run_id, "status": f.status.value,
                 "emitted_at": ts(f.finished_at)} for f, job_id in done])}).fetchall()
            ids = {str(e["run_id"]): int(e["event_id"]) for e in events}
            return {(f.run_id, f.token): finish_event(f, ids[f.run_id], job_id)
                    for f, job_id in done}

        return await self._db.write(tx)

    async def run_redrive(self, run_id: str, now: datetime, change: JobChange | None = None,
                          *, max_active: int | None = None) -> JobRun | None:
        def tx(c: sqlite3.Connection) -> sqlite3.Row | None:
            # The write lock is the job's lock here: no run event is applied meanwhile.
            job = c.execute(Q["run_job_of"], {"run_id": run_id}).fetchone()
            row: sqlite3.Row | None = c.execute(Q["run_redrive"], {
                "run_id": run_id, "now": ts(now)}).fetchone()
            if row is None or job is None:
                return row
            revived = c.execute(Q["job_redrive_revive"], {
                "job_id": job["job_id"], "now": ts(now)}).rowcount == 1
            if revived and max_active is not None:
                _check_active(c, str(job["user_id"]), max_active)
            if change is not None:
                c.execute(Q["job_change_insert"], change_params(change))
            return row

        row = await self._db.write(tx)
        return None if row is None else run_from_row(row)

    # --- rescue and retention ------------------------------------------------------------
    async def runs_retry_due(self, now: datetime, limit: int) -> list[JobRun]:
        params = {"now": ts(now), "limit": limit, **NEXT_ATTEMPT_STOP}

        def tx(c: sqlite3.Connection) -> list[sqlite3.Row]:
            c.execute(Q["runs_retry_due_stopped"], params)  # the job guard, in this transaction
            return c.execute(Q["runs_retry_due"], params).fetchall()

        rows = await self._db.write(tx)
        return sorted((run_from_row(r) for r in rows), key=lambda r: r.run_id)

    async def runs_rescue_candidates(self, now: datetime, enqueued_before: datetime,
                                     limit: int) -> list[JobRun]:
        expired = await self._all(Q["runs_lease_expired"], {"now": ts(now), "limit": limit})
        waiting = await self._all(Q["runs_enqueued_before"],
                                  {"before": ts(enqueued_before), "limit": limit})
        return [run_from_row(r) for r in [*expired, *waiting]]

    async def run_requeue(self, run: JobRun, now: datetime) -> JobRun | None:
        lost: dict[str, Any] | None = None
        if run.status is RunStatus.RUNNING:
            query = Q["run_requeue_running"]
            params = {"run_id": run.run_id, "token": run.lease_token, "now": ts(now)}
            lost = attempt_end_params(run.run_id, run.lease_token or "", AttemptStatus.LOST,
                                      now, LOST_ERROR)
        elif run.status is RunStatus.ENQUEUED:
            query = Q["run_requeue_enqueued"]
            params = {"run_id": run.run_id, "enqueued_at": ts(run.enqueued_at), "now": ts(now)}
        else:
            return None

        def tx(c: sqlite3.Connection) -> sqlite3.Row | None:
            row: sqlite3.Row | None = c.execute(query, params).fetchone()
            if row is None and _stop_next_attempt(c, run.run_id, ts(now)) is None:
                return None  # it moved on meanwhile
            if lost is not None:  # the crashed worker's attempt
                c.execute(Q["attempt_end"], lost)
            return row

        row = await self._db.write(tx)
        return None if row is None else run_from_row(row)

    async def watermarks_rewind(self) -> dict[int, int]:
        rows = await self._db.write(lambda c: c.execute(Q["watermarks_rewind"]).fetchall())
        return {int(r["shard"]): int(r["bucket"]) for r in rows}

    async def prune(self, prune: Prune) -> Pruned:
        def tx(c: sqlite3.Connection) -> Pruned:
            position = int(c.execute(Q["prune_cursor_floor"]).fetchone()["position"])
            before = ts(prune.before)
            unread = c.execute(Q["oldest_unread_event"], {"position": position}).fetchone()
            runs_before = before if unread is None else min(before, unread["emitted_at"])
            params = {"before": before, "limit": prune.limit}
            events = c.execute(Q["prune_events"], {**params, "position": position}).rowcount
            runs = c.execute(Q["prune_runs"], {**params, "before": runs_before}).rowcount
            jobs = 0
            kept = {**params, "keep_from": runs_before}
            for row in c.execute(Q["prunable_jobs"], kept).fetchall():
                runs += c.execute(Q["job_runs_delete"], {"job_id": row["job_id"]}).rowcount
                c.execute(Q["job_feed_state_delete"], {"job_id": row["job_id"]})
                c.execute(Q["job_changes_delete"], {"job_id": row["job_id"]})
                jobs += c.execute(Q["job_delete"], {**params, "job_id": row["job_id"]}).rowcount
            deliveries = c.execute(Q["prune_deliveries"], params).rowcount
            inbox = c.execute(Q["prune_inbox"], params).rowcount
            attempts = c.execute(Q["prune_attempts"], params).rowcount
            return Pruned(runs=runs, events=events, jobs=jobs, deliveries=deliveries,
                          inbox=inbox, attempts=attempts)

        return await self._db.write(tx)

    async def events_lag(self, consumer: str, now: datetime) -> float:
        position = await self.cursor_get(consumer)
        row = await self._one(Q["oldest_unread_event"], {"position": position})
        if row is None:
            return 0.0
        return max(0.0, (now - need_ts(row["emitted_at"])).total_seconds())

    # --- events --------------------------------------------------------------------------
    async def event_apply(self, apply: EventApply) -> ApplyResult:
        return single_result(await self.events_apply([apply]))

    async def events_apply(self, applies: Sequence[EventApply]) -> EventsApplied:
        batch = EventBatch(applies)

        def tx(c: sqlite3.Connection) -> EventsApplied:
            if not _cursor_advance(c, batch.consumer, batch.previous, batch.last):
                return EventsApplied(applied=0, result=ApplyResult.CURSOR_MOVED)
            applied = _batch_guard(c, batch)
            if applied == 0:
                raise _JobChanged  # undo the cursor advance
            if applied < len(batch.applies):  # the cursor stops before the changed job
                _cursor_advance(c, batch.consumer, batch.last,
                                batch.applies[applied - 1].event.event_id)
            self._batch_write(c, batch.applies[:applied])
            return batch.outcome(applied)

        try:
            return await self._db.write(tx)
        except _JobChanged:
            return EventsApplied(applied=0, result=ApplyResult.JOB_CHANGED)

    def _batch_write(self, c: sqlite3.Connection, applies: Sequence[EventApply]) -> None:
        found: dict[str, OpenRuns] = {}
        checks = EventBatch.to_check(applies)
        if checks:
            found = {r["job_id"]: OpenRuns(other_open=bool(r["other_open"]), open=bool(r["open"]))
                     for r in c.execute(Q["jobs_open_runs"], {"jobs": _json_rows([
                         {"job_id": a.event.job_id,
                          "insert_run_id": None if a.insert_run is None else a.insert_run.run_id,
                          "include_manual": a.wait_for_manual_runs} for a in checks])})}
        jobs, runs = EventBatch.writes(applies, found)
        if jobs:
            updated = c.execute(Q["jobs_apply_events"], {"jobs": _json_rows([
                {"job_id": j.job_id, "version": j.version, "job_status": j.job_status,
                 "set_next_run_at": j.set_next_run_at, "next_run_at": ts(j.next_run_at),
                 "last_run_id": j.last_run_id, "updated_at": ts(j.updated_at)}
                for j in jobs])}).rowcount
            if updated != len(jobs):  # cannot happen: the write lock is held since the guard
                raise BackendError("a job changed under the write lock during its event apply")
        if runs:
            inserted = _insert_runs(c, runs, self._clock.now())
            for run in runs:
                if run.run_id not in inserted:
                    self._revive(c, run)

    # --- per-job state of actions ----------------------------------------------------------
    async def feed_states_get(self, job_id: str, run_id: str) -> list[FeedState]:
        rows = await self._all(Q["feed_states_get"], {"job_id": job_id, "run_id": run_id})
        return [feed_state_from_row(r) for r in rows]

    async def feed_states_put(self, put: FeedStatesPut) -> bool:
        def tx(c: sqlite3.Connection) -> bool:
            live = {"run_id": put.run_id, "attempt": put.attempt}
            if c.execute(Q["run_attempt_live"], live).fetchone() is None:
                return False
            c.execute(Q["feed_states_drop"], {"job_id": put.job_id,
                                              "keep_run_id": put.keep_run_id})
            c.executemany(Q["feed_state_insert"],
                          [feed_state_params(put, state) for state in put.states])
            return True

        return await self._db.write(tx)

    # --- shard leases --------------------------------------------------------------------
    async def shard_leases_acquire(self, owner: str, shards: list[int], now: datetime,
                                   ttl_seconds: float) -> list[ShardLease]:
        expires = ts(now + timedelta(seconds=ttl_seconds))
        wanted = sorted(set(shards))

        def tx(c: sqlite3.Connection) -> list[ShardLease]:
            c.execute(Q["shard_leases_hand_over"], {
                "owner": owner, "shards": json.dumps(wanted), "now": ts(now),
                "released_at": ts(RELEASED_AT)})
            previous = {int(r["shard"]): (str(r["owner"]), need_ts(r["expires_at"]))
                        for r in c.execute(Q["shard_leases_previous"],
                                           {"shards": json.dumps(wanted)})}
            if wanted:
                c.execute(Q["shard_lease_take"], {"shards": json.dumps(wanted), "owner": owner,
                                                  "expires_at": expires, "now": ts(now)})
            rows = c.execute(Q["shard_leases_owned"], {"owner": owner, "now": ts(now)})
            return leases_taken(previous, [(int(r["shard"]), int(r["token"])) for r in rows],
                                now)

        return await self._db.write(tx)

    async def shard_leases_release(self, owner: str) -> None:
        params = {"owner": owner, "released_at": ts(RELEASED_AT)}
        await self._db.write(lambda c: c.execute(Q["shard_leases_release"], params))

    async def shard_owners(self, now: datetime) -> dict[int, str]:
        rows = await self._all(Q["shard_owners"], {"now": ts(now)})
        return {int(r["shard"]): r["owner"] for r in rows}

    async def members_heartbeat(self, group: str, member: str, now: datetime,
                                ttl_seconds: float) -> list[str]:
        params = {"group_name": group, "member": member, "now": ts(now),
                  "expires_at": ts(now + timedelta(seconds=ttl_seconds))}

        def tx(c: sqlite3.Connection) -> list[str]:
            c.execute(Q["member_heartbeat"], params)
            c.execute(Q["members_expired_delete"], params)
            return [str(r["member"]) for r in c.execute(Q["members_live"], params)]

        return await self._db.write(tx)

    async def members_leave(self, group: str, member: str) -> None:
        params = {"group_name": group, "member": member}
        await self._db.write(lambda c: c.execute(Q["member_leave"], params))

    # --- delivery ------------------------------------------------------------------------
    async def delivery_claim(self, claim: DeliveryClaim) -> Delivery | None:
        params = claim_params(claim)
        row = await self._db.write(lambda c: c.execute(Q["delivery_claim"], params).fetchone())
        return None if row is None else delivery_from_row(row)

    async def delivery_done(self, done: DeliveryDone) -> bool:
        params = done_params(done)
        return await self._db.write(lambda c: c.execute(Q["delivery_done"], params).rowcount == 1)

    async def deliveries_retry_claim(self, claim: DeliveryRetryClaim) -> list[Delivery]:
        params = retry_claim_params(claim)
        rows = await self._db.write(
            lambda c: c.execute(Q["deliveries_retry_claim"], params).fetchall())
        return [delivery_from_row(r) for r in rows]

    async def deliveries_of(self, run_ids: list[str]) -> list[Delivery]:
        rows = await self._all(Q["deliveries_of_runs"], {"run_ids": json.dumps(run_ids)})
        return [delivery_from_row(r) for r in rows]

    async def inbox_list(self, query: InboxQuery) -> list[InboxItem]:
        after = query.after
        rows = await self._all(Q["inbox_list"], {
            "user_id": query.user_id, "limit": query.limit,
            "unread_only": int(query.unread_only),
            "after_read": None if after is None else int(after.read),
            "after_id": None if after is None else after.item_id,
        })
        return [inbox_from_row(r) for r in rows]

    async def inbox_mark_read(self, user_id: str, item_id: str,
                              now: datetime) -> InboxItem | None:
        params = {"user_id": user_id, "item_id": item_id, "now": ts(now)}
        row = await self._db.write(lambda c: c.execute(Q["inbox_mark_read"], params).fetchone())
        return None if row is None else inbox_from_row(row)

    async def webhook_secret_add(self, secret: WebhookSecret) -> None:
        params = secret_params(secret)
        await self._db.write(lambda c: c.execute(Q["webhook_secret_add"], params))

    async def webhook_secrets_recent(self, user_id: str, limit: int) -> list[WebhookSecret]:
        rows = await self._all(Q["webhook_secrets_recent"], {"user_id": user_id, "limit": limit})
        return [secret_from_row(r) for r in rows]

    # --- tokens --------------------------------------------------------------------------
    async def token_add(self, token_hash: str, user_id: str, now: datetime) -> None:
        params = {"token_hash": token_hash, "user_id": user_id, "now": ts(now)}
        await self._db.write(lambda c: c.execute(Q["token_add"], params))

    # --- helpers -------------------------------------------------------------------------
    # --- tokens with ids, scopes and expiry; reassigning jobs (0007) ----------------------
    async def token_create(self, token: ApiToken, token_hash: str) -> None:
        params = token_params(token, token_hash, ts)
        await self._db.write(lambda c: c.execute(Q["token_create"], params))

    async def token_find(self, token_hash: str, now: datetime) -> ApiToken | None:
        row = await self._one(Q["token_find"], {"token_hash": token_hash, "now": ts(now)})
        return None if row is None else token_from_row(row)

    async def token_touch(self, token_id: str, now: datetime, stale_before: datetime) -> None:
        params = {"token_id": token_id, "now": ts(now), "stale_before": ts(stale_before)}
        await self._db.write(lambda c: c.execute(Q["token_touch"], params))

    async def tokens_list(self) -> list[ApiToken]:
        return [token_from_row(r) for r in await self._all(Q["tokens_list"], {})]

    async def token_revoke(self, token_id: str, now: datetime) -> bool:
        params = {"token_id": token_id, "now": ts(now)}
        return bool(await self._db.write(
            lambda c: c.execute(Q["token_revoke"], params).rowcount == 1))

    async def token_rotate(self, token_id: str, token_hash: str) -> ApiToken | None:
        params = {"token_id": token_id, "token_hash": token_hash}
        row = await self._db.write(lambda c: c.execute(Q["token_rotate"], params).fetchone())
        return None if row is None else token_from_row(row)

    async def jobs_count_of_user(self, user_id: str) -> int:
        row = await self._one(Q["jobs_count_of_user"], {"user_id": user_id})
        return 0 if row is None else int(row["n"])

    async def jobs_count_active(self, user_id: str, cap: int) -> int:
        row = await self._one(Q["jobs_count_active"], {"user_id": user_id, "cap": cap})
        return 0 if row is None else int(row["n"])

    async def jobs_reassign(self, from_user: str, to_user: str, now: datetime) -> int:
        params = {"from_user": from_user, "to_user": to_user, "now": ts(now)}

        def tx(c: sqlite3.Connection) -> int:
            clashes = int(c.execute(Q["jobs_reassign_key_clashes"], params).fetchone()["n"])
            if clashes:
                raise reassign_clash(clashes, from_user, to_user)
            moved = int(c.execute(Q["jobs_reassign"], params).rowcount)
            c.execute(Q["inbox_reassign"], params)
            return moved

        return await self._db.write(tx)

    def _insert_run(self, c: sqlite3.Connection, run: JobRun) -> bool:
        inserted = c.execute(Q["run_insert"], run_to_params(run)).rowcount == 1
        if inserted and run.status is RunStatus.PENDING:
            self._touch_watermark(c, run)
        return inserted

    def _insert_or_revive(self, c: sqlite3.Connection, run: JobRun) -> None:
        """Insert the run, or bring a CANCELLED run with its id back to PENDING."""
        if not self._insert_run(c, run):
            self._revive(c, run)

    def _revive(self, c: sqlite3.Connection, run: JobRun) -> None:
        """Bring a CANCELLED run with this run's id back to PENDING."""
        if c.execute(Q["run_revive"], {"run_id": run.run_id}).rowcount == 1:
            self._touch_watermark(c, run)

    def _touch_watermark(self, c: sqlite3.Connection, run: JobRun) -> None:
        behind = is_behind(run.scheduled_at, self._clock.now())
        c.execute(Q["watermark_touch"], {"shard": run.shard, "bucket": run.time_bucket,
                                         "behind": int(behind)})

    async def _one(self, sql: str, params: dict[str, Any]) -> sqlite3.Row | None:
        row: sqlite3.Row | None = await self._db.run(lambda c: c.execute(sql, params).fetchone())
        return row

    async def _all(self, sql: str, params: dict[str, Any]) -> list[sqlite3.Row]:
        return await self._db.run(lambda c: c.execute(sql, params).fetchall())

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
        """EXPLAIN QUERY PLAN of the due-run query, for tests and operators."""
        rows = await self._all("EXPLAIN QUERY PLAN " + Q["runs_due_in_bucket"], {
            "shard": shard, "bucket": bucket, "now": ts(now), "limit": 100,
        })
        return [str(r["detail"]) for r in rows]

    # --- operations (metrics) ---------------------------------------------------------------
    async def runs_oldest_due(self, now: datetime, shards: int) -> datetime | None:
        row = await self._one(Q["runs_oldest_due"], {
            "now": ts(now), "shards": shards, "enqueued_cap": OLDEST_DUE_ENQUEUED_CAP})
        assert row is not None  # an aggregate always has a row
        due = [at for at in (parse_ts(row[k]) for k in ("pending", "retrying", "enqueued"))
               if at is not None and at <= now]
        return min(due, default=None)

    # --- a worker's batched writes ---------------------------------------------------------
    async def runs_extend_leases(self, items: Sequence[tuple[str, str]],
                                 lease_expires_at: datetime) -> set[str]:
        until = ts(lease_expires_at)

        def tx(c: sqlite3.Connection) -> set[str]:
            # One transaction; in SQLite's own thread a statement per run costs microseconds.
            return {run_id for run_id, token in items
                    if c.execute(Q["run_extend_lease"], {"run_id": run_id, "token": token,
                                                         "lease_expires_at": until}
                                 ).rowcount == 1}

        return await self._db.write(tx) if items else set()


def _apply_migrations(c: sqlite3.Connection) -> Migrated:
    c.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
              "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = {int(r[0]) for r in c.execute("SELECT version FROM schema_migrations")}
    applied: list[int] = []
    for version, sql in load_migrations("onthedot.store", "sql/sqlite/migrations"):
        if version in done:
            continue
        for statement in _split_statements(sql):
            c.execute(statement)
        c.execute("INSERT INTO schema_migrations (version, applied_at) "
                  "VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))", (version,))
        applied.append(version)
    before = max(done, default=0)
    return Migrated(before=before, after=max([before, *applied]), applied=tuple(applied))


def _split_statements(sql: str) -> list[str]:
    """Split a migration into statements; sqlite3.complete_statement keeps ';' inside
    strings and CHECKs intact."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in current.splitlines()
    ):
        raise ValueError("migration ends with an incomplete statement")
    return statements


def _stop_next_attempt(c: sqlite3.Connection, run_id: str,
                       now: str | None) -> sqlite3.Row | None:
    """The job guard's other branch, in the transaction whose guarded statement moved nothing:
    a queued run, or one whose worker died, of a job that stops it ends CANCELLED."""
    row: sqlite3.Row | None = c.execute(Q["run_stop_next_attempt"], {
        "run_id": run_id, "now": now, **NEXT_ATTEMPT_STOP}).fetchone()
    return row


def _guarded_attempt_end(c: sqlite3.Connection, allowed: tuple[str, RunStatus],
                         stopped: tuple[str, RunStatus], params: dict[str, Any],
                         ended: dict[str, Any]) -> RunStatus | None:
    """A transition of a RUNNING run under the job guard: the allowed statement, else the
    stopped one; the status the run moved to (None: fenced), its attempt ended with it."""
    for query, status in (allowed, stopped):
        if _with_attempt_end(c, query, params, ended):
            return status
    return None


def _with_attempt_end(c: sqlite3.Connection, query: str, params: dict[str, Any],
                      ended: dict[str, Any]) -> bool:
    """Run a transition of a RUNNING run; when it lands, end its attempt in the same
    transaction."""
    if c.execute(query, params).rowcount != 1:
        return False
    c.execute(Q["attempt_end"], ended)
    return True


class _JobChanged(Exception):
    """Raised inside an event_apply transaction to roll it back."""


def _cursor_advance(c: sqlite3.Connection, consumer: str, previous: int, position: int) -> bool:
    advance = {"consumer": consumer, "position": position, "previous": previous}
    moved = c.execute(Q["cursor_advance"], advance).rowcount
    if moved != 1 and previous == 0:
        # The consumer's first event: its row (at 0) is made once, not per event.
        c.execute(Q["cursor_init"], {"consumer": consumer})
        moved = c.execute(Q["cursor_advance"], advance).rowcount
    return moved == 1


def _batch_guard(c: sqlite3.Connection, batch: EventBatch) -> int:
    """How many of the batch's events apply: up to the first whose job is no longer at the
    version its decision was made from (read under the write lock, so it stays so)."""
    guarded = batch.guarded()
    if not guarded:
        return len(batch.applies)
    versions = {r["job_id"]: int(r["version"]) for r in c.execute(Q["jobs_versions"], {
        "job_ids": _json_rows([a.event.job_id for a in guarded])})}
    return batch.cut({a.event.job_id for a in guarded
                      if versions.get(a.event.job_id) == a.job_version})


def _append_event(c: sqlite3.Connection, job_id: str, run_id: str, status: RunStatus,
                  at: datetime) -> RunEvent:
    row = c.execute(Q["event_append"], {
        "job_id": job_id, "run_id": run_id, "status": status.value, "emitted_at": ts(at),
    }).fetchone()
    return RunEvent(event_id=int(row["event_id"]), job_id=job_id, run_id=run_id, status=status,
                    emitted_at=at)


def _json_rows(rows: Sequence[Any]) -> str:
    """Parameters of a multi-row statement, as the JSON array its json_each reads. Not ASCII
    escaped: the text reaches the columns exactly as the one-row statements store it."""
    return json.dumps(rows, ensure_ascii=False)


def _insert_runs(c: sqlite3.Connection, runs: Sequence[JobRun], now: datetime) -> set[str]:
    """Insert the runs (one that exists already is left as it is) and move their shards'
    watermarks back to any new PENDING run; returns the ids inserted."""
    inserted = {r["run_id"] for r in c.execute(Q["runs_insert_many"], {
        "runs": _json_rows([run_to_params(r) for r in runs])})}
    touches = _watermark_touches([r for r in runs if r.run_id in inserted], now)
    if touches:
        c.execute(Q["watermarks_touch_many"], {"touches": _json_rows(touches)})
    return inserted


def _watermark_touches(runs: Sequence[JobRun], now: datetime) -> list[dict[str, Any]]:
    """watermark_touch's parameters for inserted runs, one per shard: the earliest bucket of
    the shard's PENDING runs, and whether any of them is old enough to be passed by a walk."""
    touches: dict[int, dict[str, Any]] = {}
    for run in runs:
        if run.status is not RunStatus.PENDING:
            continue
        touch = touches.setdefault(run.shard, {"shard": run.shard, "bucket": run.time_bucket,
                                               "behind": False})
        touch["bucket"] = min(touch["bucket"], run.time_bucket)
        touch["behind"] = touch["behind"] or is_behind(run.scheduled_at, now)
    return list(touches.values())


def _claim_due(c: sqlite3.Connection, claim: DueClaim) -> DueClaimed:
    """Walk the shard's hourly buckets from its watermark up to now, claiming due runs
    (``store.watermark`` decides where the walk starts and where the watermark moves), unless
    the claim's lease token is no longer the shard's."""
    if claim.lease_token is None:
        row = c.execute(Q["watermark_get"], {"shard": claim.shard}).fetchone()
    else:  # the fence and the watermark in one statement
        row = c.execute(Q["shard_claim_start"], {"shard": claim.shard,
                                                 "token": claim.lease_token}).fetchone()
        if row is None:
            return DueClaimed(enqueued=[], skipped=[], lease_lost=True)
        if row["bucket"] is None:
            row = None  # the shard's first visit
    generation = None if row is None else int(row["generation"])
    oldest: int | None = None
    if row is None:  # first visit: start at the oldest PENDING run, however old
        found = c.execute(Q["oldest_pending_bucket"], {"shard": claim.shard}).fetchone()
        oldest = None if found["bucket"] is None else int(found["bucket"])
    walk = BucketWalk(claim, None if row is None else int(row["bucket"]), oldest, claim.limit)
    enqueued: list[JobRun] = []
    skipped: list[JobRun] = []
    for b in walk.buckets():
        rows = c.execute(Q["runs_due_in_bucket"], {
            "shard": claim.shard, "bucket": b, "now": ts(claim.now), "limit": walk.remaining,
        }).fetchall()
        _take_due(c, rows, claim, enqueued, skipped)
        walk.claimed(b, len(rows))
    _mark_enqueued(c, enqueued, claim.now)
    save = walk.save(generation)
    if save is not None:
        c.execute(Q[save[0]], save[1])
    return DueClaimed(enqueued=enqueued, skipped=skipped)


def _take_due(c: sqlite3.Connection, rows: Sequence[sqlite3.Row], claim: DueClaim,
              enqueued: list[JobRun], skipped: list[JobRun]) -> None:
    """Sort a bucket's due runs into those to enqueue and those a misfire skips (marked SKIPPED
    with their event here)."""
    for r in rows:
        run = run_from_row(r)
        if _misfired(run, r["misfire_policy"], claim):
            c.execute(Q["run_mark_skipped"], {"run_id": run.run_id, "now": ts(claim.now)})
            _append_event(c, run.job_id, run.run_id, RunStatus.SKIPPED, claim.now)
            skipped.append(replace(run, status=RunStatus.SKIPPED, finished_at=claim.now,
                                   error=MISSED_ERROR))
        else:
            enqueued.append(replace(run, status=RunStatus.ENQUEUED, enqueued_at=claim.now))


def _mark_enqueued(c: sqlite3.Connection, runs: Sequence[JobRun], now: datetime) -> None:
    """One statement for every run a claim enqueues (they are PENDING: read under the write
    lock this transaction holds)."""
    if runs:
        c.execute(Q["runs_mark_enqueued"], {"run_ids": _json_rows([r.run_id for r in runs]),
                                            "now": ts(now)})


def _one_tick(claims: Sequence[DueClaim]) -> bool:
    """Can these claims share statements: fenced, distinct shards, one instant, one misfire
    grace and one limit (a watcher's tick)?"""
    return (len(claims) > 1 and all(c.lease_token is not None for c in claims)
            and len({c.shard for c in claims}) == len(claims)
            and len({(c.now, c.misfire_grace_seconds, c.limit) for c in claims}) == 1)


def _claim_due_many(c: sqlite3.Connection, claims: Sequence[DueClaim]) -> list[DueClaimed]:
    """_claim_due for a tick's shards: one statement fences them all and reads their
    watermarks; each round reads the next bucket of every walk in one statement while their
    room left is the same (the first round; later rounds, rare, read shard by shard); one
    statement marks every run enqueued."""
    tick = claims[0]
    held = {int(r["shard"]): r for r in c.execute(Q["shards_claim_start"], {
        "claims": _json_rows([[cl.shard, cl.lease_token] for cl in claims])})}
    walks: Walks = {}
    for claim in claims:
        row = held.get(claim.shard)
        if row is None:
            continue
        oldest: int | None = None
        if row["bucket"] is None:  # first visit: start at the oldest PENDING run, however old
            found = c.execute(Q["oldest_pending_bucket"], {"shard": claim.shard}).fetchone()
            oldest = None if found["bucket"] is None else int(found["bucket"])
        walks[claim.shard] = tick_walk(claim, row, oldest, claim.limit)
    found_rows: dict[int, list[sqlite3.Row]] = {shard: [] for shard in walks}
    for step in tick_rounds(walks):
        rows = _due_in_buckets(c, tick, step, {s: walks[s][0].remaining for s in step})
        for shard, b in step.items():
            found_rows[shard] += rows[shard]
            walks[shard][0].claimed(b, len(rows[shard]))
    results: dict[int, DueClaimed] = {}
    everything: list[JobRun] = []
    for claim in claims:
        if claim.shard not in walks:
            continue
        enqueued: list[JobRun] = []
        skipped: list[JobRun] = []
        _take_due(c, found_rows[claim.shard], claim, enqueued, skipped)
        everything += enqueued
        results[claim.shard] = DueClaimed(enqueued=enqueued, skipped=skipped)
    _mark_enqueued(c, everything, tick.now)
    for walk, generation in walks.values():
        save = walk.save(generation)
        if save is not None:
            c.execute(Q[save[0]], save[1])
    lost = DueClaimed(enqueued=[], skipped=[], lease_lost=True)
    return [results.get(claim.shard, lost) for claim in claims]


def _due_in_buckets(c: sqlite3.Connection, tick: DueClaim, step: dict[int, int],
                    room: dict[int, int]) -> dict[int, list[sqlite3.Row]]:
    """The due runs of one bucket per shard ({shard: bucket}), at most ``room[shard]`` each:
    one statement when every shard has the same room (its LIMIT is one value), else one per
    shard."""
    rows: dict[int, list[sqlite3.Row]] = {shard: [] for shard in step}
    if len(set(room.values())) == 1:
        for r in c.execute(Q["runs_due_in_buckets"], {
                "steps": _json_rows(sorted(step.items())), "now": ts(tick.now),
                "limit": next(iter(room.values()))}):
            rows[int(r["shard"])].append(r)
        return rows
    for shard, b in step.items():
        rows[shard] = c.execute(Q["runs_due_in_bucket"], {
            "shard": shard, "bucket": b, "now": ts(tick.now), "limit": room[shard]}).fetchall()
    return rows


def _misfired(run: JobRun, misfire_policy: str, claim: DueClaim) -> bool:
    if run.kind == "manual" or misfire_policy != "skip":
        return False
    return (claim.now - run.scheduled_at).total_seconds() > claim.misfire_grace_seconds


def _check_active(c: sqlite3.Connection, user_id: str, max_active: int) -> None:
    """Raise the active-job quota error when the user has more than ``max_active`` active jobs
    (counted in this write transaction, the job being revived included)."""
    count = int(c.execute(Q["jobs_count_active"],
                          {"user_id": user_id, "cap": max_active + 1}).fetchone()["n"])
    if count > max_active:
        raise active_quota_error(max_active)


def _quota_split(c: sqlite3.Connection, items: Sequence[JobInsert]) -> QuotaSplit:
    """Which items the users' active-job quotas let in; read inside the write transaction."""
    users = quota_users(items)
    if not users:
        return QuotaSplit(allowed=list(items), refused=set())
    active = {user: int(c.execute(Q["jobs_count_active"],
                                  {"user_id": user, "cap": cap}).fetchone()["n"])
              for user, cap in users}
    held: set[tuple[str, str]] = set()
    keys = quota_keys(items)
    if keys:
        held = {(r["user_id"], r["idempotency_key"])
                for r in c.execute(Q["jobs_by_idempotency_keys"], {"keys": _json_rows(keys)})}
    return QuotaSplit.of(items, active, held)
