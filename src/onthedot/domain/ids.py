"""Identifiers: time-sortable ULIDs for jobs, deterministic ids for runs, a stable shard hash."""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from datetime import UTC, datetime, timedelta

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
DEFAULT_SHARDS = 32

_lock = threading.Lock()
_last_ms = -1
_last_random = 0


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_ulid(now: datetime | None = None) -> str:
    """A 26-character ULID; monotonic within one process so ids created in the same
    millisecond still sort in creation order (list pagination relies on this)."""
    global _last_ms, _last_random
    ms = int((now or datetime.now(UTC)).timestamp() * 1000)
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            _last_random += 1
        else:
            _last_ms = ms
            _last_random = int.from_bytes(os.urandom(10), "big") >> 1  # headroom to increment
        rand = _last_random
    return _encode(ms, 10) + _encode(rand & ((1 << 80) - 1), 16)


def ulid_floor(instant: datetime) -> str:
    """The smallest ULID that can have been created at ``instant`` (for created-time filters)."""
    return _encode(int(instant.timestamp() * 1000), 10) + "0" * 16


def run_id_for(job_id: str, scheduled_at: datetime) -> str:
    """The same (job, occurrence) always gets the same run id: inserts and publishes dedupe
    on it. Fixed-width, so within one job run ids sort like scheduled_at."""
    return f"{job_id}-{scheduled_at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}"


def scheduled_at_of(run_id: str) -> datetime:
    """Inverse of run_id_for: lets a time-partitioned store prune to one partition by run id."""
    stamp = run_id.rsplit("-", 1)[1]
    return datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)


def shard_of(job_id: str, shards: int = DEFAULT_SHARDS) -> int:
    """Stable across processes and Python versions (``hash()`` is salted per process)."""
    return zlib.crc32(job_id.encode()) % shards


MAX_FLEXIBLE_WINDOW_SECONDS = 3600  # one hour, as EventBridge Scheduler's longest window
_OFFSET_STEP_MS = 1  # offsets are whole milliseconds: run ids stay short and readable


def flexible_offset(job_id: str, window_seconds: int) -> timedelta:
    """Where inside its flexible window a job fires: a fixed offset in [0, window), from a
    hash of the job id alone. Fixed per job (not per occurrence) so a job keeps its period,
    its runs never reorder when the window is longer than the period, and the nominal
    occurrence is always the run's time minus this offset. SHA-256 rather than the shard's
    CRC-32: the offset must not correlate with the shard, and it spreads evenly."""
    if window_seconds <= 0:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(job_id.encode()).digest()[:8], "big")
    return timedelta(milliseconds=digest % (window_seconds * 1000 // _OFFSET_STEP_MS)
                     * _OFFSET_STEP_MS)


def time_bucket_of(scheduled_at: datetime) -> int:
    """scheduled_at in UTC truncated to the hour, as an integer like 2026062208."""
    t = scheduled_at.astimezone(UTC)
    return ((t.year * 100 + t.month) * 100 + t.day) * 100 + t.hour


def bucket_start(bucket: int) -> datetime:
    hour = bucket % 100
    day = bucket // 100 % 100
    month = bucket // 10_000 % 100
    year = bucket // 1_000_000
    return datetime(year, month, day, hour, tzinfo=UTC)
