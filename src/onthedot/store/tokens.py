"""What both backends share for tokens and the active-job quota (migration 0007): the token
row codec, which items of an insert the quota lets through, and the error past it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from onthedot.db.timestamps import parse_ts
from onthedot.domain.errors import ConflictError, QuotaError
from onthedot.domain.models import JobStatus
from onthedot.store.base import ApiToken, JobCreated, JobInsert
from onthedot.store.codec import Row
from onthedot.store.insert_many import Key, key_of

# What the active-job quota counts (the jobs_count_active queries say the same in SQL).
ACTIVE = frozenset({JobStatus.SCHEDULED, JobStatus.PAUSED})


def token_from_row(row: Row) -> ApiToken:
    return ApiToken(
        token_id=str(row["token_id"]), user_id=str(row["user_id"]),
        scopes=tuple(str(row["scopes"]).split()),
        created_at=_need(row["created_at"]), expires_at=_dt(row["expires_at"]),
        last_used_at=_dt(row["last_used_at"]), revoked_at=_dt(row["revoked_at"]))


def token_params(token: ApiToken, token_hash: str, stamp: Any) -> dict[str, Any]:
    """``stamp`` turns a datetime into what the backend stores (SQLite: text)."""
    return {"token_hash": token_hash, "user_id": token.user_id, "token_id": token.token_id,
            "scopes": " ".join(token.scopes), "created_at": stamp(token.created_at),
            "expires_at": stamp(token.expires_at)}


def _dt(value: Any) -> datetime | None:
    """Rows from SQLite carry text, rows from PostgreSQL carry datetimes."""
    if value is None or isinstance(value, datetime):
        return value
    return parse_ts(str(value))


def _need(value: Any) -> datetime:
    result = _dt(value)
    if result is None:
        raise ValueError("missing timestamp in row")
    return result


def quota_users(items: Sequence[JobInsert]) -> list[tuple[str, int]]:
    """(user, quota) of every user an insert must count for, sorted (locks in one order)."""
    found: dict[str, int] = {}
    for item in items:
        if item.max_active is not None:
            found[item.job.user_id] = item.max_active
    return sorted(found.items())


def quota_keys(items: Sequence[JobInsert]) -> list[Key]:
    """Idempotency keys of the items under a quota: a held one makes its item a replay."""
    return sorted({k for i in items if i.max_active is not None
                   and (k := key_of(i.job)) is not None})


@dataclass(frozen=True)
class QuotaSplit:
    allowed: list[JobInsert]
    refused: set[str]  # job ids not to insert

    @classmethod
    def of(cls, items: Sequence[JobInsert], active: dict[str, int],
           held: set[Key]) -> QuotaSplit:
        """In request order, each new job takes one of its user's free places; replays (a key
        held already, or by an earlier item of the same call) take none."""
        counts = dict(active)
        seen = set(held)
        allowed: list[JobInsert] = []
        refused: set[str] = set()
        for item in items:
            key = key_of(item.job)
            replay = key is not None and key in seen
            if key is not None:
                seen.add(key)
            user = item.job.user_id
            if item.max_active is None or replay:
                allowed.append(item)
            elif counts.get(user, 0) < item.max_active:
                counts[user] = counts.get(user, 0) + 1
                allowed.append(item)
            else:
                refused.add(item.job.job_id)
                if key is not None:
                    seen.discard(key)  # not written: a later item with its key may take a place
        return cls(allowed=allowed, refused=refused)

    def results(self, items: Sequence[JobInsert],
                inserted: Sequence[JobCreated]) -> list[JobCreated]:
        """``inserted`` (the results of ``allowed``) merged back into the order of ``items``."""
        done = iter(inserted)
        return [JobCreated(job=i.job, created=False, over_quota=True)
                if i.job.job_id in self.refused else next(done) for i in items]


def reassign_clash(clashes: int, from_user: str, to_user: str) -> ConflictError:
    return ConflictError(
        f"{clashes} job(s) of {from_user!r} use an idempotency key that {to_user!r} uses "
        f"already; nothing was moved", code="idempotency_key_clash", field="to",
        expected=f"a user without jobs created with the same Idempotency-Key as {from_user!r}'s")


def active_quota_error(max_active: int) -> QuotaError:
    """The active-job quota is reached: a hard cap, so no Retry-After (no wait frees it; a job
    has to end or be deleted)."""
    return QuotaError(
        f"you have {max_active} active jobs, the most allowed", code="quota_exceeded",
        field=None, expected=f"at most {max_active} scheduled or paused jobs; delete one or "
                             "wait for one to finish",
        retry_after_seconds=None)
