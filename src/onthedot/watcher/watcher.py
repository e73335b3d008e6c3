"""The watcher: claims the due PENDING runs of its owned shards (-> ENQUEUED) and publishes them.

Each tick claims every owned shard in one store call (``runs_claim_due_many``: one transaction;
on PostgreSQL one statement fences all the shards and one claims a bucket of each), then
publishes what it claimed.

It ticks at least every ``tick_seconds`` and is woken early when a run due within the tick is
created (in-process by the service, across processes by the store's due notice). Publishing
happens after the claim commits, so a crash in between leaves ENQUEUED runs that were never
published: the watcher that takes the dead one's shards over publishes those again at once,
and the rescuer any other once ``republish_after`` has passed; both only when the queue
confirms they have no message. Duplicate publishes are fenced by the worker's claim.

Shard ownership is kept by a task of its own, so a long dispatch tick never delays it::

    every lease/4:  heartbeat membership -> assigned shards (rendezvous over the live members)
                    -> take or renew their leases, hand the others over -> wake the dispatch
                       when a shard was gained (a dead watcher's shards, taken once its lease
                       lapsed: within lease + lease/4 of its last renewal)

Every due claim carries its shard's lease token; a claim whose token is no longer the shard's
(the lease lapsed while this process was paused, and another watcher took the shard) changes
nothing of that shard (the others are still claimed), and the shard is dropped until a renewal
takes it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from onthedot.config import Settings
from onthedot.domain.clock import Clock
from onthedot.domain.models import JobRun
from onthedot.logs import run_fields
from onthedot.metrics import Metrics
from onthedot.queue.base import Queue, run_message
from onthedot.store.base import DueClaim, ShardLease, Store
from onthedot.watcher.shards import assigned_shards

log = logging.getLogger("onthedot.watcher")

CLAIM_BATCH = 1000  # runs claimed per shard per query; a full batch means "look again at once"
WHOLE_SECOND_MARGIN_SECONDS = 0.002  # wake this long after a whole second (clock granularity)
MEMBER_GROUP = "watcher"
# Renew the shard leases every quarter of a lease: three renewals in a row may fail (a slow
# database, a busy event loop) before the lease lapses, and a survivor notices a dead watcher's
# lapsed lease within a quarter of a lease.
LEASE_RENEW_FRACTION = 0.25


class Watcher:
    def __init__(self, store: Store, queue: Queue, clock: Clock, settings: Settings,
                 metrics: Metrics, member_id: str) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.settings = settings
        self.metrics = metrics
        self.member_id = member_id
        self.leases: dict[int, int] = {}  # owned shard -> the fencing token of its lease
        # Shards taken from a lapsed lease whose recent ENQUEUED runs are still to be checked:
        # their holder may have died between its claim and its publish.
        self._orphaned: set[int] = set()
        self._wake = asyncio.Event()
        self._next_wake: datetime | None = None  # earliest known due instant before next tick

    def wake(self, due_at: datetime | None = None) -> None:
        """A run falls due at ``due_at`` (now when None): wake then, not at the next tick."""
        if due_at is None or due_at <= self.clock.now():
            self._wake.set()
        elif self._next_wake is None or due_at < self._next_wake:
            self._next_wake = due_at

    @property
    def owned(self) -> list[int]:
        return sorted(self.leases)

    async def refresh_shards(self) -> list[int]:
        """Heartbeat membership, then take or renew the leases of our assigned shards (and
        hand over the others); wakes the dispatch when a shard was gained."""
        now = self.clock.now()
        ttl = self.settings.shard_lease_seconds
        members = await self.store.members_heartbeat(MEMBER_GROUP, self.member_id, now, ttl)
        wanted = assigned_shards(self.member_id, members, self.settings.shards)
        leases = await self.store.shard_leases_acquire(self.member_id, wanted, now, ttl)
        gained = [lease for lease in leases if self.leases.get(lease.shard) != lease.token]
        self.leases = {lease.shard: lease.token for lease in leases}
        # (Not after our own lapse: a stalled process still publishes what it claimed.)
        self._orphaned |= {lease.shard for lease in leases
                           if lease.taken_from not in (None, self.member_id)}
        self._report_takeovers(leases)
        if gained:
            self._wake.set()
        return self.owned

    def _report_takeovers(self, leases: list[ShardLease]) -> None:
        """A line and a counter for shards taken from a lapsed lease: another watcher died or
        stalled, or (taken from ourselves) this process stalled for longer than a lease."""
        others: dict[str, list[int]] = {}
        for lease in leases:
            if lease.taken_from is not None:
                others.setdefault(lease.taken_from, []).append(lease.shard)
        mine = others.pop(self.member_id, [])
        if mine:
            log.warning("watcher %s: its own lease of shards %s lapsed (stalled for more than "
                        "%gs); took them back with new tokens", self.member_id, mine,
                        self.settings.shard_lease_seconds)
        for holder, shards in sorted(others.items()):
            self.metrics.shard_takeovers.inc(len(shards))
            log.warning("watcher %s took over shards %s from watcher %s, whose lease lapsed "
                        "(it died or stalled)", self.member_id, shards, holder)

    async def run_once(self) -> int:
        """One tick over every owned shard; returns how many runs were claimed (published or
        skipped)."""
        published = await self._publish_orphans()
        return published + await self._dispatch()

    async def _publish_orphans(self) -> int:
        """Publish again the runs of shards taken from a lapsed lease that their holder claimed
        (ENQUEUED) lately but the queue has no message for: it died between the two. Older ones
        are the rescuer's (``republish_after``). A holder that was only paused may publish them
        too when it wakes; the worker's claim fences the duplicate. Returns how many."""
        checked = set(self._orphaned)
        shards = sorted(checked & self.leases.keys())
        handed: list[JobRun] = []
        if shards:
            now = self.clock.now()
            since = now - timedelta(seconds=self.settings.republish_after)
            runs = await self.store.runs_enqueued_in_shards(shards, since, CLAIM_BATCH)
            live = await self.queue.live([r.run_id for r in runs]) if runs else set()
            for run in runs:
                if run.run_id not in live:
                    requeued = await self.store.run_requeue(run, now)
                    if requeued is not None:  # else it moved on meanwhile
                        handed.append(requeued)
        if handed:
            await self.queue.send_many([(r.run_id, run_message(r)) for r in handed])
            log.warning("watcher %s published %d runs again that the previous holder of their "
                        "shards had claimed but not published", self.member_id, len(handed))
        self._orphaned -= checked  # on a failure above, checked again next tick
        return len(handed)

    async def _dispatch(self) -> int:
        """Claim the due runs of every owned shard in one store call (one transaction), then
        publish them together."""
        leases = dict(self.leases)  # shards handed over or lost since the tick began are out
        if not leases:
            return 0
        now = self.clock.now()
        shards = sorted(leases)
        answers = await self.store.runs_claim_due_many([DueClaim(
            shard=shard, now=now, limit=CLAIM_BATCH,
            misfire_grace_seconds=self.settings.misfire_grace, lease_token=leases[shard])
            for shard in shards])
        runs: list[JobRun] = []
        skipped: list[JobRun] = []
        for shard, claimed in zip(shards, answers, strict=True):
            if claimed.lease_lost:
                self._lease_lost(shard, leases[shard])
            runs += claimed.enqueued
            skipped += claimed.skipped
        if runs:
            await self.queue.send_many([(r.run_id, run_message(r)) for r in runs])
        for run in runs:
            self.metrics.dispatch_lateness.observe(max(0.0, (now - run.scheduled_at)
                                                       .total_seconds()))
        for run in skipped:
            log.info("run %s of job %s skipped: missed by more than %gs (misfire policy skip)",
                     run.run_id, run.job_id, self.settings.misfire_grace,
                     extra=run_fields(run, "missed: misfire policy is skip"))
        return len(runs) + len(skipped)

    def _lease_lost(self, shard: int, token: int) -> None:
        if self.leases.get(shard) == token:
            del self.leases[shard]
        log.warning("watcher %s: shard %d has a new owner (our lease lapsed); stopped "
                    "dispatching it", self.member_id, shard)

    async def run(self, stop: asyncio.Event) -> None:
        keeper = asyncio.create_task(self._keep_leases(stop), name="onthedot-watcher-leases")
        try:
            while not stop.is_set():
                try:
                    self._wake.clear()
                    published = await self.run_once()
                except Exception:
                    log.exception("dispatch tick failed; trying again next tick")
                    published = 0
                if published < CLAIM_BATCH:  # a full batch: more are due, go again at once
                    await self._sleep(stop)
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self.store.shard_leases_release(self.member_id)
                await self.store.members_leave(MEMBER_GROUP, self.member_id)

    async def _keep_leases(self, stop: asyncio.Event) -> None:
        """Renew on a fixed beat (not a fixed pause after each renewal), so a slow renewal does
        not stretch the time a survivor needs to notice a dead watcher."""
        every = self.settings.shard_lease_seconds * LEASE_RENEW_FRACTION
        loop = asyncio.get_running_loop()
        beat = loop.time()
        while not stop.is_set():
            try:
                await self.refresh_shards()
            except Exception:
                log.exception("shard lease renewal failed; trying again in %gs", every)
            beat = max(beat + every, loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=beat - loop.time())

    def _sleep_seconds(self) -> float:
        """Until the next tick, the next known due run, or just past the next whole second,
        whichever comes first: cron occurrences fall on whole seconds, so waking right after
        one keeps their dispatch lateness at milliseconds rather than up to a tick."""
        now = self.clock.now()
        seconds = min(self.settings.tick_seconds,
                      1.0 - now.microsecond / 1_000_000 + WHOLE_SECOND_MARGIN_SECONDS)
        if self._next_wake is not None:
            seconds = min(seconds, max(0.0, (self._next_wake - now).total_seconds()))
            if self._next_wake <= now + timedelta(seconds=seconds):
                self._next_wake = None
        return seconds

    async def _sleep(self, stop: asyncio.Event) -> None:
        seconds = self._sleep_seconds()
        waits = {
            asyncio.ensure_future(self._wake.wait()),
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self.store.due_notice_wait(seconds)),
        }
        try:
            await asyncio.wait(waits, timeout=seconds,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
