"""Per-user limits on creating jobs, kept by the service layer (docs/api.md, "Quotas").

* Active jobs (``ONTHEDOT_MAX_ACTIVE_JOBS``): counted by the store in the transaction that
  inserts (``JobInsert.max_active``) or revives a finished job (``JobSave.max_active``,
  ``run_redrive(max_active=...)``), under one per-user lock, so it holds across processes and
  concurrent requests. A hard cap: its answer carries no Retry-After (waiting alone frees
  nothing; a job must end or be deleted).
* Create rate (``ONTHEDOT_CREATE_RATE_PER_MINUTE``): a token bucket per user, in memory, so per
  process: N API processes let a user create up to N times the rate. A restart forgets it.
* Parse rate (``ONTHEDOT_PARSE_RATE_PER_MINUTE``) and run-now rate
  (``ONTHEDOT_RUN_RATE_PER_MINUTE``): the same kind of bucket for the requests that cost CPU
  time without creating anything (``/v1/parse``, ``/v1/chat``, MCP tools given ``when``) and for
  ``:run``, which makes a worker call out at once. Checked before the work starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from onthedot.domain.errors import QuotaError
from onthedot.store.tokens import active_quota_error

__all__ = ["CreateRate", "ParseRate", "RunRate", "active_quota_error"]

SECONDS_PER_MINUTE = 60.0
MAX_TRACKED_USERS = 10_000  # past this, users whose bucket is full again are forgotten


@dataclass
class _Bucket:
    tokens: float
    at: datetime


class RateLimit:
    """A token bucket per user: ``per_minute`` requests, refilled evenly over a minute, bursts
    up to ``per_minute``. ``per_minute`` 0: no limit. ``what`` names a request in the error
    ("jobs created", "sentences parsed")."""

    what = "requests"
    unit = "requests"

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._buckets: dict[str, _Bucket] = {}

    def take_one(self, user_id: str, now: datetime) -> None:
        """Take one request for the user, or raise ``rate_limited`` (429 with Retry-After)."""
        if self.take(user_id, 1, now) < 1:
            raise self.limited(user_id, now)

    def take(self, user_id: str, wanted: int, now: datetime) -> int:
        """Take up to ``wanted`` creates for the user; the number granted (all of them
        without a limit)."""
        if self.per_minute <= 0 or wanted <= 0:
            return wanted
        bucket = self._refilled(user_id, now)
        granted = min(wanted, int(bucket.tokens))
        bucket.tokens -= granted
        return granted

    def can_take(self, user_id: str, now: datetime) -> bool:
        """True when the user may make one request now (nothing is taken)."""
        return self.per_minute <= 0 or self._refilled(user_id, now).tokens >= 1

    def retry_after(self, user_id: str, now: datetime) -> int:
        """Whole seconds until the user may create one job again (at least 1)."""
        bucket = self._refilled(user_id, now)
        missing = max(0.0, 1.0 - bucket.tokens)
        return max(1, math.ceil(missing * SECONDS_PER_MINUTE / self.per_minute))

    def limited(self, user_id: str, now: datetime) -> QuotaError:
        return QuotaError(
            f"more than {self.per_minute} {self.what} in a minute", code="rate_limited",
            field=None, expected=f"at most {self.per_minute} {self.unit} per minute; try again "
                                 f"after Retry-After seconds",
            retry_after_seconds=self.retry_after(user_id, now))

    def _refilled(self, user_id: str, now: datetime) -> _Bucket:
        bucket = self._buckets.get(user_id)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED_USERS:
                self._forget_full(now)
            bucket = self._buckets[user_id] = _Bucket(tokens=float(self.per_minute), at=now)
            return bucket
        elapsed = max(0.0, (now - bucket.at).total_seconds())
        bucket.tokens = min(float(self.per_minute),
                            bucket.tokens + elapsed * self.per_minute / SECONDS_PER_MINUTE)
        bucket.at = now
        return bucket

    def _forget_full(self, now: datetime) -> None:
        for user_id in list(self._buckets):
            if self._refilled(user_id, now).tokens >= self.per_minute:
                del self._buckets[user_id]


class CreateRate(RateLimit):
    """Jobs created (each job of a batch counts)."""

    what = "jobs created"
    unit = "creates"


class ParseRate(RateLimit):
    """Sentences read by the parser: ``/v1/parse``, ``/v1/chat``, MCP tools given ``when``."""

    what = "sentences parsed"
    unit = "parse or chat requests"


class RunRate(RateLimit):
    """Runs started now (``:run``, MCP ``run_task_now``, chat "run it now")."""

    what = "runs started now"
    unit = "run-now requests"
