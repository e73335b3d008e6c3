"""Shard leases fence the due claim: a watcher whose lease lapsed and was taken by another
cannot dispatch from that shard, however late it comes back (a paused process, a slow GC, a
network partition). Every backend; the lock that makes a takeover wait for a claim in flight
is PostgreSQL's own (SQLite's single write lock serialises the two already)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from onthedot.domain.ids import time_bucket_of
from onthedot.domain.models import JobRun, RunStatus
from onthedot.store.base import DueClaim, DueClaimed, Store
from tests.support.waiting import async_wait_until as wait_until

from .conftest import PG_DSN, StoreEnv
from .factories import make_job, make_run
from .test_store import GRACE_SECONDS, half_past

TTL_SECONDS = 10.0


async def due_runs(store: Store, now: datetime, count: int) -> list[JobRun]:
    """``count`` PENDING runs of a new job, due a second apart up to ``now`` (one shard)."""
    job = make_job(now=now - timedelta(minutes=5))
    runs = [make_run(job, RunStatus.PENDING, scheduled_at=now - timedelta(seconds=i))
            for i in range(count)]
    assert (await store.job_create(job, runs[0])).created
    for run in runs[1:]:
        await store.run_insert(run)
    return runs


async def claim(store: Store, shard: int, now: datetime, token: int | None,
                margin: float = 300.0) -> DueClaimed:
    return await store.runs_claim_due(DueClaim(
        shard=shard, now=now, limit=100, misfire_grace_seconds=GRACE_SECONDS,
        watermark_margin_seconds=margin, lease_token=token))


async def token_of(store: Store, owner: str, shard: int, now: datetime) -> int:
    leases = await store.shard_leases_acquire(owner, [shard], now, TTL_SECONDS)
    assert [lease.shard for lease in leases] == [shard], f"{owner} did not get shard {shard}"
    return leases[0].token


async def statuses(store: Store, runs: list[JobRun]) -> set[RunStatus]:
    got = await store.runs_get_many([r.run_id for r in runs])
    return {got[r.run_id].status for r in runs}


async def test_a_claim_with_a_stale_lease_token_changes_nothing(store: Store) -> None:
    now = half_past()
    runs = await due_runs(store, now, 5)
    shard = runs[0].shard
    await claim(store, shard, now - timedelta(hours=1), None)  # the watermark row exists
    a_token = await token_of(store, "a", shard, now)
    lapsed = now + timedelta(seconds=TTL_SECONDS)  # "a" stopped renewing (paused, partitioned)
    b_token = await token_of(store, "b", shard, lapsed)
    watermark = await store.shard_watermark(shard)

    stale = await claim(store, shard, lapsed, a_token)

    assert stale == DueClaimed(enqueued=[], skipped=[], lease_lost=True)
    assert await statuses(store, runs) == {RunStatus.PENDING}
    assert await store.shard_watermark(shard) == watermark
    fresh = await claim(store, shard, lapsed, b_token)
    assert not fresh.lease_lost
    assert sorted(r.run_id for r in fresh.enqueued) == sorted(r.run_id for r in runs)
    assert await store.shard_owners(lapsed) == {shard: "b"}


async def test_a_lease_token_names_one_unbroken_tenure(store: Store) -> None:
    now = half_past()
    first = await store.shard_leases_acquire("a", [3], now, TTL_SECONDS)
    renewed = await store.shard_leases_acquire("a", [3], now + timedelta(seconds=5), TTL_SECONDS)
    assert renewed == first  # renewed in time: same token, and not a takeover
    assert first[0].taken_from is None

    # "a" stalls past its lease and takes the shard back itself: a new tenure all the same
    late = now + timedelta(seconds=5 + TTL_SECONDS)
    retaken = (await store.shard_leases_acquire("a", [3], late, TTL_SECONDS))[0]
    assert retaken.token > first[0].token
    assert retaken.taken_from == "a"

    # a clean release hands the shard on without a takeover, and tokens never start again
    await store.shard_leases_release("a")
    after_release = (await store.shard_leases_acquire("b", [3], late, TTL_SECONDS))[0]
    assert after_release.token > retaken.token
    assert after_release.taken_from is None

    # "b" dies: "c" takes the lapsed lease, and says from whom
    dead = late + timedelta(seconds=TTL_SECONDS)
    taken = (await store.shard_leases_acquire("c", [3], dead, TTL_SECONDS))[0]
    assert taken.token > after_release.token
    assert taken.taken_from == "b"


@dataclass
class Race:
    """One round: "a" holds the shard with ``a_token`` until ``lapsed``; "b" takes it then."""

    shard: int
    a_token: int
    lapsed: datetime
    order: list[str] = field(default_factory=list)  # what has happened, in order
    a_claims: list[tuple[int, DueClaimed]] = field(default_factory=list)

    async def watcher_a(self, store: Store) -> None:
        for _ in range(20):
            began = len(self.order)  # what had happened when this claim began
            got = await claim(store, self.shard, self.lapsed, self.a_token)
            self.a_claims.append((began, got))
            if got.lease_lost:
                return
            await asyncio.sleep(0)

    async def watcher_b(self, store: Store, name: str) -> list[JobRun]:
        b_token = await token_of(store, name, self.shard, self.lapsed)
        self.order.append("b took over")
        return (await claim(store, self.shard, self.lapsed, b_token)).enqueued


async def test_two_watchers_racing_over_a_shard_never_both_dispatch(store_env: StoreEnv,
                                                                    store: Store) -> None:
    """Watcher "a" claims in a loop while "b" takes the shard over (a's lease lapsed): every run
    is claimed once, and no claim of "a" that began after b's takeover returned claims any."""
    now = half_past()
    a_store, b_store = store, store_env.open()
    for round_ in range(4):
        at = now + timedelta(seconds=round_ * 2 * TTL_SECONDS)
        runs = await due_runs(store, at, 40)
        shard = runs[0].shard
        race = Race(shard, await token_of(a_store, f"a{round_}", shard, at),
                    at + timedelta(seconds=TTL_SECONDS))

        _, b_runs = await asyncio.gather(race.watcher_a(a_store),
                                         race.watcher_b(b_store, f"b{round_}"))

        a_runs = [r for _, got in race.a_claims for r in got.enqueued]
        assert sorted(r.run_id for r in a_runs + b_runs) == sorted(r.run_id for r in runs)
        late = [got for began, got in race.a_claims if began > 0]  # began after the takeover
        assert all(got.lease_lost and not got.enqueued for got in late)
        assert (await claim(a_store, shard, race.lapsed, race.a_token)).lease_lost


@pytest.mark.postgres
async def test_postgres_takeover_waits_for_the_claim_in_flight(pg_env: StoreEnv) -> None:
    """While a's claim transaction is open (here held at its watermark update), b's takeover
    waits for it; once it commits, b owns the shard and a's next claim changes nothing. Without
    the lock, b would take the shard and claim beside a's open transaction."""
    store: Store = pg_env.open()
    await store.migrate()
    now = half_past()
    runs = await due_runs(store, now, 10)
    shard = runs[0].shard
    # the watermark starts hours back, so a's claim ends by moving it (an UPDATE of the row)
    await claim(store, shard, now - timedelta(hours=3), None, margin=3 * 3600.0)
    assert (await store.shard_watermark(shard) or 0) < time_bucket_of(now)
    a_store, b_store = store, pg_env.open()
    a_token = await token_of(a_store, "a", shard, now)
    lapsed = now + timedelta(seconds=TTL_SECONDS)

    async with await psycopg.AsyncConnection.connect(PG_DSN) as holder:
        await holder.execute(sql.SQL("SET search_path TO {}").format(
            sql.Identifier(pg_env.pg_schema or "")))
        await holder.execute("SELECT 1 FROM shard_watermarks WHERE shard = %s FOR UPDATE",
                             (shard,))
        holder_pid = holder.info.backend_pid
        a_claim = asyncio.create_task(claim(a_store, shard, lapsed, a_token))
        a_pid = await blocked_by(holder_pid, "a's claim to reach the watermark update")
        b_take = asyncio.create_task(b_store.shard_leases_acquire("b", [shard], lapsed,
                                                                  TTL_SECONDS))
        await blocked_by(a_pid, "b's takeover to wait for a's claim")
        assert not b_take.done()
        await holder.rollback()

    a_got = await a_claim
    b_leases = await b_take
    assert not a_got.lease_lost
    assert len(a_got.enqueued) == len(runs)
    assert [(lease.shard, lease.taken_from) for lease in b_leases] == [(shard, "a")]
    assert b_leases[0].token > a_token
    assert (await claim(a_store, shard, lapsed, a_token)).lease_lost


async def blocked_by(pid: int, what: str) -> int:
    """The backend that waits for a lock ``pid`` holds (polled from pg_stat_activity)."""
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as watch:
        async def probe() -> Any:
            cur = await watch.execute(
                "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (pid,))
            row = await cur.fetchone()
            return None if row is None else row[0]

        return int(await wait_until(probe, within=10.0, what=what))


async def test_runs_enqueued_in_shards_lists_recent_claims_of_those_shards(store: Store) -> None:
    now = half_past()
    runs = await due_runs(store, now, 3)
    other = await due_runs(store, now, 1)
    shard = runs[0].shard
    await claim(store, shard, now, None)
    await claim(store, other[0].shard, now, None)
    in_shard = [r for r in runs + other if r.shard == shard]

    got = await store.runs_enqueued_in_shards([shard], now, 100)

    assert sorted(r.run_id for r in got) == sorted(r.run_id for r in in_shard)
    assert {r.status for r in got} == {RunStatus.ENQUEUED}
    later = now + timedelta(seconds=1)
    assert await store.runs_enqueued_in_shards([shard], later, 100) == []  # older: the rescuer's
