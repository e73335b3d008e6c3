"""What a fenced due claim of one shard costs (issue 19 §1): its statements do not grow with the
runs it claims, and a claim that leaves the watermark where it is does not write it. Every
backend: PostgreSQL claims a bucket in one statement; SQLite reads the bucket and marks every
run it enqueues in one more."""

from __future__ import annotations

from datetime import timedelta

from onthedot.domain.models import RunStatus
from onthedot.metrics import DB_STATEMENTS
from onthedot.store.base import Store
from onthedot.store.postgres import PostgresStore

from .test_shard_fencing import claim, due_runs, statuses, token_of
from .test_store import half_past


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
