"""What a fenced due claim costs (issue 19 §1): its statements do not grow with the runs it
claims, and a claim that leaves the watermark where it is does not write it. Every backend:
PostgreSQL claims a bucket in one statement; SQLite reads the bucket and marks every run it
enqueues in one more. A watcher's tick claims all its shards in one call
(``runs_claim_due_many``): one statement fences them all and reads their watermarks, and one
claims (SQLite: reads) a bucket of each, whatever the number of shards; each shard keeps its
own fence, limit and watermark. A lease renewal takes all the watcher's shards in one statement
on both backends."""

from __future__ import annotations

from datetime import datetime, timedelta

from onthedot.domain.ids import time_bucket_of
from onthedot.domain.models import JobRun, RunStatus
from onthedot.metrics import DB_STATEMENTS
from onthedot.store.base import DueClaim, DueClaimed, Store
from onthedot.store.postgres import PostgresStore

from .factories import make_job, make_run
from .test_shard_fencing import claim, due_runs, statuses, token_of
from .test_store import GRACE_SECONDS, half_past


def _store_statements() -> int:
    return sum(n for (_, role), n in DB_STATEMENTS.items() if role == "store")


async def test_a_fenced_claim_costs_the_same_for_three_runs_or_thirty_seven(store: Store) -> None:
    now = half_past()
    runs = await due_runs(store, now, 40)  # due a second apart, up to now, in one shard
    shard = runs[0].shard
    token = await token_of(store, "a", shard, now)
    assert (await claim(store, shard, now - timedelta(seconds=40), token)).enqueued == []

    before = _store_statements()
    few = await claim(store, shard, now - timedelta(seconds=37), token)
    few_cost = _store_statements() - before
    watermark = await store.shard_watermark(shard)
    before = _store_statements()
    many = await claim(store, shard, now, token)
    many_cost = _store_statements() - before

    assert len(few.enqueued) == 3
    assert len(many.enqueued) == 37
    # fence and watermark read; the bucket's claim (SQLite: its read, then one mark for all)
    assert few_cost == many_cost == (2 if isinstance(store, PostgresStore) else 3)
    assert await store.shard_watermark(shard) == watermark
    assert await statuses(store, runs) == {RunStatus.ENQUEUED}
    stored = await store.runs_get_many([r.run_id for r in runs])
    assert {stored[r.run_id].enqueued_at for r in many.enqueued} == {now}


async def _runs_in_distinct_shards(store: Store, now: datetime, counts: list[int],
                                   ) -> list[list[JobRun]]:
    """Due runs of new jobs, ``counts[i]`` of them in the i-th of distinct shards (and no other
    run in those shards)."""
    made: list[list[JobRun]] = []
    while len(made) < len(counts):
        job = make_job(now=now - timedelta(minutes=5))
        runs = [make_run(job, RunStatus.PENDING, scheduled_at=now - timedelta(seconds=i))
                for i in range(counts[len(made)])]
        if runs[0].shard in {group[0].shard for group in made}:
            continue  # never stored
        assert (await store.job_create(job, runs[0])).created
        for run in runs[1:]:
            assert await store.run_insert(run)
        made.append(runs)
    return made


def _claims(shards: list[int], tokens: dict[int, int], now: datetime,
            limit: int = 100) -> list[DueClaim]:
    return [DueClaim(shard=shard, now=now, limit=limit, misfire_grace_seconds=GRACE_SECONDS,
                     lease_token=tokens[shard]) for shard in shards]


async def test_a_tick_claims_every_shard_in_two_statements_and_fences_each(
        store: Store) -> None:
    now = half_past()
    groups = await _runs_in_distinct_shards(store, now, [3, 5, 2, 4])
    shards = [g[0].shard for g in groups]
    leases = await store.shard_leases_acquire("a", shards, now, 10.0)
    tokens = {lease.shard: lease.token for lease in leases}
    await store.runs_claim_due_many(_claims(shards, tokens, now - timedelta(minutes=1)))
    lost = shards[1]
    # Another watcher took one shard after "a"'s lease lapsed.
    later = now + timedelta(seconds=11)
    await store.shard_leases_acquire("b", [lost], later, 10.0)

    before = _store_statements()
    answers = await store.runs_claim_due_many(_claims(shards, tokens, later))
    cost = _store_statements() - before

    assert answers[1] == DueClaimed(enqueued=[], skipped=[], lease_lost=True)
    assert await statuses(store, groups[1]) == {RunStatus.PENDING}
    for group, answer in zip(groups, answers, strict=True):
        if group[0].shard != lost:
            assert not answer.lease_lost
            assert sorted(r.run_id for r in answer.enqueued) == sorted(r.run_id for r in group)
            assert await statuses(store, group) == {RunStatus.ENQUEUED}
    # the fence of the four shards; a bucket of each of the three held (SQLite: read, then one
    # mark for all)
    assert cost == (2 if isinstance(store, PostgresStore) else 3)


async def test_a_tick_walks_each_shard_from_its_own_watermark_within_its_limit(
        store: Store) -> None:
    now = half_past()
    behind, current = await _runs_in_distinct_shards(store, now, [1, 5])
    older = make_run(make_job(job_id=behind[0].job_id), RunStatus.PENDING,
                     scheduled_at=now - timedelta(hours=1))
    assert await store.run_insert(older)  # an hour earlier, in the same shard
    shards = [behind[0].shard, current[0].shard]
    leases = await store.shard_leases_acquire("a", shards, now, 10.0)
    tokens = {lease.shard: lease.token for lease in leases}

    first = await store.runs_claim_due_many(_claims(shards, tokens, now, limit=3))

    # First visits: the first shard's walk starts at its older run's bucket, an hour back.
    assert sorted(r.run_id for r in first[0].enqueued) == sorted([older.run_id, behind[0].run_id])
    assert len(first[1].enqueued) == 3  # its limit; two remain
    assert await store.shard_watermark(shards[0]) == time_bucket_of(now)
    assert await store.shard_watermark(shards[1]) == time_bucket_of(now)
    second = await store.runs_claim_due_many(_claims(shards, tokens, now, limit=3))
    assert second[0].enqueued == []
    assert len(second[1].enqueued) == 2
    assert await statuses(store, current) == {RunStatus.ENQUEUED}


async def test_a_lease_renewal_costs_the_same_for_two_shards_or_thirty_two(store: Store) -> None:
    now = half_past()
    await store.shard_leases_acquire("a", [0, 1], now, 10.0)
    await store.shard_leases_acquire("b", list(range(2, 34)), now, 10.0)

    before = _store_statements()
    two = await store.shard_leases_acquire("a", [0, 1], now + timedelta(seconds=1), 10.0)
    two_cost = _store_statements() - before
    before = _store_statements()
    many = await store.shard_leases_acquire("b", list(range(2, 34)), now + timedelta(seconds=1),
                                            10.0)
    many_cost = _store_statements() - before

    assert [lease.shard for lease in two] == [0, 1]
    assert [lease.shard for lease in many] == list(range(2, 34))
    assert two_cost == many_cost == 4  # hand over, previous holders, take, read back
