"""The per-shard watermark walk, shared by every SQL store.

A shard's watermark is the earliest hourly bucket that may still hold PENDING runs. A due claim
walks the buckets from the watermark up to the bucket of ``now`` and claims due runs in each::

    start = min(watermark or oldest PENDING bucket, safe)      safe = bucket of now - margin
    for bucket in start .. bucket of now, while the claim has room:
        claim due runs of the bucket                           (the backend's own query)
        bucket full to the limit, or still holding PENDING  -> the new watermark stays <= bucket
    new watermark = min(safe, every bucket that was held)      (never past now - margin)

The walk decides; the backend runs the queries (SQLite synchronously, PostgreSQL
asynchronously) inside the transaction that claims, so a stored watermark only moves with the
claims it was computed from. Moving it is guarded by the generation read at the start: an
insert behind the watermark bumps the generation and the stale advance updates nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from onthedot.domain.ids import bucket_start, time_bucket_of
from onthedot.store.base import WATERMARK_TOUCH_SECONDS, DueClaim

HOUR = timedelta(hours=1)


def is_behind(scheduled_at: datetime, now: datetime) -> bool:
    """Might a walk already have passed this new PENDING run's bucket? Then its touch bumps
    the shard's watermark generation, so a walk that read the old watermark cannot advance."""
    return scheduled_at < now - timedelta(seconds=WATERMARK_TOUCH_SECONDS)


class BucketWalk:
    """One due claim's walk over a shard's hourly buckets (see the module docstring)."""

    def __init__(self, claim: DueClaim, watermark: int | None, oldest_pending: int | None,
                 limit: int) -> None:
        """``watermark`` is the stored bucket (None on a shard's first visit, when the walk
        starts at ``oldest_pending``, the shard's oldest PENDING bucket, however old)."""
        self.claim = claim
        self.remaining = limit
        self._now_bucket = time_bucket_of(claim.now)
        safe = time_bucket_of(claim.now - timedelta(seconds=claim.watermark_margin_seconds))
        self._stored = watermark
        start = watermark if watermark is not None else oldest_pending
        self._start = min(safe if start is None else start, safe)
        self.watermark = safe  # lowered by every bucket that may hold more

    def buckets(self) -> Iterator[int]:
        """The buckets to claim from, in order, while the claim has room left."""
        cursor = bucket_start(self._start)
        while self.remaining > 0 and time_bucket_of(cursor) <= self._now_bucket:
            yield time_bucket_of(cursor)
            cursor += HOUR

    def claimed(self, bucket: int, count: int) -> None:
        """``count`` runs were claimed from ``bucket``; a full claim means it may hold more."""
        self.remaining -= count
        if self.remaining == 0:
            self.hold(bucket)

    def would_pass(self, bucket: int) -> bool:
        """Would the new watermark move past ``bucket``, which the claim did not fill?"""
        return self.remaining > 0 and bucket < self.watermark

    def hold(self, bucket: int) -> None:
        """``bucket`` may still hold PENDING runs: the watermark must not pass it."""
        self.watermark = min(self.watermark, bucket)

    def save(self, generation: int | None) -> tuple[str, dict[str, Any]] | None:
        """The named query, and its parameters, that stores the new watermark: a first visit
        creates the row, a later one advances it only from the generation it read. None when
        the watermark does not advance (most claims: it moves at most once an hour), as the
        advance would then update nothing."""
        if generation is None:
            return "watermark_init", {"shard": self.claim.shard, "bucket": self.watermark}
        if self._stored is not None and self.watermark <= self._stored:
            return None
        return "watermark_advance", {"shard": self.claim.shard, "bucket": self.watermark,
                                     "generation": generation}


# A tick's walks, one per shard whose lease held: (its walk, the watermark's generation read).
Walks = dict[int, tuple[BucketWalk, int | None]]


def tick_walk(claim: DueClaim, row: Any, oldest: int | None,
              limit: int) -> tuple[BucketWalk, int | None]:
    """A shard's walk for a tick, from its ``shards_claim_start`` row (watermark bucket and
    generation, None on a first visit) and, on a first visit, its oldest PENDING bucket."""
    return (BucketWalk(claim, None if row["bucket"] is None else int(row["bucket"]), oldest,
                       limit),
            None if row["generation"] is None else int(row["generation"]))


def tick_rounds(walks: Walks) -> Iterator[dict[int, int]]:
    """The rounds of a tick's claim: each the next bucket of every walk that has one
    ({shard: bucket}), until none has."""
    pending = {shard: walk.buckets() for shard, (walk, _) in walks.items()}
    while pending:
        step = {shard: b for shard, it in pending.items() if (b := next(it, None)) is not None}
        pending = {shard: pending[shard] for shard in step}
        if step:
            yield step
