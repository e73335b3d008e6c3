"""The rescuer: sweeps what a one-way cursor can miss, and prunes history past retention.

One live leader (the first live member of the ``rescuer`` group; the others stand by). Each
sweep, every ``rescue_interval`` seconds::

    RETRYING, retry_at passed -----------------------------> ENQUEUED, published
    RUNNING, lease expired, no live message ---------------> ENQUEUED, published (attempt kept)
    ENQUEUED for republish_after, no live message ---------> re-stamped, published
    PENDING behind its shard's watermark ------------------> watermark rewound to it
    delivery of a SUCCEEDED run, RETRYING and due ---------> sent again (delivery/deliverer.py:
      (or SENDING with a stale claim)                        ``Deliverer.retry_due``)

A run handed back above whose job stops it (a scheduled run of a paused job, any run of a
deleted one) ends CANCELLED instead, in the same statement (the store's job guard,
store/job_guard.py), and is not published.

Every hand-back is a compare-and-set on the state the candidate was read in, so a run is handed
back once even when a worker, a watcher or another rescuer acts on it at the same moment. A run
whose message is still in the queue (waiting behind a backlog, or held by a worker that may come
back) is left alone: the queue delivers it, and publishing it again would only add copies.
The delivery retries run beside the sweeps, one batch at a time, so a slow mail server or
webhook delays no run's hand-back; each is claimed with a compare-and-set too.
Hourly, it also keeps the store in shape: ``Store.maintain`` (on PostgreSQL, the partitions
of the coming days and months; a monthly split takes a second or two, which would otherwise
stall a watcher's dispatch), then finished runs, read run events, finished jobs and dead
letters older than ``retention_days`` are deleted, in small batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Protocol

import httpx

from onthedot.actions.egress import EgressGuard, guarded_client
from onthedot.config import Settings
from onthedot.delivery.deliverer import RETRY_BATCH, Deliverer, DelivererStore
from onthedot.domain.clock import Clock
from onthedot.domain.models import JobRun, RunStatus
from onthedot.logs import run_fields
from onthedot.metrics import Metrics
from onthedot.queue.base import Queue, run_message
from onthedot.store.base import LeaseStore, Prune, Pruned, RescueStore

log = logging.getLogger("onthedot.rescuer")

GROUP = "rescuer"
RESCUE_BATCH = 500  # runs looked at per kind and sweep; a full batch sweeps again at once
PRUNE_BATCH = 1000  # rows deleted per kind and transaction: short transactions, small locks
HOUSEKEEPING_EVERY_SECONDS = 3600.0  # partitions are daily; hourly keeps a day's margin
PRUNE_MAX_ROUNDS = 100  # per prune pass; what remains waits for the next hour


RETRY_CONNECTIONS = 10  # the HTTP pool of one batch of delivery retries


class RescuerStore(RescueStore, LeaseStore, DelivererStore, Protocol):
    """What the rescuer uses of the store: rescue and retention, its group's membership, and
    the deliveries it retries."""


@dataclass(frozen=True)
class Sweep:
    """What one sweep handed back."""

    retries: int = 0
    expired_leases: int = 0
    lost_messages: int = 0
    rewound_shards: int = 0
    deliveries: int = 0  # delivery retries sent

    @property
    def total(self) -> int:
        return (self.retries + self.expired_leases + self.lost_messages + self.rewound_shards
                + self.deliveries)


class Rescuer:
    def __init__(self, store: RescuerStore, queue: Queue, clock: Clock, settings: Settings,
                 metrics: Metrics, member_id: str) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.settings = settings
        self.metrics = metrics
        self.member_id = member_id
        self._housekept_at: datetime | None = None
        self._http: httpx.AsyncClient | None = None
        self.deliverer = Deliverer(store, clock, settings, self._client, metrics=metrics)

    async def is_leader(self) -> bool:
        members = await self.store.members_heartbeat(
            GROUP, self.member_id, self.clock.now(), self.settings.leader_lease_seconds)
        return bool(members) and members[0] == self.member_id

    async def run_once(self) -> Sweep:
        """One sweep of every kind of stranded run, then one batch of delivery retries."""
        sweep = await self.sweep_runs()
        return replace(sweep, deliveries=await self.retry_deliveries())

    async def sweep_runs(self) -> Sweep:
        """One sweep of every kind of stranded run."""
        retries = await self.hand_back_retries()
        expired, lost = await self.hand_back_stranded()
        rewound = await self.store.watermarks_rewind()
        for shard, bucket in sorted(rewound.items()):
            log.warning("shard %d: a PENDING run was behind the watermark; rewound to %d",
                        shard, bucket)
        sweep = Sweep(retries=retries, expired_leases=expired, lost_messages=lost,
                      rewound_shards=len(rewound))
        for kind, count in (("retry", retries), ("expired_lease", expired),
                            ("lost_message", lost), ("watermark", len(rewound))):
            if count:
                self.metrics.rescued.labels(kind=kind).inc(count)
        return sweep

    async def hand_back_retries(self) -> int:
        """RETRYING runs whose retry time has come go back to the queue."""
        runs = await self.store.runs_retry_due(self.clock.now(), RESCUE_BATCH)
        await self._publish(runs)
        return len(runs)

    async def retry_deliveries(self) -> int:
        """Send the due delivery retries of succeeded runs, one batch; returns how many."""
        async with self._http_for_batch():
            return await self.deliverer.retry_due(RETRY_BATCH)

    @contextlib.asynccontextmanager
    async def _http_for_batch(self) -> AsyncIterator[None]:
        """Webhook retries share a guarded client for one batch; it is closed after it, as
        retries are rare and a client kept open would outlive a rescuer that stops."""
        try:
            yield
        finally:
            client, self._http = self._http, None
            if client is not None:
                await client.aclose()

    async def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            limits = httpx.Limits(max_connections=RETRY_CONNECTIONS,
                                  max_keepalive_connections=RETRY_CONNECTIONS)
            self._http = guarded_client(EgressGuard.from_settings(self.settings), limits=limits)
        return self._http

    async def hand_back_stranded(self) -> tuple[int, int]:
        """Expired leases and ENQUEUED runs whose message is gone; returns how many of each."""
        now = self.clock.now()
        waited = now - timedelta(seconds=self.settings.republish_after)
        candidates = await self.store.runs_rescue_candidates(now, waited, RESCUE_BATCH)
        if not candidates:
            return 0, 0
        live = await self.queue.live([r.run_id for r in candidates])
        expired = lost = 0
        handed: list[JobRun] = []
        for run in candidates:
            if run.run_id in live:
                continue  # the queue still delivers it (or its holder may yet come back)
            requeued = await self.store.run_requeue(run, now)
            if requeued is None:
                continue  # it moved on meanwhile: finished, claimed, cancelled
            handed.append(requeued)
            if run.status is RunStatus.RUNNING:
                expired += 1
                self.metrics.runs_recovered.labels(cause="worker_and_message_lost").inc()
                log.warning("run %s of job %s: attempt %d lost its worker (lease ended %s) "
                            "and its message; handed back", run.run_id, run.job_id, run.attempt,
                            run.lease_expires_at,
                            extra={**run_fields(run), "cause": "worker_and_message_lost"})
            else:
                lost += 1
                self.metrics.runs_recovered.labels(cause="message_lost").inc()
                log.warning("run %s of job %s: enqueued at %s but no message is left; "
                            "published again", run.run_id, run.job_id, run.enqueued_at,
                            extra={**run_fields(run), "cause": "message_lost"})
        await self._publish(handed)
        return expired, lost

    async def prune(self) -> int:
        """Delete history past retention; returns how many rows went."""
        before = self.clock.now() - timedelta(days=self.settings.retention_days)
        total = 0
        for _ in range(PRUNE_MAX_ROUNDS):
            pruned = await self.store.prune(Prune(before=before, limit=PRUNE_BATCH))
            self._count_removed(pruned)
            total += pruned.total
            if pruned.largest < PRUNE_BATCH:
                break
        dead_letters = await self.queue.prune(before)
        self.metrics.retention_removed.labels(kind="dead_letter_messages").inc(dead_letters)
        total += dead_letters
        if total:
            log.info("pruned %d rows of history older than %s", total, before.isoformat())
        return total

    def _count_removed(self, pruned: Pruned) -> None:
        for kind in fields(pruned):
            removed = getattr(pruned, kind.name)
            if removed:
                self.metrics.retention_removed.labels(kind=kind.name).inc(removed)

    async def _publish(self, runs: list[JobRun]) -> None:
        if runs:
            await self.queue.send_many([(r.run_id, run_message(r)) for r in runs])

    def _retrying_in_background(self, task: asyncio.Task[int] | None) -> asyncio.Task[int]:
        """The batch of delivery retries in flight, or a new one when the last has ended."""
        if task is not None and not task.done():
            return task
        if task is not None and not task.cancelled() and task.exception() is not None:
            log.error("delivery retries failed; trying again next time",
                      exc_info=task.exception())
        return asyncio.create_task(self.retry_deliveries(), name="onthedot-delivery-retries")

    async def _housekeeping_if_due(self) -> None:
        now = self.clock.now()
        every = timedelta(seconds=HOUSEKEEPING_EVERY_SECONDS)
        if self._housekept_at is None or now - self._housekept_at >= every:
            self._housekept_at = now
            await self.store.maintain(now)
            await self.prune()

    async def run(self, stop: asyncio.Event) -> None:
        retrying: asyncio.Task[int] | None = None
        while not stop.is_set():
            swept = 0
            try:
                if await self.is_leader():
                    swept = (await self.sweep_runs()).total
                    retrying = self._retrying_in_background(retrying)
                    await self._housekeeping_if_due()
            except Exception:
                log.exception("rescue sweep failed; trying again next time")
            if swept < RESCUE_BATCH:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.settings.rescue_interval)
        if retrying is not None:  # sends in flight record their outcome before the stop
            with contextlib.suppress(Exception):
                await retrying
        try:
            await self.store.members_leave(GROUP, self.member_id)
        except Exception:
            log.warning("could not leave the rescuer group cleanly", exc_info=True)
