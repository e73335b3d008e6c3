"""Tokens with ids, scopes, expiry and revocation; reassigning jobs; the active-job quota held
by the inserting transaction (migration 0007). Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from onthedot.domain.errors import ConflictError
from onthedot.domain.models import JobStatus, RunStatus
from onthedot.store.base import ApiToken, JobInsert, JobListQuery, Store

from .conftest import StoreEnv
from .factories import make_job, make_run
from .test_store import half_past


def token(token_id: str = "tok_a", user: str = "alice", scopes: tuple[str, ...] = ("write",),
          expires_in: timedelta | None = None) -> ApiToken:
    now = half_past()
    return ApiToken(token_id=token_id, user_id=user, scopes=scopes, created_at=now,
                    expires_at=None if expires_in is None else now + expires_in)


def item(n: int, user: str = "alice", quota: int | None = 2, key: str | None = None,
         status: JobStatus = JobStatus.SCHEDULED) -> JobInsert:
    now = half_past() + timedelta(microseconds=n)
    job = make_job(now=now, user_id=user, idempotency_key=key, request_hash="h",
                   status=status, next_run_at=now + timedelta(hours=1))
    return JobInsert(job, make_run(job, RunStatus.PENDING, scheduled_at=now + timedelta(hours=1)),
                     max_active=quota)


async def test_a_token_is_found_by_its_hash_until_revoked(store: Store) -> None:
    now = half_past()
    await store.token_create(token(scopes=("read",)), "hash-1")

    found = await store.token_find("hash-1", now)

    assert found is not None
    assert (found.token_id, found.user_id, found.scopes) == ("tok_a", "alice", ("read",))
    assert await store.token_find("other", now) is None
    assert await store.tokens_exist()
    assert await store.token_revoke("tok_a", now)
    assert await store.token_find("hash-1", now) is None
    assert not await store.token_revoke("tok_a", now)  # revoked already
    listed = await store.tokens_list()
    assert [t.token_id for t in listed] == ["tok_a"]
    assert listed[0].revoked_at == now
    assert await store.tokens_exist()  # a revoked token keeps the server in token mode


async def test_an_expired_token_is_not_found(store: Store) -> None:
    now = half_past()
    await store.token_create(token(expires_in=timedelta(minutes=5)), "hash-1")

    assert await store.token_find("hash-1", now + timedelta(minutes=4)) is not None
    assert await store.token_find("hash-1", now + timedelta(minutes=5)) is None


async def test_rotate_replaces_the_secret_and_keeps_the_rest(store: Store) -> None:
    now = half_past()
    await store.token_create(token(scopes=("admin",), expires_in=timedelta(days=1)), "old")

    rotated = await store.token_rotate("tok_a", "new")

    assert rotated is not None
    assert (rotated.token_id, rotated.user_id, rotated.scopes) == ("tok_a", "alice", ("admin",))
    assert rotated.expires_at == now + timedelta(days=1)
    assert await store.token_find("old", now) is None
    assert await store.token_find("new", now) is not None
    assert await store.token_rotate("tok_missing", "x") is None
    await store.token_revoke("tok_a", now)
    assert await store.token_rotate("tok_a", "newer") is None  # revoked stays revoked


async def test_touch_writes_last_used_at_most_once_per_staleness(store: Store) -> None:
    now = half_past()
    await store.token_create(token(), "h")

    await store.token_touch("tok_a", now, stale_before=now - timedelta(minutes=1))
    await store.token_touch("tok_a", now + timedelta(seconds=30),
                            stale_before=now - timedelta(seconds=30))

    assert (await store.tokens_list())[0].last_used_at == now
    later = now + timedelta(minutes=2)
    await store.token_touch("tok_a", later, stale_before=later - timedelta(minutes=1))
    assert (await store.tokens_list())[0].last_used_at == later


async def test_tokens_made_before_ids_get_one(store: Store) -> None:
    await store.token_add("abcdef0123456789", "bob", half_past())

    assert [(t.token_id, t.scopes) for t in await store.tokens_list()] == [
        ("tok_abcdef0123", ("write",))]


async def test_reassign_moves_every_job_in_one_go(store: Store) -> None:
    now = half_past()
    for n in range(3):
        await store.job_create(item(n, user="local").job, None)
    await store.job_create(item(9, user="carol").job, None)

    moved = await store.jobs_reassign("local", "alice", now)

    assert moved == 3
    assert await store.jobs_count_of_user("local") == 0
    assert len(await store.jobs_list(JobListQuery(user_id="alice"))) == 3
    assert await store.jobs_count_of_user("carol") == 1


async def test_reassign_refuses_a_clashing_idempotency_key_and_moves_nothing(
        store: Store) -> None:
    await store.job_create(item(1, user="local", key="k1").job, None)
    await store.job_create(item(2, user="local").job, None)
    await store.job_create(item(3, user="alice", key="k1").job, None)

    with pytest.raises(ConflictError) as raised:
        await store.jobs_reassign("local", "alice", half_past())

    assert raised.value.code == "idempotency_key_clash"
    assert await store.jobs_count_of_user("local") == 2


async def test_the_quota_counts_scheduled_and_paused_jobs_only(store: Store) -> None:
    await store.job_create(item(1, status=JobStatus.PAUSED).job, None)
    await store.job_create(item(2, status=JobStatus.COMPLETED).job, None)
    await store.job_create(item(3, status=JobStatus.CANCELLED).job, None)

    results = await store.jobs_insert_many([item(4), item(5), item(6, user="bob")])

    assert [(r.created, r.over_quota) for r in results] == [
        (True, False), (False, True), (True, False)]
    assert await store.jobs_count_active("alice", 100) == 2
    assert await store.jobs_count_of_user("alice") == 4  # the refused one was not written


async def test_a_replay_is_answered_even_at_the_quota(store: Store) -> None:
    first = item(1, quota=1, key="same")
    assert (await store.jobs_insert_many([first]))[0].created

    again = await store.jobs_insert_many([item(2, quota=1, key="same"), item(3, quota=1)])

    assert again[0].job.job_id == first.job.job_id
    assert not again[0].over_quota
    assert again[1].over_quota


async def test_no_quota_means_no_limit(store: Store) -> None:
    results = await store.jobs_insert_many([item(n, quota=None) for n in range(5)])

    assert all(r.created for r in results)


async def test_concurrent_creates_from_several_processes_never_pass_the_quota(
        store_env: StoreEnv, store: Store) -> None:
    """Count-then-insert in separate transactions would let each process see room for one
    more job; the count under the per-user lock lets exactly ``quota`` in."""
    quota = 5
    processes: list[Store] = [store, *(store_env.open() for _ in range(3))]
    items = [item(n, quota=quota) for n in range(24)]

    results = await asyncio.gather(*(
        processes[n % len(processes)].jobs_insert_many([it]) for n, it in enumerate(items)))

    created = [r[0] for r in results if r[0].created]
    assert len(created) == quota
    assert sum(r[0].over_quota for r in results) == len(items) - quota
    assert await store.jobs_count_active("alice", 100) == quota
